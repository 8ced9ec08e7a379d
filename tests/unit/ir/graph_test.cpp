// IR mutation helpers keep use lists and producers consistent.
#include <gtest/gtest.h>

#include "kiln/ir/graph.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

using namespace kiln;

TEST(Graph, ReplaceAllUsesAndErase) {
  Graph g("main");
  Value* x = g.addValue("x");
  x->setType(ValueType::tensor(DType::Float32, Shape::fromStatic({2})));
  g.addInput(x);
  Node* id = g.appendNode("Identity", {x}, {"y"});
  Node* relu = g.appendNode("Relu", {id->output(0)}, {"z"});
  g.addOutput(relu->output(0));
  ASSERT_TRUE(verifyGraph(g).isOk());
  EXPECT_EQ(id->output(0)->uses().size(), 1u);

  g.replaceAllUsesWith(id->output(0), x);
  EXPECT_EQ(relu->input(0), x);
  EXPECT_FALSE(id->output(0)->hasUses());
  g.eraseNode(id);
  EXPECT_EQ(g.nodeCount(), 1u);
  EXPECT_EQ(g.findLocalValue("y"), nullptr);
  EXPECT_EQ(x->uses().size(), 1u);
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(Graph, InsertBeforeKeepsOrder) {
  Graph g("main");
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* last = g.appendNode("Relu", {x}, {"r"});
  g.addOutput(last->output(0));
  Node* first = g.insertNodeBefore(last, "Neg", {x}, {"n"});
  last->setInput(0, first->output(0));
  EXPECT_EQ(g.nodes().front().get(), first);
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(Graph, VerifierCatchesUseBeforeDefinition) {
  Graph g("main");
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* a = g.appendNode("Relu", {x}, {"a"});
  Node* b = g.appendNode("Relu", {a->output(0)}, {"b"});
  g.addOutput(b->output(0));
  g.reorderNodes({b, a});
  Status status = verifyGraph(g);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::VerifyFailed);
  EXPECT_NE(status.message().find("reads 'a' before it is defined"), std::string::npos)
      << status.message();
}

TEST(Graph, SubgraphUsesOfOuterValuesUnhookOnErase) {
  Graph g("main");
  Value* x = g.addValue("x");
  Value* cond = g.addValue("c");
  g.addInput(x);
  g.addInput(cond);
  Node* ifNode = g.appendNode("If", {cond}, {"out"});
  auto branch = std::make_shared<Graph>("then", &g);
  Node* inner = branch->appendNode("Relu", {x}, {"inner"});
  branch->addOutput(inner->output(0));
  ifNode->setAttribute("then_branch", Attribute::ofGraph(branch));
  EXPECT_EQ(x->uses().size(), 1u);
  Node* keep = g.appendNode("Identity", {x}, {"y"});
  g.addOutput(keep->output(0));
  EXPECT_TRUE(verifyGraph(g).isOk());
  branch.reset();
  g.eraseNode(ifNode);
  EXPECT_EQ(x->uses().size(), 1u); // only the Identity remains
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(Printer, StableText) {
  Graph g("main");
  Value* x = g.addValue("x");
  x->setType(ValueType::tensor(DType::Float32, Shape({Dim::symbol("N"), Dim::known(3)})));
  g.addInput(x);
  g.addInitializer("w", Tensor::fromValues<float>(DType::Float32, {2}, {1.5f, -2.0f}));
  Node* n = g.appendNode("Mul", {x, g.findLocalValue("w")}, {"y"});
  n->setAttribute("alpha", Attribute::ofFloat(0.5f));
  n->addLocation({"mul0", "Mul"});
  g.addOutput(n->output(0));
  std::ostringstream out;
  printGraph(out, g);
  EXPECT_EQ(out.str(), "graph \"main\" (%x: f32[N,3]) -> (%y) {\n"
                       "  init %w = f32[2] {1.5, -2}\n"
                       "  %y = Mul(%x, %w) {alpha = 0.5} @\"mul0\"\n"
                       "}\n");
}
