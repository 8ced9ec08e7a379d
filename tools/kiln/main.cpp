// `kiln` command line: thin front-end over the kiln library (flags → one library call).
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>

#include "kiln/conformance.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/value_io.h"
#include "kiln/inspect.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/executor.h"

namespace {

int report(const kiln::Status& status) {
  std::fprintf(stderr, "kiln: error %s\n", status.toString().c_str());
  return 1;
}

std::string fileNameFor(const std::string& valueName) {
  std::string out;
  for (char c : valueName)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out + ".pb";
}

int runModel(const std::string& path, const std::vector<std::string>& inputs,
             const std::string& outputDir, bool captureAll, int threads) {
  auto model = kiln::loadModel(path);
  if (!model) return report(model.status());
  std::map<std::string, kiln::rt::RtValue> feeds;
  for (const std::string& spec : inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return report(kiln::Status(kiln::ErrorCode::BadFlag,
                                 fmt::format("--input '{}' is not NAME=FILE.pb", spec),
                                 "write --input x=input_0.pb"));
    std::string name = spec.substr(0, eq);
    const kiln::Value* target = nullptr;
    for (const kiln::Value* in : model->graph->inputs())
      if (in->name() == name) target = in;
    if (!target)
      return report(kiln::Status(kiln::ErrorCode::BadFlag,
                                 fmt::format("--input: '{}' is not a graph input", name),
                                 "see `kiln inspect` for the input names"));
    auto value = kiln::readValueFile(spec.substr(eq + 1), target->type());
    if (!value) return report(value.status());
    feeds[name] = value.take();
  }
  kiln::rt::Executor executor(*model, {threads, captureAll});
  if (auto status = executor.checkSupported(); !status) return report(status);
  auto result = executor.run(feeds);
  if (!result) return report(result.status());
  std::error_code ec;
  std::filesystem::create_directories(outputDir, ec);
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    const std::string& name = model->graph->outputs()[i]->name();
    std::string file = (std::filesystem::path(outputDir) / fileNameFor(name)).string();
    if (auto status = kiln::writeValueFile(file, name, result->outputs[i]); !status)
      return report(status);
    std::cout << "kiln: wrote " << file << "\n";
  }
  if (captureAll) {
    std::filesystem::path dir = std::filesystem::path(outputDir) / "intermediates";
    std::filesystem::create_directories(dir, ec);
    for (const auto& [name, value] : result->captured)
      if (auto status = kiln::writeValueFile((dir / fileNameFor(name)).string(), name, value);
          !status)
        return report(status);
    std::cout << "kiln: wrote " << result->captured.size() << " intermediate tensors to "
              << dir.string() << "\n";
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln — ONNX to Ascend .om / MindSpore Lite .ms conversion toolchain"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");

  std::string inspectPath;
  bool inspectAsJson = false;
  bool inspectIr = false;
  auto* inspect =
      app.add_subcommand("inspect", "print inputs, outputs, op histogram and parameter bytes");
  inspect->add_option("model", inspectPath, "model file (.onnx)")->required();
  inspect->add_flag("--json", inspectAsJson, "print JSON");
  inspect->add_flag("--ir", inspectIr, "print the whole graph in kiln's text IR");

  std::string convertPath, convertOutput, convertTo = "onnx";
  auto* convert = app.add_subcommand("convert", "import a model and write it in a target format");
  convert->add_option("model", convertPath, "input model (.onnx)")->required();
  convert->add_option("-o,--output", convertOutput, "output file")->required();
  convert->add_option("--to", convertTo, "target format")->check(CLI::IsMember({"onnx"}));

  std::string runPath, runOutputDir;
  std::vector<std::string> runInputs;
  bool runCaptureAll = false;
  int runThreads = 1;
  auto* run =
      app.add_subcommand("run", "execute a model on CPU; outputs are written as TensorProto files");
  run->add_option("model", runPath, "model file")->required();
  run->add_option("--input", runInputs, "NAME=FILE.pb, once per graph input");
  run->add_option("--output-dir", runOutputDir, "folder for <output>.pb files")->required();
  run->add_flag("--capture-all", runCaptureAll, "also write every intermediate tensor");
  run->add_option("--threads", runThreads, "worker threads")->check(CLI::Range(1, 256));

  std::vector<std::string> conformancePaths;
  kiln::ConformanceOptions conformanceOptions;
  auto* conformance =
      app.add_subcommand("conformance", "run ONNX backend test cases and compare outputs");
  conformance->add_option("paths", conformancePaths, "case folders or folders holding them")
      ->required();
  conformance->add_option("--via", conformanceOptions.via, "artifact path to run")
      ->check(CLI::IsMember({"onnx"}));
  conformance->add_option("--precision", conformanceOptions.precision, "precision")
      ->check(CLI::IsMember({"fp32"}));
  conformance->add_option("--expect", conformanceOptions.expectFile,
                          "list of cases that must pass");
  conformance->add_option("--write-expected", conformanceOptions.writeExpected,
                          "write the passing cases here");
  conformance->add_option("-j,--jobs", conformanceOptions.jobs, "cases run in parallel")
      ->check(CLI::Range(1, 64));
  conformance->add_option("--timeout", conformanceOptions.timeoutSeconds, "seconds per case");
  conformance->add_flag("-q,--quiet", conformanceOptions.quiet,
                        "print only cases that did not pass");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(kiln::Status(kiln::ErrorCode::BadFlag, e.what(),
                               "run 'kiln --help' for the accepted flags"));
  }
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);

  if (inspect->parsed()) {
    auto model = kiln::loadModel(inspectPath);
    if (!model) return report(model.status());
    if (inspectIr)
      std::cout << kiln::modelToText(*model);
    else
      std::cout << (inspectAsJson ? kiln::inspectJson(*model) : kiln::inspectText(*model));
    return 0;
  }
  if (convert->parsed()) {
    auto model = kiln::loadModel(convertPath);
    if (!model) return report(model.status());
    if (auto status = kiln::writeOnnxFile(*model, convertOutput); !status) return report(status);
    std::cout << "kiln: wrote " << convertOutput << " (" << model->graph->nodeCount()
              << " nodes)\n";
    return 0;
  }
  if (run->parsed()) return runModel(runPath, runInputs, runOutputDir, runCaptureAll, runThreads);
  if (conformance->parsed())
    return kiln::runConformance(conformancePaths, conformanceOptions, std::cout);
  return 0;
}
