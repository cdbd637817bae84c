// InputError formats "FILE: /json/pointer: message".
#include "core/error.hpp"

namespace ddlsim {
namespace {

// Control characters in user strings (a newline in a value or a key, a NUL) are written as C escapes, so that a
// message stays one line and shows what was there.
void append_escaped(std::string& out, const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (u < 0x20 || u == 0x7f)
      out += {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
    else
      out += c;
  }
}

// `text` whole up to `limit` characters, else its start and end around how long it was (a path's end names the file,
// a message's end often says what is wrong).
std::string clipped(std::string_view text, std::size_t limit) {
  if (text.size() <= limit)
    return std::string(text);
  const std::size_t tail = limit / 4, head = limit - tail;
  return std::string(text.substr(0, head)) + "... (" + std::to_string(text.size()) + " characters) ..." +
         std::string(text.substr(text.size() - tail));
}

std::string format_input_error(const std::string& file, const std::string& pointer, const std::string& message) {
  std::string out;
  if (!file.empty()) {
    append_escaped(out, clipped(file, kQuotedPath));
    out += ": ";
  }
  if (!pointer.empty()) {
    append_escaped(out, clip_user_text(pointer));
    out += ": ";
  }
  append_escaped(out, clipped(message, InputError::kMaxDetail));
  return out;
}

} // namespace

std::string clip_user_text(std::string_view text) {
  return clipped(text, kQuotedUserText);
}

InputError::InputError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(format_input_error(file, pointer, message)), file_(std::move(file)),
      pointer_(std::move(pointer)), detail_(message) {}

} // namespace ddlsim
