// expand-grid-sample: rewrites 2-D GridSample into standard ops, with the executor's sampling rules
// (src/runtime/kernels/grid_sample.cpp), for targets without the op
// (kiln/passes/expand_grid_sample.h).
//
//   X [N, C, H, W], Grid [N, Ho, Wo, 2] (x then y, in [-1, 1])
//   per axis (x: length W, y: length H), elementwise over [N, Ho, Wo]:
//     pos = align_corners ? (g + 1) / 2 · (len − 1) : ((g + 1) · len − 1) / 2      (Round: nearest)
//     border: Clip(pos, 0, len − 1) (cubic without align_corners: only outside [−0.5, len − 0.5])
//     reflection: pos folded into [lo, hi] = lo + R − |((pos − lo) mod 2R) − R|, R = hi − lo
//     taps: nearest pos; linear Floor(pos) + {0, 1} with weights {1 − f, f}; cubic
//     Floor(pos) + {−1, 0, 1, 2} with the A = −0.75 convolution weights of f = pos − Floor(pos)
//     zeros: a tap outside [0, len − 1] gets weight 0; every tap index is clipped into the image
//   Y = Σ over (y tap, x tap) of wy · wx · Gather(X as [N·H·W, C], n·H·W + iy·W + ix)
//     → [N, Ho, Wo, C] → Transpose [N, C, Ho, Wo]
// Indices are computed in the data's float type (exact below 2^24 pixels) and cast to int32.
#include "kiln/passes/expand_grid_sample.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct Plan {
  DType dtype = DType::Undefined;
  std::vector<int64_t> x, grid;
  Mode mode = Mode::Linear;
  Padding padding = Padding::Zeros;
  bool alignCorners = false;
};

Expected<Plan> planOf(const Node& n, int64_t opset) {
  auto fail = [](const std::string& why) -> Expected<Plan> {
    return Status(ErrorCode::BadAttribute, why, "");
  };
  if (n.opType() != "GridSample" || (!n.domain().empty() && n.domain() != "ai.onnx"))
    return fail("not a GridSample");
  Plan p;
  const Value* x = n.input(0);
  const Value* grid = n.input(1);
  if (!x || !grid) return fail("X and grid are required");
  if (!x->shape().isStatic() || !grid->shape().isStatic())
    return fail("the shapes of X and grid are not static (fix the input shapes)");
  p.x = x->shape().staticDims();
  p.grid = grid->shape().staticDims();
  if (p.x.size() != 4)
    return fail(fmt::format("{}-D input (only 2-D sampling, a 4-D X, is rewritten)",
                            p.x.size() >= 2 ? p.x.size() - 2 : 0));
  if (p.grid.size() != 4 || p.grid[0] != p.x[0] || p.grid[3] != 2)
    return fail("the grid is not [N, H_out, W_out, 2]");
  for (int64_t d : p.x)
    if (d < 1) return fail("X is empty");
  for (int64_t d : p.grid)
    if (d < 1) return fail("the grid is empty");
  p.dtype = x->dtype();
  if (p.dtype != DType::Float32 && p.dtype != DType::Float16 && p.dtype != DType::Float64)
    return fail(fmt::format("X is {}, not float32/float16/float64", dtypeName(p.dtype)));
  if (grid->dtype() != p.dtype)
    return fail(fmt::format("the grid is {} and X {} (the rewrite computes both in one type)",
                            dtypeName(grid->dtype()), dtypeName(p.dtype)));
  const int64_t pixels = p.x[0] * p.x[2] * p.x[3];
  const int64_t exact = p.dtype == DType::Float16 ? (int64_t{1} << 11) : (int64_t{1} << 24);
  if (pixels > exact)
    return fail(fmt::format("N·H·W = {} pixels are more than {} indexes exactly", pixels,
                            dtypeName(p.dtype)));
  KILN_ASSIGN_OR_RETURN(const std::string mode,
                        ops::stringAttr(n, "mode", opset >= 20 ? "linear" : "bilinear"));
  if (mode == "nearest")
    p.mode = Mode::Nearest;
  else if (mode == "bilinear" || mode == "linear")
    p.mode = Mode::Linear;
  else if (mode == "bicubic" || mode == "cubic")
    p.mode = Mode::Cubic;
  else
    return fail(fmt::format("mode '{}'", mode));
  KILN_ASSIGN_OR_RETURN(const std::string padding, ops::stringAttr(n, "padding_mode", "zeros"));
  if (padding == "zeros")
    p.padding = Padding::Zeros;
  else if (padding == "border")
    p.padding = Padding::Border;
  else if (padding == "reflection")
    p.padding = Padding::Reflection;
  else
    return fail(fmt::format("padding_mode '{}'", padding));
  KILN_ASSIGN_OR_RETURN(const int64_t align, ops::intAttr(n, "align_corners", 0));
  p.alignCorners = align != 0;
  const Value* y = n.output(0);
  const std::vector<int64_t> out = {p.x[0], p.x[1], p.grid[1], p.grid[2]};
  if (y && y->shape().isStatic() && y->shape().staticDims() != out)
    return fail("the output shape differs from [N, C, H_out, W_out]");
  return p;
}

class Expander {
 public:
  Expander(Graph& graph, Node& node, Plan plan)
      : g_(graph), n_(node), p_(std::move(plan)),
        base_(!node.name().empty() ? node.name() : node.output(0)->name()) {
    field_ = {p_.grid[0], p_.grid[1], p_.grid[2]};
  }

  void run() {
    const int64_t N = p_.x[0], C = p_.x[1], H = p_.x[2], W = p_.x[3];
    const int64_t Ho = p_.grid[1], Wo = p_.grid[2];
    Value* xt = op("Transpose", {n_.input(0)}, {N, H, W, C}, "x_nhwc",
                   {{"perm", Attribute::ofInts({0, 2, 3, 1})}});
    Value* pixels = op("Reshape", {xt, ints({N * H * W, C}, "pixels_shape")}, {N * H * W, C},
                       "pixels");
    const std::vector<Tap> xs = axisTaps(0, W, "x"), ys = axisTaps(1, H, "y");
    std::vector<double> offsets;
    for (int64_t b = 0; b < N; ++b)
      offsets.push_back(double(b * H * W));
    Value* batch = floats(offsets, {N, 1, 1}, "batch_offset");
    Value* acc = nullptr;
    for (size_t ty = 0; ty < ys.size(); ++ty) {
      Value* row = binary("Add", binary("Mul", ys[ty].index, scalar(double(W)), tag("row", ty)),
                          batch, tag("row_base", ty));
      for (size_t tx = 0; tx < xs.size(); ++tx) {
        const std::string t = fmt::format("{}_{}", ty, tx);
        Value* lin = binary("Add", row, xs[tx].index, "lin" + t);
        Value* idx = op("Cast", {lin}, field_, "idx" + t, {{"to", Attribute::ofInt(int64_t(DType::Int32))}},
                        DType::Int32);
        Value* v = op("Gather", {pixels, idx}, {N, Ho, Wo, C}, "tap" + t,
                      {{"axis", Attribute::ofInt(0)}});
        Value* w = ys[ty].weight && xs[tx].weight
                       ? binary("Mul", ys[ty].weight, xs[tx].weight, "w" + t)
                       : (ys[ty].weight ? ys[ty].weight : xs[tx].weight);
        if (w) {
          Value* w4 = op("Reshape", {w, ints({N, Ho, Wo, 1}, "w4_shape")}, {N, Ho, Wo, 1},
                         "w4_" + t);
          v = op("Mul", {v, w4}, {N, Ho, Wo, C}, "term" + t);
        }
        acc = acc ? op("Add", {acc, v}, {N, Ho, Wo, C}, "sum" + t) : v;
      }
    }
    Value* y = op("Transpose", {acc}, {N, C, Ho, Wo}, "y", {{"perm", Attribute::ofInts({0, 3, 1, 2})}});
    replaceOutput(y);
  }

 private:
  using Dims = std::vector<int64_t>;
  struct Tap {
    Value* index = nullptr;  // float, inside [0, len - 1]
    Value* weight = nullptr; // nullptr: 1
  };

  static std::string tag(const char* what, size_t i) { return fmt::format("{}{}", what, i); }

  Value* op(const std::string& type, const std::vector<Value*>& inputs, const Dims& dims,
            const std::string& tag, Node::AttributeList attrs = {}, DType dtype = DType::Undefined) {
    const std::string name = g_.uniqueName(base_ + "_" + tag);
    Node* node = g_.insertNodeBefore(&n_, type, inputs, {name});
    node->setName(name);
    for (auto& [key, value] : attrs)
      node->setAttribute(key, std::move(value));
    node->mergeLocations(n_);
    node->output(0)->setType(
        ValueType::tensor(dtype == DType::Undefined ? p_.dtype : dtype, Shape::fromStatic(dims)));
    return node->output(0);
  }
  Value* binary(const std::string& type, Value* a, Value* b, const std::string& tag) {
    return op(type, {a, b}, field_, tag);
  }
  Value* unary(const std::string& type, Value* a, const std::string& tag) {
    return op(type, {a}, field_, tag);
  }
  Value* floats(const std::vector<double>& v, const Dims& dims, const std::string& tag) {
    Tensor t = Tensor::fromValues<double>(DType::Float64, dims, v);
    if (p_.dtype != DType::Float64) t = *rt::castTensor(t, p_.dtype);
    return g_.addInitializer(g_.uniqueName(base_ + "_" + tag), std::move(t));
  }
  Value* scalar(double v) {
    for (auto& [value, constant] : scalars_)
      if (value == v) return constant;
    Value* c = floats({v}, {}, "k");
    scalars_.push_back({v, c});
    return c;
  }
  Value* ints(const Dims& v, const std::string& tag) {
    return g_.addInitializer(g_.uniqueName(base_ + "_" + tag),
                             Tensor::fromValues<int64_t>(DType::Int64, {int64_t(v.size())}, v));
  }
  Value* clip(Value* v, double lo, double hi, const std::string& tag) {
    return op("Clip", {v, scalar(lo), scalar(hi)}, field_, tag);
  }
  // x folded into [lo, hi] by mirroring at the bounds: lo + R − |((x − lo) mod 2R) − R|.
  Value* reflect(Value* x, double lo, double hi, const std::string& tag) {
    const double range = hi - lo;
    if (range <= 0) return op("Mul", {x, scalar(0.0)}, field_, tag + "_reflect_zero");
    Value* y = binary("Sub", x, scalar(lo), tag + "_rel");
    Value* q = unary("Floor", binary("Mul", y, scalar(1.0 / (2 * range)), tag + "_periods"),
                     tag + "_period");
    Value* m = binary("Sub", y, binary("Mul", q, scalar(2 * range), tag + "_start"), tag + "_mod");
    Value* a = unary("Abs", binary("Sub", m, scalar(range), tag + "_from_hi"), tag + "_dist");
    return binary("Sub", scalar(lo + range), a, tag + "_reflected");
  }

  // The taps of one axis: `coord` 0 is x (grid[..., 0]), 1 is y.
  std::vector<Tap> axisTaps(int64_t coord, int64_t len, const std::string& name) {
    const double L = double(len);
    const bool align = p_.alignCorners;
    const double lo = align ? 0.0 : -0.5, hi = align ? L - 1 : L - 0.5;
    Value* gi = g_.addInitializer(g_.uniqueName(base_ + "_" + name + "_coord"),
                                  Tensor::fromValues<int64_t>(DType::Int64, {}, Dims{coord}));
    Value* v = op("Gather", {n_.input(1), gi}, field_, name + "_grid", {{"axis", Attribute::ofInt(3)}});
    Value* shifted = binary("Add", v, scalar(1.0), name + "_shifted");
    Value* pos = align ? binary("Mul", binary("Mul", shifted, scalar(0.5), name + "_half"),
                                scalar(L - 1), name + "_pos")
                       : binary("Mul",
                                binary("Sub", binary("Mul", shifted, scalar(L), name + "_scaled"),
                                       scalar(1.0), name + "_edge"),
                                scalar(0.5), name + "_pos");
    if (p_.mode == Mode::Nearest) pos = unary("Round", pos, name + "_nearest");
    if (p_.padding == Padding::Border) {
      Value* clamped = clip(pos, 0.0, L - 1, name + "_border");
      if (p_.mode == Mode::Cubic && !align) {
        Value* outside = op("Or",
                            {op("Less", {pos, scalar(lo)}, field_, name + "_below", {}, DType::Bool),
                             op("Greater", {pos, scalar(hi)}, field_, name + "_above", {},
                                DType::Bool)},
                            field_, name + "_outside", {}, DType::Bool);
        pos = op("Where", {outside, clamped, pos}, field_, name + "_bordered");
      } else {
        pos = clamped;
      }
    } else if (p_.padding == Padding::Reflection) {
      pos = reflect(pos, lo, hi, name);
      if (p_.mode == Mode::Nearest) pos = unary("Round", pos, name + "_reflected_nearest");
    }
    std::vector<Tap> taps;
    if (p_.mode == Mode::Nearest) {
      taps.push_back({pos, nullptr});
    } else {
      Value* fl = unary("Floor", pos, name + "_floor");
      Value* f = binary("Sub", pos, fl, name + "_frac");
      if (p_.mode == Mode::Linear) {
        taps.push_back({fl, binary("Sub", scalar(1.0), f, name + "_w0")});
        taps.push_back({binary("Add", fl, scalar(1.0), name + "_i1"), f});
      } else {
        // A = −0.75: c0 = ((A(x+1) − 5A)(x+1) + 8A)(x+1) − 4A at x+1, c1 = ((A+2)x − (A+3))x² + 1
        // at x, c2 the same at 1 − x, c3 as c0 at 2 − x, with x = f.
        const double A = -0.75;
        auto outer = [&](Value* t, const std::string& tg) {
          Value* a = binary("Sub", binary("Mul", t, scalar(A), tg + "_a"), scalar(5 * A), tg + "_b");
          a = binary("Add", binary("Mul", a, t, tg + "_c"), scalar(8 * A), tg + "_d");
          return binary("Sub", binary("Mul", a, t, tg + "_e"), scalar(4 * A), tg + "_w");
        };
        auto inner = [&](Value* t, const std::string& tg) {
          Value* a = binary("Sub", binary("Mul", t, scalar(A + 2), tg + "_a"), scalar(A + 3), tg + "_b");
          a = binary("Mul", binary("Mul", a, t, tg + "_c"), t, tg + "_d");
          return binary("Add", a, scalar(1.0), tg + "_w");
        };
        Value* onePlus = binary("Add", f, scalar(1.0), name + "_f1");
        Value* oneMinus = binary("Sub", scalar(1.0), f, name + "_f2");
        Value* twoMinus = binary("Sub", scalar(2.0), f, name + "_f3");
        const std::vector<Value*> weights = {outer(onePlus, name + "_c0"), inner(f, name + "_c1"),
                                             inner(oneMinus, name + "_c2"),
                                             outer(twoMinus, name + "_c3")};
        for (int k = 0; k < 4; ++k)
          taps.push_back({k == 1 ? fl
                                 : binary("Add", fl, scalar(double(k - 1)), tag("_i", size_t(k))),
                          weights[size_t(k)]});
      }
    }
    for (size_t k = 0; k < taps.size(); ++k) {
      Tap& t = taps[k];
      const std::string tg = name + tag("_t", k);
      Value* inside = clip(t.index, 0.0, L - 1, tg + "_clipped");
      if (p_.padding == Padding::Zeros) {
        Value* valid = op("Cast",
                          {op("Equal", {inside, t.index}, field_, tg + "_in", {}, DType::Bool)},
                          field_, tg + "_mask", {{"to", Attribute::ofInt(int64_t(p_.dtype))}});
        t.weight = t.weight ? binary("Mul", t.weight, valid, tg + "_masked") : valid;
      } else if (p_.padding == Padding::Reflection && p_.mode == Mode::Cubic) {
        inside = clip(reflect(t.index, lo, hi, tg), 0.0, L - 1, tg + "_folded");
      }
      t.index = inside;
    }
    return taps;
  }

  void replaceOutput(Value* value) {
    Value* old = n_.output(0);
    const std::string name = old->name();
    if (old->shape().isStatic()) value->setType(old->type());
    g_.renameValue(old, g_.uniqueName(name + "_grid_sample"));
    g_.renameValue(value, name);
    g_.replaceAllUsesWith(old, value);
    g_.eraseNode(&n_);
  }

  Graph& g_;
  Node& n_;
  Plan p_;
  std::string base_;
  Dims field_;
  std::vector<std::pair<double, Value*>> scalars_;
};

size_t expandIn(Graph& graph, int64_t opset, const std::function<bool(const Node&)>& select) {
  return rewrite::countEachRewrite(graph, [&](Node* node) {
    if (node->opType() != "GridSample" || !select(*node)) return false;
    auto plan = planOf(*node, opset);
    if (!plan) return false;
    Expander(*node->owner(), *node, plan.take()).run();
    return true;
  });
}

class ExpandGridSamplePass : public Pass {
 public:
  std::string_view name() const override { return "expand-grid-sample"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    // With a target, only what it refuses; without one, every GridSample the rewrite can take.
    return expandIn(graph, context.opset(), [&](const Node& node) {
             return !context.targetTakes || !context.targetTakes(node);
           }) > 0;
  }
};

} // namespace

std::string gridSampleExpansionBlocker(const Node& node, int64_t opset) {
  auto plan = planOf(node, opset);
  return plan ? std::string() : plan.status().message();
}

Expected<size_t> expandGridSampleNodes(Graph& graph, int64_t opset,
                                       const std::function<bool(const Node&)>& select) {
  return expandIn(graph, opset, select);
}

std::unique_ptr<Pass> makeExpandGridSamplePass() {
  return std::make_unique<ExpandGridSamplePass>();
}

} // namespace kiln
