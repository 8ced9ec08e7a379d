// The shared .om raising machinery: ge.proto.ModelDef → IR, each op by its family's raising rule.
#include <algorithm>
#include <filesystem>
#include <queue>
#include <unordered_map>

#include "kiln/backends/aipp.h"
#include "kiln/backends/om_formats.h"
#include "kiln/passes/pass.h"
#include "kiln/support/checked_math.h"
#include "kiln/support/contained_path.h"
#include "kiln/support/mapped_file.h"
#include "om_context.h"
#include "ops/validate.h"

namespace kiln::om {
namespace {

// The ONNX opset raised graphs are written in: every raise rule emits ops valid at this version
// (ReduceX/Squeeze/Split/Pad/Clip/Slice take their parameters as inputs).
constexpr int64_t kRaisedOpset = 18;

} // namespace

Node* Raiser::emit(const OpDef& op, const std::string& type, const std::vector<Value*>& inputs,
                   int outputCount) {
  int n = outputCount < 0 ? op.output_desc_size() : outputCount;
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    names.push_back(outputName(op, i));
  Node* node = graph_.appendNode(type, inputs, names);
  node->setName(op.name());
  for (int i = 0; i < n; ++i) {
    if (i < op.output_desc_size()) node->output(i)->setType(descType(op.output_desc(i)));
    sources_[fmt::format("{}:{}", op.name(), i)] = node->output(i);
  }
  return node;
}

Node* Raiser::emitOutputs(const OpDef& op, const std::string& type,
                          const std::vector<Value*>& inputs, int first, int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i)
    names.push_back(outputName(op, first + i));
  Node* node = graph_.appendNode(type, inputs, names);
  node->setName(op.name());
  for (int i = 0; i < count; ++i) {
    if (first + i < op.output_desc_size())
      node->output(i)->setType(descType(op.output_desc(first + i)));
    sources_[fmt::format("{}:{}", op.name(), first + i)] = node->output(i);
  }
  return node;
}

Status Raiser::unsupported(const OpDef& op, const std::string& why) const {
  return Status(ErrorCode::OmReadUnsupported,
                fmt::format("{}: op '{}' (type {}): {}", displayName_, op.name(), op.type(), why),
                "kiln reads the GraphEngine ops it writes; convert the model again with kiln");
}

namespace {

// K8001 when the static dims of one of the op's tensor descs (or a heavy layout's origin_shape)
// multiply past what a tensor can hold (checked_math.h).
Status checkDescDims(const OpDef& op, const std::string& displayName) {
  auto check = [&](const TensorDescriptor& d, const std::string& what) -> Status {
    std::vector<std::vector<int64_t>> shapes{{d.shape().dim().begin(), d.shape().dim().end()}};
    if (auto it = d.attr().find("origin_shape"); it != d.attr().end())
      shapes.push_back({it->second.list().i().begin(), it->second.list().i().end()});
    for (const std::vector<int64_t>& dims : shapes) {
      std::vector<int64_t> known; // -1 (dynamic) and -2 (unknown rank) do not multiply
      for (int64_t x : dims)
        if (x >= 0) known.push_back(x);
      const DType dtype = fromGeDType(d.dtype()).value_or(DType::Undefined);
      auto extent = checkTensorExtent(
          known, dtypeBits(dtype), dtypeName(dtype), ErrorCode::OmFileInvalid,
          fmt::format("{}: op '{}' (type {}): {}", displayName, op.name(), op.type(), what),
          "the file is damaged; convert the model again");
      if (!extent) return extent.status();
    }
    return Status::ok();
  };
  for (int i = 0; i < op.input_desc_size(); ++i)
    KILN_TRY(check(op.input_desc(i), fmt::format("input desc {}", i)));
  for (int i = 0; i < op.output_desc_size(); ++i)
    KILN_TRY(check(op.output_desc(i), fmt::format("output desc {}", i)));
  return Status::ok();
}

} // namespace

ValueType Raiser::descType(const TensorDescriptor& d) {
  DType dtype = fromGeDType(d.dtype()).value_or(DType::Undefined);
  if (d.shape().dim_size() == 1 && d.shape().dim(0) == -2) return ValueType::tensor(dtype, {});
  std::vector<Dim> dims;
  for (int64_t x : plainDims(d))
    dims.push_back(x >= 0 ? Dim::known(x) : Dim());
  return ValueType::tensor(dtype, Shape(dims));
}

std::vector<int64_t> Raiser::plainDims(const TensorDescriptor& d) {
  if (heavyLayout(d))
    if (auto it = d.attr().find("origin_shape"); it != d.attr().end())
      return {it->second.list().i().begin(), it->second.list().i().end()};
  return {d.shape().dim().begin(), d.shape().dim().end()};
}

std::string Raiser::outputName(const OpDef& op, int i) {
  std::string name;
  if (i < op.output_desc_size()) name = op.output_desc(i).name();
  if (name.empty())
    name = op.output_desc_size() == 1 ? op.name() : fmt::format("{}:{}", op.name(), i);
  return graph_.uniqueName(name);
}

Expected<Tensor> Raiser::weightTensor(const OpDef& op, const TensorDescriptor& desc,
                                      const std::string& data) {
  auto dtype = fromGeDType(desc.dtype());
  if (!dtype) return unsupported(op, fmt::format("constant of type {}", geDTypeName(desc.dtype())));
  std::vector<int64_t> dims(desc.shape().dim().begin(), desc.shape().dim().end());
  auto count = checkedElementCount(dims);
  auto bytes = count ? dtypeStorageBytes(*dtype, *count) : std::nullopt;
  if (!bytes) return unsupported(op, "constant with a dynamic or overflowing shape");
  if (*dtype == DType::String) return unsupported(op, "string constants");
  if (!data.empty()) {
    if (data.size() != *bytes)
      return Status(ErrorCode::OmFileInvalid,
                    fmt::format("{}: constant '{}' holds {} bytes, its shape needs {}",
                                displayName_, op.name(), data.size(), *bytes),
                    "the file is damaged; convert the model again");
    return plainTensor(op, desc, *dtype, reinterpret_cast<const uint8_t*>(data.data()));
  }
  uint64_t offset = static_cast<uint64_t>(desc.data_offset());
  if (desc.data_offset() < 0 || offset > weightsSize_ || *bytes > weightsSize_ - offset)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: constant '{}' refers to WEIGHTS_DATA bytes {}..{}, the "
                              "partition has {}",
                              displayName_, op.name(), offset, offset + *bytes, weightsSize_),
                  "the file is damaged; convert the model again");
  return plainTensor(op, desc, *dtype, weights_ + offset);
}

Expected<Tensor> Raiser::plainTensor(const OpDef& op, const TensorDescriptor& desc, DType dtype,
                                     const uint8_t* stored) {
  std::vector<int64_t> dims(desc.shape().dim().begin(), desc.shape().dim().end());
  size_t storedBytes = static_cast<size_t>(*dtypeStorageBytes(dtype, *checkedElementCount(dims)));
  if (desc.layout() != "FRACTAL_Z")
    return Tensor(dtype, dims, Buffer::owned(std::vector<uint8_t>(stored, stored + storedBytes)));
  // Weights ATC-style in FRACTAL_Z: back to OIHW for the executor.
  std::vector<int64_t> oihw = plainDims(desc);
  int64_t c0 = cubeC0(dtype);
  size_t elementBytes = static_cast<size_t>(dtypeStorageBytes(dtype, 1).value_or(0));
  int64_t groups = fractalGroups(desc);
  if (oihw.size() != 4 || c0 == 0 || elementBytes == 0 || oihw[0] <= 0 || oihw[1] <= 0 ||
      oihw[0] % groups != 0 || heavyDims(HeavyLayout::FractalZ, oihw, c0, groups) != dims)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: FRACTAL_Z constant '{}' has shape [{}], which does not hold "
                              "its origin shape [{}]",
                              displayName_, op.name(), fmt::join(dims, ","), fmt::join(oihw, ",")),
                  "the file is damaged; convert the model again");
  return Tensor(
      dtype, oihw,
      Buffer::owned(fromHeavy(HeavyLayout::FractalZ, stored, oihw, elementBytes, c0, groups)));
}

Status Raiser::raiseConst(const OpDef& op) {
  const AttrDef* value = findAttr(op, "value");
  if (!value || value->value_case() != AttrDef::kT)
    return unsupported(op, "Const without a tensor 'value'");
  const TensorDescriptor& desc = op.output_desc_size() ? op.output_desc(0) : value->t().desc();
  TensorDescriptor merged = value->t().desc();
  if (merged.data_offset() == 0 && desc.data_offset() != 0)
    merged.set_data_offset(desc.data_offset());
  auto tensor = weightTensor(op, merged, value->t().data());
  if (!tensor) return tensor.status();
  std::string name = graph_.uniqueName(op.output_desc_size() && !op.output_desc(0).name().empty()
                                           ? op.output_desc(0).name()
                                           : op.name());
  sources_[op.name() + ":0"] = graph_.addInitializer(name, tensor.take());
  return Status::ok();
}

Status Raiser::raiseFileConstant(const OpDef& op) {
  std::string location = getS(op, "location", getS(op, "file_path", ""));
  if (location.empty()) return unsupported(op, "FileConstant without a location");
  const SideFileRule rule{ErrorCode::OmFileInvalid,
                          fmt::format("FileConstant '{}' location", op.name()),
                          "keep the weight files inside the .om's folder, named by relative "
                          "paths (as atc --external_weight writes them)"};
  auto contained = resolveInsideFolder(baseDir_, location, rule);
  if (!contained) return contained.status().withContext(displayName_);
  std::filesystem::path path(*contained);
  auto file = MappedFile::open(path.string());
  if (!file)
    return file.status().withContext(fmt::format("{}: FileConstant '{}'", displayName_, op.name()));
  uint64_t offset = static_cast<uint64_t>(getI(op, "offset", 0));
  uint64_t length = static_cast<uint64_t>(getI(op, "length", (*file)->size()));
  if (offset > (*file)->size() || length > (*file)->size() - offset)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: FileConstant '{}' wants bytes {}..{} of '{}', which has {}",
                              displayName_, op.name(), offset, offset + length, path.string(),
                              (*file)->size()),
                  "copy the weight folder beside the .om again");
  if (!op.output_desc_size()) return unsupported(op, "FileConstant without an output");
  TensorDescriptor desc = op.output_desc(0);
  std::string data(reinterpret_cast<const char*>((*file)->data() + offset), length);
  auto tensor = weightTensor(op, desc, data);
  if (!tensor) return tensor.status();
  std::string name = graph_.uniqueName(desc.name().empty() ? op.name() : desc.name());
  sources_[op.name() + ":0"] = graph_.addInitializer(name, tensor.take());
  return Status::ok();
}

Status Raiser::raise(const ge::proto::GraphDef& g) {
  // Inputs: Data ops in `index` order.
  std::vector<const OpDef*> datas;
  const OpDef* netOutput = nullptr;
  std::map<std::string, const OpDef*> byName;
  for (const OpDef& op : g.op()) {
    KILN_TRY(checkDescDims(op, displayName_));
    byName[op.name()] = &op;
    if (op.type() == "Data" || op.type() == "RefData") datas.push_back(&op);
    if (op.type() == "NetOutput") netOutput = &op;
  }
  std::stable_sort(datas.begin(), datas.end(), [](const OpDef* a, const OpDef* b) {
    return getI(*a, "index", 0) < getI(*b, "index", 0);
  });
  for (const OpDef* op : datas) {
    const int64_t index = getI(*op, "index", -1);
    // A gear model's selector: kiln picks the gear from the input shapes (ops/control_flow.cpp).
    if (boundData_.empty() && getB(*op, "_insert_by_mbatch", false)) {
      sources_[op->name() + ":0"] = nullptr; // read by MapIndex only, which raises to nothing
      continue;
    }
    if (index >= 0 && static_cast<size_t>(index) < boundData_.size() &&
        boundData_[static_cast<size_t>(index)]) {
      sources_[op->name() + ":0"] = boundData_[static_cast<size_t>(index)];
      continue;
    }
    Value* v = graph_.addValue(graph_.uniqueName(op->name()));
    if (op->output_desc_size())
      v->setType(descType(op->output_desc(0)));
    else if (op->input_desc_size())
      v->setType(descType(op->input_desc(0)));
    graph_.addInput(v);
    sources_[op->name() + ":0"] = v;
  }
  // The rest in dependency order (GraphDef order need not be topological).
  std::set<std::string> done;
  for (const OpDef* op : datas)
    done.insert(op->name());
  std::vector<const OpDef*> pending;
  for (const OpDef& op : g.op())
    if (!done.count(op.name()) && &op != netOutput) pending.push_back(&op);
  // Ops are raised in sweeps over the file order: an op whose producers are all raised is raised
  // when the sweep reaches it, the others wait for the next sweep. Counting each op's unraised
  // producers and waking its readers when a producer is raised gives that same order in time
  // linear in the graph (re-scanning every pending op per sweep was quadratic on a file listing
  // a long chain backwards).
  std::vector<int> waitingOn(pending.size(), 0);
  std::unordered_map<std::string, std::vector<size_t>> readers; // producer name → pending index
  for (size_t k = 0; k < pending.size(); ++k)
    for (const std::string& input : pending[k]->input()) {
      if (input.empty()) continue;
      std::string src = input.substr(0, input.rfind(':'));
      if (byName.count(src) && !done.count(src)) {
        ++waitingOn[k];
        readers[src].push_back(k);
      }
    }
  using MinHeap = std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>>;
  MinHeap thisSweep, nextSweep;
  for (size_t k = 0; k < pending.size(); ++k)
    if (waitingOn[k] == 0) thisSweep.push(k);
  std::vector<bool> raised(pending.size(), false);
  size_t raisedCount = 0;
  while (raisedCount < pending.size()) {
    if (thisSweep.empty()) std::swap(thisSweep, nextSweep);
    if (thisSweep.empty()) {
      size_t first = 0;
      while (raised[first])
        ++first;
      return Status(
          ErrorCode::OmFileInvalid,
          fmt::format("{}: ops form a cycle (e.g. '{}')", displayName_, pending[first]->name()),
          "the file is damaged; convert the model again");
    }
    const size_t k = thisSweep.top();
    thisSweep.pop();
    const OpDef* op = pending[k];
    for (int i = 0; i < op->input_size(); ++i) {
      const std::string& input = op->input(i);
      if (input.empty() || isControlInput(input)) continue;
      if (!sources_.count(input))
        return Status(ErrorCode::OmFileInvalid,
                      fmt::format("{}: op '{}' reads '{}', which no op produces", displayName_,
                                  op->name(), input),
                      "the file is damaged; convert the model again");
    }
    Status s;
    if (op->type() == "Const" || op->type() == "Constant")
      s = raiseConst(*op);
    else if (op->type() == "FileConstant")
      s = raiseFileConstant(*op);
    else if (const RaisingRule* rule = omRaisingRules().find(op->type())) {
      // Files that list only the inputs an op has name their ports; the rules read IR slots.
      const std::optional<OpDef> slotted = withPortSlots(*op);
      s = rule->raise(*this, slotted ? *slotted : *op);
    } else
      s = unsupported(*op, "kiln has no ONNX equivalent for this op type");
    if (!s) return s;
    raised[k] = true;
    ++raisedCount;
    if (!done.insert(op->name()).second) continue; // its readers were woken by a namesake
    auto it = readers.find(op->name());
    if (it == readers.end()) continue;
    for (size_t reader : it->second)
      if (--waitingOn[reader] == 0) (reader > k ? thisSweep : nextSweep).push(reader);
  }
  if (!netOutput)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: graph '{}' has no NetOutput op", displayName_, g.name()),
                  "the file is damaged; convert the model again");
  std::vector<int> kept = keepOutputs_;
  if (kept.empty())
    for (int i = 0; i < netOutput->input_size(); ++i)
      kept.push_back(i);
  for (int i : kept) {
    if (i >= netOutput->input_size())
      return Status(ErrorCode::OmFileInvalid,
                    fmt::format("{}: graph '{}' has {} outputs, fewer than its op needs",
                                displayName_, g.name(), netOutput->input_size()),
                    "the file is damaged; convert the model again");
    const std::string& input = netOutput->input(i);
    if (input.empty() || isControlInput(input)) continue;
    auto it = sources_.find(input);
    if (it == sources_.end())
      return Status(
          ErrorCode::OmFileInvalid,
          fmt::format("{}: NetOutput reads '{}', which no op produces", displayName_, input),
          "the file is damaged; convert the model again");
    Value* out = it->second;
    // A subgraph output that is an outer value, or an output listed twice: an Identity of its
    // own (ONNX subgraph outputs are values the subgraph defines).
    const bool twice = std::count(graph_.outputs().begin(), graph_.outputs().end(), out) > 0;
    if (graph_.parent() && (out->owner() != &graph_ || twice)) {
      Node* copy = graph_.appendNode("Identity", {out},
                                     {graph_.uniqueName(fmt::format("{}_out{}", g.name(), i))});
      copy->output(0)->setType(out->type());
      out = copy->output(0);
    }
    graph_.addOutput(out);
  }
  // Constants consumed as attributes leave initializers nothing reads.
  std::vector<Value*> unused;
  for (Value* v : graph_.initializers())
    if (!v->hasUses() && !v->isGraphOutput()) unused.push_back(v);
  for (Value* v : unused)
    graph_.removeInitializer(v);
  return Status::ok();
}

Expected<Model> raiseModelDef(const ge::proto::ModelDef& modelDef, const uint8_t* weights,
                              size_t weightsSize, const std::string& baseDir,
                              const std::string& displayName) {
  if (modelDef.graph_size() == 0)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: the ModelDef holds no graph", displayName),
                  "the file is damaged; convert the model again");
  const auto& root = modelDef.graph(0);
  Model model;
  model.irVersion = 8;
  model.opsets = {{"", kRaisedOpset}};
  model.producerName = "kiln";
  model.sourcePath = displayName;
  model.graph = std::make_shared<Graph>(root.name());
  Raiser raiser(*model.graph, weights, weightsSize, baseDir, displayName);
  raiser.setModelDef(&modelDef);
  raiser.setMetadata(&model.metadata);
  if (auto s = raiser.raise(root); !s) return s;
  if (auto it = modelDef.attr().find(kAippMetadataKey); it != modelDef.attr().end())
    model.metadata.emplace_back(kAippMetadataKey, it->second.s());
  // The raised graph feeds the same executor and passes as an imported one: the same checks. A
  // node they refuse makes the file inconsistent, whoever wrote it.
  if (Status valid = ops::validateGraph(*model.graph, model); !valid)
    return Status(ErrorCode::OmFileInvalid, displayName + ": " + valid.message(),
                  "re-convert the model with kiln's atc, which refuses such nodes");
  // DynamicQuantizeLinear and ConvInteger, which the writer spells as float ops over
  // integer-valued floats (decompose-quant), run as those ops again, as a .ms file's do.
  PassContext context;
  context.model = &model;
  if (auto changed = createPass("fuse-dynamic-quant")->run(*model.graph, context); !changed)
    return changed.status();
  return model;
}

} // namespace kiln::om
