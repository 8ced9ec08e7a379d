// What the MindSpore Lite runtime's kernels need of their operands beyond the op's meaning: Where
// operands it can broadcast, inputs it reads while building the model.
#include <cstdint>
#include <fmt/format.h>
#include <vector>

#include "ms_context.h"

namespace kiln::ms {

namespace {

int64_t elementCount(const std::vector<int32_t>& dims) {
  int64_t count = 1;
  for (int32_t d : dims)
    count *= d;
  return count;
}

std::string buildTimeInputMessage(const Node& n, size_t input, const char* what) {
  return fmt::format("{} '{}' of {} is known only at run time; the MindSpore Lite runtime reads "
                     "it while building the model (it sizes the output from it), so it must be a "
                     "constant",
                     what, n.input(input)->name(), n.opType());
}

} // namespace

bool heldEmpty(const Value* v) {
  auto count = v ? v->shape().elementCount() : std::nullopt;
  return count && *count == 0;
}

std::string buildTimeInputReason(const Node& n, size_t input, const char* what) {
  const Value* v = n.inputs().size() > input ? n.input(input) : nullptr;
  if (!v || !v->isGraphInput() || heldEmpty(v)) return {};
  return buildTimeInputMessage(n, input, what);
}

Status buildTimeInputRefusal(const Node& n, size_t input, const char* what) {
  return Status(ErrorCode::MsLowerBadAttribute, buildTimeInputMessage(n, input, what),
                fmt::format("make '{}' a constant (an initializer) in the exporter, or keep this "
                            "model on another target",
                            n.input(input)->name()));
}

// The runtime's three-input Where reads each operand either as one element or as the output's
// count; its own broadcasting of anything else works only for float32 outputs (and only when the
// condition's rank differs from y's), failing at run time otherwise (NNACL error 140). So an
// operand of another count is broadcast to the output's shape first, whichever rule emitted the
// Where (Where, Trilu, Einsum's diagonals, ...). Output shapes unknown at conversion stay as they
// are.
void LoweringContext::broadcastWhereOperands(std::vector<uint32_t>& inputs,
                                             const std::vector<uint32_t>& outputs) {
  if (inputs.size() != 3 || outputs.size() != 1) return;
  const std::vector<int32_t> outDims = out_.tensors[outputs[0]].dims;
  for (int32_t d : outDims)
    if (d < 0) return;
  const int64_t outCount = elementCount(outDims);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& dims = out_.tensors[inputs[i]].dims;
    const int64_t count = elementCount(dims);
    if (count == 1 || (count == outCount && dims.size() == outDims.size())) continue;
    const std::string base = out_.tensors[outputs[0]].name;
    uint32_t full = intermediate(inputs[i], fmt::format("{}_operand{}_full", base, i));
    out_.tensors[full].dims = outDims;
    const std::vector<int64_t> target(outDims.begin(), outDims.end());
    uint32_t shape = intConst(target, fmt::format("{}_operand{}_shape", base, i));
    emit(fb::PrimitiveType_BroadcastTo,
         [=](FBB& b) { return fb::CreateBroadcastTo(b, b.CreateVector(target)).Union(); },
         {inputs[i], shape}, {full});
    inputs[i] = full;
  }
}

} // namespace kiln::ms
