// atc's run modes: 0 (ONNX → .om), 1 (.om or ONNX → JSON), 3 (pre-check report), 6 (.om info).
#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include "kiln/backends/aipp.h"
#include "kiln/backends/atc.h"
#include "kiln/backends/lowering.h"
#include "kiln/backends/om.h"
#include "kiln/check.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/shape_conflicts.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/sensitivity.h"
#include "kiln/shape_spec.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/json_text.h"
#include "kiln/support/mapped_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

Status withAtc(Status kilnError, const char* peer, const std::string& atcMessage,
               AtcResult& result) {
  result.errors.push_back(
      Status(kilnError.code(), atcMessage, kilnError.hint()).withPeerCode(peer));
  result.errors.push_back(kilnError);
  return kilnError;
}

// Fails with `errors` (ATC messages, first is the head) and returns the kiln status to report.
Status failWith(std::vector<Status> errors, AtcResult& result) {
  for (Status& e : errors)
    result.errors.push_back(e);
  return result.errors.front();
}

// A node refused once shape inference knows its input ranks (an axis outside the rank): ATC fails
// such a node in InferShape, with its inner-error code.
Status inferShapeFailure(Status st, AtcResult& result) {
  if (st.code() != ErrorCode::BadAttribute) return st;
  return failWith({st.withPeerCode("E19999")}, result);
}

Expected<Model> loadOnnx(const std::string& path, AtcResult& result) {
  auto model =
      fs::path(path).extension() == ".onnxtxt" ? importOnnxTextFile(path) : importOnnxFile(path);
  if (!model) {
    Status st = model.status();
    return withAtc(st, "E10041", fmt::format("Failed to load the model from {}.", path), result);
  }
  return model;
}

bool inputIsDynamic(const Value& v) { return !v.shape().hasRank() || !v.shape().isStatic(); }

std::vector<const Value*> modelInputs(const Graph& g) {
  std::vector<const Value*> out;
  for (const Value* v : g.inputs())
    if (!v->isInitializer()) out.push_back(v);
  return out;
}

bool namesNode(const Graph& g, const std::string& name) {
  if (g.findLocalValue(name)) return true;
  for (const auto& node : g.nodes())
    if (node->name() == name) return true;
  return false;
}

// Problems with the shapes the user gave (or did not give), per graph input name ("" = general).
std::vector<std::pair<std::string, Status>> shapeProblems(const AtcOptions& o, const Graph& g,
                                                          std::optional<ShapeSpec>& spec) {
  std::vector<std::pair<std::string, Status>> problems;
  if (o.inputShape.empty()) {
    for (const Value* v : modelInputs(g))
      if (inputIsDynamic(*v))
        problems.emplace_back(
            v->name(),
            Status(ErrorCode::ShapeSpecBadDim,
                   "Value NULL for parameter --input_shape is invalid. Reason: The shapes of "
                   "inputs contain -1 in the model. You may need to set input shape to specify "
                   "its shape.",
                   fmt::format("input '{}' is {}: pass --input_shape=\"{}:<dims>\"", v->name(),
                               v->shape().toString(), v->name()))
                .withPeerCode("E10001"));
    return problems;
  }
  auto parsed = parseShapeSpec(o.inputShape, ShapeDialect::Atc);
  if (!parsed) {
    problems.emplace_back("", parsed.status());
    return problems;
  }
  spec = parsed.take();
  for (const InputShapeSpec& entry : spec->inputs) {
    ShapeSpec one = *spec;
    one.inputs = {entry};
    const Value* input = findSpecInput(entry, g);
    for (Status& st : validateShapeSpec(one, g)) {
      // A name that exists but is not a graph input is ATC's "not a Data node".
      if (!input && !entry.name.empty() && namesNode(g, entry.name))
        st = Status(st.code(),
                    fmt::format("Input Op {} specified in --input_shape is invalid. The Op type "
                                "must be Data.",
                                entry.name),
                    st.hint())
                 .withPeerCode("E10017");
      problems.emplace_back(input ? input->name() : entry.name, std::move(st));
    }
  }
  return problems;
}

std::vector<std::pair<std::string, Status>> fp16NodeProblems(const AtcOptions& o, const Graph& g) {
  std::vector<std::pair<std::string, Status>> problems;
  std::set<std::string> names;
  for (const Value* v : modelInputs(g))
    names.insert(v->name());
  for (const std::string& n : o.inputFp16Nodes)
    if (!names.count(n))
      problems.emplace_back(
          n, Status(ErrorCode::AtcOptionInvalid,
                    fmt::format("Op name {} specified in --input_fp16_nodes is not found in the "
                                "model. Confirm whether this node name exists, or whether the "
                                "node is not split with the specified delimiter ';'.",
                                n),
                    fmt::format("the model's inputs are: {}", fmt::join(names, ", ")))
                 .withPeerCode("E10016"));
  return problems;
}

struct Unsupported {
  std::string node; // as ATC names it: the node's name, else its first output's
  std::string opType;
  std::string reason;
  std::string label; // lowering::nodeLabel, for kiln's own line
};

void collectUnsupported(const Graph& g, const std::string& soc, int64_t opset,
                        std::vector<Unsupported>& out) {
  size_t position = 0;
  for (const auto& node : g.nodes()) {
    ++position;
    std::string reason = omUnsupportedReason(*node, soc, opset);
    if (!reason.empty()) {
      std::string name = node->name();
      if (name.empty() && !node->outputs().empty() && node->output(0))
        name = node->output(0)->name();
      out.push_back({name, node->opType(), reason, lowering::nodeLabel(*node, position)});
    }
    for (const Graph* sub : node->subgraphs())
      collectUnsupported(*sub, soc, opset, out);
  }
}

std::string joinDims(const std::vector<int64_t>& dims) {
  return fmt::format("{}", fmt::join(dims, ","));
}

// The fix for ops refused on dynamic shapes (a range or -1 in --input_shape): they do take
// static shapes, so the way out is a static --input_shape or gears, never another exporter. The
// suggestion is built from the user's own spec: each range's bounds become two gears, as image
// sizes when only H and W of 4-D inputs vary, as batch sizes when only N does, else as dims.
std::string dynamicShapeHint(const std::string& inputShapeText) {
  const std::string generic =
      "these ops take static shapes only: give each input a static --input_shape, or gears "
      "(-1 in --input_shape with --dynamic_batch_size, --dynamic_image_size or --dynamic_dims)";
  auto spec = parseShapeSpec(inputShapeText, ShapeDialect::Atc);
  if (inputShapeText.empty() || !spec || !spec->hasDynamic()) return generic;
  std::vector<std::string> staticEntries, gearEntries;
  std::vector<int64_t> low, high;
  bool bounded = true, onlyBatch = true;
  size_t hwInputs = 0; // 4-D inputs whose H and W (and nothing else) vary
  for (const InputShapeSpec& in : spec->inputs) {
    std::vector<std::string> staticDims, gearDims;
    std::vector<size_t> varying;
    for (size_t i = 0; i < in.dims.size(); ++i) {
      const DimSpec& d = in.dims[i];
      if (d.isStatic()) {
        staticDims.push_back(std::to_string(d.lo));
        gearDims.push_back(std::to_string(d.lo));
        continue;
      }
      const bool known = d.ranged && d.hi > 0;
      bounded = bounded && known && d.lo > 0;
      staticDims.push_back(known ? std::to_string(d.hi) : "<size>");
      gearDims.push_back("-1");
      low.push_back(d.lo);
      high.push_back(d.hi);
      varying.push_back(i);
      onlyBatch = onlyBatch && i == 0;
    }
    if (in.dims.size() == 4 && varying == std::vector<size_t>{2, 3}) ++hwInputs;
    const std::string name = in.name.empty() ? "" : in.name + ":";
    staticEntries.push_back(name + fmt::format("{}", fmt::join(staticDims, ",")));
    gearEntries.push_back(name + fmt::format("{}", fmt::join(gearDims, ",")));
  }
  std::string gears;
  const size_t varyingInputs =
      std::count_if(spec->inputs.begin(), spec->inputs.end(), [](const InputShapeSpec& in) {
        return std::any_of(in.dims.begin(), in.dims.end(),
                           [](const DimSpec& d) { return !d.isStatic(); });
      });
  if (hwInputs > 0 && hwInputs == varyingInputs) {
    gears = bounded && low.size() == 2
                ? fmt::format("--dynamic_image_size=\"{};{}\"", joinDims(low), joinDims(high))
                : "--dynamic_image_size=\"h1,w1;h2,w2\"";
  } else if (onlyBatch) {
    gears = bounded && low.size() == 1
                ? fmt::format("--dynamic_batch_size=\"{},{}\"", low[0], high[0])
                : "--dynamic_batch_size=\"n1,n2\"";
  } else {
    const std::string oneGear =
        fmt::format("{}", fmt::join(std::vector<std::string>(low.size(), "<size>"), ","));
    const std::string placeholderGears = oneGear + ";" + oneGear;
    gears = fmt::format("--input_format=ND --dynamic_dims=\"{}\"",
                        bounded ? joinDims(low) + ";" + joinDims(high) : placeholderGears);
  }
  return fmt::format("these ops take static shapes only, and a range or -1 in --input_shape makes "
                     "the model dynamic: give a static shape (--input_shape=\"{}\") or gears "
                     "(--input_shape=\"{}\" {}, adding the sizes between that you need)",
                     fmt::join(staticEntries, ";"), fmt::join(gearEntries, ";"), gears);
}

// ATC's messages for unsupported ops: one E16002 per op type, then each node with kiln's reason.
std::vector<Status> unsupportedErrors(const std::vector<Unsupported>& nodes, const AtcOptions& o) {
  const std::string& soc = o.socVersion;
  std::vector<Status> errors;
  std::set<std::string> types;
  std::vector<std::string> list;
  bool dynamicOnly = !nodes.empty();
  for (const Unsupported& u : nodes) {
    list.push_back(fmt::format("{} ({})", u.node, u.opType));
    dynamicOnly = dynamicOnly && u.reason.find("dynamic shape") != std::string::npos;
  }
  std::string hint =
      dynamicOnly ? dynamicShapeHint(o.inputShape)
                  : fmt::format("replace the ops in the exporter; `atc --mode=3` or `kiln check "
                                "MODEL --target om:{}` lists them all",
                                soc);
  // An op type with no lowering at all is ATC's "no parser" (E16002); an op that lowers but not
  // in this use (attribute, dtype, dynamic shape) is its "no kernel" (EZ3003).
  for (const Unsupported& u : nodes) {
    // (An If or Loop refused for a node inside it names that node, which has its own entry.)
    const bool forInnerNode = u.reason.rfind("then_branch: ", 0) == 0 ||
                              u.reason.rfind("else_branch: ", 0) == 0 ||
                              u.reason.rfind("body: ", 0) == 0;
    bool noLowering = !forInnerNode && u.reason.find("has no GraphEngine") != std::string::npos;
    if (noLowering && types.insert(u.opType).second)
      errors.push_back(Status(ErrorCode::OmLowerUnsupported,
                              fmt::format("No ONNX parser is registered for optype {}.", u.opType),
                              hint)
                           .withPeerCode("E16002"));
    if (!noLowering)
      errors.push_back(Status(ErrorCode::OmLowerUnsupported,
                              fmt::format("No supported Ops kernel and engine are found for [{}], "
                                          "optype [{}].",
                                          u.node, u.opType),
                              hint)
                           .withPeerCode("EZ3003"));
  }
  for (const Unsupported& u : nodes)
    errors.push_back(Status(ErrorCode::OmLowerUnsupported,
                            fmt::format("{} on {}: {}", u.label, soc, u.reason), hint));
  return errors;
}

// check_result.json (om.md §2.8): one entry per graph input ("Data") and per node.
std::string checkReportJson(const std::string& modelName, const Graph& g,
                            const std::vector<std::pair<std::string, Status>>& inputProblems,
                            const std::vector<Unsupported>& unsupported,
                            const std::vector<ShapeConflict>& conflicts, bool nodesChecked) {
  constexpr int kTypeUnsupported = 1, kParamInvalid = 2;
  nlohmann::json ops = nlohmann::json::array();
  size_t fail = 0;
  auto addOp = [&](const std::string& name, const std::string& type, nlohmann::json causes) {
    bool failed = !causes.empty();
    fail += failed ? 1 : 0;
    ops.push_back({{"name", name},
                   {"type", type},
                   {"result", failed ? "failed" : "success"},
                   {"cause", std::move(causes)}});
  };
  std::set<std::string> placed;
  for (const Value* v : modelInputs(g)) {
    nlohmann::json causes = nlohmann::json::array();
    for (const auto& [name, st] : inputProblems)
      if (name == v->name()) {
        causes.push_back({{"code", kParamInvalid}, {"message", st.message()}});
        placed.insert(name);
      }
    addOp(v->name(), "Data", std::move(causes));
  }
  // Problems not tied to one input (a spec naming no input, a syntax error).
  for (const auto& [name, st] : inputProblems)
    if (!placed.count(name))
      addOp(name.empty() ? "--input_shape" : name, "Data",
            nlohmann::json::array({{{"code", kParamInvalid}, {"message", st.message()}}}));
  std::function<void(const Graph&)> walk = [&](const Graph& graph) {
    for (const auto& node : graph.nodes()) {
      std::string name = node->name();
      if (name.empty() && !node->outputs().empty() && node->output(0))
        name = node->output(0)->name();
      nlohmann::json causes = nlohmann::json::array();
      for (const Unsupported& u : unsupported)
        if (u.node == name && u.opType == node->opType())
          causes.push_back({{"code", kTypeUnsupported}, {"message", u.reason}});
      for (const ShapeConflict& c : conflicts)
        if (c.node == name && c.opType == node->opType())
          causes.push_back({{"code", kParamInvalid}, {"message", c.status.message()}});
      addOp(name, node->opType(), std::move(causes));
      for (const Graph* sub : node->subgraphs())
        walk(*sub);
    }
  };
  if (nodesChecked) walk(g);
  // Conflicts ONNX's inference reported without a node name (unnamed nodes).
  for (const ShapeConflict& c : conflicts)
    if (c.node.empty())
      addOp("", c.opType,
            nlohmann::json::array({{{"code", kParamInvalid}, {"message", c.status.message()}}}));
  nlohmann::json report = {{"name", modelName},   {"result", fail ? "failed" : "success"},
                           {"total", ops.size()}, {"pass", ops.size() - fail},
                           {"fail", fail},        {"op", std::move(ops)}};
  return jsonText(report, 2) + "\n";
}

// The shared front half of modes 0 and 3: load, check inputs, fix shapes, AIPP, precision.
struct Prepared {
  Model model;
  std::vector<std::pair<std::string, Status>> inputProblems;
  std::vector<Unsupported> unsupported;
  std::vector<ShapeConflict> conflicts; // nodes that cannot run on the shapes they get
  bool pipelineRan = false;
};

Expected<Prepared> prepare(const AtcOptions& o, AtcResult& result) {
  KILN_ASSIGN_OR_RETURN(Model model, loadOnnx(o.model, result));
  spdlog::info("loaded {}: {} nodes, opset {}, {} input(s)", o.model, model.graph->nodes().size(),
               model.opsetVersion(""), modelInputs(*model.graph).size());
  for (const Value* v : modelInputs(*model.graph))
    spdlog::debug("input '{}': {} {}", v->name(), dtypeName(v->dtype()), v->shape().toString());
  Prepared p{std::move(model), {}, {}, {}, false};
  std::optional<ShapeSpec> spec;
  p.inputProblems = shapeProblems(o, *p.model.graph, spec);
  for (auto& problem : fp16NodeProblems(o, *p.model.graph))
    p.inputProblems.push_back(std::move(problem));
  if (!p.inputProblems.empty()) {
    // Without valid shapes only ops with no lowering at all can be judged: an op refused on the
    // model as stored may only lack the shapes the user meant to give (mode 3 lists both).
    if (o.handoff) return p; // CANN's atc judges the ops
    std::vector<Unsupported> stored;
    collectUnsupported(*p.model.graph, o.socVersion, p.model.opsetVersion(""), stored);
    for (Unsupported& u : stored)
      if (u.reason.find("has no GraphEngine") != std::string::npos)
        p.unsupported.push_back(std::move(u));
    return p;
  }
  if (o.handoff) {
    // CANN's atc does precision, AIPP and its own op rewrites from the flags it is given.
    ConversionOptions conversion;
    conversion.inputShapes = spec ? &*spec : nullptr;
    if (o.namesNodes) conversion.simplifyPasses = {"fix-input-shapes"};
    spdlog::debug("running kiln's simplification for CANN's atc");
    auto ran = runConversionPipeline(p.model, conversion);
    if (!ran) return inferShapeFailure(ran.status(), result);
    spdlog::info("after simplification: {} nodes", p.model.graph->nodes().size());
    p.conflicts = shapeConflicts(p.model);
    for (ShapeConflict& c : p.conflicts)
      c.status = c.status.withPeerCode("E19999");
    p.pipelineRan = true;
    return p;
  }
  PrecisionOptions precision;
  precision.mode = o.precision;
  precision.inputFp16Nodes = o.inputFp16Nodes;
  precision.outputsFp16 = o.outputType == "FP16";
  precision.clipWeights = o.clipWeights;
  // ATC: --keep_dtype has no effect with must_keep_origin_dtype / origin.
  if (!o.keepDtype.empty() && o.precision != PrecisionMode::KeepOrigin) {
    // The same reading as `kiln opt --keep-dtype-file` (an empty file is K4201 for both).
    auto unknown = addKeepDtypeFile(*p.model.graph, o.keepDtype, precision);
    if (!unknown) return failWith({unknown.status().withPeerCode("E10001")}, result);
  }
  ConversionOptions conversion;
  conversion.inputShapes = spec ? &*spec : nullptr;
  conversion.precision = &precision;
  conversion.target = o.socVersion.empty() ? "om" : "om:" + o.socVersion;
  // The precision guard (docs/precision.md) checks, or picks the fp32 nodes, where kiln chooses
  // the precision: the default force_fp16 and allow_mix_precision, without the user's own
  // --keep_dtype list. An explicit --precision_mode=force_fp16 converts every node it can, as
  // ATC does.
  PrecisionGuardOptions guardOptions;
  guardOptions.mode = precisionGuardMode();
  // Only when a model is written (mode 0): the precheck (mode 3) judges ops, not numbers.
  const bool guarded = o.mode == 0 && o.keepDtype.empty() &&
                       guardOptions.mode != PrecisionGuardMode::Off &&
                       ((o.precision == PrecisionMode::ForceFp16 && !o.precisionGiven) ||
                        o.precision == PrecisionMode::AllowMixPrecision);
  if (guarded)
    conversion.chooseFp16Keeps = [guardOptions](const Model& m, const PrecisionOptions& given,
                                                std::vector<std::string>& notes) {
      PrecisionGuardResult guard = guardFp16Precision(m, given, guardOptions);
      notes.insert(notes.end(), guard.notes.begin(), guard.notes.end());
      return guard.keep;
    };
  if (!o.insertOpConf.empty())
    conversion.afterSimplify = [&](Model& aippModel) -> Expected<bool> {
      auto config = parseAippConfigFile(o.insertOpConf);
      if (!config) return failWith({config.status()}, result);
      AippContext context;
      context.inputFp16Nodes = o.inputFp16Nodes;
      context.dynamicImageSize = !o.dynamicImageSize.empty();
      context.dynamicDims = !o.dynamicDims.empty();
      context.inputFormat = o.inputFormat;
      if (Status st = insertAipp(aippModel, *config, context); !st) return failWith({st}, result);
      return true;
    };
  spdlog::debug("running kiln's conversion pipeline for {}", conversion.target);
  auto ran = runConversionPipeline(p.model, conversion);
  if (!ran) return inferShapeFailure(ran.status(), result);
  spdlog::info("after simplification: {} nodes", p.model.graph->nodes().size());
  for (const std::string& note : ran->notes) {
    spdlog::info("{}", note);
    // A weight beyond fp16's range silently decides a node's precision: say it at any log level
    // (convert_fp16.cpp words these notes "... beyond fp16's 65504").
    if (note.find("beyond fp16's") != std::string::npos) result.warnings.push_back(note);
    // So do the precision guard's findings (a miss of the gate, or the nodes it kept).
    if (note.rfind("precision guard: ", 0) == 0 && note.rfind("precision guard: not run", 0) != 0)
      result.warnings.push_back(note);
  }
  // ATC fails these in InferShape; its message for them is an inner error.
  p.conflicts = shapeConflicts(p.model);
  for (ShapeConflict& c : p.conflicts)
    c.status = c.status.withPeerCode("E19999");
  p.pipelineRan = true;
  collectUnsupported(*p.model.graph, o.socVersion, p.model.opsetVersion(""), p.unsupported);
  return p;
}

Status writeCheckReport(const AtcOptions& o, const Prepared& p, AtcResult& result) {
  std::string json =
      checkReportJson(o.model, *p.model.graph, p.inputProblems, p.unsupported, p.conflicts, true);
  KILN_TRY(writeFileAtomically(o.checkReport, json));
  result.written.push_back(o.checkReport);
  return Status::ok();
}

// Every problem found before lowering, as ATC's messages (first one heads the error block).
std::vector<Status> prepareErrors(const Prepared& p, const AtcOptions& o) {
  std::vector<Status> errors;
  for (const auto& [name, st] : p.inputProblems)
    errors.push_back(st);
  for (Status& st : unsupportedErrors(p.unsupported, o))
    errors.push_back(std::move(st));
  for (const ShapeConflict& c : p.conflicts)
    errors.push_back(c.status);
  return errors;
}

// Writes the .om of `model` (or of `gears` when set) as atc's mode 0 names it.
Status writeAtcOm(const AtcOptions& o, const Model& model, std::shared_ptr<const OmGears> gears,
                  AtcResult& result) {
  OmWriteOptions write;
  write.socVersion = o.socVersion;
  // ATC names the model after the last path component without its last extension.
  write.modelName = fs::path(o.output).stem().string();
  write.externalWeight = o.externalWeight == 1;
  write.coreType = o.coreType == CoreType::VectorCore ? 1 : 0;
  write.modelAttributes["atc_cmdline"] = o.commandLine;
  write.gears = std::move(gears);
  std::string path = o.output + ".om";
  if (Status st = writeOmFile(model, write, path); !st) {
    if (st.peerCode().empty()) {
      const char* peer = st.code() == ErrorCode::FileWriteFailed ? "E13004" : "E19999";
      std::string msg =
          st.code() == ErrorCode::FileWriteFailed
              ? fmt::format("Failed to write file {}. Reason: {}.", path, st.message())
              : st.message();
      return withAtc(st, peer, msg, result);
    }
    return failWith({st}, result);
  }
  result.written.push_back(path);
  spdlog::info("wrote {} ({} bytes)", path, fs::file_size(path));
  if (o.displayModelInfo) {
    auto info = omInfoText(path);
    if (!info) return failWith({info.status()}, result);
    result.text += *info;
  }
  return Status::ok();
}

// --input_shape with its -1 dims set to one gear's values: every -1 is the batch for
// --dynamic_batch_size, the H and W axes (by --input_format) for --dynamic_image_size, and the
// -1s in order for --dynamic_dims.
std::string gearInputShape(const AtcOptions& o, const std::vector<int64_t>& gear) {
  const bool nhwc = o.inputFormat == "NHWC";
  size_t next = 0; // --dynamic_dims: the gear value the next -1 takes
  std::vector<std::string> entries;
  std::stringstream all(o.inputShape);
  for (std::string entry; std::getline(all, entry, ';');) {
    if (entry.empty()) continue;
    const size_t colon = entry.rfind(':');
    std::string head = colon == std::string::npos ? "" : entry.substr(0, colon + 1);
    std::string dims = colon == std::string::npos ? entry : entry.substr(colon + 1);
    std::vector<std::string> parts;
    std::stringstream dimStream(dims);
    for (std::string d; std::getline(dimStream, d, ',');)
      parts.push_back(d);
    for (size_t i = 0; i < parts.size(); ++i) {
      std::string trimmed = parts[i];
      trimmed.erase(0, trimmed.find_first_not_of(" []"));
      trimmed.erase(trimmed.find_last_not_of(" []") + 1);
      if (trimmed != "-1") continue;
      int64_t value = gear.front();
      if (!o.dynamicImageSize.empty())
        value = i == (nhwc ? 1u : 2u) ? gear[0] : gear[1];
      else if (!o.dynamicDims.empty())
        value = next < gear.size() ? gear[next++] : gear.back();
      parts[i] = std::to_string(value);
    }
    std::string joined;
    for (size_t i = 0; i < parts.size(); ++i)
      joined += (i ? "," : "") + parts[i];
    entries.push_back(head + joined);
  }
  std::string text;
  for (size_t i = 0; i < entries.size(); ++i)
    text += (i ? ";" : "") + entries[i];
  return text;
}

// The options of one gear: a static --input_shape and no gear flags.
AtcOptions gearOptions(const AtcOptions& o, const std::vector<int64_t>& gear) {
  AtcOptions one = o;
  one.inputShape = gearInputShape(o, gear);
  one.dynamicBatchSize.clear();
  one.dynamicImageSize.clear();
  one.dynamicDims.clear();
  one.gears.clear();
  spdlog::debug("gear {}: --input_shape={}", fmt::join(gear, ","), one.inputShape);
  return one;
}

// Gear models: one static model per gear (each through the whole pipeline), written as one
// .om whose Case op picks the gear's branch.
Status runGearConvert(const AtcOptions& o, AtcResult& result) {
  auto gears = std::make_shared<OmGears>();
  gears->dynamicType = !o.dynamicBatchSize.empty() ? 1 : !o.dynamicImageSize.empty() ? 2 : 3;
  gears->gears = o.gears;
  if (auto spec = parseShapeSpec(o.inputShape, ShapeDialect::Atc))
    for (const InputShapeSpec& entry : spec->inputs)
      gears->shapeOrder.push_back(entry.name);
  for (const std::vector<int64_t>& gear : o.gears) {
    KILN_ASSIGN_OR_RETURN(Prepared p, prepare(gearOptions(o, gear), result));
    if (!p.inputProblems.empty() || !p.unsupported.empty() || !p.conflicts.empty()) {
      Status reportStatus = writeCheckReport(o, p, result);
      if (!reportStatus) spdlog::warn("{}", reportStatus.toString());
      return failWith(prepareErrors(p, o), result);
    }
    gears->models.push_back(std::move(p.model));
  }
  const Model& first = gears->models.front();
  return writeAtcOm(o, first, gears, result);
}

Status runConvert(const AtcOptions& o, AtcResult& result) {
  if (!o.gears.empty()) return runGearConvert(o, result);
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare(o, result));
  if (!p.inputProblems.empty() || !p.unsupported.empty() || !p.conflicts.empty()) {
    // As ATC: a model that does not parse gets the pre-check report as well.
    Status reportStatus = writeCheckReport(o, p, result);
    if (!reportStatus) spdlog::warn("{}", reportStatus.toString());
    // A shape or input-name mistake is the one cause: ATC stops at it before judging ops.
    if (!p.inputProblems.empty()) {
      std::vector<Status> errors;
      for (const auto& [name, st] : p.inputProblems)
        errors.push_back(st);
      return failWith(std::move(errors), result);
    }
    return failWith(prepareErrors(p, o), result);
  }
  return writeAtcOm(o, p.model, nullptr, result);
}

Status runPrecheck(const AtcOptions& o, AtcResult& result) {
  // With gears every gear is checked; the report is the first failing gear's (else the last's).
  for (size_t g = 0; g + 1 < o.gears.size(); ++g) {
    KILN_ASSIGN_OR_RETURN(Prepared p, prepare(gearOptions(o, o.gears[g]), result));
    if (!p.inputProblems.empty() || !p.unsupported.empty() || !p.conflicts.empty()) {
      KILN_TRY(writeCheckReport(o, p, result));
      return failWith(prepareErrors(p, o), result);
    }
  }
  KILN_ASSIGN_OR_RETURN(Prepared p,
                        prepare(o.gears.empty() ? o : gearOptions(o, o.gears.back()), result));
  KILN_TRY(writeCheckReport(o, p, result));
  if (p.inputProblems.empty() && p.unsupported.empty() && p.conflicts.empty()) return Status::ok();
  return failWith(prepareErrors(p, o), result);
}

Status runToJson(const AtcOptions& o, AtcResult& result) {
  std::string json;
  if (o.framework == 5) {
    // The ONNX ModelProto as protobuf's JSON mapping prints it.
    auto file = MappedFile::open(o.om);
    if (!file)
      return withAtc(file.status(), "E13005", fmt::format("Failed to parse file {}.", o.om),
                     result);
    onnx::ModelProto proto;
    if ((*file)->size() > INT_MAX ||
        !proto.ParseFromArray((*file)->data(), static_cast<int>((*file)->size()))) {
      Status st(ErrorCode::NotProtobuf, fmt::format("'{}' is not a binary ONNX model", o.om),
                "pass a .onnx file with --framework=5, or an .om without --framework");
      return withAtc(st, "E13005", fmt::format("Failed to parse file {}.", o.om), result);
    }
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    auto status = google::protobuf::util::MessageToJsonString(proto, &json, options);
    if (!status.ok())
      return Status(ErrorCode::Internal,
                    fmt::format("cannot print '{}' as JSON: {}", o.om, status.ToString()),
                    "report this model");
  } else {
    auto text = omToJson(o.om);
    if (!text) {
      Status st = text.status();
      if (st.peerCode().empty())
        return withAtc(st, "E13005", fmt::format("Failed to parse file {}.", o.om), result);
      return failWith({st}, result);
    }
    json = *text;
  }
  KILN_TRY(writeFileAtomically(o.json, json));
  result.written.push_back(o.json);
  return Status::ok();
}

Status runInfo(const AtcOptions& o, AtcResult& result) {
  auto text = omInfoText(o.om);
  if (!text) {
    Status st = text.status();
    if (st.peerCode().empty())
      return withAtc(st, "E13005", fmt::format("Failed to parse file {}.", o.om), result);
    return failWith({st}, result);
  }
  result.text += *text;
  return Status::ok();
}

} // namespace

Status runAtc(const AtcOptions& options, AtcResult& result) {
  switch (options.mode) {
  case 0:
    return runConvert(options, result);
  case 1:
    return runToJson(options, result);
  case 3:
    return runPrecheck(options, result);
  case 6:
    return runInfo(options, result);
  default:
    return Status(ErrorCode::AtcOptionInvalid,
                  fmt::format("The operation is not supported. Reason: --mode={} is not "
                              "supported by kiln's atc.",
                              options.mode),
                  "use --mode=0, 1, 3 or 6")
        .withPeerCode("E10055");
  }
}

Status prepareForCannAtc(const AtcOptions& o, const std::string& onnxPath, AtcResult& result) {
  // Every gear's shapes are checked as mode 0 converts them; CANN's atc gets the model with the
  // gear dims left at -1 and builds the gears itself.
  for (const std::vector<int64_t>& gear : o.gears) {
    KILN_ASSIGN_OR_RETURN(Prepared p, prepare(gearOptions(o, gear), result));
    if (!p.inputProblems.empty() || !p.conflicts.empty())
      return failWith(prepareErrors(p, o), result);
  }
  KILN_ASSIGN_OR_RETURN(Prepared p, prepare(o, result));
  if (!p.inputProblems.empty()) {
    std::vector<Status> errors;
    for (const auto& [name, st] : p.inputProblems)
      errors.push_back(st);
    return failWith(std::move(errors), result);
  }
  if (!p.conflicts.empty()) return failWith(prepareErrors(p, o), result);
  if (Status st = writeOnnxFile(p.model, onnxPath); !st)
    return withAtc(st, "E13004",
                   fmt::format("Failed to write file {}. Reason: {}.", onnxPath, st.message()),
                   result);
  spdlog::info("wrote the prepared model {} ({} nodes)", onnxPath, p.model.graph->nodes().size());
  return Status::ok();
}

} // namespace kiln
