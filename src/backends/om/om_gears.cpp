// Gear models (ATC's --dynamic_batch_size / --dynamic_image_size / --dynamic_dims, om.md §2.6),
// laid out as GraphEngine's multi-batch clone lays them out:
//
//   root:  Data x... (each at its largest gear), Data ascend_mbatch_shape_data (int32 [k]),
//          Const ascend_mbatch_shape_const (the gear table, int32 [gears * k]),
//          MapIndex ascend_mbatch_shape_mapindex (shape data, table) → branch index,
//          Const c... (weights every gear shares),
//          Case ascend_mbatch_shape_case (index, x..., c...) branches [one graph per gear],
//          NetOutput (the Case's outputs)
//   branch b: the gear's own static graph; its Data ops and shared Consts become Data ops that
//          read Case inputs (`_parent_node_index`), every op name ends in _ascend_mbatch_batch_<b>.
//
// Each gear is lowered on its own by the ordinary lowering; this file only joins the results.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "om_context.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

using ge::proto::GraphDef;

constexpr const char* kCaseName = "ascend_mbatch_shape_case";
constexpr const char* kShapeDataName = "ascend_mbatch_shape_data";
constexpr const char* kShapeConstName = "ascend_mbatch_shape_const";
constexpr const char* kMapIndexName = "ascend_mbatch_shape_mapindex";
constexpr const char* kBranchPostfix = "_ascend_mbatch_batch_";

// "op:1" → "op<postfix>:1" (control inputs "op:-1" too).
std::string renamedInput(const std::string& input, const std::string& postfix) {
  if (input.empty()) return input;
  const size_t colon = input.rfind(':');
  if (colon == std::string::npos) return input + postfix;
  return input.substr(0, colon) + postfix + input.substr(colon);
}

// Whether Const `op` of `model` points inside its weights, and where its bytes come from (null
// for an empty constant).
bool constSource(const LoweredModel& model, const OpDef& op, const WeightSource** source) {
  *source = nullptr;
  const ge::proto::AttrDef* value = findAttr(op, "value");
  if (!value || !value->has_t()) return false;
  const TensorDescriptor& d = value->t().desc();
  const uint64_t offset = static_cast<uint64_t>(d.data_offset());
  const uint64_t size = static_cast<uint64_t>(d.weight_size());
  if (offset + size > model.weights.size) return false;
  if (size > 0) *source = model.weights.at(offset);
  return true;
}

// Whether two constants hold the same bytes (a pair at a time is read when they differ in source).
bool sameBytes(const WeightSource* a, const WeightSource* b) {
  if (!a || !b) return a == b;
  if (a->size != b->size) return false;
  if (a->buffer == b->buffer && a->fractal == b->fractal && a->origin == b->origin &&
      a->elementBytes == b->elementBytes && a->c0 == b->c0 && a->groups == b->groups)
    return true;
  return a->bytes() == b->bytes();
}

// Appends the bytes of Const `op` of `model` to `out` (none when it points at none).
uint64_t appendConst(WeightsLayout& out, const LoweredModel& model, const OpDef& op) {
  const WeightSource* source = nullptr;
  constSource(model, op, &source);
  return out.append(source ? *source : WeightSource{});
}

void setConstOffset(OpDef& op, size_t offset) {
  auto& attrs = *op.mutable_attr();
  if (auto it = attrs.find("value"); it != attrs.end() && it->second.has_t())
    it->second.mutable_t()->mutable_desc()->set_data_offset(static_cast<int64_t>(offset));
  for (TensorDescriptor& d : *op.mutable_output_desc())
    if (d.weight_size() > 0) d.set_data_offset(static_cast<int64_t>(offset));
}

const GraphDef& mainGraph(const LoweredModel& m) { return m.modelDef.graph(0); }

std::vector<const OpDef*> dataOps(const GraphDef& g) {
  std::vector<const OpDef*> datas;
  for (const OpDef& op : g.op())
    if (op.type() == "Data") datas.push_back(&op);
  std::stable_sort(datas.begin(), datas.end(), [](const OpDef* a, const OpDef* b) {
    return getI(*a, "index", 0) < getI(*b, "index", 0);
  });
  return datas;
}

const OpDef* netOutputOp(const GraphDef& g) {
  for (const OpDef& op : g.op())
    if (op.type() == "NetOutput") return &op;
  return nullptr;
}

// `desc` with its shape replaced by `dims` (shape, origin_shape and size kept consistent).
TensorDescriptor withDims(const TensorDescriptor& desc, const std::vector<int64_t>& dims) {
  TensorDescriptor out;
  const DType dtype = fromGeDType(desc.dtype()).value_or(DType::Undefined);
  fillDesc(&out, dtype, Shape::fromStatic(dims), desc.layout().empty() ? "ND" : desc.layout());
  if (!desc.name().empty()) out.set_name(desc.name());
  return out;
}

std::vector<int64_t> descDims(const TensorDescriptor& d) {
  return {d.shape().dim().begin(), d.shape().dim().end()};
}

// Dims of one tensor at every gear → the largest per axis (what the root graph declares).
Expected<std::vector<int64_t>> largestDims(const std::vector<std::vector<int64_t>>& perGear,
                                           const std::string& what) {
  std::vector<int64_t> out = perGear.front();
  for (const auto& dims : perGear) {
    if (dims.size() != out.size())
      return Status(ErrorCode::OmLowerUnsupported,
                    fmt::format("{} has rank {} in one gear and {} in another", what, out.size(),
                                dims.size()),
                    "gears may change dims, not ranks: check --input_shape");
    for (size_t i = 0; i < dims.size(); ++i)
      out[i] = std::max(out[i], dims[i]);
  }
  return out;
}

} // namespace

Expected<LoweredModel> lowerGearModels(const OmGears& gears, const OmWriteOptions& options) {
  if (gears.models.size() != gears.gears.size() || gears.models.size() < 2)
    return Status(ErrorCode::Internal, "gear models and profiles do not match",
                  "report this as a kiln bug");
  if (options.externalWeight)
    return Status(ErrorCode::OmLowerUnsupported,
                  "--external_weight with dynamic gears is not supported by kiln's atc",
                  "drop --external_weight, or convert one static model per shape");
  OmWriteOptions single = options;
  single.gears.reset();
  std::vector<LoweredModel> lowered;
  for (const Model& m : gears.models) {
    auto one = lowerModel(m, single);
    if (!one) return one.status();
    lowered.push_back(one.take());
  }
  const LoweredModel& first = lowered.front();
  const GraphDef& firstMain = mainGraph(first);
  const std::vector<const OpDef*> firstDatas = dataOps(firstMain);
  const OpDef* firstOut = netOutputOp(firstMain);
  if (!firstOut)
    return Status(ErrorCode::Internal, "a gear's graph has no NetOutput", "report this as a kiln bug");
  const size_t inputCount = firstDatas.size();
  const size_t outputCount = static_cast<size_t>(firstOut->input_size());
  for (const LoweredModel& m : lowered) {
    const OpDef* out = netOutputOp(mainGraph(m));
    if (dataOps(mainGraph(m)).size() != inputCount || !out ||
        static_cast<size_t>(out->input_size()) != outputCount)
      return Status(ErrorCode::OmLowerUnsupported,
                    "the gears' graphs have different inputs or outputs after simplification",
                    "convert one static model per shape with --input_shape");
  }

  // Consts of the main graph that every gear holds with the same bytes: shared from the root.
  std::vector<std::string> shared;
  for (const OpDef& op : firstMain.op()) {
    if (op.type() != "Const") continue;
    const WeightSource* source = nullptr;
    if (!constSource(first, op, &source)) continue;
    bool everywhere = true;
    for (size_t b = 1; b < lowered.size() && everywhere; ++b) {
      everywhere = false;
      for (const OpDef& other : mainGraph(lowered[b]).op()) {
        if (other.name() != op.name()) continue;
        const WeightSource* otherSource = nullptr;
        everywhere = other.type() == "Const" && constSource(lowered[b], other, &otherSource) &&
                     other.output_desc_size() == 1 && op.output_desc_size() == 1 &&
                     descDims(other.output_desc(0)) == descDims(op.output_desc(0)) &&
                     other.output_desc(0).dtype() == op.output_desc(0).dtype() &&
                     sameBytes(source, otherSource);
        break;
      }
    }
    if (everywhere) shared.push_back(op.name());
  }
  std::map<std::string, size_t> sharedIndex;
  for (size_t c = 0; c < shared.size(); ++c)
    sharedIndex[shared[c]] = c;

  LoweredModel out;
  out.modelDef.set_name(first.modelDef.name());
  out.modelDef.set_version(first.modelDef.version());
  for (const auto& [key, value] : first.modelDef.attr())
    (*out.modelDef.mutable_attr())[key] = value;
  GraphDef* root = out.modelDef.add_graph();
  root->set_name(firstMain.name());

  // Root Data ops: the model inputs at their largest gear, then the gear selector.
  std::vector<TensorDescriptor> inputDescs;
  for (size_t i = 0; i < inputCount; ++i) {
    std::vector<std::vector<int64_t>> perGear;
    for (const LoweredModel& m : lowered)
      perGear.push_back(descDims(dataOps(mainGraph(m))[i]->output_desc(0)));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                          largestDims(perGear, fmt::format("input {}", firstDatas[i]->name())));
    OpDef* data = root->add_op();
    *data = *firstDatas[i];
    TensorDescriptor desc = withDims(firstDatas[i]->output_desc(0), dims);
    data->clear_input_desc();
    data->clear_output_desc();
    *data->add_input_desc() = desc;
    *data->add_output_desc() = desc;
    root->add_input(data->name() + ":0");
    inputDescs.push_back(desc);
    IoTensor io = first.inputs[i];
    io.dims = dims;
    out.inputs.push_back(io);
  }
  const size_t gearLength = gears.gears.front().size();
  const Shape selectorShape = Shape::fromStatic({static_cast<int64_t>(gearLength)});
  {
    OpDef* data = root->add_op();
    data->set_name(kShapeDataName);
    data->set_type("Data");
    data->set_has_out_attr(true);
    data->add_input("");
    (*data->mutable_attr())["index"] = attrI(static_cast<int64_t>(inputCount));
    (*data->mutable_attr())["_insert_by_mbatch"] = attrB(true);
    fillDesc(data->add_input_desc(), DType::Int32, selectorShape, "ND");
    fillDesc(data->add_output_desc(), DType::Int32, selectorShape, "ND");
    data->mutable_output_desc(0)->set_name(kShapeDataName);
    root->add_input(std::string(kShapeDataName) + ":0");
    out.inputs.push_back({kShapeDataName, DType::Int32, {static_cast<int64_t>(gearLength)}, kFormatNd});
  }
  // The gear table and MapIndex.
  {
    std::vector<int32_t> table;
    for (const auto& gear : gears.gears)
      for (int64_t v : gear)
        table.push_back(static_cast<int32_t>(v));
    OpDef* c = root->add_op();
    c->set_name(kShapeConstName);
    c->set_type("Const");
    c->set_has_out_attr(true);
    const Shape tableShape = Shape::fromStatic({static_cast<int64_t>(table.size())});
    auto* value = (*c->mutable_attr())["value"].mutable_t();
    fillDesc(value->mutable_desc(), DType::Int32, tableShape, "ND");
    fillDesc(c->add_output_desc(), DType::Int32, tableShape, "ND");
    c->mutable_output_desc(0)->set_name(kShapeConstName);
    std::vector<uint8_t> tableBytes(table.size() * sizeof(int32_t));
    std::memcpy(tableBytes.data(), table.data(), tableBytes.size());
    const size_t offset = out.weights.append(WeightSource::of(Buffer::owned(std::move(tableBytes))));
    for (TensorDescriptor* d : {value->mutable_desc(), c->mutable_output_desc(0)}) {
      d->set_data_offset(static_cast<int64_t>(offset));
      d->set_weight_size(static_cast<int64_t>(table.size() * sizeof(int32_t)));
    }
    OpDef* map = root->add_op();
    map->set_name(kMapIndexName);
    map->set_type("MapIndex");
    map->set_has_out_attr(true);
    map->add_input(std::string(kShapeDataName) + ":0");
    map->add_input(std::string(kShapeConstName) + ":0");
    fillDesc(map->add_input_desc(), DType::Int32, selectorShape, "ND");
    fillDesc(map->add_input_desc(), DType::Int32, tableShape, "ND");
    fillDesc(map->add_output_desc(), DType::Int32, Shape::scalar(), "ND");
  }
  // Shared weights: root Consts, read once.
  std::vector<TensorDescriptor> sharedDescs;
  for (const std::string& name : shared) {
    for (const OpDef& op : firstMain.op()) {
      if (op.name() != name) continue;
      OpDef* c = root->add_op();
      *c = op;
      setConstOffset(*c, appendConst(out.weights, first, op));
      sharedDescs.push_back(op.output_desc(0));
      break;
    }
  }
  // The Case.
  OpDef* caseOp = root->add_op();
  caseOp->set_name(kCaseName);
  caseOp->set_type("Case");
  caseOp->set_has_out_attr(true);
  caseOp->add_input(std::string(kMapIndexName) + ":0");
  fillDesc(caseOp->add_input_desc(), DType::Int32, Shape::scalar(), "ND");
  for (size_t i = 0; i < inputCount; ++i) {
    caseOp->add_input(firstDatas[i]->name() + ":0");
    *caseOp->add_input_desc() = inputDescs[i];
  }
  for (size_t c = 0; c < shared.size(); ++c) {
    caseOp->add_input(shared[c] + ":0");
    *caseOp->add_input_desc() = sharedDescs[c];
  }
  auto& caseAttrs = *caseOp->mutable_attr();
  caseAttrs["_batch_num"] = attrI(static_cast<int64_t>(gears.gears.size()));
  for (size_t g = 0; g < gears.gears.size(); ++g)
    caseAttrs[fmt::format("_pred_value_{}", g)] = attrInts(gears.gears[g]);
  caseAttrs["_user_designate_shape_order"] = attrStrings(gears.shapeOrder);
  caseAttrs["_insert_by_mbatch"] = attrB(true);
  caseAttrs["_dynamic_type"] = attrI(gears.dynamicType);
  out.dynamicType = gears.dynamicType;
  out.gears = gears.gears;

  // Outputs: the Case's, at their largest gear.
  OpDef* netOutput = root->add_op();
  *netOutput = *firstOut;
  netOutput->clear_input();
  netOutput->clear_input_desc();
  for (size_t j = 0; j < outputCount; ++j) {
    std::vector<std::vector<int64_t>> perGear;
    for (const LoweredModel& m : lowered)
      perGear.push_back(descDims(netOutputOp(mainGraph(m))->input_desc(static_cast<int>(j))));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                          largestDims(perGear, fmt::format("output {}", j)));
    TensorDescriptor desc = withDims(firstOut->input_desc(static_cast<int>(j)), dims);
    *caseOp->add_output_desc() = desc;
    netOutput->add_input(fmt::format("{}:{}", kCaseName, j));
    *netOutput->add_input_desc() = desc;
    IoTensor io = first.outputs[j];
    io.dims = dims;
    out.outputs.push_back(io);
  }

  // Branches: each gear's graphs, renamed, reading the Case's inputs.
  for (size_t b = 0; b < lowered.size(); ++b) {
    const LoweredModel& m = lowered[b];
    const std::string postfix = fmt::format("{}{}", kBranchPostfix, b);
    std::map<std::string, std::string> graphNames;
    for (int gi = 0; gi < m.modelDef.graph_size(); ++gi)
      graphNames[m.modelDef.graph(gi).name()] =
          gi == 0 ? root->name() + postfix : m.modelDef.graph(gi).name() + postfix;
    caseOp->add_subgraph_name(graphNames[m.modelDef.graph(0).name()]);
    for (int gi = 0; gi < m.modelDef.graph_size(); ++gi) {
      const GraphDef& source = m.modelDef.graph(gi);
      const bool isMain = gi == 0;
      GraphDef* g = out.modelDef.add_graph();
      g->set_name(graphNames[source.name()]);
      for (const auto& [key, value] : source.attr())
        (*g->mutable_attr())[key] = value;
      for (const OpDef& sourceOp : source.op()) {
        OpDef* op = g->add_op();
        *op = sourceOp;
        op->set_name(sourceOp.name() + postfix);
        for (std::string& in : *op->mutable_input())
          in = renamedInput(in, postfix);
        for (std::string& sub : *op->mutable_subgraph_name())
          if (auto it = graphNames.find(sub); it != graphNames.end()) sub = it->second;
        if (isMain && op->type() == "Data") {
          (*op->mutable_attr())["_parent_node_index"] = attrI(getI(*op, "index", 0) + 1);
        } else if (isMain && op->type() == "NetOutput") {
          for (int j = 0; j < op->input_desc_size(); ++j)
            (*op->mutable_input_desc(j)->mutable_attr())["_parent_node_index"] = attrI(j);
        } else if (isMain && sharedIndex.count(sourceOp.name())) {
          const int64_t index = static_cast<int64_t>(inputCount + sharedIndex[sourceOp.name()]);
          TensorDescriptor desc = sourceOp.output_desc(0);
          desc.clear_data_offset();
          desc.clear_weight_size();
          op->set_type("Data");
          op->clear_attr();
          op->clear_input();
          op->clear_input_desc();
          op->clear_output_desc();
          op->add_input("");
          (*op->mutable_attr())["index"] = attrI(index);
          (*op->mutable_attr())["_parent_node_index"] = attrI(index + 1);
          *op->add_input_desc() = desc;
          *op->add_output_desc() = desc;
          g->add_input(op->name() + ":0");
        } else if (op->type() == "Const") {
          const WeightSource* source = nullptr;
          if (constSource(m, sourceOp, &source))
            setConstOffset(*op, out.weights.append(source ? *source : WeightSource{}));
        }
      }
      for (const std::string& in : source.input())
        g->add_input(renamedInput(in, postfix));
      for (const std::string& o : source.output())
        g->add_output(renamedInput(o, postfix));
    }
    out.memorySize = std::max(out.memorySize, m.memorySize);
  }
  // Op ids: one sequence over the whole model, as one lowering numbers them.
  int64_t id = 0;
  for (GraphDef& g : *out.modelDef.mutable_graph())
    for (OpDef& op : *g.mutable_op())
      op.set_id(id++);
  return out;
}

} // namespace kiln::om
