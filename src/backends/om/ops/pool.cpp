// .om rules for pooling: MaxPool → MaxPoolV3, AveragePool → AvgPoolV2 (2-D, and 1-D over an
// [N,C,1,L] view), the global pools.
#include <algorithm>

#include "../om_context.h"

namespace kiln::om {
namespace {

// MaxPool → MaxPoolV3, AveragePool → AvgPoolV2 (2-D; 1-D as Unsqueeze, a 1×k window, Squeeze).
bool dilated(const Node& n) {
  auto d = nodeInts(n, "dilations");
  return d && std::any_of(d->begin(), d->end(), [](int64_t x) { return x != 1; });
}

const auto poolCheck = [](const Node& n, const OpContext& context) -> std::string {
  const int64_t rank = rankOf(n.input(0));
  if (rank != 3 && rank != 4 && rank != 5)
    return fmt::format("{} with a rank-{} input (1-D, 2-D and 3-D pooling lower)", n.opType(),
                       rank);
  if (n.outputs().size() > 1 && n.output(1) &&
      (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
    return "MaxPool's Indices output";
  // MaxPool3D takes dilations (1-D and 2-D MaxPool run on it over a view with unit D / H axes);
  // AvgPoolV2 / AvgPool3D do not.
  if (auto d = nodeInts(n, "dilations"))
    for (int64_t x : *d)
      if (x != 1 && n.opType() != "MaxPool") return "AveragePool with dilations";
  if (nodeInt(n, "storage_order", 0) != 0) return "MaxPool storage_order 1";
  std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && !staticShape(n.input(0)))
    return "pooling auto_pad SAME_* with a dynamic input shape";
  if (autoPad != "NOTSET" && autoPad != "VALID" && nodeInt(n, "ceil_mode", 0))
    return "pooling auto_pad SAME_* with ceil_mode";
  return "";
};
const auto poolLower = [](Lowerer& l, const Node& n) {
  size_t s = static_cast<size_t>(rankOf(n.input(0)) - 2);
  auto kernel = nodeInts(n, "kernel_shape").value_or(std::vector<int64_t>(s, 1));
  auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(s, 1));
  auto pads = explicitPads(n, kernel, strides, std::vector<int64_t>(s, 1))
                  .value_or(std::vector<int64_t>(2 * s, 0));
  bool max = n.opType() == "MaxPool";
  const size_t spatial = s;
  std::vector<int64_t> dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(s, 1));
  Port view = l.in(0);
  if (max && s < 3 && dilated(n)) {
    // A dilated 1-D / 2-D MaxPool: MaxPool3D over an [N, C, 1, (1,) ...] view, window 1 on the
    // added axes, then those axes squeezed away.
    std::vector<int64_t> unit;
    std::vector<Dim> dims = n.input(0)->shape().dims();
    for (size_t i = 0; i < 3 - s; ++i) {
      unit.push_back(static_cast<int64_t>(2 + i));
      dims.insert(dims.begin() + 2, Dim::known(1));
      kernel.insert(kernel.begin(), 1);
      strides.insert(strides.begin(), 1);
      dilations.insert(dilations.begin(), 1);
      pads.insert(pads.begin() + static_cast<std::ptrdiff_t>(pads.size() / 2), 0);
      pads.insert(pads.begin(), 0);
    }
    OpDef* u = l.op("Unsqueeze", "view");
    l.input(u, view);
    (*u->mutable_attr())["axes"] = attrInts(unit);
    view = l.output(u, view.dtype, Shape(dims), "", "NCDHW");
    s = 3;
  }
  if (s == 3) {
    // MaxPool3D / AvgPool3D on NCDHW: NCDHW-ordered ksize / strides, pads per axis pair.
    OpDef* o = l.op(max ? "MaxPool3D" : "AvgPool3D", spatial < 3 ? "pool3d" : "");
    l.input(o, view, "NCDHW");
    auto& a = *o->mutable_attr();
    a["ksize"] = attrInts(withBatchChannel(kernel));
    a["strides"] = attrInts(withBatchChannel(strides));
    a["pads"] = attrInts(interleavePads(pads));
    a["data_format"] = attrS("NCDHW");
    if (max) {
      a["padding"] = attrS("CALCULATED");
      a["dilation"] = attrInts(withBatchChannel(dilations));
      a["ceil_mode"] = attrI(nodeInt(n, "ceil_mode", 0));
    } else {
      a["ceil_mode"] = attrB(nodeInt(n, "ceil_mode", 0) != 0);
      a["count_include_pad"] = attrB(nodeInt(n, "count_include_pad", 0) != 0);
      a["divisor_override"] = attrI(0);
    }
    const Value* y = n.output(0);
    if (spatial == 3) {
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name(), "NCDHW"));
      return;
    }
    std::vector<Dim> dims = y->shape().dims();
    std::vector<int64_t> unit;
    for (size_t i = 0; i < 3 - spatial; ++i) {
      unit.push_back(static_cast<int64_t>(2 + i));
      dims.insert(dims.begin() + 2, Dim::known(1));
    }
    Port p = l.output(o, y->dtype(), Shape(dims), "", "NCDHW");
    OpDef* sq = l.op("Squeeze");
    l.input(sq, p, "NCDHW");
    (*sq->mutable_attr())["axis"] = attrInts(unit);
    l.outputs(sq);
    return;
  }
  const bool oneD = s == 1;
  Port x = l.in(0);
  if (oneD) {
    // The H axis of the view: window and stride 1, no padding.
    kernel = {1, kernel[0]};
    strides = {1, strides[0]};
    pads = {0, pads[0], 0, pads[1]};
    x = l.unsqueezeH(x, "view");
  }
  OpDef* o = l.op(max ? "MaxPoolV3" : "AvgPoolV2");
  l.input(o, x, "NCHW");
  auto& a = *o->mutable_attr();
  a["ksize"] = attrInts(withBatchChannel(kernel));
  a["strides"] = attrInts(withBatchChannel(strides));
  a["padding_mode"] = attrS("CALCULATED");
  a["pads"] = attrInts(interleavePads(pads));
  a["data_format"] = attrS("NCHW");
  a["global_pooling"] = attrB(false);
  a["ceil_mode"] = attrB(nodeInt(n, "ceil_mode", 0) != 0);
  if (!max) a["exclusive"] = attrB(nodeInt(n, "count_include_pad", 0) == 0);
  if (oneD) {
    l.squeezeHOutput(o);
    return;
  }
  const Value* y = n.output(0);
  l.bind(y, l.output(o, y->dtype(), y->shape(), y->name(), "NCHW"));
};
KILN_OM_LOWERING("MaxPool", poolCheck, poolLower);
KILN_OM_LOWERING("AveragePool", poolCheck, poolLower);
void poolRaisingRules() {
  for (const char* type : {"MaxPoolV3", "AvgPoolV2"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          bool max = op.type() == "MaxPoolV3";
          if (getB(op, "global_pooling", false)) {
            r.emit(op, max ? "GlobalMaxPool" : "GlobalAveragePool", {r.in(op, 0)});
            return Status::ok();
          }
          auto ksize = getInts(op, "ksize"), strides = getInts(op, "strides"),
               pads = getInts(op, "pads");
          if (ksize.size() != 4 || strides.size() != 4 || pads.size() != 4)
            return r.unsupported(op, "ksize/strides/pads are not NCHW 4-element lists");
          if (getS(op, "data_format", "NCHW") != "NCHW")
            return r.unsupported(op, "data_format " + getS(op, "data_format", ""));
          std::string mode = getS(op, "padding_mode", "CALCULATED");
          Node* node = r.emit(op, max ? "MaxPool" : "AveragePool", {r.in(op, 0)}, 1);
          node->setAttribute("kernel_shape", Attribute::ofInts({ksize[2], ksize[3]}));
          node->setAttribute("strides", Attribute::ofInts({strides[2], strides[3]}));
          if (mode == "SAME")
            node->setAttribute("auto_pad", Attribute::ofString("SAME_UPPER"));
          else if (mode == "VALID")
            node->setAttribute("auto_pad", Attribute::ofString("VALID"));
          else
            node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
          node->setAttribute("ceil_mode", Attribute::ofInt(getB(op, "ceil_mode", false)));
          if (!max)
            node->setAttribute("count_include_pad", Attribute::ofInt(!getB(op, "exclusive", true)));
          return Status::ok();
        },
        __FILE__);
}
const bool kPoolRaisingRulesRegistered = (poolRaisingRules(), true);

void pool3dRaisingRules() {
  for (const char* type : {"MaxPool3D", "AvgPool3D"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          bool max = op.type() == "MaxPool3D";
          auto ksize = getInts(op, "ksize"), strides = getInts(op, "strides"),
               pads = getInts(op, "pads");
          if (ksize.size() != 5 || strides.size() != 5 || pads.size() != 6 ||
              getS(op, "data_format", "NDHWC") != "NCDHW" ||
              (max && getS(op, "padding", "") != "CALCULATED"))
            return r.unsupported(op, "not NCDHW 5-element ksize / strides with 6 explicit pads");
          Node* node = r.emit(op, max ? "MaxPool" : "AveragePool", {r.in(op, 0)}, 1);
          node->setAttribute("kernel_shape", Attribute::ofInts({ksize.begin() + 2, ksize.end()}));
          node->setAttribute("strides", Attribute::ofInts({strides.begin() + 2, strides.end()}));
          node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
          node->setAttribute("ceil_mode", Attribute::ofInt(getI(op, "ceil_mode", 0) ? 1 : 0));
          if (max) {
            auto dilation = getInts(op, "dilation");
            if (dilation.size() == 5)
              node->setAttribute("dilations",
                                 Attribute::ofInts({dilation.begin() + 2, dilation.end()}));
          } else {
            node->setAttribute("count_include_pad",
                               Attribute::ofInt(getB(op, "count_include_pad", true) ? 1 : 0));
          }
          return Status::ok();
        },
        __FILE__);
}
const bool kPool3dRaisingRulesRegistered = (pool3dRaisingRules(), true);

void globalPoolRules() {
  simple("GlobalAveragePool", "GlobalAveragePool", {}, 1, noCheck, __FILE__);
  // GraphEngine's public IR registers no GlobalMaxPool: files from other writers may hold one.
  addRaising(
      "GlobalMaxPool",
      [](Raiser& r, const OpDef& op) -> Status {
        r.emit(op, "GlobalMaxPool", {r.in(op, 0)}, 1);
        return Status::ok();
      },
      __FILE__);
}
const bool kGlobalPoolRulesRegistered = (globalPoolRules(), true);

// GlobalMaxPool → ReduceMax over the spatial axes, keep_dims (the public IR has no GlobalMaxPool).
KILN_OM_LOWERING(
    "GlobalMaxPool",
    [](const Node& n, const OpContext&) -> std::string {
      return rankOf(n.input(0)) >= 3 ? "" : "GlobalMaxPool of unknown rank or rank < 3";
    },
    [](Lowerer& l, const Node& n) {
      std::vector<int64_t> axes;
      for (int64_t d = 2; d < rankOf(n.input(0)); ++d)
        axes.push_back(d);
      OpDef* o = l.op("ReduceMax");
      l.input(o, l.in(0));
      l.input(o, l.constInts("axes", axes));
      (*o->mutable_attr())["keep_dims"] = attrB(true);
      l.outputs(o);
    });

} // namespace
} // namespace kiln::om
