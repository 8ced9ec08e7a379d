// Control-flow kernels: If, Loop and Scan run their body subgraphs through the executor, which
// resolves outer-scope reads through the scope chain.
#include <algorithm>

#include "kiln/runtime/kernel.h"
#include "shape_util.h"

namespace kiln::rt {
namespace {

const Graph* graphAttr(const KernelContext& ctx, const std::string& name) {
  const Attribute* a = ctx.attr(name);
  return a && a->kind() == AttrKind::Graph ? a->asGraph().get() : nullptr;
}

bool truthOf(const Tensor& t) { return t.elementCount() > 0 && elementAsDouble(t, 0) != 0.0; }

// Element i of axis, with that axis removed.
std::optional<Tensor> sliceAt(const Tensor& t, int64_t axis, int64_t i) {
  auto part = shape::sliceAxis(t, axis, i, 1);
  if (!part) return std::nullopt;
  std::vector<int64_t> dims = part->dims();
  dims.erase(dims.begin() + axis);
  return shape::reshaped(*part, std::move(dims));
}

// Stacks equally shaped tensors along a new axis; `empty` describes the result for no items.
Expected<Tensor> stack(const KernelContext& ctx, const std::vector<Tensor>& items, int64_t axis,
                       const Value* declared) {
  if (items.empty()) {
    // No iteration ran: a zero-length axis in front of the declared per-iteration shape.
    std::vector<int64_t> dims;
    if (declared && declared->shape().isStatic()) dims = declared->shape().staticDims();
    axis = std::clamp<int64_t>(axis, 0, static_cast<int64_t>(dims.size()));
    dims.insert(dims.begin() + axis, 0);
    DType dtype =
        declared && declared->dtype() != DType::Undefined ? declared->dtype() : DType::Float32;
    if (dtype == DType::String) return Tensor::strings(std::move(dims), {});
    return OutTensor(dtype, std::move(dims)).finish();
  }
  const Tensor& first = items.front();
  const auto rank = static_cast<int64_t>(first.dims().size());
  auto a = normalizeAxis(axis, rank + 1);
  if (!a) return ctx.fail("scan output axis {} out of range for rank {}", axis, rank + 1);
  std::vector<Tensor> expanded;
  expanded.reserve(items.size());
  for (const Tensor& t : items) {
    if (t.dims() != first.dims() || t.dtype() != first.dtype())
      return ctx.fail("scan output changes shape between iterations: [{}] vs [{}]",
                      fmt::join(t.dims(), ","), fmt::join(first.dims(), ","));
    std::vector<int64_t> dims = t.dims();
    dims.insert(dims.begin() + *a, 1);
    expanded.push_back(shape::reshaped(t, std::move(dims)));
  }
  std::vector<const Tensor*> parts;
  for (const Tensor& t : expanded)
    parts.push_back(&t);
  auto joined = shape::concatenated(parts, *a);
  if (!joined) return ctx.unsupported("dtype {} in a scan output", dtypeName(first.dtype()));
  return std::move(*joined);
}

Status ifOp(KernelContext& ctx) {
  const bool cond = truthOf(ctx.input(0));
  const Graph* branch = graphAttr(ctx, cond ? "then_branch" : "else_branch");
  if (!branch) return ctx.fail("missing {}", cond ? "then_branch" : "else_branch");
  auto outs = ctx.runSubgraph(*branch, {});
  if (!outs) return outs.status();
  if (outs->size() < ctx.outputCount())
    return ctx.fail("branch produced {} outputs, node has {}", outs->size(), ctx.outputCount());
  for (size_t i = 0; i < ctx.outputCount(); ++i)
    ctx.setOutputValue(i, std::move((*outs)[i]));
  return Status::ok();
}

Status loop(KernelContext& ctx) {
  const Graph* body = graphAttr(ctx, "body");
  if (!body) return ctx.fail("missing body");
  const bool bounded = ctx.hasInput(0);
  const int64_t tripCount = bounded ? ctx.inputInts(0).at(0) : 0;
  bool cond = ctx.hasInput(1) ? truthOf(ctx.input(1)) : true;
  const size_t carriedCount = ctx.inputCount() > 2 ? ctx.inputCount() - 2 : 0;
  std::vector<RtValue> carried;
  for (size_t i = 0; i < carriedCount; ++i)
    carried.push_back(ctx.node().input(i + 2) ? ctx.inputValue(i + 2) : RtValue{});
  if (body->outputs().size() < 1 + carriedCount)
    return ctx.fail("body has {} outputs for {} loop-carried values", body->outputs().size(),
                    carriedCount);
  const size_t scanCount = body->outputs().size() - 1 - carriedCount;
  std::vector<std::vector<Tensor>> scans(scanCount);
  for (int64_t i = 0; (!bounded || i < tripCount) && cond; ++i) {
    std::vector<RtValue> args;
    args.reserve(2 + carriedCount);
    args.push_back(RtValue::ofTensor(scalarInt64Tensor(i)));
    args.push_back(RtValue::ofTensor(makeTensor<uint8_t>(DType::Bool, {}, {cond})));
    for (RtValue& v : carried)
      args.push_back(std::move(v));
    auto outs = ctx.runSubgraph(*body, args);
    if (!outs) return outs.status();
    cond = (*outs)[0].isTensor() ? truthOf((*outs)[0].tensor) : false;
    for (size_t c = 0; c < carriedCount; ++c)
      carried[c] = std::move((*outs)[1 + c]);
    for (size_t s = 0; s < scanCount; ++s) {
      RtValue& v = (*outs)[1 + carriedCount + s];
      if (!v.isTensor()) return ctx.unsupported("scan output {} is not a tensor", s);
      scans[s].push_back(std::move(v.tensor));
    }
  }
  for (size_t c = 0; c < carriedCount && c < ctx.outputCount(); ++c)
    ctx.setOutputValue(c, std::move(carried[c]));
  for (size_t s = 0; s < scanCount && carriedCount + s < ctx.outputCount(); ++s) {
    if (!ctx.wantsOutput(carriedCount + s)) continue;
    KILN_ASSIGN_OR_RETURN(Tensor stacked,
                          stack(ctx, scans[s], 0, body->outputs()[1 + carriedCount + s]));
    ctx.setOutput(carriedCount + s, std::move(stacked));
  }
  return Status::ok();
}

struct ScanConfig {
  std::vector<int64_t> inputAxes, inputReverse, outputAxes, outputReverse;
};

// One scan over `scanInputs` (each iterated along its own axis); returns final states followed by
// stacked scan outputs.
Expected<std::vector<Tensor>> runScan(KernelContext& ctx, const Graph& body,
                                      std::vector<Tensor> states,
                                      const std::vector<const Tensor*>& scanInputs,
                                      const ScanConfig& config) {
  const size_t stateCount = states.size();
  if (body.outputs().size() < stateCount) return ctx.fail("body has fewer outputs than states");
  const size_t outCount = body.outputs().size() - stateCount;
  std::vector<int64_t> axes(scanInputs.size());
  int64_t length = -1;
  for (size_t j = 0; j < scanInputs.size(); ++j) {
    const auto rank = static_cast<int64_t>(scanInputs[j]->dims().size());
    auto a = normalizeAxis(j < config.inputAxes.size() ? config.inputAxes[j] : 0, rank);
    if (!a) return ctx.fail("scan input axis out of range for input {}", j);
    axes[j] = *a;
    const int64_t len = scanInputs[j]->dims()[static_cast<size_t>(*a)];
    if (length >= 0 && len != length)
      return ctx.fail("scan inputs differ in sequence length ({} vs {})", len, length);
    length = len;
  }
  if (length < 0) return ctx.fail("no scan inputs");
  std::vector<std::vector<Tensor>> outs(outCount);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<RtValue> args;
    for (Tensor& s : states)
      args.push_back(RtValue::ofTensor(s));
    for (size_t j = 0; j < scanInputs.size(); ++j) {
      const bool reverse = j < config.inputReverse.size() && config.inputReverse[j] != 0;
      auto item = sliceAt(*scanInputs[j], axes[j], reverse ? length - 1 - t : t);
      if (!item) return ctx.unsupported("dtype {}", dtypeName(scanInputs[j]->dtype()));
      args.push_back(RtValue::ofTensor(std::move(*item)));
    }
    auto results = ctx.runSubgraph(body, args);
    if (!results) return results.status();
    for (size_t i = 0; i < results->size(); ++i)
      if (!(*results)[i].isTensor()) return ctx.unsupported("body output {} is not a tensor", i);
    for (size_t s = 0; s < stateCount; ++s)
      states[s] = std::move((*results)[s].tensor);
    for (size_t k = 0; k < outCount; ++k)
      outs[k].push_back(std::move((*results)[stateCount + k].tensor));
  }
  std::vector<Tensor> result = std::move(states);
  for (size_t k = 0; k < outCount; ++k) {
    if (k < config.outputReverse.size() && config.outputReverse[k] != 0)
      std::reverse(outs[k].begin(), outs[k].end());
    const int64_t axis = k < config.outputAxes.size() ? config.outputAxes[k] : 0;
    KILN_ASSIGN_OR_RETURN(Tensor stacked,
                          stack(ctx, outs[k], axis, body.outputs()[stateCount + k]));
    result.push_back(std::move(stacked));
  }
  return result;
}

Status scan(KernelContext& ctx) {
  const Graph* body = graphAttr(ctx, "body");
  if (!body) return ctx.fail("missing body");
  const auto scanCount = static_cast<size_t>(ctx.attrInt("num_scan_inputs", 0));
  if (ctx.opset() >= 9) {
    if (scanCount == 0 || scanCount > ctx.inputCount()) return ctx.fail("bad num_scan_inputs");
    const size_t stateCount = ctx.inputCount() - scanCount;
    std::vector<Tensor> states;
    std::vector<const Tensor*> scanInputs;
    for (size_t i = 0; i < ctx.inputCount(); ++i) {
      if (!ctx.hasInput(i)) return ctx.fail("input {} is missing", i);
      if (i < stateCount)
        states.push_back(ctx.input(i));
      else
        scanInputs.push_back(&ctx.input(i));
    }
    ScanConfig config{ctx.attrInts("scan_input_axes"), ctx.attrInts("scan_input_directions"),
                      ctx.attrInts("scan_output_axes"), ctx.attrInts("scan_output_directions")};
    KILN_ASSIGN_OR_RETURN(auto results, runScan(ctx, *body, std::move(states), scanInputs, config));
    for (size_t i = 0; i < results.size() && i < ctx.outputCount(); ++i)
      ctx.setOutput(i, std::move(results[i]));
    return Status::ok();
  }
  // Opset 8: input 0 is optional sequence_lens; states and scan inputs carry a leading batch axis
  // and scan inputs iterate axis 1.
  if (scanCount == 0 || scanCount + 1 > ctx.inputCount()) return ctx.fail("bad num_scan_inputs");
  const size_t stateCount = ctx.inputCount() - 1 - scanCount;
  std::vector<const Tensor*> all;
  for (size_t i = 1; i < ctx.inputCount(); ++i) {
    if (!ctx.hasInput(i)) return ctx.fail("input {} is missing", i);
    all.push_back(&ctx.input(i));
  }
  const int64_t batch = all.front()->dims().empty() ? 0 : all.front()->dims()[0];
  for (const Tensor* t : all)
    if (t->dims().empty() || t->dims()[0] != batch) return ctx.fail("inputs differ in batch size");
  const Tensor& firstScan = *all[stateCount];
  if (firstScan.dims().size() < 2) return ctx.fail("scan inputs need [batch, sequence, ...]");
  const int64_t length = firstScan.dims()[1];
  if (ctx.hasInput(0))
    for (int64_t len : ctx.inputInts(0))
      if (len != length)
        return ctx.unsupported("sequence_lens shorter than the sequence axis is not supported");
  ScanConfig config;
  config.inputReverse = ctx.attrInts("directions");
  std::vector<std::vector<Tensor>> perBatch(ctx.outputCount());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> states, items;
    for (size_t i = 0; i < all.size(); ++i) {
      auto part = sliceAt(*all[i], 0, b);
      if (!part) return ctx.unsupported("dtype {}", dtypeName(all[i]->dtype()));
      (i < stateCount ? states : items).push_back(std::move(*part));
    }
    std::vector<const Tensor*> scanInputs;
    for (const Tensor& t : items)
      scanInputs.push_back(&t);
    KILN_ASSIGN_OR_RETURN(auto results, runScan(ctx, *body, std::move(states), scanInputs, config));
    for (size_t i = 0; i < results.size() && i < perBatch.size(); ++i)
      perBatch[i].push_back(std::move(results[i]));
  }
  for (size_t i = 0; i < perBatch.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor stacked, stack(ctx, perBatch[i], 0, nullptr));
    ctx.setOutput(i, std::move(stacked));
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL("If", ifOp);
KILN_REGISTER_KERNEL("Loop", loop);
KILN_REGISTER_KERNEL("Scan", scan);

} // namespace
} // namespace kiln::rt
