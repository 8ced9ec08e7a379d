// JSON text with ill-formed UTF-8 replaced rather than thrown on (kiln/support/json_text.h).
#include "kiln/support/json_text.h"

#include <nlohmann/json.hpp>

namespace kiln {

std::string jsonText(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string jsonText(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace kiln
