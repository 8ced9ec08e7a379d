// --precision-report: the precision passes' decisions as JSON.
#include "kiln/passes/precision_report.h"

#include <nlohmann/json.hpp>

#include "kiln/support/atomic_file.h"
#include "kiln/support/json_text.h"

namespace kiln {

std::string precisionReportToJson(const PrecisionReport& report) {
  // ordered_json keeps the keys in the order written here, so the file reads top-down.
  using Json = nlohmann::ordered_json;
  Json out;
  out["precision_mode"] = report.mode;
  out["nodes_lowered_to_fp16"] = report.nodesLowered;
  Json kept = Json::array();
  for (const auto& k : report.keptFp32) {
    Json j = {{"node", k.node}, {"op_type", k.opType}, {"reason", k.reason}, {"detail", k.detail}};
    if (!k.weight.empty()) {
      j["weight"] = k.weight;
      j["max_abs_weight"] = k.maxAbsWeight;
    }
    kept.push_back(std::move(j));
  }
  out["kept_fp32"] = std::move(kept);
  Json casts = Json::array();
  for (const auto& c : report.casts)
    casts.push_back({{"value", c.value}, {"from", c.from}, {"to", c.to}, {"for_node", c.node}});
  out["casts_inserted"] = std::move(casts);
  out["weights_converted_to_fp16"] = report.weightsConverted;
  out["weight_values_flushed_to_zero"] = report.valuesFlushedToZero;
  out["weight_values_subnormal"] = report.valuesSubnormal;
  out["keep_dtype_unknown"] = report.keepDtypeUnknown;
  out["activations_measured"] = report.activationsMeasured;
  Json overflows = Json::array();
  for (const auto& o : report.activationOverflows)
    overflows.push_back({{"node", o.node},
                         {"op_type", o.opType},
                         {"value", o.value},
                         {"max_abs", o.maxAbs},
                         {"kept_fp32", o.keptFp32}});
  out["activation_overflows"] = std::move(overflows);
  Json quantized = Json::array();
  for (const auto& q : report.quantized)
    quantized.push_back({{"weight", q.weight},
                         {"node", q.node},
                         {"op_type", q.opType},
                         {"bits", q.bits},
                         {"axis", q.axis},
                         {"symmetric", q.symmetric},
                         {"bytes_before", q.bytesBefore},
                         {"bytes_after", q.bytesAfter}});
  out["weights_quantized"] = std::move(quantized);
  Json skipped = Json::array();
  for (const auto& s : report.skipped)
    skipped.push_back(
        {{"weight", s.weight}, {"node", s.node}, {"op_type", s.opType}, {"reason", s.reason}});
  out["weights_skipped"] = std::move(skipped);
  return jsonText(out, 2) + "\n";
}

Status writePrecisionReport(const PrecisionReport& report, const std::string& path) {
  return writeFileAtomically(path, precisionReportToJson(report));
}

} // namespace kiln
