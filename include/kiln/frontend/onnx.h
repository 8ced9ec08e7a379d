// ONNX frontend: ONNX ModelProto (file or bytes) → IR, and IR → ONNX ModelProto.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/mapped_file.h"
#include "kiln/support/status.h"

namespace onnx {
class ModelProto;
class NodeProto;
class TensorProto;
class TypeProto;
} // namespace onnx

namespace kiln {

struct OnnxImportOptions {
  bool verify = true; // run the IR verifier on the result
};

// Maps the file and imports it; initializer weights alias the mapping (no copy).
// External data is resolved relative to the model's folder and may not leave it.
Expected<Model> importOnnxFile(const std::string& path, const OnnxImportOptions& options = {});

// Imports serialized bytes kept alive by `owner`. `displayName` names the source in errors;
// `baseDir` resolves external data ("" forbids external data).
Expected<Model> importOnnxBytes(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                                const std::string& displayName, const std::string& baseDir,
                                const OnnxImportOptions& options = {});

// Imports an already-parsed proto (weights are copied out of it).
Expected<Model> importOnnxProto(const onnx::ModelProto& proto, const std::string& displayName,
                                const std::string& baseDir, const OnnxImportOptions& options = {});

// Parses ONNX textual syntax (onnx::OnnxParser) — used for samples and golden-test inputs.
Expected<Model> importOnnxTextFile(const std::string& path, const OnnxImportOptions& options = {});

// One TensorProto → Tensor with the importer's checks (dtype, dims, data size, external data under
// baseDir). `label` names the tensor in errors.
Expected<Tensor> tensorFromOnnx(const onnx::TensorProto& proto, const std::string& baseDir,
                                const std::string& label = "");
// TypeProto → ValueType with the importer's checks; `label` names the value in errors.
Expected<ValueType> valueTypeFromOnnx(const onnx::TypeProto& proto, const std::string& label);
// Tensor → TensorProto (raw_data, or string_data for strings).
void tensorToOnnx(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto);

// Builds ONNX nodes into `graph` before `anchor` (nullptr: at the end), in the order given, which
// must be topological. Input names resolve in `graph` or an enclosing graph, output names must be
// new; attributes and subgraphs are converted and checked as on import (attribute kinds against
// `model`'s opsets). Each node gets `locations` instead of its own name. Used to splice ONNX
// function bodies into a graph (expand-functions).
Expected<std::vector<Node*>> importOnnxNodes(Graph& graph, Node* anchor,
                                             const std::vector<const onnx::NodeProto*>& nodes,
                                             const Model& model,
                                             const std::vector<Location>& locations);

// One node → NodeProto (inputs and outputs by value name, "" for omitted ones).
void nodeToOnnx(const Node& node, onnx::NodeProto& proto);
// ValueType → TypeProto (left empty for an unknown type).
void valueTypeToOnnx(const ValueType& type, onnx::TypeProto& proto);

// IR → ModelProto; tensors are written inline as raw_data.
struct OnnxExportOptions {
  // For analysis (shape inference): main-graph weights above this many bytes are exported as typed
  // graph inputs instead of copying their bytes. SIZE_MAX (default) exports everything.
  size_t weightsAsInputsAbove = SIZE_MAX;
  // For streaming writers: leave the main graph's initializers out (the writer appends them).
  bool omitMainInitializers = false;
};
Status exportOnnx(const Model& model, onnx::ModelProto& proto,
                  const OnnxExportOptions& options = {});
// Serializes to `path` atomically.
Status writeOnnxFile(const Model& model, const std::string& path);

} // namespace kiln
