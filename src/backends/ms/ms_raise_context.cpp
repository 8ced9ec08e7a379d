// .ms reader: verifies a MindSpore Lite FlatBuffer and rebuilds it as ONNX-semantics IR (NHWC ops
// wrapped in Transposes, KHWC weights as OIHW constants, quantized/float16 weights decoded, fused
// activations as their own nodes) so the existing executor and passes run it unchanged. Each .ms
// node is raised by its family's rule (ops/<family>_raise.cpp), found by PrimitiveType name.
#include "ms_raise_context.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/ms_reader.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/validate.h"
#include "kiln/support/contained_path.h"
#include "kiln/support/checked_math.h"
#include "weight_coding.h"

namespace kiln::ms {

namespace {

// Opset of the rebuilt graph: axes/splits/pads travel as inputs, as the .ms ops carry them.
constexpr int64_t kOpset = 18;

const char* const kInvalidHint = "pass a complete .ms file written by converter_lite or kiln";
const char* const kUnsupportedHint =
    "convert the model again with kiln, or report the op so the reader learns it";

std::string primitiveName(msfb::PrimitiveType type) {
  const char* name = msfb::EnumNamePrimitiveType(type);
  if (name && *name) return name;
  return fmt::format("PrimitiveType#{}", static_cast<int>(type));
}

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

lowering::RuleTable<MsRaisingRule>& msRaisingRules() {
  static lowering::RuleTable<MsRaisingRule> table(".ms raising");
  return table;
}

std::string RaiseConstRequest::key() const {
  return fmt::format("{}|{}|{}", floatType ? int(*floatType) : -1, fmt::join(perm, ","),
                     channelAxis);
}

Status RaisingContext::invalidStatus(std::string message) {
  return Status(ErrorCode::MsFileInvalid, name_ + ": " + message, kInvalidHint);
}

Status RaisingContext::unsupportedStatus(std::string message) {
  return Status(ErrorCode::MsReadUnsupported, name_ + ": " + message, kUnsupportedHint);
}

std::string RaisingContext::tensorName(uint32_t i) const {
  const msfb::Tensor* t = tensor(i);
  return t->name() && t->name()->size() ? t->name()->str() : fmt::format("tensor_{}", i);
}

Status RaisingContext::checkIndices() {
  if (!meta_->allTensors()) return invalid("the model has no tensor list (allTensors)");
  if (!meta_->nodes()) return invalid("the model has no node list");
  // A graph without inputs (all constant) is kept: the runtime refuses it, kiln can still run it.
  if (!meta_->outputIndex() || meta_->outputIndex()->size() == 0)
    return invalid("the model has no graph outputs (outputIndex)");
  uint32_t count = meta_->allTensors()->size();
  for (uint32_t i = 0; i < count; ++i) {
    if (!meta_->allTensors()->Get(i)) return invalid("tensor {} is null", i);
    // Static dims must multiply to a size a tensor can have: a count that wraps would pass every
    // later size comparison and let kernels index past the data.
    std::vector<int64_t> known; // -1 is a dynamic dim
    for (int64_t d : dims(i))
      if (d >= 0) known.push_back(d);
    const DType dtype = ms::dtypeOfTypeId(tensor(i)->dataType()).value_or(DType::Undefined);
    auto extent =
        checkTensorExtent(known, dtypeBits(dtype), dtypeName(dtype), ErrorCode::MsFileInvalid,
                          fmt::format("{}: tensor '{}'", name_, tensorName(i)), kInvalidHint);
    if (!extent) return extent.status();
  }
  auto check = [&](const flatbuffers::Vector<uint32_t>* v, const std::string& where) -> Status {
    if (v)
      for (uint32_t i : *v)
        if (i >= count)
          return invalid("{} names tensor {}, but the model has {} tensors", where, i, count);
    return Status::ok();
  };
  KILN_TRY(check(meta_->inputIndex(), "inputIndex"));
  KILN_TRY(check(meta_->outputIndex(), "outputIndex"));
  for (uint32_t n = 0; n < meta_->nodes()->size(); ++n) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (!node) return invalid("node {} is null", n);
    std::string where = fmt::format("node '{}'", node->name() ? node->name()->str() : "");
    if (!node->primitive() || !node->primitive()->value())
      return invalid("{} has no primitive", where);
    KILN_TRY(check(node->inputIndex(), where + " inputIndex"));
    KILN_TRY(check(node->outputIndex(), where + " outputIndex"));
  }
  return Status::ok();
}

std::string RaisingContext::fresh(const std::string& base) {
  std::string candidate = base;
  while (reserved_.count(candidate) || g_->lookupValue(candidate))
    candidate = fmt::format("{}_{}", base, ++counter_);
  reserved_.insert(candidate);
  return candidate;
}

Node* RaisingContext::emitNode(const std::string& op, const std::vector<Value*>& inputs,
                               size_t outputs, Node::AttributeList attrs) {
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs; ++i)
    names.push_back(fresh(nodeName_.empty() ? "ms" : nodeName_ + "/" + op));
  Node* n = g_->appendNode(op, inputs, names);
  for (Value* out : n->outputs())
    ownValues_.insert(out);
  n->setName(fresh(nodeName_.empty() ? op : nodeName_ + "/" + op));
  for (auto& [k, v] : attrs)
    n->setAttribute(k, std::move(v));
  n->addLocation(Location{nodeName_, opName_});
  return n;
}

Value* RaisingContext::constant(Tensor t, const std::string& base) {
  return g_->addInitializer(fresh(nodeName_.empty() ? base : nodeName_ + "/" + base), std::move(t));
}

Value* RaisingContext::scalar(float v, DType dt) {
  if (dt == DType::Float16)
    return constant(
        Tensor::fromValues(DType::Float16, {}, std::vector<uint16_t>{rt::floatToHalf(v)}));
  if (dt == DType::Float64)
    return constant(Tensor::fromValues(DType::Float64, {}, std::vector<double>{v}));
  return constant(Tensor::fromValues(DType::Float32, {}, std::vector<float>{v}));
}

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
                                 : count * (dt == DType::Int8 ? 1 : dt == DType::Int16 ? 2 : 4);
    if (need > size)
      return invalid("tensor '{}' holds {} bytes, {} quantized elements need {}", tensorName(i),
                     size, count, need);
  }
  std::vector<int32_t> q(count);
  std::string where = fmt::format("{}: tensor '{}'", name_, tensorName(i));
  if (compress == msfb::WeightQuantCompressType_INDEXING) {
    KILN_ASSIGN_OR_RETURN(q, ms::decodeIndexing(data, size, bits, count, where));
  } else if (compress == msfb::WeightQuantCompressType_SPARSE) {
    std::vector<int32_t> zeroPoints;
    for (size_t c = 0; c < params->size(); ++c)
      zeroPoints.push_back(params->Get(c) ? params->Get(c)->zeroPoint() : 0);
    KILN_ASSIGN_OR_RETURN(q, ms::decodeSparse(data, size, bits, count, zeroPoints, where));
  } else if (packed) {
    // LSB-first bit stream of values biased by 2^(bits-1) (ms.md §3.3).
    if ((count * bits + 7) / 8 > size)
      return invalid("tensor '{}': {} packed {}-bit values need {} bytes, it has {}", tensorName(i),
                     count, bits, (count * bits + 7) / 8, size);
    uint64_t bit = 0;
    for (uint64_t k = 0; k < count; ++k) {
      uint32_t u = 0;
      for (int b = 0; b < bits; ++b, ++bit)
        u |= uint32_t((data[bit / 8] >> (bit % 8)) & 1u) << b;
      q[k] = int32_t(u) - (1 << (bits - 1));
    }
  } else {
    size_t elem = dt == DType::Int8 ? 1 : dt == DType::Int16 ? 2 : 4;
    if (count * elem > size)
      return invalid("tensor '{}' holds {} bytes, {} elements of {} need {}", tensorName(i), size,
                     count, dtypeName(dt), count * elem);
    for (uint64_t k = 0; k < count; ++k) {
      if (elem == 1)
        q[k] = int8_t(data[k]);
      else if (elem == 2) {
        int16_t v;
        std::memcpy(&v, data + 2 * k, 2);
        q[k] = v;
      } else {
        int32_t v;
        std::memcpy(&v, data + 4 * k, 4);
        q[k] = v;
      }
    }
  }
  std::vector<float> out(count);
  size_t nParams = params->size();
  auto param = [&](size_t c) -> const msfb::QuantParam* { return params->Get(c); };
  if (nParams == 1) {
    double scale = param(0)->scale();
    int zp = param(0)->zeroPoint();
    for (uint64_t k = 0; k < count; ++k)
      out[k] = float((q[k] - zp) * scale);
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
    out[k] = float((q[k] - p->zeroPoint()) * p->scale()) * varCorr + p->meanCorr();
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

Expected<Value*> RaisingContext::in(size_t pos, ConstRequest request) {
  if (pos >= inputCount())
    return nodeUnsupported(fmt::format("expects an input #{}, it has {}", pos, inputCount()));
  uint32_t i = inIndex(pos);
  if (isConstant(i)) {
    if (!request.floatType) request.floatType = floatType_;
    auto key = std::make_pair(i, request.key());
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(i, request));
    std::string name = tensorName(i);
    Value* v = g_->addInitializer(g_->lookupValue(name) ? fresh(name) : name, std::move(t));
    constants_[key] = v;
    return v;
  }
  auto it = values_.find(i);
  if (it == values_.end())
    return invalid("node '{}' reads tensor '{}' before any node produces it", nodeName_,
                   tensorName(i));
  if (!request.perm.empty()) return transpose(it->second, request.perm);
  return it->second;
}

Expected<std::vector<int64_t>> RaisingContext::constInts(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {}));
  if (!isInteger(t.dtype()))
    return nodeUnsupported(
        fmt::format("input #{} must be an integer constant, it is {}", pos, dtypeName(t.dtype())));
  return rt::toInt64Vector(t);
}

Expected<std::vector<float>> RaisingContext::constFloats(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {DType::Float32, {}, -1}));
  std::vector<float> out;
  for (uint64_t k = 0; k < t.elementCount(); ++k)
    out.push_back(float(rt::elementAsDouble(t, k)));
  return out;
}

Expected<Value*> RaisingContext::int64Input(size_t pos) {
  if (pos < inputCount() && isConstant(inIndex(pos))) {
    KILN_ASSIGN_OR_RETURN(auto v, constInts(pos));
    std::vector<int64_t> d = dims(inIndex(pos));
    return constant(Tensor::fromValues(DType::Int64, d, v), "ms_ints");
  }
  KILN_ASSIGN_OR_RETURN(Value * v, in(pos));
  auto dt = ms::dtypeOfTypeId(tensor(inIndex(pos))->dataType());
  if (dt == DType::Int64) return v;
  return emit("Cast", {v}, {{"to", Attribute::ofInt(dtypeToOnnx(DType::Int64))}});
}

Status RaisingContext::bind(size_t outPos, Value* v) {
  if (!node_->outputIndex() || outPos >= node_->outputIndex()->size())
    return nodeUnsupported(fmt::format("produces {} outputs, the file lists {}", outPos + 1,
                                       node_->outputIndex() ? node_->outputIndex()->size() : 0));
  uint32_t i = node_->outputIndex()->Get(outPos);
  if (values_.count(i) || isConstant(i))
    return invalid("tensor '{}' is produced twice (node '{}')", tensorName(i), nodeName_);
  // Values that are not this node's own (an input passed through, a constant) get an Identity so
  // the output keeps its own name.
  if (!ownValues_.count(v) || bound_.count(v)) v = emit("Identity", {v});
  bound_.insert(v);
  std::string name = tensorName(i);
  std::string final = g_->lookupValue(name) ? fresh(name) : name;
  reserved_.insert(final);
  if (v->name() != final) g_->renameValue(v, final);
  if (auto dt = ms::dtypeOfTypeId(tensor(i)->dataType())) v->setDType(*dt);
  values_[i] = v;
  return Status::ok();
}

Expected<Value*> RaisingContext::activation(Value* x, msfb::ActivationType type, float alpha,
                                            float minVal, float maxVal, bool approximate) {
  DType ft = floatType();
  switch (type) {
  case msfb::ActivationType_NO_ACTIVATION:
    return x;
  case msfb::ActivationType_RELU:
    return emit("Relu", {x});
  case msfb::ActivationType_RELU6:
    return emit("Clip", {x, scalar(0, ft), scalar(6, ft)});
  case msfb::ActivationType_RELU1:
    return emit("Clip", {x, scalar(-1, ft), scalar(1, ft)});
  case msfb::ActivationType_SIGMOID:
    return emit("Sigmoid", {x});
  case msfb::ActivationType_TANH:
    return emit("Tanh", {x});
  case msfb::ActivationType_ABS:
    return emit("Abs", {x});
  case msfb::ActivationType_SOFTPLUS:
    return emit("Softplus", {x});
  case msfb::ActivationType_SOFTSIGN:
    return emit("Softsign", {x});
  case msfb::ActivationType_SIGN:
    return emit("Sign", {x});
  case msfb::ActivationType_SELU:
    return emit("Selu", {x});
  case msfb::ActivationType_LEAKY_RELU:
    return emit("LeakyRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_ELU:
    return emit("Elu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_THRESHOLDRELU:
    return emit("ThresholdedRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_HSWISH:
    return emit("HardSwish", {x});
  case msfb::ActivationType_HSIGMOID:
    return emit("HardSigmoid", {x},
                {{"alpha", Attribute::ofFloat(1.0f / 6)}, {"beta", Attribute::ofFloat(0.5f)}});
  case msfb::ActivationType_HARD_TANH:
    return emit("Clip", {x, scalar(minVal, ft), scalar(maxVal, ft)});
  case msfb::ActivationType_SWISH:
    return emit("Mul", {x, emit("Sigmoid", {x})});
  case msfb::ActivationType_GELU:
  case msfb::ActivationType_FAST_GELU: {
    Value* inner;
    if (approximate || type == msfb::ActivationType_FAST_GELU) {
      // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
      Value* cube = emit("Mul", {emit("Mul", {x, x}), x});
      Value* sum = emit("Add", {x, emit("Mul", {cube, scalar(0.044715f, ft)})});
      inner = emit("Tanh", {emit("Mul", {sum, scalar(0.7978845608f, ft)})});
    } else {
      inner = emit("Erf", {emit("Mul", {x, scalar(0.70710678118f, ft)})});
    }
    Value* onePlus = emit("Add", {inner, scalar(1, ft)});
    return emit("Mul", {emit("Mul", {x, scalar(0.5f, ft)}), onePlus});
  }
  default:
    return nodeUnsupported(
        fmt::format("activation type {} ({})", msfb::EnumNameActivationType(type), int(type)));
  }
}

// --- one-op raisings shared by several families ---

Status RaisingContext::binary(const std::string& op, msfb::ActivationType act) {
  KILN_ASSIGN_OR_RETURN(Value * a, in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, in(1));
  Value* y = emit(op, {a, b});
  KILN_ASSIGN_OR_RETURN(y, activation(y, act));
  return bind(0, y);
}

Status RaisingContext::unary(const std::string& op, Node::AttributeList attrs) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  return bind(0, emit(op, {x}, std::move(attrs)));
}

Status RaisingContext::readOp(const msfb::Primitive* p) {
  const MsRaisingRule* rule = msRaisingRules().find(primitiveName(p->value_type()));
  if (!rule) return nodeUnsupported("this op type has no reader");
  return rule->raise(*this, *p);
}

Status RaisingContext::readNode(const msfb::CNode* node) {
  node_ = node;
  ownValues_.clear();
  nodeName_ = node->name() ? node->name()->str() : "";
  opName_ = primitiveName(node->primitive()->value_type());
  auto qt = node->quantType();
  if (qt == msfb::QuantType_QUANT_ALL || qt == msfb::QuantType_AwareTraining ||
      qt == msfb::QuantType_PostTraining || qt == msfb::QuantType_QUANT_DYNAMIC)
    return nodeUnsupported(fmt::format("quant type {} (int8 kernels) is not read; only float and "
                                       "weight-quantized nodes are",
                                       msfb::EnumNameQuantType(qt)));
  // The node's float type: that of its first float input that is not a constant.
  floatType_ = DType::Float32;
  for (size_t k = 0; k < inputCount(); ++k) {
    uint32_t i = inIndex(k);
    auto dt = ms::dtypeOfTypeId(tensor(i)->dataType());
    if (!isConstant(i) && dt &&
        (*dt == DType::Float16 || *dt == DType::Float32 || *dt == DType::Float64)) {
      floatType_ = *dt;
      break;
    }
  }
  if (!node->outputIndex() || node->outputIndex()->size() == 0)
    return invalid("node '{}' has no outputs", nodeName_);
  return readOp(node->primitive());
}

Expected<Model> RaisingContext::read() {
  KILN_TRY(checkIndices());
  model_.producerName = "MindSpore Lite";
  model_.producerVersion = meta_->version() ? meta_->version()->str() : "";
  model_.opsets = {OpsetImport{"", kOpset}};
  model_.sourcePath = name_;
  model_.graph = std::make_shared<Graph>(meta_->name() ? meta_->name()->str() : "ms_graph");
  g_ = model_.graph.get();

  uint32_t count = meta_->allTensors()->size();
  for (uint32_t i = 0; i < count; ++i)
    reserved_.insert(tensorName(i));

  std::vector<uint32_t> order;
  auto subgraphs = meta_->subGraph();
  // Control flow: subgraph parameters are neither constants nor produced by a node.
  std::set<uint32_t> params;
  if (subgraphs)
    for (uint32_t s = 1; s < subgraphs->size(); ++s) {
      const msfb::SubGraph* sub = subgraphs->Get(s);
      if (!sub) return invalid("subgraph {} is null", s);
      if (sub->inputIndices())
        for (uint32_t i : *sub->inputIndices()) {
          if (i >= count) return invalid("subgraph {} names tensor {}", s, i);
          params.insert(i);
        }
      if (sub->nodeIndices())
        for (uint32_t n : *sub->nodeIndices())
          if (n >= meta_->nodes()->size())
            return invalid("subgraph {} names node {}, but the model has {} nodes", s, n,
                           meta_->nodes()->size());
    }
  if (subgraphs && subgraphs->size() >= 1 && subgraphs->Get(0) &&
      subgraphs->Get(0)->nodeIndices()) {
    for (uint32_t n : *subgraphs->Get(0)->nodeIndices()) {
      if (n >= meta_->nodes()->size())
        return invalid("subgraph 0 names node {}, but the model has {} nodes", n,
                       meta_->nodes()->size());
      order.push_back(n);
    }
  } else {
    for (uint32_t n = 0; n < meta_->nodes()->size(); ++n)
      order.push_back(n);
  }

  // Which tensors nodes produce; the rest that are not graph inputs are constants.
  std::set<uint32_t> produced, inputs;
  if (meta_->inputIndex()) inputs.insert(meta_->inputIndex()->begin(), meta_->inputIndex()->end());
  // Every node of every subgraph: a subgraph's nodes produce tensors too.
  std::vector<uint32_t> all = order;
  if (subgraphs && subgraphs->size() > 1) {
    all.clear();
    for (uint32_t n = 0; n < meta_->nodes()->size(); ++n)
      all.push_back(n);
  }
  for (uint32_t n : all) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (node->outputIndex())
      for (uint32_t o : *node->outputIndex())
        if (!produced.insert(o).second)
          return invalid("tensor '{}' is produced by more than one node", tensorName(o));
  }
  for (uint32_t n : all) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (node->inputIndex())
      for (uint32_t i : *node->inputIndex())
        if (!produced.count(i) && !inputs.count(i) && !params.count(i)) constant_.insert(i);
  }

  std::vector<uint32_t> inputOrder;
  if (meta_->inputIndex())
    inputOrder.assign(meta_->inputIndex()->begin(), meta_->inputIndex()->end());
  for (uint32_t i : inputOrder) {
    if (values_.count(i)) continue;
    const msfb::Tensor* t = tensor(i);
    auto dt = ms::dtypeOfTypeId(t->dataType());
    if (!dt)
      return unsupported("graph input '{}' has data type {}, which kiln does not read",
                         tensorName(i), t->dataType());
    if (produced.count(i)) return invalid("graph input '{}' is produced by a node", tensorName(i));
    std::vector<Dim> shape;
    for (int64_t d : dims(i))
      shape.push_back(d >= 0 ? Dim::known(d) : Dim());
    // An input that carries data has a default value (an ONNX initializer-backed input).
    Value* v;
    if ((t->data() && t->data()->size()) || t->externalData()) {
      KILN_ASSIGN_OR_RETURN(Tensor init, decodeConstant(i, {}));
      v = g_->addInitializer(tensorName(i), std::move(init));
    } else {
      v = g_->addValue(tensorName(i));
    }
    v->setType(ValueType::tensor(*dt, Shape(shape)));
    g_->addInput(v);
    values_[i] = v;
  }

  for (uint32_t n : order)
    KILN_TRY(readNode(meta_->nodes()->Get(n)));
  node_ = nullptr;
  nodeName_.clear();
  opName_.clear();

  for (uint32_t o : *meta_->outputIndex()) {
    Value* v = nullptr;
    if (auto it = values_.find(o); it != values_.end())
      v = it->second;
    else if (isConstant(o) || (!produced.count(o) && tensor(o)->data())) {
      KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(o, {}));
      v = g_->addInitializer(fresh(tensorName(o)), std::move(t));
    }
    if (!v) return invalid("graph output '{}' is produced by no node", tensorName(o));
    if (auto dt = ms::dtypeOfTypeId(tensor(o)->dataType()); dt && v->dtype() == DType::Undefined)
      v->setDType(*dt);
    g_->addOutput(v);
  }
  return std::move(model_);
}

Expected<Value*> RaisingContext::valueOf(uint32_t t) {
  if (auto it = values_.find(t); it != values_.end()) return it->second;
  if (!isConstant(t))
    return invalid("node '{}' reads tensor '{}' before any node produces it", nodeName_,
                   tensorName(t));
  auto key = std::make_pair(t, RaiseConstRequest{}.key());
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(Tensor value, decodeConstant(t, {}));
  Value* v = g_->addInitializer(fresh(tensorName(t)), std::move(value));
  constants_[key] = v;
  return v;
}

Expected<std::shared_ptr<Graph>> RaisingContext::readSubgraph(int64_t index,
                                                              const std::vector<Value*>& bound,
                                                              size_t dropTail,
                                                              const std::vector<uint32_t>& outputs) {
  const msfb::SubGraph* sub = subgraph(index);
  if (!sub || index == 0)
    return invalid("node '{}' names subgraph {}, which the model does not have", nodeName_, index);
  // What reading another subgraph changes, put back afterwards.
  Graph* savedGraph = g_;
  auto savedConstants = std::move(constants_);
  const msfb::CNode* savedNode = node_;
  auto savedOwn = ownValues_;
  std::string savedName = nodeName_, savedOp = opName_;
  DType savedFloat = floatType_;
  auto restore = [&] {
    g_ = savedGraph;
    constants_ = std::move(savedConstants);
    node_ = savedNode;
    ownValues_ = std::move(savedOwn);
    nodeName_ = std::move(savedName);
    opName_ = std::move(savedOp);
    floatType_ = savedFloat;
  };
  auto g = std::make_shared<Graph>(sub->name() ? sub->name()->str() : fmt::format("subgraph_{}",
                                                                                   index),
                                   g_);
  g_ = g.get();
  constants_.clear();
  Status status = [&]() -> Status {
    if (sub->inputIndices())
      for (uint32_t k = 0; k < sub->inputIndices()->size(); ++k) {
        uint32_t t = sub->inputIndices()->Get(k);
        if (k < bound.size() && bound[k]) {
          values_[t] = bound[k];
          continue;
        }
        std::vector<Dim> shape;
        for (int64_t d : dims(t))
          shape.push_back(d >= 0 ? Dim::known(d) : Dim());
        Value* v = g_->addValue(fresh(tensorName(t)));
        if (auto dt = ms::dtypeOfTypeId(tensor(t)->dataType()))
          v->setType(ValueType::tensor(*dt, Shape(shape)));
        g_->addInput(v);
        values_[t] = v;
      }
    size_t count = sub->nodeIndices() ? sub->nodeIndices()->size() : 0;
    if (dropTail > count) return invalid("subgraph {} has too few nodes", index);
    for (size_t i = 0; i + dropTail < count; ++i)
      KILN_TRY(readNode(meta_->nodes()->Get(sub->nodeIndices()->Get(i))));
    for (uint32_t t : outputs) {
      KILN_ASSIGN_OR_RETURN(Value * v, valueOf(t));
      // ONNX subgraph results are values the subgraph defines, each once.
      if (v->owner() != g_ || std::count(g_->outputs().begin(), g_->outputs().end(), v)) {
        Node* copy = g_->appendNode("Identity", {v}, {fresh(tensorName(t) + "_result")});
        copy->output(0)->setType(v->type());
        v = copy->output(0);
      }
      g_->addOutput(v);
    }
    return Status::ok();
  }();
  restore();
  if (!status) return status;
  return g;
}

namespace {

Expected<Model> readBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                           const MappedFile* file, const std::string& displayName,
                           const std::string& baseDir) {
  if (!data || size < 8 || !msfb::MetaGraphBufferHasIdentifier(data))
    return Status(ErrorCode::MsFileInvalid,
                  fmt::format("{}: not a .ms file (no MSL2 identifier at bytes 4..7, {} bytes)",
                              displayName, size),
                  kInvalidHint);
  flatbuffers::Verifier verifier(data, size, 2048, 100000000);
  if (!msfb::VerifyMetaGraphBuffer(verifier))
    return Status(
        ErrorCode::MsFileInvalid,
        fmt::format("{}: not a valid .ms file (FlatBuffers verification failed, {} bytes)",
                    displayName, size),
        kInvalidHint);
  RaisingContext reader(msfb::GetMetaGraph(data), std::move(owner), file, displayName, baseDir);
  KILN_ASSIGN_OR_RETURN(Model model, reader.read());
  // The raised graph feeds the same executor and passes as an imported one: the same checks. A
  // node they refuse makes the file inconsistent, whoever wrote it.
  if (Status valid = ops::validateGraph(*model.graph, model); !valid)
    return Status(ErrorCode::MsFileInvalid, displayName + ": " + valid.message(), kInvalidHint);
  return model;
}

} // namespace

} // namespace kiln::ms

namespace kiln {

Expected<Model> readMsBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                             const std::string& displayName, const std::string& baseDir) {
  return ms::readBuffer(data, size, std::move(owner), nullptr, displayName, baseDir);
}

Expected<Model> readMsFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const MappedFile* raw = file.get();
  return ms::readBuffer(raw->data(), raw->size(), file, raw, path, dir);
}

} // namespace kiln
