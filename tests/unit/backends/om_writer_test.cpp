// The .om writer: header bytes and offsets, the wide partition table and its order, determinism,
// all unsupported ops at once, no file on failure, external weights, and the read-back round trip.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/backends/om.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "onnx_text.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using kiln::testing::modelFromOnnxText;

// A small CNN: Conv → Relu → MaxPool → Reshape → Gemm → Softmax, weights from a fixed seed.
Model smallCnn() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto values = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s += (i ? ", " : "") + std::to_string(dist(rng));
    return s;
  };
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
cnn (float[1,3,8,8] x) => (float[1,5] y)
<float[4,3,3,3] w = {)" +
                     values(108) + R"(}, float[4] b = {)" + values(4) + R"(}, float[5,64] fw = {)" +
                     values(320) + R"(}, float[5] fb = {)" + values(5) +
                     R"(}, int64[2] shape = {1, 64}>
{
  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  r = Relu (c)
  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
  f = Reshape (p, shape)
  g = Gemm <transB = 1> (f, fw, fb)
  y = Softmax (g)
}
)";
  Model m = modelFromOnnxText(text.c_str());
  auto passes = pipelineByName("default");
  EXPECT_TRUE(passes);
  EXPECT_TRUE(runPipeline(m, *passes));
  return m;
}

uint32_t u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

std::vector<float> runModel(const Model& model, const std::vector<float>& x) {
  rt::Executor exec(model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {1, 3, 8, 8}, x));
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  if (!out) return {};
  return out->outputs.at(0).tensor.copyValues<float>();
}

fs::path tempDir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("kiln_om_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

} // namespace

TEST(OmWriter, HeaderFieldsAndOffsets) {
  OmWriteOptions options;
  options.modelName = "small_cnn";
  auto bytes = buildOmBuffer(smallCnn(), options);
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto& b = *bytes;
  ASSERT_GT(b.size(), 256u);
  EXPECT_EQ(std::memcmp(b.data(), "IMOD", 4), 0);
  EXPECT_EQ(u32(b, 4), 256u);
  EXPECT_EQ(u32(b, 8), 0x20000000u);
  for (size_t i = 12; i < 76; ++i)
    EXPECT_EQ(b[i], 0) << "checksum byte " << i;
  EXPECT_EQ(u32(b, 76), 0u); // legacy length: the wide form uses model_length
  EXPECT_EQ(b[82], 0);       // IR_MODEL
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data() + 84)), "small_cnn");
  EXPECT_EQ(u32(b, 152), 2u); // om_ir_version
  EXPECT_EQ(u32(b, 156), 1u); // model_num
  EXPECT_EQ(u64(b, 184), b.size() - 256);
  EXPECT_EQ(b[193], 0); // static model
  for (size_t i = 194; i < 256; ++i)
    EXPECT_EQ(b[i], 0) << "reserved byte " << i;
}

TEST(OmWriter, WideTableInAtcOrder) {
  auto bytes = buildOmBuffer(smallCnn(), OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto& b = *bytes;
  uint32_t num = u32(b, 256);
  ASSERT_EQ(num, 4u);
  EXPECT_EQ(u32(b, 260), 0u);
  const uint32_t expected[] = {8, 0, 1, 2}; // MODEL_INOUT_INFO, MODEL_DEF, WEIGHTS_DATA, TASK_INFO
  uint64_t offset = 0;
  for (uint32_t i = 0; i < num; ++i) {
    size_t e = 264 + 24 * i;
    EXPECT_EQ(u32(b, e), expected[i]) << "partition " << i;
    EXPECT_EQ(u64(b, e + 8), offset) << "partition " << i;
    offset += u64(b, e + 16);
  }
  EXPECT_EQ(256 + 8 + 24 * num + offset, b.size());
  // MODEL_INOUT_INFO starts with the input TLV: type 0, then one tensor named "x".
  size_t inout = 264 + 24 * num;
  EXPECT_EQ(u32(b, inout), 0u);
  EXPECT_EQ(u32(b, inout + 8), 1u);
  EXPECT_EQ(u32(b, inout + 12 + 8), 0u);  // NCHW
  EXPECT_EQ(u32(b, inout + 12 + 12), 0u); // ge::DataType DT_FLOAT
  EXPECT_EQ(u64(b, inout + 12), 1u * 3 * 8 * 8 * 4);
}

TEST(OmWriter, SameInputSameBytes) {
  Model m = smallCnn();
  auto a = buildOmBuffer(m, OmWriteOptions{});
  auto b = buildOmBuffer(smallCnn(), OmWriteOptions{});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  OmWriteOptions other;
  other.socVersion = "Ascend910B1";
  auto c = buildOmBuffer(m, other);
  ASSERT_TRUE(c);
  EXPECT_NE(*a, *c); // the soc is recorded
}

TEST(OmWriter, RoundTripRunsLikeTheOriginal) {
  Model m = smallCnn();
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "small.om");
  ASSERT_TRUE(back) << back.status().toString();
  ASSERT_EQ(back->graph->inputs().size(), 1u);
  EXPECT_EQ(back->graph->inputs()[0]->name(), "x");
  EXPECT_EQ(back->graph->outputs()[0]->name(), "y");
  std::set<std::string> names;
  for (const auto& n : back->graph->nodes())
    names.insert(n->name());
  EXPECT_TRUE(names.count("n0")) << "ONNX node names are kept";
  std::vector<float> x(3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i));
  auto expected = runModel(m, x);
  auto actual = runModel(*back, x);
  ASSERT_EQ(expected.size(), 5u);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-6f) << i;
}

TEST(OmWriter, AllUnsupportedOpsAtOnceAndNoFile) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y)
{
  a = Unique (x)
  b = Relu (a)
  y = LpNormalization (b)
}
)");
  fs::path dir = tempDir("unsupported");
  fs::path out = dir / "m.om";
  Status s = writeOmFile(m, OmWriteOptions{}, out.string());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), ErrorCode::OmLowerUnsupported);
  EXPECT_NE(s.message().find("Unique"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("LpNormalization"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("Relu"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir)) << "no temp file left behind";
  fs::remove_all(dir);
}

TEST(OmWriter, DTypeTheChipLacksIsBadAttribute) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (bfloat16[4] x) => (bfloat16[4] y)
{
  y = Relu (x)
}
)");
  OmWriteOptions p3; // Ascend310P3 has no bf16
  auto bad = buildOmBuffer(m, p3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::OmLowerBadAttribute);
  EXPECT_NE(bad.status().message().find("Ascend310P3"), std::string::npos);
  OmWriteOptions a2;
  a2.socVersion = "Ascend910B1";
  EXPECT_TRUE(buildOmBuffer(m, a2));
  EXPECT_EQ(omUnsupportedReason(*m.graph->nodes().front(), "Ascend910B1", 17), "");
  EXPECT_NE(omUnsupportedReason(*m.graph->nodes().front(), "Ascend310P3", 17), "");
}

TEST(OmWriter, ExternalWeightsBesideTheModel) {
  fs::path dir = tempDir("external");
  fs::path out = dir / "cnn.om";
  OmWriteOptions options;
  options.externalWeight = true;
  Model m = smallCnn();
  ASSERT_TRUE(writeOmFile(m, options, out.string()));
  ASSERT_TRUE(fs::is_directory(dir / "weight"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "weight")) {
    EXPECT_EQ(e.path().filename().string().rfind("weight_", 0), 0u) << e.path();
    ++files;
  }
  EXPECT_GE(files, 4u);
  auto back = readOmFile(out.string());
  ASSERT_TRUE(back) << back.status().toString();
  std::vector<float> x(3 * 8 * 8, 0.25f);
  auto expected = runModel(m, x), actual = runModel(*back, x);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-6f);
  // Without the weight folder the model cannot be read.
  fs::remove_all(dir / "weight");
  EXPECT_FALSE(readOmFile(out.string()));
  fs::remove_all(dir);
}

// A FileConstant's weight file must stay in the .om's folder: a weight file replaced by a symlink
// leading out is refused (K8001) instead of read (it used to be copied into the model); a symlink
// that stays inside is followed.
TEST(OmWriter, ExternalWeightsStayInTheModelFolder) {
  fs::path root = tempDir("escape");
  fs::path dir = root / "model";
  fs::create_directories(dir);
  fs::path out = dir / "cnn.om";
  OmWriteOptions options;
  options.externalWeight = true;
  Model m = smallCnn();
  ASSERT_TRUE(writeOmFile(m, options, out.string()));
  fs::path weight;
  for (const auto& e : fs::directory_iterator(dir / "weight"))
    if (weight.empty() || e.path() < weight) weight = e.path();
  ASSERT_FALSE(weight.empty());
  fs::path moved = root / "secret.bin";
  fs::rename(weight, moved);
  fs::create_symlink(moved, weight);
  auto escaped = readOmFile(out.string());
  ASSERT_FALSE(escaped);
  EXPECT_EQ(escaped.status().code(), ErrorCode::OmFileInvalid);
  const std::string message = escaped.status().message();
  EXPECT_NE(message.find("location 'weight/" + weight.filename().string() +
                         "' resolves outside the model folder"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.rfind(out.string() + ": FileConstant '", 0), 0u) << message;
  // Kept inside the folder, the same link target is fine.
  fs::rename(moved, dir / "kept.bin");
  fs::remove(weight);
  fs::create_symlink("../kept.bin", weight);
  auto inside = readOmFile(out.string());
  EXPECT_TRUE(inside) << inside.status().toString();
  fs::remove_all(root);
}

// Opset-6 Clip keeps its bounds as attributes; in a float16 graph they must become float16 Const
// inputs of ClipByValue (they were once dropped, so the .om did not clip at all).
TEST(OmWriter, Fp16AttributeClipKeepsItsBounds) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 6]>
clip (float16[1,4] x) => (float16[1,4] y)
{
  y = Clip <min = 0.0, max = 6.0> (x)
}
)");
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "clip.om");
  ASSERT_TRUE(back) << back.status().toString();
  std::vector<uint16_t> in;
  for (float v : {-3.0f, 2.5f, 6.5f, 100.0f})
    in.push_back(rt::floatToHalf(v));
  rt::Executor exec(*back);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<uint16_t>(DType::Float16, {1, 4}, in));
  auto out = exec.run(feeds);
  ASSERT_TRUE(out) << out.status().toString();
  auto y = out->outputs.at(0).tensor.copyValues<uint16_t>();
  ASSERT_EQ(y.size(), 4u);
  std::vector<float> expected = {0.0f, 2.5f, 6.0f, 6.0f};
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_EQ(rt::halfToFloat(y[i]), expected[i]) << i;
}

// writeOmFile streams WEIGHTS_DATA (and each --external_weight file) from the weights' sources,
// FRACTAL_Z rearranged one tensor at a time; the bytes must be those of the in-memory build.
TEST(OmWriter, StreamedFileMatchesTheBuffer) {
  auto readAll = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  };
  for (bool external : {false, true}) {
    fs::path dir = tempDir(external ? "stream_ext" : "stream");
    fs::path out = dir / "cnn.om";
    OmWriteOptions options;
    options.externalWeight = external;
    Model m = smallCnn();
    auto built = buildOmArtifact(m, options);
    ASSERT_TRUE(built) << built.status().toString();
    ASSERT_TRUE(writeOmFile(m, options, out.string()));
    EXPECT_EQ(readAll(out), built->om) << (external ? "external" : "inline");
    EXPECT_EQ(built->externalFiles.empty(), !external);
    for (const auto& [relative, bytes] : built->externalFiles)
      EXPECT_EQ(readAll(dir / relative), bytes) << relative;
    fs::remove_all(dir);
  }
}

// A quantized model's DynamicQuantizeLinear and ConvInteger, which the writer spells as float ops
// (decompose-quant), are those ops again when the .om is read (fuse-dynamic-quant), and the read
// model's numbers are the ONNX model's to the bit. Weights minus their zero point span -100..155:
// uint8 codes with a zero point per filter.
TEST(OmWriter, DynamicQuantReadsBackAsIntegerOps) {
  std::string w;
  for (int i = 0; i < 4 * 3 * 3 * 3; ++i)
    w += (i ? ", " : "") + std::to_string(i == 5 ? 0 : i == 9 ? 255 : (i * 37 + 11) % 256);
  Model m = modelFromOnnxText((R"(<ir_version: 8, opset_import: ["" : 13]>
q (float[1,3,8,8] x) => (float[1,4,8,8] y)
<uint8[4,3,3,3] w = {)" + w + R"(}, uint8 wz = {100}, float ws = {0.02}>
{
  xq, xs, xz = DynamicQuantizeLinear (x)
  acc = ConvInteger <pads = [1, 1, 1, 1]> (xq, w, xz, wz)
  accf = Cast <to = 1> (acc)
  s = Mul (xs, ws)
  y = Mul (accf, s)
}
)")
                                  .c_str());
  std::vector<float> x(3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 3.0f * std::sin(0.37f * static_cast<float>(i));
  auto expected = runModel(m, x);
  ConversionOptions conversion;
  conversion.target = "om";
  ASSERT_TRUE(runConversionPipeline(m, conversion));
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "quant.om");
  ASSERT_TRUE(back) << back.status().toString();
  std::map<std::string, int> ops;
  for (const auto& n : back->graph->nodes())
    ++ops[n->opType()];
  EXPECT_EQ(ops["DynamicQuantizeLinear"], 1);
  EXPECT_EQ(ops["ConvInteger"], 1);
  EXPECT_EQ(ops["Conv"], 0);
  EXPECT_EQ(ops["Round"], 0);
  auto actual = runModel(*back, x);
  ASSERT_EQ(expected.size(), 4u * 8 * 8);
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), expected.size() * sizeof(float)), 0);
}
