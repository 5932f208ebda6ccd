// Text for messages and terminals (see text.h).
#include "runtime/common/text.h"

namespace onnxamp {

std::string EscapeControlBytes(std::string_view text, bool keep_line_breaks) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && !(keep_line_breaks && c == '\n')) || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace onnxamp
