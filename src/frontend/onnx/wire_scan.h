// Splits a serialized ModelProto so initializer raw_data stays in the mapped file.
//
// Hand-written because protobuf's parser copies every bytes field into a std::string: parsing a
// model would duplicate all its weights. We walk the wire format of ModelProto → GraphProto →
// TensorProto, record where each initializer's raw_data lies, and hand protobuf only the remaining
// (small) bytes. Concatenated fields parse as one message (protobuf merge semantics), so field
// order is preserved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::onnx_import {

struct ByteSpan {
  size_t offset;
  size_t length;
};

struct ScannedInitializer {
  std::string tensorBytes;         // TensorProto fields except raw_data
  std::optional<ByteSpan> rawData; // raw_data in the source buffer
};

struct ScannedModel {
  std::string modelBytes; // ModelProto fields except graph
  std::string graphBytes; // GraphProto fields except initializer
  bool hasGraph = false;
  std::vector<ScannedInitializer> initializers;
};

// Errors: K2001 (not protobuf wire format), K2002 (a length runs past the end).
Expected<ScannedModel> scanModel(const uint8_t* data, size_t size);

} // namespace kiln::onnx_import
