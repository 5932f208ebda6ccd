// Text for messages and terminals.
#pragma once

#include <string>
#include <string_view>

namespace onnxamp {

// `text` for a message or a terminal: its control bytes (a terminal escape sequence or a NUL in a hostile file's names)
// written as \xNN, line breaks kept when `keep_line_breaks`.
std::string EscapeControlBytes(std::string_view text, bool keep_line_breaks = false);

}  // namespace onnxamp
