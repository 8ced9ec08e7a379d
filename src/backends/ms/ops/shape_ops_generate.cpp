// .ms rules of the shape_ops family, generated-pattern half: Trilu, EyeLike, OneHot, Compress and
// NonZero,
// which .ms has no stable primitive for (Triu/Tril ids moved between releases) or which need
// ONNX's index rules made explicit. Lowering only: they emit ops other families read back.
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "ops/attributes.h"
#include "shape_ops.h"

namespace kiln::ms {
namespace {

// Trilu(x, k) → Where(GreaterEqual(D, k) | LessEqual(D, k), x, 0) with D[i][j] = j − i over the
// last two dims (a constant); a run-time k is compared at run time. An empty matrix axis keeps D
// at extent 1 so it still broadcasts.
std::string checkTrilu(const Node& n, const lowering::OpContext&) {
  auto upper = ops::intAttr(n, "upper", 1);
  if (!upper) return upper.status().message();
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank < 2)
    return fmt::format("{}-D input", rank);
  return {};
}

Status lowerTrilu(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t upper, ops::intAttr(n, "upper", 1));
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 2) return bad("input rank {}", rank);
  auto rows = ctx.dimOf(n.input(0), size_t(rank - 2));
  auto cols = ctx.dimOf(n.input(0), size_t(rank - 1));
  if (!rows || !cols) return bad("unknown matrix dims");
  const int64_t r = std::max<int64_t>(*rows, 1), c = std::max<int64_t>(*cols, 1);
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto type = typeIdOf(ctx.resolve(n.input(0))->dtype());
  if (!type) return bad("input dtype {}", dtypeName(ctx.resolve(n.input(0))->dtype()));
  std::optional<int64_t> k = 0;
  const Value* kv = n.inputs().size() > 1 ? n.input(1) : nullptr;
  if (kv) {
    auto kc = ctx.constOf(kv);
    k = kc ? std::optional<int64_t>(intValues(kc->tensor).at(0)) : std::nullopt;
  }
  uint32_t mask;
  if (k) {
    std::vector<double> m;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        m.push_back(upper ? (j - i >= *k) : (j - i <= *k));
    mask = ch.constant(m, kTypeBool, {int32_t(r), int32_t(c)});
  } else {
    std::vector<double> d;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        d.push_back(double(j - i));
    uint32_t diff = ch.constant(d, kTypeInt32, {int32_t(r), int32_t(c)});
    auto kt = ctx.int32Input(kv);
    if (!kt) return kt.status();
    mask = ch.binary(upper ? fb::PrimitiveType_GreaterEqual : fb::PrimitiveType_LessEqual, diff,
                     *kt, kTypeBool);
  }
  uint32_t zero = ch.scalar(0, *type);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(fb::PrimitiveType_Where, {mask, *x, zero}, *y);
  return Status::ok();
}

// EyeLike → the identity pattern as a constant, copied to the output by a Reshape (a graph output
// must be produced by a node).
std::string checkEyeLike(const Node& n, const lowering::OpContext&) {
  for (const char* name : {"k", "dtype"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  return {};
}

Status lowerEyeLike(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t k, ops::intAttr(n, "k", 0));
  auto shape = ctx.staticShape(n.output(0));
  if (!shape || shape->size() != 2) return bad("EyeLike needs a known 2-D shape");
  auto type = typeIdOf(n.output(0)->dtype());
  if (!type) return bad("output dtype {}", dtypeName(n.output(0)->dtype()));
  const int64_t r = std::max<int64_t>((*shape)[0], 1), c = std::max<int64_t>((*shape)[1], 1);
  std::vector<double> m;
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      m.push_back(j - i == k ? 1 : 0);
  Chain ch(ctx, n);
  uint32_t eye = ch.constant(m, *type, {int32_t(r), int32_t(c)});
  uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {eye, s}, {*y});
  return Status::ok();
}

// OneHot(indices, depth, [off, on]) → OneHot(i32 indices, i32 depth, on, off) {axis}. ONNX counts
// negative indices from the back: they get depth added first (out-of-range ones stay out of
// range, which both make all-off). The runtime sizes the output from depth while building the
// model: depth must be a constant.
std::string checkOneHot(const Node& n, const lowering::OpContext&) {
  auto axis = ops::intAttr(n, "axis", -1);
  if (!axis) return axis.status().message();
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return buildTimeInputReason(n, 1, "depth");
}

Status lowerOneHot(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", -1));
  const int outRank = ctx.rankOf(n.output(0));
  if (axis < 0) {
    if (outRank < 0) return bad("negative axis over an unknown rank");
    axis += outRank;
  }
  Chain ch(ctx, n);
  // Indices: as int32 (a float index is truncated, as ONNX's cast does).
  auto idxIn = ctx.input(n.input(0), Layout::Onnx);
  if (!idxIn) return idxIn.status();
  uint32_t idx = ch.cast(*idxIn, kTypeInt32);
  uint32_t depth;
  if (auto c = ctx.constOf(n.input(1))) {
    auto s = scalarValue(c->tensor);
    if (!s) return bad("depth must hold one value");
    depth = ch.scalar(double(int64_t(*s)), kTypeInt32);
  } else {
    return buildTimeInputRefusal(n, 1, "depth");
  }
  // idx + (idx < 0) · depth
  uint32_t neg = ch.binary(fb::PrimitiveType_Less, idx, ch.scalar(0, kTypeInt32), kTypeBool);
  uint32_t shift = ch.binary(fb::PrimitiveType_MulFusion, ch.cast(neg, kTypeInt32), depth);
  idx = ch.binary(fb::PrimitiveType_AddFusion, idx, shift);
  // on / off values: scalars picked out of [off, on].
  uint32_t on, off;
  if (auto c = ctx.constOf(n.input(2))) {
    auto type = typeIdOf(c->tensor.dtype());
    if (!type) return bad("values dtype {}", dtypeName(c->tensor.dtype()));
    std::vector<double> v;
    if (c->tensor.dtype() == DType::Float64)
      v = c->tensor.copyValues<double>();
    else if (isFloatingPoint(c->tensor.dtype()))
      for (float f : rt::toFloatVector(c->tensor))
        v.push_back(f);
    else
      for (int64_t i : intValues(c->tensor))
        v.push_back(double(i));
    if (v.size() != 2) return bad("values must hold 2 elements");
    off = ch.scalar(v[0], *type);
    on = ch.scalar(v[1], *type);
  } else {
    auto vals = ctx.input(n.input(2), Layout::Onnx);
    if (!vals) return vals.status();
    uint32_t axis0 = ctx.intConst({0}, n.output(0)->name() + "_values_axis");
    auto pick = [&](int64_t i) {
      uint32_t at = ctx.intConst({i}, fmt::format("{}_values_at{}", n.output(0)->name(), i),
                                 std::vector<int32_t>{});
      return ch.op(fb::PrimitiveType_Gather, {*vals, at, axis0}, ch.tmp(ch.typeOf(*vals), {}));
    };
    off = pick(0);
    on = pick(1);
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(fb::PrimitiveType_OneHot, {idx, depth, on, off}, *y,
        [=](FBB& b) { return fb::CreateOneHot(b, axis).Union(); });
  return Status::ok();
}

// Compress(x, condition) → Gather(x, Reshape(Where(condition), [−1]), axis); without an axis
// over x flattened. A condition shorter than the axis selects among its first entries, as ONNX.
std::string checkCompress(const Node& n, const lowering::OpContext&) {
  if (auto axis = ops::intAttr(n, "axis", 0); !axis) return axis.status().message();
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return {};
}

Status lowerCompress(LoweringContext& ctx, const Node& n) {
  Chain ch(ctx, n);
  auto xin = ctx.input(n.input(0), Layout::Onnx);
  if (!xin) return xin.status();
  uint32_t x = *xin;
  int64_t axis = 0;
  if (n.attribute("axis")) {
    KILN_ASSIGN_OR_RETURN(axis, ops::intAttr(n, "axis", 0));
    const int rank = ctx.rankOf(n.input(0));
    if (axis < 0) {
      if (rank < 0) return bad("negative axis over an unknown rank");
      axis += rank;
    }
  } else {
    uint32_t flat = ctx.intConst({-1}, n.output(0)->name() + "_flat");
    x = ch.op(fb::PrimitiveType_Reshape, {x, flat}, ch.tmp(ch.typeOf(x), {-1}));
  }
  auto cond = ctx.input(n.input(1), Layout::Onnx);
  if (!cond) return cond.status();
  uint32_t nz = ch.op(fb::PrimitiveType_Where, {*cond}, ch.tmp(kTypeInt32, {-1, 1}));
  uint32_t flat = ctx.intConst({-1}, n.output(0)->name() + "_indices_shape");
  uint32_t idx = ch.op(fb::PrimitiveType_Reshape, {nz, flat}, ch.tmp(kTypeInt32, {-1}));
  uint32_t ax = ctx.intConst({axis}, n.output(0)->name() + "_axis");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(fb::PrimitiveType_Gather, {x, idx, ax}, *y);
  return Status::ok();
}

// NonZero → Transpose(Where(x)), cast to ONNX's int64. The runtime has no NonZero kernel (no
// shape function either); its one-input Where writes the indices of the true elements as int32
// [count, rank] (ONNX's [rank, count] transposed), sized when it runs. It reads its input as
// bool, int32 or float32: other dtypes go through NotEqual(x, 0) first.
std::string checkNonZero(const Node& n, const lowering::OpContext&) {
  if (!n.input(0)) return "an omitted input";
  const DType t = n.input(0)->dtype();
  if (t == DType::String || t == DType::BFloat16 || t == DType::Complex64 || t == DType::Complex128)
    return fmt::format("{} input", dtypeName(t));
  return {};
}

Status lowerNonZero(LoweringContext& ctx, const Node& n) {
  Chain ch(ctx, n);
  auto xin = ctx.input(n.input(0), Layout::Onnx);
  if (!xin) return xin.status();
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 1) return bad("NonZero over a scalar or an unknown rank");
  uint32_t x = *xin;
  if (ch.typeOf(x) != kTypeBool)
    x = ch.binary(fb::PrimitiveType_NotEqual, x, ch.scalar(0, ch.typeOf(x)), kTypeBool);
  uint32_t positions = ch.op(fb::PrimitiveType_Where, {x}, ch.tmp(kTypeInt32, {-1, rank}));
  uint32_t perm = ctx.intConst({1, 0}, n.output(0)->name() + "_perm");
  uint32_t nz =
      ch.op(fb::PrimitiveType_Transpose, {positions, perm}, ch.tmp(kTypeInt32, {rank, -1}));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const int type = ch.typeOf(*y);
  if (type == kTypeInt32) {
    ch.op(fb::PrimitiveType_Reshape, {nz, ctx.intConst({rank, -1}, n.output(0)->name() + "_shape")},
          *y);
    return Status::ok();
  }
  uint32_t to = ctx.intConst({type}, n.output(0)->name() + "_to", std::vector<int32_t>{});
  ch.op(fb::PrimitiveType_Cast, {nz, to}, *y);
  return Status::ok();
}

KILN_MS_LOWERING("Compress", checkCompress, lowerCompress);
KILN_MS_LOWERING("NonZero", checkNonZero, lowerNonZero);
KILN_MS_LOWERING("Trilu", checkTrilu, lowerTrilu);
KILN_MS_LOWERING("EyeLike", checkEyeLike, lowerEyeLike);
KILN_MS_LOWERING("OneHot", checkOneHot, lowerOneHot);

} // namespace
} // namespace kiln::ms
