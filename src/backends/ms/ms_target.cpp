// Registers the "ms" target: `.ms` files load through readMsFile, so `kiln run/inspect/compare`
// take them, and `--via ms` round-trips models through the .ms writer and reader.
#include <memory>
#include <vector>

#include "kiln/backends/ms_reader.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/backends/target.h"
#include "kiln/passes/expand_conv_pool.h"
#include "kiln/passes/expand_grid_sample.h"
#include "kiln/passes/expand_rnn.h"
#include "kiln/support/atomic_file.h"
#include "ms_context.h"
#include "ms_lower.h"
#include "ms_raise_context.h"

namespace kiln {
namespace {

// Lowers and serializes `model` in memory, then reads the bytes back as the runtime would.
Expected<Model> msRoundTrip(Model model, const RoundTripOptions& options) {
  MsWriteOptions write;
  if (options.precision == "fp16")
    write.fp16Weights = true;
  else if (options.precision != "fp32")
    return Status(ErrorCode::BadFlag,
                  "--precision " + options.precision + ": the ms target takes fp32 or fp16",
                  "write --precision fp32 or --precision fp16");
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, buildMsBuffer(model, write));
  if (!options.artifactPath.empty())
    KILN_TRY(writeFileAtomically(
        options.artifactPath,
        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  std::string name =
      (model.sourcePath.empty() ? std::string("model") : model.sourcePath) + " (as .ms)";
  return readMsBuffer(owned->data(), owned->size(), owned, name, "");
}

// Lowers without writing and returns every refusal (`kiln check --target ms`).
std::vector<lowering::Refusal> msRefusals(const Model& model, const std::string&) {
  std::vector<lowering::Refusal> refusals;
  auto lowered = ms::lowerToMs(model, MsWriteOptions{}, &refusals);
  return refusalsOf(lowered ? Status::ok() : lowered.status(), std::move(refusals));
}

TargetHooks makeMsTarget() {
  TargetHooks hooks;
  hooks.name = "ms";
  hooks.extensions = {".ms"};
  hooks.read = [](const std::string& path) { return readMsFile(path); };
  hooks.roundTrip = msRoundTrip;
  hooks.prepare = [](Model& model, const std::string&) -> Expected<bool> {
    // RNNs the .ms LSTM/GRU cannot take (ops/rnn.cpp says why) become standard ops.
    const int64_t opset = model.opsetVersion("");
    auto refused = [&](const Node& node) { return !msUnsupportedReason(node, opset).empty(); };
    KILN_ASSIGN_OR_RETURN(size_t unrolled, unrollRnnNodes(*model.graph, refused));
    // 3-D Conv/ConvTranspose/pooling and 1-D ConvTranspose (.ms ops are 2-D) become 2-D ops
    // over reshaped views.
    KILN_ASSIGN_OR_RETURN(size_t expanded, expandConvPoolNodes(*model.graph, opset, refused));
    // GridSample (no .ms op) becomes Gather + elementwise arithmetic.
    KILN_ASSIGN_OR_RETURN(size_t sampled, expandGridSampleNodes(*model.graph, opset, refused));
    return unrolled + expanded + sampled > 0;
  };
  // The runtime computes and casts no float64 (ms.md §4.6): a graph holding float64 carries it
  // as float32 throughout, as converter_lite does with float64 graph inputs (§5.1). Nor any
  // int16/uint16/uint32/uint64: a graph that only compares and moves them carries them as
  // int32/int64 (widen-integers says when).
  hooks.preparePasses = {"demote-float64", "widen-integers"};
  hooks.unsupportedReason = [](const Node& node, const std::string&, int64_t opset) {
    return msUnsupportedReason(node, opset);
  };
  hooks.lowerRefusals = msRefusals;
  hooks.loweringRules = [] { return ruleInfosOf(ms::msLoweringRules()); };
  hooks.raisingRules = [] { return ruleInfosOf(ms::msRaisingRules()); };
  hooks.unsupportedCodes = {ErrorCode::MsLowerUnsupported, ErrorCode::MsLowerBadAttribute};
  return hooks;
}

} // namespace
} // namespace kiln

KILN_REGISTER_TARGET(ms, kiln::makeMsTarget);
