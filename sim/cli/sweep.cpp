// What-if sweeps: expansion, worker processes, resuming and merging, the results tables (sweep.hpp); the journal
// is sweep_journal.cpp.
#include "sim/cli/sweep.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "sim/cli/run.hpp"
#include "sim/cli/sweep_journal.hpp"
#include "sim/report/plot.hpp"
#include "sim/report/report.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>

namespace ddlsim::sim {
namespace {

namespace fs = std::filesystem;
using namespace detail;
using Clock = std::chrono::steady_clock;

// ---- expansion -------------------------------------------------------------------------------------------------

// A dimension of the product: one cartesian axis, or a zip group's axes (same length, advancing together).
struct Dimension {
  std::vector<const SweepAxis*> axes;
  [[nodiscard]] std::size_t size() const { return axes.front()->values.size(); }
};

std::vector<Dimension> dimensions(const std::vector<SweepAxis>& axes) {
  std::vector<Dimension> dims;
  std::map<int, std::size_t> zip_dim;
  for (const auto& a : axes) {
    if (a.zip_group < 0) {
      dims.push_back({{&a}});
      continue;
    }
    const auto [it, fresh] = zip_dim.try_emplace(a.zip_group, dims.size());
    if (fresh)
      dims.push_back({});
    dims[it->second].axes.push_back(&a);
  }
  return dims;
}

// ---- text --------------------------------------------------------------------------------------------------------

// A swept value as a cell: strings without quotes, everything else as compact JSON.
std::string value_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

template <class J> std::string number_text(const J& v) {
  if (v.is_null())
    return "";
  return v.is_string() ? v.template get<std::string>() : v.dump();
}

// The summary fields of results.csv, in order: column name and JSON pointer into summary.json.
struct Field {
  const char* column;
  const char* pointer;
};
constexpr Field kFields[] = {
    {"scenario", "/scenario"},
    {"engine", "/engine"},
    {"workers", "/workers"},
    {"iteration_time_s", "/iteration_time_s"},
    {"throughput_samples_per_s", "/throughput_samples_per_s"},
    {"scaling_efficiency", "/scaling_efficiency"},
    {"breakdown_s.compute", "/breakdown_s/compute"},
    {"breakdown_s.compression", "/breakdown_s/compression"},
    {"breakdown_s.exposed_communication", "/breakdown_s/exposed_communication"},
    {"breakdown_s.idle", "/breakdown_s/idle"},
    {"communication_bytes_per_worker", "/communication_bytes_per_worker"},
    {"peak_memory_bytes_per_gpu", "/peak_memory_bytes_per_gpu"},
    {"sim.wall_s", "/sim/wall_s"},
    {"sim.events", "/sim/events"},
    {"sim.flows", "/sim/flows"},
    {"model", "/model/name"},
    {"strategy", "/strategy"},
    {"allreduce", "/allreduce"},
    {"compute_source", "/compute_source"},
    {"single_gpu_iteration_s", "/single_gpu_iteration_s"},
    {"critical_path_s", "/critical_path_s"},
};

// With a pipeline in some point (docs/pipelines.md "Report"), these follow the fields above, then one peak-memory
// column per stage of the deepest pipeline: a data-parallel table keeps exactly the columns above.
constexpr Field kPipelineFields[] = {
    {"parallelism.data", "/parallelism/data"},
    {"parallelism.pipeline", "/parallelism/pipeline"},
    {"parallelism.tensor", "/parallelism/tensor"},
    {"pipeline.schedule", "/pipeline/schedule"},
    {"pipeline.stages", "/pipeline/stages"},
    {"pipeline.micro_batches", "/pipeline/micro_batches"},
    {"pipeline.virtual_stages", "/pipeline/virtual_stages"},
    {"pipeline.partition", "/pipeline/partition"},
    {"pipeline.bubble_fraction", "/pipeline/bubble_fraction"},
    {"pipeline.bubble_fraction_closed_form", "/pipeline/bubble_fraction_closed_form"},
    {"model_flops_utilisation", "/model_flops_utilisation"},
};

// With sharding in some point (docs/sharding.md "Report"), these follow the pipeline columns: the layout, each
// collective kind's traffic, the exposed gathers and reductions, and the memory per GPU by ZeRO's accounting.
constexpr Field kShardingFields[] = {
    {"sharding.stage", "/sharding/stage"},
    {"sharding.shard_group", "/sharding/shard_group"},
    {"sharding.replicas", "/sharding/replicas"},
    {"sharding.per_iteration.allgather_bytes_sent", "/sharding/per_iteration/allgather_bytes_sent"},
    {"sharding.per_iteration.reduce_scatter_bytes_sent", "/sharding/per_iteration/reduce_scatter_bytes_sent"},
    {"sharding.per_iteration.allreduce_bytes_sent", "/sharding/per_iteration/allreduce_bytes_sent"},
    {"sharding.exposed_allgather_s", "/sharding/exposed_allgather_s"},
    {"sharding.exposed_reduce_s", "/sharding/exposed_reduce_s"},
    {"sharding.memory_per_gpu.total_bytes", "/sharding/memory_per_gpu/total_bytes"},
    {"sharding.memory_per_gpu.fits", "/sharding/memory_per_gpu/fits"},
};

// With variability in some point (docs/variability.md), these follow the pipeline and sharding columns.
constexpr Field kVariabilityFields[] = {
    {"iteration_time_percentiles_s.p50", "/iteration_time_percentiles_s/p50"},
    {"iteration_time_percentiles_s.p90", "/iteration_time_percentiles_s/p90"},
    {"iteration_time_percentiles_s.p99", "/iteration_time_percentiles_s/p99"},
    {"variability.deterministic_iteration_s", "/variability/deterministic_iteration_s"},
    {"backup_workers", "/backup_workers"},
};

// The pipeline columns a table needs: whether any point ran a pipeline, and the stages of the deepest one.
struct PipelineColumns {
  bool any = false;
  std::size_t stages = 0;
};
PipelineColumns pipeline_columns(const std::vector<PointResult>& results) {
  PipelineColumns c;
  for (const auto& r : results) {
    if (!r.ok || !r.summary.contains("pipeline"))
      continue;
    c.any = true;
    const auto& pipeline = r.summary.at("pipeline");
    if (pipeline.contains("per_stage"))
      c.stages = std::max(c.stages, pipeline.at("per_stage").size());
  }
  return c;
}

// A point's cell for a pipeline column; a point without a pipeline is pure data parallelism: data = workers,
// pipeline = tensor = 1, the pipeline's own figures empty.
std::string pipeline_cell(const OrderedJson& summary, std::string_view column, const std::string& pointer) {
  const OrderedJson::json_pointer ptr(pointer);
  if (summary.contains(ptr))
    return csv_cell(number_text(summary.at(ptr)));
  if (summary.contains("pipeline") || !summary.contains("workers"))
    return "";
  if (column == "parallelism.data")
    return number_text(summary.at("workers"));
  if (column == "parallelism.pipeline" || column == "parallelism.tensor")
    return "1";
  return "";
}

// fits_memory: memory_per_gpu.fits (the GPU at the peak within the GPU's memory); from a summary without it, false
// when some stage's peak memory exceeds the GPU's (pipeline.per_stage[].exceeds_gpu_memory), true otherwise, empty
// without a pipeline; empty where the GPU's memory is unknown.
std::string fits_memory_cell(const OrderedJson& summary) {
  if (const OrderedJson::json_pointer fits("/memory_per_gpu/fits"); summary.contains(fits))
    return summary.at(fits).get<bool>() ? "true" : "false";
  if (summary.contains("memory_per_gpu"))
    return "";
  const OrderedJson::json_pointer ptr("/pipeline/per_stage");
  if (!summary.contains(ptr))
    return "";
  for (const auto& stage : summary.at(ptr))
    if (stage.value("exceeds_gpu_memory", false))
      return "false";
  return "true";
}

// A point's cell for a sharding column; a point without sharding shards nothing: stage 0, the other cells empty.
std::string sharding_cell(const OrderedJson& summary, std::string_view column, const std::string& pointer) {
  const OrderedJson::json_pointer ptr(pointer);
  if (summary.contains(ptr))
    return csv_cell(number_text(summary.at(ptr)));
  return column == "sharding.stage" && !summary.contains("sharding") ? "0" : "";
}

// A summary column of results.csv: its name, where its cells come from, and the JSON pointer they read.
enum class Source : std::uint8_t { summary, pipeline, stage_memory, fits_memory, sharding, variability };
struct Column {
  std::string name;
  Source source;
  std::string pointer;
};

// The summary columns, in order: the fields, the pipeline's when some point ran one, sharding's when some point
// sharded its model state, variability's when some point sampled iterations. A swept key is a column of its own, so a
// summary field of the same name is left out (the point's summary in results.json keeps it): every column name appears
// once.
std::vector<Column> summary_columns(const std::vector<std::string>& keys, const std::vector<PointResult>& results) {
  std::vector<Column> out;
  for (const auto& f : kFields)
    out.push_back({f.column, Source::summary, f.pointer});
  if (const auto [pipelines, stages] = pipeline_columns(results); pipelines) {
    for (const auto& f : kPipelineFields)
      out.push_back({f.column, Source::pipeline, f.pointer});
    out.push_back({"fits_memory", Source::fits_memory, ""});
    for (std::size_t st = 0; st < stages; ++st)
      out.push_back({fmt::format("pipeline.per_stage.{}.peak_memory_bytes", st), Source::stage_memory,
                     fmt::format("/pipeline/per_stage/{}/peak_memory_bytes", st)});
  }
  const bool sharded = std::any_of(results.begin(), results.end(),
                                   [](const PointResult& r) { return r.ok && r.summary.contains("sharding"); });
  if (sharded)
    for (const auto& f : kShardingFields)
      out.push_back({f.column, Source::sharding, f.pointer});
  const bool varied = std::any_of(results.begin(), results.end(), [](const PointResult& r) {
    return r.ok && r.summary.contains("iteration_time_percentiles_s");
  });
  if (varied)
    for (const auto& f : kVariabilityFields)
      out.push_back({f.column, Source::variability, f.pointer});
  std::erase_if(out, [&](const Column& c) { return std::find(keys.begin(), keys.end(), c.name) != keys.end(); });
  return out;
}

// A point's cell in a summary column (empty for a failed point).
std::string summary_cell(const PointResult& r, const Column& c) {
  if (!r.ok)
    return "";
  if (c.source == Source::pipeline)
    return pipeline_cell(r.summary, c.name, c.pointer);
  if (c.source == Source::fits_memory)
    return fits_memory_cell(r.summary);
  if (c.source == Source::sharding)
    return sharding_cell(r.summary, c.name, c.pointer);
  const OrderedJson::json_pointer ptr(c.pointer);
  if (r.summary.contains(ptr))
    return csv_cell(number_text(r.summary.at(ptr)));
  return c.source == Source::variability && c.name == "backup_workers" ? "0" : "";
}

// ---- running one point -------------------------------------------------------------------------------------------

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string read_all(int fd) {
  std::string data;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

PointResult failure(std::size_t index, std::string error) {
  PointResult r;
  r.index = index;
  r.error = std::move(error);
  return r;
}

PointResult run_scenario_point(const Scenario& s, std::size_t index) {
  PointResult r;
  r.index = index;
  try {
    const auto result = run_scenario(s);
    r.summary = summary_json(s, result);
    r.summary.erase("links"); // per-link statistics belong to single runs (ddlsim run), not to a results table
    r.ok = true;
  } catch (const InputError& e) {
    r.error = e.what();
  } catch (const std::exception& e) {
    r.error = fmt::format("internal error: {}", e.what());
  }
  return r;
}

// Flow points run in a child: SimGrid's engine can be created once per process.
PointResult run_in_child(const Scenario& s, std::size_t index) {
  int fds[2];
  if (::pipe(fds) != 0)
    return failure(index, "pipe() failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return failure(index, "fork() failed");
  }
  if (pid == 0) {
    ::close(fds[0]);
    write_all(fds[1], result_json(run_scenario_point(s, index)).dump());
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  const std::string text = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || text.empty())
    return failure(index, fmt::format("the simulation process {}", describe_status(status)));
  return result_from_json(OrderedJson::parse(text));
}

OrderedJson params_of(const SweepPoint& p) {
  OrderedJson params = OrderedJson::object();
  for (const auto& [key, value] : p.assignments)
    params[key] = value;
  return params;
}

PointResult run_point(const Json& base, const std::string& file, const SweepPoint& p) {
  PointResult r;
  try {
    Json doc = base;
    doc.erase("sweep");
    for (const auto& [key, value] : p.assignments)
      apply_override(doc, key, value, file);
    const Scenario s = parse_scenario(doc, file);
    r = capabilities(s.engine).one_run_per_process ? run_in_child(s, p.index) : run_scenario_point(s, p.index);
  } catch (const InputError& e) {
    r = failure(p.index, e.what());
  } catch (const std::exception& e) {
    r = failure(p.index, fmt::format("internal error: {}", e.what()));
  }
  r.params = params_of(p);
  return r;
}

// ---- worker processes --------------------------------------------------------------------------------------------

// A worker reads point indices (one per line) and answers one JSON line per point; it exits at end of input.
struct Worker {
  pid_t pid = -1;
  int to = -1;   ///< parent -> worker
  int from = -1; ///< worker -> parent
  std::string pending;
  std::optional<std::size_t> busy; ///< the point it is running
};

[[noreturn]] void worker_main(int in, int out, const Json& base, const std::string& file,
                              const std::vector<SweepPoint>& points) {
  std::string buffer;
  char chunk[256];
  for (;;) {
    const auto nl = buffer.find('\n');
    if (nl == std::string::npos) {
      const ssize_t n = ::read(in, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        ::_exit(0);
      buffer.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    const std::size_t index = std::stoul(buffer.substr(0, nl));
    buffer.erase(0, nl + 1);
    write_all(out, result_json(run_point(base, file, points[index])).dump() + "\n");
  }
}

Worker spawn_worker(const Json& base, const std::string& file, const std::vector<SweepPoint>& points,
                    const std::vector<Worker>& others) {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0)
    throw std::runtime_error("sweep: pipe() failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("sweep: fork() failed");
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    for (const auto& w : others) { // the siblings' pipes are not this worker's business
      ::close(w.to);
      ::close(w.from);
    }
    std::signal(SIGINT, SIG_DFL);
    worker_main(down[0], up[1], base, file, points);
  }
  ::close(down[0]);
  ::close(up[1]);
  ::fcntl(down[1], F_SETFD, FD_CLOEXEC);
  ::fcntl(up[0], F_SETFD, FD_CLOEXEC);
  return {pid, down[1], up[0], {}, std::nullopt};
}

// ---- progress ----------------------------------------------------------------------------------------------------

class Progress {
public:
  Progress(bool enabled, std::size_t total) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1), total_(total) {}

  void update(std::size_t done, std::size_t failed, bool final = false) {
    if (!enabled_ || total_ == 0)
      return;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double fraction = static_cast<double>(done) / static_cast<double>(total_);
    const std::string eta = done == 0 ? "?" : format_duration(elapsed / fraction - elapsed);
    if (tty_) {
      if (!final && now - last_ < std::chrono::milliseconds(100))
        return;
      last_ = now;
      constexpr int width = 30;
      const int filled = static_cast<int>(fraction * width);
      const std::string when = final ? "in " + format_duration(elapsed) : "ETA " + eta;
      std::fprintf(stderr, "\r  sweep [%s%s] %zu/%zu %3.0f%%  %zu failed  %s   ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total_, 100 * fraction, failed, when.c_str());
      if (final)
        std::fputc('\n', stderr);
      return;
    }
    const int decile = static_cast<int>(fraction * 10);
    if (!final && (decile <= last_decile_ || done == total_)) // the final line reports 100 %
      return;
    last_decile_ = decile;
    std::fprintf(stderr, "sweep: %zu/%zu points (%.0f%%), %zu failed, %s\n", done, total_, 100 * fraction, failed,
                 final ? fmt::format("{} elapsed", format_duration(elapsed)).c_str()
                       : fmt::format("ETA {}", eta).c_str());
  }

private:
  static std::string format_duration(double s) {
    const auto total = static_cast<long>(s + 0.5);
    return total >= 3600 ? fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60)
                         : fmt::format("{}:{:02}", total / 60, total % 60);
  }
  bool enabled_;
  bool tty_;
  std::size_t total_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  int last_decile_ = -1;
};

// ---- results -----------------------------------------------------------------------------------------------------

struct Tables {
  std::string scenario;
  std::vector<std::string> keys;
};

std::vector<PointResult> ordered(const std::map<std::size_t, PointResult>& results) {
  std::vector<PointResult> out;
  for (const auto& [i, r] : results)
    out.push_back(r);
  return out;
}

void write_tables(const std::string& dir, const Tables& t, const std::map<std::size_t, PointResult>& results) {
  const auto rows = ordered(results);
  OutputBatch batch; // both tables describe the same rows
  batch.add((fs::path(dir) / "results.csv").string(), results_csv(t.keys, rows));
  batch.add((fs::path(dir) / "results.json").string(), results_json(t.scenario, t.keys, rows).dump(2) + "\n");
  batch.commit();
}

// The standard plots; without gnuplot, a note (the results are complete, the images an extra).
std::vector<std::string> make_plots(const std::string& dir, SweepOutcome& outcome) {
  const std::string csv = (fs::path(dir) / "results.csv").string();
  try {
    return sweep_plots(read_results_csv(csv), dir);
  } catch (const GnuplotMissing& e) {
    outcome.notes.emplace_back(e.what());
    return {};
  }
}

std::size_t count_failed(const std::map<std::size_t, PointResult>& results) {
  return static_cast<std::size_t>(
      std::count_if(results.begin(), results.end(), [](const auto& kv) { return !kv.second.ok; }));
}

// The results a journal holds for --resume, when it is this sweep's and shard's, on the same inputs.
std::map<std::size_t, PointResult> resumed_results(const std::string& journal_path, const std::string& identity,
                                                   const std::string& shard_text,
                                                   const std::map<std::string, std::string>& inputs) {
  auto j = read_journal(journal_path);
  if (j.identity != identity || j.shard != shard_text)
    throw InputError(journal_path, "",
                     fmt::format("--resume: these results come from a different sweep ({} shard {}, this one is "
                                 "{} shard {}); use another --out or run without --resume",
                                 j.identity, j.shard, identity, shard_text));
  if (const auto changed = changed_input(j.inputs, inputs); !changed.empty())
    throw InputError(journal_path, "",
                     fmt::format("--resume: an input changed since these results were computed: {}; use another "
                                 "--out or run without --resume",
                                 changed));
  return std::move(j.results);
}

} // namespace

std::vector<SweepPoint> expand_sweep(const std::vector<SweepAxis>& axes) {
  const auto dims = dimensions(axes);
  std::size_t total = 1;
  for (const auto& d : dims)
    total *= d.size();
  std::vector<SweepPoint> points(total);
  for (std::size_t i = 0; i < total; ++i) {
    points[i].index = i;
    // Row-major: the last dimension varies fastest.
    std::size_t rest = i;
    std::vector<std::size_t> at(dims.size());
    for (std::size_t d = dims.size(); d-- > 0;) {
      at[d] = rest % dims[d].size();
      rest /= dims[d].size();
    }
    for (const auto& a : axes)
      for (std::size_t d = 0; d < dims.size(); ++d)
        if (std::find(dims[d].axes.begin(), dims[d].axes.end(), &a) != dims[d].axes.end())
          points[i].assignments.emplace_back(a.key, a.values[at[d]]);
  }
  return points;
}

std::vector<std::string> swept_keys(const std::vector<SweepAxis>& axes) {
  std::vector<std::string> keys;
  for (const auto& a : axes)
    keys.push_back(a.key);
  return keys;
}

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  const auto number = [&](std::string_view part, int& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc{} && end == part.data() + part.size();
  };
  const std::string_view all(text);
  if (slash == std::string::npos || !number(all.substr(0, slash), s.index) || !number(all.substr(slash + 1), s.count))
    throw InputError("--shard", "", fmt::format("'{}' is not of the form I/N (e.g. 3/8)", text));
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    throw InputError("--shard", "",
                     fmt::format("'{}': need 0 <= I < N (I is SLURM_ARRAY_TASK_ID with --array=0-(N-1))", text));
  return s;
}

std::string results_csv(const std::vector<std::string>& keys, const std::vector<PointResult>& results) {
  const auto columns = summary_columns(keys, results);
  std::string out = "point";
  for (const auto& k : keys)
    fmt::format_to(std::back_inserter(out), ",{}", csv_cell(k));
  out += ",status";
  for (const auto& c : columns)
    fmt::format_to(std::back_inserter(out), ",{}", c.name);
  out += ",error\n";
  for (const auto& r : results) {
    out += std::to_string(r.index);
    for (const auto& k : keys)
      fmt::format_to(std::back_inserter(out), ",{}", r.params.contains(k) ? csv_cell(value_text(r.params.at(k))) : "");
    out += r.ok ? ",ok" : ",failed";
    for (const auto& c : columns)
      fmt::format_to(std::back_inserter(out), ",{}", summary_cell(r, c));
    fmt::format_to(std::back_inserter(out), ",{}\n", csv_cell(r.error));
  }
  return out;
}

OrderedJson results_json(const std::string& scenario, const std::vector<std::string>& keys,
                         const std::vector<PointResult>& results) {
  OrderedJson j;
  j["scenario"] = scenario;
  j["swept_keys"] = keys;
  OrderedJson rows = OrderedJson::array();
  for (const auto& r : results) {
    OrderedJson row;
    row["point"] = r.index;
    row["params"] = r.params;
    row["status"] = r.ok ? "ok" : "failed";
    if (r.ok)
      row["summary"] = r.summary;
    else
      row["error"] = r.error;
    rows.push_back(std::move(row));
  }
  j["points"] = std::move(rows);
  return j;
}

SweepOutcome run_sweep(const Scenario& s, const SweepOptions& options) {
  const Json& base = s.raw;
  const std::string& file = s.file;
  const Tables tables{s.name, swept_keys(s.sweep)};
  const auto points = expand_sweep(s.sweep);
  const std::string identity = identity_of(base);
  const std::string shard_text = fmt::format("{}/{}", options.shard.index, options.shard.count);
  const fs::path dir(options.out_dir);
  const std::string journal_path = (dir / "points.jsonl").string();

  std::map<std::size_t, PointResult> results;
  SweepOutcome outcome;
  const OutputDir held(dir.string()); // locked before the journal is read
  if (options.resume && path_exists(journal_path)) {
    results = resumed_results(journal_path, identity, shard_text, options.inputs);
    outcome.resumed = results.size();
  }
  // The journal is rewritten from what is kept (a cut-short last line disappears), then appended to.
  {
    OrderedJson header{{"sweep", identity},   {"scenario", file},    {"name", tables.scenario},
                       {"keys", tables.keys}, {"shard", shard_text}, {"points", points.size()}};
    if (!options.inputs.empty())
      header["inputs"] = options.inputs;
    std::string text = header.dump() + "\n";
    for (const auto& [i, r] : results)
      text += result_json(r).dump() + "\n";
    write_file_atomic(journal_path, text);
  }
  // A worker that dies is noticed at the end of its output (and its point recorded as failed): writing to its
  // closed pipe must fail with EPIPE rather than kill the sweep.
  std::signal(SIGPIPE, SIG_IGN);
  const int journal = ::open(journal_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (journal < 0)
    throw std::runtime_error("sweep: cannot append to " + journal_path);

  std::deque<std::size_t> todo;
  for (const auto& p : points)
    if (options.shard.owns(p.index)) {
      ++outcome.points;
      if (!results.contains(p.index))
        todo.push_back(p.index);
    }

  Progress progress(options.progress, outcome.points);
  progress.update(results.size(), count_failed(results));
  // The tables are rewritten whole, so the pause between rewrites grows with their cost (at least 0.25 s, at
  // least 4 times the last rewrite): the sweep spends at most a fifth of its time writing, however many points.
  auto next_write = Clock::now();
  const auto rewrite = [&] {
    const auto start = Clock::now();
    write_tables(options.out_dir, tables, results);
    const auto cost = Clock::now() - start;
    next_write = Clock::now() + std::max<Clock::duration>(std::chrono::milliseconds(250), 4 * cost);
  };
  rewrite();

  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(todo.size())));
  std::vector<Worker> workers;
  const auto assign = [&](Worker& w) {
    if (todo.empty()) {
      if (w.to >= 0)
        ::close(w.to);
      w.to = -1;
      return;
    }
    w.busy = todo.front();
    todo.pop_front();
    write_all(w.to, fmt::format("{}\n", *w.busy));
  };
  const auto finish = [&](PointResult r) {
    write_all(journal, result_json(r).dump() + "\n");
    results[r.index] = std::move(r);
    ++outcome.ran;
    progress.update(results.size(), count_failed(results));
    if (Clock::now() >= next_write)
      rewrite();
  };
  for (int i = 0; i < jobs && !todo.empty(); ++i) {
    workers.push_back(spawn_worker(base, file, points, workers));
    assign(workers.back());
  }
  while (!workers.empty()) {
    std::vector<pollfd> fds;
    for (const auto& w : workers)
      fds.push_back({w.from, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      throw std::runtime_error("sweep: poll() failed");
    }
    for (std::size_t k = workers.size(); k-- > 0;) {
      if (fds[k].revents == 0)
        continue;
      Worker& w = workers[k];
      char chunk[65536];
      const ssize_t n = ::read(w.from, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      if (n > 0) {
        w.pending.append(chunk, static_cast<std::size_t>(n));
        for (auto nl = w.pending.find('\n'); nl != std::string::npos; nl = w.pending.find('\n')) {
          finish(result_from_json(OrderedJson::parse(w.pending.substr(0, nl))));
          w.pending.erase(0, nl + 1);
          w.busy.reset();
          assign(w);
        }
        continue;
      }
      // End of output: the worker is done, or died while running a point (which is recorded as failed, and
      // the worker replaced while points remain).
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      ::close(w.from);
      if (w.to >= 0)
        ::close(w.to);
      const auto lost = w.busy;
      workers.erase(workers.begin() + static_cast<std::ptrdiff_t>(k));
      if (lost) {
        auto r = failure(*lost, fmt::format("the worker process {}", describe_status(status)));
        r.params = params_of(points[*lost]);
        finish(std::move(r));
        if (!todo.empty()) {
          workers.push_back(spawn_worker(base, file, points, workers));
          assign(workers.back());
        }
      }
      break; // indices into fds are stale
    }
  }
  ::close(journal);
  write_tables(options.out_dir, tables, results);
  std::size_t failed = 0;
  for (const auto& [i, r] : results)
    failed += r.ok ? 0 : 1;
  outcome.failed = failed;
  progress.update(results.size(), failed, true);
  if (options.plots && options.shard.count == 1)
    outcome.plots = make_plots(options.out_dir, outcome);
  return outcome;
}

SweepOutcome merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir, bool plots) {
  if (shard_dirs.empty())
    throw InputError("", "", "merge: give the shard directories to combine");
  std::optional<Journal> first;
  std::string first_path;
  std::map<std::size_t, PointResult> results;
  std::map<int, std::string> shard_paths; // shard index -> journal
  for (const auto& d : shard_dirs) {
    const std::string path = (fs::path(d) / "points.jsonl").string();
    auto j = read_journal(path);
    const Shard shard = parse_shard(j.shard);
    if (!first) {
      first = j;
      first_path = path;
    } else if (j.identity != first->identity || j.points != first->points) {
      throw InputError(path, "",
                       fmt::format("merge: this shard belongs to another sweep ({}) than {} ({})", j.identity,
                                   first_path, first->identity));
    } else if (const auto changed = changed_input(first->inputs, j.inputs); !changed.empty()) {
      throw InputError(path, "",
                       fmt::format("merge: this shard read other inputs than {}: {}; rerun the shards on the same "
                                   "files",
                                   first_path, changed));
    }
    if (shard.count != parse_shard(first->shard).count) {
      throw InputError(path, "",
                       fmt::format("merge: this is shard {}, but {} is shard {}: the shards of one sweep split it "
                                   "the same way",
                                   j.shard, first_path, first->shard));
    }
    if (const auto [at, fresh] = shard_paths.emplace(shard.index, path); !fresh)
      throw InputError(path, "", fmt::format("merge: shard {} is given twice (also {})", j.shard, at->second));
    std::size_t owned = 0;
    for (std::size_t i = 0; i < j.points; ++i)
      owned += shard.owns(i) ? 1 : 0;
    if (j.results.size() != owned)
      throw InputError(path, "",
                       fmt::format("merge: shard {} has {} of its {} points; finish it first (`ddlsim sweep "
                                   "SCENARIO --shard {} --resume --out {}`)",
                                   j.shard, j.results.size(), owned, j.shard, d));
    for (auto& [i, r] : j.results)
      results[i] = std::move(r);
  }
  const int count = parse_shard(first->shard).count;
  if (static_cast<int>(shard_paths.size()) != count) {
    std::vector<std::string> missing;
    for (int i = 0; i < count; ++i)
      if (!shard_paths.contains(i))
        missing.push_back(fmt::format("{}/{}", i, count));
    throw InputError("", "",
                     fmt::format("merge: shard{} {} {} missing: give every shard of the sweep",
                                 missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                                 missing.size() == 1 ? "is" : "are"));
  }
  const Tables tables{first->name, first->keys};
  const OutputDir held(out_dir);
  write_tables(out_dir, tables, results);
  SweepOutcome outcome;
  outcome.points = first->points;
  outcome.resumed = results.size();
  outcome.failed = count_failed(results);
  if (plots)
    outcome.plots = make_plots(out_dir, outcome);
  return outcome;
}

} // namespace ddlsim::sim
