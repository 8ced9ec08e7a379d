// Peak RSS and time of converting a large external-data model, checked against the model's size.
//
//   convert_memory_check generate DIR --size-mb N [--width K]
//       writes DIR/model.onnx (graph only) and DIR/model.onnx.data (the weights), a chain of
//       MatMuls Y = X·W1·W2·… with W_i: f32[K, K], enough of them to reach N MiB. The weights are
//       streamed to disk a MiB at a time, so a 6 GB model needs about a MiB of generator memory.
//   convert_memory_check measure MODEL_BYTES [--max-ratio R] -- COMMAND ARGS...
//       runs COMMAND in a child (stdout and stderr to /dev/null) and prints one line
//       "peak_rss_mib=… ratio=… wall_s=… cpu_s=…", where ratio = peak RSS / MODEL_BYTES (wait4's
//       ru_maxrss: the child's own peak). Fails when the command fails or ratio > R.
//   convert_memory_check check TOOLS_DIR WORKDIR [--size-mb N] [--max-ratio R] [--steps LIST]
//       the ctests: generates an N MiB model and checks converter_lite FP32, --fp16=on, 8-bit
//       weight quant and atc (default precision: fp16 weights in WEIGHTS_DATA) against R. LIST
//       picks some of them (comma-separated: fp32,fp16,wq8,atc; all by default).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace fs = std::filesystem;

namespace {

// Deterministic values in [-1, 1) with some spread per row, so quantization has real work.
float weightValue(uint64_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 23) - 1.0) *
         0.05f;
}

bool generate(const fs::path& dir, uint64_t sizeMiB, int64_t width) {
  fs::create_directories(dir);
  const uint64_t layerBytes = static_cast<uint64_t>(width) * static_cast<uint64_t>(width) * 4;
  const uint64_t layers = std::max<uint64_t>(1, ((sizeMiB << 20) + layerBytes - 1) / layerBytes);
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln-convert-memory-check");
  model.add_opset_import()->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("chain");
  for (const char* name : {"X", "Y"}) {
    auto* info = std::string(name) == "X" ? graph->add_input() : graph->add_output();
    info->set_name(name);
    auto* type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto::FLOAT);
    type->mutable_shape()->add_dim()->set_dim_value(1);
    type->mutable_shape()->add_dim()->set_dim_value(width);
  }
  std::string previous = "X";
  for (uint64_t l = 0; l < layers; ++l) {
    std::string w = "W" + std::to_string(l);
    std::string out = l + 1 == layers ? "Y" : "H" + std::to_string(l);
    auto* node = graph->add_node();
    node->set_name("matmul" + std::to_string(l));
    node->set_op_type("MatMul");
    node->add_input(previous);
    node->add_input(w);
    node->add_output(out);
    auto* init = graph->add_initializer();
    init->set_name(w);
    init->set_data_type(onnx::TensorProto::FLOAT);
    init->add_dims(width);
    init->add_dims(width);
    init->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* entry = init->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", "model.onnx.data");
    add("offset", std::to_string(l * layerBytes));
    add("length", std::to_string(layerBytes));
    previous = out;
  }
  {
    std::ofstream out(dir / "model.onnx", std::ios::binary);
    if (!model.SerializeToOstream(&out) || !out.good()) return false;
  }
  std::FILE* data = std::fopen((dir / "model.onnx.data").c_str(), "wb");
  if (!data) return false;
  std::vector<float> chunk(1 << 18); // 1 MiB
  bool ok = true;
  const uint64_t total = layers * layerBytes / 4;
  for (uint64_t done = 0; ok && done < total;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(total - done, chunk.size()));
    for (size_t i = 0; i < n; ++i)
      chunk[i] = weightValue(done + i);
    ok = std::fwrite(chunk.data(), 4, n, data) == n;
    done += n;
  }
  return std::fclose(data) == 0 && ok;
}

struct Run {
  bool ok = false;
  long maxRssKiB = 0;
  double wallSeconds = 0, cpuSeconds = 0;
};

Run run(const std::vector<std::string>& command) {
  Run result;
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) return result;
  if (pid == 0) {
    int fd = ::open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    std::vector<char*> argv;
    for (const auto& arg : command)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid, &status, 0, &usage) != pid) return result;
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.cpuSeconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                      static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  result.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  result.maxRssKiB = usage.ru_maxrss;
  return result;
}

// Runs and prints one line; false when the command failed or went over `maxRatio`.
bool measure(const std::string& label, uint64_t modelBytes, double maxRatio,
             const std::vector<std::string>& command) {
  Run r = run(command);
  double ratio = static_cast<double>(r.maxRssKiB) * 1024.0 / static_cast<double>(modelBytes);
  std::printf("%s peak_rss_mib=%.1f ratio=%.3f wall_s=%.2f cpu_s=%.2f%s\n", label.c_str(),
              r.maxRssKiB / 1024.0, ratio, r.wallSeconds, r.cpuSeconds,
              !r.ok ? " FAILED" : ratio > maxRatio ? " OVER-LIMIT" : "");
  std::fflush(stdout);
  return r.ok && ratio <= maxRatio;
}

int usage() {
  std::fprintf(stderr,
               "usage: convert_memory_check generate DIR --size-mb N [--width K]\n"
               "       convert_memory_check measure MODEL_BYTES [--max-ratio R] [--label L] -- CMD...\n"
               "       convert_memory_check check TOOLS_DIR WORKDIR [--size-mb N] [--max-ratio R]"
               " [--steps fp32,fp16,wq8,atc]\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string mode = argv[1];
  uint64_t sizeMiB = 200;
  int64_t width = 0;
  double maxRatio = 1e9;
  std::string label = "run";
  std::string steps = "fp32,fp16,wq8,atc";
  std::vector<std::string> positional, command;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i)
        command.push_back(argv[i]);
    } else if (arg == "--size-mb" && i + 1 < argc) {
      sizeMiB = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--width" && i + 1 < argc) {
      width = std::strtoll(argv[++i], nullptr, 10);
    } else if (arg == "--max-ratio" && i + 1 < argc) {
      maxRatio = std::strtod(argv[++i], nullptr);
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = argv[++i];
    } else if (arg == "--label" && i + 1 < argc) {
      label = argv[++i];
    } else {
      positional.push_back(arg);
    }
  }
  // Layers of 64 MiB for big models, 4 MiB below a GiB.
  if (width <= 0) width = sizeMiB >= 1024 ? 4096 : 1024;
  if (mode == "generate" && positional.size() == 1)
    return generate(positional[0], sizeMiB, width) ? 0 : 1;
  if (mode == "measure" && positional.size() == 1 && !command.empty())
    return measure(label, std::strtoull(positional[0].c_str(), nullptr, 10), maxRatio, command) ? 0
                                                                                                : 1;
  if (mode != "check" || positional.size() != 2) return usage();
  fs::path tools = positional[0], work = positional[1];
  fs::path dir = work / "model";
  if (!generate(dir, sizeMiB, width)) {
    std::fprintf(stderr, "cannot write the model in %s\n", dir.c_str());
    return 1;
  }
  const uint64_t modelBytes = fs::file_size(dir / "model.onnx") + fs::file_size(dir / "model.onnx.data");
  {
    std::ofstream cfg(work / "wq8.cfg");
    cfg << "[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n";
  }
  const std::string converter = (tools / "converter_lite").string();
  const std::string model = "--modelFile=" + (dir / "model.onnx").string();
  std::printf("model: %.1f MiB, limit %.2f x\n", modelBytes / 1048576.0, maxRatio);
  bool ok = true;
  auto wanted = [&](const std::string& step) {
    return ("," + steps + ",").find("," + step + ",") != std::string::npos;
  };
  if (wanted("fp32"))
    ok &= measure("converter_lite fp32", modelBytes, maxRatio,
                  {converter, "--fmk=ONNX", model, "--outputFile=" + (work / "fp32").string()});
  if (wanted("fp16"))
    ok &= measure("converter_lite fp16", modelBytes, maxRatio,
                  {converter, "--fmk=ONNX", model, "--outputFile=" + (work / "fp16").string(),
                   "--fp16=on"});
  if (wanted("wq8"))
    ok &= measure("converter_lite wq8", modelBytes, maxRatio,
                  {converter, "--fmk=ONNX", model, "--outputFile=" + (work / "wq8").string(),
                   "--configFile=" + (work / "wq8.cfg").string()});
  if (wanted("atc"))
    ok &= measure("atc", modelBytes, maxRatio,
                  {(tools / "atc").string(), "--framework=5",
                   "--model=" + (dir / "model.onnx").string(), "--output=" + (work / "om").string(),
                   "--soc_version=Ascend310P3"});
  std::error_code ec;
  fs::remove_all(work, ec);
  std::printf(ok ? "PASS\n" : "FAIL\n");
  return ok ? 0 : 1;
}
