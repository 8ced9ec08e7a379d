// Reading MindSpore Lite .ms files into kiln IR: every .ms op becomes ONNX-semantics nodes the
// executor runs (NHWC ops get explicit Transposes, KHWC weights become OIHW constants, quantized
// and float16 weights are decoded), so a .ms file can be run, inspected and compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// Verifies and reads a .ms buffer into IR the executor runs (ONNX-semantics ops). Weights alias
// `data`; `owner` keeps it alive. `baseDir` finds a `.msw` side file ("" = none allowed).
Expected<Model> readMsBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                             const std::string& displayName, const std::string& baseDir);
Expected<Model>
readMsFile(const std::string& path); // mmaps the file (include/kiln/support/mapped_file.h)

} // namespace kiln
