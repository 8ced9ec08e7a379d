// Measures what importing a large ONNX model costs in peak RSS beyond a tiny one, and fails when
// it exceeds a fraction of the file size (weights must stay in the mapping, not be copied).
//
// Usage: import_memory_check KILN WORKDIR [--size-mb N] [--max-fraction F] [--runs N] [--keep]
//                            [--also-convert]
// --also-convert also reports (without checking) the peak RSS of `kiln convert` on the big model,
// which reads every weight page and serializes a copy.
//
// The big model is streamed to disk so the generator needs about a megabyte whatever its size:
// a small serialized ModelProto is written first, then a second occurrence of its `graph` field
// (ModelProto field 7) holding only the initializer, whose raw_data is written in chunks.
// Protobuf merges repeated occurrences of a message field, so the file is one valid model.
// Each model is then imported by `kiln inspect` in a child process; wait4() returns that child's
// own peak RSS (ru_maxrss).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kVarint = 0;

void putVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void putTag(std::string& out, uint32_t field, uint32_t wireType) {
  putVarint(out, (uint64_t{field} << 3) | wireType);
}

// Y = X + W over `count` floats; W is an initializer only when `withWeights` (the tiny model).
onnx::ModelProto addModel(int64_t count, bool withWeights) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln-import-memory-check");
  model.add_opset_import()->set_version(17);
  auto* graph = model.mutable_graph();
  graph->set_name("memory");
  for (const char* name : {"X", "Y"}) {
    auto* info = std::string(name) == "X" ? graph->add_input() : graph->add_output();
    info->set_name(name);
    auto* tensorType = info->mutable_type()->mutable_tensor_type();
    tensorType->set_elem_type(onnx::TensorProto::FLOAT);
    tensorType->mutable_shape()->add_dim()->set_dim_value(count);
  }
  auto* node = graph->add_node();
  node->set_name("add");
  node->set_op_type("Add");
  node->add_input("X");
  node->add_input("W");
  node->add_output("Y");
  if (withWeights) {
    auto* init = graph->add_initializer();
    init->set_name("W");
    init->set_data_type(onnx::TensorProto::FLOAT);
    init->add_dims(count);
    std::vector<float> values(static_cast<size_t>(count), 0.25f);
    init->set_raw_data(values.data(), values.size() * sizeof(float));
  }
  return model;
}

bool writeTinyModel(const fs::path& path) {
  std::ofstream out(path, std::ios::binary);
  return addModel(2, true).SerializeToOstream(&out) && out.good();
}

// Streams a model whose single initializer holds `weightBytes` bytes of raw_data.
bool writeBigModel(const fs::path& path, uint64_t weightBytes) {
  const uint64_t count = weightBytes / sizeof(float);
  std::string head = addModel(static_cast<int64_t>(count), false).SerializeAsString();

  // TensorProto fields before raw_data: dims (1), data_type (2), name (8), then raw_data (9).
  std::string tensorHead;
  putTag(tensorHead, 1, kVarint);
  putVarint(tensorHead, count);
  putTag(tensorHead, 2, kVarint);
  putVarint(tensorHead, onnx::TensorProto::FLOAT);
  putTag(tensorHead, 8, kLengthDelimited);
  putVarint(tensorHead, 1);
  tensorHead += "W";
  putTag(tensorHead, 9, kLengthDelimited);
  putVarint(tensorHead, count * sizeof(float));
  const uint64_t tensorLength = tensorHead.size() + count * sizeof(float);

  std::string graphHead; // GraphProto.initializer (5) wrapping the tensor
  putTag(graphHead, 5, kLengthDelimited);
  putVarint(graphHead, tensorLength);
  const uint64_t graphLength = graphHead.size() + tensorLength;

  std::string modelHead = head; // then ModelProto.graph (7) again, merged into the first
  putTag(modelHead, 7, kLengthDelimited);
  putVarint(modelHead, graphLength);
  modelHead += graphHead;
  modelHead += tensorHead;

  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) return false;
  bool ok = std::fwrite(modelHead.data(), 1, modelHead.size(), out) == modelHead.size();
  std::vector<float> chunk(1 << 18); // 1 MiB of floats
  for (size_t i = 0; i < chunk.size(); ++i)
    chunk[i] = static_cast<float>(i % 4096) / 4096.0f;
  for (uint64_t left = count; ok && left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    ok = std::fwrite(chunk.data(), sizeof(float), n, out) == n;
    left -= n;
  }
  return std::fclose(out) == 0 && ok;
}

struct RunResult {
  bool ok = false;
  long maxRssKiB = 0;
  std::string output;
};

// Runs kiln with `args`, stdout captured in `outputPath`; returns the child's own peak RSS.
RunResult runKiln(const std::string& kiln, const std::vector<std::string>& args,
                  const fs::path& outputPath) {
  RunResult result;
  pid_t pid = ::fork();
  if (pid < 0) return result;
  if (pid == 0) {
    int fd = ::open(outputPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
    }
    std::vector<char*> argvOut{const_cast<char*>(kiln.c_str())};
    for (const auto& arg : args)
      argvOut.push_back(const_cast<char*>(arg.c_str()));
    argvOut.push_back(nullptr);
    ::execv(kiln.c_str(), argvOut.data());
    std::perror("exec kiln");
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (::wait4(pid, &status, 0, &usage) != pid) return result;
  result.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  result.maxRssKiB = usage.ru_maxrss; // KiB on Linux
  std::ifstream in(outputPath);
  result.output.assign(std::istreambuf_iterator<char>(in), {});
  return result;
}

// Peak RSS over `runs` runs: the largest, so the check errs against the importer.
bool measure(const std::string& kiln, const std::vector<std::string>& args,
             const fs::path& outputPath, int runs, long& peakKiB, std::string& output) {
  peakKiB = 0;
  for (int i = 0; i < runs; ++i) {
    RunResult r = runKiln(kiln, args, outputPath);
    if (!r.ok) {
      std::fprintf(stderr, "kiln %s %s failed:\n%s\n", args[0].c_str(), args[1].c_str(),
                   r.output.c_str());
      return false;
    }
    peakKiB = std::max(peakKiB, r.maxRssKiB);
    output = r.output;
  }
  return true;
}

int usage() {
  std::fprintf(stderr, "usage: import_memory_check KILN WORKDIR [--size-mb N] [--max-fraction F] "
                       "[--runs N] [--keep] [--also-convert]\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string kiln = argv[1];
  fs::path workRoot = argv[2];
  uint64_t sizeMiB = 100;
  double maxFraction = 0.10;
  int runs = 3;
  bool keep = false;
  bool alsoConvert = false;
  for (int i = 3; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--size-mb" && i + 1 < argc)
      sizeMiB = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--max-fraction" && i + 1 < argc)
      maxFraction = std::strtod(argv[++i], nullptr);
    else if (arg == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--keep")
      keep = true;
    else if (arg == "--also-convert")
      alsoConvert = true;
    else
      return usage();
  }

  fs::create_directories(workRoot);
  std::string pattern = (workRoot / "import-memory-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path work = pattern;
  fs::path tiny = work / "tiny.onnx";
  fs::path big = work / "big.onnx";
  int rc = 1;
  do {
    if (!writeTinyModel(tiny) || !writeBigModel(big, sizeMiB << 20)) {
      std::fprintf(stderr, "cannot write the test models in %s\n", work.c_str());
      break;
    }
    uint64_t fileBytes = fs::file_size(big);
    long tinyKiB = 0, bigKiB = 0;
    std::string tinyOut, bigOut;
    if (!measure(kiln, {"inspect", tiny.string()}, work / "tiny.txt", runs, tinyKiB, tinyOut) ||
        !measure(kiln, {"inspect", big.string()}, work / "big.txt", runs, bigKiB, bigOut))
      break;
    // The big import must really have seen the weights, or the comparison means nothing.
    std::string expected =
        std::to_string((sizeMiB << 20) / sizeof(float) * sizeof(float)) + " bytes";
    if (bigOut.find(expected) == std::string::npos) {
      std::fprintf(stderr, "kiln inspect did not report %s of parameters:\n%s\n", expected.c_str(),
                   bigOut.c_str());
      break;
    }
    long extraKiB = bigKiB - tinyKiB;
    double extraFraction = static_cast<double>(extraKiB) * 1024.0 / static_cast<double>(fileBytes);
    std::printf("model file:           %.1f MiB (%llu bytes)\n", fileBytes / 1048576.0,
                static_cast<unsigned long long>(fileBytes));
    std::printf("peak RSS, tiny model: %.1f MiB\n", tinyKiB / 1024.0);
    std::printf("peak RSS, big model:  %.1f MiB\n", bigKiB / 1024.0);
    std::printf("added by the big one: %.1f MiB = %.2f%% of the file (limit %.0f%%)\n",
                extraKiB / 1024.0, extraFraction * 100.0, maxFraction * 100.0);
    if (alsoConvert) {
      long convertKiB = 0;
      std::string convertOut;
      fs::path copy = work / "copy.onnx";
      if (!measure(kiln, {"convert", big.string(), "--to", "onnx", "-o", copy.string()},
                   work / "convert.txt", 1, convertKiB, convertOut))
        break;
      std::printf("peak RSS, kiln convert of the big model (not checked): %.1f MiB\n",
                  convertKiB / 1024.0);
      fs::remove(copy);
    }
    if (extraFraction > maxFraction) {
      std::printf("FAIL: importing copies weights or buffers the file\n");
      break;
    }
    std::printf("PASS\n");
    rc = 0;
  } while (false);
  if (!keep) {
    std::error_code ec;
    fs::remove_all(work, ec);
  } else {
    std::printf("kept %s\n", work.c_str());
  }
  return rc;
}
