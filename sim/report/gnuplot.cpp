// gnuplot itself: quoting text for scripts and data files, the script of a figure (which finds its .dat beside it,
// from ARG0), and rendering: run gnuplot on temporary copies of <base>.dat and <base>.gp that write the images under
// temporary names, check that each image is complete, and replace the data, the script and the images together, so
// that an interrupted sweep or a full disk never leaves a truncated image, nor a script beside another's image.
#include "sim/report/plot.hpp"
#include "sim/report/plot_detail.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace ddlsim::sim::detail {

// ---------------------------------------------------------------------------------------------------------------
// gnuplot text

// A gnuplot single-quoted string: no escapes inside, a quote is written twice.
std::string gp_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : one_line(s))
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A title as a gnuplot string expression: lines break at each '\n' and wrap to at most `width` characters, after a
// comma where possible (so that "1 Gb/s" stays together), since gnuplot centres a title over the plot area and a
// long one would run off the image's left edge.
std::string gp_title(std::string_view s, std::size_t width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs{std::string(s)};
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    lines.emplace_back();
    // Phrases end at ", "; a phrase longer than a line is wrapped at its spaces.
    std::vector<std::string> phrases{""};
    for (const char c : one_line(paragraph)) {
      phrases.back() += c;
      if (c == ',')
        phrases.emplace_back();
    }
    for (auto phrase : phrases) {
      if (!lines.back().empty() && lines.back().size() + phrase.size() > width) {
        lines.emplace_back();
        phrase = std::string(trim(phrase));
      }
      if (lines.back().size() + phrase.size() <= width) {
        lines.back() += phrase;
        continue;
      }
      std::istringstream words{phrase};
      for (std::string word; words >> word;) {
        if (!lines.back().empty() && lines.back().size() + 1 + word.size() > width)
          lines.emplace_back();
        lines.back() += (lines.back().empty() ? "" : " ") + word;
      }
    }
  }
  std::string out;
  for (const auto& line : lines)
    out += (out.empty() ? "" : ".\"\\n\".") + gp_quote(line);
  return out;
}

// A double-quoted string column of a gnuplot data file, which has no escape for '"'.
std::string dat_quote(std::string_view s) {
  std::string out = one_line(s);
  std::replace(out.begin(), out.end(), '"', '\'');
  return "\"" + out + "\"";
}

std::string num(double v) {
  return fmt::format("{:.10g}", v);
}

namespace {

std::string_view extension(Format f) {
  return f == Format::png ? ".png" : ".svg";
}

// The script for `fig`, reading `data` and writing `outputs` (file names relative to the script's directory). Paths
// are resolved from ARG0, so `gnuplot some/dir/x.gp` works from any working directory and the text names no absolute
// path.
std::string script_text(const Figure& fig, const std::string& data,
                        const std::vector<std::pair<Format, std::string>>& outputs, Size size,
                        std::string_view source) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "# {}\n", one_line(fig.title));
  fmt::format_to(out, "# Drawn by ddlsim from {}. Edit and rerun `gnuplot {}.gp` to redraw", one_line(source),
                 one_line(fig.base));
  for (std::size_t i = 0; i < outputs.size(); ++i)
    fmt::format_to(out, "{} {}{}",
                   i == 0                    ? ""
                   : i + 1 == outputs.size() ? " and"
                                             : ",",
                   one_line(fig.base), extension(outputs[i].first));
  s += " from the data beside it.\n\n";
  s += "# The directory of this script (from ARG0), so that it finds its data wherever gnuplot is started.\n"
       "here = exists(\"ARG0\") ? ARG0 : \"\"\n"
       "while (strlen(here) > 0 && here[strlen(here):strlen(here)] ne \"/\") { here = here[1:strlen(here) - 1] }\n";
  fmt::format_to(out, "data = here.{}\n\n", gp_quote(data));
  s += fig.setup;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [format, file] = outputs[i];
    s += "\n";
    if (format == Format::png)
      fmt::format_to(out, "set terminal pngcairo size {},{} font 'sans,12'\n", size.width_px, size.height_px);
    else
      fmt::format_to(out, "set terminal svg size {},{} dynamic font 'sans,12'\n", size.width_px, size.height_px);
    s += "set termoption noenhanced  # names print literally (no subscripts from '_')\n";
    fmt::format_to(out, "set output here.{}\n", gp_quote(file));
    s += i == 0 ? fig.plot : std::string("replot\n");
  }
  s += "unset output\n";
  return s;
}

// Removes the files it holds when it goes out of scope (temporaries of one gnuplot run).
class TempFiles {
public:
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles() {
    for (const auto& p : paths_) {
      std::error_code ignored;
      fs::remove(p, ignored);
    }
  }
  fs::path add(fs::path p) { return paths_.emplace_back(std::move(p)); }

private:
  std::vector<fs::path> paths_;
};

// The last few non-empty lines of gnuplot's output, for an error message.
std::string log_tail(const fs::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!trim(line).empty())
      lines.push_back(std::string(trim(line)));
  const std::size_t from = lines.size() > 4 ? lines.size() - 4 : 0;
  std::string out;
  for (std::size_t i = from; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out.empty() ? "no output" : out;
}

// Runs `gnuplot script` (found on PATH, stdin from /dev/null, stdout and stderr into `log`) and waits for it.
// Errors name `shown` (the user-facing .gp), since `script` is a temporary copy.
void run_gnuplot(const fs::path& script, const fs::path& log, const std::string& shown) {
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0)
    throw std::runtime_error(fmt::format("{}: cannot prepare to run gnuplot", shown));
  struct Destroy {
    posix_spawn_file_actions_t* a;
    ~Destroy() { posix_spawn_file_actions_destroy(a); }
  } destroy{&actions};
  const std::string log_path = log.string();
  if (posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0) != 0 ||
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) !=
          0 ||
      posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO) != 0)
    throw std::runtime_error(fmt::format("{}: cannot prepare to run gnuplot", shown));

  std::string program = "gnuplot";
  std::string argument = script.string();
  std::array<char*, 3> argv{program.data(), argument.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  if (spawned == ENOENT)
    throw GnuplotMissing(fmt::format("{}: gnuplot is not on PATH: the images are not drawn (install gnuplot 5.4 or "
                                     "newer, then run `gnuplot` on the .gp files)",
                                     shown));
  if (spawned != 0)
    throw std::runtime_error(fmt::format("{}: cannot run gnuplot: {} (plots need gnuplot 5.4 or newer on PATH)", shown,
                                         std::error_code(spawned, std::generic_category()).message()));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw std::runtime_error(fmt::format("{}: lost track of gnuplot (pid {})", shown, static_cast<long>(pid)));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  const std::string how = WIFEXITED(status)     ? fmt::format("exit status {}", WEXITSTATUS(status))
                          : WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                                                : std::string("stopped");
  throw std::runtime_error(fmt::format("{}: gnuplot failed ({}): {}", shown, how, log_tail(log)));
}

// Whether gnuplot finished the image: a PNG ends with its IEND chunk, an SVG with </svg>. gnuplot exits 0 when a
// write fails (a full disk, a file size limit), leaving the image cut short (#31 R15).
bool complete_image(const fs::path& image, Format format) {
  const std::string text = read_file(image.string());
  if (format == Format::png) {
    static constexpr std::string_view kIend{"\0\0\0\0IEND\xae\x42\x60\x82", 12};
    return text.ends_with(kIend);
  }
  const auto end = text.find_last_not_of(" \t\r\n");
  return end != std::string::npos && std::string_view(text).substr(0, end + 1).ends_with("</svg>");
}

} // namespace

// Writes <dir>/<base>.dat, .gp and the images, all together or none of them (above). Returns the image paths.
std::vector<std::string> render(const fs::path& dir, const Figure& fig, const std::vector<Format>& formats, Size size,
                                std::string_view source) {
  if (!dir.empty())
    fs::create_directories(dir);
  const fs::path gp = dir / (fig.base + ".gp");
  const std::string pid = std::to_string(static_cast<long>(::getpid()));

  std::vector<std::pair<Format, std::string>> finals, temps;
  for (const Format f : formats) {
    finals.emplace_back(f, fig.base + std::string(extension(f)));
    temps.emplace_back(f, fmt::format("{}{}.tmp.{}", fig.base, extension(f), pid));
  }
  OutputBatch batch; // the data, the script and the images replace the old ones together, or none of them
  batch.add((dir / (fig.base + ".dat")).string(), fig.dat);
  batch.add(gp.string(), script_text(fig, fig.base + ".dat", finals, size, source));

  TempFiles temp; // gnuplot runs on copies of the data and the script, writing the images under temporary names
  const std::string run_data = fmt::format("{}.dat.gp.run.{}", fig.base, pid);
  write_file_atomic(temp.add(dir / run_data).string(), fig.dat);
  const fs::path run_script = temp.add(dir / fmt::format("{}.gp.run.{}", fig.base, pid));
  const fs::path log = temp.add(dir / fmt::format("{}.gp.log.{}", fig.base, pid));
  for (const auto& [format, name] : temps)
    temp.add(dir / name);
  write_file_atomic(run_script.string(), script_text(fig, run_data, temps, size, source));
  try {
    run_gnuplot(run_script, log, gp.string());
  } catch (const GnuplotMissing&) {
    batch.commit(); // the data and the script, for drawing once gnuplot is installed
    throw;
  }

  std::vector<std::string> images;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const fs::path from = dir / temps[i].second, to = dir / finals[i].second;
    std::error_code ec;
    if (fs::file_size(from, ec) == 0 || ec)
      throw std::runtime_error(fmt::format("{}: gnuplot wrote no {} ({})", gp.string(), to.string(), log_tail(log)));
    if (!complete_image(from, formats[i]))
      throw InputError(to.string(), "",
                       "gnuplot could not finish the image (a full disk or a file size limit?): the previous "
                       "files are kept");
    batch.adopt(from.string(), to.string());
    images.push_back(to.string());
  }
  batch.commit();
  return images;
}

} // namespace ddlsim::sim::detail
