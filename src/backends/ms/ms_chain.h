// Emit helpers for .ms lowerings that expand one ONNX op into a short chain of .ms ops (the
// rewrites of ONNX ops MindSpore Lite has no primitive for: Xor, Trilu, Hardmax, ...). Every
// intermediate is an ONNX-layout tensor named after the node's first output.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::ms {

class Chain {
 public:
  Chain(LoweringContext& ctx, const Node& n)
      : ctx_(ctx), base_(n.output(0) ? n.output(0)->name() : std::string("t")) {}

  LoweringContext& ctx() { return ctx_; }

  // A new node-produced tensor (ONNX layout) of TypeId `typeId` and `dims`.
  uint32_t tmp(int typeId, std::vector<int32_t> dims) {
    MsTensor t;
    t.name = fmt::format("{}_{}", base_, ++counter_);
    t.nodeType = kNodeCNode;
    t.dataType = typeId;
    t.dims = std::move(dims);
    return ctx_.addTensor(std::move(t));
  }
  // A tensor shaped like `like`, of `typeId` (that of `like` when omitted).
  uint32_t tmpLike(uint32_t like, std::optional<int> typeId = std::nullopt) {
    const MsTensor& t = ctx_.tensor(like);
    return tmp(typeId.value_or(t.dataType), t.dims);
  }
  int typeOf(uint32_t t) { return ctx_.tensor(t).dataType; }
  std::vector<int32_t> dimsOf(uint32_t t) { return ctx_.tensor(t).dims; }

  // Emits `type` (no attributes unless given) and returns `out`.
  uint32_t op(fb::PrimitiveType type, std::vector<uint32_t> ins, uint32_t out,
              AttrBuilder attrs = noAttrs()) {
    ctx_.emit(type, std::move(attrs), std::move(ins), {out});
    return out;
  }
  // Unary op into a new tensor like `x` (of `typeId` when given).
  uint32_t unary(fb::PrimitiveType type, uint32_t x, std::optional<int> typeId = std::nullopt,
                 AttrBuilder attrs = noAttrs()) {
    return op(type, {x}, tmpLike(x, typeId), std::move(attrs));
  }
  // Binary op with numpy broadcasting into a new tensor (of `typeId`, else a's type).
  uint32_t binary(fb::PrimitiveType type, uint32_t a, uint32_t b,
                  std::optional<int> typeId = std::nullopt) {
    uint32_t out = tmp(typeId.value_or(typeOf(a)), broadcastDims(dimsOf(a), dimsOf(b)));
    return op(type, {a, b}, out);
  }
  uint32_t cast(uint32_t x, int typeId) {
    if (typeOf(x) == typeId) return x;
    uint32_t to = ctx_.intConst({typeId}, fmt::format("{}_to{}", base_, ++counter_),
                                std::vector<int32_t>{});
    return op(fb::PrimitiveType_Cast, {x, to}, tmpLike(x, typeId));
  }
  uint32_t exp(uint32_t x) {
    return unary(fb::PrimitiveType_ExpFusion, x, std::nullopt,
                 [](FBB& b) { return fb::CreateExpFusion(b, -1.0f, 1.0f, 0.0f).Union(); });
  }

  // A constant of TypeId `typeId` holding `values` (converted), shape `dims` ([] = scalar).
  uint32_t constant(const std::vector<double>& values, int typeId, std::vector<int32_t> dims) {
    std::vector<uint8_t> bytes;
    for (double v : values)
      append(bytes, v, typeId);
    MsTensor t;
    t.name = fmt::format("{}_c{}", base_, ++counter_);
    t.nodeType = kNodeValue;
    t.dataType = typeId;
    t.dims = std::move(dims);
    t.data = Buffer::owned(std::move(bytes));
    return ctx_.addTensor(std::move(t));
  }
  uint32_t scalar(double v, int typeId) { return constant({v}, typeId, {}); }

  // Attribute-free op table (every .ms table without fields has the same empty layout).
  static AttrBuilder noAttrs() {
    return [](FBB& b) {
      flatbuffers::uoffset_t start = b.StartTable();
      return flatbuffers::Offset<void>(b.EndTable(start));
    };
  }

  static std::vector<int32_t> broadcastDims(std::vector<int32_t> a, std::vector<int32_t> b) {
    if (a.size() < b.size()) std::swap(a, b);
    const size_t off = a.size() - b.size();
    for (size_t i = 0; i < b.size(); ++i)
      if (a[off + i] == 1 || (a[off + i] != b[i] && b[i] != 1 && b[i] >= 0 && a[off + i] < 0))
        a[off + i] = b[i];
    return a;
  }

 private:
  static void append(std::vector<uint8_t>& bytes, double v, int typeId) {
    auto put = [&](auto x) {
      uint8_t raw[sizeof(x)];
      std::memcpy(raw, &x, sizeof(x));
      bytes.insert(bytes.end(), raw, raw + sizeof(x));
    };
    switch (typeId) {
    case kTypeBool:
      put(static_cast<uint8_t>(v != 0));
      break;
    case kTypeInt8:
      put(static_cast<int8_t>(v));
      break;
    case kTypeUInt8:
      put(static_cast<uint8_t>(v));
      break;
    case kTypeInt16:
      put(static_cast<int16_t>(v));
      break;
    case kTypeUInt16:
      put(static_cast<uint16_t>(v));
      break;
    case kTypeInt32:
      put(static_cast<int32_t>(v));
      break;
    case kTypeUInt32:
      put(static_cast<uint32_t>(v));
      break;
    case kTypeInt64:
      put(static_cast<int64_t>(v));
      break;
    case kTypeUInt64:
      put(static_cast<uint64_t>(v));
      break;
    case kTypeFloat16:
      put(rt::floatToHalf(static_cast<float>(v)));
      break;
    case kTypeFloat64:
      put(v);
      break;
    default:
      put(static_cast<float>(v));
    }
  }

  LoweringContext& ctx_;
  std::string base_;
  int counter_ = 0;
};

} // namespace kiln::ms
