// `ddlsim import-trace` and `ddlsim calibrate --kineto` (import_trace.hpp).
#include "sim/cli/import_trace.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "sim/spec/gpus.hpp"
#include "sim/spec/scenario.hpp"
#include "traces/import.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <utility>

namespace ddlsim::sim {
namespace {

namespace fs = std::filesystem;

static_assert(traces::kMaxWorldSize == kMaxGpus, "a trace's ranks are bounded by ddlsim's largest cluster");

traces::Imported import(const std::string& trace, double host_scale) {
  if (!(host_scale >= 1e-3 && host_scale <= 1e3))
    throw InputError("", "--host-scale", fmt::format("must be a factor from 0.001 to 1000, not {}", host_scale));
  const auto is_preset = [](const std::string& name) { return find_gpu_preset(name) != nullptr; };
  auto im = traces::import_trace(trace, {.host_scale = host_scale, .is_gpu_preset = is_preset});
  if (im.gpu_is_preset && im.gpu_candidate != im.analysis.device.name)
    im.summary.push_back(fmt::format("GPU '{}' taken as preset {}", im.analysis.device.name, im.gpu_candidate));
  return im;
}

// The staging directory of an import and, when the import made it, its output directory: removed unless kept.
class Staging {
public:
  Staging(fs::path dir, std::string made_out) : dir_(std::move(dir)), made_out_(std::move(made_out)) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    if (!kept_ && !made_out_.empty()) {
      fs::remove(fs::path(made_out_) / ".ddlsim.lock", ignored); // the OutputDir's, released right after
      fs::remove(made_out_, ignored);                            // only if still empty
    }
  }
  [[nodiscard]] const fs::path& dir() const { return dir_; }
  void keep() { kept_ = true; }

private:
  fs::path dir_;
  std::string made_out_; // the output directory if this import created it, else ""
  bool kept_ = false;
};

// Loads the staged scenario as `ddlsim check` does; a refusal names the trace and the file it would have written.
void check_staged(const std::string& trace, const fs::path& staged) {
  try {
    (void)load_scenario((staged / "scenario.json").string());
  } catch (const InputError& e) {
    const std::string file = fs::path(e.file()).filename().string();
    throw InputError(trace, "",
                     fmt::format("what it imports to is out of ddlsim's range: {}{}{}", file.empty() ? "" : file + ": ",
                                 e.pointer().empty() ? "" : e.pointer() + ": ", e.detail()));
  }
}

// Writes the import into DIR/.import-trace.tmp.<pid>, checks that ddlsim reads it back (a writer emits only what its
// readers take), then moves the files into DIR; on a refusal nothing is left behind. DIR is locked meanwhile, and a
// staging directory that a killed import left there is removed (OutputDir).
void write_checked(const traces::Imported& im, const std::string& trace, const std::string& dir) {
  const bool made = !path_exists(dir);
  const OutputDir out(dir);
  Staging staging{fs::path(dir) / fmt::format(".import-trace.tmp.{}", static_cast<long>(::getpid())), made ? dir : ""};
  traces::write_import(im, staging.dir().string());
  check_staged(trace, staging.dir());
  for (const char* f : traces::kImportFiles) {
    std::error_code ec;
    fs::rename(staging.dir() / f, fs::path(dir) / f, ec);
    if (ec)
      throw InputError((fs::path(dir) / f).string(), "",
                       fmt::format("cannot move the file into place: {}", ec.message()));
  }
  staging.keep();
}

} // namespace

int import_trace_command(const ImportTraceRequest& request) {
  const auto im = import(request.trace, request.host_scale);
  write_checked(im, request.trace, request.out);
  for (const auto& line : im.summary)
    fmt::print("{}\n", line);
  fmt::print("wrote {}/{{workload,calibration,scenario,traced_step}}.json\n", request.out);
  return 0;
}

void add_kineto_calibration(dag::Calibration& c, const std::vector<std::string>& traces, double host_scale) {
  for (const auto& trace : traces) {
    const auto im = import(trace, host_scale);
    const auto& k = im.calibration;
    if (c.layers.empty()) {
      c.layers = k.layers;
      c.batch_per_gpu = k.batch_per_gpu;
    }
    if (!c.host.launch_s)
      c.host = k.host;
    if (!c.optimizer.host_s)
      c.optimizer = k.optimizer;
    fmt::print("{}: {} layers{}, median step {:.3f} ms, host per launched GPU task {:.1f} us\n", trace, k.layers.size(),
               im.zoo.empty() ? "" : fmt::format(" ({})", im.zoo), im.analysis.phases.step_s * 1e3,
               im.analysis.phases.launch_s * 1e6);
  }
}

} // namespace ddlsim::sim
