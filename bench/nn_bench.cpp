// Times the executor's heavy NN kernels (Conv, MatMul, Gemm, LSTM) on typical layer sizes:
// `nn_bench [--threads N] [--iters N] [--filter SUBSTRING]`, one line per case.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"

using namespace kiln;

namespace {

struct Case {
  std::string name;
  std::string op;
  std::vector<std::vector<int64_t>> inputs; // shapes of the float inputs, in order
  std::vector<std::pair<std::string, Attribute>> attrs;
  double flops; // multiply-adds count twice
  size_t outputs = 1;
};

Tensor randomTensor(const std::vector<int64_t>& dims, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = dist(gen);
  return rt::makeTensor<float>(DType::Float32, dims, v);
}

double convFlops(int64_t n, int64_t c, int64_t m, int64_t oh, int64_t ow, int64_t k,
                 int64_t group) {
  return 2.0 * static_cast<double>(n * m * oh * ow) * static_cast<double>(c / group * k * k);
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  cs.push_back({"conv3x3 1x64x56x56 -> 64",
                "Conv",
                {{1, 64, 56, 56}, {64, 64, 3, 3}, {64}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}},
                convFlops(1, 64, 64, 56, 56, 3, 1)});
  cs.push_back({"conv1x1 1x256x28x28 -> 128",
                "Conv",
                {{1, 256, 28, 28}, {128, 256, 1, 1}, {128}},
                {},
                convFlops(1, 256, 128, 28, 28, 1, 1)});
  cs.push_back({"conv7x7/2 1x3x224x224 -> 64",
                "Conv",
                {{1, 3, 224, 224}, {64, 3, 7, 7}, {64}},
                {{"pads", Attribute::ofInts({3, 3, 3, 3})}, {"strides", Attribute::ofInts({2, 2})}},
                convFlops(1, 3, 64, 112, 112, 7, 1)});
  cs.push_back({"depthwise3x3 1x128x56x56",
                "Conv",
                {{1, 128, 56, 56}, {128, 1, 3, 3}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}, {"group", Attribute::ofInt(128)}},
                convFlops(1, 128, 128, 56, 56, 3, 128)});
  cs.push_back({"convtranspose4x4/2 1x64x28x28 -> 32",
                "ConvTranspose",
                {{1, 64, 28, 28}, {64, 32, 4, 4}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}, {"strides", Attribute::ofInts({2, 2})}},
                2.0 * 64 * 28 * 28 * 32 * 16});
  cs.push_back({"matmul 8x128x512 @ 512x512",
                "MatMul",
                {{8, 128, 512}, {512, 512}},
                {},
                2.0 * 8 * 128 * 512 * 512});
  cs.push_back({"matmul batched 12x128x64 @ 12x64x128",
                "MatMul",
                {{12, 128, 64}, {12, 64, 128}},
                {},
                2.0 * 12 * 128 * 64 * 128});
  cs.push_back({"gemm 64x1024 @ 1024x1000^T + bias",
                "Gemm",
                {{64, 1024}, {1000, 1024}, {1000}},
                {{"transB", Attribute::ofInt(1)}},
                2.0 * 64 * 1024 * 1000});
  cs.push_back({"lstm seq32 batch8 in128 hidden256",
                "LSTM",
                {{32, 8, 128}, {1, 1024, 128}, {1, 1024, 256}, {1, 2048}},
                {{"hidden_size", Attribute::ofInt(256)}},
                2.0 * 32 * 8 * 1024 * (128 + 256),
                3});
  // 3x3 layers of PP-OCR det whose unfolded rows are long (few output rows per GEMM).
  cs.push_back({"conv3x3 1x96x160x160 -> 24",
                "Conv",
                {{1, 96, 160, 160}, {24, 96, 3, 3}, {24}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}},
                convFlops(1, 96, 24, 160, 160, 3, 1)});
  cs.push_back({"conv3x3 1x256x40x40 -> 96",
                "Conv",
                {{1, 256, 40, 40}, {96, 256, 3, 3}, {96}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}},
                convFlops(1, 256, 96, 40, 40, 3, 1)});
  // Elementwise and activation kernels on feature-map sizes of the OCR models ("GFLOP/s" here is
  // giga-elements per second).
  const std::vector<int64_t> fm = {1, 64, 24, 160}, big = {1, 32, 160, 160};
  const double fmN = 64.0 * 24 * 160, bigN = 32.0 * 160 * 160;
  cs.push_back({"add same 1x64x24x160", "Add", {fm, fm}, {}, fmN});
  cs.push_back({"mul scalar 1x64x24x160", "Mul", {fm, {}}, {}, fmN});
  cs.push_back({"div scalar 1x32x160x160", "Div", {big, {}}, {}, bigN});
  cs.push_back({"add per-channel 1x32x160x160", "Add", {big, {1, 32, 1, 1}}, {}, bigN});
  cs.push_back({"clip 1x64x24x160", "Clip", {fm, {}, {}}, {}, fmN});
  cs.push_back({"relu 1x32x160x160", "Relu", {big}, {}, bigN});
  cs.push_back({"hardswish 1x32x160x160", "HardSwish", {big}, {}, bigN});
  cs.push_back({"depthwise3x3 1x32x160x160", "Conv", {big, {32, 1, 3, 3}, {32}},
                {{"pads", Attribute::ofInts({1, 1, 1, 1})}, {"group", Attribute::ofInt(32)}},
                convFlops(1, 32, 32, 160, 160, 3, 32)});
  return cs;
}

double runCase(const Case& c, int threads, int iters) {
  std::mt19937 gen(7);
  Model model;
  model.opsets = {{"", 17}};
  model.graph = std::make_shared<Graph>("bench");
  Graph& g = *model.graph;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    ins.push_back(g.addInitializer("in" + std::to_string(i), randomTensor(c.inputs[i], gen)));
  std::vector<std::string> outs;
  for (size_t i = 0; i < c.outputs; ++i)
    outs.push_back("out" + std::to_string(i));
  Node* node = g.appendNode(c.op, ins, outs);
  for (const auto& [name, value] : c.attrs)
    node->setAttribute(name, value);
  for (size_t i = 0; i < c.outputs; ++i)
    g.addOutput(node->output(i));
  rt::ExecutorOptions options;
  options.threads = threads;
  rt::Executor exec(model, options);
  auto warm = exec.run({});
  if (!warm) {
    std::fprintf(stderr, "%s: %s\n", c.name.c_str(), warm.status().toString().c_str());
    return -1;
  }
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = exec.run({});
    auto end = std::chrono::steady_clock::now();
    if (!r) return -1;
    best = std::min(best, std::chrono::duration<double, std::milli>(end - start).count());
  }
  return best;
}

} // namespace

int main(int argc, char** argv) {
  int threads = 1, iters = 10;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(next());
    else if (!std::strcmp(argv[i], "--filter"))
      filter = next();
    else {
      std::fprintf(stderr, "usage: nn_bench [--threads N] [--iters N] [--filter SUBSTRING]\n");
      return 2;
    }
  }
  std::printf("threads=%d iters=%d (best of)\n", threads, iters);
  int failures = 0;
  for (const Case& c : cases()) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    double ms = runCase(c, threads, iters);
    if (ms < 0) {
      ++failures;
      continue;
    }
    std::printf("%-40s %9.3f ms %8.2f GFLOP/s\n", c.name.c_str(), ms, c.flops / (ms * 1e6));
  }
  return failures == 0 ? 0 : 1;
}
