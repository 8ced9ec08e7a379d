// `kiln` command line: thin front-end over the kiln library (flags → one library call).
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "kiln/frontend/onnx.h"
#include "kiln/inspect.h"
#include "kiln/ir/printer.h"

namespace {

int report(const kiln::Status& status) {
  std::fprintf(stderr, "kiln: error %s\n", status.toString().c_str());
  return 1;
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
  return 0;
}
