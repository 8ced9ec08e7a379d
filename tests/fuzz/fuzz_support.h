// Shared pieces of the libFuzzer harnesses: quiet logging, a private empty folder for readers that
// look for side files, a small fixed model to check parsed configs against, and a bounded
// executor pass.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <onnx/defs/parser.h>
#include <spdlog/spdlog.h>

#include "kiln/frontend/onnx.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::fuzz {

// Warnings about carried-through fields would flood the fuzzer's output.
inline void quietLogs() {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
}

// A folder only this process uses, created empty once: readers that look for side files beside
// the model (.om FileConstant weights) look here, so the fuzzer cannot make them open files of the
// machine through a relative location. Removed when the process exits normally.
inline const std::string& privateDir() {
  // Never freed: the exit handler that removes the folder runs after static destructors.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) std::abort();
    auto* made = new std::string(pattern);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(privateDir(), ignored);
    });
    return made;
  }();
  return *dir;
}

// Writes `bytes` to `name` in the private folder and returns the path (for readers that take a
// path: `kiln inspect`, atc --mode=1/6).
inline std::string writePrivateFile(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = privateDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  return path;
}

// The model parsed configs are checked against: one NCHW image input, one named 2-D input, a
// few named nodes (Conv, Relu, Softmax, MatMul), static shapes. Each call imports a fresh copy
// (harnesses that edit it get their own).
inline Model fixtureModel() {
  static const onnx::ModelProto proto = [] {
    onnx::ModelProto parsed;
    auto status = onnx::OnnxParser::Parse(parsed, R"(
      <ir_version: 8, opset_import: ["" : 17]>
      fixture (float[1,3,8,8] images, float[1,4] tokens) => (float[1,2,8,8] probs, float[1,4] mixed)
          <float[2,3,1,1] w = {1,2,3,4,5,6}, float[4,4] m = {1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1}> {
        conv = Conv (images, w)
        act = Relu (conv)
        probs = Softmax <axis: int = 1> (act)
        mixed = MatMul (tokens, m)
      }
    )");
    if (!status.IsOK()) std::abort();
    const char* names[] = {"conv1", "relu1", "softmax1", "matmul1"};
    for (int i = 0; i < parsed.graph().node_size(); ++i)
      parsed.mutable_graph()->mutable_node(i)->set_name(names[i]);
    return parsed;
  }();
  auto imported = importOnnxProto(proto, "fixture.onnx", "");
  if (!imported) std::abort();
  return imported.take();
}

// Reads every initializer's bytes, so a span pointing outside the input is caught by ASan.
inline void touchInitializers(const Model& model) {
  uint8_t sum = 0;
  for (const Value* init : model.graph->initializers()) {
    const Tensor& tensor = init->initializer();
    for (size_t i = 0; i < tensor.byteSize(); ++i)
      sum ^= tensor.data()[i];
  }
  volatile uint8_t sink = sum;
  (void)sink;
}

// Runs `model` once on zero-filled inputs when it is small: every input a numeric tensor with a
// static shape of at most `maxElements` elements, and no node whose run time the model controls
// (Loop, Scan). Errors are fine; crashes, sanitizer reports and hangs are not.
inline void runIfSmall(const Model& model, uint64_t maxElements = 4096) {
  const Graph& graph = *model.graph;
  if (graph.nodes().size() > 64) return;
  for (const auto& node : graph.nodes())
    if (node->opType() == "Loop" || node->opType() == "Scan" || !node->subgraphs().empty()) return;
  std::map<std::string, rt::RtValue> feeds;
  for (const Value* in : graph.inputs()) {
    if (in->isInitializer()) continue;
    if (in->type().kind != TypeKind::Tensor || !in->shape().isStatic()) return;
    if (in->dtype() == DType::String || in->dtype() == DType::Undefined) return;
    uint64_t count = 1;
    for (int64_t d : in->shape().staticDims()) {
      if (d < 0 || (d > 0 && count > maxElements / static_cast<uint64_t>(d))) return;
      count *= static_cast<uint64_t>(d);
    }
    if (count > maxElements) return;
    rt::OutTensor zeros(in->dtype(), in->shape().staticDims(), rt::Init::Zeroed);
    feeds[in->name()] = rt::RtValue::ofTensor(std::move(zeros).finish());
  }
  rt::Executor executor(model);
  if (!executor.checkSupported().isOk()) return;
  auto ran = executor.run(feeds);
  (void)ran;
}

} // namespace kiln::fuzz
