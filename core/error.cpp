// InputError formats "FILE: /json/pointer: message".
#include "core/error.hpp"

#include <algorithm>
#include <cctype>

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

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours cost 1 each.
  std::vector<std::size_t> before(b.size() + 1), last(b.size() + 1), row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    before.swap(last);
    last.swap(row);
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
  }
  return row[b.size()];
}

namespace {

// `text` lower-cased without '-', '_' and ' ': "MG_WFBP" and "mg-wfbp" are both "mgwfbp".
std::string folded(std::string_view text) {
  std::string out;
  for (const char c : text)
    if (c != '-' && c != '_' && c != ' ')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

} // namespace

std::string near_names(std::string_view text, const std::vector<std::string>& known) {
  if (text.size() > kQuotedUserText) // no name is this long; and the distance costs its length squared
    return "";
  const std::string f = folded(text);
  std::vector<std::pair<std::size_t, std::string>> near; // (0 same, 1 a prefix, else 2 + distance; name)
  for (const auto& name : known) {
    const std::string g = folded(name);
    const std::size_t d = edit_distance(f, g);
    if (d == 0 || (!f.empty() && g.starts_with(f)) || d <= std::max<std::size_t>(2, f.size() / 3))
      near.emplace_back(d == 0 ? 0 : g.starts_with(f) ? 1 : 2 + d, name);
  }
  std::stable_sort(near.begin(), near.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  if (near.empty())
    return "";
  // The same name but for case and separators: nothing else is meant; names it begins: only those.
  const std::size_t best = near[0].first;
  if (best <= 1)
    near.erase(std::find_if(near.begin(), near.end(), [&](const auto& n) { return n.first > best; }), near.end());
  std::string out = "did you mean '" + near[0].second + "'";
  for (std::size_t i = 1; i < std::min<std::size_t>(near.size(), 3); ++i)
    out += (i + 1 == std::min<std::size_t>(near.size(), 3) ? " or '" : ", '") + near[i].second + "'";
  return out + "?";
}

std::string did_you_mean(std::string_view text, const std::vector<std::string>& known) {
  const std::string near = near_names(text, known);
  return near.empty() ? near : " (" + near + ")";
}

InputError::InputError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(format_input_error(file, pointer, message)), file_(std::move(file)),
      pointer_(std::move(pointer)), detail_(message) {}

} // namespace ddlsim
