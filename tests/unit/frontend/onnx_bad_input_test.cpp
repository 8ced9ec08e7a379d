// Damaged or hostile ONNX files: each must give one coded error naming the file and the culprit.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "kiln/conformance.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_element_types.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

void setTensorType(onnx::ValueInfoProto* info, const std::string& name, int32_t elemType,
                   std::initializer_list<int64_t> dims) {
  info->set_name(name);
  auto* tensorType = info->mutable_type()->mutable_tensor_type();
  tensorType->set_elem_type(elemType);
  auto* shape = tensorType->mutable_shape();
  for (int64_t d : dims)
    shape->add_dim()->set_dim_value(d);
}

onnx::TensorProto* addFloatInitializer(onnx::GraphProto* graph, const std::string& name,
                                       const std::vector<float>& values) {
  auto* init = graph->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(static_cast<int64_t>(values.size()));
  init->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return init;
}

onnx::NodeProto* addNode(onnx::GraphProto* graph, const std::string& name, const std::string& op,
                         std::initializer_list<std::string> inputs,
                         std::initializer_list<std::string> outputs) {
  auto* node = graph->add_node();
  node->set_name(name);
  node->set_op_type(op);
  for (const auto& in : inputs)
    node->add_input(in);
  for (const auto& out : outputs)
    node->add_output(out);
  return node;
}

// Y = X + W with W a two-float initializer: the smallest model every case below damages.
onnx::ModelProto addModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("g");
  setTensorType(graph->add_input(), "X", onnx::TensorProto::FLOAT, {2});
  addFloatInitializer(graph, "W", {1.0f, 2.0f});
  addNode(graph, "add", "Add", {"X", "W"}, {"Y"});
  setTensorType(graph->add_output(), "Y", onnx::TensorProto::FLOAT, {2});
  return model;
}

class OnnxBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kiln-bad-input-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path writeBytes(const std::string& name, const std::string& bytes) {
    fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  fs::path writeModel(const std::string& name, const onnx::ModelProto& model) {
    return writeBytes(name, model.SerializeAsString());
  }

  // Imports `path`, expecting `code`; the message must name the file and contain every part, and
  // the fix hint must contain `hintPart`.
  void expectError(const fs::path& path, ErrorCode code, std::initializer_list<std::string> parts,
                   const std::string& hintPart) {
    auto model = importOnnxFile(path.string());
    ASSERT_FALSE(model) << path << " imported but should have failed";
    const Status& status = model.status();
    std::string text = status.toString();

    EXPECT_EQ(codeString(status.code()), codeString(code)) << text;
    EXPECT_NE(status.message().find(path.string()), std::string::npos)
        << "message does not name the file: " << text;
    for (const auto& part : parts)
      EXPECT_NE(status.message().find(part), std::string::npos)
          << "message lacks '" << part << "': " << text;
    EXPECT_NE(status.hint().find(hintPart), std::string::npos)
        << "hint lacks '" << hintPart << "': " << text;
    EXPECT_NE(text.find(". Fix: "), std::string::npos) << text;
  }

  onnx::TensorProto* weight(onnx::ModelProto& model) {
    return model.mutable_graph()->mutable_initializer(0);
  }

  fs::path dir_;
};

// Files that are not (whole) protobuf.

TEST_F(OnnxBadInput, TruncatedFile) {
  onnx::ModelProto model = addModel();
  addFloatInitializer(model.mutable_graph(), "Big", std::vector<float>(256, 0.5f));
  std::string bytes = model.SerializeAsString();
  auto path = writeBytes("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  expectError(path, ErrorCode::Truncated, {"data ends inside a field", "file is"}, "cut short");
}

TEST_F(OnnxBadInput, TruncatedInsideVarint) {
  // A lone ir_version tag followed by a varint whose continuation bit promises more bytes.
  auto path = writeBytes("varint.onnx", std::string("\x08\x80", 2));
  expectError(path, ErrorCode::Truncated, {"data ends inside a field"}, "cut short");
}

TEST_F(OnnxBadInput, TruncatedInsideNestedMessage) {
  // graph (field 7) of 3 bytes whose initializer (field 5) claims 10, then ir_version: the file is
  // whole but the nesting is broken.
  auto path = writeBytes("nested.onnx", std::string("\x3a\x03\x2a\x0a\x00\x08\x01", 7));
  expectError(path, ErrorCode::Truncated,
              {"starts at byte 2", "enclosing message (byte 5", "file is 7 bytes"}, "cut short");
}

TEST_F(OnnxBadInput, TextFile) {
  auto path = writeBytes("notes.onnx", "This is a plain text file, not a model.\nSecond line.\n");
  expectError(path, ErrorCode::NotProtobuf, {"file is text"}, "binary ONNX model");
}

TEST_F(OnnxBadInput, BinaryGarbage) {
  // Tag 0x0f: field 1 with wire type 7, which protobuf does not have.
  auto path = writeBytes("garbage.onnx", std::string("\x0f\xff\x00\x01", 4));
  expectError(path, ErrorCode::NotProtobuf, {"wire type 7 at byte 0"}, "ONNX model");
}

TEST_F(OnnxBadInput, OnnxTextSyntaxInBinaryFile) {
  auto path = writeBytes("model.onnx", "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                       "g (float[2] X) => (float[2] Y) { Y = Relu(X) }\n");
  expectError(path, ErrorCode::NotProtobuf, {"file is text"}, ".onnxtxt");
}

TEST_F(OnnxBadInput, EmptyFile) {
  auto path = writeBytes("empty.onnx", "");
  expectError(path, ErrorCode::Truncated, {"file is empty"}, "export the model again");
}

// Model structure.

TEST_F(OnnxBadInput, GraphWithoutOutputs) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->clear_output();
  auto path = writeModel("no_outputs.onnx", model);
  expectError(path, ErrorCode::EmptyGraph, {"graph 'g' has no outputs"}, "outputs declared");
}

TEST_F(OnnxBadInput, MissingGraph) {
  onnx::ModelProto model = addModel();
  model.clear_graph();
  auto path = writeModel("no_graph.onnx", model);
  expectError(path, ErrorCode::NoGraph, {"no ONNX graph"}, "ONNX ModelProto");
}

TEST_F(OnnxBadInput, UnknownDTypeOnInitializer) {
  onnx::ModelProto model = addModel();
  weight(model)->set_data_type(99);
  auto path = writeModel("dtype_init.onnx", model);
  expectError(path, ErrorCode::UnknownDType, {"tensor 'W'", "unknown data type 99"},
              "TensorProto.DataType");
}

// Types newer ONNX releases added are named with the release, and the fix is a conversion in the
// exporter (the hint once asked for "a value 1-22" whatever the number).
TEST_F(OnnxBadInput, NewerDTypesNameTheirOnnxRelease) {
  const std::string hint = "dequantize or cast the tensor to a type kiln takes "
                           "(TensorProto.DataType 1-22, up to INT4) in the exporter";
  onnx::ModelProto f4 = addModel();
  weight(f4)->set_data_type(23);
  auto f4Path = writeModel("dtype_float4.onnx", f4);
  auto f4Model = importOnnxFile(f4Path.string());
  ASSERT_FALSE(f4Model);
  EXPECT_EQ(codeString(f4Model.status().code()), codeString(ErrorCode::UnknownDType));
  EXPECT_EQ(f4Model.status().message(),
            f4Path.string() + ": graph 'g': initializer tensor 'W' has data type 23 "
                              "(FLOAT4E2M1, added in ONNX 1.18), which kiln does not take");
  EXPECT_EQ(f4Model.status().hint(), hint);

  onnx::ModelProto i2 = addModel();
  i2.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(26);
  auto i2Path = writeModel("dtype_int2.onnx", i2);
  auto i2Model = importOnnxFile(i2Path.string());
  ASSERT_FALSE(i2Model);
  EXPECT_EQ(codeString(i2Model.status().code()), codeString(ErrorCode::UnknownDType));
  EXPECT_EQ(i2Model.status().message(),
            i2Path.string() + ": graph 'g': input 'X' has element type 26 (INT2, added after "
                              "ONNX 1.18), which kiln does not take");
  EXPECT_EQ(i2Model.status().hint(), hint);
}

// A valid model in a newer element type is one this build does not support, not a damaged file:
// unsupportedOnnxElementType names the type, and `kiln conformance` counts such a case as skipped
// with that reason (it was a failure). An unknown type number stays a damaged file.
TEST_F(OnnxBadInput, NewerDTypesAreUnsupportedTypesAndConformanceSkipsThem) {
  onnx::ModelProto i2 = addModel();
  i2.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(26);
  fs::create_directories(dir_ / "case_int2" / "test_data_set_0");
  auto i2Path = writeModel("case_int2/model.onnx", i2);
  auto i2Model = importOnnxFile(i2Path.string());
  ASSERT_FALSE(i2Model);
  EXPECT_EQ(unsupportedOnnxElementType(i2Model.status()), std::optional<std::string>("INT2"));

  onnx::ModelProto unknown = addModel();
  unknown.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      99);
  fs::create_directories(dir_ / "case_99" / "test_data_set_0");
  auto unknownModel = importOnnxFile(writeModel("case_99/model.onnx", unknown).string());
  ASSERT_FALSE(unknownModel);
  EXPECT_EQ(unsupportedOnnxElementType(unknownModel.status()), std::nullopt);
  EXPECT_EQ(unsupportedOnnxElementType(Status::ok()), std::nullopt);

  ConformanceOptions options;
  std::ostringstream out;
  EXPECT_EQ(runConformance({(dir_ / "case_int2").string()}, options, out), 0) << out.str();
  EXPECT_NE(out.str().find("/case_int2: unsupported element type INT2: K2004"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("0 passed, 0 failed, 1 skipped"), std::string::npos) << out.str();

  std::ostringstream damaged;
  EXPECT_NE(runConformance({(dir_ / "case_99").string()}, options, damaged), 0) << damaged.str();
  EXPECT_NE(damaged.str().find("0 passed, 1 failed, 0 skipped"), std::string::npos)
      << damaged.str();
}

TEST_F(OnnxBadInput, MissingDTypeOnInitializer) {
  onnx::ModelProto model = addModel();
  weight(model)->clear_data_type();
  auto path = writeModel("dtype_unset.onnx", model);
  expectError(path, ErrorCode::UnknownDType, {"tensor 'W'", "no data type"}, "data_type");
}

TEST_F(OnnxBadInput, UnknownDTypeOnGraphInput) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(99);
  auto path = writeModel("dtype_input.onnx", model);
  expectError(path, ErrorCode::UnknownDType, {"graph 'g'", "'X'", "unknown element type 99"},
              "TensorProto.DataType");
}

TEST_F(OnnxBadInput, UnknownDTypeOnConstantAttribute) {
  onnx::ModelProto model = addModel();
  auto* graph = model.mutable_graph();
  graph->clear_initializer();
  auto* node = addNode(graph, "make_w", "Constant", {}, {"W"});
  auto* attr = node->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  attr->mutable_t()->set_data_type(99);
  auto path = writeModel("dtype_attr.onnx", model);
  expectError(path, ErrorCode::UnknownDType,
              {"node 'make_w' (Constant) attribute 'value' tensor has unknown data type 99"},
              "TensorProto.DataType");
}

TEST_F(OnnxBadInput, NegativeDimOnInitializer) {
  onnx::ModelProto model = addModel();
  weight(model)->set_dims(0, -2);
  auto path = writeModel("neg_init.onnx", model);
  expectError(path, ErrorCode::BadDim, {"tensor 'W'", "negative dim -2 at axis 0"}, ">= 0");
}

TEST_F(OnnxBadInput, NegativeDimOnGraphInput) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-7);
  auto path = writeModel("neg_input.onnx", model);
  expectError(path, ErrorCode::BadDim, {"'X'", "dim -7 at axis 0"}, "dim_param");
}

TEST_F(OnnxBadInput, ElementCountOverflows) {
  onnx::ModelProto model = addModel();
  auto* w = weight(model);
  w->clear_dims();
  for (int i = 0; i < 3; ++i)
    w->add_dims(int64_t{1} << 32); // 2^96 elements
  auto path = writeModel("overflow_count.onnx", model);
  expectError(path, ErrorCode::SizeOverflow, {"tensor 'W'", "overflows"}, "dims");
}

TEST_F(OnnxBadInput, ByteSizeOverflows) {
  onnx::ModelProto model = addModel();
  auto* w = weight(model);
  w->clear_dims();
  w->add_dims(int64_t{1} << 62); // fits in the element count, not in bytes of f32
  auto path = writeModel("overflow_bytes.onnx", model);
  expectError(path, ErrorCode::SizeOverflow, {"tensor 'W'", "overflow the byte size"}, "dims");
}

// A graph input's static dims wrap (2^32 x 2^32): taken as a shape, kernels and writers would
// compute a wrapped size from it.
TEST_F(OnnxBadInput, GraphInputElementCountOverflows) {
  onnx::ModelProto model = addModel();
  auto* shape = model.mutable_graph()
                    ->mutable_input(0)
                    ->mutable_type()
                    ->mutable_tensor_type()
                    ->mutable_shape();
  shape->clear_dim();
  shape->add_dim()->set_dim_value(int64_t{1} << 32);
  shape->add_dim()->set_dim_param("N");
  shape->add_dim()->set_dim_value(int64_t{1} << 32);
  auto path = writeModel("overflow_input.onnx", model);
  expectError(path, ErrorCode::SizeOverflow,
              {"'X'", "element count of [4294967296,N,4294967296] overflows"}, "dims");
}

TEST_F(OnnxBadInput, RawDataSizeDisagrees) {
  onnx::ModelProto model = addModel();
  weight(model)->set_dims(0, 3); // 3 floats need 12 bytes; raw_data holds 8
  auto path = writeModel("raw_size.onnx", model);
  expectError(path, ErrorCode::DataSizeMismatch, {"tensor 'W'", "8 data bytes", "needs 12"},
              "elements x element size");
}

TEST_F(OnnxBadInput, FloatDataCountDisagrees) {
  onnx::ModelProto model = addModel();
  auto* w = weight(model);
  w->clear_raw_data();
  for (float v : {1.0f, 2.0f, 3.0f})
    w->add_float_data(v); // dims say 2
  auto path = writeModel("float_data.onnx", model);
  expectError(path, ErrorCode::DataSizeMismatch, {"tensor 'W'", "12 data bytes", "needs 8"},
              "elements x element size");
}

TEST_F(OnnxBadInput, StringDataCountDisagrees) {
  onnx::ModelProto model = addModel();
  auto* w = weight(model);
  w->clear_raw_data();
  w->set_data_type(onnx::TensorProto::STRING);
  w->add_string_data("only one");
  auto path = writeModel("string_data.onnx", model);
  expectError(path, ErrorCode::DataSizeMismatch, {"tensor 'W'", "1 strings", "needs 2"},
              "one string per element");
}

TEST_F(OnnxBadInput, TwoNodesProduceOneValue) {
  onnx::ModelProto model = addModel();
  addNode(model.mutable_graph(), "add_again", "Add", {"X", "W"}, {"Y"});
  auto path = writeModel("dup_output.onnx", model);
  expectError(path, ErrorCode::DuplicateName, {"graph 'g'", "node 'add_again'", "redefines 'Y'"},
              "defined once");
}

TEST_F(OnnxBadInput, NodeRedefinesInitializer) {
  onnx::ModelProto model = addModel();
  addNode(model.mutable_graph(), "shadow", "Relu", {"X"}, {"W"});
  auto path = writeModel("dup_init_output.onnx", model);
  expectError(path, ErrorCode::DuplicateName, {"node 'shadow'", "redefines 'W'"}, "defined once");
}

TEST_F(OnnxBadInput, DuplicateInitializer) {
  onnx::ModelProto model = addModel();
  addFloatInitializer(model.mutable_graph(), "W", {3.0f, 4.0f});
  auto path = writeModel("dup_init.onnx", model);
  expectError(path, ErrorCode::DuplicateName, {"initializer 'W' is defined twice"}, "defined once");
}

TEST_F(OnnxBadInput, DuplicateGraphInput) {
  onnx::ModelProto model = addModel();
  setTensorType(model.mutable_graph()->add_input(), "X", onnx::TensorProto::FLOAT, {2});
  auto path = writeModel("dup_input.onnx", model);
  expectError(path, ErrorCode::DuplicateName, {"input 'X' is declared twice"}, "defined once");
}

TEST_F(OnnxBadInput, InputNobodyProduces) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->mutable_node(0)->set_input(1, "ghost");
  auto path = writeModel("undefined.onnx", model);
  expectError(path, ErrorCode::UndefinedInput,
              {"node 'add' (Add)", "reads 'ghost'", "nothing produces"}, "graph input");
}

TEST_F(OnnxBadInput, OutputNobodyProduces) {
  onnx::ModelProto model = addModel();
  model.mutable_graph()->mutable_output(0)->set_name("Z");
  auto path = writeModel("undefined_output.onnx", model);
  expectError(path, ErrorCode::UndefinedInput, {"output 'Z' is never produced"}, "produce");
}

TEST_F(OnnxBadInput, Cycle) {
  onnx::ModelProto model = addModel();
  auto* graph = model.mutable_graph();
  graph->clear_node();
  addNode(graph, "first", "Add", {"X", "b"}, {"a"});
  addNode(graph, "second", "Relu", {"a"}, {"b"});
  addNode(graph, "out", "Identity", {"a"}, {"Y"});
  auto path = writeModel("cycle.onnx", model);
  expectError(path, ErrorCode::GraphCycle, {"graph 'g'", "node 'first'", "node 'second'"}, "cycle");
}

TEST_F(OnnxBadInput, SelfLoop) {
  onnx::ModelProto model = addModel();
  auto* graph = model.mutable_graph();
  graph->clear_node();
  addNode(graph, "loop", "Add", {"X", "Y"}, {"Y"});
  auto path = writeModel("self_loop.onnx", model);
  expectError(path, ErrorCode::GraphCycle, {"node 'loop'"}, "cycle");
}

// External data.

void makeExternal(onnx::TensorProto* tensor, const std::string& location,
                  std::initializer_list<std::pair<std::string, std::string>> extra = {}) {
  tensor->clear_raw_data();
  tensor->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = tensor->add_external_data();
  entry->set_key("location");
  entry->set_value(location);
  for (const auto& [key, value] : extra) {
    entry = tensor->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
}

const std::string kTwoFloats = [] {
  float values[] = {1.5f, -2.5f};
  return std::string(reinterpret_cast<const char*>(values), sizeof values);
}();

TEST_F(OnnxBadInput, ExternalDataAbsolutePath) {
  auto outside = writeBytes("outside.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), outside.string());
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataEscape, {"tensor 'W'", "is absolute"},
              "inside the model's folder");
}

TEST_F(OnnxBadInput, ExternalDataDotDotEscape) {
  writeBytes("outside.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "sub/../../outside.bin");
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataEscape,
              {"tensor 'W'", "'sub/../../outside.bin'", "leaves the model folder"},
              "inside the model's folder");
}

TEST_F(OnnxBadInput, ExternalDataSymlinkOutside) {
  auto outside = writeBytes("outside.bin", kTwoFloats);
  fs::create_directories(dir_ / "m");
  fs::create_symlink(outside, dir_ / "m" / "link.bin");
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "link.bin");
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataEscape,
              {"tensor 'W'", "'link.bin'", "resolves outside the model folder",
               "to '" + fs::canonical(outside).string() + "'"},
              "inside the model's folder");
}

TEST_F(OnnxBadInput, ExternalDataSymlinkedFolderOutside) {
  writeBytes("elsewhere/w.bin", kTwoFloats);
  fs::create_directories(dir_ / "m");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "m" / "weights");
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "weights/w.bin");
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataEscape, {"tensor 'W'", "resolves outside"},
              "inside the model's folder");
}

TEST_F(OnnxBadInput, ExternalDataMissingFile) {
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "absent.bin");
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::FileNotFound, {"tensor 'W'", "absent.bin"}, "path");
}

TEST_F(OnnxBadInput, ExternalDataNoLocation) {
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "");
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataEscape, {"tensor 'W'", "has no location"},
              "relative paths");
}

TEST_F(OnnxBadInput, ExternalDataOffsetPastEnd) {
  writeBytes("m/w.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin", {{"offset", "64"}});
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataRange,
              {"tensor 'W'", "offset 64 lies past the end of 'w.bin' (8 bytes)"}, "offset/length");
}

TEST_F(OnnxBadInput, ExternalDataLengthPastEnd) {
  writeBytes("m/w.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin", {{"offset", "4"}, {"length", "8"}});
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataRange,
              {"tensor 'W'", "offset 4 with length 8 runs past the end of 'w.bin' (8 bytes)"},
              "offset/length");
}

TEST_F(OnnxBadInput, ExternalDataHugeOffsetAndLength) {
  writeBytes("m/w.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  // offset + length wraps around 2^64: the range check must not be fooled by the wrap.
  makeExternal(weight(model), "w.bin",
               {{"offset", "4"}, {"length", std::to_string(std::numeric_limits<uint64_t>::max())}});
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataRange, {"tensor 'W'", "runs past the end"},
              "offset/length");
}

TEST_F(OnnxBadInput, ExternalDataNonNumericOffset) {
  writeBytes("m/w.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin", {{"offset", "12abc"}});
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::ExternalDataRange, {"tensor 'W'", "offset '12abc' is not a number"},
              "decimal");
}

TEST_F(OnnxBadInput, ExternalDataSizeDisagrees) {
  writeBytes("m/w.bin", kTwoFloats + kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin"); // no length: the rest of the file, 16 bytes for 8 needed
  auto path = writeModel("m/model.onnx", model);
  expectError(path, ErrorCode::DataSizeMismatch, {"tensor 'W'", "16 data bytes", "needs 8"},
              "elements x element size");
}

TEST_F(OnnxBadInput, ExternalDataFromMemoryIsRefused) {
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin");
  auto bytes = std::make_shared<std::string>(model.SerializeAsString());
  auto result = importOnnxBytes(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(),
                                bytes, "in-memory", "");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.status().code(), ErrorCode::ExternalDataEscape);
  EXPECT_NE(result.status().message().find("in-memory"), std::string::npos);
}

// The good case: weights next to the model are mapped, not copied.
TEST_F(OnnxBadInput, ExternalDataNextToModelAliasesFile) {
  writeBytes("m/w.bin", std::string(16, '\0') + kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin", {{"offset", "16"}, {"length", "8"}});
  auto path = writeModel("m/model.onnx", model);
  auto imported = importOnnxFile(path.string());
  ASSERT_TRUE(imported) << imported.status().toString();
  const Value* w = imported->graph->findLocalValue("W");
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->isInitializer());
  const Tensor& tensor = w->initializer();
  EXPECT_TRUE(tensor.aliasesFile());
  ASSERT_NE(tensor.buffer()->file(), nullptr);
  EXPECT_EQ(fs::path(tensor.buffer()->file()->path()).filename(), "w.bin");
  EXPECT_TRUE(tensor.buffer()->file()->contains(tensor.data()));
  EXPECT_EQ(tensor.data(), tensor.buffer()->file()->data() + 16);
  EXPECT_EQ(tensor.copyValues<float>(), (std::vector<float>{1.5f, -2.5f}));
}

TEST_F(OnnxBadInput, ExternalDataBaseDirWithTrailingSlash) {
  // A base folder spelled with a trailing slash still contains "dir/w.bin".
  writeBytes("m/w.bin", kTwoFloats);
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "w.bin");
  auto bytes = std::make_shared<std::string>(model.SerializeAsString());
  auto imported = importOnnxBytes(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(),
                                  bytes, "in-memory", (dir_ / "m").string() + "/");
  ASSERT_TRUE(imported) << imported.status().toString();
  EXPECT_TRUE(imported->graph->findLocalValue("W")->initializer().aliasesFile());
}

TEST_F(OnnxBadInput, ExternalDataSymlinkInsideFolderIsAllowed) {
  writeBytes("m/data/w.bin", kTwoFloats);
  fs::create_symlink("data/w.bin", dir_ / "m" / "link.bin");
  onnx::ModelProto model = addModel();
  makeExternal(weight(model), "link.bin");
  auto path = writeModel("m/model.onnx", model);
  auto imported = importOnnxFile(path.string());
  ASSERT_TRUE(imported) << imported.status().toString();
  EXPECT_EQ(imported->graph->findLocalValue("W")->initializer().copyValues<float>(),
            (std::vector<float>{1.5f, -2.5f}));
}

} // namespace
