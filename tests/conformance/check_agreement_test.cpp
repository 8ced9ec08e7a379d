// `kiln check --target ms|om` and conversion agree on every libonnx-testdata case: a model the
// check passes converts, and a model it fails does not (the check reports the same refusals the
// lowering makes, through the same rule tables and the same conversion pipeline).
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "kiln/backends/ms_writer.h"
#include "kiln/backends/om.h"
#include "kiln/check.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/shape_conflicts.h"
#include "kiln/pipelines/conversion.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

std::vector<fs::path> testCases() {
  std::vector<fs::path> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path dir = fs::path(KILN_TESTDATA) / suite;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir))
      if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

// Conversion as converter_lite / atc run it: the conversion pipeline, then lowering and writing;
// atc also stops on shape-inference conflicts (E19999), as ATC's InferShape does.
Status convert(const fs::path& model, const std::string& target) {
  KILN_ASSIGN_OR_RETURN(Model m, importOnnxFile((model / "model.onnx").string()));
  ConversionOptions conversion;
  conversion.target = target;
  auto ran = runConversionPipeline(m, conversion);
  if (!ran) return ran.status();
  if (target == "om")
    for (ShapeConflict& conflict : shapeConflicts(m))
      return conflict.status;
  if (target == "ms") {
    auto built = buildMsBuffer(m, MsWriteOptions{});
    return built ? Status::ok() : built.status();
  }
  auto built = buildOmBuffer(m, OmWriteOptions{});
  return built ? Status::ok() : built.status();
}

Expected<CheckReport> check(const fs::path& model, const std::string& target) {
  KILN_ASSIGN_OR_RETURN(Model m, importOnnxFile((model / "model.onnx").string()));
  CheckOptions options;
  options.target = target;
  return checkModel(m, options);
}

void expectAgreement(const std::string& target) {
  auto cases = testCases();
  if (cases.empty()) GTEST_SKIP() << "no libonnx-testdata under " << KILN_TESTDATA;
  size_t converted = 0, refused = 0, importFailures = 0;
  std::vector<std::string> disagreements;
  for (const fs::path& dir : cases) {
    auto report = check(dir, target);
    Status conversion = convert(dir, target);
    if (!report) {
      // The model does not import: conversion must fail the same way.
      ++importFailures;
      if (conversion.isOk() || conversion.code() != report.status().code())
        disagreements.push_back(fmt::format("{}: check error {}, conversion {}",
                                            dir.filename().string(), report.status().toString(),
                                            conversion.toString()));
      continue;
    }
    (conversion.isOk() ? converted : refused) += 1;
    if (report->ok() != conversion.isOk())
      disagreements.push_back(fmt::format("{}: check {}, conversion {}", dir.filename().string(),
                                          report->ok() ? "PASS" : "FAIL:\n" + report->toText(),
                                          conversion.isOk() ? "succeeds" : conversion.toString()));
  }
  std::cout << fmt::format("{}: {} cases, {} convert, {} refused, {} do not import\n", target,
                           cases.size(), converted, refused, importFailures);
  EXPECT_TRUE(disagreements.empty()) << disagreements.size() << " disagreement(s):\n"
                                     << fmt::format("{}", fmt::join(disagreements, "\n"));
}

TEST(CheckAgreesWithConversion, Ms) { expectAgreement("ms"); }
TEST(CheckAgreesWithConversion, Om) { expectAgreement("om"); }

} // namespace
