// The `atc` drop-in: ATC's flag table and command-line parsing, option validation in ATC's order,
// the run modes (0 convert, 1 JSON, 3 pre-check, 6 model info) and ATC's error blocks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backends/soc_versions.h"
#include "kiln/passes/pass.h"
#include "kiln/support/status.h"

namespace kiln {

enum class AtcFlagType { String, Int, Bool };

// What kiln does with a flag ATC knows.
enum class AtcFlagUse {
  Used,     // changes what kiln writes
  Ignored,  // accepted (value still checked as ATC checks it); a warning says it has no effect
  Rejected, // a non-default value fails with K8202 naming the flag and why
};

struct AtcFlagInfo {
  std::string name; // without dashes: "soc_version"
  AtcFlagType type = AtcFlagType::String;
  std::string defaultValue;
  std::string section; // --help section: General, Input, Output, Target, Feature, ...
  std::string help;
  // Values the parser accepts (exact strings; empty = any) and ATC's code for others.
  std::vector<std::string> valueSet;
  std::string valueSetCode; // E10001 (range text), E10006, E10007, E10010
  AtcFlagUse use = AtcFlagUse::Used;
  std::string note;    // why ignored / rejected
  bool hidden = false; // legacy flags left out of --help
};

const std::vector<AtcFlagInfo>& atcFlagTable();
const AtcFlagInfo* findAtcFlag(const std::string& name);

// The command line after ATC's getopt-style parsing (om.md §2.1).
struct AtcArgs {
  std::map<std::string, std::string> values; // flags present on the command line, last wins
  bool help = false;
  // stderr lines ATC prints for unknown flags, missing arguments and positional arguments.
  std::vector<std::string> errorLines;
  // The first coded error (value-set / type checks), or a BadFlag without peer code when only
  // errorLines describe the problem (ATC registers no E-code for those).
  Status error;
  // Set by the caller, not parsed: the run hands the prepared model to CANN's atc, so flags kiln
  // rejects only because kiln cannot build them (--out_nodes, bfloat16 precision, ...) pass on.
  bool handoff = false;
  bool has(const std::string& name) const { return values.count(name) != 0; }
  // The value given, else the table's default.
  std::string get(const std::string& name) const;
};

// `args` excludes the program name.
AtcArgs parseAtcCommandLine(const std::vector<std::string>& args);

// ATC's E10001 range text: "The value is not within the range of values. The valid range is
// [a] [b] ." with the values in lexicographic order.
std::string atcRangeText(const std::vector<std::string>& values);

// Validated options for one run.
struct AtcOptions {
  int mode = 0;
  int framework = -1;
  std::string model;
  std::string om;   // modes 1, 6
  std::string json; // mode 1
  std::string output;
  std::string socVersion;
  const SocInfo* soc = nullptr;
  std::string inputShape;
  std::string inputFormat; // resolved default: NCHW for ONNX
  std::string dynamicBatchSize;
  std::string dynamicImageSize;
  std::string dynamicDims;
  std::vector<std::vector<int64_t>> gears; // the gear flag's profiles, validated
  std::string insertOpConf;
  std::string keepDtype;
  std::vector<std::string> inputFp16Nodes;
  bool clipWeights = false; // --is_weight_clip=1 given (kiln keeps such weights fp32 otherwise)
  std::string outputType;   // "" or FP32 / FP16 (others rejected)
  std::string checkReport = "check_result.json";
  CoreType coreType = CoreType::AiCore;
  PrecisionMode precision = PrecisionMode::ForceFp16;
  std::string precisionName = "force_fp16"; // as given (precision_mode or precision_mode_v2)
  bool precisionGiven = false;              // --precision_mode(_v2) was on the command line
  int externalWeight = 0;
  bool displayModelInfo = false;
  std::string log = "null";
  std::string commandLine; // recorded as the model attribute atc_cmdline
  // Mode 0 hands the prepared ONNX model to CANN's atc (see prepareForCannAtc).
  bool handoff = false;
  // A flag names graph nodes (--out_nodes, --keep_dtype, ...): the hand-off fixes the input shapes
  // only, so every node keeps its name.
  bool namesNodes = false;
  // Flags that were accepted but do nothing in kiln (and --weight with ONNX), one line each.
  std::vector<std::string> warnings;
};

// ATC's checks that need no model, in ATC's order (om.md §2.4 steps 3-15); the first failing one
// is returned with ATC's code as peer code. `commandLine` is stored for atc_cmdline.
Expected<AtcOptions> validateAtcOptions(const AtcArgs& args, const std::string& commandLine = "");

struct AtcResult {
  std::string text;                  // what the mode prints on stdout (mode 6, display info)
  std::vector<std::string> written;  // files written
  std::vector<std::string> warnings; // extra warnings found while running
  // On failure: every message for the error block, the ATC-level one first (the returned Status
  // is errors[0]); later ones are the detail (kiln's own message, further unsupported ops).
  std::vector<Status> errors;
};

// Runs the mode. Failures return the coded error; files already written that the failure does
// not invalidate (the check report) stay listed in `result.written`.
Status runAtc(const AtcOptions& options, AtcResult& result);

// The hand-off to CANN's atc (`--cann_atc=PATH`, KILN_CANN_ATC, or an atc found on PATH): kiln's
// pre-flight (the flag checks of validateAtcOptions, the --input_shape checks, every gear's shapes)
// and its simplification (input shapes fixed, shapes settled, constants folded, no target
// rewrites, no precision change, no AIPP: CANN's atc does those from the same flags), then the
// prepared model is written to `onnxPath` as ONNX. Fails, as mode 0 does, on input mistakes and on
// nodes that cannot run on the shapes they get; ops kiln cannot lower are CANN's to judge.
Status prepareForCannAtc(const AtcOptions& options, const std::string& onnxPath, AtcResult& result);
// The command line for CANN's atc: `args` (the user's, without the program name) with every
// --model replaced by `model` and kiln's own --cann_atc dropped, in the user's order.
std::vector<std::string> cannAtcArgs(const std::vector<std::string>& args,
                                     const std::string& model);
// The value of --cann_atc in `args` ("" when absent), read as the parser reads flags.
std::string cannAtcFlag(const std::vector<std::string>& args);

// ATC's error block (om.md §3.2 a): "[PID: p] time Title(code): message" for the first message
// with an ATC code, its Solution line when ATC's catalog has one, then "TraceBack (most recent
// call last):" and the other messages indented by 8 spaces. No ATC code at all gives "".
std::string formatAtcErrorBlock(const std::vector<Status>& errors, long pid,
                                const std::string& timestamp);
// "2025-10-01-12:00:00.123.456" for now.
std::string atcTimestamp();

// The usage text of `atc --help` (om.md §2.10 layout).
std::string atcUsageText();

// What every successful atc run, `--mode=6`, `--help` and `--version` say plainly: a kiln .om holds
// the graph and weights as ATC lays them out, but no device kernels, task lists or memory plan, so
// the Ascend runtime cannot execute it (GE stops when it plans the input memory).
const char* omNotDeviceRunnableNote();

} // namespace kiln
