// AIPP: config parse errors with lines, each model-free and model check, the §6.4 defaults, and
// the inserted preprocessing run by the executor against values computed here by hand.
#include <cstdio>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/backends/aipp.h"
#include "kiln/frontend/onnx.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

// aipp tests keep the nodes unnamed.
Model modelFromText(const std::string& text) {
  return kiln::testing::modelFromOnnxText(text, /*nameNodes=*/false);
}

// y = Identity(x), x: f32[1,3,4,4] NCHW.
Model identityModel(const char* dtype = "float", const char* dims = "1,3,4,4") {
  std::string text = fmt::format(R"(
<ir_version: 8, opset_import: ["" : 13]>
g ({0}[{1}] x) => ({0}[{1}] y) {{
  y = Identity (x)
}}
)",
                                 dtype, dims);
  return modelFromText(text.c_str());
}

AippConfig parseOk(const std::string& text) {
  auto config = parseAippConfigText(text, "aipp.cfg");
  EXPECT_TRUE(config) << config.status().toString();
  return config ? config.take() : AippConfig{};
}

Status parseError(const std::string& text) {
  auto config = parseAippConfigText(text, "aipp.cfg");
  EXPECT_FALSE(config) << "expected an error for:\n" << text;
  return config ? Status::ok() : config.status();
}

Status insertError(Model& model, const std::string& text, const AippContext& context = {}) {
  AippConfig config = parseOk(text);
  Status status = insertAipp(model, config, context);
  EXPECT_FALSE(status.isOk()) << "expected insertAipp to fail for:\n" << text;
  return status;
}

std::vector<uint8_t> randomBytes(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  std::vector<uint8_t> out(count);
  for (auto& b : out)
    b = static_cast<uint8_t>(dist(rng));
  return out;
}

// Floor of s / 256 written without shifts or ONNX-like ops: the hand reference.
int32_t floorDiv256(int32_t s) { return s >= 0 ? s / 256 : -((-s + 255) / 256); }
int32_t clampU8(int32_t v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

std::vector<float> runOne(Model& model, const std::vector<int64_t>& dims,
                          const std::vector<uint8_t>& image) {
  rt::Executor executor(model);
  auto result =
      executor.run({{"x", rt::RtValue::ofTensor(Tensor::fromValues(DType::UInt8, dims, image))}});
  EXPECT_TRUE(result) << result.status().toString();
  if (!result) return {};
  return result->outputs[0].tensor.copyValues<float>();
}

} // namespace

// ---- parsing ---------------------------------------------------------------------------------

TEST(AippParse, SyntaxErrorNamesLineAndColumn) {
  Status s = parseError("aipp_op {\n  aipp_mode: static\n  input_format: NOT_A_FORMAT\n}\n");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigSyntax);
  EXPECT_EQ(s.peerCode(), "E13018");
  EXPECT_NE(s.message().find("aipp.cfg:3:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("TextFormat::Parse"), std::string::npos) << s.message();
}

TEST(AippParse, ReservedRotationAngleIsASyntaxError) {
  Status s = parseError("aipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n"
                        "  rotation_angle: 90\n}\n");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigSyntax);
  EXPECT_NE(s.message().find("aipp.cfg:4:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rotation_angle"), std::string::npos) << s.message();
}

TEST(AippParse, MissingFile) {
  auto config = parseAippConfigFile("/nonexistent/dir/aipp.cfg");
  ASSERT_FALSE(config);
  EXPECT_EQ(config.status().code(), ErrorCode::FileNotFound);
}

TEST(AippParse, ReadsFile) {
  std::string path = ::testing::TempDir() + "/kiln_aipp_test.cfg";
  {
    std::ofstream out(path);
    out << "# comment\naipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n}\n";
  }
  auto config = parseAippConfigFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(config) << config.status().toString();
  ASSERT_EQ(config->ops.size(), 1u);
  EXPECT_EQ(config->ops[0].line, 2);
  EXPECT_EQ(config->ops[0].inputFormat, static_cast<int>(AippInputFormat::Rgb888U8));
}

TEST(AippValidate, ModeMustBeStaticOrDynamic) {
  Status s = parseError("\naipp_op {\n  input_format: RGB888_U8\n}\n");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
  EXPECT_EQ(s.peerCode(), "E10052");
  EXPECT_NE(s.message().find("aipp.cfg:2: aipp_op 0: AIPP configuration is invalid. Reason: When "
                             "insert AIPP op, aipp_mode must be configured as static or dynamic"),
            std::string::npos)
      << s.message();
}

TEST(AippValidate, RepeatedParameter) {
  for (const char* field : {"var_reci_chn_1", "matrix_r2c0", "output_bias_2", "input_bias_0"}) {
    Status s = parseError(fmt::format("aipp_op {{\n  aipp_mode: static\n  input_format: "
                                      "RGB888_U8\n  {0}: 1\n  {0}: 2\n}}\n",
                                      field));
    EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
    EXPECT_NE(s.message().find(fmt::format("aipp.cfg:5: aipp_op 0: AIPP configuration is invalid. "
                                           "Reason: The parameter {} cannot be configured "
                                           "repeatedly",
                                           field)),
              std::string::npos)
        << s.message();
  }
}

TEST(AippValidate, DynamicNeedsMaxSrcImageSize) {
  Status s = parseError("aipp_op {\n  aipp_mode: dynamic\n}\n");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
  EXPECT_NE(s.message().find("Reason: For dynamic AIPP params, max_src_image_size must be set "
                             "which number should be greater than 0"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(parseAippConfigText("aipp_op { aipp_mode: dynamic max_src_image_size: 100 }", "c"));
}

TEST(AippValidate, StaticNeedsInputFormat) {
  Status s = parseError("aipp_op {\n  aipp_mode: static\n}\n");
  EXPECT_NE(s.message().find("Reason: Input format of AIPP conf must be set in static aipp"),
            std::string::npos)
      << s.message();
}

TEST(AippValidate, NegativeSizes) {
  const std::pair<const char*, const char*> fields[] = {
      {"src_image_size_w", "Src_image_size_w"},
      {"src_image_size_h", "Src_image_size_h"},
      {"load_start_pos_w", "Load_start_pos_w"},
      {"load_start_pos_h", "Load_start_pos_h"},
      {"crop_size_w", "Crop_size_w"},
      {"resize_output_w", "Resize_output_w"},
      {"resize_output_h", "Resize_output_h"},
      {"left_padding_size", "Left_padding_size"},
      {"right_padding_size", "Right_padding_size"},
      {"top_padding_size", "Top_padding_size"},
      {"bottom_padding_size", "Bottom_padding_size"}};
  for (const auto& [field, label] : fields) {
    Status s = parseError(fmt::format(
        "aipp_op {{\n  aipp_mode: static\n  input_format: RGB888_U8\n  {}: -2\n}}\n", field));
    EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
    EXPECT_NE(s.message().find(fmt::format("aipp.cfg:4: aipp_op 0: AIPP configuration is "
                                           "invalid. Reason: {} must not be configured smaller "
                                           "than 0",
                                           label)),
              std::string::npos)
        << s.message();
  }
}

TEST(AippValidate, RankAndNameTogether) {
  Status s = parseError("aipp_op { aipp_mode: static input_format: RGB888_U8 related_input_rank: "
                        "0 related_input_name: \"x\" }");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
  EXPECT_NE(s.message().find("related_input_rank and related_input_name"), std::string::npos);
}

TEST(AippValidate, DocumentedRanges) {
  const char* cases[][2] = {
      {"input_format: YUYV_U8", "input_format YUYV_U8 is not supported"},
      {"src_image_size_w: 5000", "src_image_size_w 5000 is out of range"},
      {"crop: true src_image_size_w: 8 src_image_size_h: 8 load_start_pos_w: 4 crop_size_w: 6",
       "exceeds src_image_size_w"},
      {"padding: true left_padding_size: 33", "left_padding_size 33 is out of range [0,32]"},
      {"csc_switch: true matrix_r0c0: 40000", "matrix_r0c0 40000 is outside the int16 range"},
      {"input_bias_1: 300", "input_bias_1 300 is outside the uint8 range"},
      {"mean_chn_2: 256", "mean_chn_2 256 is outside the uint8 range"},
  };
  for (const auto& c : cases) {
    std::string text =
        std::string("aipp_op { aipp_mode: static ") +
        (std::string(c[0]).rfind("input_format", 0) == 0 ? "" : "input_format: RGB888_U8 ") + c[0] +
        " }";
    Status s = parseError(text);
    EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
    EXPECT_NE(s.message().find(c[1]), std::string::npos) << s.message();
  }
  Status odd = parseError("aipp_op { aipp_mode: static input_format: YUV420SP_U8 "
                          "src_image_size_w: 7 src_image_size_h: 4 }");
  EXPECT_NE(odd.message().find("must be even for YUV420SP_U8"), std::string::npos) << odd.message();
}

TEST(AippDefaults, CscMatricesAndBiases) {
  AippConfig yuv = parseOk("aipp_op { aipp_mode: static input_format: YUV420SP_U8 csc_switch: "
                           "true matrix_r1c1: -101 }");
  ASSERT_EQ(yuv.ops.size(), 1u);
  const AippOp& y = yuv.ops[0];
  EXPECT_EQ(y.matrix[0], (std::array<int32_t, 3>{298, 516, 0}));
  EXPECT_EQ(y.matrix[1], (std::array<int32_t, 3>{298, -101, -208})); // the given one is kept
  EXPECT_EQ(y.matrix[2], (std::array<int32_t, 3>{298, 0, 409}));
  EXPECT_EQ(y.inputBias, (std::array<int32_t, 3>{16, 128, 128}));
  EXPECT_EQ(y.outputBias, (std::array<int32_t, 3>{16, 128, 128}));

  AippConfig rgb = parseOk("aipp_op { aipp_mode: static input_format: RGB888_U8 csc_switch: "
                           "true output_bias_0: 0 }");
  const AippOp& r = rgb.ops[0];
  EXPECT_EQ(r.matrix[0], (std::array<int32_t, 3>{66, 129, 25}));
  EXPECT_EQ(r.matrix[1], (std::array<int32_t, 3>{-38, -74, 112}));
  EXPECT_EQ(r.matrix[2], (std::array<int32_t, 3>{112, -94, -18}));
  EXPECT_EQ(r.outputBias, (std::array<int32_t, 3>{0, 128, 128}));

  // Without CSC no matrix is filled in.
  AippConfig off = parseOk("aipp_op { aipp_mode: static input_format: RGB888_U8 }");
  EXPECT_EQ(off.ops[0].matrix[0], (std::array<int32_t, 3>{0, 0, 0}));
}

TEST(AippDefaults, VarReciCropPaddingResize) {
  AippConfig c = parseOk("aipp_op { aipp_mode: static input_format: RGB888_U8 var_reci_chn_1: "
                         "0.5 load_start_pos_w: 2 crop_size_w: 3 left_padding_size: 4 "
                         "resize_output_w: 20 }");
  const AippOp& op = c.ops[0];
  EXPECT_EQ(op.varReciChn, (std::array<float, 4>{1.0f, 0.5f, 1.0f, 1.0f}));
  EXPECT_EQ(op.loadStartPosW, 0); // crop is false
  EXPECT_EQ(op.cropSizeW, 0);
  EXPECT_EQ(op.leftPaddingSize, 0); // padding is false
  EXPECT_EQ(op.resizeOutputW, 0);   // resize is false
  EXPECT_FALSE(op.relatedInputRankSet);
}

// ---- checks against the model ---------------------------------------------------------------

TEST(AippInsert, RankAndNameMustExist) {
  Model m1 = identityModel();
  Status s = insertError(
      m1, "aipp_op { aipp_mode: static input_format: RGB888_U8 related_input_rank: 1 }");
  EXPECT_EQ(s.code(), ErrorCode::AippConfigInvalid);
  EXPECT_EQ(s.peerCode(), "E10052");
  EXPECT_NE(s.message().find("related_input_rank 1 is out of range"), std::string::npos);
  Model m2 = identityModel();
  s = insertError(m2, "aipp_op { aipp_mode: static input_format: RGB888_U8 related_input_name: "
                      "\"img\" }");
  EXPECT_NE(s.message().find("related_input_name img is not an input"), std::string::npos);
}

TEST(AippInsert, Fp16InputClash) {
  Model m = identityModel();
  AippContext ctx;
  ctx.inputFp16Nodes = {"x"};
  Status s = insertError(m, "aipp_op { aipp_mode: static input_format: RGB888_U8 }", ctx);
  EXPECT_EQ(s.peerCode(), "E10034");
  EXPECT_NE(s.message().find("Nodes (for example, x) connected to AIPP must not be of type FP16."),
            std::string::npos)
      << s.message();
}

TEST(AippInsert, DynamicImageSizeRules) {
  AippContext ctx;
  ctx.dynamicImageSize = true;
  Model m1 = identityModel();
  Status s = insertError(m1,
                         "aipp_op { aipp_mode: static input_format: RGB888_U8 crop: true "
                         "src_image_size_w: 4 src_image_size_h: 4 }",
                         ctx);
  EXPECT_NE(s.message().find("When --dynamic_image_size is set, crop and padding cannot be set to "
                             "'true'"),
            std::string::npos)
      << s.message();
  Model m2 = identityModel();
  s = insertError(m2, "aipp_op { aipp_mode: static input_format: RGB888_U8 src_image_size_w: 4 }",
                  ctx);
  EXPECT_NE(s.message().find("When --dynamic_image_size is set, src_image_size_w and "
                             "src_image_size_h must be set to '0'"),
            std::string::npos)
      << s.message();
}

TEST(AippInsert, DynamicAippShapeAndFormat) {
  Model m = identityModel("float", "4,4");
  Status s = insertError(m, "aipp_op { aipp_mode: dynamic max_src_image_size: 100 }");
  EXPECT_EQ(s.peerCode(), "E10001");
  EXPECT_NE(s.message().find("Value 2 for parameter x shape size is invalid. Reason: Its shape "
                             "size must be in the range[3,4] when dynamic AIPP is linked."),
            std::string::npos)
      << s.message();
  Model m2 = identityModel();
  AippContext nd;
  nd.inputFormat = "ND";
  s = insertError(m2, "aipp_op { aipp_mode: dynamic max_src_image_size: 100 }", nd);
  EXPECT_EQ(s.peerCode(), "E10001");
  EXPECT_NE(s.message().find("Only format NCHW and NHWC are supported when dynamic AIPP is linked"),
            std::string::npos);
  // A valid dynamic configuration is refused clearly: kiln does not build the parameter input.
  Model m3 = identityModel();
  s = insertError(m3, "aipp_op { aipp_mode: dynamic max_src_image_size: 100 }");
  EXPECT_NE(s.message().find("dynamic AIPP"), std::string::npos);
  EXPECT_NE(s.message().find("not built by kiln"), std::string::npos);
}

TEST(AippInsert, DynamicDimsConflict) {
  Model m = identityModel();
  AippContext ctx;
  ctx.dynamicDims = true;
  Status s = insertError(m, "aipp_op { aipp_mode: static input_format: RGB888_U8 }", ctx);
  EXPECT_EQ(s.peerCode(), "E10001");
  EXPECT_NE(s.message().find("The dynamic dims function does not support AIPP"), std::string::npos);
}

TEST(AippInsert, SeveralOpsOnOneInputMustAgree) {
  Model m = modelFromText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,4,4] x) => (float[1,3,4,4] y, float[1,3,4,4] z) {
  y = Identity (x)
  z = Relu (x)
}
)");
  Status s =
      insertError(m, "aipp_op { aipp_mode: static input_format: RGB888_U8 input_edge_idx: 0 }"
                     "aipp_op { aipp_mode: static input_format: XRGB8888_U8 input_edge_idx: "
                     "1 }");
  EXPECT_NE(s.message().find("The input_format of all aipp_ops after one Data should be the same"),
            std::string::npos)
      << s.message();
  Model m2 = modelFromText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,4,4] x) => (float[1,3,4,4] y, float[1,3,4,4] z) {
  y = Identity (x)
  z = Relu (x)
}
)");
  s = insertError(m2, "aipp_op { aipp_mode: static input_format: RGB888_U8 input_edge_idx: 0 }");
  EXPECT_NE(s.message().find("either all or none"), std::string::npos) << s.message();
}

TEST(AippInsert, OutputSizeMustMatchModel) {
  Model m = identityModel();
  Status s = insertError(m, "aipp_op { aipp_mode: static input_format: RGB888_U8 crop: true "
                            "src_image_size_w: 8 src_image_size_h: 8 crop_size_w: 3 crop_size_h: "
                            "4 }");
  EXPECT_NE(s.message().find("the AIPP output is 3x4"), std::string::npos) << s.message();
  Model m2 = identityModel();
  s = insertError(m2, "aipp_op { aipp_mode: static input_format: YUV400_U8 }");
  EXPECT_NE(s.message().find("gives 1 channel(s) but input x has 3"), std::string::npos)
      << s.message();
}

// ---- executor: the inserted sub-graph computes AIPP ------------------------------------------

TEST(AippRun, RgbCropCscNormalizePad) {
  // Source 6 wide × 5 high; crop 3×3 at (w=2, h=1); pad left 1, bottom 1 → the model's 4×4.
  Model model = identityModel();
  AippConfig config = parseOk(R"(
aipp_op {
  aipp_mode: static
  input_format: RGB888_U8
  rbuv_swap_switch: true
  src_image_size_w: 6
  src_image_size_h: 5
  crop: true
  load_start_pos_w: 2
  load_start_pos_h: 1
  crop_size_w: 3
  crop_size_h: 3
  csc_switch: true
  matrix_r0c0: 66  matrix_r0c1: 129  matrix_r0c2: 25
  matrix_r1c0: -38 matrix_r1c1: -74  matrix_r1c2: 112
  matrix_r2c0: 112 matrix_r2c1: -94  matrix_r2c2: -18
  output_bias_0: 16 output_bias_1: 128 output_bias_2: 128
  mean_chn_0: 100 mean_chn_1: 120 mean_chn_2: 110
  min_chn_0: 0.5 min_chn_1: 1.25 min_chn_2: 2.0
  var_reci_chn_0: 0.0078125 var_reci_chn_1: 0.5 var_reci_chn_2: 2.0
  padding: true
  left_padding_size: 1
  bottom_padding_size: 1
  padding_value: -7.5
}
)");
  ASSERT_TRUE(insertAipp(model, config).isOk());
  EXPECT_TRUE(verifyModel(model).isOk());
  const Value* x = model.graph->inputs()[0];
  EXPECT_EQ(x->name(), "x");
  EXPECT_EQ(x->dtype(), DType::UInt8);
  EXPECT_EQ(x->shape().staticDims(), (std::vector<int64_t>{1, 5, 6, 3}));

  const int srcW = 6, srcH = 5;
  std::vector<uint8_t> image = randomBytes(srcW * srcH * 3, 7);
  std::vector<float> got = runOne(model, {1, srcH, srcW, 3}, image);
  ASSERT_EQ(got.size(), 48u);

  const int m[3][3] = {{66, 129, 25}, {-38, -74, 112}, {112, -94, -18}};
  const int bias[3] = {16, 128, 128};
  const float mean[3] = {100, 120, 110}, minv[3] = {0.5f, 1.25f, 2.0f},
              var[3] = {0.0078125f, 0.5f, 2.0f};
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) {
        float want;
        if (w < 1 || h >= 3) {
          want = -7.5f; // padding comes after normalization
        } else {
          int sy = 1 + h, sx = 2 + (w - 1);
          const uint8_t* px = &image[(sy * srcW + sx) * 3];
          int rgb[3] = {px[2], px[1], px[0]}; // rbuv_swap: the bytes are B,G,R
          int s = m[c][0] * rgb[0] + m[c][1] * rgb[1] + m[c][2] * rgb[2];
          int q = clampU8(floorDiv256(s) + bias[c]);
          want = (static_cast<float>(q) - mean[c] - minv[c]) * var[c];
        }
        EXPECT_FLOAT_EQ(got[(c * 4 + h) * 4 + w], want) << "c=" << c << " h=" << h << " w=" << w;
      }
}

TEST(AippRun, Nv12AndNv21DefaultCsc) {
  for (bool nv21 : {false, true}) {
    Model model = identityModel("float", "1,3,4,6");
    AippConfig config =
        parseOk(fmt::format("aipp_op {{ aipp_mode: static input_format: YUV420SP_U8 "
                            "src_image_size_w: 6 src_image_size_h: 4 csc_switch: true "
                            "rbuv_swap_switch: {} }}",
                            nv21 ? "true" : "false"));
    ASSERT_TRUE(insertAipp(model, config).isOk());
    EXPECT_EQ(model.graph->inputs()[0]->shape().staticDims(), (std::vector<int64_t>{1, 6, 6, 1}));
    const int W = 6, H = 4;
    std::vector<uint8_t> image = randomBytes(W * H * 3 / 2, nv21 ? 11 : 12);
    std::vector<float> got = runOne(model, {1, H * 3 / 2, W, 1}, image);
    ASSERT_EQ(got.size(), 72u);
    const int m[3][3] = {{298, 516, 0}, {298, -100, -208}, {298, 0, 409}};
    const int ib[3] = {16, 128, 128};
    for (int h = 0; h < H; ++h)
      for (int w = 0; w < W; ++w) {
        int yv = image[h * W + w];
        const uint8_t* chroma = &image[H * W + (h / 2) * W + (w / 2) * 2];
        int u = nv21 ? chroma[1] : chroma[0];
        int v = nv21 ? chroma[0] : chroma[1];
        int yuv[3] = {yv - ib[0], u - ib[1], v - ib[2]};
        for (int c = 0; c < 3; ++c) {
          int s = m[c][0] * yuv[0] + m[c][1] * yuv[1] + m[c][2] * yuv[2];
          float want = static_cast<float>(clampU8(floorDiv256(s)));
          EXPECT_FLOAT_EQ(got[(c * H + h) * W + w], want) << "c=" << c << " h=" << h << " w=" << w;
        }
      }
  }
}

TEST(AippRun, XrgbAxSwapToNhwcUint8) {
  // RGBA bytes (ax_swap), model input u8 NHWC: AIPP passes R,G,B through unchanged.
  Model model = identityModel("uint8", "1,2,3,3");
  AippConfig config = parseOk("aipp_op { aipp_mode: static input_format: XRGB8888_U8 "
                              "ax_swap_switch: true mean_chn_0: 9 }");
  AippContext ctx;
  ctx.inputFormat = "NHWC";
  ASSERT_TRUE(insertAipp(model, config, ctx).isOk());
  EXPECT_EQ(model.graph->inputs()[0]->shape().staticDims(), (std::vector<int64_t>{1, 2, 3, 4}));
  std::vector<uint8_t> image = randomBytes(2 * 3 * 4, 5);
  rt::Executor executor(model);
  auto result = executor.run(
      {{"x", rt::RtValue::ofTensor(Tensor::fromValues(DType::UInt8, {1, 2, 3, 4}, image))}});
  ASSERT_TRUE(result) << result.status().toString();
  std::vector<uint8_t> got = result->outputs[0].tensor.copyValues<uint8_t>();
  ASSERT_EQ(got.size(), 18u);
  for (int p = 0; p < 6; ++p)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(got[p * 3 + c], image[p * 4 + c]) << p << "," << c;
}

TEST(AippRun, Yuv400FeedsAConvAndKeepsConsumers) {
  // Gray image into a 1×1 Conv (weight 2, bias 1): out = 2·(y − mean)·var + 1.
  Model model = modelFromText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3,3] x) => (float[1,1,3,3] y) <float[1,1,1,1] w = {2}, float[1] b = {1}> {
  y = Conv (x, w, b)
}
)");
  AippConfig config = parseOk("aipp_op { aipp_mode: static input_format: YUV400_U8 mean_chn_0: "
                              "128 var_reci_chn_0: 0.25 }");
  ASSERT_TRUE(insertAipp(model, config).isOk());
  std::vector<uint8_t> image = randomBytes(9, 3);
  std::vector<float> got = runOne(model, {1, 3, 3, 1}, image);
  ASSERT_EQ(got.size(), 9u);
  for (int i = 0; i < 9; ++i)
    EXPECT_FLOAT_EQ(got[i], 2.0f * ((static_cast<float>(image[i]) - 128.0f) * 0.25f) + 1.0f);
}

TEST(AippRun, Opset9ModelIsUpConvertedFirst) {
  // Opset 9 keeps Clip's bounds in attributes; the AIPP ops are opset 11's. The model comes out
  // at opset 11 with Clip's bounds as inputs, and the whole chain runs.
  Model model = modelFromText(R"(
<ir_version: 4, opset_import: ["" : 9]>
g (float[1,1,2,2] x) => (float[1,1,2,2] y) {
  y = Clip <min = -1.0, max = 1.0> (x)
}
)");
  AippConfig config = parseOk("aipp_op { aipp_mode: static input_format: YUV400_U8 mean_chn_0: "
                              "100 var_reci_chn_0: 0.02 }");
  Status inserted = insertAipp(model, config);
  ASSERT_TRUE(inserted.isOk()) << inserted.toString();
  EXPECT_EQ(model.opsetVersion(""), 11);
  const Node* clip = nullptr;
  for (const auto& node : model.graph->nodes())
    if (node->opType() == "Clip" && node->output(0)->name() == "y") clip = node.get();
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->inputs().size(), 3u);
  std::vector<uint8_t> image = {0, 90, 140, 255};
  std::vector<float> got = runOne(model, {1, 2, 2, 1}, image);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(got[i],
                    std::clamp((static_cast<float>(image[i]) - 100.0f) * 0.02f, -1.0f, 1.0f));
}
