// Sequence and Optional kernels: build, index, edit, split into and concatenate from tensor
// sequences; wrap and unwrap optionals.
#include <algorithm>

#include "kiln/runtime/kernel.h"
#include "shape_util.h"

namespace kiln::rt {
namespace {

const RtValue* sequenceInput(const KernelContext& ctx, size_t i) {
  if (i >= ctx.inputCount() || !ctx.hasInput(i)) return nullptr;
  const RtValue& v = ctx.inputValue(i);
  return v.isSequence() ? &v : nullptr;
}

DType elementDType(const RtValue& seq) {
  if (!seq.sequence.empty()) return seq.sequence.front().dtype();
  return seq.sequenceDType;
}

// Position input (scalar) normalized into [0, limit]; `limit` is the sequence length for
// insertion and length - 1 for access.
std::optional<int64_t> positionOf(const KernelContext& ctx, size_t i, int64_t length,
                                  int64_t fallback, bool insert) {
  if (!ctx.hasInput(i)) return fallback;
  int64_t p = ctx.inputInts(i).at(0);
  if (p < 0) p += length;
  const int64_t hi = insert ? length : length - 1;
  if (p < 0 || p > hi) return std::nullopt;
  return p;
}

Status sequenceEmpty(KernelContext& ctx) {
  auto dtype = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("dtype", 1)));
  ctx.setOutputValue(0, RtValue::ofSequence({}, dtype.value_or(DType::Float32)));
  return Status::ok();
}

Status sequenceConstruct(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.inputCount(); ++i) {
    if (!ctx.hasInput(i) || !ctx.inputValue(i).isTensor())
      return ctx.fail("input {} is not a tensor", i);
    items.push_back(ctx.input(i));
  }
  DType dtype = items.empty() ? DType::Undefined : items.front().dtype();
  ctx.setOutputValue(0, RtValue::ofSequence(std::move(items), dtype));
  return Status::ok();
}

Status sequenceAt(KernelContext& ctx) {
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  const auto n = static_cast<int64_t>(seq->sequence.size());
  auto p = positionOf(ctx, 1, n, 0, false);
  if (!p || !ctx.hasInput(1)) return ctx.fail("position out of range for {} elements", n);
  ctx.setOutput(0, seq->sequence[static_cast<size_t>(*p)]);
  return Status::ok();
}

Status sequenceInsert(KernelContext& ctx) {
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  const auto n = static_cast<int64_t>(seq->sequence.size());
  auto p = positionOf(ctx, 2, n, n, true);
  if (!p) return ctx.fail("position out of range for {} elements", n);
  std::vector<Tensor> items = seq->sequence;
  items.insert(items.begin() + *p, ctx.input(1));
  ctx.setOutputValue(0, RtValue::ofSequence(std::move(items), ctx.input(1).dtype()));
  return Status::ok();
}

Status sequenceErase(KernelContext& ctx) {
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  const auto n = static_cast<int64_t>(seq->sequence.size());
  auto p = positionOf(ctx, 1, n, n - 1, false);
  if (!p || *p < 0) return ctx.fail("position out of range for {} elements", n);
  std::vector<Tensor> items = seq->sequence;
  items.erase(items.begin() + *p);
  ctx.setOutputValue(0, RtValue::ofSequence(std::move(items), elementDType(*seq)));
  return Status::ok();
}

Status sequenceLength(KernelContext& ctx) {
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  ctx.setOutput(0, scalarInt64Tensor(static_cast<int64_t>(seq->sequence.size())));
  return Status::ok();
}

Status splitToSequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto rank = static_cast<int64_t>(x.dims().size());
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), rank);
  if (!axis) return ctx.fail("axis out of range");
  const int64_t dim = x.dims()[static_cast<size_t>(*axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.hasInput(1)) {
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = ctx.attrInt("keepdims", 1) == 0;
  } else if (ctx.input(1).dims().empty()) {
    const int64_t chunk = ctx.inputInts(1).at(0);
    if (chunk <= 0) return ctx.fail("split size {} must be positive", chunk);
    for (int64_t left = dim; left > 0; left -= chunk)
      sizes.push_back(std::min(chunk, left));
  } else {
    sizes = ctx.inputInts(1);
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0) return ctx.fail("negative split size {}", s);
      sum += s;
    }
    if (sum != dim) return ctx.fail("split sizes sum to {}, axis has {}", sum, dim);
  }
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : sizes) {
    auto part = shape::sliceAxis(x, *axis, start, len);
    if (!part) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
    if (squeeze) {
      std::vector<int64_t> dims = part->dims();
      dims.erase(dims.begin() + *axis);
      part = shape::reshaped(*part, std::move(dims));
    }
    items.push_back(std::move(*part));
    start += len;
  }
  ctx.setOutputValue(0, RtValue::ofSequence(std::move(items), x.dtype()));
  return Status::ok();
}

Status concatFromSequence(KernelContext& ctx) {
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  if (seq->sequence.empty()) return ctx.fail("cannot concatenate an empty sequence");
  const bool newAxis = ctx.attrInt("new_axis", 0) != 0;
  const Tensor& first = seq->sequence.front();
  const auto rank = static_cast<int64_t>(first.dims().size());
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), newAxis ? rank + 1 : rank);
  if (!axis) return ctx.fail("axis out of range");
  std::vector<Tensor> stacked;
  std::vector<const Tensor*> parts;
  for (const Tensor& t : seq->sequence) {
    if (t.dtype() != first.dtype() || t.dims().size() != first.dims().size())
      return ctx.fail("sequence elements differ in dtype or rank");
    for (size_t d = 0; d < t.dims().size(); ++d)
      if ((newAxis || static_cast<int64_t>(d) != *axis) && t.dims()[d] != first.dims()[d])
        return ctx.fail("sequence elements differ off the concatenation axis");
  }
  if (newAxis) {
    stacked.reserve(seq->sequence.size());
    for (const Tensor& t : seq->sequence) {
      std::vector<int64_t> dims = t.dims();
      dims.insert(dims.begin() + *axis, 1);
      stacked.push_back(shape::reshaped(t, std::move(dims)));
    }
    for (const Tensor& t : stacked)
      parts.push_back(&t);
  } else {
    for (const Tensor& t : seq->sequence)
      parts.push_back(&t);
  }
  return shape::setMoved(ctx, 0, shape::concatenated(parts, *axis), first.dtype());
}

// SequenceMap: runs the body once per sequence position; sequence inputs contribute their i-th
// element, tensor inputs are passed whole every time.
Status sequenceMap(KernelContext& ctx) {
  const Attribute* body = ctx.attr("body");
  if (!body || body->kind() != AttrKind::Graph) return ctx.fail("missing body graph");
  const RtValue* seq = sequenceInput(ctx, 0);
  if (!seq) return ctx.fail("input 0 is not a sequence");
  const size_t n = seq->sequence.size();
  for (size_t i = 1; i < ctx.inputCount(); ++i)
    if (ctx.hasInput(i) && ctx.inputValue(i).isSequence() && ctx.inputValue(i).sequence.size() != n)
      return ctx.fail("sequence input {} has {} elements, expected {}", i,
                      ctx.inputValue(i).sequence.size(), n);
  const Graph& graph = *body->asGraph();
  std::vector<std::vector<Tensor>> results(ctx.outputCount());
  for (size_t k = 0; k < n; ++k) {
    std::vector<RtValue> args;
    for (size_t i = 0; i < ctx.inputCount(); ++i) {
      if (!ctx.hasInput(i)) {
        args.emplace_back();
        continue;
      }
      const RtValue& v = ctx.inputValue(i);
      args.push_back(v.isSequence() ? RtValue::ofTensor(v.sequence[k]) : v);
    }
    auto outs = ctx.runSubgraph(graph, args);
    if (!outs) return outs.status();
    for (size_t o = 0; o < results.size() && o < outs->size(); ++o) {
      if (!(*outs)[o].isTensor()) return ctx.unsupported("body output {} is not a tensor", o);
      results[o].push_back((*outs)[o].tensor);
    }
  }
  for (size_t o = 0; o < results.size(); ++o) {
    DType dtype = o < graph.outputs().size() ? graph.outputs()[o]->dtype() : DType::Undefined;
    if (!results[o].empty()) dtype = results[o].front().dtype();
    ctx.setOutputValue(o, RtValue::ofSequence(std::move(results[o]), dtype));
  }
  return Status::ok();
}

Status optional(KernelContext& ctx) {
  if (ctx.hasInput(0))
    ctx.setOutputValue(0, ctx.inputValue(0));
  else
    ctx.setOutputValue(0, RtValue::none());
  return Status::ok();
}

Status optionalHasElement(KernelContext& ctx) {
  ctx.setOutput(0, makeTensor<uint8_t>(DType::Bool, {}, {static_cast<uint8_t>(ctx.hasInput(0))}));
  return Status::ok();
}

Status optionalGetElement(KernelContext& ctx) {
  if (!ctx.hasInput(0)) return ctx.fail("the optional is empty");
  ctx.setOutputValue(0, ctx.inputValue(0));
  return Status::ok();
}

KILN_REGISTER_KERNEL("SequenceEmpty", sequenceEmpty);
KILN_REGISTER_KERNEL("SequenceConstruct", sequenceConstruct);
KILN_REGISTER_KERNEL("SequenceAt", sequenceAt);
KILN_REGISTER_KERNEL("SequenceInsert", sequenceInsert);
KILN_REGISTER_KERNEL("SequenceErase", sequenceErase);
KILN_REGISTER_KERNEL("SequenceLength", sequenceLength);
KILN_REGISTER_KERNEL("SplitToSequence", splitToSequence);
KILN_REGISTER_KERNEL("ConcatFromSequence", concatFromSequence);
KILN_REGISTER_KERNEL("SequenceMap", sequenceMap);
KILN_REGISTER_KERNEL("Optional", optional);
KILN_REGISTER_KERNEL("OptionalHasElement", optionalHasElement);
KILN_REGISTER_KERNEL("OptionalGetElement", optionalGetElement);

} // namespace
} // namespace kiln::rt
