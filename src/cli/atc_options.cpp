// atc option validation in ATC's order, the usage text and ATC's error blocks (the flag table
// and the command-line parser are atc_flags.cpp).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atc_errors.h"
#include "kiln/backends/atc.h"
#include "kiln/shape_spec.h"
#include "kiln/support/display.h"

namespace kiln {

namespace fs = std::filesystem;
using S = AtcFlagType;
using U = AtcFlagUse;

namespace {

bool pathCharsValid(const std::string& path) {
  // ATC's set plus '/', checked on the resolved path; bytes >= 0x80 stand for the Chinese
  // characters it also allows (UTF-8).
  return std::all_of(path.begin(), path.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '/' || c >= 0x80;
  });
}

const char* kPathCharsReason =
    "The path can only contain 'a-z' 'A-Z' '0-9' '-' '.' '_' and Chinese characters.";

// An input file flag: must exist and use ATC's path characters.
Status checkInputPath(const std::string& flagName, const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Status(ErrorCode::FileNotFound,
                  fmt::format("Value {} for parameter --{} is invalid. Reason: [Errno 2] No such "
                              "file or directory",
                              path, flagName),
                  "check the path")
        .withPeerCode("E10001");
  std::string real = fs::canonical(path, ec).string();
  if (ec) real = fs::absolute(path).string();
  if (!pathCharsValid(real))
    return invalidValue("E10001", flagName, path, kPathCharsReason,
                        fmt::format("the resolved path is '{}': copy or link the file to a path "
                                    "without such characters",
                                    real));
  return Status::ok();
}

// ATC's check of an output path (--output, --check_report): the folder is created when missing,
// as GraphEngine's output-path check creates it, and must be writable.
Status checkOutputPath(const std::string& output, const std::string& flag = "output") {
  if (output.size() > 4096)
    return atcError(
        "E10021",
        fmt::format("Path for parameter --{} is too long. Keep the length within 4096.", flag),
        "use a shorter path");
  if (output.back() == '/')
    return atcError(
        "E10022",
        fmt::format("Path {} for parameter --{} does not include the file name.", output, flag),
        "Add the file name to the path.");
  fs::path dir = fs::absolute(fs::path(output)).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec); // ATC creates the output folder
  if (ec || !fs::is_directory(dir))
    return invalidValue(
        "E10001", flag, output,
        fmt::format("[Errno {}] {}", ec ? ec.value() : ENOTDIR,
                    ec ? ec.message() : "Not a directory"),
        fmt::format("'{}' must be a folder kiln can create and write", dir.string()));
  if (access(dir.c_str(), W_OK) != 0) {
    int err = errno; // EROFS on a read-only mount, EACCES for permissions
    return invalidValue(
        "E10001", flag, output, fmt::format("[Errno {}] {}", err, std::strerror(err)),
        fmt::format("'{}' is not writable; make it writable or write elsewhere", dir.string()));
  }
  std::string real = fs::weakly_canonical(fs::absolute(output), ec).string();
  if (!pathCharsValid(real))
    return invalidValue("E10001", flag, output, kPathCharsReason,
                        "write to a path without such characters");
  return Status::ok();
}

struct PrecisionChoice {
  PrecisionMode mode;
  bool bf16 = false;
  bool hif8 = false;
  bool mixed = false;
  // A mode kiln has no conversion for: refused (or passed to CANN's atc) rather than built as
  // some other mode.
  bool unsupported = false;
};

std::optional<PrecisionChoice> precisionChoice(const std::string& name) {
  static const std::map<std::string, PrecisionChoice> modes = {
      {"force_fp16", {PrecisionMode::ForceFp16}},
      {"fp16", {PrecisionMode::ForceFp16}},
      {"force_fp32", {PrecisionMode::ForceFp32}},
      {"cube_fp16in_fp32out", {PrecisionMode::ForceFp32, false, false, false, true}},
      {"allow_fp32_to_fp16", {PrecisionMode::AllowFp32ToFp16}},
      {"must_keep_origin_dtype", {PrecisionMode::KeepOrigin}},
      {"origin", {PrecisionMode::KeepOrigin}},
      {"allow_mix_precision", {PrecisionMode::AllowMixPrecision, false, false, true}},
      {"allow_mix_precision_fp16", {PrecisionMode::AllowMixPrecision, false, false, true}},
      {"mixed_float16", {PrecisionMode::AllowMixPrecision, false, false, true}},
      {"allow_mix_precision_bf16", {PrecisionMode::KeepOrigin, true, false, true}},
      {"mixed_bfloat16", {PrecisionMode::KeepOrigin, true, false, true}},
      {"allow_fp32_to_bf16", {PrecisionMode::KeepOrigin, true, false, false}},
      {"mixed_hif8", {PrecisionMode::KeepOrigin, false, true, true}},
      {"cube_hif8", {PrecisionMode::KeepOrigin, false, true, false}},
  };
  auto it = modes.find(name);
  if (it == modes.end()) return std::nullopt;
  return it->second;
}

Status trueFalse(const AtcArgs& args, const std::string& name) {
  if (!args.has(name)) return Status::ok();
  const std::string v = args.get(name);
  if (v == "true" || v == "false" || v.empty()) return Status::ok();
  return atcError("E10005",
                  fmt::format("Value {} for parameter --{} is invalid. The value must be either "
                              "true or false.",
                              v, name),
                  fmt::format("use --{}=true or --{}=false", name, name));
}

Status zeroOne(const AtcArgs& args, const std::string& name) {
  if (!args.has(name)) return Status::ok();
  const std::string v = args.get(name);
  if (v == "0" || v == "1" || v.empty()) return Status::ok();
  return atcError("E10006",
                  fmt::format("Value {} for parameter --{} is invalid. The value must be either "
                              "1 or 0.",
                              v, name),
                  fmt::format("use --{}=0 or --{}=1", name, name));
}

Status oneOf(const AtcArgs& args, const std::string& name, const std::vector<std::string>& allowed,
             const std::string& reason) {
  if (!args.has(name)) return Status::ok();
  const std::string v = args.get(name);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return Status::ok();
  return invalidValue("E10001", name, v, reason);
}

std::vector<std::string> splitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t pos = s.find(sep, start);
    std::string part = s.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    if (!part.empty()) out.push_back(part);
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// A rejected flag counts as used when its value differs from the default in a way that matters.
bool rejectedFlagSet(const AtcArgs& args, const AtcFlagInfo& f) {
  if (!args.has(f.name)) return false;
  const std::string v = args.get(f.name);
  if (f.name == "enable_compress_weight" || f.name == "save_original_model") return v == "true";
  if (f.name == "is_input_adjust_hw_layout" || f.name == "is_output_adjust_hw_layout") {
    for (const std::string& item : splitList(v, ','))
      if (item == "true") return true;
    return false;
  }
  return !v.empty() && v != f.defaultValue;
}

Status rejectedFlag(const AtcFlagInfo& f, const std::string& value) {
  return notSupported(
      fmt::format("--{}={} is not supported by kiln's atc ({}).", f.name, value, f.note),
      fmt::format("drop --{}", f.name));
}

bool gearFlagSet(const AtcArgs& args) {
  return !args.get("dynamic_batch_size").empty() || !args.get("dynamic_image_size").empty() ||
         !args.get("dynamic_dims").empty();
}

Status outNodesGrammar(const std::string& value) {
  // "node:index;node:index" or graph output names "out1;out2", never both.
  bool indexed = false, named = false;
  for (const std::string& item : splitList(value, ';')) {
    size_t colon = item.rfind(':');
    if (colon == std::string::npos) {
      named = true;
      continue;
    }
    indexed = true;
    if (colon == 0)
      return invalidValue("E10001", "out_nodes", value,
                          "The parameter format is invalid. Valid format: "
                          "\"node_name1:0;node_name1:1;node_name2:0\".",
                          "give each output as node:index");
    if (!isDigits(item.substr(colon + 1)))
      return invalidValue("E10001", "out_nodes", value, "The index is not a positive integer.",
                          fmt::format("'{}' needs a number after the last ':'", item));
  }
  if (indexed && named)
    return invalidValue("E10001", "out_nodes", value,
                        "Only one of index, top_name and output_name can be used.",
                        "give every entry as node:index, or every entry as an output name");
  return Status::ok();
}

// ATC's rules between flags, each run at its step of ATC's validation order (om.md §2.4) so the
// first failure is the one ATC reports: a command kiln's atc accepts is one CANN's atc accepts
// (which matters again when kiln hands the command to CANN's atc). docs/atc.md lists them; the
// rules inside one gear flag's value are validateDynamicProfiles' (shape_spec.cpp).
struct FlagCombinationRule {
  int step;
  Status (*check)(const AtcArgs&);
};

const std::vector<FlagCombinationRule>& flagCombinationRules() {
  static const std::vector<FlagCombinationRule> rules = {
      {3,
       [](const AtcArgs& a) {
         if (a.get("deterministic_level") != "0" && a.get("deterministic") != "1")
           return invalidValue("E10001", "deterministic_level", a.get("deterministic_level"),
                               "--deterministic_level other than 0 needs --deterministic=1.",
                               "add --deterministic=1 or drop --deterministic_level");
         return Status::ok();
       }},
      {4,
       [](const AtcArgs& a) {
         if (a.get("singleop").empty()) return Status::ok();
         if (a.get("display_model_info") == "1" || a.has("framework") ||
             !a.get("insert_op_conf").empty() || a.get("mode") != "0")
           return invalidValue("E10001", "singleop", a.get("singleop"),
                               "--singleop takes none of --display_model_info=1, --framework, "
                               "--insert_op_conf or a --mode other than 0.",
                               "drop those flags from a --singleop run");
         return Status::ok();
       }},
      {10,
       [](const AtcArgs& a) {
         if (!a.get("optypelist_for_implmode").empty() && a.get("op_select_implmode").empty())
           return invalidValue("E10001", "optypelist_for_implmode",
                               a.get("optypelist_for_implmode"),
                               "Parameters --op_select_implmode and --optypelist_for_implmode "
                               "must be set at the same time.",
                               "add --op_select_implmode or drop --optypelist_for_implmode");
         return Status::ok();
       }},
      {11,
       [](const AtcArgs& a) {
         if (!a.get("input_hint_shape").empty() && gearFlagSet(a))
           return invalidValue("E10001", "input_hint_shape", a.get("input_hint_shape"),
                               "--input_hint_shape cannot be combined with --dynamic_batch_size, "
                               "--dynamic_image_size or --dynamic_dims.",
                               "drop --input_hint_shape: the gears fix every shape");
         return Status::ok();
       }},
      {12,
       [](const AtcArgs& a) {
         if (a.get("shape_generalized_build_mode") != "shape_generalized") return Status::ok();
         const std::string shape = a.get("input_shape");
         if (gearFlagSet(a) || shape.find('~') != std::string::npos)
           return invalidValue("E10001", "shape_generalized_build_mode", "shape_generalized",
                               "shape_generalized builds cannot be combined with dynamic gears "
                               "or shape ranges.",
                               "drop --shape_generalized_build_mode (it is deprecated)");
         return Status::ok();
       }},
      {13,
       [](const AtcArgs& a) {
         if (!a.get("insert_op_conf").empty() && !a.get("dynamic_dims").empty())
           return invalidValue("E10001", "insert_op_conf", a.get("insert_op_conf"),
                               "The dynamic dims function does not support AIPP.",
                               "drop --dynamic_dims or --insert_op_conf");
         return Status::ok();
       }},
      {15,
       [](const AtcArgs& a) {
         if (a.get("enable_compress_weight") == "true" && !a.get("compress_weight_conf").empty())
           return atcError("E10047",
                           "--enable_compress_weight and --compress_weight_conf are mutually "
                           "exclusive.",
                           "Remove either of them and try again.");
         return Status::ok();
       }},
      {15,
       [](const AtcArgs& a) {
         return a.get("out_nodes").empty() ? Status::ok() : outNodesGrammar(a.get("out_nodes"));
       }},
  };
  return rules;
}

Status checkFlagCombinations(const AtcArgs& args, int step) {
  for (const FlagCombinationRule& rule : flagCombinationRules())
    if (rule.step == step) KILN_TRY(rule.check(args));
  return Status::ok();
}

} // namespace

Expected<AtcOptions> validateAtcOptions(const AtcArgs& args, const std::string& commandLine) {
  AtcOptions o;
  o.commandLine = commandLine;
  o.mode = std::stoi(args.get("mode"));
  o.framework = std::stoi(args.get("framework"));
  o.log = args.get("log");
  // Handed to CANN's atc, a flag kiln cannot build passes on; one that names graph nodes keeps
  // them named as in the user's model (the hand-off then only fixes the input shapes).
  o.handoff = args.handoff;
  for (const char* name : {"out_nodes", "keep_dtype", "customize_dtypes", "compress_weight_conf",
                           "op_precision_mode", "is_output_adjust_hw_layout"})
    o.namesNodes = o.namesNodes || !args.get(name).empty();
  auto rejected = [&](const char* name) -> Status {
    const AtcFlagInfo* f = findAtcFlag(name);
    if (rejectedFlagSet(args, *f) && !args.handoff) return rejectedFlag(*f, args.get(name));
    return Status::ok();
  };

  // Step 2: --raw_ge_options.
  KILN_TRY(rejected("raw_ge_options"));
  // Step 3.
  if (!args.get("auto_tune_mode").empty())
    return invalidValue("E10001", "auto_tune_mode", args.get("auto_tune_mode"),
                        "The Auto Tune function has been deprecated. Please use the AOE tool for "
                        "tuning.",
                        "drop --auto_tune_mode");
  KILN_TRY(checkFlagCombinations(args, 3));
  // Step 4.
  KILN_TRY(checkFlagCombinations(args, 4));
  KILN_TRY(rejected("singleop"));

  // Modes kiln implements; the others pass ATC's parse check but have no handler here.
  if (o.mode == 5 || o.mode == 7 || o.mode == 30)
    return notSupported(fmt::format("--mode={} is not supported by kiln's atc.", o.mode),
                        "use --mode=0 (convert), 1 (JSON), 3 (pre-check) or 6 (model info)");

  if (o.mode == 1) {
    if (o.framework != -1 && o.framework != 0 && o.framework != 3 && o.framework != 5)
      return invalidValue("E10001", "framework", args.get("framework"),
                          "The framework must be selected from {0(Caffe), 3(TensorFlow), "
                          "5(Onnx)} when model is set to 1(JSON).",
                          "drop --framework for an .om, or use --framework=5 for ONNX");
    if (o.framework == 0 || o.framework == 3)
      return notSupported("kiln's atc reads .om and ONNX models only.",
                          "use --framework=5 with an ONNX model, or no --framework with an .om");
    o.om = args.get("om");
    o.json = args.get("json");
    if (o.om.empty()) return atcError("E10004", "Value for --om is empty.", "pass --om=<model>");
    if (o.json.empty())
      return atcError("E10004", "Value for --json is empty.", "pass --json=<file.json>");
    KILN_TRY(checkInputPath("om", o.om));
    return o;
  }
  if (o.mode == 6) {
    if (args.has("framework"))
      return atcError("E10057", "--om and --mode can only be used together.",
                      "If --mode is 6, use only with --om.");
    o.om = args.get("om");
    if (o.om.empty()) return atcError("E10004", "Value for --om is empty.", "pass --om=<model>");
    KILN_TRY(checkInputPath("om", o.om));
    return o;
  }

  // Modes 0 and 3. Step 5: framework.
  if (o.framework == -1)
    return atcError("E10007",
                    "--framework is required. The value must be 0(Caffe) or 1(MindSpore) or "
                    "3(TensorFlow) or 5(Onnx).",
                    "kiln converts ONNX: add --framework=5");
  std::string weight = args.get("weight");
  if (!weight.empty()) KILN_TRY(checkInputPath("weight", weight));
  if (o.framework == 0 && weight.empty())
    return atcError("E10008", "--weight must not be empty when --framework is set to 0 (Caffe).",
                    "kiln converts ONNX: use --framework=5");
  if (o.framework != 5)
    return notSupported(fmt::format("--framework={} is not supported by kiln's atc, which "
                                    "converts ONNX models only.",
                                    o.framework),
                        "export the model to ONNX and use --framework=5");
  if (!weight.empty()) o.warnings.push_back("Parameter weight is ignored for TensorFlow/Onnx.");

  // Step 6: soc <-> mode 30.
  o.socVersion = args.get("soc_version");
  if (o.socVersion == "Ascend035" || o.socVersion == "Ascend035A" || o.socVersion == "Ascend035B")
    return notSupported("Option soc_version Ascend035 Ascend035A Ascend035B  and mode 30 must be "
                        "set together.",
                        "Ascend035* chips take only --mode=30, which kiln does not write");

  // Step 7.
  if (args.has("check_report"))
    o.checkReport = args.get("check_report");
  else if (const char* work = std::getenv("ASCEND_WORK_PATH"); work && *work)
    o.checkReport = (fs::path(work) / "check_result.json").string();

  // Step 8: --input_format for ONNX.
  o.inputFormat = args.get("input_format");
  if (!o.inputFormat.empty()) {
    static const std::set<std::string> onnxFormats = {"NCHW", "ND", "NCDHW"};
    static const std::set<std::string> knownFormats = {
        "NCHW",      "NHWC",       "ND",   "NCDHW", "NDHWC",       "NC1HWC0",
        "FRACTAL_Z", "FRACTAL_NZ", "HWCN", "CHWN",  "NC1HWC0_C04", "FRACTAL_Z_C04"};
    if (!knownFormats.count(o.inputFormat))
      return invalidValue("E10001", "input_format", o.inputFormat,
                          "The current value is not within the valid range.",
                          "use NCHW, ND or NCDHW");
    if (!onnxFormats.count(o.inputFormat))
      return invalidValue("E10001", "input_format", o.inputFormat,
                          "The value must be NCHW, ND or NCDHW in ONNX model.",
                          "use NCHW, ND or NCDHW");
  } else {
    o.inputFormat = "NCHW";
  }

  // Step 9: CheckFlags.
  if (o.socVersion.empty()) return unknownSocError("");
  o.soc = findSoc(o.socVersion);
  if (!o.soc) return unknownSocError(o.socVersion);
  o.output = args.get("output");
  if (o.output.empty() && o.mode == 0) return requiredEmpty("output");
  o.model = args.get("model");
  if (o.model.empty()) return requiredEmpty("model");
  KILN_TRY(checkInputPath("model", o.model));
  if (!o.output.empty()) KILN_TRY(checkOutputPath(o.output));
  if (o.mode == 3 && args.has("check_report") && !o.checkReport.empty())
    KILN_TRY(checkOutputPath(o.checkReport, "check_report"));

  // Step 10: precision and implementation-mode flags.
  KILN_TRY(checkFlagCombinations(args, 10));
  if (std::string p = args.get("op_precision_mode"); !p.empty() && !fs::exists(p))
    return invalidValue("E10001", "op_precision_mode", p,
                        "Path defined by op precision mode is not found.", "check the path");
  KILN_TRY(zeroOne(args, "is_weight_clip"));
  std::string pm = args.get("precision_mode"), pm2 = args.get("precision_mode_v2");
  if (!pm.empty() && !pm2.empty())
    return atcError("E10056",
                    "Cannot configure both parameters --precision_mode and --precision_mode_v2 "
                    "simultaneously.",
                    "keep one of them");
  std::string precisionFlag = pm2.empty() ? "precision_mode" : "precision_mode_v2";
  o.precisionName = pm2.empty() ? (pm.empty() ? "force_fp16" : pm) : pm2;
  o.precisionGiven = !pm.empty() || !pm2.empty();
  PrecisionChoice choice = *precisionChoice(o.precisionName);
  if (!args.get("modify_mixlist").empty() && !choice.mixed)
    return invalidValue("E10001", "modify_mixlist", args.get("modify_mixlist"),
                        "modify_mixlist is assigned, Please ensure that precision_mode only can "
                        "be assigned to 'allow_mix_precision' or 'allow_mix_precision_fp16' or "
                        "'allow_mix_precision_bf16'(if available), precision_mode_v2 only can be "
                        "assigned to 'mixed_float16' or 'mixed_bfloat16' or 'mixed_hif8'(if "
                        "available).",
                        "drop --modify_mixlist or pick a mixed precision mode");
  KILN_TRY(rejected("modify_mixlist"));
  if ((choice.bf16 && !o.soc->bf16) || (choice.hif8 && !o.soc->hif8))
    return invalidValue(
        "E10001", precisionFlag, o.precisionName,
        fmt::format("{} does not support {}.", o.socVersion, choice.bf16 ? "bfloat16" : "hifloat8"),
        "pick an fp16/fp32 precision mode for this chip");
  if ((choice.bf16 || choice.hif8) && !args.handoff)
    return notSupported(fmt::format("--{}={} is not supported by kiln's atc (no {} conversion "
                                    "pass).",
                                    precisionFlag, o.precisionName,
                                    choice.bf16 ? "bfloat16" : "hifloat8"),
                        "use force_fp16, allow_mix_precision, allow_fp32_to_fp16, force_fp32 or "
                        "must_keep_origin_dtype");
  // Cube ops reading fp16 and writing fp32 need a node whose inputs and output differ in type,
  // which an ONNX-typed graph (and kiln's executor) cannot hold; building it as force_fp32 or as
  // allow_fp32_to_fp16 would silently give other numbers.
  if (choice.unsupported && !args.handoff)
    return notSupported(fmt::format("--{}={} is not supported by kiln's atc: Conv, ConvTranspose, "
                                    "MatMul and Gemm with fp16 inputs and fp32 outputs have no "
                                    "form in kiln's graph.",
                                    precisionFlag, o.precisionName),
                        "use allow_fp32_to_fp16 (those ops wholly in fp16) or force_fp32, or "
                        "build with CANN's atc (--cann_atc)");
  o.precision = choice.mode;

  // Step 11: shape-range conversion and hint shapes.
  KILN_TRY(checkFlagCombinations(args, 11));
  KILN_TRY(rejected("input_shape_range"));
  KILN_TRY(rejected("input_hint_shape"));
  o.inputShape = args.get("input_shape");
  std::optional<ShapeSpec> spec;
  if (!o.inputShape.empty()) {
    auto parsed = parseShapeSpec(o.inputShape, ShapeDialect::Atc);
    if (!parsed) return parsed.status();
    spec = parsed.take();
  }
  // Step 12: dynamic gears.
  DynamicProfiles profiles;
  profiles.batchSize = o.dynamicBatchSize = args.get("dynamic_batch_size");
  profiles.imageSize = o.dynamicImageSize = args.get("dynamic_image_size");
  profiles.dims = o.dynamicDims = args.get("dynamic_dims");
  profiles.inputFormat = args.get("input_format");
  if (!profiles.batchSize.empty() || !profiles.imageSize.empty() || !profiles.dims.empty())
    KILN_TRY(validateDynamicProfiles(profiles, o.inputShape, spec ? &*spec : nullptr));
  o.gears = profiles.gears;
  KILN_TRY(checkFlagCombinations(args, 12));

  // Step 13.
  o.insertOpConf = args.get("insert_op_conf");
  KILN_TRY(checkFlagCombinations(args, 13));
  // Step 14: files named by flags.
  if (!o.insertOpConf.empty()) KILN_TRY(checkInputPath("insert_op_conf", o.insertOpConf));
  o.keepDtype = args.get("keep_dtype");
  if (!o.keepDtype.empty() && !fs::exists(o.keepDtype))
    return invalidValue("E10001", "keep_dtype", o.keepDtype,
                        "File defined by keep_dtype is not found.", "check the path");
  if (std::string c = args.get("compress_weight_conf"); !c.empty() && !fs::exists(c))
    return atcError("E10410", fmt::format("File {} does not exist.", c), "check the path",
                    ErrorCode::FileNotFound);
  KILN_TRY(rejected("op_name_map"));

  // Step 15: the remaining value checks, then flags kiln does not implement.
  KILN_TRY(trueFalse(args, "enable_compress_weight"));
  KILN_TRY(checkFlagCombinations(args, 15));
  KILN_TRY(rejected("enable_compress_weight"));
  KILN_TRY(rejected("compress_weight_conf"));
  KILN_TRY(trueFalse(args, "save_original_model"));
  KILN_TRY(rejected("save_original_model"));
  KILN_TRY(trueFalse(args, "enable_single_stream"));
  KILN_TRY(zeroOne(args, "ac_parallel_enable"));
  KILN_TRY(zeroOne(args, "tiling_schedule_optimize"));
  KILN_TRY(oneOf(args, "host_env_os", {"linux", "minios"}, "The value must be linux or minios."));
  KILN_TRY(oneOf(args, "host_env_cpu", {"x86_64", "aarch64", "arm64", "arm"},
                 "The value must be x86_64, aarch64, arm64 or arm."));
  KILN_TRY(trueFalse(args, "allow_hf32"));
  KILN_TRY(zeroOne(args, "quant_dumpable"));
  KILN_TRY(zeroOne(args, "enable_small_channel"));
  KILN_TRY(trueFalse(args, "enable_attr_compression"));
  if (args.has("static_model_ops_lower_limit")) {
    std::string v = args.get("static_model_ops_lower_limit");
    bool ok = v == "-1" || (isDigits(v) && v.size() <= 19);
    if (!ok)
      return invalidValue("E10001", "static_model_ops_lower_limit", v,
                          "The value must be an integer in [-1, 9223372036854775807].");
  }
  for (const char* name : {"oo_constant_folding", "oo_dead_code_elimination"})
    KILN_TRY(oneOf(args, name, {"true", "false", ""}, "The value must be true, false or empty."));
  KILN_TRY(oneOf(args, "topo_sorting_mode", {"0", "1", "2", "3", ""},
                 "The value must be selected from {0, 1, 2, 3}."));
  KILN_TRY(oneOf(args, "export_compile_stat", {"0", "1", "2"},
                 "The value must be selected from {0, 1, 2}."));
  KILN_TRY(oneOf(args, "oo_level", {"O1", "O3"}, "The value must be O1 or O3."));
  for (const char* name : {"is_input_adjust_hw_layout", "is_output_adjust_hw_layout"}) {
    for (const std::string& item : splitList(args.get(name), ','))
      if (item != "true" && item != "false")
        return atcError("E10005",
                        fmt::format("Value {} for parameter --{} is invalid. The value must be "
                                    "either true or false.",
                                    args.get(name), name),
                        "give one true/false per node");
    KILN_TRY(rejected(name));
  }
  KILN_TRY(rejected("out_nodes"));
  KILN_TRY(rejected("compression_optimize_conf"));
  KILN_TRY(rejected("customize_dtypes"));

  // Values kiln uses.
  o.externalWeight = std::stoi(args.get("external_weight"));
  if (o.externalWeight == 2 && !args.handoff)
    return notSupported("--external_weight=2 (one combined weight file) is not supported by "
                        "kiln's atc.",
                        "use --external_weight=1 (one file per weight) or 0");
  o.displayModelInfo = args.get("display_model_info") == "1";
  o.inputFp16Nodes = splitList(args.get("input_fp16_nodes"), ';');
  o.clipWeights = args.has("is_weight_clip") && args.get("is_weight_clip") == "1";
  o.outputType = args.get("output_type");
  if (!o.outputType.empty()) {
    static const std::vector<std::string> types = {"FP32", "FP16", "UINT8",   "INT8",
                                                   "HIF8", "HIF4", "FP8E5M2", "FP8E4M3FN"};
    if (o.outputType.find(':') != std::string::npos) {
      for (const std::string& item : splitList(o.outputType, ';')) {
        auto parts = splitList(item, ':');
        if (parts.size() != 3)
          return invalidValue("E10001", "output_type", o.outputType,
                              "The parameter is invalid. Valid format \"opname:index:dtype\".");
        if (!isDigits(parts[1]))
          return invalidValue("E10001", "output_type", o.outputType,
                              "The value is not a positive integer.");
      }
      // The per-output form needs --out_nodes, which kiln rejects above (CANN's atc checks it).
      if (!args.handoff)
        return invalidValue("E10001", "output_type", o.outputType,
                            "In the mode of specified node, the correct example is: "
                            "node1:0:FP16;node2:0:FP32.The nodes set in --output_type must be "
                            "found in --out_nodes.",
                            "give one type for all outputs, e.g. --output_type=FP16");
    } else if (std::find(types.begin(), types.end(), o.outputType) == types.end())
      return invalidValue("E10001", "output_type", o.outputType,
                          "The current value is not within the valid range. Only support FP32, "
                          "FP16, UINT8, INT8, HIF8, FP8E5M2, FP8E4M3FN.",
                          "use FP32 or FP16");
    else if (o.outputType != "FP32" && o.outputType != "FP16" && !args.handoff)
      return notSupported(
          fmt::format("--output_type={} is not supported by kiln's atc.", o.outputType),
          "use --output_type=FP32 or FP16");
  }
  o.coreType = args.get("core_type") == "VectorCore" ? CoreType::VectorCore : CoreType::AiCore;
  // CANN's atc builds with the flags kiln ignores: no warnings about them.
  if (args.handoff) return o;
  if (o.coreType == CoreType::VectorCore && !o.soc->supportsCoreType(CoreType::VectorCore)) {
    o.warnings.push_back(fmt::format(
        "--core_type=VectorCore has no effect on {}: only Ascend310P* chips have vector cores.",
        o.socVersion));
    o.coreType = CoreType::AiCore;
  } else if (o.coreType == CoreType::VectorCore) {
    o.warnings.push_back("--core_type=VectorCore is recorded in the .om (model attribute "
                         "core_type=1); kiln writes no kernels, so no code is built for vector "
                         "cores.");
  }

  if (o.mode != 0 && !args.get("cann_atc").empty() && args.get("cann_atc") != "off")
    o.warnings.push_back(fmt::format("--cann_atc is used by --mode=0 only; --mode={} runs in "
                                     "kiln's atc.",
                                     o.mode));
  // Accepted flags without effect: say so, once each.
  for (const AtcFlagInfo& f : atcFlagTable()) {
    if (f.use != AtcFlagUse::Ignored || !args.has(f.name)) continue;
    if (args.get(f.name) == f.defaultValue) continue;
    o.warnings.push_back(
        fmt::format("--{}={} is accepted and ignored: {}.", f.name, args.get(f.name), f.note));
  }
  return o;
}

namespace {

struct CatalogEntry {
  const char* title;
  const char* solution; // "" when ATC's catalog has none
};

const std::map<std::string, CatalogEntry>& atcCatalog() {
  static const std::map<std::string, CatalogEntry> catalog = {
      {"E10001", {"Invalid_Argument", ""}},
      {"E10002",
       {"Invalid_Argument_Tensor_Input_Shape",
        "The valid format is input_name1:n1,c1,h1,w1;input_name2:n2,c2,h2,w2. Replace "
        "input_name with node names. Ensure that the shape values are integers."}},
      {"E10003", {"Invalid_Argument", ""}},
      {"E10004", {"Invalid_Argument", "Set a valid parameter value."}},
      {"E10005", {"Invalid_Argument", "The parameter value can only be true or false."}},
      {"E10006", {"Invalid_Argument", "The parameter value can only be 1 or 0."}},
      {"E10007", {"Invalid_Argument", "Set a valid parameter value."}},
      {"E10008", {"Invalid_Argument", "Give --weight for Caffe models, or correct --framework."}},
      {"E10009", {"Invalid_Argument_Tensor_Dynamic_Shape", "Use only one of them."}},
      {"E10010",
       {"Invalid_Argument", "Select the value from debug, info, warning, error, and null."}},
      {"E10011",
       {"Invalid_Argument_Tensor_Input_Shape",
        "Static shapes take positive integers; for dynamic shapes add a dynamic option."}},
      {"E10012", {"Invalid_Argument_Tensor_Input_Shape", ""}},
      {"E10013",
       {"Invalid_Argument", "Run the \"atc -h\" command to view the usage. For details, see ATC "
                            "Instructions."}},
      {"E10014",
       {"Invalid_Argument", "Run the \"atc -h\" command to view the usage. For details, see ATC "
                            "Instructions."}},
      {"E10016",
       {"Invalid_Argument_Operator_Name", "Specify the name of an existing node in the graph."}},
      {"E10017", {"Invalid_Argument", ""}},
      {"E10018", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10019", {"Invalid_Argument_Tensor_Input_Shape", ""}},
      {"E10020", {"Invalid_Argument", "Give each profile as \"h,w\"."}},
      {"E10021", {"Invalid_Argument", ""}},
      {"E10022", {"Invalid_Argument", "Add the file name to the path."}},
      {"E10031", {"Invalid_Argument_Tensor_Input_Shape", ""}},
      {"E10034", {"Invalid_Argument", ""}},
      {"E10035", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10036", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10037", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10038", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10039", {"Invalid_Argument_Tensor_Dynamic_Shape", ""}},
      {"E10040", {"Invalid_Argument_Tensor_Input_Shape", ""}},
      {"E10041", {"Invalid_Argument_Model", "Check the model file and --framework."}},
      {"E10047", {"Invalid_Argument", "Remove either of them and try again."}},
      {"E10049", {"Invalid_Argument_Tensor_Input_Shape", ""}},
      {"E10052", {"Invalid_Argument", ""}},
      {"E10054",
       {"Invalid_Argument", "Check whether the command line parameter format is correct."}},
      {"E10055", {"Not_Supported", ""}},
      {"E10056", {"Invalid_Argument", ""}},
      {"E10057", {"Invalid_Argument", "If --mode is 6, use only with --om."}},
      {"E10058", {"Invalid_Argument", ""}},
      {"E10410", {"File_Operation_Error_File_Not_Exist", ""}},
      {"E13004", {"File_Operation_Error_Write", ""}},
      {"E13005", {"File_Operation_Error_Parse", "Check that the file is a valid model."}},
      {"E13018", {"File_Operation_Error_Parse", ""}},
      {"E16002",
       {"Invalid_Argument_ONNX_Model_Data", "Replace the operator, or check the model first with "
                                            "--mode=3."}},
      {"E16004", {"Invalid_Argument_ONNX_Model_Data", ""}},
      {"EZ3003", {"Not_Supported_Operator", ""}},
      {"E20101", {"Invalid_Argument", ""}},
      {"E19999", {"Inner_Error", ""}},
  };
  return catalog;
}

bool isInnerCode(const std::string& code) {
  return code.size() >= 6 && (code.compare(2, 4, "9999") == 0 || code.compare(2, 4, "8888") == 0);
}

} // namespace

std::string formatAtcErrorBlock(const std::vector<Status>& errors, long pid,
                                const std::string& timestamp) {
  const Status* head = nullptr;
  for (const Status& e : errors)
    if (!e.peerCode().empty() && !isInnerCode(e.peerCode())) {
      head = &e;
      break;
    }
  if (!head) {
    // Only inner codes (om.md §3.2 (a) 5): "<code>: Inner Error!", the first message with the
    // code/PID/time prefix, the others once under TraceBack, indented by 7 spaces.
    const Status* first = nullptr;
    for (const Status& e : errors)
      if (!e.peerCode().empty()) {
        first = &e;
        break;
      }
    if (!first) return "";
    std::string out = fmt::format("{}: Inner Error!\n{}: [PID: {}] {} {}\n", first->peerCode(),
                                  first->peerCode(), pid, timestamp, displayLine(first->message()));
    std::set<std::string> seen = {first->peerCode() + first->message()};
    bool traceback = false;
    for (const Status& e : errors) {
      if (&e == first || !seen.insert(e.peerCode() + e.message()).second) continue;
      if (!traceback) out += "TraceBack (most recent call last):\n";
      traceback = true;
      out += "       " + displayLine(e.message()) + "\n";
    }
    return out;
  }
  std::string out;
  auto it = atcCatalog().find(head->peerCode());
  const char* title = it != atcCatalog().end() ? it->second.title : "Invalid_Argument";
  out += fmt::format("[PID: {}] {} {}({}): {}\n", pid, timestamp, title, head->peerCode(),
                     displayLine(head->message()));
  if (it != atcCatalog().end() && *it->second.solution)
    out += fmt::format("        Solution: {}\n", it->second.solution);
  std::vector<std::string> rest;
  std::set<std::string> seen = {head->peerCode() + head->message()};
  for (const Status& e : errors) {
    if (&e == head || !seen.insert(e.peerCode() + e.message()).second) continue;
    rest.push_back(displayLine(e.message()));
  }
  if (!rest.empty()) {
    out += "TraceBack (most recent call last):\n";
    for (const std::string& r : rest)
      out += "        " + r + "\n";
  }
  return out;
}

std::string atcTimestamp() {
  auto now = std::chrono::system_clock::now();
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d-%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}.{:03d}", buf, micros / 1000, micros % 1000);
}

const char* omNotDeviceRunnableNote() {
  return "kiln: note: the .om files kiln writes are not device-runnable: they hold the graph and "
         "weights "
         "as ATC lays them out but no device kernels, task lists or memory plan; run them in "
         "kiln's "
         "executor (kiln run X.om) or build the device model with CANN's atc";
}

std::string atcUsageText() {
  std::string out = "usage: atc <args>\n";
  out += std::string(omNotDeviceRunnableNote()) + "\n";
  out += "generate offline model example:\n";
  out += "atc --model=./resnet50.onnx --framework=5 --output=./resnet50 "
         "--soc_version=<soc_version>\n";
  out += "generate offline model for single op example:\n";
  out += "atc --singleop=./op_list.json --output=./op_model --soc_version=<soc_version> "
         "(not supported by kiln)\n";
  const std::vector<std::pair<const char*, std::vector<const char*>>> groups = {
      {"Basic Functionality", {"General", "Input", "Output", "Target"}},
      {"Advanced Functionality", {"Feature", "Model Tuning", "Operator Tuning", "Debug"}},
  };
  for (const auto& [group, sections] : groups) {
    out += fmt::format("\n===== {} =====\n", group);
    for (const char* section : sections) {
      out += fmt::format("[{}]\n", section);
      for (const AtcFlagInfo& f : atcFlagTable()) {
        if (f.section != section || f.hidden) continue;
        std::string name = f.name == "help" ? "--h/help" : "--" + f.name;
        std::string help = f.help;
        if (f.use == AtcFlagUse::Ignored) help += " [accepted, no effect in kiln]";
        if (f.use == AtcFlagUse::Rejected) help += " [not supported by kiln]";
        if (!f.defaultValue.empty() && f.type != S::Bool)
          help += fmt::format(" Default: {}", f.defaultValue);
        if (name.size() < 20)
          out += fmt::format("  {:<20}{}\n", name, help);
        else
          out += fmt::format("  {}\n  {:<20}{}\n", name, "", help);
      }
      if (std::string(section) == "Output")
        out += "  Supported --host_env_os/--host_env_cpu: linux with x86_64, aarch64; minios "
               "with aarch64. Default: this host.\n";
    }
  }
  return out;
}

} // namespace kiln
