// `converter_lite`: MindSpore Lite converter drop-in (flags → MsConvertOptions
// → convertToMs).
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "kiln/backends/ms_convert.h"
#include "kiln/support/display.h"
#include "kiln/support/exception_status.h"
#include "kiln/support/progress.h"
#include "kiln/support/version.h"

namespace {

// converter_lite's closing line on stdout, kiln's coded line on stderr; the
// exit status is the converter_lite status code (the shell sees it modulo 256).
int fail(const kiln::Status& status) {
  std::fprintf(stderr, "converter_lite: error %s\n", status.toString().c_str());
  int code = kiln::msStatusCode(status);
  std::cout << "CONVERT RESULT FAILED:" << code << " " << kiln::msStatusDescription(code) << "\n";
  return code;
}

int runTool(int argc, char** argv) {
  kiln::enableProgress(); // long conversions show progress on a terminal's stderr
  if (kiln::asksForVersion(argc, argv)) {
    std::cout << kiln::versionBanner("converter_lite");
    return 0;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  bool wantsHelp = false;
  auto options = kiln::parseConverterLiteArgs(args, wantsHelp);
  if (wantsHelp || args.empty()) {
    std::cout << kiln::converterLiteUsage();
    if (wantsHelp) return 0;
  }
  if (!options) return fail(options.status());
  kiln::MsConvertReport report;
  kiln::Status status = kiln::convertToMs(*options, &report);
  for (const std::string& note : report.notes)
    std::cerr << "converter_lite: note: " << kiln::displayLine(note) << "\n";
  if (!report.unsupported.empty()) {
    std::set<std::string> opTypes;
    std::cout << "===========================================\n";
    std::cout << "UNSUPPORTED OP LIST:\n";
    for (const auto& op : report.unsupported)
      if (opTypes.insert(op.opType).second)
        std::cout << "FMKTYPE: " << options->fmk << ", OP TYPE: " << kiln::displayName(op.opType)
                  << "\n";
    std::cout << "===========================================\n";
  }
  if (!status) return fail(status);
  std::cout << "CONVERT RESULT SUCCESS:0\n";
  return 0;
}

} // namespace

// The last resort: an exception the library let through still ends in converter_lite's status line
// and one coded line, not an abort.
int main(int argc, char** argv) {
  try {
    return runTool(argc, argv);
  } catch (...) {
    return fail(kiln::statusFromCurrentException());
  }
}
