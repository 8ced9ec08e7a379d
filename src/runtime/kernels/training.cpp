// Kernels of the ai.onnx.preview.training domain: Adagrad, Adam and Momentum steps, and Gradient.
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "kiln/runtime/executor.h"
#include "kiln/runtime/kernel.h"

namespace kiln::rt {
namespace {

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

// ---------------------------------------------------------------------------------------------
// Optimizers. Each takes R (learning rate) and T (update count) and then its tensors grouped by
// kind: X1..Xn, G1..Gn, then one run of n tensors per state kind (H for Adagrad, V for Momentum,
// V then H for Adam). Outputs are X1_new..Xn_new followed by the new states in the same grouping.
// ---------------------------------------------------------------------------------------------

struct StepScalars {
  double rate = 0;
  int64_t count = 0;
};

Status readStepScalars(const KernelContext& ctx, StepScalars& out) {
  if (ctx.input(0).elementCount() != 1 || ctx.input(1).elementCount() != 1)
    return ctx.fail("R and T must be scalars, got {} and {} elements", ctx.input(0).elementCount(),
                    ctx.input(1).elementCount());
  out.rate = elementAsDouble(ctx.input(0), 0);
  out.count = static_cast<int64_t>(elementAsDouble(ctx.input(1), 0));
  return Status::ok();
}

// Calls update(x, g, state, xNew, stateNew) for every element of every optimized tensor; the
// arithmetic runs in double whatever the storage type so float32 results round only once.
template <size_t States, typename Update> Status runOptimizer(KernelContext& ctx, Update&& update) {
  constexpr size_t perGroup = 2 + States;
  if (ctx.inputCount() < 2 + perGroup || (ctx.inputCount() - 2) % perGroup != 0)
    return ctx.fail("expected R, T and groups of {} tensors, got {} inputs", perGroup,
                    ctx.inputCount());
  const size_t n = (ctx.inputCount() - 2) / perGroup;
  if (ctx.outputCount() > n * (1 + States))
    return ctx.fail("{} outputs for {} optimized tensors", ctx.outputCount(), n);

  for (size_t k = 0; k < n; ++k) {
    const Tensor& x = ctx.input(2 + k);
    const Tensor& g = ctx.input(2 + n + k);
    const Tensor* state[States];
    for (size_t s = 0; s < States; ++s)
      state[s] = &ctx.input(2 + (2 + s) * n + k);
    const DType dtype = x.dtype();
    const uint64_t count = x.elementCount();
    auto matches = [&](const Tensor& t) { return t.dtype() == dtype && t.elementCount() == count; };
    bool same = matches(g);
    for (size_t s = 0; s < States; ++s)
      same = same && matches(*state[s]);
    if (!same)
      return ctx.fail("tensor group {}: X, G and the state tensors must share dtype and size", k);

    auto step = [&](auto zero) {
      using T = decltype(zero);
      OutTensor xOut(dtype, x.dims());
      std::vector<OutTensor> stateOut;
      for (size_t s = 0; s < States; ++s)
        stateOut.emplace_back(dtype, x.dims());
      const T* xp = reinterpret_cast<const T*>(x.data());
      const T* gp = reinterpret_cast<const T*>(g.data());
      const T* sp[States];
      T* so[States];
      for (size_t s = 0; s < States; ++s) {
        sp[s] = reinterpret_cast<const T*>(state[s]->data());
        so[s] = stateOut[s].data<T>();
      }
      T* xo = xOut.data<T>();
      double stateIn[States], stateNew[States];
      for (uint64_t i = 0; i < count; ++i) {
        for (size_t s = 0; s < States; ++s)
          stateIn[s] = static_cast<double>(sp[s][i]);
        double xNew = 0;
        update(static_cast<double>(xp[i]), static_cast<double>(gp[i]), stateIn, xNew, stateNew);
        xo[i] = static_cast<T>(xNew);
        for (size_t s = 0; s < States; ++s)
          so[s][i] = static_cast<T>(stateNew[s]);
      }
      ctx.setOutput(k, std::move(xOut).finish());
      for (size_t s = 0; s < States; ++s)
        ctx.setOutput((1 + s) * n + k, std::move(stateOut[s]).finish());
    };
    if (dtype == DType::Float32)
      step(float{});
    else if (dtype == DType::Float64)
      step(double{});
    else
      return ctx.unsupported("dtype {}", dtypeName(dtype));
  }
  return Status::ok();
}

Status adagrad(KernelContext& ctx) {
  StepScalars sc;
  KILN_TRY(readStepScalars(ctx, sc));
  const double decay = ctx.attrFloat("decay_factor", 0.0f);
  const double epsilon = ctx.attrFloat("epsilon", 1e-6f);
  const double norm = ctx.attrFloat("norm_coefficient", 0.0f);
  const double rate = sc.rate / (1.0 + static_cast<double>(sc.count) * decay);
  return runOptimizer<1>(ctx, [=](double x, double g, const double* h, double& xNew, double* hNew) {
    const double gReg = norm * x + g; // gradient of the L2 term 0.5 * norm * ||X||^2 added
    hNew[0] = h[0] + gReg * gReg;
    xNew = x - rate * gReg / (std::sqrt(hNew[0]) + epsilon);
  });
}

Status adam(KernelContext& ctx) {
  StepScalars sc;
  KILN_TRY(readStepScalars(ctx, sc));
  const double alpha = ctx.attrFloat("alpha", 0.9f);
  const double beta = ctx.attrFloat("beta", 0.999f);
  const double epsilon = ctx.attrFloat("epsilon", 1e-6f);
  const double norm = ctx.attrFloat("norm_coefficient", 0.0f);
  const double normPost = ctx.attrFloat("norm_coefficient_post", 0.0f);
  // Bias correction of both moving averages folded into the rate; undefined at T == 0, where the
  // spec keeps R as is.
  const double t = static_cast<double>(sc.count);
  const double rate =
      sc.count > 0 ? sc.rate * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t))
                   : sc.rate;
  return runOptimizer<2>(
      ctx, [=](double x, double g, const double* vh, double& xNew, double* vhNew) {
        const double gReg = norm * x + g;
        vhNew[0] = alpha * vh[0] + (1.0 - alpha) * gReg;
        vhNew[1] = beta * vh[1] + (1.0 - beta) * gReg * gReg;
        const double stepped = x - rate * vhNew[0] / (std::sqrt(vhNew[1]) + epsilon);
        xNew = (1.0 - normPost) * stepped;
      });
}

Status momentum(KernelContext& ctx) {
  StepScalars sc;
  KILN_TRY(readStepScalars(ctx, sc));
  for (const char* name : {"alpha", "beta", "norm_coefficient", "mode"})
    if (!ctx.hasAttr(name)) return ctx.fail("missing required attribute '{}'", name);
  const double alpha = ctx.attrFloat("alpha", 0.0f);
  const double beta = ctx.attrFloat("beta", 0.0f);
  const double norm = ctx.attrFloat("norm_coefficient", 0.0f);
  const std::string mode = ctx.attrString("mode");
  if (mode != "standard" && mode != "nesterov")
    return ctx.fail("mode must be 'standard' or 'nesterov', got '{}'", mode);
  const bool nesterov = mode == "nesterov";
  // The first step takes the whole gradient: there is no momentum yet to blend it with.
  const double gradScale = sc.count > 0 ? beta : 1.0;
  const double rate = sc.rate;
  return runOptimizer<1>(ctx, [=](double x, double g, const double* v, double& xNew, double* vNew) {
    const double gReg = norm * x + g;
    vNew[0] = alpha * v[0] + gradScale * gReg;
    xNew = nesterov ? x - rate * (gReg + alpha * vNew[0]) : x - rate * vNew[0];
  });
}

// ---------------------------------------------------------------------------------------------
// Gradient: reverse-mode differentiation of y with respect to xs over the graph that holds the
// Gradient node. The node's inputs are the values of xs then zs; everything else y needs is
// recomputed from them (and from initializers) with the registered forward kernels.
// ---------------------------------------------------------------------------------------------

std::vector<double> toDoubles(const Tensor& t) {
  std::vector<double> out(t.elementCount());
  for (uint64_t i = 0; i < out.size(); ++i)
    out[i] = elementAsDouble(t, i);
  return out;
}

// Initializers may alias the mapped file at any offset; kernels read typed pointers.
Tensor alignedTensor(const Tensor& t) {
  if (!t.data() || reinterpret_cast<uintptr_t>(t.data()) % 16 == 0) return t;
  std::vector<uint8_t> bytes(t.data(), t.data() + t.byteSize());
  return Tensor(t.dtype(), t.dims(), Buffer::owned(std::move(bytes)));
}

bool isFloatType(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16;
}

Tensor fromDoubles(DType dtype, const std::vector<int64_t>& dims, const std::vector<double>& v) {
  OutTensor out(dtype, dims);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::Float32)
      out.data<float>()[i] = static_cast<float>(v[i]);
    else if (dtype == DType::Float64)
      out.data<double>()[i] = v[i];
    else
      out.data<uint16_t>()[i] = floatToHalf(static_cast<float>(v[i]));
  }
  return std::move(out).finish();
}

class ReverseDiff {
 public:
  explicit ReverseDiff(KernelContext& ctx) : ctx_(ctx) {}

  Status run() {
    const Attribute* xsAttr = ctx_.attr("xs");
    const Attribute* yAttr = ctx_.attr("y");
    if (!xsAttr || xsAttr->kind() != AttrKind::Strings || !yAttr ||
        yAttr->kind() != AttrKind::String)
      return ctx_.fail("needs the attributes xs (strings) and y (string)");
    const std::vector<std::string>& xs = xsAttr->asStrings();
    std::vector<std::string> zs;
    if (const Attribute* zsAttr = ctx_.attr("zs"); zsAttr && zsAttr->kind() == AttrKind::Strings)
      zs = zsAttr->asStrings();
    if (ctx_.inputCount() != xs.size() + zs.size())
      return ctx_.fail("{} inputs for {} xs and {} zs", ctx_.inputCount(), xs.size(), zs.size());
    if (ctx_.outputCount() > xs.size())
      return ctx_.fail("{} outputs for {} xs", ctx_.outputCount(), xs.size());

    const Graph& graph = *ctx_.node().owner();
    std::vector<const Value*> xValues;
    for (size_t i = 0; i < xs.size() + zs.size(); ++i) {
      const std::string& name = i < xs.size() ? xs[i] : zs[i - xs.size()];
      const Value* v = graph.lookupValue(name);
      if (!v) return ctx_.fail("no value named '{}' in the graph", name);
      if (!ctx_.hasInput(i) || !ctx_.inputValue(i).isTensor())
        return ctx_.fail("input {} ('{}') must be a tensor", i, name);
      values_[v] = ctx_.input(i);
      if (i < xs.size()) {
        if (!isFloatType(ctx_.input(i).dtype()))
          return ctx_.unsupported("x '{}' has dtype {}", name, dtypeName(ctx_.input(i).dtype()));
        xValues.push_back(v);
      }
    }
    const Value* y = graph.lookupValue(yAttr->asString());
    if (!y) return ctx_.fail("no value named '{}' in the graph", yAttr->asString());

    KILN_TRY(forward(graph, y));
    KILN_TRY(backward(xValues, y));
    for (size_t i = 0; i < ctx_.outputCount(); ++i) {
      const Tensor& x = values_.at(xValues[i]);
      auto it = grads_.find(xValues[i]);
      std::vector<double> zeros;
      if (it == grads_.end()) zeros.assign(x.elementCount(), 0.0);
      ctx_.setOutput(i, fromDoubles(x.dtype(), x.dims(), it == grads_.end() ? zeros : it->second));
    }
    return Status::ok();
  }

 private:
  // Finds the nodes y needs beyond the known values, then runs them in graph (topological) order.
  Status forward(const Graph& graph, const Value* y) {
    std::unordered_set<const Node*> needed;
    std::vector<const Value*> stack{y};
    while (!stack.empty()) {
      const Value* v = stack.back();
      stack.pop_back();
      if (values_.count(v)) continue;
      if (v->isInitializer()) {
        values_[v] = alignedTensor(v->initializer());
        continue;
      }
      const Node* producer = v->producer();
      if (!producer)
        return ctx_.unsupported("'{}' is needed for y but is neither in xs/zs nor computed",
                                v->name());
      if (producer == &ctx_.node()) return ctx_.fail("y depends on the Gradient node itself");
      if (producer->owner() != &graph)
        return ctx_.unsupported("'{}' comes from another graph than the Gradient node", v->name());
      if (!needed.insert(producer).second) continue;
      for (const Value* in : producer->inputs())
        if (in) stack.push_back(in);
    }
    for (const auto& nodePtr : graph.nodes()) {
      const Node* node = nodePtr.get();
      if (!needed.count(node)) continue;
      std::vector<RtValue> holders(node->inputs().size());
      std::vector<const RtValue*> inputs(node->inputs().size(), nullptr);
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        const Value* in = node->input(i);
        if (!in) continue;
        auto it = values_.find(in);
        if (it == values_.end()) return ctx_.fail("'{}' is used before it is computed", in->name());
        holders[i] = RtValue::ofTensor(it->second);
        inputs[i] = &holders[i];
      }
      auto outs = Executor::evaluateNode(*node, inputs, ctx_.opset());
      if (!outs) return outs.status();
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        if (!node->output(i)) continue;
        if (!(*outs)[i].isTensor())
          return ctx_.unsupported("{} output '{}' is not a tensor", node->opType(),
                                  node->output(i)->name());
        values_[node->output(i)] = (*outs)[i].tensor;
      }
      order_.push_back(node);
    }
    if (!values_.count(y)) return ctx_.fail("y '{}' was not computed", y->name());
    return Status::ok();
  }

  std::vector<double>& gradOf(const Value* v) {
    auto [it, inserted] = grads_.try_emplace(v);
    if (inserted) it->second.assign(values_.at(v).elementCount(), 0.0);
    return it->second;
  }

  Status backward(const std::vector<const Value*>& xs, const Value* y) {
    // Only nodes between xs and y need a derivative; the rest are constants to the gradient.
    std::unordered_set<const Value*> dependsOnX(xs.begin(), xs.end());
    for (const Node* node : order_) {
      bool depends = false;
      for (const Value* in : node->inputs())
        depends = depends || (in && dependsOnX.count(in));
      if (depends)
        for (const Value* out : node->outputs())
          if (out) dependsOnX.insert(out);
    }
    gradOf(y).assign(values_.at(y).elementCount(), 1.0);

    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      const Node* node = *it;
      bool reached = false;
      for (const Value* out : node->outputs())
        reached = reached || (out && grads_.count(out) && dependsOnX.count(out));
      if (!reached) continue;
      if (node->outputs().size() != 1 || !node->output(0) || !grads_.count(node->output(0)))
        return ctx_.unsupported("cannot differentiate {} (node '{}'): only single-output ops",
                                node->opType(), node->name());
      KILN_TRY(differentiate(*node, grads_.at(node->output(0))));
    }
    return Status::ok();
  }

  // dOut points into grads_, whose elements stay put while other entries are added.
  Status differentiate(const Node& node, const std::vector<double>& dOut) {
    const std::string& op = node.opType();
    const bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (defaultDomain && (op == "Identity" || op == "Neg") && node.inputs().size() == 1 &&
        node.outputs().size() == 1) {
      std::vector<double>& d = gradOf(node.input(0));
      const double sign = op == "Neg" ? -1.0 : 1.0;
      for (size_t i = 0; i < d.size(); ++i)
        d[i] += sign * dOut[i];
      return Status::ok();
    }
    if (defaultDomain && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") &&
        node.inputs().size() == 2 && node.input(0) && node.input(1)) {
      const Value* a = node.input(0);
      const Value* b = node.input(1);
      const std::vector<int64_t>& outDims = values_.at(node.output(0)).dims();
      const std::vector<int64_t>& aDims = values_.at(a).dims();
      const std::vector<int64_t>& bDims = values_.at(b).dims();
      std::vector<double> av, bv;
      if (op == "Mul" || op == "Div") {
        av = toDoubles(values_.at(a));
        bv = toDoubles(values_.at(b));
      }
      // Both gradients are summed into local buffers first: a and b may be the same value.
      std::vector<double> da(values_.at(a).elementCount(), 0.0);
      std::vector<double> db(values_.at(b).elementCount(), 0.0);
      if (op == "Add" || op == "Sub") {
        const double sign = op == "Sub" ? -1.0 : 1.0;
        forEachBroadcast2(outDims, aDims, bDims, [&](uint64_t o, int64_t ia, int64_t ib) {
          da[ia] += dOut[o];
          db[ib] += sign * dOut[o];
        });
      } else if (op == "Mul") {
        forEachBroadcast2(outDims, aDims, bDims, [&](uint64_t o, int64_t ia, int64_t ib) {
          da[ia] += dOut[o] * bv[ib];
          db[ib] += dOut[o] * av[ia];
        });
      } else {
        forEachBroadcast2(outDims, aDims, bDims, [&](uint64_t o, int64_t ia, int64_t ib) {
          da[ia] += dOut[o] / bv[ib];
          db[ib] -= dOut[o] * av[ia] / (bv[ib] * bv[ib]);
        });
      }
      std::vector<double>& ga = gradOf(a);
      for (size_t i = 0; i < da.size(); ++i)
        ga[i] += da[i];
      std::vector<double>& gb = gradOf(b);
      for (size_t i = 0; i < db.size(); ++i)
        gb[i] += db[i];
      return Status::ok();
    }
    return ctx_.unsupported("cannot differentiate {} (node '{}') on the path from xs to y", op,
                            node.name());
  }

  KernelContext& ctx_;
  std::unordered_map<const Value*, Tensor> values_;
  std::unordered_map<const Value*, std::vector<double>> grads_;
  std::vector<const Node*> order_; // forward nodes in evaluation order
};

Status gradient(KernelContext& ctx) { return ReverseDiff(ctx).run(); }

[[maybe_unused]] const bool registered = registerKernel(kTrainingDomain, "Adagrad", adagrad) &&
                                         registerKernel(kTrainingDomain, "Adam", adam) &&
                                         registerKernel(kTrainingDomain, "Momentum", momentum) &&
                                         registerKernel(kTrainingDomain, "Gradient", gradient);

} // namespace
} // namespace kiln::rt
