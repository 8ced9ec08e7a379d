// Registers the "om" target: .om files read into IR, the conformance round trip (lower, write,
// read back) and the per-node support check `kiln check --target om:<soc>` uses.
#include <fmt/format.h>

#include "kiln/backends/om.h"
#include "kiln/backends/target.h"
#include "kiln/passes/expand_rnn.h"
#include "kiln/passes/pass.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/support/atomic_file.h"
#include "om_context.h"
#include "om_internal.h"

namespace kiln {
namespace {

constexpr const char* kDefaultSoc = "Ascend310P3";

Expected<Model> omRoundTrip(Model model, const RoundTripOptions& options) {
  OmWriteOptions write;
  write.socVersion = options.variant.empty() ? kDefaultSoc : options.variant;
  write.modelName = "roundtrip";
  if (options.precision == "fp16") {
    // ATC's default precision mode: float compute in fp16 where the op has an fp16 kernel.
    PrecisionOptions precision;
    precision.mode = PrecisionMode::ForceFp16;
    ConversionOptions conversion; // the conversion pipeline's precision stage (already simplified)
    conversion.simplify = "none";
    conversion.precision = &precision;
    auto ran = runConversionPipeline(model, conversion);
    if (!ran) return ran.status();
  } else if (options.precision != "fp32") {
    return Status(ErrorCode::BadFlag,
                  fmt::format("precision '{}' is not one the om target knows", options.precision),
                  "use fp32 or fp16");
  }
  auto bytes = buildOmBuffer(model, write);
  if (!bytes) return bytes.status();
  if (!options.artifactPath.empty())
    KILN_TRY(writeFileAtomically(
        options.artifactPath,
        std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size())));
  return readOmBuffer(bytes->data(), bytes->size(), "roundtrip.om");
}

// Lowers without writing and returns every refusal (`kiln check --target om`).
std::vector<lowering::Refusal> omRefusals(const Model& model, const std::string& variant) {
  OmWriteOptions write;
  write.socVersion = variant.empty() ? kDefaultSoc : variant;
  std::vector<lowering::Refusal> refusals;
  auto lowered = om::lowerModel(model, write, &refusals);
  return refusalsOf(lowered ? Status::ok() : lowered.status(), std::move(refusals));
}

TargetHooks makeOmHooks() {
  TargetHooks hooks;
  hooks.name = "om";
  hooks.extensions = {".om"};
  hooks.read = [](const std::string& path) { return readOmFile(path); };
  hooks.roundTrip = omRoundTrip;
  hooks.prepare = [](Model& model, const std::string& variant) -> Expected<bool> {
    // GraphEngine's recurrent ops are not described in formats/om.md: RNN/GRU/LSTM become
    // standard ops.
    const int64_t opset = model.opsetVersion("");
    const std::string soc = variant.empty() ? kDefaultSoc : variant;
    KILN_ASSIGN_OR_RETURN(size_t unrolled, unrollRnnNodes(*model.graph, [&](const Node& node) {
                            return !omUnsupportedReason(node, soc, opset).empty();
                          }));
    return unrolled > 0;
  };
  hooks.unsupportedReason = [](const Node& node, const std::string& variant, int64_t opset) {
    return omUnsupportedReason(node, variant.empty() ? kDefaultSoc : variant, opset);
  };
  hooks.lowerRefusals = omRefusals;
  hooks.refusesShapeConflicts = true; // atc stops on them (E19999), as ATC's InferShape does
  hooks.loweringRules = [] { return ruleInfosOf(om::omLoweringRules()); };
  hooks.raisingRules = [] { return ruleInfosOf(om::omRaisingRules()); };
  hooks.unsupportedCodes = {ErrorCode::OmLowerUnsupported, ErrorCode::OmLowerBadAttribute};
  return hooks;
}

} // namespace
} // namespace kiln

KILN_REGISTER_TARGET(om, kiln::makeOmHooks);
