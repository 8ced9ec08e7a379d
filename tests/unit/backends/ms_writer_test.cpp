// buildMsBuffer/writeMsFile on small hand-built models: identifier, version, tensor formats and
// dtypes, KHWC weights, fused activations, quant params and bit-packed codes, fp16, .msw split,
// unsupported-op lists, determinism and atomic writes.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <onnx/defs/parser.h>

#include "../../../src/backends/ms/ms_context.h"
#include "../../../src/backends/ms/ms_lower.h"
#include "../../../src/backends/ms/weight_coding.h"
#include "backends/ms/ms_model_schema.h"
#include "kiln/backends/ms.h"
#include "kiln/backends/ms_reader.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"
#include "ms_graph_view.h"
#include "onnx_text.h"

using namespace kiln;
namespace fb = kiln::msfb;

namespace {

using kiln::testing::modelFromOnnxText;

std::vector<uint8_t> build(const Model& model, const MsWriteOptions& options = {}) {
  auto buffer = buildMsBuffer(model, options);
  EXPECT_TRUE(buffer) << buffer.status().toString();
  return buffer ? *buffer : std::vector<uint8_t>{};
}

const fb::MetaGraph* root(const std::vector<uint8_t>& bytes) {
  return kiln::testing::msRoot(bytes);
}

const fb::Tensor* tensorNamed(const fb::MetaGraph* g, const std::string& name) {
  for (const auto* t : *g->allTensors())
    if (t->name() && t->name()->str() == name) return t;
  return nullptr;
}

std::vector<const fb::CNode*> nodesOfType(const fb::MetaGraph* g, fb::PrimitiveType type) {
  return kiln::testing::msNodesOfType(g, type);
}

template <typename T> std::vector<T> dataOf(const fb::Tensor* t) {
  std::vector<T> out(t->data()->size() / sizeof(T));
  std::memcpy(out.data(), t->data()->data(), out.size() * sizeof(T));
  return out;
}

// Conv 2→3 channels, 2×2 kernel with weights w[o][i][h][w] = 1000o + 100i + 10h + w, then Relu:
// the KHWC order and the fused activation are visible in the bytes.
const char* kConvRelu = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x) => (float[1,3,4,4] y) <float[3,2,2,2] w = {0, 1, 10, 11, 100, 101, 110, 111, 1000, 1001, 1010, 1011, 1100, 1101, 1110, 1111, 2000, 2001, 2010, 2011, 2100, 2101, 2110, 2111}, float[3] b = {1, 2, 3}> {
  c = Conv <pads = [1, 0, 0, 1]> (x, w, b)
  y = Relu (c)
}
)";

} // namespace

TEST(MsWriter, ContainerVersionAndGraphBoundary) {
  Model model = modelFromOnnxText(kConvRelu);
  auto bytes = build(model);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()) + 4, 4), "MSL2");
  const auto* g = root(bytes);
  EXPECT_EQ(g->version()->str(), "MindSpore Lite 2.1.0");
  ASSERT_EQ(g->subGraph()->size(), 1u);
  const auto* sub = g->subGraph()->Get(0);
  ASSERT_NE(sub->name(), nullptr);
  EXPECT_EQ(sub->nodeIndices()->size(), g->nodes()->size());
  EXPECT_EQ(sub->tensorIndices()->size(), g->allTensors()->size());

  // Graph input and output keep the ONNX names and NCHW layout; activations are nodeType 2.
  ASSERT_EQ(g->inputIndex()->size(), 1u);
  const auto* in = g->allTensors()->Get(g->inputIndex()->Get(0));
  EXPECT_EQ(in->name()->str(), "x");
  EXPECT_EQ(in->nodeType(), 2);
  EXPECT_EQ(in->dataType(), 43);
  EXPECT_EQ(std::vector<int32_t>(in->dims()->begin(), in->dims()->end()),
            (std::vector<int32_t>{1, 2, 5, 5}));
  const auto* out = g->allTensors()->Get(g->outputIndex()->Get(0));
  EXPECT_EQ(out->name()->str(), "y");
  EXPECT_EQ(std::vector<int32_t>(out->dims()->begin(), out->dims()->end()),
            (std::vector<int32_t>{1, 3, 4, 4}));
  EXPECT_EQ(out->format(), fb::Format_NCHW);

  // Transpose in, Conv2DFusion (Relu fused), Transpose out.
  ASSERT_EQ(g->nodes()->size(), 3u);
  EXPECT_EQ(g->nodes()->Get(0)->primitive()->value_type(), fb::PrimitiveType_Transpose);
  EXPECT_EQ(g->nodes()->Get(2)->primitive()->value_type(), fb::PrimitiveType_Transpose);
  const auto* perm = g->allTensors()->Get(g->nodes()->Get(0)->inputIndex()->Get(1));
  EXPECT_EQ(perm->dataType(), 34);
  EXPECT_EQ(dataOf<int32_t>(perm), (std::vector<int32_t>{0, 2, 3, 1}));
}

TEST(MsWriter, ConvWeightsKhwcPadsAndFusedRelu) {
  Model model = modelFromOnnxText(kConvRelu);
  auto bytes = build(model);
  const auto* g = root(bytes);
  auto convs = nodesOfType(g, fb::PrimitiveType_Conv2DFusion);
  ASSERT_EQ(convs.size(), 1u);
  const auto* conv = convs[0]->primitive()->value_as_Conv2DFusion();
  EXPECT_EQ(conv->format(), fb::Format_NHWC);
  EXPECT_EQ(conv->activation_type(), fb::ActivationType_RELU);
  EXPECT_EQ(std::vector<int64_t>(conv->kernel_size()->begin(), conv->kernel_size()->end()),
            (std::vector<int64_t>{2, 2}));
  // ONNX pads [top=1, left=0, bottom=0, right=1] → [top, bottom, left, right].
  EXPECT_EQ(std::vector<int64_t>(conv->pad_list()->begin(), conv->pad_list()->end()),
            (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(conv->group(), 1);
  EXPECT_EQ(conv->in_channel(), 2);
  EXPECT_EQ(conv->out_channel(), 3);

  const auto* x = g->allTensors()->Get(convs[0]->inputIndex()->Get(0));
  EXPECT_EQ(x->format(), fb::Format_NHWC);
  EXPECT_EQ(std::vector<int32_t>(x->dims()->begin(), x->dims()->end()),
            (std::vector<int32_t>{1, 5, 5, 2}));
  const auto* w = g->allTensors()->Get(convs[0]->inputIndex()->Get(1));
  EXPECT_EQ(w->nodeType(), 0);
  EXPECT_EQ(w->format(), fb::Format_KHWC);
  EXPECT_EQ(std::vector<int32_t>(w->dims()->begin(), w->dims()->end()),
            (std::vector<int32_t>{3, 2, 2, 2}));
  // KHWC [o][h][w][i] holds OIHW value 1000o + 100i + 10h + w.
  auto values = dataOf<float>(w);
  ASSERT_EQ(values.size(), 24u);
  for (int o = 0; o < 3; ++o)
    for (int h = 0; h < 2; ++h)
      for (int ww = 0; ww < 2; ++ww)
        for (int i = 0; i < 2; ++i)
          EXPECT_EQ(values[((o * 2 + h) * 2 + ww) * 2 + i], 1000 * o + 100 * i + 10 * h + ww);
  // No Activation node is left: Relu lives in the conv.
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_Activation).empty());
}

TEST(MsWriter, Fp16WeightsAndDeterminism) {
  Model model = modelFromOnnxText(kConvRelu);
  MsWriteOptions options;
  options.fp16Weights = true;
  auto bytes = build(model, options);
  EXPECT_EQ(bytes, build(model, options)) << "same input and options must give the same bytes";
  const auto* g = root(bytes);
  const auto* w = tensorNamed(g, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dataType(), 42);
  auto halves = dataOf<uint16_t>(w);
  ASSERT_EQ(halves.size(), 24u);
  EXPECT_EQ(halves[0], 0x0000);  // 0
  EXPECT_EQ(halves[1], 0x5640);  // KHWC [0][0][0][1] = OIHW [0][1][0][0] = 100
  EXPECT_EQ(halves[23], 0x6820); // 2111 is a tie between 2110 and 2112: to even, 2112
  // Activations and index constants are untouched by --fp16.
  EXPECT_EQ(g->allTensors()->Get(g->inputIndex()->Get(0))->dataType(), 43);
  EXPECT_NE(build(model), bytes);
}

// Conv 4→3 channels, 3×3 kernel, w[o][i][h][w] = 1000o + 100i + 10h + w: 36 weights per channel,
// enough for per-channel quantization (more than 256 / (32 − bits) per channel).
std::string quantConvText() {
  std::string values;
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 4; ++i)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 3; ++w)
          values += (values.empty() ? "" : ", ") + std::to_string(1000 * o + 100 * i + 10 * h + w);
  return "<ir_version: 8, opset_import: [\"\" : 13]>\n"
         "g (float[1,4,5,5] x) => (float[1,3,3,3] y) <float[3,4,3,3] w = {" +
         values + "}, float[3] b = {1, 2, 3}> {\n  y = Conv (x, w, b)\n}\n";
}

TEST(MsWriter, WeightQuantPerChannelParams) {
  Model model = modelFromOnnxText(quantConvText().c_str());
  WeightQuantOptions quant;
  quant.bitNum = 8;
  quant.minQuantWeightChannel = 1;
  quant.biasCorrection = false; // plain max/127 scales (bias correction: the test below)
  PipelineOptions pipeline;
  pipeline.weightQuant = &quant;
  auto result = runPipeline(model, {"quantize-weights"}, pipeline);
  ASSERT_TRUE(result) << result.status().toString();
  auto bytes = build(model);
  const auto* g = root(bytes);
  auto convs = nodesOfType(g, fb::PrimitiveType_Conv2DFusion);
  ASSERT_EQ(convs.size(), 1u);
  EXPECT_EQ(convs[0]->quantType(), fb::QuantType_QUANT_WEIGHT);
  const auto* w = g->allTensors()->Get(convs[0]->inputIndex()->Get(1));
  EXPECT_EQ(w->dataType(), 32);
  EXPECT_EQ(w->format(), fb::Format_KHWC);
  EXPECT_EQ(std::vector<int32_t>(w->dims()->begin(), w->dims()->end()),
            (std::vector<int32_t>{3, 3, 3, 4}));
  ASSERT_NE(w->quantParams(), nullptr);
  ASSERT_EQ(w->quantParams()->size(), 3u); // one per output channel (KHWC dim 0)
  for (size_t c = 0; c < 3; ++c) {
    const auto* q = w->quantParams()->Get(static_cast<flatbuffers::uoffset_t>(c));
    EXPECT_EQ(q->numBits(), 8);
    EXPECT_EQ(q->dstDtype(), 32);
    EXPECT_FALSE(q->inited());
    EXPECT_EQ(q->varCorr(), 1.0f);
    EXPECT_EQ(q->meanCorr(), 0.0f);
    // Symmetric 8-bit: scale = max|w| / 127 of the channel.
    const double maxAbs = 1000.0 * c + 322;
    EXPECT_NEAR(q->scale(), maxAbs / 127, 1e-3);
    EXPECT_EQ(q->zeroPoint(), 0);
  }
  // Codes in KHWC order: channel 1's largest weight (1322, OIHW [1][3][2][2]) sits at KHWC
  // [1][2][2][3] with code 127; its smallest (1000, [1][0][0][0]) at [1][0][0][0].
  auto codes = dataOf<int8_t>(w);
  ASSERT_EQ(codes.size(), 108u);
  EXPECT_EQ(codes[((1 * 3 + 2) * 3 + 2) * 4 + 3], 127);
  EXPECT_EQ(codes[((1 * 3 + 0) * 3 + 0) * 4 + 0],
            static_cast<int8_t>(std::nearbyint(1000 / (1322.0 / 127))));
  // The bias stays float.
  const auto* bias = g->allTensors()->Get(convs[0]->inputIndex()->Get(2));
  EXPECT_EQ(bias->dataType(), 43);
  EXPECT_EQ(bias->quantParams(), nullptr);
}

// With bias correction (the default) each channel's weights, dequantized as the runtime does
// ((q - zeroPoint) * scale * varCorr + meanCorr), keep the original channel mean and standard
// deviation, and the .ms holds the per-channel offsets in meanCorr.
TEST(MsWriter, WeightQuantBiasCorrectionKeepsChannelMeanAndDeviation) {
  // Conv 4→3 channels, 3×3: irregular values so that rounding shifts each channel's mean.
  std::vector<float> weights;
  for (int k = 0; k < 108; ++k)
    weights.push_back(static_cast<float>(std::sin(k * 1.7) * (1 + k % 7) + 0.3 * (k / 36)));
  std::string values;
  for (float v : weights)
    values += (values.empty() ? "" : ", ") + std::to_string(v);
  Model model =
      modelFromOnnxText(("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                         "g (float[1,4,5,5] x) => (float[1,3,3,3] y) <float[3,4,3,3] w = {" +
                         values + "}> {\n  y = Conv (x, w)\n}\n")
                            .c_str());
  const std::vector<float> original =
      model.graph->lookupValue("w")->initializer().copyValues<float>();
  WeightQuantOptions quant;
  quant.bitNum = 4; // coarse codes make the correction visible
  quant.symmetric = false;
  quant.minQuantWeightChannel = 1;
  PipelineOptions pipeline;
  pipeline.weightQuant = &quant;
  ASSERT_TRUE(runPipeline(model, {"quantize-weights"}, pipeline));
  MsWriteOptions options;
  options.weightQuantBits = 4;
  auto bytes = build(model, options);
  const auto* g = root(bytes);
  const auto* w =
      g->allTensors()->Get(nodesOfType(g, fb::PrimitiveType_Conv2DFusion)[0]->inputIndex()->Get(1));
  ASSERT_NE(w->quantParams(), nullptr);
  ASSERT_EQ(w->quantParams()->size(), 3u);
  // Unpack the LSB-first 4-bit stream (biased by 8); KHWC [3,3,3,4] with 36 codes per channel.
  auto packed = dataOf<uint8_t>(w);
  ASSERT_EQ(packed.size(), 54u);
  bool anyOffset = false;
  for (int c = 0; c < 3; ++c) {
    const auto* q = w->quantParams()->Get(static_cast<flatbuffers::uoffset_t>(c));
    anyOffset |= q->meanCorr() != 0.0f;
    double sumW = 0, sumWW = 0, sumD = 0, sumDD = 0, sumPlain = 0;
    for (int k = 0; k < 36; ++k) {
      int index = c * 36 + k;
      int code = ((packed[static_cast<size_t>(index / 2)] >> (4 * (index % 2))) & 0xF) - 8;
      double plain = (code - q->zeroPoint()) * q->scale();
      double d = plain * q->varCorr() + q->meanCorr();
      double v = original[static_cast<size_t>(c * 36 + k)]; // same multiset in OIHW order
      sumW += v, sumWW += v * v, sumD += d, sumDD += d * d, sumPlain += plain;
    }
    const double meanW = sumW / 36, meanD = sumD / 36;
    EXPECT_NEAR(meanD, meanW, 1e-5) << "channel " << c;
    EXPECT_NEAR(std::sqrt(sumDD / 36 - meanD * meanD), std::sqrt(sumWW / 36 - meanW * meanW), 1e-4)
        << "channel " << c;
    // Without the offsets the mean would be off (the correction does something).
    EXPECT_GT(std::fabs(sumPlain / 36 - meanW), 1e-4) << "channel " << c;
  }
  EXPECT_TRUE(anyOffset);
}

TEST(MsWriter, BitPackedFourBitCodes) {
  // A MatMul weight [K=2, N=3] quantized per column to 4 bits by hand (zero point 0).
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2] a) => (float[1,3] y) <int8[2,3] q = {-8, 7, 1, -1, 0, 3}, float[3] s = {0.5, 0.25, 1}, int8[3] z = {0, 0, 0}> {
  w = DequantizeLinear <axis = 1> (q, s, z)
  y = MatMul (a, w)
}
)");
  MsWriteOptions options;
  options.weightQuantBits = 4;
  auto bytes = build(model, options);
  const auto* g = root(bytes);
  auto mms = nodesOfType(g, fb::PrimitiveType_MatMulFusion);
  ASSERT_EQ(mms.size(), 1u);
  EXPECT_EQ(mms[0]->quantType(), fb::QuantType_QUANT_WEIGHT);
  const auto* w = g->allTensors()->Get(mms[0]->inputIndex()->Get(1));
  EXPECT_EQ(w->weightQuantCompressType(), fb::WeightQuantCompressType_BITPACKING);
  EXPECT_EQ(w->dataType(), 32);
  EXPECT_EQ(std::vector<int32_t>(w->dims()->begin(), w->dims()->end()),
            (std::vector<int32_t>{2, 3}));
  ASSERT_EQ(w->quantParams()->size(), 3u);
  EXPECT_EQ(w->quantParams()->Get(0)->numBits(), 4);
  EXPECT_DOUBLE_EQ(w->quantParams()->Get(1)->scale(), 0.25);
  // Biased by 8: {0, 15, 9, 7, 8, 11}, LSB-first nibbles: 0xF0, 0x79, 0xB8.
  auto packed = dataOf<uint8_t>(w);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0xF0, 0x79, 0xB8}));

  // Codes that do not fit the declared width are an error naming the weight.
  options.weightQuantBits = 3;
  auto bad = buildMsBuffer(model, options);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::MsLowerBadAttribute);
  EXPECT_NE(bad.status().message().find("'q'"), std::string::npos) << bad.status().message();
}

TEST(MsWriter, NineBitCodesPackIntoWords) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2] a) => (float[1,1] y) <int16[2,1] q = {-256, 255}, float[1] s = {1}, int16[1] z = {0}> {
  w = DequantizeLinear <axis = 1> (q, s, z)
  y = MatMul (a, w)
}
)");
  MsWriteOptions options;
  options.weightQuantBits = 9;
  auto bytes = build(model, options);
  const auto* g = root(bytes);
  const auto* w =
      g->allTensors()->Get(nodesOfType(g, fb::PrimitiveType_MatMulFusion)[0]->inputIndex()->Get(1));
  EXPECT_EQ(w->dataType(), 33);
  // Biased {0, 511}: bits 9..17 set → words 0xFE00, 0x0003.
  EXPECT_EQ(dataOf<uint16_t>(w), (std::vector<uint16_t>{0xFE00, 0x0003}));
}

TEST(MsWriter, UnsupportedOpsListedAtOnce) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3,3] x) => (float y) {
  a = Det (x)
  b = Relu (a)
  y = Bernoulli (b)
}
)");
  auto result = buildMsBuffer(model, {});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::MsLowerUnsupported);
  const std::string& msg = result.status().message();
  EXPECT_NE(msg.find("2 node(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'n0' (Det)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'n2' (Bernoulli)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("Relu"), std::string::npos) << msg;
  EXPECT_EQ(msUnsupportedReason(*model.graph->nodes().front(), 17), "no lowering for ONNX Det");
}

// Refusals that only lowering can see (a training-mode Dropout whose constant ratio is out of
// range) do not stop at the first node: every one is reported in one K7102, and as data.
TEST(MsWriter, LowerTimeRefusalsListedAtOnce) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, bool t) => (float[2,3] y) <float r = {1.5}> {
  a = Dropout (x, r, t)
  b = Relu (a)
  y = Dropout (b, r, t)
}
)");
  auto result = buildMsBuffer(model, {});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::MsLowerBadAttribute);
  const std::string& msg = result.status().message();
  EXPECT_NE(msg.find("2 node(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n0' (Dropout): ratio 1.5 outside [0, 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("; node 'n2' (Dropout): "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("Relu"), std::string::npos) << msg;

  std::vector<lowering::Refusal> refusals;
  auto lowered = ms::lowerToMs(model, {}, &refusals);
  ASSERT_FALSE(lowered);
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_EQ(refusals[0].label, "node 'n0' (Dropout)");
  EXPECT_EQ(refusals[1].label, "node 'n2' (Dropout)");
  EXPECT_FALSE(refusals[0].isOp);
}

// Check-time refusals (an op with no .ms lowering, a used MaxPool Indices output) and lower-time
// ones come in one status; one about the op itself makes it K7101.
TEST(MsWriter, CheckAndLowerRefusalsTogether) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,4,4] x, bool t) => (float[1,1,2,2] y, int64[1,1,2,2] i, float[1,1,4,4] z, float[1,1] h) <float r = {1.5}> {
  y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  z = Dropout (x, r, t)
  h = Det (z)
}
)");
  std::vector<lowering::Refusal> refusals;
  auto lowered = ms::lowerToMs(model, {}, &refusals);
  ASSERT_FALSE(lowered);
  EXPECT_EQ(lowered.status().code(), ErrorCode::MsLowerUnsupported);
  const std::string& msg = lowered.status().message();
  EXPECT_NE(msg.find("node 'n0' (MaxPool): the Indices output of MaxPool"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("node 'n2' (Det): no lowering for ONNX Det"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'n1' (Dropout): ratio 1.5 outside [0, 1)"), std::string::npos) << msg;
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_FALSE(refusals[0].isOp); // MaxPool: the op's own check
  EXPECT_TRUE(refusals[1].isOp);  // Det: no rule
  EXPECT_FALSE(refusals[2].isOp); // Dropout: found while lowering
  // kiln check / converter_lite see the check-time refusals from the node alone.
  EXPECT_EQ(msUnsupportedReason(*model.graph->nodes().front(), 13),
            "the Indices output of MaxPool");
}

// An attribute of the wrong kind (LayerNormalization axis = 1.0, a FLOAT where the schema says INT)
// is a refusal naming the attribute, never an uncaught exception, in check and in conversion.
TEST(MsWriter, WrongAttributeKindIsRefusedNotThrown) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[3] s) => (float[2,3] y) {
  y = LayerNormalization <axis = 1> (x, s)
}
)");
  Node* node = model.graph->nodes().front().get();
  node->setAttribute("axis", Attribute::ofFloat(1.0f));
  const std::string reason = msUnsupportedReason(*node, 17);
  EXPECT_NE(reason.find("axis"), std::string::npos) << reason;
  auto result = buildMsBuffer(model, {});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::MsLowerUnsupported);
  EXPECT_NE(result.status().message().find("node 'n0' (LayerNormalization): "), std::string::npos)
      << result.status().message();
}

TEST(MsWriter, BadAttributeNamesNodeAndValue) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,20,20] x) => (float[1,1,4,4] y) {
  y = MaxPool <kernel_shape = [9, 9], strides = [1, 1], dilations = [2, 2]> (x)
}
)");
  auto result = buildMsBuffer(model, {});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::MsLowerBadAttribute);
  EXPECT_NE(result.status().message().find("'n0'"), std::string::npos);
  EXPECT_NE(result.status().message().find("dilations [2,2]"), std::string::npos)
      << result.status().message();
}

TEST(MsWriter, FileWriteExternalWeightsAndNoPartialOutput) {
  char tmpl[] = "/tmp/ms_writer_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  Model model = modelFromOnnxText(kConvRelu);

  // Inline: one file that dumpMsFile (the runtime's verifier) accepts.
  const std::string inlinePath = (dir / "a.ms").string();
  ASSERT_TRUE(writeMsFile(model, {}, inlinePath).isOk());
  EXPECT_TRUE(dumpMsFile(inlinePath));
  EXPECT_FALSE(std::filesystem::exists(inlinePath + "w"));

  // Past the (lowered) threshold the weights move to <path>w behind a 4096-byte header.
  MsWriteOptions options;
  options.externalDataThreshold = 64;
  const std::string splitPath = (dir / "b.ms").string();
  Status written = writeMsFile(model, options, splitPath);
  ASSERT_TRUE(written.isOk()) << written.toString();
  auto dumped = dumpMsFile(splitPath);
  ASSERT_TRUE(dumped) << dumped.status().toString();
  std::ifstream in(splitPath + "w", std::ios::binary);
  std::vector<uint8_t> msw((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(msw.size(), 4096u);
  uint32_t magic;
  std::memcpy(&magic, msw.data(), 4);
  EXPECT_EQ(magic, 0x12345678u);
  std::ifstream msIn(splitPath, std::ios::binary);
  std::vector<uint8_t> ms((std::istreambuf_iterator<char>(msIn)), {});
  const auto* g = root(ms);
  const auto* w = tensorNamed(g, "w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data(), nullptr);
  ASSERT_NE(w->externalData(), nullptr);
  ASSERT_EQ(w->externalData()->size(), 1u);
  const auto* ext = w->externalData()->Get(0);
  EXPECT_EQ(ext->location()->str(), "b.msw");
  ASSERT_LE(static_cast<size_t>(ext->offset() + ext->length()), msw.size());
  EXPECT_GE(ext->offset(), 4096);
  EXPECT_EQ(ext->length(), 24 * 4);
  float first, second;
  std::memcpy(&first, msw.data() + ext->offset(), 4);
  std::memcpy(&second, msw.data() + ext->offset() + 4, 4);
  EXPECT_EQ(first, 0.0f);
  EXPECT_EQ(second, 100.0f); // KHWC order in the side file too
  // buildMsBuffer cannot split: it says so.
  auto tooBig = buildMsBuffer(model, options);
  ASSERT_FALSE(tooBig);
  EXPECT_EQ(tooBig.status().code(), ErrorCode::MsModelTooLarge);

  // A failing conversion leaves nothing behind.
  Model bad = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2] x) => (float y) {
  y = Det (x)
}
)");
  const std::string badPath = (dir / "bad.ms").string();
  EXPECT_FALSE(writeMsFile(bad, {}, badPath).isOk());
  EXPECT_FALSE(std::filesystem::exists(badPath));
  EXPECT_FALSE(std::filesystem::exists(badPath + "w"));
  std::filesystem::remove_all(dir);
}

namespace {

// MatMul a[1,4] × w[4,16], w = DequantizeLinear(q, 0.5 per column, zero point 0): `codes` are q in
// row-major order (the .ms keeps a MatMul weight's layout).
Model matmulWithCodes(const std::vector<int>& codes) {
  std::string q;
  for (int c : codes)
    q += (q.empty() ? "" : ", ") + std::to_string(c);
  std::string scales, zeros;
  for (int i = 0; i < 16; ++i) {
    scales += std::string(i ? ", " : "") + "0.5";
    zeros += std::string(i ? ", " : "") + "0";
  }
  return modelFromOnnxText(("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                            "g (float[1,4] a) => (float[1,16] y) <int8[4,16] q = {" +
                            q + "}, float[16] s = {" + scales + "}, int8[16] z = {" + zeros +
                            "}> {\n  w = DequantizeLinear <axis = 1> (q, s, z)\n"
                            "  y = MatMul (a, w)\n}\n")
                               .c_str());
}

const fb::Tensor* matmulWeight(const fb::MetaGraph* g) {
  return g->allTensors()->Get(
      nodesOfType(g, fb::PrimitiveType_MatMulFusion).at(0)->inputIndex()->Get(1));
}

// The model read back from `bytes` and run on a fixed input.
std::vector<float> runMs(const std::vector<uint8_t>& bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "coded.ms", "");
  EXPECT_TRUE(model) << model.status().toString();
  if (!model) return {};
  rt::Executor exec(*model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["a"] = rt::RtValue::ofTensor(
      Tensor::fromValues<float>(DType::Float32, {1, 4}, {0.5f, -1.0f, 2.0f, 0.25f}));
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  return out ? out->outputs.at(0).tensor.copyValues<float>() : std::vector<float>{};
}

} // namespace

// Two distinct codes: INDEXING (ms.md §3.4) beats 64 plain bytes. MSB-first: count 2, the sorted
// values biased by 128 (-1 → 0x7F, 3 → 0x83), then one index bit per element.
TEST(MsWriter, FewDistinctCodesAreIndexed) {
  std::vector<int> codes(64);
  for (int k = 0; k < 64; ++k)
    codes[k] = k % 3 == 0 ? 3 : -1;
  Model model = matmulWithCodes(codes);
  auto bytes = build(model);
  const auto* w = matmulWeight(root(bytes));
  EXPECT_EQ(w->weightQuantCompressType(), fb::WeightQuantCompressType_INDEXING);
  EXPECT_EQ(w->dataType(), 32);
  std::vector<uint8_t> expected{0x02, 0x7F, 0x83, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < 64; ++k)
    if (codes[k] == 3) expected[3 + k / 8] |= static_cast<uint8_t>(0x80 >> (k % 8));
  EXPECT_EQ(dataOf<uint8_t>(w), expected);
  // Read back, the weights are the plain ones.
  MsWriteOptions plain;
  plain.encodeWeights = false;
  auto plainBytes = build(model, plain);
  EXPECT_EQ(matmulWeight(root(plainBytes))->weightQuantCompressType(),
            fb::WeightQuantCompressType_NONE);
  auto expectedOut = runMs(plainBytes);
  ASSERT_EQ(expectedOut.size(), 16u);
  EXPECT_EQ(runMs(bytes), expectedOut);
  // One distinct code: zero-width indices, the stream is the header alone.
  auto single = build(matmulWithCodes(std::vector<int>(64, 3)));
  EXPECT_EQ(dataOf<uint8_t>(matmulWeight(root(single))), (std::vector<uint8_t>{0x01, 0x83}));
}

// Mostly zero points: SPARSE. Entries (9 after 5 zero points, -7 after 34), 23 trailing zero
// points implied; the best gap width is 6 bits. Stream: width 6, entry count 2 (32 bits), value
// count 2, values -7 → 0x79 and 9 → 0x89, indices 1 0, gaps 000101 100010, zero padded.
TEST(MsWriter, MostlyZeroPointCodesAreSparse) {
  std::vector<int> codes(64, 0);
  codes[5] = 9;
  codes[40] = -7;
  Model model = matmulWithCodes(codes);
  auto bytes = build(model);
  const auto* w = matmulWeight(root(bytes));
  EXPECT_EQ(w->weightQuantCompressType(), fb::WeightQuantCompressType_SPARSE);
  EXPECT_EQ(dataOf<uint8_t>(w),
            (std::vector<uint8_t>{0x06, 0x00, 0x00, 0x00, 0x02, 0x02, 0x79, 0x89, 0x85, 0x88}));
  MsWriteOptions plain;
  plain.encodeWeights = false;
  auto expectedOut = runMs(build(model, plain));
  ASSERT_EQ(expectedOut.size(), 16u);
  EXPECT_EQ(runMs(bytes), expectedOut);
}

// Random codes at several widths and zero-point layouts survive every coding the writer picks.
TEST(MsWriter, CodedWeightsRoundTripAtEveryWidth) {
  std::mt19937 rng(11);
  for (int bits : {2, 4, 8}) {
    for (int zeroShare : {0, 50, 95}) {
      std::vector<int> codes(64);
      std::uniform_int_distribution<int> code(-(1 << (bits - 1)), (1 << (bits - 1)) - 1);
      std::uniform_int_distribution<int> percent(0, 99);
      for (int& c : codes)
        c = percent(rng) < zeroShare ? 0 : code(rng);
      Model model = matmulWithCodes(codes);
      MsWriteOptions coded, plain;
      coded.weightQuantBits = plain.weightQuantBits = bits;
      plain.encodeWeights = false;
      auto codedBytes = build(model, coded);
      auto plainBytes = build(model, plain);
      EXPECT_LE(dataOf<uint8_t>(matmulWeight(root(codedBytes))).size(),
                dataOf<uint8_t>(matmulWeight(root(plainBytes))).size());
      EXPECT_EQ(runMs(codedBytes), runMs(plainBytes)) << bits << " bits, " << zeroShare << "%";
    }
  }
}

// A damaged coded stream is refused with the reader's K7001 naming the tensor, never read past.
TEST(MsWriter, DamagedCodedWeightsAreInvalid) {
  std::vector<int> few(64, -1), sparse(64, 0);
  few[0] = 3;
  sparse[9] = 5;
  for (const auto& codes : {few, sparse}) {
    auto bytes = build(matmulWithCodes(codes));
    const auto* w = matmulWeight(root(bytes));
    ASSERT_NE(w->weightQuantCompressType(), fb::WeightQuantCompressType_NONE);
    size_t at = static_cast<size_t>(w->data()->data() - bytes.data());
    std::string name = w->name()->str();
    // INDEXING: value count 0 means 256 values, more than the stream holds. SPARSE: an entry
    // count with its top byte set exceeds the 64 elements.
    if (w->weightQuantCompressType() == fb::WeightQuantCompressType_INDEXING)
      bytes[at] = 0x00;
    else
      bytes[at + 1] = 0x7F;
    auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
    auto model = readMsBuffer(owned->data(), owned->size(), owned, "damaged.ms", "");
    ASSERT_FALSE(model);
    EXPECT_EQ(model.status().code(), ErrorCode::MsFileInvalid) << model.status().toString();
    EXPECT_NE(model.status().message().find(name), std::string::npos) << model.status().message();
  }
}

// A quant numBits outside 1..16 is a damaged file (K7001 naming the tensor and the value).
TEST(MsWriter, QuantBitsOutsideTheRangeAreInvalid) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2] a) => (float[1,3] y) <int8[2,3] q = {-8, 7, 1, -1, 0, 3}, float[3] s = {0.5, 0.25, 1}, int8[3] z = {0, 0, 0}> {
  w = DequantizeLinear <axis = 1> (q, s, z)
  y = MatMul (a, w)
}
)");
  MsWriteOptions options;
  options.weightQuantBits = 4; // numBits 4 differs from the schema default, so it is stored
  auto bytes = build(model, options);
  const auto* param = matmulWeight(root(bytes))->quantParams()->Get(0);
  ASSERT_EQ(param->numBits(), 4);
  // The field's address from the table's vtable (the generated code has no mutators).
  const uint8_t* table = reinterpret_cast<const uint8_t*>(param);
  const uint8_t* vtable = table - flatbuffers::ReadScalar<flatbuffers::soffset_t>(table);
  auto field = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable + fb::QuantParam::VT_NUMBITS);
  ASSERT_NE(field, 0);
  flatbuffers::WriteScalar<int32_t>(bytes.data() + (table - bytes.data()) + field, 20);
  ASSERT_EQ(param->numBits(), 20);
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto read = readMsBuffer(owned->data(), owned->size(), owned, "damaged.ms", "");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.status().code(), ErrorCode::MsFileInvalid);
  EXPECT_EQ(read.status().message(), "damaged.ms: tensor 'q': quant numBits 20 is outside 1..16");
}

namespace {

std::vector<uint8_t> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

} // namespace

// writeMsFile streams each constant into its place in the file (never holding the whole buffer);
// the bytes must be exactly buildMsBuffer's, plain and with float16 weights.
TEST(MsWriter, StreamedFileMatchesBuffer) {
  char tmpl[] = "/tmp/ms_writer_stream_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  Model model = modelFromOnnxText(kConvRelu);
  for (bool fp16 : {false, true}) {
    MsWriteOptions options;
    options.fp16Weights = fp16;
    auto buffer = buildMsBuffer(model, options);
    ASSERT_TRUE(buffer) << buffer.status().toString();
    const std::string path = (dir / (fp16 ? "h.ms" : "f.ms")).string();
    ASSERT_TRUE(writeMsFile(model, options, path).isOk());
    EXPECT_EQ(readAll(path), *buffer) << (fp16 ? "fp16" : "fp32");
  }
  std::filesystem::remove_all(dir);
}

// Float16 weights in the .msw: converted while the side file is written; the ExternalData
// "checksum" is the first stored (float16) byte.
TEST(MsWriter, ExternalFloat16Weights) {
  char tmpl[] = "/tmp/ms_writer_ext16_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  Model model = modelFromOnnxText(kConvRelu);
  MsWriteOptions options;
  options.fp16Weights = true;
  options.externalDataThreshold = 64;
  const std::string path = (dir / "c.ms").string();
  ASSERT_TRUE(writeMsFile(model, options, path).isOk());
  std::vector<uint8_t> msw = readAll(path + "w"), ms = readAll(path);
  const auto* w = tensorNamed(root(ms), "w");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(w->externalData(), nullptr);
  const auto* ext = w->externalData()->Get(0);
  EXPECT_EQ(ext->length(), 24 * 2);
  ASSERT_LE(static_cast<size_t>(ext->offset() + ext->length()), msw.size());
  uint16_t second;
  std::memcpy(&second, msw.data() + ext->offset() + 2, 2);
  EXPECT_EQ(second, rt::floatToHalf(100.0f)); // KHWC order, float16
  EXPECT_EQ(ext->checkSum()->str(), std::to_string(msw[static_cast<size_t>(ext->offset())]));
  std::filesystem::remove_all(dir);
}

// The block converter is the scalar one, value for value (every exponent, both signs, NaN
// payloads, rounding ties): a stride through all 2^32 bit patterns plus the edges.
TEST(MsWriter, FloatsToHalvesMatchesScalar) {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521)
    bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t edge :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0x477fefffu,
        0x477ff000u, 0x47800000u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu,
        0x3f801000u, 0x3f803000u, 0x00000001u})
    bits.push_back(edge);
  std::vector<uint16_t> halves(bits.size());
  rt::floatsToHalves(reinterpret_cast<const uint8_t*>(bits.data()), halves.data(), bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    float f;
    std::memcpy(&f, &bits[i], 4);
    ASSERT_EQ(halves[i], rt::floatToHalf(f)) << std::hex << bits[i];
  }
}

// Conv weights are stored KHWC: the writer permutes them while writing, a chunk of 256 Ki values at
// a time, instead of keeping a permuted copy. A weight of more than two chunks whose innermost
// runs straddle the chunk bounds must come out exactly as permuteTensor gives it, as float32
// and as float16.
TEST(MsWriter, PermutedWeightsStreamedAcrossChunks) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,129,9,11] x, float[37,129,7,9] w) => (float[1,37,3,3] y) {
  y = Conv (x, w)
}
)");
  const std::vector<int64_t> dims = {37, 129, 7, 9};
  std::vector<float> values(37 * 129 * 7 * 9);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i % 2039) - 1000.0f;
  Tensor w = Tensor::fromValues<float>(DType::Float32, dims, values);
  Graph& g = *model.graph;
  Value* init = g.addInitializer(g.uniqueName("w_init"), w);
  g.nodes().front()->setInput(1, init);
  Tensor expected = ms::permuteTensor(w, {0, 2, 3, 1});
  std::vector<float> want(values.size());
  std::memcpy(want.data(), expected.data(), want.size() * 4);
  for (bool half : {false, true}) {
    MsWriteOptions options;
    options.fp16Weights = half;
    auto bytes = build(model, options);
    const auto* stored = g.nodes().front()->input(1);
    const auto* t = tensorNamed(root(bytes), stored->name());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::vector<int32_t>(t->dims()->begin(), t->dims()->end()),
              (std::vector<int32_t>{37, 7, 9, 129}));
    if (!half) {
      EXPECT_EQ(dataOf<float>(t), want);
    } else {
      std::vector<uint16_t> halves(want.size());
      rt::floatsToHalves(reinterpret_cast<const uint8_t*>(want.data()), halves.data(), want.size());
      EXPECT_EQ(dataOf<uint16_t>(t), halves);
    }
  }
}

// INDEXING and SPARSE streams decode back to their codes, and the sizes the writer decides with
// (indexingSize / sparseSize, computed without writing) are the streams' exact sizes: dense,
// sparse, all-zero-point and long-run codes, 2..16 bits, per-channel zero points.
TEST(MsWriter, WeightCodingRoundTripsAndSizesAreExact) {
  std::mt19937 rng(7);
  for (int bits : {2, 4, 7, 8, 12, 16}) {
    for (double zeroShare : {0.0, 0.5, 0.97, 0.999}) {
      const size_t channels = 5, perChannel = 1000 + static_cast<size_t>(bits) * 37;
      std::vector<int32_t> zeroPoints;
      const int32_t lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
      std::uniform_int_distribution<int32_t> any(lo, hi);
      for (size_t c = 0; c < channels; ++c)
        zeroPoints.push_back(any(rng));
      std::vector<int32_t> codes;
      std::uniform_real_distribution<double> u(0, 1);
      for (size_t c = 0; c < channels; ++c)
        for (size_t k = 0; k < perChannel; ++k)
          codes.push_back(u(rng) < zeroShare ? zeroPoints[c] : any(rng));
      codes.push_back(zeroPoints.back()); // a remainder the last channel takes
      const std::string where = fmt::format("{} bits, {} zero points", bits, zeroShare);
      auto indexing = ms::encodeIndexing(codes, bits);
      EXPECT_EQ(indexing.size(), ms::indexingSize(codes, bits)) << where;
      auto back = ms::decodeIndexing(indexing.data(), indexing.size(), bits, codes.size(), where);
      ASSERT_TRUE(back) << back.status().toString();
      EXPECT_EQ(*back, codes) << where;
      auto sparse = ms::encodeSparse(codes, bits, zeroPoints);
      EXPECT_EQ(sparse.size(), ms::sparseSize(codes, bits, zeroPoints)) << where;
      back = ms::decodeSparse(sparse.data(), sparse.size(), bits, codes.size(), zeroPoints, where);
      ASSERT_TRUE(back) << back.status().toString();
      EXPECT_EQ(*back, codes) << where;
    }
  }
}

// Weight quant splits channels over the worker pool: the .ms bytes (codes, scales, zero points,
// bias corrections) are the same for 1 and 3 threads, for a Conv weight (channels outermost) and a
// MatMul weight (channels innermost), symmetric and asymmetric. Without bias correction every code
// is clamp(nearbyint(w / scale) + zero point), the scalar rule the vectorised loop replaces.
TEST(MsWriter, WeightQuantBytesDoNotDependOnThreadCount) {
  auto makeModel = [] {
    Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,64,9,9] x, float[128,64,9,9] w, float[1,512] a, float[512,1536] m) => (float[1,128,1,1] y, float[1,1536] z) {
  y = Conv (x, w)
  z = MatMul (a, m)
}
)");
    Graph& g = *model.graph;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    for (size_t input = 0; input < 2; ++input) {
      Node* node = std::next(g.nodes().begin(), static_cast<long>(input))->get();
      const std::vector<int64_t> dims =
          input == 0 ? std::vector<int64_t>{128, 64, 9, 9} : std::vector<int64_t>{512, 1536};
      std::vector<float> values(
          static_cast<size_t>(dims[0] * dims[1] * (dims.size() == 4 ? dims[2] * dims[3] : 1)));
      for (float& v : values)
        v = dist(rng) + (input == 1 ? 0.01f : 0.0f);
      values[17] = 0.5f; // channel maxima that round exactly at .5 steps
      node->setInput(1, g.addInitializer(g.uniqueName("w_init"),
                                         Tensor::fromValues<float>(DType::Float32, dims, values)));
    }
    return model;
  };
  for (bool symmetric : {true, false}) {
    for (bool bias : {true, false}) {
      std::vector<uint8_t> first;
      for (int threads : {1, 3}) {
        Model model = makeModel();
        WeightQuantOptions quant;
        quant.symmetric = symmetric;
        quant.biasCorrection = bias;
        quant.threads = threads;
        PipelineOptions pipeline;
        pipeline.weightQuant = &quant;
        ASSERT_TRUE(runPipeline(model, {"quantize-weights"}, pipeline));
        auto bytes = build(model);
        if (first.empty()) first = bytes;
        EXPECT_EQ(bytes, first) << "threads " << threads << " symmetric " << symmetric
                                << " bias correction " << bias;
        if (bias) continue;
        // The codes against the scalar rule, per channel.
        Model source = makeModel();
        for (const auto& node : model.graph->nodes()) {
          if (node->opType() != "DequantizeLinear") continue;
          const Tensor& q = node->input(0)->initializer();
          const auto scales = node->input(1)->initializer().copyValues<float>();
          const auto zeros = node->input(2)->initializer().copyValues<int8_t>();
          const int64_t axis = node->attribute("axis")->asInt();
          const bool conv = q.dims().size() == 4;
          const Tensor& w = (conv ? source.graph->nodes().front() : source.graph->nodes().back())
                                ->input(1)
                                ->initializer();
          const auto wv = w.copyValues<float>();
          const auto codes = q.copyValues<int8_t>();
          const int64_t qmin = symmetric ? -127 : -128;
          for (size_t i = 0; i < wv.size(); ++i) {
            const size_t c = axis == 0 ? i / (wv.size() / scales.size()) : i % scales.size();
            const int64_t want = std::clamp<int64_t>(
                static_cast<int64_t>(std::nearbyint(wv[i] / scales[c])) + zeros[c], qmin, 127);
            ASSERT_EQ(codes[i], want)
                << "element " << i << (conv ? " of the Conv" : " of the MatMul");
          }
        }
      }
    }
  }
}
