// analyzeSensitivity on small models built so that one part is fragile: the ranking puts it first
// and the target search keeps just it.
#include <algorithm>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/compare.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/sensitivity.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

std::string values(size_t count, double (*f)(size_t)) {
  std::string out;
  for (size_t i = 0; i < count; ++i)
    out += (out.empty() ? "" : ", ") + std::to_string(f(i));
  return out;
}

// Two MatMuls over 32 inputs. `smooth` has ordinary weights; `fragile` has one large weight per
// column (row 0, 100) whose contribution is subtracted again, so the output rests on the small
// weights that 8-bit codes spanning the large one cannot resolve.
Model twoMatMuls() {
  std::string smooth = values(32 * 4, [](size_t i) { return 0.05 * ((i * 7) % 13) - 0.3; });
  std::string fragile =
      values(32 * 4, [](size_t i) { return i < 4 ? 100.0 : 0.003 * ((i * 5) % 11) - 0.015; });
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]>\n"
                     "g (float[1,32] v) => (float[1,4] a, float[1,4] b) <float[32,4] smooth = {" +
                     smooth + "}, float[32,4] fragile = {" + fragile +
                     "}, int64[1] first = {0}, float[1] hundred = {100}> {\n"
                     "  a = MatMul (v, smooth)\n"
                     "  p = MatMul (v, fragile)\n"
                     "  v0 = Gather <axis = 1> (v, first)\n"
                     "  big = Mul (v0, hundred)\n"
                     "  b = Sub (p, big)\n"
                     "}\n";
  return modelFromOnnxText(text, true, {"mm_smooth", "mm_fragile", "gather", "mul", "sub"});
}

} // namespace

TEST(Sensitivity, WeightQuantRanksTheFragileWeightFirstAndKeepsOnlyIt) {
  Model model = twoMatMuls();
  auto inputs = makeDeterministicInputs(*model.graph, 3);
  ASSERT_TRUE(inputs) << inputs.status().toString();
  SensitivityOptions options;
  options.variant = SensitivityVariant::WeightQuant;
  options.weightQuant.symmetric = false;
  options.metric = SensitivityMetric::Cosine;
  options.target = 0.9999;
  auto report = analyzeSensitivity(model, *inputs, options);
  ASSERT_TRUE(report) << report.status().toString();
  ASSERT_EQ(report->candidates, 2u);
  ASSERT_EQ(report->nodes.size(), 2u);
  EXPECT_EQ(report->nodes[0].node, "mm_fragile");
  EXPECT_EQ(report->nodes[0].opType, "MatMul");
  EXPECT_LT(report->nodes[0].score, report->nodes[1].score);
  EXPECT_LT(report->convertedAll, 0.9999); // quantizing both misses the target ...
  EXPECT_EQ(report->keep, std::vector<std::string>{"mm_fragile"}); // ... keeping one meets it
  EXPECT_TRUE(report->targetMet);
  EXPECT_GE(report->keptScore, 0.9999);
  // Float: two 32×4 weights and the scalars; converted: the smooth one as int8 codes.
  EXPECT_EQ(report->floatBytes, 2u * 32 * 4 * 4 + 8 + 4);
  EXPECT_LT(report->convertedBytes, report->floatBytes);
  EXPECT_GT(report->convertedBytes, 32u * 4 * 4); // the fragile weight stays float
  // The input model is left as it was.
  EXPECT_EQ(model.graph->nodeCount(), 5u);
}

TEST(Sensitivity, Fp16KeepsTheNodesThatLoseDigits) {
  // (x + 1000) - 1000 loses x's low digits in fp16 (spacing 0.5 near 1000) whichever of the two
  // runs in fp16; the Relu branch is harmless. The final Muls produce graph outputs, which stay
  // fp32, so the candidates are add, sub and relu.
  Model model = modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                  "g (float[1,64] x) => (float[1,64] y, float[1,64] z) "
                                  "<float[1] k = {1000}, float[1] one = {1}> {\n"
                                  "  s = Add (x, k)\n"
                                  "  d = Sub (s, k)\n"
                                  "  y = Mul (d, one)\n"
                                  "  r = Relu (x)\n"
                                  "  z = Mul (r, one)\n"
                                  "}\n",
                                  true, {"add", "sub", "out_y", "relu", "out_z"});
  // Value types, as the converting CLIs' default pipeline leaves them (convert-fp16 needs them).
  ASSERT_TRUE(runPipeline(model, {"infer-shapes"}));
  auto inputs = makeDeterministicInputs(*model.graph, 5);
  ASSERT_TRUE(inputs) << inputs.status().toString();
  SensitivityOptions options;
  options.variant = SensitivityVariant::Fp16;
  options.precision.mode = PrecisionMode::ForceFp16;
  options.metric = SensitivityMetric::MeanRelativeError;
  options.target = 0.005;
  auto report = analyzeSensitivity(model, *inputs, options);
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(report->candidates, 3u);
  ASSERT_EQ(report->nodes.size(), 3u);
  EXPECT_EQ(report->nodes[2].node, "relu"); // the least costly
  EXPECT_GT(report->convertedAll, 0.005);
  std::vector<std::string> keep = report->keep;
  std::sort(keep.begin(), keep.end());
  EXPECT_EQ(keep, (std::vector<std::string>{"add", "sub"}));
  EXPECT_TRUE(report->targetMet);
  EXPECT_LE(report->keptScore, 0.005);
}

TEST(Sensitivity, SameReportForAnyThreadCount) {
  Model model = twoMatMuls();
  auto inputs = makeDeterministicInputs(*model.graph, 3);
  ASSERT_TRUE(inputs) << inputs.status().toString();
  SensitivityOptions options;
  options.variant = SensitivityVariant::Fp16;
  options.precision.mode = PrecisionMode::ForceFp16;
  options.metric = SensitivityMetric::MeanRelativeError;
  options.target = 0.001;
  ASSERT_TRUE(runPipeline(model, {"infer-shapes"}));
  auto one = analyzeSensitivity(model, *inputs, options);
  options.threads = 3;
  auto three = analyzeSensitivity(model, *inputs, options);
  ASSERT_TRUE(one && three);
  ASSERT_GT(one->nodes.size(), 1u);
  ASSERT_EQ(one->nodes.size(), three->nodes.size());
  for (size_t i = 0; i < one->nodes.size(); ++i) {
    EXPECT_EQ(one->nodes[i].node, three->nodes[i].node);
    EXPECT_EQ(one->nodes[i].score, three->nodes[i].score); // bit-identical, not merely close
  }
  EXPECT_EQ(one->keep, three->keep);
  EXPECT_EQ(one->keptScore, three->keptScore);
  EXPECT_EQ(one->runs, three->runs);
}

namespace {

// Every number of two reports, compared bit for bit.
void expectSameReport(const SensitivityReport& a, const SensitivityReport& b) {
  EXPECT_EQ(a.candidates, b.candidates);
  EXPECT_EQ(a.convertedAll, b.convertedAll);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].node, b.nodes[i].node);
    EXPECT_EQ(a.nodes[i].score, b.nodes[i].score) << a.nodes[i].node;
  }
  EXPECT_EQ(a.keep, b.keep);
  EXPECT_EQ(a.keptScore, b.keptScore);
  EXPECT_EQ(a.targetMet, b.targetMet);
  EXPECT_EQ(a.convertedBytes, b.convertedBytes);
  EXPECT_EQ(a.runs, b.runs);
}

// Branches that join again (a residual Add, a Mul of two paths), a Sigmoid whose logits the gate
// reads, and cancellation that fp16 cannot hold: trials cut in the middle of the graph.
Model branchingModel() {
  Model model =
      modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                        "g (float[1,64] x) => (float[1,64] y, float[1,64] z) "
                        "<float[1] k = {1000}, float[1] h = {0.5}> {\n"
                        "  s = Add (x, k)\n"
                        "  d = Sub (s, k)\n"
                        "  r = Relu (x)\n"
                        "  m = Mul (d, r)\n"
                        "  t = Tanh (m)\n"
                        "  e = Add (t, d)\n"
                        "  y = Sigmoid (e)\n"
                        "  q = Mul (r, h)\n"
                        "  z = Add (q, e)\n"
                        "}\n",
                        true, {"add", "sub", "relu", "mul", "tanh", "res", "sig", "half", "out_z"});
  EXPECT_TRUE(runPipeline(model, {"infer-shapes"}));
  return model;
}

} // namespace

TEST(Sensitivity, KeptFloatTensorsGiveTheNumbersOfWholeRuns) {
  // The trials read the float run's tensors and run only what the conversion changed and what
  // follows; the full path (maxStoredBytes 0) runs every node of every trial. Same numbers, bit
  // for bit, for both variants, a gate with logits, several input sets and a budget that keeps
  // only part of the float run.
  Model model = branchingModel();
  std::vector<std::map<std::string, rt::RtValue>> sets;
  for (uint32_t seed : {1u, 2u}) {
    auto inputs = makeDeterministicInputs(*model.graph, seed);
    ASSERT_TRUE(inputs) << inputs.status().toString();
    sets.push_back(inputs.take());
  }
  SensitivityOptions fp16;
  fp16.variant = SensitivityVariant::Fp16;
  fp16.precision.mode = PrecisionMode::ForceFp16;
  fp16.metric = SensitivityMetric::MeanRelativeError;
  fp16.target = 1e-5;
  SensitivityOptions gated = fp16;
  gated.gate = SensitivityGate{};
  Model matmuls = twoMatMuls();
  auto matmulInputs = makeDeterministicInputs(*matmuls.graph, 3);
  ASSERT_TRUE(matmulInputs) << matmulInputs.status().toString();
  SensitivityOptions quant;
  quant.weightQuant.symmetric = false;
  quant.target = 0.9999;
  struct Case {
    const char* name;
    const Model* model;
    std::vector<std::map<std::string, rt::RtValue>> sets;
    SensitivityOptions options;
  };
  const std::vector<Case> cases = {{"fp16", &model, {sets[0]}, fp16},
                                   {"fp16 gate, two sets", &model, sets, gated},
                                   {"weight quant", &matmuls, {*matmulInputs}, quant}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SensitivityOptions whole = c.options;
    whole.maxStoredBytes = 0;
    auto full = analyzeSensitivity(*c.model, c.sets, whole);
    ASSERT_TRUE(full) << full.status().toString();
    EXPECT_EQ(full->storedBytes, 0u);
    EXPECT_EQ(full->trialNodesRun, full->trialNodes); // every node of every trial ran
    auto kept = analyzeSensitivity(*c.model, c.sets, c.options);
    ASSERT_TRUE(kept) << kept.status().toString();
    EXPECT_GT(kept->storedBytes, 0u);
    EXPECT_LT(kept->trialNodesRun, full->trialNodesRun); // the float part was read back
    expectSameReport(*full, *kept);
    SensitivityOptions partly = c.options;
    partly.maxStoredBytes = 600; // a few of the 256-byte float tensors
    auto part = analyzeSensitivity(*c.model, c.sets, partly);
    ASSERT_TRUE(part) << part.status().toString();
    EXPECT_LE(part->storedBytes, 600u);
    expectSameReport(*full, *part);
  }
}

namespace {

// The precision guard: x + 2048 - 2048 in fp16 loses x to fp16's spacing of 2 at 2048, so the
// conversion misses the gate; keeping the Add and the Sub fp32 restores it. The Sigmoid after it
// makes `s` the tensor the gate's MRE reads.
const char* kCancellingModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,64] x) => (float[1,64] y) <float[1] c = {2048}> {
  a = Add (x, c)
  s = Sub (a, c)
  y = Sigmoid (s)
}
)";

// As the conversion pipeline hands it to the guard: shapes inferred.
Model shaped(const char* text) {
  Model model = modelFromOnnxText(text);
  auto inferred = runPipeline(model, {"infer-shapes"});
  EXPECT_TRUE(inferred) << inferred.status().toString();
  return model;
}

PrecisionOptions forceFp16() {
  PrecisionOptions precision;
  precision.mode = PrecisionMode::ForceFp16;
  return precision;
}

TEST(PrecisionGuard, CheckSaysTheConversionMissesTheGateOnTheLogits) {
  Model model = shaped(kCancellingModel);
  PrecisionGuardOptions options;
  options.mode = PrecisionGuardMode::Check;
  PrecisionGuardResult result = guardFp16Precision(model, forceFp16(), options);
  EXPECT_TRUE(result.keep.empty());
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("precision guard: the FP16 conversion misses"), std::string::npos)
      << result.notes[0];
  EXPECT_NE(result.notes[0].find("on 4 seeded input sets: 's' has MRE"), std::string::npos)
      << result.notes[0];
  EXPECT_NE(result.notes[0].find("--precision-mode force_fp16 --target-mre 0.5"), std::string::npos)
      << result.notes[0];
}

TEST(PrecisionGuard, KeepFindsTheNodesThatMeetTheGate) {
  Model model = shaped(kCancellingModel);
  PrecisionGuardOptions options;
  options.mode = PrecisionGuardMode::Keep;
  PrecisionGuardResult result = guardFp16Precision(model, forceFp16(), options);
  std::vector<std::string> keep = result.keep;
  std::sort(keep.begin(), keep.end());
  EXPECT_EQ(keep, (std::vector<std::string>{"n0", "n1"})); // the Add and the Sub
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("precision guard: 2 of 2 node(s) kept fp32"), std::string::npos)
      << result.notes[0];
}

TEST(PrecisionGuard, QuietWhenTheConversionMeetsTheGateAndOffDoesNothing) {
  Model benign = shaped(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,64] x) => (float[1,64] y) <float[1] h = {0.5}> {
  m = Mul (x, h)
  y = Relu (m)
}
)");
  PrecisionGuardOptions options;
  options.mode = PrecisionGuardMode::Check;
  PrecisionGuardResult quiet = guardFp16Precision(benign, forceFp16(), options);
  EXPECT_TRUE(quiet.notes.empty()) << quiet.notes[0];
  Model model = shaped(kCancellingModel);
  options.mode = PrecisionGuardMode::Off;
  PrecisionGuardResult off = guardFp16Precision(model, forceFp16(), options);
  EXPECT_TRUE(off.notes.empty() && off.keep.empty());
}

TEST(PrecisionGuard, OverBudgetSaysItDidNotRun) {
  Model model = shaped(kCancellingModel);
  PrecisionGuardOptions options;
  options.maxTrialMultiplyAdds = 10;
  PrecisionGuardResult result = guardFp16Precision(model, forceFp16(), options);
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].find("precision guard: not run (it would take about"),
            std::string::npos)
      << result.notes[0];
}

} // namespace
