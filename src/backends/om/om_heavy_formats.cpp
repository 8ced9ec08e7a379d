// Heavy-format selection for the lowered GraphDef (om.md §5.3, ATC's format judge and TransData
// insertion): Conv2D chains take NC1HWC0 feature maps and FRACTAL_Z weights, converted offline
// in WEIGHTS_DATA as ATC stores them; TransData ops sit where an NC1HWC0 tensor meets an op that
// reads NCHW (and back). Index math is hand-written: no library knows these Ascend layouts.
#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "kiln/backends/om_formats.h"
#include "om_internal.h"

namespace kiln::om {

int64_t cubeC0(DType type) {
  switch (type) {
  case DType::Float16:
  case DType::BFloat16:
  case DType::Float32: // the INI k0 (16), not "32 bytes / element size" (om.md §5.3)
    return 16;
  case DType::Int8:
  case DType::UInt8:
    return 32;
  default:
    return 0;
  }
}

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The group packing of a FRACTAL_Z weight (see HeavyLayout::FractalZ).
struct GroupPacking {
  int64_t cinOri, coutOri, e, c1, coutOpt, blocks;
};
GroupPacking groupPacking(const std::vector<int64_t>& oihw, int64_t c0, int64_t groups) {
  GroupPacking p;
  p.cinOri = oihw[1];
  p.coutOri = oihw[0] / groups;
  p.e = std::min(
      std::lcm(std::lcm(p.cinOri, c0) / p.cinOri, std::lcm(p.coutOri, kFractalN0) / p.coutOri),
      groups);
  p.c1 = ceilDiv(p.e * p.cinOri, c0);
  p.coutOpt = ceilDiv(p.e * p.coutOri, kFractalN0) * kFractalN0;
  p.blocks = ceilDiv(groups, p.e);
  return p;
}

} // namespace

std::vector<int64_t> heavyDims(HeavyLayout layout, const std::vector<int64_t>& d, int64_t c0,
                               int64_t groups) {
  if (layout == HeavyLayout::Nc1hwc0) return {d[0], ceilDiv(d[1], c0), d[2], d[3], c0};
  GroupPacking p = groupPacking(d, c0, groups);
  return {p.blocks * p.c1 * d[2] * d[3], p.coutOpt / kFractalN0, kFractalN0, c0};
}

int64_t packFormat(int primary, int64_t subFormat) {
  return static_cast<int64_t>(primary & 0xFF) | ((subFormat & 0xFFFF) << 8);
}
int64_t subFormatOf(int64_t packedFormat) { return (packedFormat >> 8) & 0xFFFF; }

namespace {

// Calls visit(plainIndex, heavyIndex) for every element of a 4-D plain tensor (row-major NCHW /
// OIHW, element (n, c, h, w)); where it goes is om.md §5.3's rule for the layout.
template <typename Visit>
void forEachHeavy(HeavyLayout layout, const std::vector<int64_t>& d, int64_t c0, int64_t groups,
                  Visit visit) {
  const int64_t n = d[0], c = d[1], h = d[2], w = d[3], c1 = ceilDiv(c, c0);
  const GroupPacking p =
      layout == HeavyLayout::FractalZ ? groupPacking(d, c0, groups) : GroupPacking{};
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw) {
          int64_t plain = ((in * c + ic) * h + ih) * w + iw;
          int64_t heavy;
          if (layout == HeavyLayout::Nc1hwc0) {
            heavy = (((in * c1 + ic / c0) * h + ih) * w + iw) * c0 + ic % c0;
          } else {
            const int64_t g = in / p.coutOri, slot = g % p.e;
            const int64_t ci = slot * p.cinOri + ic, co = slot * p.coutOri + in % p.coutOri;
            const int64_t row = ((g / p.e) * p.c1 + ci / c0) * h * w + ih * w + iw;
            heavy = (row * p.coutOpt + co) * c0 + ci % c0;
          }
          visit(plain, heavy);
        }
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t x : dims)
    p *= x;
  return p;
}

void copyElement(uint8_t* to, int64_t toIndex, const uint8_t* from, int64_t fromIndex,
                 size_t bytes) {
  std::copy_n(from + fromIndex * bytes, bytes, to + toIndex * bytes);
}

} // namespace

std::vector<uint8_t> toHeavy(HeavyLayout layout, const uint8_t* plain,
                             const std::vector<int64_t>& plainDims, size_t elementBytes, int64_t c0,
                             int64_t groups) {
  std::vector<uint8_t> out(product(heavyDims(layout, plainDims, c0, groups)) * elementBytes, 0);
  forEachHeavy(layout, plainDims, c0, groups,
               [&](int64_t p, int64_t h) { copyElement(out.data(), h, plain, p, elementBytes); });
  return out;
}

std::vector<uint8_t> fromHeavy(HeavyLayout layout, const uint8_t* heavy,
                               const std::vector<int64_t>& plainDims, size_t elementBytes,
                               int64_t c0, int64_t groups) {
  std::vector<uint8_t> out(product(plainDims) * elementBytes);
  forEachHeavy(layout, plainDims, c0, groups,
               [&](int64_t p, int64_t h) { copyElement(out.data(), p, heavy, h, elementBytes); });
  return out;
}

namespace {

using ge::proto::OpDef;
using ge::proto::TensorDescriptor;

const char* const kNc1hwc0Name = "NC1HWC0";
const char* const kFractalZName = "FRACTAL_Z";

// Ops whose result is computed element by element, so any layout works (input 0 is the data;
// further inputs must be single elements).
const std::set<std::string> kUnaryOps = {
    "Relu",        "Sigmoid",   "Tanh", "LeakyRelu", "Elu",        "Selu", "Celu",
    "HardSigmoid", "HardSwish", "Mish", "Softplus",  "Softsign",   "Abs",  "Neg",
    "Exp",         "Sqrt",      "Erf",  "Cast",      "ClipByValue"};
// Element-wise binaries: each input is the output's full shape, a per-channel [N, C, 1, 1]
// (which broadcasts over H and W in NC1HWC0 as in NCHW: its channels sit in the same C1/C0
// slots), or a single element.
const std::set<std::string> kBinaryOps = {"Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum"};
// 2-D and global pooling on NCHW reads NC1HWC0 just as well (channels are independent).
const std::set<std::string> kPoolOps = {"MaxPoolV3", "AvgPoolV2", "GlobalAveragePool",
                                        "GlobalMaxPool"};

std::vector<int64_t> descDims(const TensorDescriptor& d) {
  return {d.shape().dim().begin(), d.shape().dim().end()};
}

bool isStatic4d(const TensorDescriptor& d) {
  if (d.shape().dim_size() != 4) return false;
  for (int64_t x : d.shape().dim())
    if (x < 0) return false;
  return true;
}

DType descDType(const TensorDescriptor& d) {
  return fromGeDType(d.dtype()).value_or(DType::Undefined);
}

bool heavyCapable(const TensorDescriptor& d) {
  DType t = descDType(d);
  return isStatic4d(d) && (t == DType::Float16 || t == DType::Float32);
}

bool singleElement(const TensorDescriptor& d) {
  for (int64_t x : d.shape().dim())
    if (x != 1) return false;
  return true;
}

int64_t elementBytes(const TensorDescriptor& d) {
  return static_cast<int64_t>(dtypeStorageBytes(descDType(d), 1).value_or(0));
}

// Rewrites a 4-D NCHW descriptor as `layout` with `dims`, keeping the 4-D shape as its origin.
void setHeavy(TensorDescriptor* d, const std::string& layout, int64_t format,
              const std::vector<int64_t>& dims) {
  std::vector<int64_t> origin = descDims(*d);
  d->mutable_shape()->clear_dim();
  for (int64_t x : dims)
    d->mutable_shape()->add_dim(x);
  d->set_layout(layout);
  auto& attrs = *d->mutable_attr();
  attrs["format_for_int"] = attrI(format);
  attrs["origin_format"] = attrS("NCHW");
  attrs["origin_format_for_int"] = attrI(kFormatNchw);
  attrs["origin_shape"] = attrInts(origin);
  d->set_size(product(dims) * elementBytes(*d));
}

void setNc1hwc0(TensorDescriptor* d) {
  if (d->layout() == kNc1hwc0Name) return;
  setHeavy(d, kNc1hwc0Name, kFormatNc1hwc0,
           heavyDims(HeavyLayout::Nc1hwc0, descDims(*d), cubeC0(descDType(*d))));
}

// A group convolution's weight carries its group count as FRACTAL_Z's sub-format.
void setFractalZ(TensorDescriptor* d, int64_t groups) {
  if (d->layout() == kFractalZName) return;
  setHeavy(d, kFractalZName, groups > 1 ? packFormat(kFormatFractalZ, groups) : kFormatFractalZ,
           heavyDims(HeavyLayout::FractalZ, descDims(*d), cubeC0(descDType(*d)), groups));
}

// The plain side of a TransData: a 4-D map is NCHW whatever the producer called it.
void setPlainNchw(TensorDescriptor* d) {
  d->set_layout("NCHW");
  auto& attrs = *d->mutable_attr();
  attrs["format_for_int"] = attrI(kFormatNchw);
  attrs["origin_format"] = attrS("NCHW");
  attrs["origin_format_for_int"] = attrI(kFormatNchw);
  attrs["origin_shape"] = attrInts(descDims(*d));
  d->set_size(product(descDims(*d)) * elementBytes(*d));
}

class HeavyFormats {
 public:
  explicit HeavyFormats(LoweredModel& model) : model_(model) {}

  Status run() {
    if (model_.modelDef.graph_size() == 0) return Status::ok();
    graph_ = model_.modelDef.mutable_graph(0);
    index();
    choose();
    if (heavyOps_.empty()) return Status::ok();
    rewire();
    reorder();
    return rebuildWeights();
  }

 private:
  void index() {
    for (OpDef& op : *graph_->mutable_op()) {
      byName_[op.name()] = &op;
      names_.insert(op.name());
      for (int i = 0; i < op.input_size(); ++i)
        if (!op.input(i).empty() && !isControlInput(op.input(i))) ++useCount_[op.input(i)];
    }
  }

  const TensorDescriptor* sourceDesc(const std::string& src) const {
    auto colon = src.rfind(':');
    auto it = byName_.find(src.substr(0, colon));
    if (it == byName_.end()) return nullptr;
    int index = std::stoi(src.substr(colon + 1));
    return index < it->second->output_desc_size() ? &it->second->output_desc(index) : nullptr;
  }
  OpDef* sourceOp(const std::string& src) const {
    auto it = byName_.find(src.substr(0, src.rfind(':')));
    return it == byName_.end() ? nullptr : it->second;
  }
  bool heavySource(const std::string& src) const {
    OpDef* op = sourceOp(src);
    return op && heavyOps_.count(op->name()) && src == op->name() + ":0";
  }

  // A Conv2D takes the heavy formats when its data is a static fp16/fp32 NCHW map and its weight
  // a constant only it reads; group (and depthwise) convolutions pack their groups into FRACTAL_Z.
  bool convCandidate(const OpDef& op) const {
    if (op.type() != "Conv2D" || op.input_size() < 2 || op.input_desc_size() < 2 ||
        op.output_desc_size() != 1)
      return false;
    const int64_t groups = getI(op, "groups", 1);
    if (groups < 1 || getS(op, "data_format", "NCHW") != "NCHW") return false;
    if (!heavyCapable(op.input_desc(0)) || !heavyCapable(op.output_desc(0))) return false;
    OpDef* weight = sourceOp(op.input(1));
    if (!weight || (weight->type() != "Const" && weight->type() != "FileConstant")) return false;
    if (weight->output_desc_size() != 1 || !heavyCapable(weight->output_desc(0))) return false;
    auto w = descDims(weight->output_desc(0));
    if (w[0] <= 0 || w[1] <= 0 || w[0] % groups != 0 ||
        w[1] * groups != op.input_desc(0).shape().dim(1))
      return false;
    auto it = useCount_.find(op.input(1));
    return it != useCount_.end() && it->second == 1;
  }

  // Which inputs of a heavy op carry the feature map (and so take NC1HWC0).
  std::vector<int> mapInputs(const OpDef& op) const {
    if (op.type() == "Conv2D" || kPoolOps.count(op.type()) || kUnaryOps.count(op.type()))
      return {0};
    std::vector<int> maps;
    for (int i = 0; i < op.input_size(); ++i)
      if (!op.input(i).empty() && !isControlInput(op.input(i)) && !singleElement(op.input_desc(i)))
        maps.push_back(i);
    return maps;
  }

  // An element-wise or pooling op follows a heavy producer when every other input is a single
  // element (binaries: or a full-shape / per-channel map, which a TransData brings in if plain).
  bool followsHeavy(const OpDef& op) const {
    bool unary = kUnaryOps.count(op.type()), binary = kBinaryOps.count(op.type()),
         pool = kPoolOps.count(op.type());
    if (!unary && !binary && !pool) return false;
    if (op.output_desc_size() != 1 || !heavyCapable(op.output_desc(0))) return false;
    if (op.input_desc_size() != op.input_size()) return false;
    bool anyHeavy = false;
    for (int i = 0; i < op.input_size(); ++i) {
      if (op.input(i).empty() || isControlInput(op.input(i))) continue;
      const TensorDescriptor& in = op.input_desc(i);
      bool isMap = (i == 0 && !binary) || (binary && !singleElement(in));
      if (!isMap) {
        if (!singleElement(in)) return false;
        continue;
      }
      if (!heavyCapable(in)) return false;
      const auto inDims = descDims(in), outDims = descDims(op.output_desc(0));
      const bool perChannel = binary && inDims[0] == outDims[0] && inDims[1] == outDims[1] &&
                              inDims[2] == 1 && inDims[3] == 1;
      if (!pool && inDims != outDims && !perChannel) return false;
      anyHeavy = anyHeavy || heavySource(op.input(i));
    }
    return anyHeavy;
  }

  // GraphDef order is topological (the lowerer emits producers first), so one forward sweep
  // sees every producer's decision before its consumers.
  void choose() {
    for (const OpDef& op : graph_->op()) {
      if (convCandidate(op)) {
        heavyOps_.insert(op.name());
        fractalConsts_[sourceOp(op.input(1))->name()] = getI(op, "groups", 1);
      } else if (followsHeavy(op)) {
        heavyOps_.insert(op.name());
      }
    }
  }

  // The TransData that converts `src` to NC1HWC0 (toHeavy) or back, created once per source.
  std::string transData(const std::string& src, bool toHeavy) {
    auto key = std::make_pair(src, toHeavy);
    if (auto it = trans_.find(key); it != trans_.end()) return it->second;
    std::string name;
    do
      name = fmt::format("trans_TransData_{}", transCount_++);
    while (names_.count(name));
    names_.insert(name);
    OpDef op;
    op.set_name(name);
    op.set_type("TransData");
    op.set_stream_id(0);
    op.set_has_out_attr(true);
    op.add_input(src);
    TensorDescriptor* in = op.add_input_desc();
    *in = *sourceDesc(src);
    TensorDescriptor out = *sourceDesc(src);
    out.set_name(name);
    if (toHeavy) {
      setPlainNchw(in);
      setNc1hwc0(&out);
    } else {
      // Back to the plain NCHW map the heavy one was made from.
      std::vector<int64_t> origin = intsOf(in->attr().at("origin_shape"));
      out.mutable_shape()->clear_dim();
      for (int64_t x : origin)
        out.mutable_shape()->add_dim(x);
      setPlainNchw(&out);
    }
    auto& attrs = *op.mutable_attr();
    attrs["src_format"] = attrS(toHeavy ? "NCHW" : kNc1hwc0Name);
    attrs["dst_format"] = attrS(toHeavy ? kNc1hwc0Name : "NCHW");
    attrs["groups"] = attrI(1);
    if (out.size() > 0) model_.memorySize += static_cast<uint64_t>(out.size());
    *op.add_output_desc() = std::move(out);
    std::string producer = src.substr(0, src.rfind(':'));
    inserted_[producer].push_back(std::move(op));
    trans_[key] = name + ":0";
    return name + ":0";
  }

  static std::vector<int64_t> intsOf(const ge::proto::AttrDef& a) {
    return {a.list().i().begin(), a.list().i().end()};
  }

  void rewire() {
    // Producers first: heavy outputs change before any consumer copies a descriptor.
    for (OpDef& op : *graph_->mutable_op()) {
      if (!heavyOps_.count(op.name())) continue;
      TensorDescriptor* out = op.mutable_output_desc(0);
      int64_t before = out->size();
      setNc1hwc0(out);
      model_.memorySize += static_cast<uint64_t>(out->size() - before);
    }
    for (const auto& [name, groups] : fractalConsts_) {
      OpDef* c = byName_.at(name);
      setFractalZ(c->mutable_output_desc(0), groups);
      if (auto it = c->mutable_attr()->find("value"); it != c->mutable_attr()->end())
        setFractalZ(it->second.mutable_t()->mutable_desc(), groups);
    }
    // Originally-plain sources feeding heavy inputs get a TransData in; heavy sources feeding
    // plain consumers (NetOutput included) get one out.
    std::vector<OpDef*> ops;
    for (OpDef& op : *graph_->mutable_op())
      ops.push_back(&op);
    for (OpDef* op : ops) {
      bool heavy = heavyOps_.count(op->name());
      std::set<int> maps;
      if (heavy)
        for (int i : mapInputs(*op))
          maps.insert(i);
      for (int i = 0; i < op->input_size(); ++i) {
        const std::string src = op->input(i);
        if (src.empty() || isControlInput(src)) continue;
        bool fromHeavy = heavySource(src);
        if (heavy && i == 1 && op->type() == "Conv2D") {
          setFractalZ(op->mutable_input_desc(1), getI(*op, "groups", 1));
        } else if (maps.count(i)) {
          if (!fromHeavy) op->set_input(i, transData(src, true));
          setNc1hwc0(op->mutable_input_desc(i));
        } else if (fromHeavy) {
          op->set_input(i, transData(src, false));
        }
      }
    }
  }

  // Each TransData goes right after its producer; ids follow the new order.
  void reorder() {
    google::protobuf::RepeatedPtrField<OpDef> ordered;
    auto& ops = *graph_->mutable_op();
    for (OpDef& op : ops) {
      std::string name = op.name();
      ordered.Add(std::move(op));
      if (auto it = inserted_.find(name); it != inserted_.end())
        for (OpDef& t : it->second)
          ordered.Add(std::move(t));
    }
    ops.Swap(&ordered);
    int64_t id = 0;
    for (OpDef& op : ops)
      op.set_id(id++);
  }

  // WEIGHTS_DATA with the FRACTAL_Z constants marked for rearranging and every later constant
  // moved up. Only the layout changes here: the bytes are rearranged one tensor at a time when
  // the file is written (WeightSource::emit).
  Status rebuildWeights() {
    struct Stored {
      TensorDescriptor* desc;
      TensorDescriptor* valueDesc;
      uint64_t oldOffset, oldSize, newOffset, newSize;
      bool fractal;
    };
    std::vector<Stored> consts;
    for (OpDef& op : *graph_->mutable_op()) {
      bool fractal = fractalConsts_.count(op.name());
      if (op.type() == "FileConstant") {
        if (fractal) fractalizeFile(op);
        continue;
      }
      if (op.type() != "Const" || op.output_desc_size() == 0) continue;
      TensorDescriptor* desc = op.mutable_output_desc(0);
      auto valueIt = op.mutable_attr()->find("value");
      TensorDescriptor* valueDesc = valueIt == op.mutable_attr()->end()
                                        ? nullptr
                                        : valueIt->second.mutable_t()->mutable_desc();
      uint64_t offset = static_cast<uint64_t>(desc->data_offset());
      uint64_t size = static_cast<uint64_t>(desc->weight_size());
      if (offset + size > model_.weights.size)
        return Status(
            ErrorCode::Internal,
            fmt::format("constant '{}' lies outside the weights it was lowered into", op.name()),
            "report this as a kiln bug");
      uint64_t newSize = fractal ? static_cast<uint64_t>(desc->size()) : size;
      consts.push_back({desc, valueDesc, offset, size, 0, newSize, fractal});
    }
    std::stable_sort(consts.begin(), consts.end(),
                     [](const Stored& a, const Stored& b) { return a.oldOffset < b.oldOffset; });
    uint64_t end = 0, oldEnd = 0;
    for (Stored& c : consts) {
      if (c.oldOffset < oldEnd)
        return Status(ErrorCode::Internal, "two constants share WEIGHTS_DATA bytes",
                      "report this as a kiln bug");
      c.newOffset = (end + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
      end = c.newOffset + c.newSize;
      oldEnd = c.oldOffset + c.oldSize;
    }
    WeightsLayout& weights = model_.weights;
    WeightsLayout moved;
    for (Stored& c : consts) {
      auto it = weights.pieces.find(c.oldOffset);
      if (c.oldSize > 0 && it != weights.pieces.end()) {
        WeightSource source = std::move(it->second);
        weights.pieces.erase(it);
        if (c.fractal) {
          std::vector<int64_t> origin = intsOf(c.desc->attr().at("origin_shape"));
          source.makeFractal(origin, static_cast<size_t>(elementBytes(*c.desc)),
                             cubeC0(descDType(*c.desc)), fractalGroups(*c.desc));
          if (source.size != c.newSize)
            return Status(ErrorCode::Internal,
                          fmt::format("a FRACTAL_Z weight takes {} bytes, its descriptor says {}",
                                      source.size, c.newSize),
                          "report this as a kiln bug");
        }
        moved.pieces[c.newOffset] = std::move(source);
      }
      for (TensorDescriptor* d : {c.desc, c.valueDesc}) {
        if (!d) continue;
        d->set_data_offset(static_cast<int64_t>(c.newOffset));
        d->set_weight_size(static_cast<int64_t>(c.newSize));
      }
    }
    if (!weights.pieces.empty())
      return Status(ErrorCode::Internal, "a weight belongs to no constant of the main graph",
                    "report this as a kiln bug");
    moved.size = end;
    weights = std::move(moved);
    return Status::ok();
  }

  void fractalizeFile(OpDef& op) {
    std::string location = getS(op, "file_path", "");
    for (auto& [file, source] : model_.externalFiles) {
      if (file != location) continue;
      const TensorDescriptor& desc = op.output_desc(0);
      std::vector<int64_t> origin = intsOf(desc.attr().at("origin_shape"));
      source.makeFractal(origin, static_cast<size_t>(elementBytes(desc)), cubeC0(descDType(desc)),
                         fractalGroups(desc));
      (*op.mutable_attr())["shape"] = attrInts(descDims(desc));
    }
  }

  LoweredModel& model_;
  ge::proto::GraphDef* graph_ = nullptr;
  std::map<std::string, OpDef*> byName_;
  std::set<std::string> names_;
  std::map<std::string, int> useCount_; // readers of each "op:index"
  std::set<std::string> heavyOps_;
  std::map<std::string, int64_t> fractalConsts_; // constant → its convolution's groups
  std::map<std::pair<std::string, bool>, std::string> trans_;
  std::map<std::string, std::vector<OpDef>> inserted_;
  int transCount_ = 0;
};

} // namespace

Status applyHeavyFormats(LoweredModel& model) { return HeavyFormats(model).run(); }

int64_t fractalGroups(const ge::proto::TensorDescriptor& d) {
  auto it = d.attr().find("format_for_int");
  int64_t groups = it == d.attr().end() ? 0 : subFormatOf(it->second.i());
  return groups > 0 ? groups : 1;
}

bool isControlInput(const std::string& input) {
  return input.size() >= 3 && input.compare(input.size() - 3, 3, ":-1") == 0;
}

} // namespace kiln::om
