// Reading MindSpore Lite .ms files: verification and a JSON dump for `kiln inspect`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

// Maps and verifies a .ms file and returns a JSON document: version, graph inputs/outputs, every
// tensor, every node (op type, tensor indices, key attributes) and the subgraphs. A file that fails
// FlatBuffers verification gives ErrorCode::MsFileInvalid.
Expected<std::string> dumpMsFile(const std::string& path);

// A few lines for people: version, inputs/outputs with shapes, counts and the op histogram.
Expected<std::string> summarizeMsFile(const std::string& path);

// `kiln lower --target ms`: a built .ms buffer as stable text — a line per tensor (index, name,
// dtype, dims, format, constant bytes, quantization) and per node (op, tensor indices, every field
// its op table sets, printed through the schema's reflection data).
Expected<std::string> msBufferToText(const uint8_t* data, size_t size);

} // namespace kiln
