// The .om reader and dumps on the real GraphEngine files in the shared conformance folder, and on
// damaged copies of them (truncated, bad magic, trailing bytes, garbage tables).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/om.h"
// raiseModelDef reads a ModelDef built here without the container around it.
#include "../../../src/backends/om/om_internal.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const std::string kOmDir = std::string(KILN_SHARED_CONFORMANCE_DIR) + "/om";
const std::string kRoot = kOmDir + "/root_model.om";
const std::string kFlow = kOmDir + "/flow_model.om";

#define SKIP_WITHOUT_SHARED()                                                                      \
  if (!fs::exists(kRoot) || !fs::exists(kFlow))                                                    \
  GTEST_SKIP() << "the shared conformance folder is absent (no " << kOmDir << ")"

std::vector<uint8_t> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string writeTemp(const std::string& tag, const std::vector<uint8_t>& bytes) {
  fs::path p =
      fs::temp_directory_path() / ("kiln_om_" + tag + "_" + std::to_string(getpid()) + ".om");
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return p.string();
}

} // namespace

TEST(OmReader, RootModelHeaderPartitionsAndGraph) {
  SKIP_WITHOUT_SHARED();
  auto text = dumpOmFile(kRoot);
  ASSERT_TRUE(text) << text.status().toString();
  auto dump = nlohmann::json::parse(*text);
  EXPECT_EQ(dump["file_size"], 2290);
  EXPECT_EQ(dump["header"]["name"], "test_graph_cache");
  EXPECT_EQ(dump["header"]["version"], "0x20000000");
  EXPECT_EQ(dump["header"]["model_length"], 2034);
  ASSERT_EQ(dump["blocks"].size(), 1u);
  const auto& parts = dump["blocks"][0]["partitions"];
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0]["name"], "MODEL_INOUT_INFO");
  EXPECT_EQ(parts[0]["size"], 140);
  EXPECT_EQ(parts[1]["name"], "MODEL_DEF");
  EXPECT_EQ(parts[1]["size"], 1798);
  EXPECT_EQ(parts[2]["name"], "TASK_INFO");
  EXPECT_EQ(parts[2]["offset"], 1938);
  const auto& inout = dump["blocks"][0]["inout_info"];
  ASSERT_EQ(inout["inputs"].size(), 1u);
  EXPECT_EQ(inout["inputs"][0]["name"], "_arg_0");
  EXPECT_EQ(inout["inputs"][0]["dtype"], "DT_INT32");
  EXPECT_EQ(inout["inputs"][0]["dims"], nlohmann::json({16}));
  EXPECT_EQ(inout["outputs"][0]["name"], "output_0_out_0");
  const auto& graph = dump["blocks"][0]["model_def"]["graphs"][0];
  EXPECT_EQ(graph["ops_by_type"]["Data"], 1);
  EXPECT_EQ(graph["ops_by_type"]["FakeOpNpu"], 1);
  EXPECT_EQ(graph["ops_by_type"]["NetOutput"], 1);
  EXPECT_EQ(dump["blocks"][0]["task_info"]["version"], "test_v100_r001");
  // The fake kernel op has no ONNX meaning: reading to IR names it.
  auto model = readOmFile(kRoot);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.status().code(), ErrorCode::OmReadUnsupported);
  EXPECT_NE(model.status().message().find("FakeOpNpu"), std::string::npos);
}

TEST(OmReader, RootModelJsonAndInfo) {
  SKIP_WITHOUT_SHARED();
  auto json = omToJson(kRoot);
  ASSERT_TRUE(json) << json.status().toString();
  auto j = nlohmann::json::parse(*json);
  EXPECT_EQ(j["name"], "test_graph_cache");
  ASSERT_TRUE(j["graph"].is_array());
  EXPECT_FALSE(j["graph"][0].contains("output")); // blacklisted in mode 1
  EXPECT_EQ(j["graph"][0]["op"][0]["type"], "NetOutput");
  EXPECT_EQ(j["graph"][0]["op"][1]["attr"][0]["key"], "_input_name_key");
  EXPECT_EQ(j["graph"][0]["op"][1]["input_desc"][0]["dtype"], "DT_INT32");
  auto info = omInfoText(kRoot);
  ASSERT_TRUE(info) << info.status().toString();
  EXPECT_NE(info->find("om       info: modeldef_size[1798 B], weight_data_size[0 B], "
                       "tbe_kernels_size[0 B], cust_aicpu_kernel_store_size[0 B], "
                       "task_info_size[16 B], so_store_size[0 B]."),
            std::string::npos)
      << *info;
  EXPECT_NE(info->find("============ Display Model Info end   ============"), std::string::npos);
}

TEST(OmReader, FlowModelSubmodels) {
  SKIP_WITHOUT_SHARED();
  auto text = dumpOmFile(kFlow);
  ASSERT_TRUE(text) << text.status().toString();
  auto dump = nlohmann::json::parse(*text);
  EXPECT_EQ(dump["header"]["model_type"], 3);
  const auto& parts = dump["blocks"][0]["partitions"];
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[1]["name"], "FLOW_MODEL");
  EXPECT_EQ(parts[2]["submodel"]["graph_name"], "graph1");
  EXPECT_EQ(parts[2]["submodel"]["engine"], "NPU");
  EXPECT_EQ(parts[2]["submodel"]["model"]["header"]["name"], "graph1");
  auto model = readOmFile(kFlow);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.status().code(), ErrorCode::OmReadUnsupported);
}

TEST(OmReader, DamagedCopiesAreInvalid) {
  SKIP_WITHOUT_SHARED();
  auto bytes = readAll(kRoot);
  struct Case {
    std::string tag;
    std::vector<uint8_t> data;
    std::string needle;
  };
  std::vector<Case> cases;
  cases.push_back({"short", {bytes.begin(), bytes.begin() + 100}, "shorter than the 256-byte"});
  cases.push_back({"truncated", {bytes.begin(), bytes.end() - 10}, "at byte 184"});
  auto magic = bytes;
  magic[0] = 'X';
  cases.push_back({"magic", magic, "magic"});
  auto trailing = bytes;
  trailing.push_back(0);
  cases.push_back({"trailing", trailing, "at byte 184"});
  auto table = bytes;
  table[256] = 200; // partition count
  cases.push_back({"table", table, "partition count 200"});
  auto size = bytes;
  size[256 + 8 + 24 + 16] = 0xff; // first partition much larger than the file
  cases.push_back({"size", size, "runs past the end"});
  for (const auto& c : cases) {
    std::string path = writeTemp(c.tag, c.data);
    auto model = readOmFile(path);
    ASSERT_FALSE(model) << c.tag;
    EXPECT_EQ(model.status().code(), ErrorCode::OmFileInvalid) << c.tag;
    EXPECT_NE(model.status().message().find(c.needle), std::string::npos)
        << c.tag << ": " << model.status().message();
    EXPECT_FALSE(dumpOmFile(path)) << c.tag;
    fs::remove(path);
  }
}

// A Data op whose desc is [2^32, 2^32]: the old reader raised it as a graph input of that shape.
TEST(OmReader, DescDimsWhoseElementCountOverflowsAreInvalid) {
  ge::proto::ModelDef def;
  ge::proto::GraphDef* graph = def.add_graph();
  graph->set_name("g");
  ge::proto::OpDef* data = graph->add_op();
  data->set_name("x");
  data->set_type("Data");
  ge::proto::TensorDescriptor* desc = data->add_output_desc();
  desc->set_dtype(ge::proto::DT_FLOAT);
  desc->set_layout("ND");
  desc->mutable_shape()->add_dim(4294967296);
  desc->mutable_shape()->add_dim(4294967296);
  ge::proto::OpDef* out = graph->add_op();
  out->set_name("out");
  out->set_type("NetOutput");
  out->add_input("x:0");
  *out->add_input_desc() = *desc;
  auto model = om::raiseModelDef(def, nullptr, 0, ".", "test.om");
  ASSERT_FALSE(model);
  EXPECT_EQ(model.status().code(), ErrorCode::OmFileInvalid);
  EXPECT_EQ(model.status().message(), "test.om: op 'x' (type Data): output desc 0: element count "
                                      "of [4294967296,4294967296] overflows");
}

// A Relu chain listed backwards (each op before the op it reads): raised in dependency order, in
// time linear in the ops (the reader once re-scanned every waiting op per sweep, one sweep per
// op here, so 20,000 ops took 2 * 10^8 scans).
TEST(OmReader, AChainListedBackwardsIsRaisedInOrder) {
  constexpr int kOps = 20000;
  ge::proto::ModelDef def;
  ge::proto::GraphDef* graph = def.add_graph();
  graph->set_name("g");
  ge::proto::TensorDescriptor desc;
  desc.set_dtype(ge::proto::DT_FLOAT);
  desc.set_layout("ND");
  desc.mutable_shape()->add_dim(1);
  desc.mutable_shape()->add_dim(4);
  ge::proto::OpDef* data = graph->add_op();
  data->set_name("x");
  data->set_type("Data");
  *data->add_output_desc() = desc;
  for (int i = kOps - 1; i >= 0; --i) {
    ge::proto::OpDef* relu = graph->add_op();
    relu->set_name("r" + std::to_string(i));
    relu->set_type("Relu");
    relu->add_input(i == 0 ? "x:0" : "r" + std::to_string(i - 1) + ":0");
    *relu->add_input_desc() = desc;
    *relu->add_output_desc() = desc;
  }
  ge::proto::OpDef* out = graph->add_op();
  out->set_name("out");
  out->set_type("NetOutput");
  out->add_input("r" + std::to_string(kOps - 1) + ":0");
  *out->add_input_desc() = desc;
  auto model = om::raiseModelDef(def, nullptr, 0, ".", "chain.om");
  ASSERT_TRUE(model) << model.status().toString();
  ASSERT_EQ(model->graph->nodeCount(), size_t{kOps});
  const Value* previous = model->graph->inputs().at(0);
  for (const auto& node : model->graph->nodes()) {
    ASSERT_EQ(node->opType(), "Relu");
    ASSERT_EQ(node->input(0), previous);
    previous = node->output(0);
  }
  EXPECT_EQ(model->graph->outputs().at(0), previous);
}
