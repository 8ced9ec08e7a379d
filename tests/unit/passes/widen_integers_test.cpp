// widen-integers (src/passes/widen_integers.cpp): int16/uint16/uint32/uint64 values become
// int32/int64 where the graph only compares and moves them, with one note; arithmetic that may
// wrap keeps the graph as it is.
#include <gtest/gtest.h>

#include "kiln/passes/pass.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

std::vector<std::string> widen(Model& model) {
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, {"widen-integers"}, options);
  EXPECT_TRUE(result) << result.status().toString();
  return result ? result->notes : std::vector<std::string>{};
}

} // namespace

// Max and Mod do not depend on the width: uint16 is carried as int32, uint64 as int64, the
// constant too, and the note names the changed inputs and outputs.
TEST(WidenIntegers, ComparisonsAndModAreWidened) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (uint16[3] a, uint16[3] b, uint64[3] c) => (uint16[3] y, uint64[3] z) <uint64[3] k = {7, 7, 7}> {
  y = Max (a, b)
  z = Mod (c, k)
}
)");
  auto notes = widen(model);
  EXPECT_EQ(model.graph->inputs()[0]->dtype(), DType::Int32);
  EXPECT_EQ(model.graph->outputs()[0]->dtype(), DType::Int32);
  EXPECT_EQ(model.graph->inputs()[2]->dtype(), DType::Int64);
  EXPECT_EQ(model.graph->findLocalValue("k")->initializer().dtype(), DType::Int64);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'a' (u16 as i32)"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("'z' (u64 as i64)"), std::string::npos) << notes[0];
}

// uint16 Add wraps at 65536 in ONNX, not in int32: the graph is left as it is.
TEST(WidenIntegers, WrappingArithmeticIsLeftAlone) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (uint16[3] a, uint16[3] b) => (uint16[3] y) {
  y = Add (a, b)
}
)");
  EXPECT_TRUE(widen(model).empty());
  EXPECT_EQ(model.graph->inputs()[0]->dtype(), DType::UInt16);
}

// A uint32 exponent of a float base is widened (the base's type decides the result).
TEST(WidenIntegers, PowExponentIsWidened) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[3] x, uint32[3] e) => (float[3] y) {
  y = Pow (x, e)
}
)");
  EXPECT_EQ(widen(model).size(), 1u);
  EXPECT_EQ(model.graph->inputs()[1]->dtype(), DType::Int64);
  EXPECT_EQ(model.graph->outputs()[0]->dtype(), DType::Float32);
}
