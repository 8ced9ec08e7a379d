// ONNX element types kiln knows of but does not take: telling them from damaged files.
#pragma once

#include <optional>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

// When `importError` is the importer's K2004 refusal of an element type a newer ONNX release added
// (FLOAT4E2M1, FLOAT8E8M0, UINT2, INT2), that type's name: the model is valid but uses a type this
// build does not support. nullopt for any other status (an unknown number is a damaged file).
std::optional<std::string> unsupportedOnnxElementType(const Status& importError);

} // namespace kiln
