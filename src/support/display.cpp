// Escaping and capping of model-derived text for messages, and the UTF-8 check for protobuf.
#include "kiln/support/display.h"

#include <fmt/format.h>

namespace kiln {
namespace {

// Length of the well-formed UTF-8 sequence starting at text[pos] (its code point in `codePoint`),
// or 0 when the bytes there are not one.
size_t decodeUtf8(std::string_view text, size_t pos, char32_t& codePoint) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    codePoint = lead;
    return 1;
  }
  size_t length = 0;
  char32_t minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    codePoint = lead & 0x1F;
    minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    codePoint = lead & 0x0F;
    minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    codePoint = lead & 0x07;
    minimum = 0x10000;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
    codePoint = (codePoint << 6) | (byte(pos + i) & 0x3F);
  }
  if (codePoint < minimum || codePoint > 0x10FFFF) return 0;
  if (codePoint >= 0xD800 && codePoint <= 0xDFFF) return 0; // surrogates are not characters
  return length;
}

// Code points a terminal acts on rather than shows: C0/C1 controls, DEL, and the bidirectional
// overrides and isolates that reorder the rest of the line.
bool isControl(char32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

void appendEscaped(std::string& out, char32_t c) {
  switch (c) {
  case '\n':
    out += "\\n";
    return;
  case '\r':
    out += "\\r";
    return;
  case '\t':
    out += "\\t";
    return;
  case 0x1B:
    out += "\\x1b";
    return;
  default:
    break;
  }
  if (c < 0x80)
    out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
  else
    out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
}

// Escapes `text`, copying at most `maxBytes` of it (cut at a character boundary).
std::string escape(std::string_view text, size_t maxBytes) {
  std::string out;
  out.reserve(std::min(text.size(), maxBytes) + 16);
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t codePoint = 0;
    const size_t length = decodeUtf8(text, pos, codePoint);
    if (pos + std::max<size_t>(length, 1) > maxBytes) break;
    if (length == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[pos]));
      pos += 1;
      continue;
    }
    if (isControl(codePoint))
      appendEscaped(out, codePoint);
    else
      out.append(text.substr(pos, length));
    pos += length;
  }
  if (pos < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

} // namespace

std::string displayName(std::string_view text, size_t maxBytes) { return escape(text, maxBytes); }

std::string displayLine(std::string_view text, size_t maxBytes) { return escape(text, maxBytes); }

bool isValidUtf8(std::string_view text) {
  char32_t codePoint = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = decodeUtf8(text, pos, codePoint);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

} // namespace kiln
