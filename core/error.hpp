// The one error type for bad input: every message names the file and the JSON pointer it is about, so that
// `ddlsim` can print one line and exit 2 (docs/contracts.md, "Exit status").
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

/// How much of one piece of user text (a value, a key, a name, a path) an error message quotes.
inline constexpr std::size_t kQuotedUserText = 200;
/// A file's path as an error names it (the longest paths of real systems fit).
inline constexpr std::size_t kQuotedPath = 1000;
/// User text as an error quotes it: whole up to kQuotedUserText characters, else its start, its length and its end.
[[nodiscard]] std::string clip_user_text(std::string_view text);

/// Edit distance between two strings (optimal string alignment: a swap of neighbours counts as one edit).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The names among `known` that `text` probably misspells, for an error's "did you mean": once case, '-', '_' and ' '
/// are ignored, those equal to it, else those it begins, else those within an edit distance of max(2, a third of
/// its length), nearest first; at most three: "did you mean 'a' or 'b'?", or "" when none.
[[nodiscard]] std::string near_names(std::string_view text, const std::vector<std::string>& known);
/// near_names in parentheses after a space, or "".
[[nodiscard]] std::string did_you_mean(std::string_view text, const std::vector<std::string>& known);

class InputError : public std::runtime_error {
public:
  /// `file` may be empty (e.g. a command-line value), `pointer` may be empty (the whole document). The message
  /// clips the file beyond kQuotedPath characters, the pointer (user text) with clip_user_text, and a detail beyond
  /// kMaxDetail characters.
  InputError(std::string file, std::string pointer, const std::string& message);

  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& pointer() const noexcept { return pointer_; }
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

  /// The longest detail a message keeps whole (ddlsim's own wording is shorter; user text in it is clipped where it
  /// is quoted, this bounds what escaped the clipping).
  static constexpr std::size_t kMaxDetail = 1000;

private:
  std::string file_;
  std::string pointer_;
  std::string detail_;
};

} // namespace ddlsim
