// Elementwise chains after Conv nodes, planned once per graph (fusion.h).
#include "fusion.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ir/constant.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::rt {
namespace {

constexpr size_t kMaxSteps = 16;     // longer chains are cut (each step keeps a block buffer)
constexpr size_t kLookAhead = 64;    // nodes scanned past the Conv for its chain

void outerReads(const Graph& sub, std::unordered_set<const Value*>& out) {
  for (const auto& node : sub.nodes()) {
    for (const Value* in : node->inputs())
      if (in && in->owner() != &sub) out.insert(in);
    for (const Graph* g : node->subgraphs())
      outerReads(*g, out);
  }
  for (const Value* o : sub.outputs())
    if (o->owner() != &sub) out.insert(o);
}

float attrFloat(const Node& node, const char* name, float fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : fallback;
}

int64_t attrInt(const Node& node, const char* name, int64_t fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

// The step for `node` when it is a fusable op reading chain values (`slots`); false otherwise.
bool makeStep(const Node& node, int64_t opset,
              const std::unordered_map<const Value*, int>& slots, FusedChain::Step& out) {
  if (!node.domain().empty() || node.outputs().empty() || !node.output(0)) return false;
  // One output (BatchNormalization may list the training outputs as omitted names).
  for (size_t i = 1; i < node.outputs().size(); ++i)
    if (node.output(i)) return false;
  const std::string& op = node.opType();
  auto slotOf = [&](const Value* v) {
    auto it = slots.find(v);
    return it == slots.end() ? -1 : it->second;
  };
  Epilogue::Step& s = out.step;
  using Kind = Epilogue::Kind;
  using Outside = FusedChain::Step::Outside;
  static const std::unordered_map<std::string, vec::BinOp> binary = {
      {"Add", vec::BinOp::Add}, {"Sub", vec::BinOp::Sub}, {"Mul", vec::BinOp::Mul},
      {"Div", vec::BinOp::Div}, {"Max", vec::BinOp::Max}, {"Min", vec::BinOp::Min}};
  if (auto it = binary.find(op); it != binary.end()) {
    // Before opset 7 these ops broadcast by attribute; those stay unfused (as do Max / Min with
    // other than two inputs).
    if (opset < 7 || node.attribute("broadcast") || node.inputs().size() != 2) return false;
    const Value* a = node.input(0);
    const Value* b = node.input(1);
    if (!a || !b) return false;
    s.kind = Kind::Binary;
    s.binOp = it->second;
    s.a.slot = slotOf(a);
    s.b.slot = slotOf(b);
    if (s.a.slot < 0 && s.b.slot < 0) return false;
    if (s.a.slot < 0) out.outside[Outside::kA] = a;
    if (s.b.slot < 0) out.outside[Outside::kB] = b;
    return true;
  }
  const Value* x = node.input(0);
  if (!x || slotOf(x) < 0) return false;
  s.kind = Kind::Unary;
  s.a.slot = slotOf(x);
  if (op == "BatchNormalization") {
    // Inference form only, as the kernel runs it: one output, per-channel statistics, the four
    // parameter inputs from outside the chain.
    if (node.inputs().size() != 5) return false;
    // Read as the kernel reads them (KernelContext::attrInt).
    if (opset < 9 && attrInt(node, "spatial", 1) == 0) return false;
    if (opset >= 14 && attrInt(node, "training_mode", 0) != 0) return false;
    s.kind = Kind::BatchNorm;
    s.epsilon = attrFloat(node, "epsilon", 1e-5f);
    for (int k = 0; k < 4; ++k) {
      const Value* v = node.input(static_cast<size_t>(k) + 1);
      if (!v || slotOf(v) >= 0) return false;
      out.outside[k] = v;
    }
    return true;
  }
  if (op == "Relu" && node.inputs().size() == 1) {
    s.unOp = vec::UnOp::Relu;
  } else if (op == "LeakyRelu" && node.inputs().size() == 1) {
    s.unOp = vec::UnOp::LeakyRelu;
    s.p0 = attrFloat(node, "alpha", 0.01f);
  } else if (op == "HardSigmoid" && node.inputs().size() == 1) {
    s.unOp = vec::UnOp::HardSigmoid;
    s.p0 = attrFloat(node, "alpha", 0.2f);
    s.p1 = attrFloat(node, "beta", 0.5f);
  } else if (op == "HardSwish" && node.inputs().size() == 1) {
    s.unOp = vec::UnOp::HardSwish;
  } else if (op == "Clip") {
    s.unOp = vec::UnOp::Clip;
    s.p0 = std::numeric_limits<float>::lowest();
    s.p1 = std::numeric_limits<float>::max();
    if (opset < 11) {
      if (node.inputs().size() != 1) return false;
      s.p0 = attrFloat(node, "min", s.p0);
      s.p1 = attrFloat(node, "max", s.p1);
    } else {
      if (node.inputs().size() > 3) return false;
      out.outside[Outside::kLo] = node.input(1);
      out.outside[Outside::kHi] = node.input(2);
      if (slotOf(out.outside[Outside::kLo]) >= 0 || slotOf(out.outside[Outside::kHi]) >= 0)
        return false;
    }
  } else {
    return false;
  }
  return true;
}

// What a plain Cast (default domain, one input, one output, no subgraph) casts to when that is
// float32 or float16; Undefined for any other node or target.
DType floatCastTarget(const Node& node) {
  const Attribute* to = node.attribute("to");
  if (node.opType() != "Cast" || !node.domain().empty() || node.inputs().size() != 1 ||
      !node.input(0) || node.outputs().size() != 1 || !node.output(0) ||
      !node.subgraphs().empty() || !to || to->kind() != AttrKind::Int)
    return DType::Undefined;
  if (to->asInt() == dtypeToOnnx(DType::Float32)) return DType::Float32;
  if (to->asInt() == dtypeToOnnx(DType::Float16)) return DType::Float16;
  return DType::Undefined;
}

// A Cast of a chain value to float16 or float32 as a ToHalf / ToFloat step; false for any other
// node.
bool makeCastStep(const Node& node, const std::unordered_map<const Value*, int>& slots,
                  FusedChain::Step& out) {
  const DType to = floatCastTarget(node);
  if (to == DType::Undefined) return false;
  auto it = slots.find(node.input(0));
  if (it == slots.end()) return false;
  out.step.kind = to == DType::Float16 ? Epilogue::Kind::ToHalf : Epilogue::Kind::ToFloat;
  out.step.a.slot = it->second;
  return true;
}

// A Conv the kernel never runs on oneDNN (conv.cpp takesDnnl): group > 1, or a 1x1 kernel with
// stride 1 and no padding, by its attributes and a rank-4 initializer's dims.
bool writesPlanar(const Node& conv) {
  if (attrInt(conv, "group", 1) > 1) return true;
  const Value* w = conv.inputs().size() >= 2 ? conv.input(1) : nullptr;
  if (!w || !w->isInitializer() || w->initializer().dims().size() != 4) return false;
  const auto& wd = w->initializer().dims();
  if (wd[2] != 1 || wd[3] != 1) return false;
  const Attribute* pad = conv.attribute("auto_pad");
  if (pad && (pad->kind() != AttrKind::String ||
              (pad->asString() != "NOTSET" && pad->asString() != "VALID")))
    return false;
  for (const char* name : {"strides", "pads", "kernel_shape"}) {
    const Attribute* a = conv.attribute(name);
    if (!a) continue;
    if (a->kind() != AttrKind::Ints) return false;
    for (int64_t v : a->asInts())
      if (v != (std::string(name) == "pads" ? 0 : 1)) return false;
  }
  return true;
}

// A node whose kernel writes its float16 output 0 widened (float32 values rounded to float16)
// when allowed (KernelContext::allowChannelsLastOutput): float16 Add/Sub/Mul/Div (elementwise.cpp
// binaryHalfFast), Concat of float16 inputs (shape_ops.cpp) and Cast of float32 to float16
// (elementwise.cpp). The kernels check their operands' runtime types themselves.
bool widensForConv(const Node& node) {
  const std::string& op = node.opType();
  if (node.outputs().size() != 1 || node.output(0)->dtype() != DType::Float16) return false;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Concat") return true;
  return floatCastTarget(node) == DType::Float16 && node.input(0)->dtype() == DType::Float32;
}

} // namespace

std::shared_ptr<const FusionPlan> planFusion(const Graph& graph, int64_t opset,
                                             const std::vector<std::string>& keep) {
  const size_t count = graph.nodeCount();
  std::vector<const Node*> nodes;
  nodes.reserve(count);
  for (const auto& node : graph.nodes())
    nodes.push_back(node.get());
  // Who reads each value (subgraph reads count for the node that owns the subgraph), and when
  // each local value is made.
  std::unordered_map<const Value*, std::vector<size_t>> readers;
  std::unordered_map<const Value*, size_t> madeAt;
  for (size_t i = 0; i < count; ++i) {
    std::unordered_set<const Value*> reads(nodes[i]->inputs().begin(), nodes[i]->inputs().end());
    for (const Graph* sub : nodes[i]->subgraphs())
      outerReads(*sub, reads);
    reads.erase(nullptr);
    for (const Value* v : reads)
      readers[v].push_back(i);
    for (const Value* o : nodes[i]->outputs())
      if (o) madeAt[o] = i;
  }
  std::unordered_set<const Value*> kept(graph.outputs().begin(), graph.outputs().end());
  if (!keep.empty())
    for (const auto& v : graph.values())
      if (std::find(keep.begin(), keep.end(), v->name()) != keep.end()) kept.insert(v.get());
  // Outside operands must exist when the Conv runs: made by an earlier node, or not made by a
  // node of this graph at all (inputs, initializers, outer values).
  auto existsBefore = [&](const Value* v, size_t at) {
    if (!v) return true;
    auto it = madeAt.find(v);
    return it == madeAt.end() || it->second < at;
  };

  auto plan = std::make_shared<FusionPlan>();
  plan->chainAt.assign(count, -1);
  std::vector<bool> absorbed(count, false);
  for (size_t c = 0; c < count; ++c) {
    const Node& conv = *nodes[c];
    const bool integer = conv.opType() == "ConvInteger";
    // A float16 ConvTranspose runs its chain as a float16 Conv does (conv.cpp); a float32 one
    // has none.
    const bool transpose = conv.opType() == "ConvTranspose" && conv.output(0) &&
                           conv.output(0)->dtype() == DType::Float16;
    if ((conv.opType() != "Conv" && !integer && !transpose) || !conv.domain().empty() ||
        absorbed[c] || !conv.output(0))
      continue;
    FusedChain chain;
    chain.producer = c;
    const Value* first = conv.output(0);
    if (integer) {
      // ConvInteger's int32 output must go to one Cast to float32 and nowhere else; the chain
      // starts from the Cast's output.
      const auto& r = readers[first];
      if (r.size() != 1 || kept.count(first)) continue;
      const Node& cast = *nodes[r[0]];
      if (floatCastTarget(cast) != DType::Float32) continue;
      chain.castFirst = true;
      first = cast.output(0);
    }
    std::unordered_map<const Value*, int> slots = {{first, 0}};
    std::vector<const Value*> values = {first};
    // Per value: float16 (inside a ConvInteger chain's Cast to float16 ... Cast to float32).
    std::vector<bool> valueHalf = {false};
    for (size_t j = c + 1; j < count && j <= c + kLookAhead && chain.steps.size() < kMaxSteps;
         ++j) {
      const Node& node = *nodes[j];
      bool readsChain = false;
      for (const Value* v : values) {
        const auto& r = readers[v];
        readsChain |= std::find(r.begin(), r.end(), j) != r.end();
      }
      if (!readsChain) continue;
      FusedChain::Step step;
      if (!node.subgraphs().empty()) break;
      // A ConvInteger's chain (which starts in float32) may pass through float16 and back: each
      // step's chain operands must then be of the one type it computes in.
      const bool cast = chain.castFirst && makeCastStep(node, slots, step);
      if (!cast && !makeStep(node, opset, slots, step)) break;
      const int firstSlot = step.step.a.slot >= 0 ? step.step.a.slot : step.step.b.slot;
      const bool inHalf = valueHalf[static_cast<size_t>(firstSlot)];
      bool typed = !cast || (step.step.kind == Epilogue::Kind::ToHalf) != inHalf;
      for (int sl : {step.step.a.slot, step.step.b.slot})
        typed &= sl < 0 || valueHalf[static_cast<size_t>(sl)] == inHalf;
      if (!typed || (inHalf && step.step.kind == Epilogue::Kind::BatchNorm)) break;
      // An outside operand must exist when the Conv runs, or be a Constant node's value.
      bool available = true;
      for (int k = 0; k < 4 && available; ++k) {
        if (existsBefore(step.outside[k], c)) continue;
        const Node* maker = step.outside[k]->producer();
        if (maker && maker->opType() == "Constant" && maker->domain().empty())
          step.constant[k] = constantNodeValue(*maker);
        available = step.constant[k].has_value();
        // A float32 <-> float16 Cast of a value that exists when the Conv runs: cast at bind.
        const DType to = maker ? floatCastTarget(*maker) : DType::Undefined;
        if (!available && to != DType::Undefined && existsBefore(maker->input(0), c)) {
          step.castTo[k] = to;
          step.outside[k] = maker->input(0);
          available = true;
        }
      }
      if (!available) break;
      slots[node.output(0)] = static_cast<int>(values.size());
      values.push_back(node.output(0));
      valueHalf.push_back(cast ? step.step.kind == Epilogue::Kind::ToHalf : inHalf);
      chain.nodes.push_back(j);
      chain.steps.push_back(step);
    }
    // The longest prefix whose intermediates (the Conv's output and every step result but the
    // last) are read only inside the prefix and are not kept.
    size_t take = chain.nodes.size();
    for (; take > 0; --take) {
      const std::vector<size_t> inside(chain.nodes.begin(), chain.nodes.begin() + take);
      bool ok = true;
      for (size_t v = 0; v < take && ok; ++v) { // values[0..take-1]; values[take] is the result
        if (kept.count(values[v])) ok = false;
        for (size_t r : readers[values[v]])
          if (std::find(inside.begin(), inside.end(), r) == inside.end()) ok = false;
      }
      if (ok) break;
    }
    if (take == 0 && !chain.castFirst) continue;
    chain.nodes.resize(take);
    chain.steps.resize(take);
    chain.result = values[take];
    if (chain.castFirst) chain.nodes.insert(chain.nodes.begin(), readers[conv.output(0)][0]);
    for (size_t j : chain.nodes)
      absorbed[j] = true;
    plan->chainAt[c] = static_cast<int32_t>(plan->chains.size());
    plan->chains.push_back(std::move(chain));
  }
  // Hand-offs: the result must be read by exactly one node, a Conv taking it as X only, whose
  // weights are a rank-4 initializer with a kernel larger than 1x1 and whose group is 1; or a 2-D
  // MaxPool without Indices whose own output is handed off so (it then passes the layout on).
  plan->handoffTo.assign(count, -1);
  bool anyHandoff = false;
  // The reader of `v` when it takes v channels-last (`anyConv`: or any Conv reading v as X alone,
  // which takes the planar widened hand-off of a float16 Conv): the index, or -1.
  auto takerOf = [&](const Value* v, size_t after, bool anyConv,
                     bool transposeToo = false) -> int64_t {
    if (!v || kept.count(v)) return -1;
    const auto& r = readers[v];
    if (r.size() != 1 || r[0] <= after) return -1;
    const Node& next = *nodes[r[0]];
    if (!next.domain().empty() || !next.subgraphs().empty() || next.inputs().empty() ||
        next.input(0) != v)
      return -1;
    for (size_t i = 1; i < next.inputs().size(); ++i)
      if (next.input(i) == v) return -1;
    if (transposeToo && next.opType() == "ConvTranspose") return static_cast<int64_t>(r[0]);
    if (next.opType() == "MaxPool") {
      const Attribute* kernel = next.attribute("kernel_shape");
      bool indices = false;
      for (size_t i = 1; i < next.outputs().size(); ++i)
        indices = indices || next.output(i);
      if (!kernel || kernel->kind() != AttrKind::Ints || kernel->asInts().size() != 2 || indices)
        return -1;
      return static_cast<int64_t>(r[0]);
    }
    const Value* w = next.inputs().size() >= 2 ? next.input(1) : nullptr;
    if (anyConv && next.opType() == "Conv") return static_cast<int64_t>(r[0]);
    if (next.opType() != "Conv" || !w || !w->isInitializer() ||
        w->initializer().dims().size() != 4 || attrInt(next, "group", 1) != 1)
      return -1;
    const auto& wd = w->initializer().dims();
    return wd[2] * wd[3] > 1 ? static_cast<int64_t>(r[0]) : -1;
  };
  // A planar widened hand-off to several readers: every reader (two or more) a float16 Conv
  // (float16 weights and bias) that takes `v` as X alone. The first reader's index, or -1. Only
  // for producers that never write channels-last (the readers are not told of the hand-off: they
  // see float32 values where the graph says float16).
  auto planarTakers = [&](const Value* v, size_t after) -> int64_t {
    if (!v || kept.count(v)) return -1;
    const auto& r = readers[v];
    if (r.size() < 2) return -1;
    for (size_t j : r) {
      const Node& next = *nodes[j];
      if (j <= after || next.opType() != "Conv" || !next.domain().empty() ||
          !next.subgraphs().empty() || next.inputs().size() < 2 || next.input(0) != v ||
          !next.input(1))
        return -1;
      for (size_t i = 1; i < next.inputs().size(); ++i)
        if (next.input(i) == v || (next.input(i) && next.input(i)->dtype() != DType::Float16))
          return -1;
    }
    return static_cast<int64_t>(r[0]);
  };
  // The one reader of `v` when it is a plain Cast to float32 taking v alone, or -1. Not when a
  // DynamicQuantizeLinear reads the Cast: that Cast passes float16 data on (passHalf, below).
  auto floatCastTaker = [&](const Value* v, size_t after) -> int64_t {
    if (!v || kept.count(v)) return -1;
    const auto& r = readers[v];
    if (r.size() != 1 || r[0] <= after) return -1;
    const Node& next = *nodes[r[0]];
    if (floatCastTarget(next) != DType::Float32 || next.input(0) != v) return -1;
    for (size_t j : readers[next.output(0)])
      if (nodes[j]->opType() == "DynamicQuantizeLinear") return -1;
    return static_cast<int64_t>(r[0]);
  };
  // Backwards, so that a MaxPool's own hand-off is known when the Conv before it asks.
  for (size_t c = count; c-- > 0;) {
    const Node& node = *nodes[c];
    if (!node.domain().empty() || !node.output(0)) continue;
    const Value* result = nullptr;
    bool anyConv = false;
    if (node.opType() == "Conv") {
      const int32_t chainIndex = plan->chainAt[c];
      result =
          chainIndex >= 0 ? plan->chains[static_cast<size_t>(chainIndex)].result : node.output(0);
      // A float16 Conv that never runs on oneDNN (grouped, or 1x1 with stride 1 and no padding)
      // writes planar values: any float16 Conv may take them widened (conv.cpp).
      anyConv = result->dtype() == DType::Float16 && node.output(0)->dtype() == DType::Float16 &&
                writesPlanar(node);
    } else if (node.opType() == "ConvTranspose") {
      // A float16 ConvTranspose (its chain's result, or its output) writes planar values: handed
      // widened to a float16 Conv or ConvTranspose that reads them alone (conv.cpp).
      const int32_t chainIndex = plan->chainAt[c];
      result =
          chainIndex >= 0 ? plan->chains[static_cast<size_t>(chainIndex)].result : node.output(0);
      if (result->dtype() != DType::Float16 || node.output(0)->dtype() != DType::Float16) continue;
      anyConv = true;
    } else if (node.opType() == "MaxPool") {
      result = node.output(0);
    } else if (widensForConv(node)) {
      // A float16 Add/Sub/Mul/Div, Concat or Cast to float16 whose output only a Conv reads (as
      // X): handed over widened, planar (as a 1x1 Conv's), where the Conv would widen it whole.
      result = node.output(0);
      anyConv = true;
    } else {
      continue;
    }
    const bool widening = node.opType() != "Conv" && node.opType() != "MaxPool";
    int64_t taker = takerOf(result, c, anyConv, node.opType() == "ConvTranspose");
    if (taker < 0 && anyConv && node.opType() == "Conv") taker = planarTakers(result, c);
    // A float16 Add/Sub/Mul/Div whose output only a Cast to float32 reads: its widened values
    // (halvesToFloats of the float16 results) are what the Cast would make, which then passes
    // the float32 tensor on as it is (PP-OCR rec's last Add before its float32 Softmax).
    bool toCast = false;
    if (taker < 0 && widening && node.opType() != "Concat" &&
        floatCastTarget(node) == DType::Undefined) {
      taker = floatCastTaker(result, c);
      toCast = taker >= 0;
    }
    if (taker < 0) continue;
    if (widening && !toCast) {
      // Only to a float16 Conv or ConvTranspose (float16 weights and bias), which takes widened
      // X as it is.
      const Node& reader = *nodes[static_cast<size_t>(taker)];
      bool half = reader.opType() == "Conv" || reader.opType() == "ConvTranspose";
      for (size_t i = 1; i < reader.inputs().size() && half; ++i)
        half = !reader.input(i) || reader.input(i)->dtype() == DType::Float16;
      if (!half || reader.inputs().size() < 2 || !reader.input(1)) continue;
    }
    // A MaxPool takes channels-last data only to pass it on to a Conv.
    if (nodes[static_cast<size_t>(taker)]->opType() == "MaxPool" &&
        plan->handoffTo[static_cast<size_t>(taker)] < 0)
      continue;
    // A MaxPool's entry is used only when a Conv hands it channels-last data (it never changes
    // the layout itself).
    plan->handoffTo[c] = static_cast<int32_t>(taker);
    anyHandoff = true;
  }
  // Casts to float32 that only a DynamicQuantizeLinear's x reads (FusionPlan::passHalf).
  plan->passHalf.assign(count, 0);
  bool anyPass = false;
  for (size_t c = 0; c < count; ++c) {
    const Node& cast = *nodes[c];
    if (floatCastTarget(cast) != DType::Float32 || kept.count(cast.output(0))) continue;
    auto r = readers.find(cast.output(0));
    if (r == readers.end() || r->second.size() != 1) continue;
    const Node& reader = *nodes[r->second[0]];
    if (reader.opType() != "DynamicQuantizeLinear" || !reader.domain().empty() ||
        reader.inputs().size() != 1 || reader.input(0) != cast.output(0))
      continue;
    plan->passHalf[c] = 1;
    anyPass = true;
  }
  if (plan->chains.empty() && !anyHandoff && !anyPass) return nullptr;
  return plan;
}

std::optional<Epilogue> bindChain(const FusedChain& chain, const Scope& scope) {
  Epilogue out;
  auto tensorOf = [&](const Value* v) -> const Tensor* {
    const RtValue* rv = scope.find(v);
    return rv && rv->isTensor() ? &rv->tensor : nullptr;
  };
  auto scalarOf = [&](const Tensor* t, float& into) {
    if (!t) return true; // omitted bound
    if (t->elementCount() != 1) return false;
    if (t->dtype() == DType::Float32) {
      into = *reinterpret_cast<const float*>(t->data());
      return true;
    }
    if (t->dtype() != DType::Float16) return false; // a half chain's bounds
    into = halfToFloat(*reinterpret_cast<const uint16_t*>(t->data()));
    return true;
  };
  using Outside = FusedChain::Step::Outside;
  for (const FusedChain::Step& planned : chain.steps) {
    Epilogue::Step step = planned.step;
    const Tensor* tensors[4] = {};
    for (int k = 0; k < 4; ++k) {
      if (!planned.outside[k]) continue;
      tensors[k] = planned.constant[k] ? &*planned.constant[k] : tensorOf(planned.outside[k]);
      if (!tensors[k]) return std::nullopt;
      if (planned.castTo[k] != DType::Undefined) {
        // Only float32 <-> float16, which the Cast kernel does by the same castTensor.
        const DType from = tensors[k]->dtype();
        if (from != DType::Float32 && from != DType::Float16) return std::nullopt;
        std::optional<Tensor> cast = castTensor(*tensors[k], planned.castTo[k]);
        if (!cast) return std::nullopt;
        tensors[k] = out.own(std::move(*cast));
      }
    }
    if (step.kind == Epilogue::Kind::BatchNorm) {
      for (int k = 0; k < 4; ++k)
        step.norm[k] = tensors[k];
    } else {
      step.a.tensor = tensors[Outside::kA];
      step.b.tensor = tensors[Outside::kB];
      if (!scalarOf(tensors[Outside::kLo], step.p0) || !scalarOf(tensors[Outside::kHi], step.p1))
        return std::nullopt;
    }
    out.add(step);
  }
  return out;
}

} // namespace kiln::rt
