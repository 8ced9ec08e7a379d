// .ms reader: verifies a MindSpore Lite FlatBuffer and rebuilds it as ONNX-semantics IR (NHWC ops
// wrapped in Transposes, KHWC weights as OIHW constants, quantized/float16 weights decoded, fused
// activations as their own nodes) so the existing executor and passes run it unchanged.
#include "kiln/backends/ms_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/runtime/tensor_util.h"
#include "kiln/support/mapped_file.h"
#include "kiln_proto/ms_model_generated.h"
#include "ms_type_ids.h"
#include "weight_coding.h"

namespace kiln {

namespace {

namespace fb = kiln::msfb;

// Opset of the rebuilt graph: axes/splits/pads travel as inputs, as the .ms ops carry them.
constexpr int64_t kOpset = 18;

const char* const kInvalidHint = "pass a complete .ms file written by converter_lite or kiln";
const char* const kUnsupportedHint =
    "convert the model again with kiln, or report the op so the reader learns it";

std::string primitiveName(fb::PrimitiveType type) {
  const char* name = fb::EnumNamePrimitiveType(type);
  if (name && *name) return name;
  return fmt::format("PrimitiveType#{}", static_cast<int>(type));
}

template <typename T> std::vector<int64_t> longs(const flatbuffers::Vector<T>* v) {
  std::vector<int64_t> out;
  if (v)
    for (auto x : *v)
      out.push_back(static_cast<int64_t>(x));
  return out;
}

// Moves the axes of a dense tensor: output axis i is input axis perm[i].
std::vector<uint8_t> permuteBytes(const uint8_t* src, size_t elemSize,
                                  const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& perm) {
  size_t rank = dims.size();
  uint64_t count = 1;
  for (int64_t d : dims)
    count *= static_cast<uint64_t>(d);
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

// How a consumer wants a float constant: its element type, and an optional axis permutation
// (KHWC → OIHW for conv weights).
struct ConstRequest {
  std::optional<DType> floatType; // widen/narrow float16/float32 constants to this
  std::vector<int64_t> perm;      // empty: keep the layout
  int channelAxis = -1;           // per-channel dequant axis of the stored layout (-1: guess)
  std::string key() const {
    return fmt::format("{}|{}|{}", floatType ? int(*floatType) : -1, fmt::join(perm, ","),
                       channelAxis);
  }
};

class Reader {
 public:
  Reader(const fb::MetaGraph* meta, std::shared_ptr<const void> owner, const MappedFile* file,
         std::string displayName, std::string baseDir)
      : meta_(meta), owner_(std::move(owner)), file_(file), name_(std::move(displayName)),
        baseDir_(std::move(baseDir)) {}

  Expected<Model> read();

 private:
  // --- errors ---
  template <typename... Args> Status invalid(fmt::format_string<Args...> f, Args&&... args) {
    return Status(ErrorCode::MsFileInvalid,
                  name_ + ": " + fmt::format(f, std::forward<Args>(args)...), kInvalidHint);
  }
  template <typename... Args> Status unsupported(fmt::format_string<Args...> f, Args&&... args) {
    return Status(ErrorCode::MsReadUnsupported,
                  name_ + ": " + fmt::format(f, std::forward<Args>(args)...), kUnsupportedHint);
  }
  Status nodeUnsupported(const std::string& what) {
    return unsupported("node '{}' ({}): {}", nodeName_, opName_, what);
  }

  // --- tensors ---
  const fb::Tensor* tensor(uint32_t i) const { return meta_->allTensors()->Get(i); }
  std::string tensorName(uint32_t i) const {
    const fb::Tensor* t = tensor(i);
    return t->name() && t->name()->size() ? t->name()->str() : fmt::format("tensor_{}", i);
  }
  std::vector<int64_t> dims(uint32_t i) const { return longs(tensor(i)->dims()); }
  Status checkIndices();
  // A constant's stored bytes and what keeps them alive (the model, or its .msw side file).
  struct RawBytes {
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> owner;
    const MappedFile* file = nullptr;
  };
  Expected<RawBytes> rawBytes(uint32_t i);
  Expected<Tensor> decodeConstant(uint32_t i, const ConstRequest& request);
  Expected<std::vector<float>> dequantize(uint32_t i, const uint8_t* data, size_t size, DType dt,
                                          int channelAxis);
  bool isConstant(uint32_t i) const { return constant_.count(i) != 0; }

  // --- values of the node being read ---
  Expected<Value*> in(size_t pos, ConstRequest request = {});
  size_t inputCount() const { return node_->inputIndex() ? node_->inputIndex()->size() : 0; }
  uint32_t inIndex(size_t pos) const { return node_->inputIndex()->Get(pos); }
  Expected<std::vector<int64_t>> constInts(size_t pos);
  Expected<std::vector<float>> constFloats(size_t pos);
  Expected<Value*> int64Input(size_t pos); // index-like input as int64 (constant or Cast)
  DType floatType() const { return floatType_; }

  // --- building ---
  std::string fresh(const std::string& base);
  Node* emitNode(const std::string& op, const std::vector<Value*>& inputs, size_t outputs,
                 Node::AttributeList attrs = {});
  Value* emit(const std::string& op, const std::vector<Value*>& inputs,
              Node::AttributeList attrs = {}) {
    return emitNode(op, inputs, 1, std::move(attrs))->output(0);
  }
  Value* constant(Tensor t, const std::string& base = "ms_const");
  Value* ints(const std::vector<int64_t>& v) {
    return constant(Tensor::fromValues(DType::Int64, {int64_t(v.size())}, v), "ms_ints");
  }
  Value* scalar(float v, DType dt);
  Value* transpose(Value* x, const std::vector<int64_t>& perm) {
    return emit("Transpose", {x}, {{"perm", Attribute::ofInts(perm)}});
  }
  Value* toNchw(Value* x) { return transpose(x, {0, 3, 1, 2}); }
  Value* toNhwc(Value* x) { return transpose(x, {0, 2, 3, 1}); }
  Expected<Value*> activation(Value* x, fb::ActivationType type, float alpha = 0, float minVal = 0,
                              float maxVal = 0, bool approximate = false);
  Status bind(size_t outPos, Value* v);

  // --- ops ---
  Status readNode(const fb::CNode* node);
  Status readOp(const fb::Primitive* p);
  Status conv(const fb::Conv2DFusion* c);
  Status convTranspose(const fb::Conv2dTransposeFusion* c);
  template <typename Pool> Status pool(const Pool* p, bool isMax);
  Status matmul(const fb::MatMulFusion* m);
  Status fullConnection(const fb::FullConnection* f);
  Status binary(const std::string& op, fb::ActivationType act);
  Status unary(const std::string& op, Node::AttributeList attrs = {});
  Status reduce(const fb::ReduceFusion* r);
  Status stridedSlice(const fb::StridedSlice* s);
  Status resize(const fb::Resize* r);

  const fb::MetaGraph* meta_;
  std::shared_ptr<const void> owner_;
  const MappedFile* file_;
  std::string name_;
  std::string baseDir_;
  Model model_;
  Graph* g_ = nullptr;
  std::set<std::string> reserved_;
  uint64_t counter_ = 0;
  std::unordered_map<uint32_t, Value*> values_; // tensor index → value (inputs, produced)
  std::set<const Value*> ownValues_;            // values made by the node being read
  std::set<const Value*> bound_;                // values that already carry a tensor's name
  std::set<uint32_t> constant_;
  std::map<std::pair<uint32_t, std::string>, Value*> constants_; // decoded constants by request
  std::map<std::string, std::shared_ptr<const MappedFile>> sideFiles_;
  // The node being read.
  const fb::CNode* node_ = nullptr;
  std::string nodeName_;
  std::string opName_;
  DType floatType_ = DType::Float32;
};

Status Reader::checkIndices() {
  if (!meta_->allTensors()) return invalid("the model has no tensor list (allTensors)");
  if (!meta_->nodes()) return invalid("the model has no node list");
  // A graph without inputs (all constant) is kept: the runtime refuses it, kiln can still run it.
  if (!meta_->outputIndex() || meta_->outputIndex()->size() == 0)
    return invalid("the model has no graph outputs (outputIndex)");
  uint32_t count = meta_->allTensors()->size();
  for (uint32_t i = 0; i < count; ++i)
    if (!meta_->allTensors()->Get(i)) return invalid("tensor {} is null", i);
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
    const fb::CNode* node = meta_->nodes()->Get(n);
    if (!node) return invalid("node {} is null", n);
    std::string where = fmt::format("node '{}'", node->name() ? node->name()->str() : "");
    if (!node->primitive() || !node->primitive()->value())
      return invalid("{} has no primitive", where);
    KILN_TRY(check(node->inputIndex(), where + " inputIndex"));
    KILN_TRY(check(node->outputIndex(), where + " outputIndex"));
  }
  return Status::ok();
}

std::string Reader::fresh(const std::string& base) {
  std::string candidate = base;
  while (reserved_.count(candidate) || g_->lookupValue(candidate))
    candidate = fmt::format("{}_{}", base, ++counter_);
  reserved_.insert(candidate);
  return candidate;
}

Node* Reader::emitNode(const std::string& op, const std::vector<Value*>& inputs, size_t outputs,
                       Node::AttributeList attrs) {
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

Value* Reader::constant(Tensor t, const std::string& base) {
  return g_->addInitializer(fresh(nodeName_.empty() ? base : nodeName_ + "/" + base), std::move(t));
}

Value* Reader::scalar(float v, DType dt) {
  if (dt == DType::Float16)
    return constant(
        Tensor::fromValues(DType::Float16, {}, std::vector<uint16_t>{rt::floatToHalf(v)}));
  if (dt == DType::Float64)
    return constant(Tensor::fromValues(DType::Float64, {}, std::vector<double>{v}));
  return constant(Tensor::fromValues(DType::Float32, {}, std::vector<float>{v}));
}

Expected<Reader::RawBytes> Reader::rawBytes(uint32_t i) {
  const fb::Tensor* t = tensor(i);
  if (t->data() && t->data()->size()) {
    const uint8_t* p = t->data()->data();
    return RawBytes{p, t->data()->size(), owner_, file_ && file_->contains(p) ? file_ : nullptr};
  }
  if (!t->externalData() || t->externalData()->size() == 0) return RawBytes{nullptr, 0, owner_};
  if (t->externalData()->size() != 1)
    return unsupported("tensor '{}' keeps its data in {} external pieces; only one is read",
                       tensorName(i), t->externalData()->size());
  const fb::ExternalData* ext = t->externalData()->Get(0);
  if (!ext || !ext->location() || ext->location()->size() == 0)
    return invalid("tensor '{}' has external data without a location", tensorName(i));
  if (baseDir_.empty())
    return invalid(
        "tensor '{}' keeps its data in '{}', but this buffer has no folder to find it in",
        tensorName(i), ext->location()->str());
  std::string location = ext->location()->str();
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    return invalid("tensor '{}': external data location '{}' leaves the model's folder",
                   tensorName(i), location);
  auto& side = sideFiles_[location];
  if (!side) {
    auto mapped = MappedFile::open((std::filesystem::path(baseDir_) / rel).string());
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
Expected<std::vector<float>> Reader::dequantize(uint32_t i, const uint8_t* data, size_t size,
                                                DType dt, int channelAxis) {
  const fb::Tensor* t = tensor(i);
  auto params = t->quantParams();
  std::vector<int64_t> d = dims(i);
  uint64_t count = 1;
  for (int64_t x : d)
    count *= uint64_t(x);
  auto compress = t->weightQuantCompressType();
  if (t->enableHuffmanCode())
    return unsupported("tensor '{}' is Huffman coded; kiln does not decode that", tensorName(i));
  if (compress != fb::WeightQuantCompressType_NONE &&
      compress != fb::WeightQuantCompressType_BITPACKING &&
      compress != fb::WeightQuantCompressType_INDEXING &&
      compress != fb::WeightQuantCompressType_SPARSE)
    return unsupported("tensor '{}' uses weight compression {}; kiln reads plain, bit-packed, "
                       "indexed and sparse weights",
                       tensorName(i), fb::EnumNameWeightQuantCompressType(compress));
  int bits = params->Get(0) ? params->Get(0)->numBits() : 8;
  if (bits < 1 || bits > 16)
    return invalid("tensor '{}': quant numBits {} is outside 1..16", tensorName(i), bits);
  std::vector<int32_t> q(count);
  bool packed = (bits >= 1 && bits <= 7) || (bits >= 9 && bits <= 15);
  std::string where = fmt::format("{}: tensor '{}'", name_, tensorName(i));
  if (compress == fb::WeightQuantCompressType_INDEXING) {
    KILN_ASSIGN_OR_RETURN(q, ms::decodeIndexing(data, size, bits, count, where));
  } else if (compress == fb::WeightQuantCompressType_SPARSE) {
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
  auto param = [&](size_t c) -> const fb::QuantParam* { return params->Get(c); };
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
    const fb::QuantParam* p = param((k / inner) % uint64_t(d[axis]));
    if (!p) return invalid("tensor '{}' has a null quant param", tensorName(i));
    float varCorr = p->varCorr();
    if (!(varCorr >= 0 && varCorr <= 10)) varCorr = 1;
    out[k] = float((q[k] - p->zeroPoint()) * p->scale()) * varCorr + p->meanCorr();
  }
  return out;
}

Expected<Tensor> Reader::decodeConstant(uint32_t i, const ConstRequest& request) {
  const fb::Tensor* t = tensor(i);
  auto dt = ms::dtypeOfTypeId(t->dataType());
  if (!dt)
    return unsupported("tensor '{}' has data type {} ({}), which kiln does not read", tensorName(i),
                       t->dataType(), fb::EnumNameTypeId(static_cast<fb::TypeId>(t->dataType())));
  std::vector<int64_t> d = dims(i);
  for (int64_t x : d)
    if (x < 0) return invalid("constant tensor '{}' has a negative dim", tensorName(i));
  KILN_ASSIGN_OR_RETURN(RawBytes raw, rawBytes(i));
  const uint8_t* data = raw.data;
  size_t size = raw.size;
  uint64_t count = 1;
  for (int64_t x : d)
    count *= uint64_t(x);

  Tensor result;
  bool quantized = t->quantParams() && t->quantParams()->size() > 0 &&
                   (*dt == DType::Int8 || *dt == DType::Int16 || *dt == DType::Int32) && node_ &&
                   (node_->quantType() == fb::QuantType_QUANT_WEIGHT ||
                    node_->quantType() == fb::QuantType_WeightQuant);
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

Expected<Value*> Reader::in(size_t pos, ConstRequest request) {
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

Expected<std::vector<int64_t>> Reader::constInts(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {}));
  if (!isInteger(t.dtype()))
    return nodeUnsupported(
        fmt::format("input #{} must be an integer constant, it is {}", pos, dtypeName(t.dtype())));
  return rt::toInt64Vector(t);
}

Expected<std::vector<float>> Reader::constFloats(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {DType::Float32, {}, -1}));
  std::vector<float> out;
  for (uint64_t k = 0; k < t.elementCount(); ++k)
    out.push_back(float(rt::elementAsDouble(t, k)));
  return out;
}

Expected<Value*> Reader::int64Input(size_t pos) {
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

Status Reader::bind(size_t outPos, Value* v) {
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

Expected<Value*> Reader::activation(Value* x, fb::ActivationType type, float alpha, float minVal,
                                    float maxVal, bool approximate) {
  DType ft = floatType();
  switch (type) {
  case fb::ActivationType_NO_ACTIVATION:
    return x;
  case fb::ActivationType_RELU:
    return emit("Relu", {x});
  case fb::ActivationType_RELU6:
    return emit("Clip", {x, scalar(0, ft), scalar(6, ft)});
  case fb::ActivationType_RELU1:
    return emit("Clip", {x, scalar(-1, ft), scalar(1, ft)});
  case fb::ActivationType_SIGMOID:
    return emit("Sigmoid", {x});
  case fb::ActivationType_TANH:
    return emit("Tanh", {x});
  case fb::ActivationType_ABS:
    return emit("Abs", {x});
  case fb::ActivationType_SOFTPLUS:
    return emit("Softplus", {x});
  case fb::ActivationType_SOFTSIGN:
    return emit("Softsign", {x});
  case fb::ActivationType_SIGN:
    return emit("Sign", {x});
  case fb::ActivationType_SELU:
    return emit("Selu", {x});
  case fb::ActivationType_LEAKY_RELU:
    return emit("LeakyRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case fb::ActivationType_ELU:
    return emit("Elu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case fb::ActivationType_THRESHOLDRELU:
    return emit("ThresholdedRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case fb::ActivationType_HSWISH:
    return emit("HardSwish", {x});
  case fb::ActivationType_HSIGMOID:
    return emit("HardSigmoid", {x},
                {{"alpha", Attribute::ofFloat(1.0f / 6)}, {"beta", Attribute::ofFloat(0.5f)}});
  case fb::ActivationType_HARD_TANH:
    return emit("Clip", {x, scalar(minVal, ft), scalar(maxVal, ft)});
  case fb::ActivationType_SWISH:
    return emit("Mul", {x, emit("Sigmoid", {x})});
  case fb::ActivationType_GELU:
  case fb::ActivationType_FAST_GELU: {
    Value* inner;
    if (approximate || type == fb::ActivationType_FAST_GELU) {
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
        fmt::format("activation type {} ({})", fb::EnumNameActivationType(type), int(type)));
  }
}

// --- op readers ---

Status Reader::conv(const fb::Conv2DFusion* c) {
  if (inputCount() < 2) return nodeUnsupported("needs input and weight");
  auto wd = dims(inIndex(1));
  if (wd.size() != 4) return nodeUnsupported("weight must be 4-D [C_out, KH, KW, C_in/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  // KHWC → OIHW; a non-constant weight gets a Transpose.
  KILN_ASSIGN_OR_RETURN(Value * w, in(1, {std::nullopt, {0, 3, 1, 2}, 0}));
  std::vector<Value*> ins{toNchw(x), w};
  if (inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, in(2));
    ins.push_back(b);
  }
  auto stride = longs(c->stride()), dilation = longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? wd[0] : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = longs(c->pad_list());
  if (c->pad_mode() == fb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == fb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  Value* y = emit("Conv", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, activation(toNhwc(y), c->activation_type()));
  return bind(0, y);
}

Status Reader::convTranspose(const fb::Conv2dTransposeFusion* c) {
  if (inputCount() < 2) return nodeUnsupported("needs input and weight");
  auto wd = dims(inIndex(1));
  if (wd.size() != 4) return nodeUnsupported("weight must be 4-D [C_in, KH, KW, C_out/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  KILN_ASSIGN_OR_RETURN(Value * w, in(1, {std::nullopt, {0, 3, 1, 2}, 3}));
  std::vector<Value*> ins{toNchw(x), w};
  if (inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, in(2));
    ins.push_back(b);
  }
  auto stride = longs(c->stride()), dilation = longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? 1 : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = longs(c->pad_list());
  if (c->pad_mode() == fb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == fb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  auto outPad = longs(c->output_paddings());
  if (outPad.size() >= 2 && (outPad[0] || outPad[1]))
    attrs.push_back({"output_padding", Attribute::ofInts({outPad[0], outPad[1]})});
  Value* y = emit("ConvTranspose", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, activation(toNhwc(y), c->activation_type()));
  return bind(0, y);
}

template <typename Pool> Status Reader::pool(const Pool* p, bool isMax) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  Value* nchw = toNchw(x);
  Value* y;
  if (p->global()) {
    y = emit(isMax ? "GlobalMaxPool" : "GlobalAveragePool", {nchw});
  } else {
    auto kernel = longs(p->kernel_size()), strides = longs(p->strides());
    if (kernel.size() < 2) return nodeUnsupported("kernel_size needs [h, w]");
    if (strides.size() < 2) strides = {1, 1};
    Node::AttributeList attrs{{"kernel_shape", Attribute::ofInts({kernel[0], kernel[1]})},
                              {"strides", Attribute::ofInts({strides[0], strides[1]})}};
    auto pads = longs(p->pad());
    if (p->pad_mode() == fb::PadMode_SAME)
      attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
    else if (p->pad_mode() == fb::PadMode_PAD && pads.size() >= 4)
      attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
    if (p->round_mode() == fb::RoundMode_CEIL) attrs.push_back({"ceil_mode", Attribute::ofInt(1)});
    y = emit(isMax ? "MaxPool" : "AveragePool", {nchw}, std::move(attrs));
  }
  KILN_ASSIGN_OR_RETURN(y, activation(toNhwc(y), p->activation_type()));
  return bind(0, y);
}

Status Reader::matmul(const fb::MatMulFusion* m) {
  KILN_ASSIGN_OR_RETURN(Value * a, in(0));
  int channel = -1;
  if (inputCount() > 1) {
    auto bd = dims(inIndex(1));
    if (bd.size() >= 2) channel = int(m->transpose_b() ? bd.size() - 2 : bd.size() - 1);
  }
  KILN_ASSIGN_OR_RETURN(Value * b, in(1, {std::nullopt, {}, channel}));
  // Plain 2-D products are a Gemm, which reads a stored [N, K] weight in place (transB).
  size_t rankA = dims(inIndex(0)).size(), rankB = inputCount() > 1 ? dims(inIndex(1)).size() : 0;
  size_t rankBias = inputCount() > 2 ? dims(inIndex(2)).size() : 1;
  if (rankA == 2 && rankB == 2 && rankBias == 1) {
    std::vector<Value*> ins{a, b};
    if (inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * bias, in(2));
      ins.push_back(bias);
    }
    Value* y = emit("Gemm", ins,
                    {{"transA", Attribute::ofInt(m->transpose_a() ? 1 : 0)},
                     {"transB", Attribute::ofInt(m->transpose_b() ? 1 : 0)}});
    KILN_ASSIGN_OR_RETURN(y, activation(y, m->activation_type()));
    return bind(0, y);
  }
  auto swapLast = [&](Value* v, uint32_t index) -> Expected<Value*> {
    auto d = dims(index);
    if (d.size() < 2) return nodeUnsupported("transposed operand needs rank >= 2");
    std::vector<int64_t> perm(d.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[d.size() - 1], perm[d.size() - 2]);
    return transpose(v, perm);
  };
  if (m->transpose_a()) {
    KILN_ASSIGN_OR_RETURN(a, swapLast(a, inIndex(0)));
  }
  if (m->transpose_b()) {
    KILN_ASSIGN_OR_RETURN(b, swapLast(b, inIndex(1)));
  }
  Value* y = emit("MatMul", {a, b});
  if (inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * bias, in(2));
    y = emit("Add", {y, bias});
  }
  KILN_ASSIGN_OR_RETURN(y, activation(y, m->activation_type()));
  return bind(0, y);
}

Status Reader::fullConnection(const fb::FullConnection* f) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  auto wd = dims(inIndex(1));
  if (wd.size() != 2) return nodeUnsupported("weight must be 2-D [N, K]");
  KILN_ASSIGN_OR_RETURN(Value * w, in(1, {std::nullopt, {}, 0}));
  // Flatten the input to [M, K], multiply by Wᵀ, then restore the leading dims.
  Value* flat = f->use_axis() ? emit("Flatten", {x}, {{"axis", Attribute::ofInt(f->axis())}})
                              : emit("Reshape", {x, ints({-1, wd[1]})});
  std::vector<Value*> ins{flat, w};
  if (f->has_bias() && inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, in(2));
    ins.push_back(b);
  }
  Value* y = emit("Gemm", ins, {{"transB", Attribute::ofInt(1)}});
  auto od = dims(node_->outputIndex()->Get(0));
  bool staticOut =
      !od.empty() && std::all_of(od.begin(), od.end(), [](int64_t v) { return v > 0; });
  if (staticOut && od.size() != 2) y = emit("Reshape", {y, ints(od)});
  KILN_ASSIGN_OR_RETURN(y, activation(y, f->activation_type()));
  return bind(0, y);
}

Status Reader::binary(const std::string& op, fb::ActivationType act) {
  KILN_ASSIGN_OR_RETURN(Value * a, in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, in(1));
  Value* y = emit(op, {a, b});
  KILN_ASSIGN_OR_RETURN(y, activation(y, act));
  return bind(0, y);
}

Status Reader::unary(const std::string& op, Node::AttributeList attrs) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  return bind(0, emit(op, {x}, std::move(attrs)));
}

Status Reader::reduce(const fb::ReduceFusion* r) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  std::vector<int64_t> axes;
  Value* dynamicAxes = nullptr; // axes computed at run time (a graph input, a Shape chain)
  if (inputCount() > 1) {
    if (isConstant(inIndex(1))) {
      KILN_ASSIGN_OR_RETURN(axes, constInts(1));
    } else {
      if (r->reduce_to_end()) return nodeUnsupported("reduce_to_end needs constant axes");
      KILN_ASSIGN_OR_RETURN(dynamicAxes, int64Input(1));
      dynamicAxes = emit("Reshape", {dynamicAxes, ints({-1})});
    }
  }
  if (r->reduce_to_end()) {
    if (axes.size() != 1) return nodeUnsupported("reduce_to_end needs one start axis");
    auto rank = dims(inIndex(0)).size();
    if (rank == 0) return nodeUnsupported("reduce_to_end needs the input rank");
    int64_t start = axes[0] < 0 ? axes[0] + int64_t(rank) : axes[0];
    axes.clear();
    for (int64_t a = start; a < int64_t(rank); ++a)
      axes.push_back(a);
  }
  std::string op;
  bool abs = false;
  switch (r->mode()) {
  case fb::ReduceMode_ReduceMean:
    op = "ReduceMean";
    break;
  case fb::ReduceMode_ReduceMax:
    op = "ReduceMax";
    break;
  case fb::ReduceMode_ReduceMin:
    op = "ReduceMin";
    break;
  case fb::ReduceMode_ReduceProd:
    op = "ReduceProd";
    break;
  case fb::ReduceMode_ReduceSum:
    op = "ReduceSum";
    break;
  case fb::ReduceMode_ReduceSumSquare:
    op = "ReduceSumSquare";
    break;
  case fb::ReduceMode_ReduceASum:
    op = "ReduceSum", abs = true;
    break;
  case fb::ReduceMode_ReduceL2:
    op = "ReduceSumSquare";
    break;
  default:
    return nodeUnsupported(fmt::format("reduce mode {}", fb::EnumNameReduceMode(r->mode())));
  }
  if (abs) x = emit("Abs", {x});
  std::vector<Value*> ins{x};
  if (dynamicAxes)
    ins.push_back(dynamicAxes); // an empty axes tensor reduces every axis, as in .ms
  else if (!axes.empty())
    ins.push_back(ints(axes));
  Value* y = emit(op, ins, {{"keepdims", Attribute::ofInt(r->keep_dims() ? 1 : 0)}});
  if (r->mode() == fb::ReduceMode_ReduceL2) y = emit("Sqrt", {y});
  return bind(0, y);
}

Status Reader::stridedSlice(const fb::StridedSlice* s) {
  if (s->ellipsis_mask() || s->new_axis_mask())
    return nodeUnsupported("ellipsis_mask/new_axis_mask are not read");
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  KILN_ASSIGN_OR_RETURN(auto begin, constInts(1));
  KILN_ASSIGN_OR_RETURN(auto end, constInts(2));
  std::vector<int64_t> strides(begin.size(), 1), axes(begin.size());
  if (inputCount() > 3) {
    KILN_ASSIGN_OR_RETURN(strides, constInts(3));
  }
  std::iota(axes.begin(), axes.end(), 0);
  if (inputCount() > 4) {
    KILN_ASSIGN_OR_RETURN(axes, constInts(4));
  }
  if (strides.size() != begin.size() || end.size() != begin.size() || axes.size() != begin.size())
    return nodeUnsupported("begin/end/strides/axes differ in length");
  std::vector<int64_t> squeeze;
  for (size_t k = 0; k < begin.size(); ++k) {
    bool negative = strides[k] < 0;
    if (s->begin_mask() & (int64_t(1) << k)) begin[k] = negative ? INT64_MAX : 0;
    if (s->end_mask() & (int64_t(1) << k)) end[k] = negative ? INT64_MIN : INT64_MAX;
    if (s->shrink_axis_mask() & (int64_t(1) << k)) {
      end[k] = begin[k] == -1 ? INT64_MAX : begin[k] + 1;
      strides[k] = 1;
      squeeze.push_back(axes[k]);
    }
  }
  Value* y = emit("Slice", {x, ints(begin), ints(end), ints(axes), ints(strides)});
  if (!squeeze.empty()) y = emit("Squeeze", {y, ints(squeeze)});
  return bind(0, y);
}

Status Reader::resize(const fb::Resize* r) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  Value* nchw = toNchw(x);
  Node::AttributeList attrs;
  switch (r->method()) {
  case fb::ResizeMethod_LINEAR:
    attrs.push_back({"mode", Attribute::ofString("linear")});
    break;
  case fb::ResizeMethod_NEAREST:
    attrs.push_back({"mode", Attribute::ofString("nearest")});
    break;
  case fb::ResizeMethod_CUBIC:
    attrs.push_back({"mode", Attribute::ofString("cubic")});
    attrs.push_back({"cubic_coeff_a", Attribute::ofFloat(r->cubic_coeff())});
    break;
  default:
    return nodeUnsupported("resize method UNKNOWN");
  }
  switch (r->coordinate_transform_mode()) {
  case fb::CoordinateTransformMode_ASYMMETRIC:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("asymmetric")});
    break;
  case fb::CoordinateTransformMode_ALIGN_CORNERS:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("align_corners")});
    break;
  case fb::CoordinateTransformMode_HALF_PIXEL:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("half_pixel")});
    break;
  default:
    return nodeUnsupported("coordinate_transform_mode");
  }
  if (r->method() == fb::ResizeMethod_NEAREST) {
    const char* mode = "round_prefer_floor";
    switch (r->nearest_mode()) {
    case fb::NearestMode_NORMAL:
    case fb::NearestMode_ROUND_HALF_DOWN:
      mode = "round_prefer_floor";
      break;
    case fb::NearestMode_ROUND_HALF_UP:
      mode = "round_prefer_ceil";
      break;
    case fb::NearestMode_FLOOR:
      mode = "floor";
      break;
    case fb::NearestMode_CEIL:
      mode = "ceil";
      break;
    default:
      return nodeUnsupported("nearest_mode");
    }
    attrs.push_back({"nearest_mode", Attribute::ofString(mode)});
  }
  if (r->exclude_outside()) attrs.push_back({"exclude_outside", Attribute::ofInt(1)});
  Value* y;
  auto nc = [&]() { // [N, C] of the NCHW input
    return emit("Slice", {emit("Shape", {nchw}), ints({0}), ints({2})});
  };
  if (inputCount() > 1) {
    uint32_t si = inIndex(1);
    auto dt = ms::dtypeOfTypeId(tensor(si)->dataType());
    if (!isConstant(si)) return nodeUnsupported("the size/scale input must be a constant");
    if (dt && isFloatingPoint(*dt)) {
      KILN_ASSIGN_OR_RETURN(auto s, constFloats(1));
      if (s.size() != 4) return nodeUnsupported("float scales need 4 values (NHWC)");
      Value* scales = constant(
          Tensor::fromValues(DType::Float32, {4}, std::vector<float>{s[0], s[3], s[1], s[2]}));
      y = emit("Resize", {nchw, nullptr, scales}, std::move(attrs));
    } else {
      KILN_ASSIGN_OR_RETURN(auto s, constInts(1));
      std::vector<int64_t> hw;
      if (s.size() == 4)
        hw = {s[1], s[2]};
      else if (s.size() == 2)
        hw = s;
      else
        return nodeUnsupported("integer sizes need 2 ([H, W]) or 4 (NHWC) values");
      Value* sizes = emit("Concat", {nc(), ints(hw)}, {{"axis", Attribute::ofInt(0)}});
      y = emit("Resize", {nchw, nullptr, nullptr, sizes}, std::move(attrs));
    }
  } else {
    Value* sizes = emit("Concat", {nc(), ints({r->new_height(), r->new_width()})},
                        {{"axis", Attribute::ofInt(0)}});
    y = emit("Resize", {nchw, nullptr, nullptr, sizes}, std::move(attrs));
  }
  return bind(0, toNhwc(y));
}

Status Reader::readOp(const fb::Primitive* p) {
  using T = fb::PrimitiveType;
  auto none = fb::ActivationType_NO_ACTIVATION;
  auto axisAttr = [](int64_t a) { return Node::AttributeList{{"axis", Attribute::ofInt(a)}}; };
  switch (p->value_type()) {
  case T::PrimitiveType_Conv2DFusion:
    return conv(p->value_as_Conv2DFusion());
  case T::PrimitiveType_Conv2dTransposeFusion:
    return convTranspose(p->value_as_Conv2dTransposeFusion());
  case T::PrimitiveType_MaxPoolFusion:
    return pool(p->value_as_MaxPoolFusion(), true);
  case T::PrimitiveType_AvgPoolFusion:
    return pool(p->value_as_AvgPoolFusion(), false);
  case T::PrimitiveType_MatMulFusion:
    return matmul(p->value_as_MatMulFusion());
  case T::PrimitiveType_FullConnection:
    return fullConnection(p->value_as_FullConnection());
  case T::PrimitiveType_Activation: {
    auto* a = p->value_as_Activation();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * y, activation(x, a->activation_type(), a->alpha(), a->min_val(),
                                                a->max_val(), a->approximate()));
    return bind(0, y);
  }
  case T::PrimitiveType_AddFusion:
    return binary("Add", p->value_as_AddFusion()->activation_type());
  case T::PrimitiveType_SubFusion:
    return binary("Sub", p->value_as_SubFusion()->activation_type());
  case T::PrimitiveType_MulFusion:
    return binary("Mul", p->value_as_MulFusion()->activation_type());
  case T::PrimitiveType_DivFusion:
    return binary("Div", p->value_as_DivFusion()->activation_type());
  case T::PrimitiveType_RealDiv:
    return binary("Div", none);
  case T::PrimitiveType_Maximum:
    return binary("Max", none);
  case T::PrimitiveType_Minimum:
    return binary("Min", none);
  case T::PrimitiveType_Equal:
    return binary("Equal", none);
  case T::PrimitiveType_Less:
    return binary("Less", none);
  case T::PrimitiveType_LessEqual:
    return binary("LessOrEqual", none);
  case T::PrimitiveType_Greater:
    return binary("Greater", none);
  case T::PrimitiveType_GreaterEqual:
    return binary("GreaterOrEqual", none);
  case T::PrimitiveType_LogicalAnd:
    return binary("And", none);
  case T::PrimitiveType_LogicalOr:
    return binary("Or", none);
  case T::PrimitiveType_NotEqual: {
    KILN_ASSIGN_OR_RETURN(Value * a, in(0));
    KILN_ASSIGN_OR_RETURN(Value * b, in(1));
    return bind(0, emit("Not", {emit("Equal", {a, b})}));
  }
  case T::PrimitiveType_SquaredDifference: {
    KILN_ASSIGN_OR_RETURN(Value * a, in(0));
    KILN_ASSIGN_OR_RETURN(Value * b, in(1));
    Value* d = emit("Sub", {a, b});
    return bind(0, emit("Mul", {d, d}));
  }
  case T::PrimitiveType_FloorDiv: {
    KILN_ASSIGN_OR_RETURN(Value * a, in(0));
    KILN_ASSIGN_OR_RETURN(Value * b, in(1));
    auto dt = ms::dtypeOfTypeId(tensor(inIndex(0))->dataType());
    if (dt && !isFloatingPoint(*dt)) return nodeUnsupported("integer FloorDiv");
    return bind(0, emit("Floor", {emit("Div", {a, b})}));
  }
  case T::PrimitiveType_FloorMod:
  case T::PrimitiveType_Mod: {
    KILN_ASSIGN_OR_RETURN(Value * a, in(0));
    KILN_ASSIGN_OR_RETURN(Value * b, in(1));
    // Mod truncates (the sign of a, C fmod); FloorMod floors (the sign of b).
    if (p->value_type() == T::PrimitiveType_Mod)
      return bind(0, emit("Mod", {a, b}, {{"fmod", Attribute::ofInt(1)}}));
    auto dt = ms::dtypeOfTypeId(tensor(inIndex(0))->dataType());
    if (dt && isFloatingPoint(*dt)) {
      // a − floor(a / b)·b: ONNX Mod floors integers only.
      Value* q = emit("Floor", {emit("Div", {a, b})});
      return bind(0, emit("Sub", {a, emit("Mul", {q, b})}));
    }
    return bind(0, emit("Mod", {a, b}));
  }
  case T::PrimitiveType_PowFusion: {
    auto* pw = p->value_as_PowFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    if (pw->scale() != 1.0f) x = emit("Mul", {x, scalar(pw->scale(), floatType())});
    if (pw->shift() != 0.0f) x = emit("Add", {x, scalar(pw->shift(), floatType())});
    KILN_ASSIGN_OR_RETURN(Value * e, in(1));
    return bind(0, emit("Pow", {x, e}));
  }
  case T::PrimitiveType_Abs:
    return unary("Abs");
  case T::PrimitiveType_Neg:
    return unary("Neg");
  case T::PrimitiveType_Floor:
    return unary("Floor");
  case T::PrimitiveType_Ceil:
    return unary("Ceil");
  case T::PrimitiveType_Round:
    return unary("Round");
  case T::PrimitiveType_Sqrt:
    return unary("Sqrt");
  case T::PrimitiveType_Log:
    return unary("Log");
  case T::PrimitiveType_Sin:
    return unary("Sin");
  case T::PrimitiveType_Cos:
    return unary("Cos");
  case T::PrimitiveType_Erf:
    return unary("Erf");
  case T::PrimitiveType_Reciprocal:
    return unary("Reciprocal");
  case T::PrimitiveType_LogicalNot:
    return unary("Not");
  case T::PrimitiveType_Rsqrt: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    return bind(0, emit("Reciprocal", {emit("Sqrt", {x})}));
  }
  case T::PrimitiveType_Square: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    return bind(0, emit("Mul", {x, x}));
  }
  case T::PrimitiveType_Log1p: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    return bind(0, emit("Log", {emit("Add", {x, scalar(1, floatType())})}));
  }
  case T::PrimitiveType_IsFinite: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* bad = emit("Or", {emit("IsInf", {x}), emit("IsNaN", {x})});
    return bind(0, emit("Not", {bad}));
  }
  case T::PrimitiveType_ExpFusion: {
    auto* e = p->value_as_ExpFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    float base = e->base();
    if (!(base == -1.0f || base > 0)) return nodeUnsupported("ExpFusion base must be -1 or > 0");
    float factor = e->scale() * (base == -1.0f ? 1.0f : std::log(base));
    float shift = e->shift() * (base == -1.0f ? 1.0f : std::log(base));
    if (factor != 1.0f) x = emit("Mul", {x, scalar(factor, floatType())});
    if (shift != 0.0f) x = emit("Add", {x, scalar(shift, floatType())});
    return bind(0, emit("Exp", {x}));
  }
  case T::PrimitiveType_LeakyRelu:
    return unary("LeakyRelu",
                 {{"alpha", Attribute::ofFloat(p->value_as_LeakyRelu()->negative_slope())}});
  case T::PrimitiveType_Elu:
    return unary("Elu", {{"alpha", Attribute::ofFloat(p->value_as_Elu()->alpha())}});
  case T::PrimitiveType_Dropout:
    return unary("Identity");
  case T::PrimitiveType_Softmax: {
    auto axis = longs(p->value_as_Softmax()->axis());
    if (axis.size() != 1) return nodeUnsupported("Softmax needs exactly one axis");
    return unary("Softmax", axisAttr(axis[0]));
  }
  case T::PrimitiveType_LogSoftmax:
    return unary("LogSoftmax", axisAttr(p->value_as_LogSoftmax()->axis()));
  case T::PrimitiveType_Flatten:
    return unary("Flatten", axisAttr(p->value_as_Flatten()->axis()));
  case T::PrimitiveType_Shape: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* y = emit("Shape", {x});
    auto dt = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(0))->dataType());
    if (dt && *dt != DType::Int64)
      y = emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
    return bind(0, y);
  }
  case T::PrimitiveType_Size: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* y = emit("Size", {x});
    auto dt = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(0))->dataType());
    if (dt && *dt != DType::Int64)
      y = emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
    return bind(0, y);
  }
  case T::PrimitiveType_Reshape: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* shape;
    if (inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(shape, int64Input(1));
    } else {
      auto od = dims(node_->outputIndex()->Get(0));
      if (std::any_of(od.begin(), od.end(), [](int64_t v) { return v < 0; }))
        return nodeUnsupported("Reshape without a shape input needs static output dims");
      shape = ints(od);
    }
    return bind(0, emit("Reshape", {x, shape}));
  }
  case T::PrimitiveType_Transpose: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(auto perm, constInts(1));
    return bind(0, transpose(x, perm));
  }
  case T::PrimitiveType_Squeeze:
  case T::PrimitiveType_Unsqueeze: {
    bool sq = p->value_type() == T::PrimitiveType_Squeeze;
    auto axes = longs(sq ? p->value_as_Squeeze()->axis() : p->value_as_Unsqueeze()->axis());
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    if (axes.empty() && inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(axes, constInts(1));
    }
    if (axes.empty() && !sq) return nodeUnsupported("Unsqueeze needs axes");
    std::vector<Value*> ins{x};
    if (!axes.empty()) ins.push_back(ints(axes));
    return bind(0, emit(sq ? "Squeeze" : "Unsqueeze", ins));
  }
  case T::PrimitiveType_ExpandDims: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(auto axes, constInts(1));
    return bind(0, emit("Unsqueeze", {x, ints(axes)}));
  }
  case T::PrimitiveType_Concat: {
    std::vector<Value*> ins;
    for (size_t k = 0; k < inputCount(); ++k) {
      KILN_ASSIGN_OR_RETURN(Value * v, in(k));
      ins.push_back(v);
    }
    return bind(0, emit("Concat", ins, axisAttr(p->value_as_Concat()->axis())));
  }
  case T::PrimitiveType_Stack: {
    int64_t axis = p->value_as_Stack()->axis();
    std::vector<Value*> ins;
    for (size_t k = 0; k < inputCount(); ++k) {
      KILN_ASSIGN_OR_RETURN(Value * v, in(k));
      ins.push_back(emit("Unsqueeze", {v, ints({axis})}));
    }
    return bind(0, emit("Concat", ins, axisAttr(axis)));
  }
  case T::PrimitiveType_Split: {
    auto* s = p->value_as_Split();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    size_t n = node_->outputIndex() ? node_->outputIndex()->size() : 0;
    auto sizes = longs(s->size_splits());
    std::vector<Value*> ins{x};
    Node::AttributeList attrs = axisAttr(s->axis());
    if (!sizes.empty()) {
      if (sizes.size() != n) return nodeUnsupported("size_splits differs from the output count");
      ins.push_back(ints(sizes));
    } else {
      attrs.push_back({"num_outputs", Attribute::ofInt(int64_t(n))});
    }
    Node* node = emitNode("Split", ins, n, std::move(attrs));
    for (size_t k = 0; k < n; ++k)
      KILN_TRY(bind(k, node->output(k)));
    return Status::ok();
  }
  case T::PrimitiveType_Unstack: {
    int64_t axis = p->value_as_Unstack()->axis();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    size_t n = node_->outputIndex() ? node_->outputIndex()->size() : 0;
    Node* node =
        emitNode("Split", {x}, n,
                 {{"axis", Attribute::ofInt(axis)}, {"num_outputs", Attribute::ofInt(int64_t(n))}});
    for (size_t k = 0; k < n; ++k)
      KILN_TRY(bind(k, emit("Squeeze", {node->output(k), ints({axis})})));
    return Status::ok();
  }
  case T::PrimitiveType_Gather: {
    int64_t axis = 0;
    if (inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(auto a, constInts(2));
      if (a.size() != 1) return nodeUnsupported("Gather axis must hold one value");
      axis = a[0];
    }
    // A quantized table is per channel along the gathered axis.
    KILN_ASSIGN_OR_RETURN(Value * x, in(0, {std::nullopt, {}, int(axis)}));
    KILN_ASSIGN_OR_RETURN(Value * idx, in(1));
    return bind(0, emit("Gather", {x, idx}, axisAttr(axis)));
  }
  case T::PrimitiveType_GatherNd: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * idx, int64Input(1));
    return bind(0, emit("GatherND", {x, idx}));
  }
  case T::PrimitiveType_GatherD: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(auto axis, constInts(1));
    if (axis.size() != 1) return nodeUnsupported("GatherD dim must hold one value");
    KILN_ASSIGN_OR_RETURN(Value * idx, in(2));
    return bind(0, emit("GatherElements", {x, idx}, axisAttr(axis[0])));
  }
  case T::PrimitiveType_ScatterNd: {
    // indices, updates, shape → scatter into zeros of that shape.
    KILN_ASSIGN_OR_RETURN(Value * idx, int64Input(0));
    KILN_ASSIGN_OR_RETURN(Value * upd, in(1));
    KILN_ASSIGN_OR_RETURN(Value * shape, int64Input(2));
    auto dt = ms::dtypeOfTypeId(tensor(inIndex(1))->dataType()).value_or(DType::Float32);
    auto zero = dtypeStorageBytes(dt, 1);
    if (!zero) return nodeUnsupported("ScatterNd updates type");
    Tensor z(dt, {1}, Buffer::owned(std::vector<uint8_t>(*zero, 0)));
    Value* zeros = emit("ConstantOfShape", {shape}, {{"value", Attribute::ofTensor(z)}});
    return bind(0, emit("ScatterND", {zeros, idx, upd}));
  }
  case T::PrimitiveType_ScatterNdUpdate:
  case T::PrimitiveType_TensorScatterAdd: {
    KILN_ASSIGN_OR_RETURN(Value * data, in(0));
    KILN_ASSIGN_OR_RETURN(Value * idx, int64Input(1));
    KILN_ASSIGN_OR_RETURN(Value * upd, in(2));
    Node::AttributeList attrs;
    if (p->value_type() == T::PrimitiveType_TensorScatterAdd)
      attrs.push_back({"reduction", Attribute::ofString("add")});
    return bind(0, emit("ScatterND", {data, idx, upd}, std::move(attrs)));
  }
  case T::PrimitiveType_ScatterElements: {
    KILN_ASSIGN_OR_RETURN(Value * data, in(0));
    KILN_ASSIGN_OR_RETURN(Value * idx, in(1));
    KILN_ASSIGN_OR_RETURN(Value * upd, in(2));
    return bind(0, emit("ScatterElements", {data, idx, upd},
                        axisAttr(p->value_as_ScatterElements()->axis())));
  }
  case T::PrimitiveType_StridedSlice:
    return stridedSlice(p->value_as_StridedSlice());
  case T::PrimitiveType_SliceFusion: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(auto begin, constInts(1));
    KILN_ASSIGN_OR_RETURN(auto size, constInts(2));
    auto axes = longs(p->value_as_SliceFusion()->axes());
    if (axes.empty()) {
      axes.resize(begin.size());
      std::iota(axes.begin(), axes.end(), 0);
    }
    if (size.size() != begin.size() || axes.size() != begin.size())
      return nodeUnsupported("begin/size/axes differ in length");
    std::vector<int64_t> end(begin.size());
    for (size_t k = 0; k < begin.size(); ++k)
      end[k] = size[k] < 0 ? INT64_MAX : begin[k] + size[k];
    return bind(0, emit("Slice", {x, ints(begin), ints(end), ints(axes)}));
  }
  case T::PrimitiveType_TileFusion: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    if (!longs(p->value_as_TileFusion()->dims()).empty())
      return nodeUnsupported("TileFusion dims are not read");
    KILN_ASSIGN_OR_RETURN(Value * m, int64Input(1));
    return bind(0, emit("Tile", {x, m}));
  }
  case T::PrimitiveType_BroadcastTo: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* shape;
    if (inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(shape, int64Input(1));
    } else {
      shape = ints(longs(p->value_as_BroadcastTo()->shape()));
    }
    return bind(0, emit("Expand", {x, shape}));
  }
  case T::PrimitiveType_Cast: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    std::optional<DType> to;
    if (inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(auto t, constInts(1));
      if (t.size() != 1) return nodeUnsupported("Cast type must be one value");
      to = ms::dtypeOfTypeId(int(t[0]));
      if (!to) return nodeUnsupported(fmt::format("Cast to TypeId {}", t[0]));
    } else {
      to = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(0))->dataType());
      if (!to) return nodeUnsupported("Cast without a type input");
    }
    return bind(0, emit("Cast", {x}, {{"to", Attribute::ofInt(dtypeToOnnx(*to))}}));
  }
  case T::PrimitiveType_Where:
  case T::PrimitiveType_Select: {
    if (inputCount() != 3) return nodeUnsupported("needs condition, x and y");
    KILN_ASSIGN_OR_RETURN(Value * c, in(0));
    KILN_ASSIGN_OR_RETURN(Value * a, in(1));
    KILN_ASSIGN_OR_RETURN(Value * b, in(2));
    return bind(0, emit("Where", {c, a, b}));
  }
  case T::PrimitiveType_ReduceFusion:
    return reduce(p->value_as_ReduceFusion());
  case T::PrimitiveType_ArgMaxFusion:
  case T::PrimitiveType_ArgMinFusion: {
    bool isMax = p->value_type() == T::PrimitiveType_ArgMaxFusion;
    int64_t axis, topK;
    bool keep, outValue;
    if (isMax) {
      auto* a = p->value_as_ArgMaxFusion();
      axis = a->axis(), topK = a->top_k(), keep = a->keep_dims(), outValue = a->out_max_value();
    } else {
      auto* a = p->value_as_ArgMinFusion();
      axis = a->axis(), topK = a->top_k(), keep = a->keep_dims(), outValue = a->out_max_value();
    }
    if (topK > 1) return nodeUnsupported("top_k > 1");
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Node::AttributeList attrs{{"axis", Attribute::ofInt(axis)},
                              {"keepdims", Attribute::ofInt(keep ? 1 : 0)}};
    if (outValue) {
      if (node_->outputIndex()->size() > 1)
        return nodeUnsupported("out_max_value with two outputs");
      return bind(0, emit(isMax ? "ReduceMax" : "ReduceMin", {x, ints({axis})},
                          {{"keepdims", Attribute::ofInt(keep ? 1 : 0)}}));
    }
    Value* y = emit(isMax ? "ArgMax" : "ArgMin", {x}, std::move(attrs));
    auto dt = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(0))->dataType());
    if (dt && *dt != DType::Int64)
      y = emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
    return bind(0, y);
  }
  case T::PrimitiveType_TopKFusion: {
    auto* t = p->value_as_TopKFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * k, int64Input(1));
    k = emit("Reshape", {k, ints({1})});
    Node* node = emitNode("TopK", {x, k}, 2,
                          {{"axis", Attribute::ofInt(t->axis())},
                           {"largest", Attribute::ofInt(t->largest() ? 1 : 0)},
                           {"sorted", Attribute::ofInt(t->sorted() ? 1 : 0)}});
    KILN_TRY(bind(0, node->output(0)));
    if (node_->outputIndex()->size() > 1) {
      Value* idx = node->output(1);
      auto dt = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(1))->dataType());
      if (dt && *dt != DType::Int64)
        idx = emit("Cast", {idx}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
      KILN_TRY(bind(1, idx));
    }
    return Status::ok();
  }
  case T::PrimitiveType_CumSum: {
    auto* c = p->value_as_CumSum();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * axis, int64Input(1));
    return bind(0, emit("CumSum", {x, axis},
                        {{"exclusive", Attribute::ofInt(c->exclusive() ? 1 : 0)},
                         {"reverse", Attribute::ofInt(c->reverse() ? 1 : 0)}}));
  }
  case T::PrimitiveType_PadFusion: {
    auto* pf = p->value_as_PadFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(auto pads, constInts(1));
    if (pads.size() % 2) return nodeUnsupported("paddings must be [rank, 2]");
    size_t rank = pads.size() / 2;
    std::vector<int64_t> onnxPads(pads.size());
    for (size_t k = 0; k < rank; ++k) {
      onnxPads[k] = pads[2 * k];
      onnxPads[rank + k] = pads[2 * k + 1];
    }
    std::string mode;
    switch (pf->padding_mode()) {
    case fb::PaddingMode_CONSTANT:
      mode = "constant";
      break;
    case fb::PaddingMode_REFLECT:
      mode = "reflect";
      break;
    default:
      return nodeUnsupported(
          fmt::format("padding mode {}", fb::EnumNamePaddingMode(pf->padding_mode())));
    }
    std::vector<Value*> ins{x, ints(onnxPads)};
    if (mode == "constant") {
      if (inputCount() > 2) {
        KILN_ASSIGN_OR_RETURN(Value * cv, in(2));
        ins.push_back(cv);
      } else if (pf->constant_value() != 0.0f) {
        ins.push_back(scalar(pf->constant_value(), floatType()));
      }
    }
    return bind(0, emit("Pad", ins, {{"mode", Attribute::ofString(mode)}}));
  }
  case T::PrimitiveType_Resize:
    return resize(p->value_as_Resize());
  case T::PrimitiveType_FusedBatchNorm:
  case T::PrimitiveType_BatchNorm: {
    bool fused = p->value_type() == T::PrimitiveType_FusedBatchNorm;
    float eps =
        fused ? p->value_as_FusedBatchNorm()->epsilon() : p->value_as_BatchNorm()->epsilon();
    if (fused && p->value_as_FusedBatchNorm()->mode() != 0)
      return nodeUnsupported("training-mode batch norm");
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value *scale, *bias, *mean, *var;
    if (fused) {
      KILN_ASSIGN_OR_RETURN(scale, in(1));
      KILN_ASSIGN_OR_RETURN(bias, in(2));
      KILN_ASSIGN_OR_RETURN(mean, in(3));
      KILN_ASSIGN_OR_RETURN(var, in(4));
    } else {
      KILN_ASSIGN_OR_RETURN(mean, in(1));
      KILN_ASSIGN_OR_RETURN(var, in(2));
      Value* ones =
          emit("Add", {emit("Mul", {mean, scalar(0, floatType())}), scalar(1, floatType())});
      scale = ones;
      bias = emit("Mul", {mean, scalar(0, floatType())});
    }
    auto rank = dims(inIndex(0)).size();
    bool nhwc = rank == 4;
    Value* xin = nhwc ? toNchw(x) : x;
    Value* y = emit("BatchNormalization", {xin, scale, bias, mean, var},
                    {{"epsilon", Attribute::ofFloat(eps)}});
    return bind(0, nhwc ? toNhwc(y) : y);
  }
  case T::PrimitiveType_InstanceNorm: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * gamma, in(1));
    KILN_ASSIGN_OR_RETURN(Value * beta, in(2));
    Value* y = emit("InstanceNormalization", {toNchw(x), gamma, beta},
                    {{"epsilon", Attribute::ofFloat(p->value_as_InstanceNorm()->epsilon())}});
    return bind(0, toNhwc(y));
  }
  case T::PrimitiveType_LayerNormFusion: {
    auto* l = p->value_as_LayerNormFusion();
    if (l->begin_norm_axis() != l->begin_params_axis())
      return nodeUnsupported("begin_norm_axis differs from begin_params_axis");
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    std::vector<Value*> ins{x};
    if (inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(Value * gamma, in(1));
      ins.push_back(gamma);
    }
    if (inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * beta, in(2));
      ins.push_back(beta);
    }
    if (ins.size() < 2) return nodeUnsupported("LayerNormFusion without gamma");
    return bind(0, emit("LayerNormalization", ins,
                        {{"axis", Attribute::ofInt(l->begin_norm_axis())},
                         {"epsilon", Attribute::ofFloat(l->epsilon())}}));
  }
  case T::PrimitiveType_ScaleFusion: {
    auto* s = p->value_as_ScaleFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    auto xd = dims(inIndex(0));
    auto sd = dims(inIndex(1));
    int64_t rank = int64_t(xd.size());
    int64_t axis = s->axis() < 0 ? s->axis() + rank : s->axis();
    if (rank == 0 || axis < 0 || axis + int64_t(sd.size()) > rank)
      return nodeUnsupported("ScaleFusion axis does not fit the input rank");
    // The scale covers dims [axis, axis + rank(scale)); trailing dims broadcast.
    std::vector<int64_t> shape = sd;
    shape.resize(size_t(rank - axis), 1);
    KILN_ASSIGN_OR_RETURN(Value * scale, in(1));
    if (int64_t(shape.size()) != int64_t(sd.size())) scale = emit("Reshape", {scale, ints(shape)});
    Value* y = emit("Mul", {x, scale});
    if (inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * b, in(2));
      if (int64_t(shape.size()) != int64_t(sd.size())) b = emit("Reshape", {b, ints(shape)});
      y = emit("Add", {y, b});
    }
    KILN_ASSIGN_OR_RETURN(y, activation(y, s->activation_type()));
    return bind(0, y);
  }
  case T::PrimitiveType_PReLUFusion: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    KILN_ASSIGN_OR_RETURN(Value * slope, in(1));
    return bind(0, emit("PRelu", {x, slope}));
  }
  case T::PrimitiveType_BiasAdd:
    return binary("Add", none);
  case T::PrimitiveType_AddN:
  case T::PrimitiveType_Eltwise: {
    std::string op = "Sum";
    if (p->value_type() == T::PrimitiveType_Eltwise) {
      auto mode = p->value_as_Eltwise()->mode();
      if (mode == fb::EltwiseMode_PROD)
        op = "Mul";
      else if (mode == fb::EltwiseMode_MAXIMUM)
        op = "Max";
      else if (mode != fb::EltwiseMode_SUM)
        return nodeUnsupported("Eltwise mode");
    }
    std::vector<Value*> ins;
    for (size_t k = 0; k < inputCount(); ++k) {
      KILN_ASSIGN_OR_RETURN(Value * v, in(k));
      ins.push_back(v);
    }
    if (op == "Mul") {
      Value* y = ins[0];
      for (size_t k = 1; k < ins.size(); ++k)
        y = emit("Mul", {y, ins[k]});
      return bind(0, y);
    }
    return bind(0, emit(op, ins));
  }
  case T::PrimitiveType_Clip: {
    auto* c = p->value_as_Clip();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* lo = inputCount() > 1 ? nullptr : scalar(c->min(), floatType());
    Value* hi = inputCount() > 2 ? nullptr : scalar(c->max(), floatType());
    if (!lo) {
      KILN_ASSIGN_OR_RETURN(lo, in(1));
    }
    if (!hi) {
      KILN_ASSIGN_OR_RETURN(hi, in(2));
    }
    return bind(0, emit("Clip", {x, lo, hi}));
  }
  case T::PrimitiveType_ConstantOfShape: {
    auto* c = p->value_as_ConstantOfShape();
    KILN_ASSIGN_OR_RETURN(Value * shape, int64Input(0));
    auto values = c->value();
    if (!values || values->size() != 1) return nodeUnsupported("value must hold one element");
    auto dt = ms::dtypeOfTypeId(int(c->data_type()));
    if (!dt) return nodeUnsupported(fmt::format("data_type {}", c->data_type()));
    float v = values->Get(0);
    Tensor t;
    switch (*dt) {
    case DType::Float32:
      t = Tensor::fromValues(*dt, {1}, std::vector<float>{v});
      break;
    case DType::Float16:
      t = Tensor::fromValues(*dt, {1}, std::vector<uint16_t>{rt::floatToHalf(v)});
      break;
    case DType::Int32:
      t = Tensor::fromValues(*dt, {1}, std::vector<int32_t>{int32_t(v)});
      break;
    case DType::Int64:
      t = Tensor::fromValues(*dt, {1}, std::vector<int64_t>{int64_t(v)});
      break;
    case DType::Bool:
      t = Tensor::fromValues(*dt, {1}, std::vector<uint8_t>{v != 0});
      break;
    default:
      return nodeUnsupported(fmt::format("data_type {}", dtypeName(*dt)));
    }
    return bind(0, emit("ConstantOfShape", {shape}, {{"value", Attribute::ofTensor(t)}}));
  }
  case T::PrimitiveType_Fill: {
    KILN_ASSIGN_OR_RETURN(Value * value, in(0));
    KILN_ASSIGN_OR_RETURN(Value * shape, int64Input(1));
    return bind(0, emit("Expand", {value, shape}));
  }
  case T::PrimitiveType_Range: {
    if (inputCount() < 3) return nodeUnsupported("Range needs start, limit and delta inputs");
    KILN_ASSIGN_OR_RETURN(Value * a, in(0));
    KILN_ASSIGN_OR_RETURN(Value * b, in(1));
    KILN_ASSIGN_OR_RETURN(Value * c, in(2));
    return bind(0, emit("Range", {a, b, c}));
  }
  case T::PrimitiveType_OneHot: {
    KILN_ASSIGN_OR_RETURN(Value * idx, in(0));
    KILN_ASSIGN_OR_RETURN(Value * depth, in(1));
    KILN_ASSIGN_OR_RETURN(Value * on, in(2));
    KILN_ASSIGN_OR_RETURN(Value * off, in(3));
    Value* values =
        emit("Concat", {emit("Reshape", {off, ints({1})}), emit("Reshape", {on, ints({1})})},
             axisAttr(0));
    return bind(0, emit("OneHot", {idx, depth, values}, axisAttr(p->value_as_OneHot()->axis())));
  }
  case T::PrimitiveType_DepthToSpace:
  case T::PrimitiveType_SpaceToDepth: {
    bool d2s = p->value_type() == T::PrimitiveType_DepthToSpace;
    int64_t block =
        d2s ? p->value_as_DepthToSpace()->block_size() : p->value_as_SpaceToDepth()->block_size();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Node::AttributeList attrs{{"blocksize", Attribute::ofInt(block)}};
    if (d2s) {
      auto* m = p->value_as_DepthToSpace()->mode();
      std::string mode = m && m->size() ? m->str() : "DCR";
      if (mode != "DCR" && mode != "CRD") return nodeUnsupported("DepthToSpace mode " + mode);
      attrs.push_back({"mode", Attribute::ofString(mode)});
    }
    Value* y = emit(d2s ? "DepthToSpace" : "SpaceToDepth", {toNchw(x)}, std::move(attrs));
    return bind(0, toNhwc(y));
  }
  case T::PrimitiveType_LRN: {
    auto* l = p->value_as_LRN();
    if (l->norm_region() && l->norm_region()->size() &&
        l->norm_region()->str() != "ACROSS_CHANNELS")
      return nodeUnsupported("LRN norm_region " + l->norm_region()->str());
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    int64_t size = 2 * l->depth_radius() + 1;
    // The .ms alpha multiplies the plain window sum; ONNX divides its alpha by the size.
    Value* y = emit("LRN", {toNchw(x)},
                    {{"size", Attribute::ofInt(size)},
                     {"alpha", Attribute::ofFloat(l->alpha() * float(size))},
                     {"beta", Attribute::ofFloat(l->beta())},
                     {"bias", Attribute::ofFloat(l->bias())}});
    return bind(0, toNhwc(y));
  }
  case T::PrimitiveType_LpNormalization: {
    auto* l = p->value_as_LpNormalization();
    return unary("LpNormalization",
                 {{"axis", Attribute::ofInt(l->axis())}, {"p", Attribute::ofInt(l->p())}});
  }
  case T::PrimitiveType_L2NormalizeFusion: {
    auto* l = p->value_as_L2NormalizeFusion();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    auto axes = longs(l->axis());
    std::vector<Value*> ins{emit("Mul", {x, x})};
    if (!axes.empty()) ins.push_back(ints(axes));
    Value* sum = emit("ReduceSum", ins, {{"keepdims", Attribute::ofInt(1)}});
    Value* norm = emit("Sqrt", {emit("Max", {sum, scalar(l->epsilon(), floatType())})});
    Value* y = emit("Div", {x, norm});
    KILN_ASSIGN_OR_RETURN(y, activation(y, l->activation_type()));
    return bind(0, y);
  }
  case T::PrimitiveType_GLU: {
    int64_t axis = p->value_as_GLU()->axis();
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Node* halves = emitNode(
        "Split", {x}, 2, {{"axis", Attribute::ofInt(axis)}, {"num_outputs", Attribute::ofInt(2)}});
    return bind(0, emit("Mul", {halves->output(0), emit("Sigmoid", {halves->output(1)})}));
  }
  case T::PrimitiveType_NonZero: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    Value* y = emit("NonZero", {x});
    auto dt = ms::dtypeOfTypeId(tensor(node_->outputIndex()->Get(0))->dataType());
    if (dt && *dt != DType::Int64)
      y = emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
    return bind(0, y);
  }
  case T::PrimitiveType_Triu:
  case T::PrimitiveType_Tril: {
    KILN_ASSIGN_OR_RETURN(Value * x, in(0));
    std::vector<Value*> ins{x};
    if (inputCount() > 1) {
      KILN_ASSIGN_OR_RETURN(Value * k, int64Input(1));
      ins.push_back(emit("Reshape", {k, ints({})}));
    }
    return bind(0, emit("Trilu", ins,
                        {{"upper", Attribute::ofInt(p->value_type() == T::PrimitiveType_Triu)}}));
  }
  default:
    return nodeUnsupported("this op type has no reader");
  }
}

Status Reader::readNode(const fb::CNode* node) {
  node_ = node;
  ownValues_.clear();
  nodeName_ = node->name() ? node->name()->str() : "";
  opName_ = primitiveName(node->primitive()->value_type());
  auto qt = node->quantType();
  if (qt == fb::QuantType_QUANT_ALL || qt == fb::QuantType_AwareTraining ||
      qt == fb::QuantType_PostTraining || qt == fb::QuantType_QUANT_DYNAMIC)
    return nodeUnsupported(fmt::format("quant type {} (int8 kernels) is not read; only float and "
                                       "weight-quantized nodes are",
                                       fb::EnumNameQuantType(qt)));
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

Expected<Model> Reader::read() {
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
  if (subgraphs && subgraphs->size() > 1)
    return unsupported("the model has {} subgraphs (control flow); kiln reads single-graph models",
                       subgraphs->size());
  if (subgraphs && subgraphs->size() == 1 && subgraphs->Get(0) &&
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
  for (uint32_t n : order) {
    const fb::CNode* node = meta_->nodes()->Get(n);
    if (node->outputIndex())
      for (uint32_t o : *node->outputIndex())
        if (!produced.insert(o).second)
          return invalid("tensor '{}' is produced by more than one node", tensorName(o));
  }
  for (uint32_t n : order) {
    const fb::CNode* node = meta_->nodes()->Get(n);
    if (node->inputIndex())
      for (uint32_t i : *node->inputIndex())
        if (!produced.count(i) && !inputs.count(i)) constant_.insert(i);
  }

  std::vector<uint32_t> inputOrder;
  if (meta_->inputIndex())
    inputOrder.assign(meta_->inputIndex()->begin(), meta_->inputIndex()->end());
  for (uint32_t i : inputOrder) {
    if (values_.count(i)) continue;
    const fb::Tensor* t = tensor(i);
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

Expected<Model> readBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                           const MappedFile* file, const std::string& displayName,
                           const std::string& baseDir) {
  if (!data || size < 8 || !fb::MetaGraphBufferHasIdentifier(data))
    return Status(ErrorCode::MsFileInvalid,
                  fmt::format("{}: not a .ms file (no MSL2 identifier at bytes 4..7, {} bytes)",
                              displayName, size),
                  kInvalidHint);
  flatbuffers::Verifier verifier(data, size, 2048, 100000000);
  if (!fb::VerifyMetaGraphBuffer(verifier))
    return Status(
        ErrorCode::MsFileInvalid,
        fmt::format("{}: not a valid .ms file (FlatBuffers verification failed, {} bytes)",
                    displayName, size),
        kInvalidHint);
  Reader reader(fb::GetMetaGraph(data), std::move(owner), file, displayName, baseDir);
  return reader.read();
}

} // namespace

Expected<Model> readMsBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                             const std::string& displayName, const std::string& baseDir) {
  return readBuffer(data, size, std::move(owner), nullptr, displayName, baseDir);
}

Expected<Model> readMsFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const MappedFile* raw = file.get();
  return readBuffer(raw->data(), raw->size(), file, raw, path, dir);
}

} // namespace kiln
