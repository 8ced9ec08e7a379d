// Data types the MindSpore Lite CPU runtime runs: one table (op → element types its kernels take)
// and the pass that moves every lowered op onto it — cast in, compute in a supported type, cast
// back — so a graph keeps its declared types and every op finds a kernel (docs/ms_models.md,
// "Data types the runtime runs").
#include <cmath>

#include "ms_context.h"

namespace kiln::ms {

namespace {

using PT = fb::PrimitiveType;

// Input sets: bit i = input i carries the computing type (the others are axes, indices, shapes,
// conditions the kernel reads in their own type).
constexpr uint32_t kAllInputs = ~0u;
constexpr uint32_t kInput0 = 1u;
constexpr uint32_t kInputs1And2 = 6u;
constexpr uint32_t kInputs0And2 = 5u;

struct KernelTypes {
  PT op;
  std::vector<int> types; // element types with a CPU kernel (Int8 = quantized kernels only)
  uint32_t dataInputs = kAllInputs;
  uint32_t int32Outputs = 0; // outputs the runtime always writes as int32 (indices)
};

constexpr int F16 = kTypeFloat16, F32 = kTypeFloat32, I32 = kTypeInt32, I64 = kTypeInt64,
              BOOL = kTypeBool, U8 = kTypeUInt8, I8 = kTypeInt8;

// The ops kiln's lowering emits with a data type the runtime may lack. An op not listed is left
// as lowered (float-only ops never see integers from ONNX; control flow passes tensors through).
const std::vector<KernelTypes>& kernelTypes() {
  static const std::vector<KernelTypes> table = {
      // Elementwise arithmetic and comparisons: every input is data.
      {PT::PrimitiveType_AddFusion, {BOOL, F16, F32, I32}},
      {PT::PrimitiveType_SubFusion, {F16, F32, I32}},
      {PT::PrimitiveType_MulFusion, {F16, F32, I32}},
      // The int32 DivFusion kernel is registered but fails when run: integer division runs in
      // float32, exact while the dividend stays below 2^24 (then the quotient truncates right).
      {PT::PrimitiveType_DivFusion, {F16, F32}},
      {PT::PrimitiveType_RealDiv, {F16, F32}},
      {PT::PrimitiveType_Maximum, {F16, F32, I32}},
      {PT::PrimitiveType_Minimum, {F16, F32, I32}},
      {PT::PrimitiveType_FloorMod, {F16, F32, I32}},
      {PT::PrimitiveType_FloorDiv, {F16, F32, I32}},
      {PT::PrimitiveType_Mod, {F32, I32}},
      {PT::PrimitiveType_Equal, {BOOL, F16, F32, I32}},
      {PT::PrimitiveType_NotEqual, {F16, F32, I32, I64}},
      {PT::PrimitiveType_Less, {F16, F32, I32}},
      {PT::PrimitiveType_LessEqual, {F16, F32, I32}},
      {PT::PrimitiveType_Greater, {F16, F32, I32}},
      {PT::PrimitiveType_GreaterEqual, {F16, F32, I32}},
      {PT::PrimitiveType_Abs, {F16, F32, I32}},
      {PT::PrimitiveType_Neg, {F16, F32, I32}},
      {PT::PrimitiveType_Clip, {F32, I32}},
      {PT::PrimitiveType_ExpFusion, {F16, F32}},
      {PT::PrimitiveType_PowFusion, {F16, F32}},
      {PT::PrimitiveType_SquaredDifference, {F16, F32}},
      {PT::PrimitiveType_MatMulFusion, {F16, F32}},
      {PT::PrimitiveType_LogicalAnd, {BOOL, F16, F32, I32}},
      {PT::PrimitiveType_LogicalOr, {BOOL, F16, F32}},
      // Data movement: input 0 is the data, the rest are shapes, axes, indices.
      {PT::PrimitiveType_Reshape, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_Gather, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_GatherD, {F16, F32, I32}, kInput0},
      {PT::PrimitiveType_GatherNd, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_Concat, {BOOL, F16, F32, I32}},
      {PT::PrimitiveType_Stack, {F16, F32, I32}},
      {PT::PrimitiveType_Unstack, {F16, F32, I32}},
      {PT::PrimitiveType_Transpose, {BOOL, F16, F32, I32, U8}, kInput0},
      {PT::PrimitiveType_Squeeze, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_ExpandDims, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_Flatten, {F16, F32, I32}, kInput0},
      {PT::PrimitiveType_TileFusion, {BOOL, F16, F32, I32, U8}, kInput0},
      {PT::PrimitiveType_BroadcastTo, {BOOL, F16, F32, I32, U8}, kInput0},
      {PT::PrimitiveType_SliceFusion, {F16, F32, I32}, kInput0},
      {PT::PrimitiveType_StridedSlice, {BOOL, F16, F32, I32, I64}, kInput0},
      {PT::PrimitiveType_Split, {F16, F32, I32, I64}, kInput0},
      {PT::PrimitiveType_PadFusion, {F16, F32}, kInput0},
      {PT::PrimitiveType_ReverseV2, {F32, I32}, kInput0},
      {PT::PrimitiveType_ReduceFusion, {BOOL, F16, F32, I32}, kInput0},
      {PT::PrimitiveType_CumSum, {F32, I32}, kInput0},
      {PT::PrimitiveType_ScatterNdUpdate, {F16, F32, I32}, kInputs0And2},
      {PT::PrimitiveType_Range, {F16, F32, I32}},
      // Where reads its branches in 4-byte elements whatever their type (the condition is bool).
      {PT::PrimitiveType_Where, {BOOL, F16, F32, I32}, kInputs1And2},
      // Index outputs the runtime writes as int32 whatever the tensor declares.
      {PT::PrimitiveType_MaxPoolFusion, {F16, F32}, kInput0},
      {PT::PrimitiveType_ArgMaxFusion, {F16, F32, I32}, kInput0, 1u},
      {PT::PrimitiveType_ArgMinFusion, {F16, F32, I32}, kInput0, 1u},
      {PT::PrimitiveType_TopKFusion, {F16, F32, I32}, kInput0, 2u},
  };
  return table;
}

// Ops whose outputs are bool whatever type they compare in.
bool comparison(PT op) {
  return op == PT::PrimitiveType_Equal || op == PT::PrimitiveType_NotEqual ||
         op == PT::PrimitiveType_Less || op == PT::PrimitiveType_LessEqual ||
         op == PT::PrimitiveType_Greater || op == PT::PrimitiveType_GreaterEqual;
}

const KernelTypes* kernelTypesOf(uint8_t op) {
  for (const KernelTypes& k : kernelTypes())
    if (k.op == op) return &k;
  return nullptr;
}

bool supports(const KernelTypes& k, int type) {
  return std::find(k.types.begin(), k.types.end(), type) != k.types.end();
}

// Types the pass converts from and to. The runtime's Cast takes bool, uint8, int32, int64,
// float16, float32; its Cast kernel is registered for int8 but converts no int8 tensor
// (CastCPUKernel, kernel/cpu/fp32/cast_fp32.cc), so int8 goes through QuantDTypeCast with scale 1
// and zero point 0 (exact: int8 values are float32 integers). Nothing converts int16, uint16-64
// or float64: those tensors stay as lowered (and the runtime refuses the op).
bool castable(int type) {
  return type == BOOL || type == U8 || type == I8 || type == I32 || type == I64 || type == F16 ||
         type == F32;
}

// Conversions the runtime's Cast kernel makes in one step: anything to float32, float32 to the
// others, int32 <-> int64 and bool -> int32. The rest go through float32.
bool directCast(int from, int to) {
  return to == F32 || from == F32 || (from == I32 && to == I64) || (from == I64 && to == I32) ||
         (from == BOOL && to == I32);
}

bool isIntegerType(int type) {
  return type == BOOL || type == U8 || type == I8 || type == I32 || type == I64;
}

// The type an op computes in for data of `type`: int32 for integers and bool (index math and
// small integers fit), float32 for integers on a float-only kernel; nullopt when none applies.
std::optional<int> computeType(const KernelTypes& k, int type) {
  if (!castable(type)) return std::nullopt;
  if (isIntegerType(type) && supports(k, I32)) return I32;
  if (supports(k, F32)) return F32;
  return std::nullopt;
}

// Largest integer float32 holds exactly (2^24).
constexpr double kFloat32ExactInt = 16777216.0;

std::optional<int64_t> intElement(const uint8_t* p, int type) {
  switch (type) {
  case BOOL:
  case U8:
    return *p;
  case I8:
    return static_cast<int8_t>(*p);
  case I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    return std::nullopt;
  }
}

size_t elementSize(int type) {
  switch (type) {
  case BOOL:
  case kTypeInt8:
  case U8:
    return 1;
  case F16:
    return 2;
  case I64:
  case kTypeFloat64:
    return 8;
  default:
    return 4;
  }
}

} // namespace

Status LoweringContext::legalizeDataTypes() {
  // Tensors a copy in another type stood in for: dropped at the end when nothing reads them.
  std::set<uint32_t> replaced;
  // What a constant becomes in a type, once per (constant, type).
  std::map<std::pair<uint32_t, int>, uint32_t> narrowed;
  auto narrowConst = [&](const MsNode& node, uint32_t id, int to) -> Expected<uint32_t> {
    if (auto it = narrowed.find({id, to}); it != narrowed.end()) return it->second;
    const MsTensor& c = out_.tensors[id];
    const int from = c.dataType;
    const size_t size = elementSize(from);
    const size_t count = c.data->size() / size;
    std::vector<uint8_t> bytes(count * 4);
    for (size_t i = 0; i < count; ++i) {
      const int64_t v = *intElement(c.data->data() + i * size, from);
      const bool fits = to == I32 ? v >= std::numeric_limits<int32_t>::min() &&
                                        v <= std::numeric_limits<int32_t>::max()
                                  : std::fabs(static_cast<double>(v)) <= kFloat32ExactInt;
      if (!fits)
        return Status(ErrorCode::MsLowerBadAttribute,
                      fmt::format("node '{}' ({}): constant '{}' holds {}, which {} cannot hold; "
                                  "the MindSpore Lite CPU runtime has no {} kernel for {}",
                                  node.name, fb::EnumNamePrimitiveType(PT(node.primitiveType)),
                                  c.name, v, to == I32 ? "int32" : "float32 exactly",
                                  fb::EnumNamePrimitiveType(PT(node.primitiveType)),
                                  dtypeName(*dtypeOfTypeId(from))),
                      "keep the values within int32 in the exporter, or keep this model on "
                      "another target");
      if (to == I32) {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(bytes.data() + i * 4, &x, 4);
      } else {
        const float x = static_cast<float>(v);
        std::memcpy(bytes.data() + i * 4, &x, 4);
      }
    }
    MsTensor t = c;
    t.dataType = to;
    t.data = Buffer::owned(std::move(bytes));
    t.quantParams.clear();
    const uint32_t made = addTensor(std::move(t));
    narrowed[{id, to}] = made;
    replaced.insert(id);
    return made;
  };
  // Tensors this pass gave a unit quantization parameter (scale 1, zero point 0) for a
  // QuantDTypeCast: plain integer data still, not quantized values.
  std::set<uint32_t> unitQuantized;
  auto castNode = [&](const std::string& base, uint32_t from, uint32_t to) {
    MsNode n;
    n.name = base + "_cast";
    for (int i = 1; !nodeNames_.insert(n.name).second; ++i)
      n.name = fmt::format("{}_cast_{}", base, i);
    const int a = out_.tensors[from].dataType, b = out_.tensors[to].dataType;
    if (a == I8 || b == I8) {
      // QuantDTypeCast reads scale and zero point from the int8 side's (first) quantization
      // parameter, and from the float side when the int8 one is not marked initialized (how kiln
      // writes them): both sides carry the unit parameter.
      for (uint32_t t : {from, to}) {
        if (out_.tensors[t].quantParams.empty()) {
          MsQuantParam unit;
          unit.dstDtype = I8;
          out_.tensors[t].quantParams = {unit};
          unitQuantized.insert(t);
        }
      }
      n.primitiveType = static_cast<uint8_t>(PT::PrimitiveType_QuantDTypeCast);
      n.attributes = [a, b](FBB& fbb) { return fb::CreateQuantDTypeCast(fbb, a, b).Union(); };
      n.inputs = {from};
      n.outputs = {to};
      out_.nodes.push_back(std::move(n));
      return static_cast<uint32_t>(out_.nodes.size() - 1);
    }
    n.primitiveType = static_cast<uint8_t>(PT::PrimitiveType_Cast);
    n.attributes = emptyTable<fb::Cast>();
    n.inputs = {from,
                intConst({out_.tensors[to].dataType}, n.name + "_to", std::vector<int32_t>{})};
    n.outputs = {to};
    out_.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(out_.nodes.size() - 1);
  };
  auto retyped = [&](uint32_t id, int type, const std::string& suffix) -> uint32_t {
    MsTensor t = out_.tensors[id];
    t.name = t.name + suffix;
    t.nodeType = kNodeCNode;
    t.dataType = type;
    t.data.reset();
    t.quantParams.clear();
    t.writePerm.clear();
    t.sourceDims.clear();
    return addTensor(std::move(t));
  };
  // The Cast nodes taking tensor `from` to tensor `to`, through float32 where the runtime has no
  // direct conversion.
  auto castChain = [&](const std::string& base, uint32_t from, uint32_t to) {
    const int a = out_.tensors[from].dataType, b = out_.tensors[to].dataType;
    if (directCast(a, b) && (a == F32 || b == F32 || (a != I8 && b != I8)))
      return std::vector<uint32_t>{castNode(base, from, to)};
    const uint32_t middle = retyped(to, F32, "_f32");
    return std::vector<uint32_t>{castNode(base, from, middle), castNode(base, middle, to)};
  };
  // The runtime's Int8 kernels are quantized ones: an int8 tensor with quantization parameters
  // keeps them (reported as supported), a plain one is integer data no table entry lists.
  auto plainType = [&](uint32_t id) { return out_.tensors[id].dataType; };

  auto quantizedInt8 = [&](const MsNode& node, const KernelTypes& k) {
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if ((k.dataInputs & (1u << i)) && !out_.tensors[node.inputs[i]].quantParams.empty() &&
          !unitQuantized.count(node.inputs[i]))
        return true;
    return false;
  };

  for (MsSubGraph& sub : subgraphs_) {
    std::vector<uint32_t> order;
    // Tensors of this subgraph already held in another type: (tensor, type) → that copy.
    std::map<std::pair<uint32_t, int>, uint32_t> twin;
    // Original outputs now computed in another type, and the node that produces the copy.
    struct CastBack {
      uint32_t original, copy;
      size_t before; // position in `order` the cast back goes before (right after the producer)
      std::string base;
    };
    std::vector<CastBack> castBack;
    for (uint32_t index : sub.nodes) {
      MsNode& node = out_.nodes[index];
      // A Cast of a value this pass already holds in the Cast's output type reads that copy (a
      // copying Cast), so the value need not be cast back first.
      if (node.primitiveType == PT::PrimitiveType_Cast && !node.inputs.empty() &&
          node.outputs.size() == 1) {
        auto it = twin.find({node.inputs[0], plainType(node.outputs[0])});
        if (it != twin.end()) node.inputs[0] = it->second;
      }
      const KernelTypes* k = node.quantType == 0 ? kernelTypesOf(node.primitiveType) : nullptr;
      if (!k) {
        order.push_back(index);
        continue;
      }
      // The computing type: that of the first data input (as the runtime picks its kernel).
      std::optional<int> dataType;
      for (size_t i = 0; i < node.inputs.size() && !dataType; ++i)
        if (k->dataInputs & (1u << i)) dataType = plainType(node.inputs[i]);
      std::optional<int> target;
      if (dataType && !supports(*k, *dataType) && !quantizedInt8(node, *k))
        target = computeType(*k, *dataType);
      // The type every data input is read in: a data input of another type (Pow's integer
      // exponent of a float base) would be read as this one's bytes.
      std::optional<int> compute = target;
      if (!compute && dataType && supports(*k, *dataType) && castable(*dataType))
        compute = dataType;
      auto needsCast = [&](uint32_t id) {
        return compute && plainType(id) != *compute && castable(plainType(id));
      };
      bool mixed = false;
      for (size_t i = 0; i < node.inputs.size(); ++i)
        mixed = mixed || ((k->dataInputs & (1u << i)) && needsCast(node.inputs[i]));
      if (!target && !mixed && !k->int32Outputs) {
        order.push_back(index);
        continue;
      }
      const std::string base = node.name;
      std::vector<uint32_t> inputs = node.inputs;
      std::vector<uint32_t> outputs = node.outputs;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!(k->dataInputs & (1u << i)) || !needsCast(inputs[i])) continue;
        const uint32_t id = inputs[i];
        const MsTensor& t = out_.tensors[id];
        if (auto it = twin.find({id, *compute}); it != twin.end()) {
          inputs[i] = it->second;
        } else if (t.nodeType == kNodeValue && t.data && isIntegerType(t.dataType) &&
                   (*compute == I32 || *compute == F32)) {
          KILN_ASSIGN_OR_RETURN(inputs[i], narrowConst(out_.nodes[index], id, *compute));
        } else {
          const uint32_t copy = retyped(id, *compute, "_in");
          for (uint32_t c : castChain(base, id, copy))
            order.push_back(c);
          twin[{id, *compute}] = copy;
          inputs[i] = copy;
        }
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        const int declared = plainType(outputs[i]);
        int computed = declared;
        if (k->int32Outputs & (1u << i))
          computed = I32;
        else if (target && dataType && declared == *dataType && !comparison(k->op))
          computed = *target;
        if (computed == declared || !castable(declared)) continue;
        const uint32_t copy = retyped(outputs[i], computed, "_out");
        twin[{outputs[i], computed}] = copy;
        castBack.push_back({outputs[i], copy, order.size() + 1, base});
        replaced.insert(outputs[i]);
        outputs[i] = copy;
      }
      MsNode& lowered = out_.nodes[index]; // castNode may have moved the node list
      lowered.inputs = std::move(inputs);
      lowered.outputs = std::move(outputs);
      order.push_back(index);
    }
    // Cast an output back to its declared type only where something still reads that type: a
    // node left as lowered, a graph or subgraph result.
    std::set<uint32_t> read(sub.outputs.begin(), sub.outputs.end());
    read.insert(out_.outputs.begin(), out_.outputs.end());
    for (uint32_t index : order)
      read.insert(out_.nodes[index].inputs.begin(), out_.nodes[index].inputs.end());
    std::map<size_t, std::vector<uint32_t>> inserts; // position → cast nodes placed before it
    for (const CastBack& c : castBack)
      if (read.count(c.original))
        for (uint32_t cast : castChain(c.base, c.copy, c.original))
          inserts[c.before].push_back(cast);
    std::vector<uint32_t> finalOrder;
    for (size_t i = 0; i <= order.size(); ++i) {
      if (auto it = inserts.find(i); it != inserts.end())
        finalOrder.insert(finalOrder.end(), it->second.begin(), it->second.end());
      if (i < order.size()) finalOrder.push_back(order[i]);
    }
    sub.nodes = std::move(finalOrder);
  }
  dropUnread(replaced);
  // A single graph is written in node-list order: put the list in execution order.
  if (subgraphs_.size() == 1) {
    std::vector<MsNode> nodes;
    nodes.reserve(subgraphs_[0].nodes.size());
    for (uint32_t index : subgraphs_[0].nodes)
      nodes.push_back(std::move(out_.nodes[index]));
    out_.nodes = std::move(nodes);
    for (uint32_t i = 0; i < subgraphs_[0].nodes.size(); ++i)
      subgraphs_[0].nodes[i] = i;
  }
  return Status::ok();
}

void LoweringContext::dropUnread(const std::set<uint32_t>& candidates) {
  std::set<uint32_t> read(out_.inputs.begin(), out_.inputs.end());
  read.insert(out_.outputs.begin(), out_.outputs.end());
  for (const MsSubGraph& sub : subgraphs_) {
    read.insert(sub.inputs.begin(), sub.inputs.end());
    read.insert(sub.outputs.begin(), sub.outputs.end());
  }
  for (const MsNode& n : out_.nodes) {
    read.insert(n.inputs.begin(), n.inputs.end());
    read.insert(n.outputs.begin(), n.outputs.end());
  }
  std::vector<uint32_t> newIndex(out_.tensors.size());
  std::vector<MsTensor> kept;
  for (uint32_t i = 0; i < out_.tensors.size(); ++i) {
    if (candidates.count(i) && !read.count(i)) continue;
    newIndex[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(std::move(out_.tensors[i]));
  }
  if (kept.size() == out_.tensors.size()) {
    out_.tensors = std::move(kept);
    return;
  }
  out_.tensors = std::move(kept);
  auto remap = [&](std::vector<uint32_t>& ids) {
    for (uint32_t& id : ids)
      id = newIndex[id];
  };
  remap(out_.inputs);
  remap(out_.outputs);
  for (MsSubGraph& sub : subgraphs_) {
    remap(sub.inputs);
    remap(sub.outputs);
  }
  for (MsNode& n : out_.nodes) {
    remap(n.inputs);
    remap(n.outputs);
  }
}

} // namespace kiln::ms
