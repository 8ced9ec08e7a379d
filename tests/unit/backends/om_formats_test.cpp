// Ascend heavy formats: the NC1HWC0 / FRACTAL_Z index math against om.md §5.3's rules and docs
// example, and the written .om graph (heavy descs on conv chains, TransData at the borders,
// group convolutions packed into FRACTAL_Z).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/om.h"
#include "kiln/backends/om_formats.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> countingBytes(size_t elements) {
  std::vector<uint8_t> bytes(elements * 2);
  for (size_t i = 0; i < elements; ++i) {
    uint16_t v = static_cast<uint16_t>(i + 1); // never 0, so padding is told apart
    std::memcpy(bytes.data() + 2 * i, &v, 2);
  }
  return bytes;
}

uint16_t at(const std::vector<uint8_t>& bytes, int64_t index) {
  uint16_t v;
  std::memcpy(&v, bytes.data() + 2 * index, 2);
  return v;
}

// "v0, v1, ..." for an ONNX-text initializer of n varied values.
std::string values(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += (i ? ", " : "") + std::to_string(0.01 * static_cast<double>(i % 37) - 0.15);
  return s;
}

size_t nonZero(const std::vector<uint8_t>& bytes) {
  size_t n = 0;
  for (size_t i = 0; i < bytes.size() / 2; ++i)
    n += at(bytes, static_cast<int64_t>(i)) != 0;
  return n;
}

// The written model's ops as omToJson shows them.
nlohmann::json writtenOps(Model model, const std::string& tag) {
  auto passes = pipelineByName("default");
  EXPECT_TRUE(passes);
  EXPECT_TRUE(runPipeline(model, *passes));
  fs::path dir = fs::temp_directory_path() / ("kiln_om_formats_" + tag + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path path = dir / "m.om";
  Status written = writeOmFile(model, OmWriteOptions{}, path.string());
  EXPECT_TRUE(written) << written.toString();
  auto text = omToJson(path.string());
  fs::remove_all(dir);
  EXPECT_TRUE(text) << text.status().toString();
  if (!text) return nlohmann::json::array();
  return nlohmann::json::parse(*text)["graph"][0]["op"];
}

std::string attrString(const nlohmann::json& op, const std::string& key) {
  for (const auto& a : op.value("attr", nlohmann::json::array()))
    if (a["key"] == key) return a["value"].value("s", "");
  return "";
}

} // namespace

TEST(OmFormats, FractalZMatchesTheDocsExample) {
  // HWCN (2,2,32,32) is OIHW (32,32,2,2): FRACTAL_Z (8,2,16,16) for fp16.
  std::vector<int64_t> oihw{32, 32, 2, 2};
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, oihw, 16),
            (std::vector<int64_t>{8, 2, 16, 16}));
  auto plain = countingBytes(32 * 32 * 2 * 2);
  auto fractal = om::toHeavy(om::HeavyLayout::FractalZ, plain.data(), oihw, 2, 16);
  ASSERT_EQ(fractal.size(), plain.size()); // no padding: N and C are multiples of 16
  // W[n=17][c=20][kh=1][kw=0] goes to [(20/16)·4 + 1·2 + 0][17/16][17%16][20%16] = [6][1][1][4].
  int64_t plainIndex = ((17 * 32 + 20) * 2 + 1) * 2 + 0;
  int64_t fractalIndex = ((6 * 2 + 1) * 16 + 1) * 16 + 4;
  EXPECT_EQ(at(fractal, fractalIndex), at(plain, plainIndex));
  EXPECT_EQ(om::fromHeavy(om::HeavyLayout::FractalZ, fractal.data(), oihw, 2, 16), plain);
}

TEST(OmFormats, FractalZPadsChannelsAndOutputsWithZeros) {
  std::vector<int64_t> oihw{20, 3, 1, 1};
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, oihw, 16),
            (std::vector<int64_t>{1, 2, 16, 16}));
  auto plain = countingBytes(60);
  auto fractal = om::toHeavy(om::HeavyLayout::FractalZ, plain.data(), oihw, 2, 16);
  EXPECT_EQ(fractal.size(), 1u * 2 * 16 * 16 * 2);
  EXPECT_EQ(nonZero(fractal), 60u);
  EXPECT_EQ(om::fromHeavy(om::HeavyLayout::FractalZ, fractal.data(), oihw, 2, 16), plain);
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, {20, 40, 3, 3}, 32),
            (std::vector<int64_t>{18, 2, 16, 32}));
}

TEST(OmFormats, Nc1hwc0SplitsChannelsIntoC0Blocks) {
  std::vector<int64_t> nchw{2, 20, 2, 3};
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::Nc1hwc0, nchw, 16),
            (std::vector<int64_t>{2, 2, 2, 3, 16}));
  auto plain = countingBytes(2 * 20 * 2 * 3);
  auto heavy = om::toHeavy(om::HeavyLayout::Nc1hwc0, plain.data(), nchw, 2, 16);
  EXPECT_EQ(heavy.size(), 2u * 2 * 2 * 3 * 16 * 2);
  EXPECT_EQ(nonZero(heavy), plain.size() / 2);
  // (n=1, c=18, h=1, w=2) → [1][18/16][1][2][18%16].
  EXPECT_EQ(at(heavy, (((1 * 2 + 1) * 2 + 1) * 3 + 2) * 16 + 2),
            at(plain, ((1 * 20 + 18) * 2 + 1) * 3 + 2));
  EXPECT_EQ(om::fromHeavy(om::HeavyLayout::Nc1hwc0, heavy.data(), nchw, 2, 16), plain);
  EXPECT_EQ(om::cubeC0(DType::Float16), 16);
  EXPECT_EQ(om::cubeC0(DType::Float32), 16);
  EXPECT_EQ(om::cubeC0(DType::Int8), 32);
  EXPECT_EQ(om::cubeC0(DType::Int64), 0);
}

TEST(OmFormats, ConvChainsAreHeavyWithTransDataAtTheBorders) {
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,8,8] x) => (float[1,20,4,4] y, float[1,20,8,8] z)
<float[20,3,3,3] w = {)" +
                     values(540) + "}, float[20] b = {" + values(20) + R"(}>
{
  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  r = Relu (c)
  y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
  z = Softmax <axis = 1> (r)
}
)";
  Model m = kiln::testing::modelFromOnnxText(text.c_str());
  auto ops = writtenOps(m, "chain");
  std::map<std::string, nlohmann::json> byName;
  std::map<std::string, std::string> outLayout; // "op:0" → layout
  int64_t expectedId = 0, transIn = 0, transOut = 0;
  for (const auto& op : ops) {
    byName[op["name"]] = op;
    EXPECT_EQ(op.value("id", 0), expectedId++) << "ids follow the op order";
    if (op.contains("output_desc") && !op["output_desc"].empty())
      outLayout[op["name"].get<std::string>() + ":0"] = op["output_desc"][0].value("layout", "");
    if (op["type"] == "TransData") {
      if (attrString(op, "dst_format") == "NC1HWC0") ++transIn;
      if (attrString(op, "src_format") == "NC1HWC0") ++transOut;
    }
  }
  const auto& conv = byName.at("n0");
  EXPECT_EQ(conv["type"], "Conv2D");
  EXPECT_EQ(conv["input_desc"][0]["layout"], "NC1HWC0");
  EXPECT_EQ(conv["input_desc"][0]["shape"]["dim"], nlohmann::json({1, 1, 8, 8, 16}));
  EXPECT_EQ(conv["input_desc"][1]["layout"], "FRACTAL_Z");
  EXPECT_EQ(conv["input_desc"][1]["shape"]["dim"], nlohmann::json({9, 2, 16, 16}));
  EXPECT_EQ(conv["output_desc"][0]["shape"]["dim"], nlohmann::json({1, 2, 8, 8, 16}));
  EXPECT_EQ(byName.at("n1")["output_desc"][0]["layout"], "NC1HWC0"); // Relu follows
  EXPECT_EQ(byName.at("n2")["output_desc"][0]["layout"], "NC1HWC0"); // and MaxPool
  // One TransData brings x in; one per heavy tensor that leaves (pool → y, relu → softmax).
  EXPECT_EQ(transIn, 1);
  EXPECT_EQ(transOut, 2);
  // Every op that is not heavy-capable reads plain tensors.
  for (const auto& op : ops) {
    if (op["type"] == "TransData" || op["type"] == "Conv2D" || op["type"] == "Relu" ||
        op["type"] == "MaxPoolV3")
      continue;
    for (const auto& input : op.value("input", nlohmann::json::array()))
      EXPECT_NE(outLayout[input.get<std::string>()], "NC1HWC0") << op["name"] << " reads " << input;
  }
}

// Group FRACTAL_Z (om.md §5.3): OIHW (320, 3, 2, 2) in 32 groups packs e = 16 groups per block,
// shape (24, 10, 16, 16). W[g·10 + n][c][kh][kw] with g = 17, n = 5, c = 2, kh = 1, kw = 0: block
// 17/16 = 1, slot 1, in lane 1·3 + 2 = 5, out column 1·10 + 5 = 15, row (1·3 + 5/16)·4 + 1·2 = 14.
TEST(OmFormats, GroupFractalZPacksGroupsAlongTheDiagonal) {
  std::vector<int64_t> oihw{320, 3, 2, 2};
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, oihw, 16, 32),
            (std::vector<int64_t>{24, 10, 16, 16}));
  auto plain = countingBytes(320 * 3 * 2 * 2);
  auto fractal = om::toHeavy(om::HeavyLayout::FractalZ, plain.data(), oihw, 2, 16, 32);
  ASSERT_EQ(fractal.size(), 24u * 10 * 16 * 16 * 2);
  EXPECT_EQ(nonZero(fractal), 320u * 3 * 2 * 2);
  int64_t plainIndex = (((17 * 10 + 5) * 3 + 2) * 2 + 1) * 2 + 0;
  int64_t fractalIndex = (14 * 160 + 15) * 16 + 5;
  EXPECT_EQ(at(fractal, fractalIndex), at(plain, plainIndex));
  EXPECT_EQ(om::fromHeavy(om::HeavyLayout::FractalZ, fractal.data(), oihw, 2, 16, 32), plain);
  // Depthwise 4 channels: all four in one 16×16 block, (9, 1, 16, 16); groups 1 is the plain rule.
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, {4, 1, 3, 3}, 16, 4),
            (std::vector<int64_t>{9, 1, 16, 16}));
  EXPECT_EQ(om::heavyDims(om::HeavyLayout::FractalZ, {32, 32, 2, 2}, 16, 1),
            om::heavyDims(om::HeavyLayout::FractalZ, {32, 32, 2, 2}, 16));
  EXPECT_EQ(om::packFormat(4, 32), 4 + (32 << 8));
  EXPECT_EQ(om::subFormatOf(om::packFormat(4, 32)), 32);
}

// A depthwise convolution is written heavy too (group count in format_for_int's sub-format) and
// reads back to a model that computes the same.
TEST(OmFormats, DepthwiseConvolutionIsHeavyAndRoundTrips) {
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4,6,6] x) => (float[1,4,6,6] y)
<float[4,1,3,3] w = {)" +
                     values(36) + R"(}>
{
  y = Conv <pads = [1, 1, 1, 1], group = 4> (x, w)
}
)";
  Model m = kiln::testing::modelFromOnnxText(text.c_str());
  size_t convs = 0;
  for (const auto& op : writtenOps(m, "group")) {
    if (op["type"] != "Conv2D") continue;
    ++convs;
    EXPECT_EQ(op["input_desc"][0]["layout"], "NC1HWC0");
    const auto& w = op["input_desc"][1];
    EXPECT_EQ(w["layout"], "FRACTAL_Z");
    EXPECT_EQ(w["shape"]["dim"], nlohmann::json({9, 1, 16, 16}));
    int64_t format = -1;
    for (const auto& a : w["attr"])
      if (a["key"] == "format_for_int") format = a["value"].value("i", int64_t{-1});
    EXPECT_EQ(format, om::packFormat(4, 4));
  }
  EXPECT_EQ(convs, 1u);

  auto passes = pipelineByName("default");
  ASSERT_TRUE(passes);
  ASSERT_TRUE(runPipeline(m, *passes));
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "depthwise.om");
  ASSERT_TRUE(back) << back.status().toString();
  std::vector<float> x(4 * 6 * 6);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::sin(0.3 * static_cast<double>(i)));
  auto run = [&](const Model& model) {
    rt::Executor exec(model);
    std::map<std::string, rt::RtValue> feeds;
    feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {1, 4, 6, 6}, x));
    auto out = exec.run(feeds);
    EXPECT_TRUE(out) << out.status().toString();
    return out ? out->outputs.at(0).tensor.copyValues<float>() : std::vector<float>{};
  };
  auto expected = run(m);
  ASSERT_EQ(expected.size(), 144u);
  EXPECT_EQ(run(*back), expected);
}

// A FRACTAL_Z constant whose stored shape does not hold its origin shape is a damaged file: K8001
// naming the constant and both shapes, not a misread weight.
TEST(OmFormats, FractalZShapeThatDoesNotFitIsInvalid) {
  std::string text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,8,8] x) => (float[1,4,8,8] y)
<float[4,3,3,3] w = {)" +
                     values(108) + R"(}>
{
  y = Conv <pads = [1, 1, 1, 1]> (x, w)
}
)";
  Model m = kiln::testing::modelFromOnnxText(text.c_str());
  auto passes = pipelineByName("default");
  ASSERT_TRUE(passes);
  ASSERT_TRUE(runPipeline(m, *passes));
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  ASSERT_TRUE(readOmBuffer(bytes->data(), bytes->size(), "ok.om"));
  // The weight's FRACTAL_Z shape [9, 1, 16, 16] as a packed ShapeDef (field 1, 4 bytes); make every
  // copy [8, 1, 16, 16], which the same byte count encodes.
  const std::vector<uint8_t> shape{0x0A, 0x04, 0x09, 0x01, 0x10, 0x10};
  size_t changed = 0;
  for (auto it = std::search(bytes->begin(), bytes->end(), shape.begin(), shape.end());
       it != bytes->end(); it = std::search(it + 1, bytes->end(), shape.begin(), shape.end())) {
    it[2] = 0x08;
    ++changed;
  }
  ASSERT_GE(changed, 2u); // the Const's value and output descriptors at least
  auto damaged = readOmBuffer(bytes->data(), bytes->size(), "damaged.om");
  ASSERT_FALSE(damaged);
  EXPECT_EQ(damaged.status().code(), ErrorCode::OmFileInvalid);
  EXPECT_EQ(damaged.status().message(),
            "damaged.om: FRACTAL_Z constant 'w' has shape [8,1,16,16], which does not hold its "
            "origin shape [4,3,3,3]");
}
