// Every Debian libonnx-testdata model imports, verifies, exports and passes onnx::checker
// unchanged.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const char* kTestdataRoot = "/usr/share/libonnx-testdata/data";

std::vector<std::string>
names(const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& infos) {
  std::vector<std::string> out;
  for (const auto& info : infos)
    out.push_back(info.name());
  return out;
}

std::vector<std::string> nodeSignatures(const onnx::GraphProto& graph) {
  std::vector<std::string> out;
  for (const auto& node : graph.node()) {
    std::string sig = node.domain() + "::" + node.op_type() + "(";
    for (const auto& in : node.input())
      sig += in + ",";
    sig += ")->";
    for (const auto& o : node.output())
      sig += o + ",";
    sig += fmt::format(" attrs={}", node.attribute_size());
    out.push_back(sig);
  }
  return out;
}

std::vector<std::string> initializerSignatures(const onnx::GraphProto& graph) {
  std::vector<std::string> out;
  for (const auto& t : graph.initializer())
    out.push_back(fmt::format("{}:{}:{}", t.name(), t.data_type(), t.dims_size()));
  return out;
}

// Returns "" on success, else what went wrong.
std::string roundTrip(const fs::path& path) {
  auto model = importOnnxFile(path.string());
  if (!model) return "import: " + model.status().toString();
  if (auto status = verifyModel(*model); !status) return "verify: " + status.toString();
  onnx::ModelProto exported;
  if (auto status = exportOnnx(*model, exported); !status) return "export: " + status.toString();
  try {
    onnx::checker::check_model(exported);
  } catch (const std::exception& e) {
    return std::string("checker: ") + e.what();
  }
  onnx::ModelProto original;
  std::ifstream in(path, std::ios::binary);
  if (!original.ParseFromIstream(&in)) return "reference parse failed";
  if (nodeSignatures(original.graph()) != nodeSignatures(exported.graph())) return "nodes differ";
  if (initializerSignatures(original.graph()) != initializerSignatures(exported.graph()))
    return "initializers differ";
  if (names(original.graph().input()) != names(exported.graph().input())) return "inputs differ";
  if (names(original.graph().output()) != names(exported.graph().output())) return "outputs differ";
  // Second trip: the exported model must import to the same IR text.
  std::string bytes = exported.SerializeAsString();
  auto owner = std::make_shared<std::string>(bytes);
  auto again = importOnnxBytes(reinterpret_cast<const uint8_t*>(owner->data()), owner->size(),
                               owner, "exported", path.parent_path().string());
  if (!again) return "re-import: " + again.status().toString();
  PrintOptions options;
  if (modelToText(*model, options) != modelToText(*again, options))
    return "IR text differs after re-import";
  return "";
}

} // namespace

TEST(OnnxRoundTrip, AllLibonnxTestdataModels) {
  if (!fs::exists(kTestdataRoot))
    GTEST_SKIP() << kTestdataRoot << " missing: install libonnx-testdata";
  size_t total = 0;
  std::vector<std::string> failures;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    std::vector<fs::path> models;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(kTestdataRoot) / suite))
      if (entry.path().filename() == "model.onnx") models.push_back(entry.path());
    std::sort(models.begin(), models.end());
    for (const auto& path : models) {
      ++total;
      std::string problem = roundTrip(path);
      if (!problem.empty()) failures.push_back(path.string() + ": " + problem);
    }
  }
  for (const auto& f : failures)
    ADD_FAILURE() << f;
  std::printf("round-tripped %zu models, %zu failed\n", total, failures.size());
  EXPECT_GE(total, 1070u);
  EXPECT_TRUE(failures.empty());
}
