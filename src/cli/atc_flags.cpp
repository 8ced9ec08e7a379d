// atc's flag table and its getopt-style command-line parser (ATC's flag names, defaults, value sets
// and parse errors).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "atc_errors.h"
#include "kiln/backends/atc.h"
#include "kiln/support/suggest.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using S = AtcFlagType;
using U = AtcFlagUse;

const std::vector<std::string> kZeroOne = {"0", "1"};

std::vector<std::string> sorted(std::vector<std::string> values) {
  std::sort(values.begin(), values.end());
  return values;
}

AtcFlagInfo flag(std::string name, AtcFlagType type, std::string def, std::string section,
                 std::string help, AtcFlagUse use = U::Ignored, std::string note = {}) {
  AtcFlagInfo f;
  f.name = std::move(name);
  f.type = type;
  f.defaultValue = std::move(def);
  f.section = std::move(section);
  f.help = std::move(help);
  f.use = use;
  f.note = std::move(note);
  return f;
}

AtcFlagInfo withSet(AtcFlagInfo f, std::vector<std::string> values, std::string code) {
  f.valueSet = std::move(values);
  f.valueSetCode = std::move(code);
  return f;
}

const char* kNoKernels = "kiln builds no device kernels";
const char* kNoDevice = "kiln targets no physical device";
const char* kNoFusion = "kiln's own pass pipeline decides fusion and scheduling";

std::vector<AtcFlagInfo> buildFlagTable() {
  std::vector<AtcFlagInfo> t;
  // [General]
  t.push_back(flag("help", S::Bool, "false", "General", "Show this help message", U::Used));
  t.push_back(withSet(flag("mode", S::Int, "0", "General",
                           "Run mode. 0: framework model to .om; 1: .om or ONNX model to JSON; 3: "
                           "only pre-check; 6: display .om model info",
                           U::Used),
                      // ATC prints this set in this order (om.md §2.1).
                      {"0", "1", "30", "3", "5", "6", "7"}, "E10001"));
  t.push_back(flag("cann_atc", S::String, "", "General",
                   "kiln only: CANN's atc (also KILN_CANN_ATC; an atc on PATH that is not kiln's "
                   "is used unless KILN_CANN_ATC=off). --mode=0 checks and simplifies the model "
                   "in kiln, then CANN's atc builds the device-runnable .om from it with the "
                   "same flags",
                   U::Used));
  // [Input]
  t.push_back(flag("model", S::String, "", "Input", "Model file (ONNX .onnx)", U::Used));
  t.push_back(flag("weight", S::String, "", "Input", "Weight file (Caffe only)", U::Used));
  t.push_back(flag("om", S::String, "", "Input",
                   "The .om (or, with --framework=5, ONNX) model "
                   "for --mode=1 and --mode=6",
                   U::Used));
  t.push_back(withSet(flag("framework", S::Int, "-1", "Input",
                           "Framework type. 0: Caffe; 1: MindSpore; 3: TensorFlow; 5: ONNX "
                           "(kiln converts ONNX)",
                           U::Used),
                      {"0", "1", "3", "5"}, "E10007"));
  t.push_back(flag("input_format", S::String, "", "Input",
                   "Input layout: NCHW, ND or NCDHW for ONNX (default NCHW)", U::Used));
  t.push_back(flag("input_shape", S::String, "", "Input",
                   "Input shapes, e.g. \"input_name1:n1,c1,h1,w1;input_name2:n2,c2,h2,w2\"",
                   U::Used));
  t.push_back(flag("input_shape_range", S::String, "", "Input",
                   "Deprecated: input shape ranges \"name:[n1~n2,c,h,w]\"", U::Rejected,
                   "give ranges in --input_shape instead (\"name:1~4,3,224,224\")"));
  t.push_back(flag("input_hint_shape", S::String, "", "Input",
                   "Shape hints for dynamic inputs \"index1:[n,c,h,w];index2:[...]\"", U::Rejected,
                   "kiln does not tune dynamic-shape kernels"));
  t.push_back(flag("dynamic_batch_size", S::String, "", "Input",
                   "Batch gears, e.g. \"1,2,4,8\" (N of --input_shape is -1)", U::Used));
  t.push_back(flag("dynamic_image_size", S::String, "", "Input",
                   "Image-size gears, e.g. \"224,224;448,448\" (H and W are -1)", U::Used));
  t.push_back(flag(
      "dynamic_dims", S::String, "", "Input",
      "ND gears, e.g. \"1,224;2,448\" (one value per -1 of --input_shape; needs --input_format=ND)",
      U::Used));
  t.push_back(flag("singleop", S::String, "", "Input", "Single-op description JSON file",
                   U::Rejected, "kiln converts whole ONNX models only"));
  // [Output]
  t.push_back(flag("output", S::String, "", "Output",
                   "Output path and name without suffix; \".om\" is appended", U::Used));
  t.push_back(flag("output_type", S::String, "", "Output",
                   "Output data type of all outputs: FP32 or FP16", U::Used));
  t.push_back(flag("check_report", S::String, "check_result.json", "Output",
                   "Pre-check report file", U::Used));
  t.push_back(flag("json", S::String, "", "Output", "JSON file written by --mode=1", U::Used));
  t.push_back(flag("host_env_os", S::String, "", "Output",
                   "OS of the host running the model "
                   "(linux, minios)",
                   U::Ignored, "kiln embeds no operator libraries in the .om"));
  t.push_back(flag("host_env_cpu", S::String, "", "Output",
                   "CPU of the host running the model (x86_64, aarch64, arm64, arm)", U::Ignored,
                   "kiln embeds no operator libraries in the .om"));
  // [Target]
  t.push_back(flag("soc_version", S::String, "", "Target", "The chip, e.g. Ascend310P3", U::Used));
  t.push_back(withSet(flag("virtual_type", S::Int, "0", "Target",
                           "1: the model may run on a virtual (compute-split) device"),
                      kZeroOne, "E10006"));
  t.back().note = kNoDevice;
  t.push_back(withSet(flag("core_type", S::String, "AiCore", "Target",
                           "AiCore or VectorCore (VectorCore only on Ascend310P*)", U::Used),
                      {"AiCore", "VectorCore"}, "E10001"));
  t.push_back(flag("aicore_num", S::String, "", "Target", "Cores to use, \"N|M\" (cube|vector)",
                   U::Ignored, kNoDevice));
  // [Feature]
  t.push_back(flag("out_nodes", S::String, "", "Feature",
                   "Output nodes \"node:idx;node2:idx\" or ONNX output names", U::Rejected,
                   "kiln keeps the model's graph outputs; expose others with `kiln convert "
                   "--expose` first"));
  t.push_back(flag("input_fp16_nodes", S::String, "", "Feature",
                   "Inputs that take fp16 data, \"name1;name2\"", U::Used));
  t.push_back(flag("is_input_adjust_hw_layout", S::String, "", "Feature",
                   "\"true,false,...\": fp16 NC1HWC0 inputs (pairs with --input_fp16_nodes)",
                   U::Rejected, "kiln keeps inputs in the model's layout"));
  t.push_back(flag("is_output_adjust_hw_layout", S::String, "", "Feature",
                   "\"true,false,...\": NC1HWC0 outputs (pairs with --out_nodes)", U::Rejected,
                   "kiln keeps outputs in the model's layout"));
  t.push_back(flag("insert_op_conf", S::String, "", "Feature", "AIPP configuration file", U::Used));
  t.push_back(flag("op_name_map", S::String, "", "Feature", "Custom op mapping file (Caffe only)",
                   U::Rejected, "kiln converts ONNX models only"));
  t.push_back(withSet(flag("external_weight", S::String, "0", "Feature",
                           "1: weights in files under weight/ beside the .om", U::Used),
                      {"0", "1", "2"}, "E10006"));
  // [Model Tuning]
  t.push_back(withSet(
      flag("disable_reuse_memory", S::Int, "0", "Model Tuning", "1: no feature-map memory reuse"),
      kZeroOne, "E10006"));
  t.back().note = kNoDevice;
  t.push_back(flag("fusion_switch_file", S::String, "", "Model Tuning", "Fusion switch file",
                   U::Ignored, kNoFusion));
  t.push_back(flag("enable_scope_fusion_passes", S::String, "", "Model Tuning",
                   "TensorFlow scope fusion passes", U::Ignored, "TensorFlow only"));
  t.push_back(flag("enable_single_stream", S::String, "", "Model Tuning",
                   "true: one stream for the model", U::Ignored, kNoDevice));
  t.push_back(flag("ac_parallel_enable", S::String, "0", "Model Tuning",
                   "1: AI CPU and AI Core in parallel (dynamic graphs)", U::Ignored, kNoDevice));
  t.push_back(flag("tiling_schedule_optimize", S::String, "0", "Model Tuning",
                   "1: tiling on the device", U::Ignored, kNoKernels));
  t.push_back(flag("quant_dumpable", S::String, "", "Model Tuning",
                   "1: keep quantized ops dumpable", U::Ignored, kNoDevice));
  t.push_back(flag("enable_small_channel", S::String, "0", "Model Tuning",
                   "1: small-channel convolution optimization", U::Ignored, kNoKernels));
  t.push_back(flag("enable_compress_weight", S::String, "false", "Model Tuning",
                   "true: compress weights", U::Rejected, "kiln does not compress weights"));
  t.push_back(flag("compress_weight_conf", S::String, "", "Model Tuning",
                   "Nodes whose weights are compressed", U::Rejected,
                   "kiln does not compress weights"));
  t.push_back(flag("compression_optimize_conf", S::String, "", "Model Tuning",
                   "Compression (AMCT) configuration", U::Rejected, "AMCT is not part of kiln"));
  t.push_back(flag("enable_attr_compression", S::String, "true", "Model Tuning",
                   "Compress attribute names and values in the .om", U::Ignored,
                   "the .om writer decides"));
  t.push_back(withSet(flag("sparsity", S::Int, "0", "Model Tuning", "1: 2:4 structured sparsity"),
                      kZeroOne, "E10006"));
  t.back().note = kNoKernels;
  t.push_back(withSet(flag("buffer_optimize", S::String, "l2_optimize", "Model Tuning",
                           "l1_optimize, l2_optimize or off_optimize"),
                      {"l1_optimize", "l2_optimize", "off_optimize"}, "E10001"));
  t.back().note = kNoDevice;
  t.push_back(flag("mdl_bank_path", S::String, "", "Model Tuning", "Subgraph tuning bank",
                   U::Ignored, kNoKernels));
  t.push_back(flag("oo_level", S::String, "O3", "Model Tuning", "Optimization level: O1 or O3",
                   U::Ignored, kNoFusion));
  t.push_back(flag("oo_constant_folding", S::String, "true", "Model Tuning",
                   "Constant folding: true or false", U::Ignored, kNoFusion));
  t.push_back(flag("oo_dead_code_elimination", S::String, "true", "Model Tuning",
                   "Dead-code elimination: true or false", U::Ignored, kNoFusion));
  t.push_back(flag("topo_sorting_mode", S::String, "", "Model Tuning",
                   "0 BFS, 1 DFS, 2 RDFS, 3 StableRDFS", U::Ignored, kNoFusion));
  t.push_back(flag("export_compile_stat", S::String, "1", "Model Tuning",
                   "0 none, 1 fusion_result.json at exit, 2 at graph-compile end", U::Ignored,
                   kNoFusion));
  t.push_back(flag("multi_stream_parallel_mode", S::String, "", "Model Tuning",
                   "cv, LoadBalance:N, MainStream:N", U::Ignored, kNoDevice));
  t.push_back(flag("static_model_ops_lower_limit", S::String, "", "Model Tuning",
                   "Smallest static subgraph, -1 = everything dynamic", U::Ignored, kNoDevice));
  t.push_back(flag("h2d_overlapped_with_compute", S::String, "", "Model Tuning",
                   "0, 1, or ascending boundaries \"44,64,68\"", U::Ignored, kNoDevice));
  t.push_back(flag("build_config", S::String, "", "Model Tuning",
                   "make command template for generated sources", U::Ignored, kNoKernels));
  t.push_back(flag("save_original_model", S::String, "", "Model Tuning",
                   "true: also write <output>_original.om", U::Rejected,
                   "kiln writes one .om per run"));
  t.push_back(flag("cluster_config", S::String, "", "Model Tuning", "Cluster configuration JSON",
                   U::Ignored, kNoDevice));
  t.push_back(flag("hccl_sub_comm_config", S::String, "", "Model Tuning",
                   "HCCL sub-communicator JSON", U::Ignored, kNoDevice));
  t.push_back(flag("raw_ge_options", S::String, "", "Model Tuning", "JSON file of compile options",
                   U::Rejected, "pass the options as atc flags instead"));
  t.push_back(flag("raw_ge_options_ignore_unsupported", S::Bool, "false", "Model Tuning",
                   "true: skip unsupported keys of --raw_ge_options", U::Ignored,
                   "--raw_ge_options is not read"));
  // [Operator Tuning]
  t.push_back(
      withSet(flag("precision_mode", S::String, "", "Operator Tuning",
                   "force_fp16 (default), force_fp32, allow_mix_precision, allow_fp32_to_fp16, "
                   "must_keep_origin_dtype, allow_mix_precision_fp16; not built by kiln: "
                   "cube_fp16in_fp32out, allow_mix_precision_bf16, allow_fp32_to_bf16",
                   U::Used),
              sorted({"force_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision",
                      "allow_fp32_to_fp16", "must_keep_origin_dtype", "allow_mix_precision_fp16",
                      "allow_mix_precision_bf16", "allow_fp32_to_bf16"}),
              "E10001"));
  t.push_back(withSet(flag("precision_mode_v2", S::String, "", "Operator Tuning",
                           "fp16 (default), origin, mixed_float16; not built by kiln: "
                           "cube_fp16in_fp32out, mixed_bfloat16, cube_hif8, mixed_hif8",
                           U::Used),
                      sorted({"fp16", "origin", "cube_fp16in_fp32out", "mixed_float16",
                              "mixed_bfloat16", "cube_hif8", "mixed_hif8"}),
                      "E10001"));
  t.push_back(flag("modify_mixlist", S::String, "", "Operator Tuning",
                   "JSON moving op types between the mixed-precision lists", U::Rejected,
                   "kiln's mixed-precision lists are built in"));
  t.push_back(flag("keep_dtype", S::String, "", "Operator Tuning",
                   "File of op names (or OpType::Type lines) kept in their original dtype",
                   U::Used));
  t.push_back(flag("customize_dtypes", S::String, "", "Operator Tuning",
                   "File of per-op input/output dtypes", U::Rejected,
                   "use --keep_dtype for ops that must stay fp32"));
  t.push_back(flag("op_precision_mode", S::String, "", "Operator Tuning",
                   ".ini file of per-op implementation modes", U::Ignored, kNoKernels));
  t.push_back(withSet(flag("op_select_implmode", S::String, "", "Operator Tuning",
                           "high_precision, high_performance, high_precision_for_all, "
                           "high_performance_for_all"),
                      sorted({"high_precision", "high_performance", "high_precision_for_all",
                              "high_performance_for_all"}),
                      "E10001"));
  t.back().note = kNoKernels;
  t.push_back(flag("optypelist_for_implmode", S::String, "", "Operator Tuning",
                   "Op types for --op_select_implmode", U::Ignored, kNoKernels));
  t.push_back(
      flag("allow_hf32", S::String, "", "Operator Tuning", "Reserved", U::Ignored, kNoKernels));
  t.push_back(
      flag("is_weight_clip", S::String, "1", "Operator Tuning",
           "1: clip fp32 weights to the fp16 range before the cast", U::Used,
           "given as 1, weights past fp16's range saturate at +-65504; not given, kiln keeps "
           "their nodes fp32 (exact) and says so"));
  t.push_back(flag("op_bank_path", S::String, "", "Operator Tuning", "Op tuning bank", U::Ignored,
                   kNoKernels));
  t.push_back(withSet(flag("jit_compile", S::String, "1", "Operator Tuning",
                           "0 binary kernels first, 1 online compile, 2 mixed"),
                      {"0", "1", "2"}, "E10001"));
  t.back().note = kNoKernels;
  t.push_back(flag("optimization_switch", S::String, "", "Operator Tuning",
                   "\"Pass1:on;Pass2:off\"", U::Ignored, kNoFusion));
  t.push_back(flag("auto_tune_mode", S::String, "", "Operator Tuning", "Removed (use AOE)",
                   U::Rejected, "removed from ATC"));
  t.push_back(withSet(
      flag("deterministic", S::String, "0", "Operator Tuning", "1: deterministic computation"),
      kZeroOne, "E10006"));
  t.back().note = "kiln's output does not depend on scheduling";
  t.push_back(withSet(flag("deterministic_level", S::String, "0", "Operator Tuning",
                           "0 off, 1 deterministic, 2 strong consistency, 3 batch consistency"),
                      {"0", "1", "2", "3"}, "E10001"));
  t.back().note = "kiln's output does not depend on scheduling";
  // [Debug]
  t.push_back(withSet(flag("op_debug_level", S::Int, "0", "Debug", "Kernel debug output 0..4"),
                      {"0", "1", "2", "3", "4"}, "E10001"));
  t.back().note = kNoKernels;
  t.push_back(flag("op_debug_config", S::String, "", "Debug", "Kernel debug options file",
                   U::Ignored, kNoKernels));
  t.push_back(
      flag("debug_dir", S::String, "", "Debug", "Kernel debug folder", U::Ignored, kNoKernels));
  t.push_back(
      withSet(flag("log", S::String, "null", "Debug",
                   "Log level: debug, info, warning, error, null, any case (to stderr; stdout with "
                   "ASCEND_SLOG_PRINT_TO_STDOUT=1). Not given: ASCEND_GLOBAL_LOG_LEVEL 0-4",
                   U::Used),
              sorted({"debug", "info", "warning", "error", "null"}), "E10010"));
  t.push_back(withSet(flag("dump_mode", S::String, "0", "Debug",
                           "1: --mode=1 on an original model also infers shapes"),
                      kZeroOne, "E10006"));
  t.back().note = "--mode=1 prints the ONNX model as stored";
  t.push_back(withSet(flag("status_check", S::String, "0", "Debug", "1: overflow checks"), kZeroOne,
                      "E10006"));
  t.back().note = kNoKernels;
  t.push_back(flag("op_compiler_cache_dir", S::String, "", "Debug", "Kernel cache folder",
                   U::Ignored, kNoKernels));
  t.push_back(withSet(
      flag("op_compiler_cache_mode", S::String, "disable", "Debug", "enable, disable or force"),
      {"disable", "enable", "force"}, "E10001"));
  t.back().note = kNoKernels;
  t.push_back(withSet(flag("display_model_info", S::String, "0", "Debug",
                           "1: print the model info after conversion", U::Used),
                      kZeroOne, "E10006"));
  t.push_back(withSet(flag("shape_generalized_build_mode", S::String, "shape_precise", "Debug",
                           "Deprecated: shape_generalized or shape_precise"),
                      {"shape_generalized", "shape_precise"}, "E10001"));
  t.back().note = "deprecated";
  t.push_back(withSet(
      flag("atomic_clean_policy", S::String, "0", "Debug", "0 centralized memory clean, 1 per op"),
      kZeroOne, "E10006"));
  t.back().note = kNoDevice;
  t.push_back(flag("device_id", S::String, "0", "Debug", "Device id", U::Ignored, kNoDevice));
  t.back().hidden = true;
  t.push_back(flag("target", S::String, "", "Debug", "Legacy", U::Ignored, "legacy flag"));
  t.back().hidden = true;
  t.push_back(flag("cal_conf", S::String, "", "Debug", "Legacy calibration configuration",
                   U::Ignored, "legacy flag"));
  t.back().hidden = true;
  return t;
}

// The value-set check ATC runs while parsing (before the type check).
Status valueSetError(const AtcFlagInfo& f, const std::string& value) {
  if (f.valueSetCode == "E10006")
    return atcError("E10006",
                    fmt::format("Value {} for parameter --{} is invalid. The value must be either "
                                "1 or 0.",
                                value, f.name),
                    fmt::format("use --{}=0 or --{}=1", f.name, f.name));
  if (f.valueSetCode == "E10007")
    return atcError("E10007",
                    "--framework is required. The value must be 0(Caffe) or 1(MindSpore) or "
                    "3(TensorFlow) or 5(Onnx).",
                    "kiln converts ONNX: use --framework=5");
  if (f.valueSetCode == "E10010")
    return atcError("E10010", fmt::format("Value {} for parameter --log is invalid.", value),
                    "Select the value from debug, info, warning, error, and null.");
  return invalidValue("E10001", f.name, value, atcRangeText(f.valueSet),
                      fmt::format("use one of: {}", fmt::join(f.valueSet, ", ")));
}

std::optional<bool> parseBool(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v.empty() || v == "1" || v == "t" || v == "true" || v == "y" || v == "yes") return true;
  if (v == "0" || v == "f" || v == "false" || v == "n" || v == "no") return false;
  return std::nullopt;
}

Status checkValue(const AtcFlagInfo& f, const std::string& value) {
  if (!f.valueSet.empty() &&
      std::find(f.valueSet.begin(), f.valueSet.end(), value) == f.valueSet.end())
    return valueSetError(f, value);
  if (f.type == S::Int) {
    bool fits = isDigits(value) && value.size() <= 10 && std::stoll(value) <= INT32_MAX;
    if (!fits)
      return invalidValue("E10003", f.name, value, "The value type must be [int32].",
                          fmt::format("give --{} a non-negative integer", f.name));
  }
  if (f.type == S::Bool && !parseBool(value))
    return invalidValue("E10003", f.name, value, "The value type must be [bool].",
                        fmt::format("use --{}=true or --{}=false", f.name, f.name));
  return Status::ok();
}

} // namespace

const std::vector<AtcFlagInfo>& atcFlagTable() {
  static const std::vector<AtcFlagInfo> table = buildFlagTable();
  return table;
}

const AtcFlagInfo* findAtcFlag(const std::string& name) {
  for (const AtcFlagInfo& f : atcFlagTable())
    if (f.name == name) return &f;
  return nullptr;
}

std::string AtcArgs::get(const std::string& name) const {
  if (auto it = values.find(name); it != values.end()) return it->second;
  const AtcFlagInfo* f = findAtcFlag(name);
  return f ? f->defaultValue : "";
}

std::string atcRangeText(const std::vector<std::string>& values) {
  std::string text = "The value is not within the range of values. The valid range is ";
  for (const std::string& v : values)
    text += "[" + v + "] ";
  return text + ".";
}

// The fix for a flag ATC does not have: the nearest ATC flag when it looks like a typo, else a
// plain "not an ATC flag" (flags copied from other tools or posts, e.g. --graph_optimize_mode),
// since CANN's atc refuses it just the same.
std::string unknownFlagHint(const std::string& name) {
  std::vector<std::string> names;
  for (const AtcFlagInfo& f : atcFlagTable())
    if (!f.hidden) names.push_back(f.name);
  const std::string near = closestSpelling(name, names);
  if (!near.empty()) return fmt::format("did you mean --{}? (see `atc --help`)", near);
  return fmt::format("--{} is not an ATC flag (CANN's atc refuses it too); `atc --help` lists "
                     "ATC's flags",
                     name);
}

// Hand-written rather than CLI11: ATC's getopt_long behaviour (rewriting "-model=" to "--model=",
// '-' → '_' in names, "--flag value" only for non-bool flags, the value-set check before the type
// check, gflags-style error lines that go on after the first unknown flag) has no CLI11 setting.
AtcArgs parseAtcCommandLine(const std::vector<std::string>& rawArgs) {
  AtcArgs out;
  auto fail = [&](Status st) {
    if (out.error.isOk()) out.error = std::move(st);
  };
  auto lineError = [&](std::string line, std::string hint = "see `atc --help`") {
    out.errorLines.push_back(std::move(line));
    fail(Status(ErrorCode::BadFlag, out.errorLines.back().substr(7), std::move(hint)));
  };
  std::vector<std::string> positional;
  bool optionsEnded = false;
  for (size_t i = 0; i < rawArgs.size(); ++i) {
    std::string arg = rawArgs[i];
    if (arg.empty()) {
      lineError("ERROR: input argument value is empty or command line format is invalid");
      continue;
    }
    if (optionsEnded || arg[0] != '-' || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    // "-model=x" (a single dash and at least two letters) is read as "--model=x".
    if (arg[1] != '-' && arg.size() >= 3 && std::isalpha(static_cast<unsigned char>(arg[1])) &&
        std::isalpha(static_cast<unsigned char>(arg[2])))
      arg = "-" + arg;
    if (arg == "-h" || arg == "--h") {
      out.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      lineError(fmt::format("ERROR: unknown command line flag '{}'", arg.substr(1)),
                unknownFlagHint(arg.substr(1)));
      continue;
    }
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::replace(name.begin(), name.end(), '-', '_');
    const AtcFlagInfo* f = findAtcFlag(name);
    if (!f) {
      lineError(fmt::format("ERROR: unknown command line flag '{}'", name), unknownFlagHint(name));
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (f->type == S::Bool) {
      value = "true";
    } else if (i + 1 < rawArgs.size()) {
      value = rawArgs[++i];
    } else {
      lineError(fmt::format("ERROR: flag '{}' is missing its argument; flag description: {}",
                            rawArgs[i], f->help));
      continue;
    }
    // CANN's atc takes --log in any case (--log=INFO); the value set is lower-case. A value
    // that is no level in any case is reported as typed.
    if (f->name == "log") {
      std::string lower = value;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (std::find(f->valueSet.begin(), f->valueSet.end(), lower) != f->valueSet.end())
        value = lower;
    }
    if (Status st = checkValue(*f, value); !st) {
      fail(st);
      continue;
    }
    if (f->name == "help") {
      out.help = *parseBool(value);
      continue;
    }
    out.values[f->name] = value;
  }
  for (const std::string& p : positional)
    lineError(fmt::format("ERROR: Non-option parameter: {}", p));
  return out;
}

namespace {

// One command-line argument as the parser reads it: the flag's table name ("" for none), whether
// its value is the next argument, and the value when given with '='.
struct ArgFlag {
  std::string name;
  bool valueFollows = false;
  std::string value;
};

ArgFlag readArgFlag(const std::string& raw, bool hasNext) {
  ArgFlag out;
  std::string arg = raw;
  if (arg.size() < 2 || arg[0] != '-') return out;
  if (arg[1] != '-' && arg.size() >= 3 && std::isalpha(static_cast<unsigned char>(arg[1])) &&
      std::isalpha(static_cast<unsigned char>(arg[2])))
    arg = "-" + arg;
  if (arg.rfind("--", 0) != 0 || arg == "--") return out;
  const size_t eq = arg.find('=');
  std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
  std::replace(name.begin(), name.end(), '-', '_');
  const AtcFlagInfo* f = findAtcFlag(name);
  if (!f) return out;
  out.name = f->name;
  if (eq != std::string::npos)
    out.value = arg.substr(eq + 1);
  else
    out.valueFollows = f->type != S::Bool && hasNext;
  return out;
}

} // namespace

std::vector<std::string> cannAtcArgs(const std::vector<std::string>& args,
                                     const std::string& model) {
  std::vector<std::string> out;
  bool optionsEnded = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (optionsEnded || args[i] == "--") {
      optionsEnded = true;
      out.push_back(args[i]);
      continue;
    }
    const ArgFlag flag = readArgFlag(args[i], i + 1 < args.size());
    if (flag.name == "cann_atc" || flag.name == "model") {
      if (flag.valueFollows) ++i;
      if (flag.name == "model") out.push_back("--model=" + model);
      continue;
    }
    out.push_back(args[i]);
    if (flag.valueFollows) out.push_back(args[++i]);
  }
  return out;
}

std::string cannAtcFlag(const std::vector<std::string>& args) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") break;
    const ArgFlag flag = readArgFlag(args[i], i + 1 < args.size());
    if (flag.name == "cann_atc") value = flag.valueFollows ? args[i + 1] : flag.value;
    if (flag.valueFollows) ++i;
  }
  return value;
}

Status atcError(const char* peer, std::string message, std::string hint, ErrorCode code) {
  return Status(code, std::move(message), std::move(hint)).withPeerCode(peer);
}

// "Value V for parameter --F is invalid. Reason: R" (E10001) and the E10003 twin.
Status invalidValue(const char* peer, const std::string& flagName, const std::string& value,
                    const std::string& reason, std::string hint) {
  if (hint.empty()) hint = fmt::format("see `atc --help` for --{}", flagName);
  return atcError(
      peer,
      fmt::format("Value {} for parameter --{} is invalid. Reason: {}", value, flagName, reason),
      std::move(hint));
}

Status notSupported(const std::string& reason, std::string hint) {
  return atcError("E10055", fmt::format("The operation is not supported. Reason: {}", reason),
                  std::move(hint));
}

Status requiredEmpty(const std::string& flagName) {
  return atcError("E10054",
                  fmt::format("The required parameter --{} for ATC is empty. Another possible "
                              "reason is that the values of some parameters are not enclosed by "
                              "quotation marks (\"\").",
                              flagName),
                  fmt::format("pass --{}=<value>", flagName));
}

bool isDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

} // namespace kiln
