// The node-validation layer (src/ops/validate.h): each malformed node below once crashed or hung a
// stage after import (constant folding, ONNX shape inference, the .om/.ms lowerings, the
// executor); now the reader refuses it with one coded line.
#include <gtest/gtest.h>

#include <onnx/defs/parser.h>

#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "ops/validate.h"

using namespace kiln;

namespace {

Expected<Model> importText(const std::string& text) {
  onnx::ModelProto proto;
  auto parsed = onnx::OnnxParser::Parse(proto, text.c_str());
  EXPECT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  for (int i = 0; i < proto.graph().node_size(); ++i)
    proto.mutable_graph()->mutable_node(i)->set_name("n" + std::to_string(i));
  return importOnnxProto(proto, "test.onnx", ".");
}

// The one line a user sees for importing `text`.
std::string importError(const std::string& text) {
  auto model = importText(text);
  return model ? "imported" : model.status().toString();
}

const char* kAttributeFix =
    ". Fix: set the attribute as the ONNX operator specification defines it, in the exporter";
const char* kArityFix = ". Fix: give the node the inputs and outputs its ONNX operator schema "
                        "names; an optional one may be left out, a required one may not be empty";

std::string conv(const std::string& attributes) {
  return R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,5,5] x, float[1,1,3,3] w) => (float[1,1,3,3] y) {
      y = Conv <)" +
         attributes + R"(> (x, w)
    })";
}

TEST(NodeValidation, ConvStrideZeroIsRefused) {
  // SIGFPE in ONNX's Conv inference (division by the stride).
  EXPECT_EQ(importError(conv("strides = [1, 0]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'strides' has 0 "
                        "at axis 1; it must be >= 1") +
                kAttributeFix);
}

TEST(NodeValidation, ConvNegativeStrideIsRefused) {
  EXPECT_EQ(importError(conv("strides = [-1, 1]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'strides' has -1 "
                        "at axis 0; it must be >= 1") +
                kAttributeFix);
}

TEST(NodeValidation, ConvDilationZeroIsRefused) {
  EXPECT_EQ(importError(conv("dilations = [0, 1]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'dilations' has "
                        "0 at axis 0; it must be >= 1") +
                kAttributeFix);
}

TEST(NodeValidation, ConvKernelZeroIsRefused) {
  EXPECT_EQ(importError(conv("kernel_shape = [0, 3]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'kernel_shape' "
                        "has 0 at axis 0; it must be >= 1") +
                kAttributeFix);
}

TEST(NodeValidation, WindowAttributesMustMatchTheSpatialRank) {
  EXPECT_EQ(importError(conv("strides = [1, 1, 1]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'strides' has 3 "
                        "entries for 2 spatial axes") +
                kAttributeFix);
  EXPECT_EQ(importError(conv("pads = [1, 1, -1, 1]")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'pads' has -1 at "
                        "position 2; pads must be >= 0") +
                kAttributeFix);
  EXPECT_EQ(importError(conv("group = 0")),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Conv): attribute 'group' is 0; it "
                        "must be >= 1") +
                kAttributeFix);
}

TEST(NodeValidation, FortyEntryKernelOnATwoDimensionalInputIsRefused) {
  // SIGFPE in the .om lowering's explicit padding.
  std::string kernel = "kernel_shape = [1";
  for (int i = 1; i < 40; ++i)
    kernel += ", 1";
  kernel += "]";
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[4,4] x) => (float[4,4] y) {
      y = MaxPool <)" + kernel +
                        R"(> (x)
    })"),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (MaxPool): input #0 has rank 2, "
                        "but MaxPool needs a batch, a channel and at least one spatial axis") +
                kAttributeFix);
}

TEST(NodeValidation, ScanWithoutBodyIsRefused) {
  // SIGSEGV in ONNX's Scan inference, which reads the body unchecked.
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] s, float[3,2] x) => (float[2] t, float[3,2] y) {
      t, y = Scan <num_scan_inputs = 1> (s, x)
    })"),
            std::string("K2013: test.onnx: graph 'g': node 'n0' (Scan): has no attribute 'body', "
                        "which Scan (opset 17) requires") +
                kAttributeFix);
}

const char* kLayerNormAxis = R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3,4] x, float[4] scale) => (float[2,3,4] y, float[2,3,1] mean) {
      r = Relu (x)
      y, mean = LayerNormalization <axis = -99> (%s, scale)
    })";

std::string layerNorm(const char* input) {
  std::string text = kLayerNormAxis;
  text.replace(text.find("%s"), 2, input);
  return text;
}

TEST(NodeValidation, LayerNormalizationAxisOutOfRangeIsRefusedAtImport) {
  EXPECT_EQ(importError(layerNorm("x")),
            std::string("K2013: test.onnx: graph 'g': node 'n1' (LayerNormalization): attribute "
                        "'axis' is -99, outside [-3, 2] for the rank-3 input") +
                kAttributeFix);
}

TEST(NodeValidation, LayerNormalizationAxisOfAnInferredRankIsRefusedByShapeInference) {
  // The axis applies to Relu's output, whose rank only inference finds: ONNX's LayerNormalization
  // inference used to index the Mean output's dims by the unchecked axis (SIGSEGV).
  auto model = importText(layerNorm("r"));
  ASSERT_TRUE(model) << model.status().toString();
  std::vector<ShapeConflict> conflicts = shapeConflicts(*model);
  ASSERT_FALSE(conflicts.empty());
  EXPECT_NE(conflicts.front().status.message().find(
                "attribute 'axis' is -99, outside [-3, 2] for the rank-3 input"),
            std::string::npos)
      << conflicts.front().status.toString();
  PassContext context;
  context.model = &*model;
  auto ran = createPass("infer-shapes")->run(*model->graph, context);
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.status().toString(),
            std::string("K2013: graph 'g': node 'n1' (LayerNormalization): attribute 'axis' is "
                        "-99, outside [-3, 2] for the rank-3 input") +
                kAttributeFix);
}

TEST(NodeValidation, BatchNormalizationWithoutItsParametersIsRefused) {
  // atc wrote an .om for it that `kiln run` then crashed on.
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,2,3,3] x) => (float[1,2,3,3] y) {
      y = BatchNormalization (x)
    })"),
            std::string("K2015: test.onnx: graph 'g': node 'n0' (BatchNormalization): has 1 input, "
                        "but BatchNormalization (opset 17) takes 5 inputs") +
                kArityFix);
}

TEST(NodeValidation, EmptyRequiredInputIsRefused) {
  // Conv(x, "") crashed constant folding, `kiln check --target` and both lowerings.
  EXPECT_EQ(
      importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1,1,5,5] x) => (float[1,1,3,3] y) {
      y = Conv (x, )
    })"),
      std::string("K2015: test.onnx: graph 'g': node 'n0' (Conv): input #1 is empty, but Conv "
                  "(opset 17) requires it") +
          kArityFix);
}

TEST(NodeValidation, TooManyInputsAndEmptyOptionalInputs) {
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) {
      y = Relu (x, x)
    })"),
            std::string("K2015: test.onnx: graph 'g': node 'n0' (Relu): has 2 inputs, but Relu "
                        "(opset 17) takes 1 input") +
                kArityFix);
  // An omitted optional input ("" for Clip's min) is fine.
  onnx::ModelProto proto;
  ASSERT_TRUE(onnx::OnnxParser::Parse(proto, R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x, float hi) => (float[2] y) {
      y = Clip (x, x, hi)
    })")
                  .IsOK());
  proto.mutable_graph()->mutable_node(0)->set_input(1, "");
  EXPECT_TRUE(importOnnxProto(proto, "test.onnx", "."));
}

TEST(NodeValidation, OpsNewerThanTheLibraryUseKilnsArity) {
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 23]>
    g (float[2,4] x) => (float[2,4] y) {
      y = RMSNormalization (x)
    })"),
            std::string("K2015: test.onnx: graph 'g': node 'n0' (RMSNormalization): has 1 input, "
                        "but RMSNormalization (opset 23) takes 2 inputs") +
                kArityFix);
}

TEST(NodeValidation, ValidNodesPass) {
  EXPECT_EQ(importError(conv("strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [3, 3]")),
            "imported");
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3,4] x, float[4] scale) => (float[2,3,4] y) {
      y = LayerNormalization <axis = -1> (x, scale)
    })"),
            "imported");
}

} // namespace

namespace {

// OptionalHasElement's input is optional from opset 18 (no input is an empty optional: false);
// the onnx library kiln builds with stops at opset 17, whose schema requires it.
std::string optionalHasElementWithoutInput(int opset) {
  return R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
    g () => (bool b) {
      b = OptionalHasElement ()
    })";
}

TEST(NodeValidation, OptionalHasElementWithoutAnInputFromOpset18) {
  auto model = importText(optionalHasElementWithoutInput(18));
  ASSERT_TRUE(model) << model.status().toString();
  EXPECT_EQ(importError(optionalHasElementWithoutInput(15)),
            std::string("K2015: test.onnx: graph 'g': node 'n0' (OptionalHasElement): has 0 "
                        "inputs, but OptionalHasElement (opset 15) takes 1 input") +
                kArityFix);
}

} // namespace

TEST(NodeValidation, ArityHoldsAtOpsetZero) {
  // A fuzzed model importing ai.onnx at version 0 with a one-input Conv reached the .ms Conv rule
  // without its weight (SIGSEGV); the earliest schema's arity applies.
  EXPECT_EQ(importError(R"(<ir_version: 8, opset_import: ["" : 0]>
    g (float[1,1,5,5] x) => (float[1,4,5,5] y) <float[4,1,1,1] w = {1, 1, 1, 1}> {
      y = Conv <kernel_shape = [1, 1]> (w)
    })"),
            std::string("K2015: test.onnx: graph 'g': node 'n0' (Conv): has 1 input, but Conv "
                        "(opset 1) takes 2 to 3 inputs") +
                kArityFix);
}
