// Shapes inside If branches and Loop bodies: settle-shapes infers, propagates and folds there with
// the shapes of the outer values a body reads, so what a branch computes gets static (or
// symbolic) shapes the targets can lower; fold-constant-if drops a branch that cannot run on them.
#include <algorithm>

#include <gtest/gtest.h>

#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// ONNX's text syntax reads `float y` as a scalar; exporters leave such shapes out. Forgets the
// shapes of the outputs of the graph, of every body and of every node holding a body.
void forgetOutputShapes(Graph& graph) {
  for (Value* out : graph.outputs())
    out->setShape(Shape());
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs()) {
      forgetOutputShapes(*sub);
      for (Value* out : node->outputs())
        if (out) out->setShape(Shape());
    }
}

PipelineResult run(Model& model, const std::vector<std::string>& passes) {
  forgetOutputShapes(*model.graph);
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, passes, options);
  EXPECT_TRUE(result) << result.status().toString();
  EXPECT_TRUE(verifyModel(model).isOk());
  return result ? *result : PipelineResult{};
}

Graph* branch(const Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Graph ? a->asGraph().get() : nullptr;
}

const Node* onlyNodeOf(const Graph& graph, const std::string& opType) {
  const Node* found = nullptr;
  for (const auto& node : graph.nodes())
    if (node->opType() == opType) {
      EXPECT_EQ(found, nullptr) << "more than one " << opType;
      found = node.get();
    }
  return found;
}

std::vector<std::string> opTypes(const Graph& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.nodes())
    ops.push_back(node->opType());
  return ops;
}

} // namespace

// A branch computes a Reshape target from the shape of an outer value with a dynamic dim: the
// shape values of the outer value reach the branch, so the Reshape gets [N,12] and a constant
// target (0: "N, as in the input"; -1: the rest), which a target without run-time shape ops takes.
TEST(SubgraphShapes, BranchSeesTheShapeValuesOfOuterValues) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3,4] x, bool c) => (float y) {
  y = If (c) <
    then_branch = t () => (float t_out) {
      s = Shape (x)
      st = Constant <value = int64[1] {0}> ()
      en = Constant <value = int64[1] {1}> ()
      h = Slice (s, st, en)
      m = Constant <value = int64[1] {-1}> ()
      target = Concat <axis = 0> (h, m)
      t_out = Reshape (x, target)
    },
    else_branch = e () => (float e_out) {
      shp = Constant <value = int64[2] {0, -1}> ()
      e_out = Reshape (x, shp)
    }
  >
}
)");
  run(model, {"settle-shapes"});
  const Node* ifNode = onlyNodeOf(*model.graph, "If");
  ASSERT_NE(ifNode, nullptr);
  Graph* then = branch(*ifNode, "then_branch");
  ASSERT_NE(then, nullptr);
  const Node* reshape = onlyNodeOf(*then, "Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->output(0)->shape().toString(), "[N,12]");
  const Value* target = reshape->input(1);
  ASSERT_TRUE(target->isInitializer());
  EXPECT_EQ(target->initializer().copyValues<int64_t>(), (std::vector<int64_t>{0, -1}));
  EXPECT_EQ(opTypes(*then), (std::vector<std::string>{"Reshape"})); // the shape chain folded away
  Graph* other = branch(*ifNode, "else_branch");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->outputs()[0]->shape().toString(), "[N,12]");
  // The If's output: rank 2 and the 12 (its first dim is a symbol ONNX's inference made up before
  // the branches settled).
  ASSERT_TRUE(ifNode->output(0)->shape().hasRank());
  ASSERT_EQ(ifNode->output(0)->shape().rank(), 2u);
  EXPECT_EQ(ifNode->output(0)->shape()[1], Dim::known(12));
}

// As exporters write rank tests: a nested If on a shape test of an outer value folds inside the
// branch of an If on a run-time condition, and inference goes on through the branch it took, so
// the Unsqueeze after it (negative axis) gets a static shape. The run-time If stays.
TEST(SubgraphShapes, ShapeTestInsideABranchFoldsAndInferenceGoesOn) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,128,1] x, bool c) => (float y) {
  y = If (c) <
    then_branch = t () => (float t_out) {
      s = Shape (x)
      two = Constant <value = int64[1] {2}> ()
      d = Gather <axis = 0> (s, two)
      one = Constant <value = int64[1] {1}> ()
      is1 = Equal (d, one)
      inner = If (is1) <
        then_branch = it () => (float it_out) {
          ax = Constant <value = int64[1] {2}> ()
          it_out = Squeeze (x, ax)
        },
        else_branch = ie () => (float ie_out) {
          ie_out = Identity (x)
        }
      >
      last = Constant <value = int64[1] {-1}> ()
      t_out = Unsqueeze (inner, last)
    },
    else_branch = e () => (float e_out) {
      e_out = Relu (x)
    }
  >
}
)");
  run(model, {"settle-shapes"});
  const Node* ifNode = onlyNodeOf(*model.graph, "If");
  ASSERT_NE(ifNode, nullptr);
  Graph* then = branch(*ifNode, "then_branch");
  ASSERT_NE(then, nullptr);
  EXPECT_EQ(opTypes(*then), (std::vector<std::string>{"Squeeze", "Unsqueeze"}));
  const Node* unsqueeze = onlyNodeOf(*then, "Unsqueeze");
  ASSERT_NE(unsqueeze, nullptr);
  EXPECT_EQ(unsqueeze->output(0)->shape().toString(), "[1,128,1]");
  EXPECT_EQ(ifNode->output(0)->shape().toString(), "[1,128,1]");
}

// A Loop body's iteration count and condition get their types from the Loop, and values the body
// computes from outer values get static shapes.
TEST(SubgraphShapes, LoopBodyInputsAndOuterReadsGetShapes) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, float[6] v0) => (float v) {
  n = Constant <value = int64 {3}> ()
  keep = Constant <value = bool {1}> ()
  v = Loop (n, keep, v0) <
    body = b (int64 i, bool k, float[6] v_in) => (bool k_out, float[6] v_out) {
      k_out = Identity (k)
      s = Shape (x)
      i0 = Constant <value = int64[1] {0}> ()
      i1 = Constant <value = int64[1] {1}> ()
      d0 = Gather <axis = 0> (s, i0)
      d1 = Gather <axis = 0> (s, i1)
      p = Mul (d0, d1)
      r = Reshape (x, p)
      v_out = Add (v_in, r)
    }
  >
}
)");
  run(model, {"settle-shapes"});
  const Node* loop = onlyNodeOf(*model.graph, "Loop");
  ASSERT_NE(loop, nullptr);
  Graph* body = branch(*loop, "body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->inputs()[0]->shape().toString(), "[]"); // the iteration count: a scalar
  EXPECT_EQ(body->inputs()[1]->shape().toString(), "[]");
  const Node* reshape = onlyNodeOf(*body, "Reshape");
  ASSERT_NE(reshape, nullptr);
  ASSERT_TRUE(reshape->input(1)->isInitializer()); // from the shape of the outer x
  EXPECT_EQ(reshape->input(1)->initializer().copyValues<int64_t>(), (std::vector<int64_t>{6}));
  EXPECT_EQ(reshape->output(0)->shape().toString(), "[6]");
}

// A branch whose LSTM gets a 5-D X on the settled shapes fails whenever it is taken: the If on the
// run-time condition becomes its other branch, and a note says so.
TEST(SubgraphShapes, BranchThatCannotRunOnTheShapesIsDropped) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,4] x, bool c) => (float y) <float[1,8,4] w = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}, float[1,8,2] r = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}> {
  y = If (c) <
    then_branch = t () => (float t_out) {
      ok, h_ok = LSTM <hidden_size = 2> (x, w, r)
      t_out = Identity (h_ok)
    },
    else_branch = e () => (float e_out) {
      ax = Constant <value = int64[2] {0, 1}> ()
      x5 = Unsqueeze (x, ax)
      bad, h_bad = LSTM <hidden_size = 2> (x5, w, r)
      e_out = Identity (h_bad)
    }
  >
}
)");
  PipelineResult result = run(model, {"settle-shapes"});
  EXPECT_EQ(onlyNodeOf(*model.graph, "If"), nullptr);
  const Node* lstm = onlyNodeOf(*model.graph, "LSTM");
  ASSERT_NE(lstm, nullptr);
  EXPECT_EQ(lstm->input(0)->name(), "x");
  ASSERT_EQ(model.graph->outputs().size(), 1u);
  EXPECT_EQ(model.graph->outputs()[0]->name(), "y");
  EXPECT_EQ(model.graph->outputs()[0]->shape().toString(), "[1,1,2]");
  const bool noted = std::any_of(result.notes.begin(), result.notes.end(), [](const auto& n) {
    return n.find("else branch cannot run on these input shapes") != std::string::npos &&
           n.find("rank 3") != std::string::npos;
  });
  EXPECT_TRUE(noted);
}

// Only static input shapes are judged (a node's shape check is not tried on symbols), so the If
// stays.
TEST(SubgraphShapes, DynamicShapesNeverDropABranch) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3] x, bool c) => (float y) <float[4,5] w = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}> {
  y = If (c) <
    then_branch = t () => (float t_out) {
      t_out = Relu (x)
    },
    else_branch = e () => (float e_out) {
      e_out = MatMul (x, w)
    }
  >
}
)");
  run(model, {"settle-shapes"});
  EXPECT_NE(onlyNodeOf(*model.graph, "If"), nullptr);
}

TEST(SubgraphShapes, StaticShapeConflictJudgesOneNode) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] a, float[4,5] b, float[N,4] d) => (float y, float z) {
  y = MatMul (a, b)
  z = MatMul (d, b)
}
)");
  const auto& nodes = model.graph->nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_NE(staticShapeConflict(*nodes.front(), model), "");  // 3 against 4
  EXPECT_EQ(staticShapeConflict(*nodes.back(), model), "");   // a dynamic input is not judged
}
