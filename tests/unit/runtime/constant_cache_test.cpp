// Constant-subgraph caching of the executor: nodes fed only by initializers run on the first run
// and their outputs are reused (same bytes as running them every time); overridable initializers,
// random ops and values of subgraphs are handled.
#include <gtest/gtest.h>

#include "kiln/ir/graph.h"
#include "run_model.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"

using namespace kiln;

namespace {

using Feeds = std::map<std::string, rt::RtValue>;

rt::RtValue floats(std::vector<int64_t> dims, std::vector<float> v) {
  return rt::RtValue::ofTensor(rt::makeTensor<float>(DType::Float32, std::move(dims), v));
}

// y = x + Transpose(DequantizeLinear(wq, scale, zp)) + Cast(b), where b is a graph input with an
// initializer (a feed may replace it, so its Cast is not constant).
Model dequantModel() {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  Value* b = g.addInitializer("b", rt::makeTensor<int32_t>(DType::Int32, {3, 2}, {1, 2, 3, 4, 5, 6}));
  g.addInput(b);
  std::vector<uint8_t> wq = {0, 17, 128, 200, 255, 3};
  Value* w = g.addInitializer("wq", rt::makeTensor<uint8_t>(DType::UInt8, {2, 3}, wq));
  Value* scale = g.addInitializer("scale", rt::makeTensor<float>(DType::Float32, {}, {0.037f}));
  Value* zp = g.addInitializer("zp", rt::makeTensor<uint8_t>(DType::UInt8, {}, {128}));
  Node* dq = g.appendNode("DequantizeLinear", {w, scale, zp}, {"wf"});
  Node* tr = g.appendNode("Transpose", {dq->output(0)}, {"wt"});
  tr->setAttribute("perm", Attribute::ofInts({1, 0}));
  Node* cast = g.appendNode("Cast", {b}, {"bf"});
  cast->setAttribute("to", Attribute::ofInt(static_cast<int64_t>(DType::Float32)));
  Node* add = g.appendNode("Add", {x, tr->output(0)}, {"s"});
  Node* add2 = g.appendNode("Add", {add->output(0), cast->output(0)}, {"y"});
  g.addOutput(add2->output(0));
  return model;
}

uint64_t calls(const rt::RunResult& r, const std::string& op) {
  auto it = r.profile.find(op);
  return it == r.profile.end() ? 0 : it->second.calls;
}

TEST(ConstantCache, ConstantNodesRunOnceAndGiveTheSameBytes) {
  Model model = dequantModel();
  Feeds feeds = {{"x", floats({3, 2}, {0.5f, -1.25f, 3.0f, 1e-3f, -7.0f, 2.5f})}};
  rt::ExecutorOptions cachedOptions, plainOptions;
  cachedOptions.profile = plainOptions.profile = true;
  plainOptions.cacheConstants = false;
  rt::Executor cached(model, cachedOptions), plain(model, plainOptions);
  for (int run = 0; run < 3; ++run) {
    auto a = cached.run(feeds);
    auto b = plain.run(feeds);
    ASSERT_TRUE(a.hasValue()) << a.status().toString();
    ASSERT_TRUE(b.hasValue()) << b.status().toString();
    EXPECT_TRUE(a->outputs[0].tensor.sameContents(b->outputs[0].tensor)) << "run " << run;
    // DequantizeLinear and Transpose: on the first run only; Cast reads an overridable input.
    EXPECT_EQ(calls(*a, "DequantizeLinear"), run == 0 ? 1u : 0u) << "run " << run;
    EXPECT_EQ(calls(*a, "Transpose"), run == 0 ? 1u : 0u) << "run " << run;
    EXPECT_EQ(calls(*a, "Cast"), 1u);
    EXPECT_EQ(calls(*a, "Add"), 2u);
    EXPECT_EQ(calls(*b, "DequantizeLinear"), 1u);
  }
  EXPECT_EQ(cached.memoryStats().constantNodes, 2u);
  EXPECT_EQ(cached.memoryStats().constantBytes, 2u * 6 * sizeof(float));
  EXPECT_EQ(plain.memoryStats().constantNodes, 0u);
}

TEST(ConstantCache, AFedInitializerIsNotTreatedAsConstant) {
  Model model = dequantModel();
  rt::Executor exec(model);
  Feeds feeds = {{"x", floats({3, 2}, {0, 0, 0, 0, 0, 0})}};
  auto first = exec.run(feeds);
  ASSERT_TRUE(first.hasValue()) << first.status().toString();
  feeds["b"] = rt::RtValue::ofTensor(
      rt::makeTensor<int32_t>(DType::Int32, {3, 2}, {100, 100, 100, 100, 100, 100}));
  auto second = exec.run(feeds);
  ASSERT_TRUE(second.hasValue()) << second.status().toString();
  const float* y1 = reinterpret_cast<const float*>(first->outputs[0].tensor.data());
  const float* y2 = reinterpret_cast<const float*>(second->outputs[0].tensor.data());
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y2[i] - y1[i], 100.0f - static_cast<float>(i + 1)) << i;
}

TEST(ConstantCache, RandomOpsRunEveryTime) {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  // Dropout of an initializer: random in training mode, so never cached (the executor has no
  // Random* kernels; they are excluded the same way).
  Value* w = g.addInitializer("w", rt::makeTensor<float>(DType::Float32, {4}, {1, 2, 3, 4}));
  Node* rnd = g.appendNode("Dropout", {w}, {"r"});
  Node* add = g.appendNode("Add", {x, rnd->output(0)}, {"y"});
  g.addOutput(add->output(0));
  rt::ExecutorOptions options;
  options.profile = true;
  rt::Executor exec(model, options);
  Feeds feeds = {{"x", floats({4}, {0, 0, 0, 0})}};
  for (int run = 0; run < 2; ++run) {
    auto r = exec.run(feeds);
    ASSERT_TRUE(r.hasValue()) << r.status().toString();
    EXPECT_EQ(calls(*r, "Dropout"), 1u);
  }
  EXPECT_EQ(exec.memoryStats().constantNodes, 0u);
}

// If(c) { Neg(Cast(w_outer)) } else { x }: the then-branch's nodes read only an outer initializer,
// so they are constant too (computed once however often the branch runs).
TEST(ConstantCache, SubgraphNodesOfOuterInitializersAreConstant) {
  Model model;
  model.opsets = {{"", 17}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  Value* c = g.addValue("c");
  Value* x = g.addValue("x");
  g.addInput(c);
  g.addInput(x);
  Value* w = g.addInitializer("w", rt::makeTensor<int32_t>(DType::Int32, {2}, {3, -4}));
  Node* ifNode = g.appendNode("If", {c}, {"y"});
  auto thenBranch = std::make_shared<Graph>("then", &g);
  Node* cast = thenBranch->appendNode("Cast", {w}, {"wf"});
  cast->setAttribute("to", Attribute::ofInt(static_cast<int64_t>(DType::Float32)));
  Node* neg = thenBranch->appendNode("Neg", {cast->output(0)}, {"wn"});
  Node* add = thenBranch->appendNode("Add", {neg->output(0), x}, {"t"});
  thenBranch->addOutput(add->output(0));
  auto elseBranch = std::make_shared<Graph>("else", &g);
  Node* id = elseBranch->appendNode("Identity", {x}, {"e"});
  elseBranch->addOutput(id->output(0));
  ifNode->setAttribute("then_branch", Attribute::ofGraph(thenBranch));
  ifNode->setAttribute("else_branch", Attribute::ofGraph(elseBranch));
  g.addOutput(ifNode->output(0));
  rt::ExecutorOptions options;
  options.profile = true;
  rt::Executor exec(model, options);
  Feeds feeds = {{"c", rt::RtValue::ofTensor(rt::makeTensor<uint8_t>(DType::Bool, {}, {1}))},
                 {"x", floats({2}, {0.5f, 1.5f})}};
  for (int run = 0; run < 3; ++run) {
    auto r = exec.run(feeds);
    ASSERT_TRUE(r.hasValue()) << r.status().toString();
    const float* y = reinterpret_cast<const float*>(r->outputs[0].tensor.data());
    EXPECT_EQ(y[0], -2.5f);
    EXPECT_EQ(y[1], 5.5f);
    EXPECT_EQ(calls(*r, "Cast"), run == 0 ? 1u : 0u);
    EXPECT_EQ(calls(*r, "Neg"), run == 0 ? 1u : 0u);
    EXPECT_EQ(calls(*r, "Add"), 1u); // reads x
  }
  EXPECT_EQ(exec.memoryStats().constantNodes, 2u);
}

} // namespace
