// What .ms constants hold, decoded: a tensor's raw bytes (inline or in the .msw beside the model,
// inside the model's folder), weight dequantization as the runtime does it at load time, and the
// constant a rule asks for (dtype, layout permutation).
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"
#include "kiln/support/contained_path.h"
#include "ms_raise_context.h"
#include "weight_coding.h"

namespace kiln::ms {

namespace {

// Moves the axes of a dense tensor: output axis i is input axis perm[i].
std::vector<uint8_t> permuteBytes(const uint8_t* src, size_t elemSize,
                                  const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& perm) {
  size_t rank = dims.size();
  const uint64_t count = checkedElementCount(dims).value_or(0); // a decoded tensor's dims
  std::vector<uint8_t> out(count * elemSize);
  std::vector<int64_t> inStrides(rank, 1), outDims(rank);
  for (size_t i = rank; i-- > 1;)
    inStrides[i - 1] = inStrides[i] * dims[i];
  for (size_t i = 0; i < rank; ++i)
    outDims[i] = dims[perm[i]];
  std::vector<int64_t> index(rank, 0);
  for (uint64_t o = 0; o < count; ++o) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i)
      offset += index[i] * inStrides[perm[i]];
    std::memcpy(out.data() + o * elemSize, src + offset * elemSize, elemSize);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < outDims[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

} // namespace

Expected<RaisingContext::RawBytes> RaisingContext::rawBytes(uint32_t i) {
  const msfb::Tensor* t = tensor(i);
  if (t->data() && t->data()->size()) {
    const uint8_t* p = t->data()->data();
    return RawBytes{p, t->data()->size(), owner_, file_ && file_->contains(p) ? file_ : nullptr};
  }
  if (!t->externalData() || t->externalData()->size() == 0) return RawBytes{nullptr, 0, owner_};
  if (t->externalData()->size() != 1)
    return unsupported("tensor '{}' keeps its data in {} external pieces; only one is read",
                       tensorName(i), t->externalData()->size());
  const msfb::ExternalData* ext = t->externalData()->Get(0);
  if (!ext || !ext->location() || ext->location()->size() == 0)
    return invalid("tensor '{}' has external data without a location", tensorName(i));
  if (baseDir_.empty())
    return invalid(
        "tensor '{}' keeps its data in '{}', but this buffer has no folder to find it in",
        tensorName(i), ext->location()->str());
  std::string location = ext->location()->str();
  auto& side = sideFiles_[location];
  if (!side) {
    const SideFileRule rule{ErrorCode::MsFileInvalid,
                            fmt::format("tensor '{}': external data location", tensorName(i)),
                            "keep the .msw weight file inside the .ms's folder, named by a "
                            "relative path (as kiln and converter_lite write it)"};
    auto contained = resolveInsideFolder(baseDir_, location, rule);
    if (!contained) return contained.status().withContext(name_);
    auto mapped = MappedFile::open(*contained);
    if (!mapped) return mapped.status().withContext(name_ + ": tensor '" + tensorName(i) + "'");
    side = mapped.take();
  }
  int64_t offset = ext->offset(), length = ext->length();
  if (length < 0) length = static_cast<int64_t>(side->size()) - offset;
  if (offset < 0 || length < 0 || uint64_t(offset) + uint64_t(length) > side->size())
    return invalid("tensor '{}': external data [{}, +{}) is outside '{}' ({} bytes)", tensorName(i),
                   ext->offset(), ext->length(), location, side->size());
  return RawBytes{side->data() + offset, size_t(length), side, side.get()};
}

// Weight dequantization as the runtime does it at load time (ms.md §3.2, §3.3).
Expected<std::vector<float>> RaisingContext::dequantize(uint32_t i, const uint8_t* data,
                                                        size_t size, DType dt, int channelAxis) {
  const msfb::Tensor* t = tensor(i);
  auto params = t->quantParams();
  std::vector<int64_t> d = dims(i);
  auto counted = checkedElementCount(d); // checkIndices has bounded the static dims
  if (!counted) return invalid("quantized tensor '{}' has a negative dim", tensorName(i));
  const uint64_t count = *counted;
  auto compress = t->weightQuantCompressType();
  if (t->enableHuffmanCode())
    return unsupported("tensor '{}' is Huffman coded; kiln does not decode that", tensorName(i));
  if (compress != msfb::WeightQuantCompressType_NONE &&
      compress != msfb::WeightQuantCompressType_BITPACKING &&
      compress != msfb::WeightQuantCompressType_INDEXING &&
      compress != msfb::WeightQuantCompressType_SPARSE)
    return unsupported("tensor '{}' uses weight compression {}; kiln reads plain, bit-packed, "
                       "indexed and sparse weights",
                       tensorName(i), msfb::EnumNameWeightQuantCompressType(compress));
  int bits = params->Get(0) ? params->Get(0)->numBits() : 8;
  if (bits < 1 || bits > 16)
    return invalid("tensor '{}': quant numBits {} is outside 1..16", tensorName(i), bits);
  bool packed = (bits >= 1 && bits <= 7) || (bits >= 9 && bits <= 15);
  // Refuse before allocating: the codes and the floats take 8 bytes per element, and plain or
  // bit-packed weights must hold every element (only INDEXING/SPARSE codes expand).
  auto decodedBytes = checkedMul<uint64_t>(count, 8);
  if (!decodedBytes || *decodedBytes > rt::allocationLimitBytes())
    return invalid("quantized tensor '{}' has {} elements, more than this machine can decode",
                   tensorName(i), count);
  if (compress == msfb::WeightQuantCompressType_NONE) {
    const uint64_t need = packed ? (count * uint64_t(bits) + 7) / 8
                                 : count * (dt == DType::Int8    ? 1
                                            : dt == DType::Int16 ? 2
                                                                 : 4);
    if (need > size)
      return invalid("tensor '{}' holds {} bytes, {} quantized elements need {}", tensorName(i),
                     size, count, need);
  }
  // Codes are read in place for plain and bit-packed weights (a 4-bit LLM's weight is never held
  // as int32 codes); INDEXING / SPARSE streams are decoded first.
  std::vector<int32_t> q;
  std::string where = fmt::format("{}: tensor '{}'", name_, tensorName(i));
  if (compress == msfb::WeightQuantCompressType_INDEXING) {
    KILN_ASSIGN_OR_RETURN(q, ms::decodeIndexing(data, size, bits, count, where));
  } else if (compress == msfb::WeightQuantCompressType_SPARSE) {
    std::vector<int32_t> zeroPoints;
    for (size_t c = 0; c < params->size(); ++c)
      zeroPoints.push_back(params->Get(c) ? params->Get(c)->zeroPoint() : 0);
    KILN_ASSIGN_OR_RETURN(q, ms::decodeSparse(data, size, bits, count, zeroPoints, where));
  } else if (packed) {
    if ((count * bits + 7) / 8 > size)
      return invalid("tensor '{}': {} packed {}-bit values need {} bytes, it has {}", tensorName(i),
                     count, bits, (count * bits + 7) / 8, size);
  } else {
    size_t elem = dt == DType::Int8 ? 1 : dt == DType::Int16 ? 2 : 4;
    if (count * elem > size)
      return invalid("tensor '{}' holds {} bytes, {} elements of {} need {}", tensorName(i), size,
                     count, dtypeName(dt), count * elem);
  }
  const size_t elem = dt == DType::Int8 ? 1 : dt == DType::Int16 ? 2 : 4;
  auto codeAt = [&](uint64_t k) -> int32_t {
    if (!q.empty()) return q[k];
    if (packed) {
      // LSB-first bit stream of values biased by 2^(bits-1) (ms.md §3.3).
      uint32_t u = 0;
      for (uint64_t b = 0, bit = k * uint64_t(bits); b < uint64_t(bits); ++b, ++bit)
        u |= uint32_t((data[bit / 8] >> (bit % 8)) & 1u) << b;
      return int32_t(u) - (1 << (bits - 1));
    }
    if (elem == 1) return int8_t(data[k]);
    if (elem == 2) {
      int16_t v;
      std::memcpy(&v, data + 2 * k, 2);
      return v;
    }
    int32_t v;
    std::memcpy(&v, data + 4 * k, 4);
    return v;
  };
  std::vector<float> out(count);
  size_t nParams = params->size();
  auto param = [&](size_t c) -> const msfb::QuantParam* { return params->Get(c); };
  if (nParams == 1) {
    double scale = param(0)->scale();
    int zp = param(0)->zeroPoint();
    for (uint64_t k = 0; k < count; ++k)
      out[k] = float((codeAt(k) - zp) * scale);
    return out;
  }
  // Per channel: the axis whose size equals the number of params.
  int axis = channelAxis;
  if (axis < 0 || axis >= int(d.size()) || uint64_t(d[axis]) != nParams) {
    axis = -1;
    for (size_t a = 0; a < d.size(); ++a)
      if (uint64_t(d[a]) == nParams) {
        axis = int(a);
        break;
      }
  }
  if (axis < 0)
    return unsupported("tensor '{}' has {} quant params, which match no axis of dims [{}]",
                       tensorName(i), nParams, fmt::join(d, ","));
  uint64_t inner = 1;
  for (size_t a = axis + 1; a < d.size(); ++a)
    inner *= uint64_t(d[a]);
  for (uint64_t k = 0; k < count; ++k) {
    const msfb::QuantParam* p = param((k / inner) % uint64_t(d[axis]));
    if (!p) return invalid("tensor '{}' has a null quant param", tensorName(i));
    float varCorr = p->varCorr();
    if (!(varCorr >= 0 && varCorr <= 10)) varCorr = 1;
    out[k] = float((codeAt(k) - p->zeroPoint()) * p->scale()) * varCorr + p->meanCorr();
  }
  return out;
}

Expected<Tensor> RaisingContext::decodeConstant(uint32_t i, const ConstRequest& request) {
  const msfb::Tensor* t = tensor(i);
  auto dt = ms::dtypeOfTypeId(t->dataType());
  if (!dt)
    return unsupported("tensor '{}' has data type {} ({}), which kiln does not read", tensorName(i),
                       t->dataType(),
                       msfb::EnumNameTypeId(static_cast<msfb::TypeId>(t->dataType())));
  std::vector<int64_t> d = dims(i);
  for (int64_t x : d)
    if (x < 0) return invalid("constant tensor '{}' has a negative dim", tensorName(i));
  KILN_ASSIGN_OR_RETURN(RawBytes raw, rawBytes(i));
  const uint8_t* data = raw.data;
  size_t size = raw.size;
  const uint64_t count = checkedElementCount(d).value_or(0); // bounded by checkIndices

  Tensor result;
  bool quantized = t->quantParams() && t->quantParams()->size() > 0 &&
                   (*dt == DType::Int8 || *dt == DType::Int16 || *dt == DType::Int32) && node_ &&
                   (node_->quantType() == msfb::QuantType_QUANT_WEIGHT ||
                    node_->quantType() == msfb::QuantType_WeightQuant);
  if (quantized) {
    KILN_ASSIGN_OR_RETURN(auto values, dequantize(i, data, size, *dt, request.channelAxis));
    result = Tensor::fromValues(DType::Float32, d, values);
  } else {
    auto need = dtypeStorageBytes(*dt, count);
    if (!need || *need > size)
      return invalid("tensor '{}' holds {} bytes; {} elements of {} need {}", tensorName(i), size,
                     count, dtypeName(*dt), need ? *need : 0);
    auto buffer = Buffer::borrowed(raw.owner, data, *need, raw.file);
    result = Tensor(*dt, d, std::move(buffer));
  }
  // Float constants follow the consumer's float type (the runtime casts constant weights to the
  // kernel's type the same way).
  if (request.floatType && isFloatingPoint(result.dtype()) &&
      result.dtype() != *request.floatType &&
      (result.dtype() == DType::Float16 || result.dtype() == DType::Float32)) {
    std::vector<float> wide(count);
    if (result.dtype() == DType::Float16) {
      auto half = result.copyValues<uint16_t>();
      for (uint64_t k = 0; k < count; ++k)
        wide[k] = rt::halfToFloat(half[k]);
    } else {
      wide = result.copyValues<float>();
    }
    if (*request.floatType == DType::Float16) {
      std::vector<uint16_t> narrow(count);
      for (uint64_t k = 0; k < count; ++k)
        narrow[k] = rt::floatToHalf(wide[k]);
      result = Tensor::fromValues(DType::Float16, d, narrow);
    } else if (*request.floatType == DType::Float32) {
      result = Tensor::fromValues(DType::Float32, d, wide);
    }
  }
  if (!request.perm.empty()) {
    if (request.perm.size() != d.size())
      return nodeUnsupported(fmt::format("weight '{}' has rank {}, expected {}", tensorName(i),
                                         d.size(), request.perm.size()));
    size_t elem = dtypeBits(result.dtype()) / 8;
    std::vector<int64_t> outDims;
    for (int64_t p : request.perm)
      outDims.push_back(d[p]);
    result = Tensor(result.dtype(), outDims,
                    Buffer::owned(permuteBytes(result.data(), elem, d, request.perm)));
  }
  return result;
}

} // namespace kiln::ms
