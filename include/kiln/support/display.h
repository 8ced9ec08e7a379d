// Model-derived text made safe to print: control characters escaped, invalid UTF-8 shown as bytes,
// long names capped, so a name from a file can neither forge log lines nor drive the terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

// Names longer than this are cut in messages (real node names stay far below it).
inline constexpr size_t kDisplayNameMaxBytes = 256;
// A whole message line is cut here: the backstop for names no call site capped.
inline constexpr size_t kDisplayLineMaxBytes = 4096;

// A name from a model as messages show it: newline, CR, tab and ESC as \n \r \t \x1b (every other
// C0/C1 control and DEL as \xNN or \uNNNN), bidirectional-override characters as \uNNNN, each byte
// of invalid UTF-8 as \xNN; at most `maxBytes` of the name, then "... (N bytes)" with its length.
std::string displayName(std::string_view text, size_t maxBytes = kDisplayNameMaxBytes);

// A whole message line escaped as displayName does, cut after `maxBytes` of the original.
std::string displayLine(std::string_view text, size_t maxBytes = kDisplayLineMaxBytes);

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// what protobuf `string` fields must hold.
bool isValidUtf8(std::string_view text);

} // namespace kiln
