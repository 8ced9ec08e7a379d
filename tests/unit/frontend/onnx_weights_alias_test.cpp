// Proves initializer weights are the mapped file's own pages: importing copies no weight bytes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

class OnnxWeightsAlias : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln-alias-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

void addRawInitializer(onnx::GraphProto* graph, const std::string& name, int32_t dataType,
                       int64_t count, const std::string& bytes) {
  auto* init = graph->add_initializer();
  init->set_name(name);
  init->set_data_type(dataType);
  init->add_dims(count);
  init->set_raw_data(bytes);
}

std::string floatRamp(size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(i % 1000) * 0.5f;
  return {reinterpret_cast<const char*>(values.data()), count * sizeof(float)};
}

TEST_F(OnnxWeightsAlias, EveryRawInitializerPointsIntoTheMapping) {
  constexpr size_t kBigFloats = 1u << 20; // 4 MiB
  constexpr size_t kMediumBytes = 3u << 20;
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("weights");
  std::string big = floatRamp(kBigFloats);
  std::string medium(kMediumBytes, '\0');
  for (size_t i = 0; i < medium.size(); ++i)
    medium[i] = static_cast<char>(i * 7);
  std::string small = floatRamp(3);
  addRawInitializer(graph, "big", onnx::TensorProto::FLOAT, kBigFloats, big);
  addRawInitializer(graph, "medium", onnx::TensorProto::INT8, kMediumBytes, medium);
  addRawInitializer(graph, "small", onnx::TensorProto::FLOAT, 3, small);
  auto* concat = graph->add_node();
  concat->set_op_type("Concat");
  concat->set_name("join");
  concat->add_input("big");
  concat->add_input("small");
  concat->add_output("joined");
  auto* attr = concat->add_attribute();
  attr->set_name("axis");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(0);
  auto* cast = graph->add_node();
  cast->set_op_type("Cast");
  cast->set_name("widen");
  cast->add_input("medium");
  cast->add_output("wide");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::INT32);
  graph->add_output()->set_name("joined");
  graph->add_output()->set_name("wide");

  fs::path path = dir_ / "weights.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }
  auto imported = importOnnxFile(path.string());
  ASSERT_TRUE(imported) << imported.status().toString();

  const auto& initializers = imported->graph->initializers();
  ASSERT_EQ(initializers.size(), 3u);
  const MappedFile* mapping = nullptr;
  for (const Value* value : initializers) {
    SCOPED_TRACE(value->name());
    const Tensor& tensor = value->initializer();
    ASSERT_TRUE(tensor.aliasesFile());
    const MappedFile* file = tensor.buffer()->file();
    ASSERT_NE(file, nullptr);
    if (!mapping) mapping = file;
    EXPECT_EQ(file, mapping) << "all weights should share the one mapping of the model";
    EXPECT_EQ(fs::path(file->path()), path);
    ASSERT_GT(tensor.byteSize(), 0u);
    EXPECT_TRUE(file->contains(tensor.data()));
    EXPECT_TRUE(file->contains(tensor.data() + tensor.byteSize() - 1));
  }
  auto bytesOf = [&](const std::string& name) {
    const Tensor& t = imported->graph->findLocalValue(name)->initializer();
    return std::string(reinterpret_cast<const char*>(t.data()), t.byteSize());
  };
  EXPECT_TRUE(bytesOf("big") == big);
  EXPECT_TRUE(bytesOf("medium") == medium);
  EXPECT_TRUE(bytesOf("small") == small);

  // The tensors keep the mapping alive after the model that created them is gone.
  Tensor kept = imported->graph->findLocalValue("big")->initializer();
  imported = Status(ErrorCode::Internal, "dropped");
  EXPECT_TRUE(kept.aliasesFile());
  EXPECT_EQ(kept.copyValues<float>()[999], 499.5f);
}

TEST_F(OnnxWeightsAlias, TypedFieldsAreCopiedNotAliased) {
  // float_data is varint/fixed32-encoded by protobuf, so it has to be decoded into owned bytes.
  onnx::TensorProto proto;
  proto.set_name("typed");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(2);
  proto.add_float_data(1.0f);
  proto.add_float_data(2.0f);
  auto tensor = tensorFromOnnx(proto, "");
  ASSERT_TRUE(tensor) << tensor.status().toString();
  EXPECT_FALSE(tensor->aliasesFile());
  EXPECT_EQ(tensor->copyValues<float>(), (std::vector<float>{1.0f, 2.0f}));
}

} // namespace
