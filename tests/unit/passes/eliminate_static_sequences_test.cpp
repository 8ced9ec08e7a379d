// eliminate-static-sequences: sequences and optionals with static lengths and positions become
// tensor ops that compute what the sequence kernels compute, SequenceMap and appending Loops
// unroll, and what is not static (graph-input sequences, run-time positions, run-time trip
// counts) stays as it was. The .ms/.om lowerings refuse a sequence at the graph's boundary with
// one coded message.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kiln/backends/target.h"
#include "kiln/compare.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
#include "run_model.h"
#include <onnx/defs/parser.h>

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// The onnx library's text syntax has no sequence types: the values named in `sequences` are
// written as tensors of their element type and turned into sequences of it here. Nor has it type
// attributes: an empty Optional gets type float.
void makeSequences(onnx::GraphProto& graph, const std::set<std::string>& sequences) {
  auto patch = [&](onnx::ValueInfoProto& info) {
    if (!sequences.count(info.name()) || !info.type().has_tensor_type()) return;
    onnx::TypeProto element = info.type();
    *info.mutable_type()->mutable_sequence_type()->mutable_elem_type() = element;
  };
  for (auto& v : *graph.mutable_input())
    patch(v);
  for (auto& v : *graph.mutable_output())
    patch(v);
  for (auto& v : *graph.mutable_value_info())
    patch(v);
  for (auto& node : *graph.mutable_node()) {
    if (node.op_type() == "Optional" && node.input_size() == 0 && node.attribute_size() == 0) {
      auto* type = node.add_attribute();
      type->set_name("type");
      type->set_type(onnx::AttributeProto::TYPE_PROTO);
      type->mutable_tp()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    }
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_g()) makeSequences(*attr.mutable_g(), sequences);
      for (auto& g : *attr.mutable_graphs())
        makeSequences(g, sequences);
    }
  }
}

Model modelWithSequences(const std::string& text, const std::set<std::string>& sequences) {
  onnx::ModelProto proto;
  auto status = onnx::OnnxParser::Parse(proto, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  makeSequences(*proto.mutable_graph(), sequences);
  auto model = importOnnxProto(proto, "test", ".");
  EXPECT_TRUE(model) << model.status().toString();
  return model ? model.take() : Model{};
}

using kiln::testing::runModel;

size_t countOps(const Graph& graph, const std::string& prefix) {
  size_t n = 0;
  for (const auto& node : graph.nodes()) {
    n += node->opType().rfind(prefix, 0) == 0;
    for (const Graph* sub : node->subgraphs())
      n += countOps(*sub, prefix);
  }
  return n;
}

// Sequence, Optional and the other sequence ops left anywhere in the graph.
size_t sequenceOps(const Graph& graph) {
  return countOps(graph, "Sequence") + countOps(graph, "Optional") +
         countOps(graph, "SplitToSequence") + countOps(graph, "ConcatFromSequence");
}

Expected<PipelineResult> runPasses(Model& model, const std::vector<std::string>& passes,
                                   const std::string& target = "") {
  PipelineOptions options;
  options.verifyEach = true;
  options.targetName = target;
  return runPipeline(model, passes, options);
}

// Runs the pass on `text`'s model and checks that the result computes what the original computes
// on deterministic inputs, output names kept. Returns the rewritten model.
Model eliminated(const std::string& text, const std::set<std::string>& sequences = {},
                 const std::vector<std::string>& passes = {"eliminate-static-sequences"}) {
  Model model = modelWithSequences(text, sequences);
  if (!model.graph) return model;
  auto feeds = makeDeterministicInputs(*model.graph, 7);
  EXPECT_TRUE(feeds) << feeds.status().toString();
  if (!feeds) return model;
  const std::vector<Tensor> expected = runModel(model, *feeds);
  std::vector<std::string> names;
  for (const Value* out : model.graph->outputs())
    names.push_back(out->name());

  auto ran = runPasses(model, passes);
  EXPECT_TRUE(ran) << ran.status().toString();
  EXPECT_TRUE(verifyModel(model).isOk());
  std::vector<std::string> after;
  for (const Value* out : model.graph->outputs())
    after.push_back(out->name());
  EXPECT_EQ(after, names);

  const std::vector<Tensor> got = runModel(model, *feeds);
  EXPECT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i) {
    EXPECT_EQ(got[i].dims(), expected[i].dims()) << names[i];
    EXPECT_TRUE(got[i].sameContents(expected[i])) << names[i];
  }
  return model;
}

} // namespace

TEST(EliminateStaticSequences, ConstructInsertEraseAtLengthConcat) {
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] a, float[2,3] b, float[2,3] c) => (float[2,3] first, float[2,3] last, int64 n, float[2,9] cat, float[2,3,3] stack) {
  s0 = SequenceConstruct (a, b)
  p1 = Constant <value_int = 1> ()
  s1 = SequenceInsert (s0, c, p1)
  s2 = SequenceInsert (s1, a)
  m1 = Constant <value_int = -4> ()
  s3 = SequenceErase (s2, m1)
  s4 = SequenceErase (s3)
  z = Constant <value_int = 0> ()
  first = SequenceAt (s4, z)
  m = Constant <value_int = -1> ()
  last = SequenceAt (s2, m)
  n = SequenceLength (s2)
  cat = ConcatFromSequence <axis = 1> (s4)
  stack = ConcatFromSequence <axis = -1, new_axis = 1> (s4)
}
)");
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  const Value* n = model.graph->findLocalValue("n");
  ASSERT_NE(n, nullptr);
  ASSERT_TRUE(n->isInitializer());
  EXPECT_EQ(n->initializer().copyValues<int64_t>(), std::vector<int64_t>{4});
  EXPECT_EQ(model.graph->findLocalValue("cat")->producer()->opType(), "Concat");
  EXPECT_EQ(model.graph->findLocalValue("stack")->producer()->opType(), "Concat");
  EXPECT_EQ(countOps(*model.graph, "Unsqueeze"), 2u);
}

TEST(EliminateStaticSequences, Opset12WritesAxesAsAttributes) {
  Model model = eliminated(R"(
<ir_version: 7, opset_import: ["" : 12]>
g (float[2,3,4] x, float[2,3,4] y) => (float[2,3,4,2] stack, float[3,4] row) {
  s = SequenceConstruct (x, y)
  stack = ConcatFromSequence <axis = 3, new_axis = 1> (s)
  parts = SplitToSequence <axis = 0, keepdims = 0> (x)
  one = Constant <value_int = 1> ()
  row = SequenceAt (parts, one)
}
)");
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  for (const auto& node : model.graph->nodes())
    if (node->opType() == "Unsqueeze" || node->opType() == "Squeeze" || node->opType() == "Split") {
      EXPECT_EQ(node->inputs().size(), 1u) << node->opType();
      EXPECT_NE(node->attribute(node->opType() == "Split" ? "split" : "axes"), nullptr);
    }
}

TEST(EliminateStaticSequences, SplitToSequenceForms) {
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,7] x) => (float[2] col, float[2,3] tail, int64 n1, float[2,4] mid, int64 n2) <int64 three = {3}, int64[2] sizes = {3, 4}> {
  ones = SplitToSequence <axis = -1, keepdims = 0> (x)
  k = Constant <value_int = 5> ()
  col = SequenceAt (ones, k)
  chunks = SplitToSequence <axis = 1> (x, three)
  n1 = SequenceLength (chunks)
  m = Constant <value_int = -2> ()
  mid3 = SequenceAt (chunks, m)
  tail = Identity (mid3)
  pieces = SplitToSequence <axis = 1> (x, sizes)
  last = Constant <value_int = 1> ()
  mid = SequenceAt (pieces, last)
  n2 = SequenceLength (pieces)
}
)");
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(model.graph->findLocalValue("n1")->initializer().copyValues<int64_t>(),
            std::vector<int64_t>{3}); // 3 + 3 + 1
}

TEST(EliminateStaticSequences, RuntimeSplitSizesGiveTheLengthOnly) {
  // Opset 12's Split takes no run-time sizes: the length folds, the element read stays.
  Model model = modelFromOnnxText(R"(
<ir_version: 7, opset_import: ["" : 12]>
g (float[N] x, int64[3] sizes) => (int64 n, float[M] e) {
  s = SplitToSequence (x, sizes)
  n = SequenceLength (s)
  one = Constant <value_int = 1> ()
  e = SequenceAt (s, one)
}
)");
  auto ran = runPasses(model, {"eliminate-static-sequences"});
  ASSERT_TRUE(ran) << ran.status().toString();
  const Value* n = model.graph->findLocalValue("n");
  ASSERT_TRUE(n && n->isInitializer());
  EXPECT_EQ(n->initializer().copyValues<int64_t>(), std::vector<int64_t>{3});
  EXPECT_EQ(countOps(*model.graph, "SequenceAt"), 1u);
  EXPECT_EQ(countOps(*model.graph, "SplitToSequence"), 1u);
}

TEST(EliminateStaticSequences, SequenceMapUnrollsItsBody) {
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a, float[2,3] b, float[3] bias) => (float[4,3] y, int64 n, float[2] s1) {
  s = SequenceConstruct (a, b)
  sums, shapes = SequenceMap <body = body (float[M,3] x, float[3] t) => (float[M,3] o, int64[2] sh) {
    r = Relu (x)
    o = Add (r, t)
    sh = Shape (x)
  }> (s, bias)
  y = ConcatFromSequence <axis = 0> (sums)
  n = SequenceLength (shapes)
  one = Constant <value_int = 1> ()
  sh1 = SequenceAt (shapes, one)
  s1 = Cast <to = 1> (sh1)
}
)");
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(countOps(*model.graph, "Relu"), 2u); // the body once per element
}

TEST(EliminateStaticSequences, AppendingLoopUnrolls) {
  // test_loop13_seq's body, with the sequence started inside the model, plus a scan output and a
  // carried tensor.
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] bias) => (float[10] all, int64 n, float[3] third, float[4,2] rows, float[2] acc) <int64 trips = {4}, bool go = {1}> {
  empty = SequenceEmpty <dtype = 1> ()
  res, acc, rows = Loop (trips, go, empty, bias) <body = body (int64 i, bool c, float sin, float[2] ain) => (bool cout, float sout, float[2] aout, float[2] row) {
    cout = Identity (c)
    x = Constant <value = float[5] {1, 2, 3, 4, 5}> ()
    one = Constant <value = int64 {1}> ()
    start = Constant <value = int64[1] {0}> ()
    end = Add (i, one)
    axes = Constant <value = int64[1] {0}> ()
    stop = Unsqueeze (end, axes)
    piece = Slice (x, start, stop)
    sout = SequenceInsert (sin, piece)
    fi = Cast <to = 1> (i)
    aout = Add (ain, fi)
    row = Mul (aout, ain)
  }>
  all = ConcatFromSequence <axis = 0> (res)
  n = SequenceLength (res)
  two = Constant <value_int = 2> ()
  third = SequenceAt (res, two)
}
)",
                           {"sin", "sout"});
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(countOps(*model.graph, "Loop"), 0u);
}

TEST(EliminateStaticSequences, ExpandedSequenceMapLoopUnrolls) {
  // The function body of SequenceMap: a Loop over SequenceLength that reads SequenceAt(iter).
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] a, float[4,3] b) => (float[6,3] y) {
  s = SequenceConstruct (a, b, a)
  len = SequenceLength (s)
  go = Constant <value = bool {1}> ()
  empty = SequenceEmpty <dtype = 1> ()
  out = Loop (len, go, empty) <body = body (int64 i, bool c, float sin) => (bool cout, float sout) {
    cout = Identity (c)
    e = SequenceAt (s, i)
    r = Neg (e)
    sout = SequenceInsert (sin, r)
  }>
  y = ConcatFromSequence <axis = 0> (out)
}
)",
                           {"sin", "sout"});
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(countOps(*model.graph, "Loop"), 0u);
  EXPECT_EQ(countOps(*model.graph, "Neg"), 3u);
}

TEST(EliminateStaticSequences, OptionalsBuiltInTheGraph) {
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 16]>
g (float[3] x) => (bool has, bool none, float[3] got, float[3] at) {
  o = Optional (x)
  has = OptionalHasElement (o)
  e = Optional ()
  none = OptionalHasElement (e)
  got = OptionalGetElement (o)
  s = SequenceConstruct (x, x)
  os = Optional (s)
  s2 = OptionalGetElement (os)
  z = Constant <value_int = 0> ()
  at = SequenceAt (s2, z)
}
)");
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(model.graph->findLocalValue("has")->initializer().copyValues<uint8_t>(),
            std::vector<uint8_t>{1});
  EXPECT_EQ(model.graph->findLocalValue("none")->initializer().copyValues<uint8_t>(),
            std::vector<uint8_t>{0});
}

TEST(EliminateStaticSequences, ConstantIfWithSequenceBranchesFoldsFirst) {
  // fold-constant-if inlines the taken branch; the sequence it builds is then known.
  Model model = eliminated(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, float[2] y) => (float[2,2] out) <bool yes = {1}> {
  s = If (yes) <then_branch = t () => (float[2] ts) { ts = SequenceConstruct (x, y) },
                else_branch = e () => (float[2] es) { es = SequenceConstruct (y) }>
  out = ConcatFromSequence <axis = 0, new_axis = 1> (s)
}
)",
                           {"ts", "es"}, {"fold-constant-if", "eliminate-static-sequences"});
  EXPECT_EQ(sequenceOps(*model.graph), 0u);
  EXPECT_EQ(countOps(*model.graph, "If"), 0u);
}

TEST(EliminateStaticSequences, LeavesWhatIsNotStatic) {
  Model model = modelWithSequences(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] in, float[2] x, int64 p, int64 trips) => (float[2] a, float[2] b, int64 n, float[2] grown) {
  a = SequenceAt (in, p)
  s = SequenceConstruct (x, x)
  b = SequenceAt (s, p)
  n = SequenceLength (in)
  go = Constant <value = bool {1}> ()
  empty = SequenceEmpty <dtype = 1> ()
  grown = Loop (trips, go, empty) <body = body (int64 i, bool c, float sin) => (bool cout, float sout) {
    cout = Identity (c)
    sout = SequenceInsert (sin, x)
  }>
}
)",
                                   {"in", "grown", "sin", "sout"});
  auto ran = runPasses(model, {"eliminate-static-sequences"}, "ms");
  ASSERT_TRUE(ran) << ran.status().toString();
  EXPECT_FALSE(ran->stats.back().changed);
  EXPECT_EQ(countOps(*model.graph, "SequenceAt"), 2u);
  EXPECT_EQ(countOps(*model.graph, "SequenceLength"), 1u);
  EXPECT_EQ(countOps(*model.graph, "Loop"), 1u);
}

TEST(EliminateStaticSequences, InputDefaultsCountOnlyForATarget) {
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, float[3] y, int64 p) => (float[3] out) <int64 p = {-1}> {
  s = SequenceConstruct (x, y)
  out = SequenceAt (s, p)
}
)";
  Model plain = modelFromOnnxText(text);
  auto ran = runPasses(plain, {"eliminate-static-sequences"});
  ASSERT_TRUE(ran) << ran.status().toString();
  EXPECT_EQ(countOps(*plain.graph, "SequenceAt"), 1u); // the caller may feed another position

  Model forTarget = modelFromOnnxText(text);
  ran = runPasses(forTarget, {"eliminate-static-sequences"}, "om:Ascend310P3");
  ASSERT_TRUE(ran) << ran.status().toString();
  EXPECT_EQ(sequenceOps(*forTarget.graph), 0u);
  const Node* out = forTarget.graph->findLocalValue("out")->producer();
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->opType(), "Identity");
  EXPECT_EQ(out->input(0)->name(), "y");
  ASSERT_EQ(ran->notes.size(), 1u);
  EXPECT_NE(ran->notes[0].find("graph input 'p'"), std::string::npos) << ran->notes[0];
}

TEST(EliminateStaticSequences, DefaultPipelineRunsIt) {
  std::vector<std::string> passes;
  auto pipeline = pipelineByName("default");
  ASSERT_TRUE(pipeline);
  passes = *pipeline;
  auto at = [&](const std::string& name) {
    return std::find(passes.begin(), passes.end(), name) - passes.begin();
  };
  ASSERT_LT(at("eliminate-static-sequences"), static_cast<long>(passes.size()));
  EXPECT_LT(at("settle-shapes"), at("eliminate-static-sequences"));
  EXPECT_LT(at("eliminate-static-sequences"), at("scan-to-loop"));
}

TEST(EliminateStaticSequences, TargetsRefuseSequencesAtTheBoundary) {
  for (const char* name : {"ms", "om"}) {
    Model model = modelWithSequences(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) {
  z = Constant <value_int = 0> ()
  y = SequenceAt (x, z)
}
)",
                                     {"x"});
    const TargetHooks* target = findTarget(name);
    ASSERT_NE(target, nullptr) << name;
    auto lowered = target->roundTrip(std::move(model), RoundTripOptions{});
    ASSERT_FALSE(lowered) << name;
    const auto& codes = target->unsupportedCodes;
    EXPECT_NE(std::find(codes.begin(), codes.end(), lowered.status().code()), codes.end())
        << name; // a refusal (conformance: skip), not a failure
    EXPECT_NE(lowered.status().message().find(
                  fmt::format("graph input 'x' is a sequence; .{} has no sequence tensors", name)),
              std::string::npos)
        << lowered.status().toString();
  }
}
