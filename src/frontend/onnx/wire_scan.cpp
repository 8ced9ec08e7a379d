// Minimal protobuf wire walker for the three message levels that hold weights.
#include "wire_scan.h"

namespace kiln::onnx_import {
namespace {

enum WireType : uint32_t {
  Varint = 0,
  Fixed64 = 1,
  LengthDelimited = 2,
  StartGroup = 3,
  EndGroup = 4,
  Fixed32 = 5
};

constexpr uint32_t kModelGraphField = 7;
constexpr uint32_t kGraphInitializerField = 5;
constexpr uint32_t kTensorRawDataField = 9;

struct Field {
  uint32_t number;
  uint32_t wireType;
  size_t start;        // first byte of the tag
  size_t payloadStart; // first byte of the payload (after the length for LEN fields)
  size_t end;          // one past the field
};

class Reader {
 public:
  // [begin, end) is one message inside a buffer of `fileSize` bytes.
  Reader(const uint8_t* data, size_t begin, size_t end, size_t fileSize)
      : data_(data), pos_(begin), end_(end), fileSize_(fileSize) {}
  bool atEnd() const { return pos_ >= end_; }

  Expected<Field> next() {
    Field field{};
    field.start = pos_;
    KILN_ASSIGN_OR_RETURN(uint64_t tag, varint());
    field.number = static_cast<uint32_t>(tag >> 3);
    field.wireType = static_cast<uint32_t>(tag & 7);
    if (field.number == 0 || tag >> 32)
      return makeError(ErrorCode::NotProtobuf, "pass an ONNX model (.onnx) file",
                       "invalid field tag at byte {}", field.start);
    switch (field.wireType) {
    case Varint: {
      KILN_ASSIGN_OR_RETURN(uint64_t ignored, varint());
      (void)ignored;
      field.payloadStart = field.start;
      break;
    }
    case Fixed64:
      KILN_TRY(skip(8));
      break;
    case Fixed32:
      KILN_TRY(skip(4));
      break;
    case LengthDelimited: {
      KILN_ASSIGN_OR_RETURN(uint64_t length, varint());
      field.payloadStart = pos_;
      if (length > end_ - pos_) return truncated(field.start);
      pos_ += static_cast<size_t>(length);
      break;
    }
    default:
      return makeError(ErrorCode::NotProtobuf, "pass an ONNX model (.onnx) file",
                       "unsupported wire type {} at byte {}", field.wireType, field.start);
    }
    field.end = pos_;
    return field;
  }

 private:
  Expected<uint64_t> varint() {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return truncated(pos_);
      uint8_t byte = data_[pos_++];
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return result;
    }
    return makeError(ErrorCode::NotProtobuf, "pass an ONNX model (.onnx) file",
                     "malformed varint at byte {}", pos_);
  }
  Status skip(size_t n) {
    if (n > end_ - pos_) return truncated(pos_);
    pos_ += n;
    return Status::ok();
  }
  Status truncated(size_t at) {
    const char* hint = "the file is cut short; copy or export it again";
    if (end_ == fileSize_)
      return makeError(ErrorCode::Truncated, hint,
                       "data ends inside a field that starts at byte {} (file is {} bytes)", at,
                       fileSize_);
    return makeError(ErrorCode::Truncated, hint,
                     "a field that starts at byte {} runs past the end of its enclosing message "
                     "(byte {}; file is {} bytes)",
                     at, end_, fileSize_);
  }

  const uint8_t* data_;
  size_t pos_;
  size_t end_;
  size_t fileSize_;
};

void append(std::string& out, const uint8_t* data, const Field& field) {
  out.append(reinterpret_cast<const char*>(data + field.start), field.end - field.start);
}

Expected<ScannedInitializer> scanTensor(const uint8_t* data, size_t begin, size_t end,
                                        size_t fileSize) {
  ScannedInitializer out;
  Reader reader(data, begin, end, fileSize);
  while (!reader.atEnd()) {
    KILN_ASSIGN_OR_RETURN(Field field, reader.next());
    if (field.number == kTensorRawDataField && field.wireType == LengthDelimited)
      out.rawData = ByteSpan{field.payloadStart,
                             field.end - field.payloadStart}; // last one wins, as in protobuf
    else
      append(out.tensorBytes, data, field);
  }
  return out;
}

Status scanGraph(const uint8_t* data, size_t begin, size_t end, size_t fileSize,
                 ScannedModel& out) {
  Reader reader(data, begin, end, fileSize);
  while (!reader.atEnd()) {
    KILN_ASSIGN_OR_RETURN(Field field, reader.next());
    if (field.number == kGraphInitializerField && field.wireType == LengthDelimited) {
      KILN_ASSIGN_OR_RETURN(ScannedInitializer tensor,
                            scanTensor(data, field.payloadStart, field.end, fileSize));
      out.initializers.push_back(std::move(tensor));
    } else {
      append(out.graphBytes, data, field);
    }
  }
  return Status::ok();
}

} // namespace

Expected<ScannedModel> scanModel(const uint8_t* data, size_t size) {
  ScannedModel out;
  Reader reader(data, 0, size, size);
  while (!reader.atEnd()) {
    KILN_ASSIGN_OR_RETURN(Field field, reader.next());
    if (field.number == kModelGraphField && field.wireType == LengthDelimited) {
      out.hasGraph = true;
      KILN_TRY(scanGraph(data, field.payloadStart, field.end, size, out));
    } else {
      append(out.modelBytes, data, field);
    }
  }
  return out;
}

} // namespace kiln::onnx_import
