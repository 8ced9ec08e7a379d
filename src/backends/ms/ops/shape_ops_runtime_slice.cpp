// .ms rule for Slice with starts, ends, axes or steps fed at run time (the shape_ops family): a
// five-input StridedSlice whose indices are made to mean what ONNX's do in the runtime.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "kiln/runtime/tensor_util.h"
#include "shape_ops.h"

namespace kiln::ms {

namespace {

// ONNX clamps the start of a negative-step slice to the axis' last element; the runtime keeps a
// start past the end (StridedSliceInferShape's HandleAxesInputExist: `begins[i] = begin_data[axis]`
// when it exceeds shape - 1) and slices one element too many. Where the step is negative (known
// from constant steps, else compared at run time) the start is capped at dim - 1 of its axis
// (from constant axes, else gathered at run time). Positive steps keep their start.
Expected<uint32_t> capNegativeStepStarts(LoweringContext& ctx, Chain& ch, const Node& n,
                                         const std::vector<int64_t>& shape, uint32_t begin,
                                         uint32_t axes, uint32_t strides) {
  const int32_t count = ch.dimsOf(begin).empty() ? 1 : ch.dimsOf(begin)[0];
  const int64_t rank = static_cast<int64_t>(shape.size());
  const Value* stepsV = n.inputs().size() > 4 ? n.input(4) : nullptr;
  if (!stepsV) return begin; // steps of 1
  std::optional<std::vector<int64_t>> steps;
  if (auto c = ctx.constOf(stepsV)) steps = intValues(c->tensor);
  if (steps && std::none_of(steps->begin(), steps->end(), [](int64_t s) { return s < 0; }))
    return begin;
  std::vector<double> lastOfAxis;
  for (int64_t d : shape)
    lastOfAxis.push_back(double(std::max<int64_t>(d - 1, 0)));
  const Value* axesV = n.inputs().size() > 3 ? n.input(3) : nullptr;
  uint32_t last;
  std::optional<std::vector<int64_t>> axisValues;
  if (!axesV) {
    axisValues = std::vector<int64_t>(static_cast<size_t>(count));
    std::iota(axisValues->begin(), axisValues->end(), 0);
  } else if (auto c = ctx.constOf(axesV)) {
    axisValues = intValues(c->tensor);
  }
  if (axisValues) {
    std::vector<double> values;
    for (int64_t a : *axisValues) {
      const int64_t axis = a < 0 ? a + rank : a;
      if (axis < 0 || axis >= rank) return bad("Slice axis {} of a {}-D input", a, rank);
      values.push_back(lastOfAxis[size_t(axis)]);
    }
    last = ch.constant(values, kTypeInt32, {count});
  } else {
    // axes + rank where negative, then the last index of each.
    uint32_t negative =
        ch.binary(fb::PrimitiveType_Less, axes, ch.scalar(0, kTypeInt32), kTypeBool);
    uint32_t shift = ch.binary(fb::PrimitiveType_MulFusion, ch.cast(negative, kTypeInt32),
                               ch.scalar(double(rank), kTypeInt32));
    uint32_t axis = ch.binary(fb::PrimitiveType_AddFusion, axes, shift);
    uint32_t axis0 = ctx.intConst({0}, n.output(0)->name() + "_last_axis");
    last = ch.op(fb::PrimitiveType_Gather,
                 {ch.constant(lastOfAxis, kTypeInt32, {int32_t(rank)}), axis, axis0},
                 ch.tmp(kTypeInt32, {count}));
  }
  uint32_t capped = ch.binary(fb::PrimitiveType_Minimum, begin, last);
  uint32_t negativeStep;
  if (steps) {
    std::vector<double> mask;
    for (int64_t s : *steps)
      mask.push_back(s < 0 ? 1 : 0);
    if (std::all_of(mask.begin(), mask.end(), [](double m) { return m != 0; })) return capped;
    negativeStep = ch.constant(mask, kTypeBool, {count});
  } else {
    negativeStep = ch.binary(fb::PrimitiveType_Less, strides, ch.scalar(0, kTypeInt32), kTypeBool);
  }
  return ch.op(fb::PrimitiveType_Where, {negativeStep, capped, begin}, ch.tmpLike(begin));
}

} // namespace

// Slice with run-time indices → StridedSlice(x, begin, end, axes, strides), int32, no masks;
// values saturate into int32, so ONNX's INT64 sentinels still mean "to the end".
Status lowerRuntimeSlice(LoweringContext& ctx, const Node& n, int rank) {
  const Value* startsV = n.input(1);
  auto count = startsV ? ctx.dimOf(startsV, 0) : std::nullopt;
  if (!count) return bad("run-time starts of unknown length");
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto index = [&](const Value* v, std::vector<int64_t> fallback) -> Expected<uint32_t> {
    if (!v)
      return ctx.intConst(fallback, fmt::format("{}_{}", n.output(0)->name(), fallback.size()));
    if (auto c = ctx.constOf(v)) {
      std::vector<int64_t> values = intValues(c->tensor);
      for (auto& e : values)
        e = std::clamp<int64_t>(e, std::numeric_limits<int32_t>::min(),
                                std::numeric_limits<int32_t>::max());
      return ctx.intConst(values, c->name);
    }
    auto id = ctx.input(v, Layout::Onnx);
    if (!id) return id.status();
    uint32_t t = *id;
    if (ch.typeOf(t) != kTypeInt64) return ch.cast(t, kTypeInt32);
    // The runtime compares no int64 (ms_data_types.cpp) and its Cast to int32 wraps: the value is
    // cast exactly, and where its float32 copy lies outside the int32 range (INT64 sentinels) the
    // int32 bound takes its place. Where on equal shapes: the runtime's Where does not broadcast.
    const uint32_t narrow = ch.cast(t, kTypeInt32);
    const uint32_t wide = ch.cast(t, kTypeFloat32);
    const std::vector<int32_t> dims = {static_cast<int32_t>(*count)};
    const std::vector<double> lowest(static_cast<size_t>(*count),
                                     double(std::numeric_limits<int32_t>::min()));
    const std::vector<double> highest(static_cast<size_t>(*count),
                                      double(std::numeric_limits<int32_t>::max()));
    // ±(2^31 − 128): the float32 values nearest the int32 bounds from inside.
    const uint32_t above = ch.binary(fb::PrimitiveType_Greater, wide,
                                     ch.scalar(2147483520.0, kTypeFloat32), kTypeBool);
    const uint32_t below =
        ch.binary(fb::PrimitiveType_Less, wide, ch.scalar(-2147483520.0, kTypeFloat32), kTypeBool);
    uint32_t r = ch.op(fb::PrimitiveType_Where,
                       {above, ch.constant(highest, kTypeInt32, dims), narrow}, ch.tmpLike(narrow));
    return ch.op(fb::PrimitiveType_Where, {below, ch.constant(lowest, kTypeInt32, dims), r},
                 ch.tmpLike(narrow));
  };
  std::vector<int64_t> defaultAxes(static_cast<size_t>(*count)),
      ones(static_cast<size_t>(*count), 1);
  std::iota(defaultAxes.begin(), defaultAxes.end(), 0);
  KILN_ASSIGN_OR_RETURN(uint32_t begin, index(n.input(1), {}));
  KILN_ASSIGN_OR_RETURN(uint32_t end, index(n.input(2), {}));
  KILN_ASSIGN_OR_RETURN(uint32_t axes, index(n.input(3), defaultAxes));
  KILN_ASSIGN_OR_RETURN(uint32_t strides, index(n.input(4), ones));
  if (auto shape = ctx.staticShape(n.input(0))) {
    KILN_ASSIGN_OR_RETURN(begin, capNegativeStepStarts(ctx, ch, n, *shape, begin, axes, strides));
  }
  (void)rank;
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_StridedSlice,
           [](FBB& b) { return fb::CreateStridedSlice(b, 0, 0, 0, 0, 0).Union(); },
           {*x, begin, end, axes, strides}, {*y}); // the runtime's five-input order
  return Status::ok();
}

} // namespace kiln::ms
