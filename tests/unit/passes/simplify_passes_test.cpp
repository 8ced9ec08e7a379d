// Fused and merged nodes keep the ONNX locations of every original, and the graph still verifies.
// (ONNX's text syntax cannot name nodes, so the golden tests cannot check locations.)
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/frontend/onnx.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

std::vector<std::string> locationNames(const Node& node) {
  std::vector<std::string> out;
  for (const Location& loc : node.locations())
    out.push_back(loc.nodeName);
  return out;
}

const Node* producerOf(const Model& model, const std::string& value) {
  const Value* v = model.graph->findLocalValue(value);
  return v ? v->producer() : nullptr;
}

void run(Model& model, const std::vector<std::string>& passes) {
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, passes, options);
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_TRUE(verifyModel(model).isOk());
}

} // namespace

TEST(SimplifyPasses, FuseBatchNormKeepsBothLocations) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,2,2] x) => (float[1,2,2,2] y) <float[2,2,1,1] w = {1, 2, 3, 4}, float[2] s = {1, 2}, float[2] z = {0, 0}, float[2] v = {1, 1}> {
  c = Conv (x, w)
  y = BatchNormalization (c, s, z, z, v)
}
)");
  run(model, {"fuse-batchnorm", "eliminate-dead-nodes"});
  ASSERT_EQ(model.graph->nodeCount(), 1u);
  const Node* conv = producerOf(model, "y");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->opType(), "Conv");
  EXPECT_EQ(conv->name(), "n0");
  EXPECT_EQ(locationNames(*conv), (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(model.graph->findLocalValue("w"), nullptr); // the old weight went with dead-node sweep
}

TEST(SimplifyPasses, FuseMatMulAddKeepsBothLocations) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3,2] a) => (float[3,2] y) <float[2,2] w = {1, 2, 3, 4}, float[2] b = {1, 2}> {
  m = MatMul (a, w)
  y = Add (b, m)
}
)");
  run(model, {"fuse-matmul-add"});
  const Node* gemm = producerOf(model, "y");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->opType(), "Gemm");
  EXPECT_EQ(locationNames(*gemm), (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(model.graph->outputs()[0]->name(), "y");
}

TEST(SimplifyPasses, MergeTransposeChainKeepsAllLocations) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,3] x) => (float[3,2,1] y) {
  a = Transpose <perm = [1, 0, 2]> (x)
  b = Transpose <perm = [0, 2, 1]> (a)
  y = Transpose <perm = [1, 0, 2]> (b)
}
)");
  run(model, {"merge-transpose-reshape"});
  ASSERT_EQ(model.graph->nodeCount(), 1u);
  const Node* t = producerOf(model, "y");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(locationNames(*t), (std::vector<std::string>{"n0", "n1", "n2"}));
  EXPECT_EQ(t->attribute("perm")->asInts(), (std::vector<int64_t>{2, 1, 0}));
}

TEST(SimplifyPasses, CommonSubexpressionSurvivorTakesLocations) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) {
  a = Relu (x)
  b = Relu (x)
  y = Add (a, b)
}
)");
  run(model, {"eliminate-common-subexpressions"});
  ASSERT_EQ(model.graph->nodeCount(), 2u);
  const Node* relu = producerOf(model, "a");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(locationNames(*relu), (std::vector<std::string>{"n0", "n1"}));
  const Node* add = producerOf(model, "y");
  EXPECT_EQ(add->input(0), add->input(1));
}

TEST(SimplifyPasses, DefaultPipelineRunsThemAfterSettleShapes) {
  auto passes = pipelineByName("default");
  ASSERT_TRUE(passes);
  auto at = [&](const std::string& name) {
    return std::find(passes->begin(), passes->end(), name) - passes->begin();
  };
  EXPECT_LT(at("settle-shapes"), at("eliminate-common-subexpressions"));
  EXPECT_LT(at("fuse-matmul-add"), at("fuse-batchnorm"));
  EXPECT_EQ(passes->back(), "eliminate-dead-nodes");
}

// fold-constant-if: the taken branch replaces the If; its names stay unique, the graph output
// keeps its name, a nested If moves along and still reads the moved values, and the result runs.
TEST(SimplifyPasses, FoldConstantIfInlinesTheTakenBranch) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, bool k) => (float[2] y) {
  c = Constant <value = bool {1}> ()
  t = Neg (x)
  y = If (c) <
    then_branch = then_g () => (float[2] t_out) {
      t = Relu (x)
      t_out = If (k) <
        then_branch = a () => (float[2] a_out) { a_out = Abs (t) },
        else_branch = b () => (float[2] b_out) { b_out = Identity (t) }>
    },
    else_branch = else_g () => (float[2] e_out) { e_out = Sigmoid (x) }>
}
)");
  run(model, {"fold-constant-if", "eliminate-dead-nodes"});
  const Graph& g = *model.graph;
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0]->name(), "y");
  std::vector<std::string> ops;
  for (const auto& n : g.nodes())
    ops.push_back(n->opType());
  EXPECT_EQ(ops, (std::vector<std::string>{"Relu", "If"})); // Neg and the Constant went dead
  const Node* relu = g.nodes().front().get();
  EXPECT_NE(relu->output(0)->name(), "t"); // 't' was taken by the Neg when the branch moved in
  const Node* inner = g.outputs()[0]->producer();
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->opType(), "If");
  for (Graph* sub : inner->subgraphs()) {
    EXPECT_EQ(sub->parent(), &g);
    EXPECT_EQ(sub->nodes().front()->input(0), relu->output(0));
  }
}

TEST(SimplifyPasses, FoldConstantIfKeepsRuntimeConditions) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, bool k) => (float[2] y) {
  y = If (k) <
    then_branch = a () => (float[2] a_out) { a_out = Abs (x) },
    else_branch = b () => (float[2] b_out) { b_out = Neg (x) }>
}
)");
  run(model, {"fold-constant-if"});
  ASSERT_EQ(model.graph->nodeCount(), 1u);
  EXPECT_EQ(model.graph->nodes().front()->opType(), "If");
}

TEST(SimplifyPasses, DefaultPipelineFoldsConstantIfEarly) {
  auto passes = pipelineByName("default");
  ASSERT_TRUE(passes);
  auto at = [&](const std::string& name) {
    return std::find(passes->begin(), passes->end(), name) - passes->begin();
  };
  EXPECT_LT(at("fold-constant-if"), at("settle-shapes"));
}
