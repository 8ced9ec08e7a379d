// JSON text of a document holding model-derived strings: always valid UTF-8, never a throw.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kiln {

// `value` as JSON text (`indent` < 0: one line). Names in models may hold any bytes; each
// ill-formed UTF-8 sequence becomes U+FFFD (as validUtf8 does), so the output is JSON every reader
// accepts.
std::string jsonText(const nlohmann::json& value, int indent = 2);
// The same for documents that keep their keys in the order written (precision reports, dumps).
std::string jsonText(const nlohmann::ordered_json& value, int indent = 2);

} // namespace kiln
