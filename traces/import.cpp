// Trace import (import.hpp): zoo naming by weight shapes, the workload, calibration and scenario documents.
#include "traces/import.hpp"

#include "core/io.hpp"
#include "core/units.hpp"
#include "dag/workload.hpp"
#include "dag/zoo/zoo.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

namespace ddlsim::traces {
namespace {

// A gradient collective of backward that the strategy `traced` replays (import_trace's scenario, its calibration).
bool replayed_collective(const TracedCollective& c) {
  return c.phase == "backward" && c.collective != Collective::none && c.bytes.has_value();
}

/// The main thread's time per step outside the layers, the optimizer and the data loading, the input copy's host
/// time included (a copy from pageable memory blocks the thread while the DAG's copy task runs on the GPU): the
/// calibration's host iteration time, and "other" in what the user reads.
double other_host_s(const PhaseFigures& p) {
  return p.other_host_s + p.h2d_host_s;
}

std::string ms(double s) {
  return fmt::format("{:.3f} ms", s * 1e3);
}
std::string us_text(double s) {
  return fmt::format("{:.6g} us", s * 1e6);
}

std::vector<std::vector<std::int64_t>> shapes(const std::vector<dag::ParamTensor>& params) {
  std::vector<std::vector<std::int64_t>> out;
  for (const auto& p : params)
    out.push_back(p.shape);
  return out;
}

/// The zoo model whose parameterised layers have the traced layers' weight shapes, in order; for each traced layer
/// the index of its zoo layer (-1: folded into the layer before it). Parameter-free layers (pooling) are matched by
/// position between the same parameterised layers.
struct ZooMatch {
  std::string name;
  dag::Model model;
  std::vector<int> zoo_index;
};

std::optional<ZooMatch> match_zoo(const std::vector<TracedLayer>& layers) {
  std::int64_t traced_params = 0;
  std::vector<std::size_t> traced_with;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (const auto& p : layers[i].params)
      traced_params += p.numel;
    if (!layers[i].params.empty())
      traced_with.push_back(i);
  }
  if (traced_with.empty())
    return std::nullopt;
  for (const auto& name : dag::zoo_model_names()) {
    auto model = dag::build_zoo_model(name);
    if (!model || model->param_count() != traced_params)
      continue;
    std::vector<std::size_t> zoo_with;
    for (std::size_t i = 0; i < model->layers.size(); ++i)
      if (!model->layers[i].params.empty())
        zoo_with.push_back(i);
    if (zoo_with.size() != traced_with.size())
      continue;
    bool same = true;
    for (std::size_t k = 0; k < zoo_with.size() && same; ++k)
      same = shapes(model->layers[zoo_with[k]].params) == shapes(layers[traced_with[k]].params);
    if (!same)
      continue;
    ZooMatch m{name, *model, std::vector<int>(layers.size(), -1)};
    // gaps: before the first parameterised layer, between two, after the last
    for (std::size_t g = 0; g <= zoo_with.size(); ++g) {
      const std::size_t zf = g == 0 ? 0 : zoo_with[g - 1] + 1,
                        zt = g < zoo_with.size() ? zoo_with[g] : model->layers.size();
      const std::size_t tf = g == 0 ? 0 : traced_with[g - 1] + 1,
                        tt = g < traced_with.size() ? traced_with[g] : layers.size();
      if (g < zoo_with.size())
        m.zoo_index[traced_with[g]] = static_cast<int>(zoo_with[g]);
      // parameter-free traced layers take the gap's zoo layers in order while their kinds agree
      std::size_t z = zf;
      for (std::size_t t = tf; t < tt && z < zt; ++t)
        if (layers[t].kind == model->layers[z].kind)
          m.zoo_index[t] = static_cast<int>(z++);
    }
    return m;
  }
  return std::nullopt;
}

double total(const std::vector<TracedLayer>& layers, double TracedLayer::*field) {
  double sum = 0;
  for (const auto& l : layers)
    sum += l.*field;
  return sum;
}

/// The link a GPU family usually has inside a node (assumed, said so in the scenario's description).
std::pair<std::string, std::string> assumed_intra_node(const std::string& preset) {
  if (preset.find("PCIe") != std::string::npos || preset.empty() || preset == "T4")
    return {"12 GB/s", "5 us"};
  if (preset.rfind("A100", 0) == 0 || preset.rfind("H100", 0) == 0)
    return {"300 GB/s", "2 us"};
  return {"150 GB/s", "2 us"}; // V100 SXM2 NVLink
}

} // namespace

std::string gpu_preset_candidate(const std::string& device_name) {
  std::string n = device_name;
  for (const char* prefix : {"Tesla ", "NVIDIA "})
    if (n.rfind(prefix, 0) == 0)
      n = n.substr(std::string(prefix).size());
  if (const auto p = n.find("-DGXS-"); p != std::string::npos) // DGX Station V100: SXM2 modules
    n = n.substr(0, p) + "-SXM2-" + n.substr(p + 6);
  return n.find('-') == std::string::npos ? "" : n;
}

dag::Calibration trace_calibration(const TraceAnalysis& a, const std::vector<std::string>& names, double host_scale) {
  dag::Calibration c;
  c.source = fmt::format("ddlsim import-trace {}: {} steps, medians{}", a.path,
                         std::count_if(a.steps.begin(), a.steps.end(), [](const StepSpan& s) { return s.used; }),
                         host_scale != 1 ? fmt::format(", host times x {}", host_scale) : "");
  c.batch_per_gpu = a.batch.value_or(1);
  // The gradient collectives replayed (the strategy `traced`) are issued in a layer's backward: the simulation charges
  // each one launch on the host thread, which the layer's traced backward host time already holds.
  std::vector<int> replayed(a.layers.size(), 0);
  for (const auto& call : a.collectives)
    if (replayed_collective(call) && !a.layers.empty())
      ++replayed[std::min(static_cast<std::size_t>(std::max(call.layer, 0)), a.layers.size() - 1)];
  std::string current;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    const auto& l = a.layers[i];
    const double backward_host = std::max(0.0, l.backward_host_s - replayed[i] * a.phases.launch_s);
    if (i < names.size() && !names[i].empty())
      current = names[i];
    if (current.empty())
      continue;
    auto& t = c.layers[current];
    t.forward_s += l.forward_gpu_s;
    t.backward_s += l.backward_gpu_s;
    t.forward_host_s = t.forward_host_s.value_or(0) + l.forward_host_s * host_scale;
    t.backward_host_s = t.backward_host_s.value_or(0) + backward_host * host_scale;
  }
  const auto& p = a.phases;
  c.host.launch_s = p.launch_s * host_scale;
  c.host.iteration_s = other_host_s(p) * host_scale;
  if (p.data_loading_s > 0)
    c.host.data_loading_s = p.data_loading_s * host_scale;
  c.host.prefetch = a.prefetch;
  if (p.h2d_copy_s > 0 && p.h2d_bytes > 0)
    c.host.h2d_bandwidth = p.h2d_bytes / p.h2d_copy_s;
  c.optimizer.gpu_s = p.optimizer_gpu_s;
  c.optimizer.host_s = p.optimizer_host_s * host_scale;
  // Times under a femtosecond, rounding noise far below the profiler's nanosecond, are 0: the calibration reader
  // takes 0 and refuses 1e-20 s.
  const auto flush = [](double& s) { s = std::abs(s) < quantity_range(Dimension::time).smallest ? 0 : s; };
  std::vector<std::optional<double>*> optional_times{&c.host.launch_s, &c.host.iteration_s, &c.host.data_loading_s,
                                                     &c.optimizer.gpu_s, &c.optimizer.host_s};
  for (auto& [name, t] : c.layers) {
    flush(t.forward_s);
    flush(t.backward_s);
    optional_times.insert(optional_times.end(), {&t.forward_host_s, &t.backward_host_s});
  }
  for (auto* s : optional_times)
    if (s->has_value())
      flush(**s);
  return c;
}

namespace {

/// `text` with every byte that is not part of UTF-8 as U+FFFD: a file name as JSON can hold it.
std::string utf8_text(const std::string& text) {
  return Json::parse(Json(text).dump(-1, ' ', false, Json::error_handler_t::replace)).get<std::string>();
}

/// The scenario's name: the trace file's name without .json or .gz, made a name the scenario reader takes (it names
/// the output directory out/<name>): '/', '\\' and control characters as '_', at most 200 bytes, "trace" for "."
/// and "..".
std::string scenario_name(const std::string& path) {
  std::string f = utf8_text(std::filesystem::path(path).filename().string());
  for (const char* ext : {".gz", ".json"})
    if (f.size() > std::string(ext).size() && f.substr(f.size() - std::string(ext).size()) == ext)
      f = f.substr(0, f.size() - std::string(ext).size());
  for (char& c : f)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '_';
  constexpr std::size_t kLongest = 200;
  if (f.size() > kLongest) { // cut before a character, not inside one
    std::size_t cut = kLongest;
    while (cut > 0 && (static_cast<unsigned char>(f[cut]) & 0xC0) == 0x80)
      --cut;
    f.resize(cut);
  }
  return f == "." || f == ".." ? "trace" : f;
}

/// Gradient sizes when the trace has no weight shapes: one tensor per collective issued in backward.
void add_gradient_tensors(TraceAnalysis& a) {
  const bool shapes_known =
      std::any_of(a.layers.begin(), a.layers.end(), [](const TracedLayer& l) { return !l.params.empty(); });
  if (shapes_known)
    return;
  int k = 0;
  for (const auto& c : a.collectives)
    if (c.phase == "backward" && c.collective == Collective::allreduce && c.bytes && c.layer >= 0) {
      auto& l = a.layers[static_cast<std::size_t>(c.layer)];
      const auto n = static_cast<std::int64_t>(*c.bytes / 4);
      l.params.push_back({fmt::format("{}.grad{}", l.name, k++), {n}, n});
    }
  if (k > 0)
    a.notes.push_back(fmt::format("weight shapes: not in the trace; the workload's {} tensors are the {} gradient "
                                  "allreduces' sizes (fp32, as allocated: rounded up to 512 B)",
                                  k, k));
}

/// The model and each traced layer's name in it: the zoo's when the shapes match one, else the traced layers.
std::vector<std::string> layer_names(Imported& im, const std::string& stem) {
  TraceAnalysis& a = im.analysis;
  std::vector<std::string> names(a.layers.size());
  if (const auto m = match_zoo(a.layers)) {
    im.zoo = m->name;
    im.model = m->model;
    for (std::size_t i = 0; i < a.layers.size(); ++i)
      names[i] = m->zoo_index[i] >= 0 ? im.model.layers[static_cast<std::size_t>(m->zoo_index[i])].name : "";
    std::size_t unmatched = 0;
    for (const auto& l : im.model.layers)
      unmatched += std::find(names.begin(), names.end(), l.name) == names.end();
    if (unmatched > 0)
      a.notes.push_back(fmt::format("{} of {}'s layers have no traced operator (times 0)", unmatched, im.zoo));
  } else {
    im.model.name = stem;
    std::set<std::string> taken{"backward"}; // a traced collective "after" "backward" follows the whole pass
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
      const auto& t = a.layers[i];
      names[i] = t.name;
      for (int k = 2; !taken.insert(names[i]).second; ++k) // module names as the trace wrote them may repeat
        names[i] = fmt::format("{}~{}", t.name, k);
      dag::Layer l;
      l.name = names[i];
      l.kind = t.kind;
      l.params = t.params;
      l.fwd_flops = t.fwd_flops;
      l.bwd_flops = 2 * t.fwd_flops;
      l.activation_bytes = t.activation_bytes;
      im.model.layers.push_back(std::move(l));
    }
  }
  return names;
}

/// Collectives as traced: the gradient collectives of backward, in launch order.
OrderedJson traced_collectives(const TraceAnalysis& a, const std::vector<std::string>& names) {
  OrderedJson traced = OrderedJson::array();
  for (const auto& c : a.collectives) {
    if (!replayed_collective(c))
      continue;
    OrderedJson j;
    j["collective"] = std::string(collective_name(c.collective));
    j["bytes"] = fmt::format("{} B", *c.bytes);
    const std::size_t layer = static_cast<std::size_t>(std::max(c.layer, 0));
    j["after"] = c.after_backward || names[layer].empty() ? "backward" : names[layer];
    traced.push_back(std::move(j));
  }
  return traced;
}

/// What the trace lacks or the scenario does not simulate: the analysis' notes, the collectives not replayed, calls
/// without a size, kernels of other collectives, calls without kernels.
std::vector<std::string> not_simulated(const TraceAnalysis& a) {
  std::map<std::string, std::pair<int, double>> unsimulated; // kind/phase -> count, bytes
  int unknown_size = 0;
  for (const auto& c : a.collectives) {
    if (replayed_collective(c))
      continue;
    if (!c.bytes)
      ++unknown_size;
    auto& u = unsimulated[fmt::format("{} in {}", c.kind, c.phase)];
    ++u.first;
    u.second += c.bytes.value_or(0);
  }
  std::vector<std::string> missing = a.notes;
  for (const auto& [what, cb] : unsimulated)
    missing.push_back(
        fmt::format("{} {} ({}) not simulated: {}", cb.first, what, format_bytes(cb.second),
                    what.rfind("alltoall", 0) == 0 || what.rfind("send", 0) == 0 || what.rfind("recv", 0) == 0
                        ? "ddlsim has no such collective"
                        : "only gradient collectives issued in backward are replayed"));
  if (unknown_size > 0)
    missing.push_back(fmt::format("{} collective call(s) without a size in the trace", unknown_size));
  std::map<std::string, std::pair<int, std::string>> mismatched; // kind -> calls, kernel name
  for (const auto& c : a.collectives)
    if (!c.kernel_mismatch.empty()) {
      ++mismatched[c.kind].first;
      mismatched[c.kind].second = c.kernel_mismatch;
    }
  for (const auto& [kind, m] : mismatched)
    missing.push_back(fmt::format("{} {} call(s) reach a {} kernel by correlation id (a profiler mix-up): their kernel "
                                  "times are not used",
                                  m.first, kind, m.second));
  std::set<std::string> timed, untimed; // kinds with and without NCCL kernels reached from their calls
  for (const auto& c : a.collectives)
    (c.gpu_min_s ? timed : untimed).insert(c.kind);
  for (const auto& k : timed)
    untimed.erase(k);
  if (!untimed.empty())
    missing.push_back(fmt::format("NCCL kernel times of the {} calls: no kernels reached from them in the trace (their "
                                  "cost comes from the cluster model)",
                                  fmt::join(untimed, ", ")));
  return missing;
}

/// What a scenario of a GPU without a preset takes from the trace and what it assumes (its description and the
/// summary say it).
std::string device_assumed(const Imported& im) {
  const DeviceProperties& d = im.analysis.device;
  std::vector<std::string> known;
  if (d.multiprocessors)
    known.push_back(fmt::format("{} SMs", *d.multiprocessors));
  if (d.compute_capability)
    known.push_back(fmt::format("compute capability {}.{}", *d.compute_capability / 10, *d.compute_capability % 10));
  return fmt::format(
      "GPU '{}' has no ddlsim preset{}: the calibration's measured times cost every layer, {}{}; no peak FLOPS or "
      "memory bandwidth (what needs a roofline, such as compression kernels, asks for gpu.peak_flops and "
      "gpu.memory_bandwidth){}",
      d.name.empty() ? "not named" : d.name,
      im.gpu_candidate.empty() ? "" : fmt::format(" (no preset '{}')", im.gpu_candidate),
      d.memory_bytes ? fmt::format("gpu.memory {} from the trace's deviceProperties", format_bytes(*d.memory_bytes))
                     : "no memory size in the trace (fits-in-memory not checked)",
      known.empty() ? "" : fmt::format(" ({})", fmt::join(known, ", ")),
      im.analysis.world_size.value_or(1) > 1 ? "; a PCIe link inside a node assumed" : "");
}

/// The scenario's "gpu": the preset that the device name gives, else the trace's memory size (every layer has a
/// measured time).
OrderedJson gpu_json(const Imported& im) {
  if (im.gpu_is_preset)
    return {{"preset", im.gpu_candidate}};
  OrderedJson gpu = OrderedJson::object();
  if (im.analysis.device.memory_bytes)
    gpu["memory"] = fmt::format("{} B", *im.analysis.device.memory_bytes);
  return gpu;
}

/// The scenario: the imported workload and calibration on an assumed cluster, replaying the traced collectives.
OrderedJson scenario_json(const Imported& im, const std::string& stem, const std::string& file_name,
                          const std::vector<std::string>& missing, OrderedJson traced) {
  const TraceAnalysis& a = im.analysis;
  const auto& p = a.phases;
  const StepSpan* first_used = nullptr;
  const StepSpan* last_used = nullptr;
  for (const auto& s : a.steps)
    if (s.used) {
      first_used = first_used ? first_used : &s;
      last_used = &s;
    }
  const std::string step_range =
      fmt::format("{}..{}", first_used->name, last_used->name.substr(last_used->name.find('#') + 1));
  const int world = a.world_size.value_or(1);
  const int per_node = std::min(world, 8);
  const int nodes = (world + per_node - 1) / per_node;
  OrderedJson s;
  s["name"] = stem;
  std::string description = fmt::format(
      "Imported from {} ({}, {} GPU{}{}): median of {} {} ms; host per step {} (data loading {}, forward {}, backward "
      "{}, optimizer {}, other {}), GPU kernels {}.",
      file_name, a.device.name.empty() ? "device not named" : a.device.name, world, world == 1 ? "" : "s",
      a.rank ? fmt::format(", rank {}", *a.rank) : "", step_range, fmt::format("{:.3f}", p.step_s * 1e3),
      ms(p.data_loading_s + p.forward_s + p.backward_s + p.optimizer_host_s + other_host_s(p)), ms(p.data_loading_s),
      ms(p.forward_s), ms(p.backward_s), ms(p.optimizer_host_s), ms(other_host_s(p)), ms(p.gpu_kernels_s));
  if (world > 1)
    description +=
        fmt::format(" Cluster from distributedInfo (world size {}): {} GPUs per node assumed (min(world size, "
                    "8)); link bandwidths and latencies assumed, not traced.",
                    world, per_node);
  if (!im.gpu_is_preset)
    description += fmt::format(" {}.", device_assumed(im));
  if (!missing.empty())
    description += " Not in the trace or not simulated: " + fmt::format("{}.", fmt::join(missing, "; "));
  s["description"] = description;
  s["model"] = {{"workload", "workload.json"}, {"batch_per_gpu", a.batch.value_or(1)}, {"gradient_dtype", "fp32"}};
  s["gpu"] = gpu_json(im);
  s["calibration"] = "calibration.json";
  OrderedJson cluster;
  cluster["nodes"] = nodes;
  cluster["gpus_per_node"] = per_node;
  if (per_node > 1) {
    const auto [bw, lat] = assumed_intra_node(im.gpu_is_preset ? im.gpu_candidate : "");
    cluster["intra_node"] = {{"bandwidth", bw}, {"latency", lat}};
  }
  if (nodes > 1)
    cluster["inter_node"] = {{"bandwidth", "100 Gbps"}, {"latency", "5 us"}};
  s["cluster"] = std::move(cluster);
  s["strategy"] = {{"kind", "traced"}, {"collectives", std::move(traced)}};
  s["engine"] = "analytic";
  OrderedJson steps = OrderedJson::array(); // the steps the medians used: samples for an empirical distribution
  for (const auto& step : a.steps)
    if (step.used)
      steps.push_back(fmt::format("{:.4f} ms", step.duration_s * 1e3));
  s["measured"] = {{"iteration", fmt::format("{:.4f} ms", p.step_s * 1e3)},
                   {"timeline", "traced_step.json"},
                   {"source", fmt::format("{}, {}, median", file_name, step_range)},
                   {"steps", std::move(steps)}};
  return s;
}

/// What the user reads.
std::vector<std::string> summary_lines(const Imported& im, const std::string& file_name,
                                       const std::vector<std::string>& missing) {
  const TraceAnalysis& a = im.analysis;
  const auto& p = a.phases;
  const StepSpan& med = a.steps[static_cast<std::size_t>(a.median_step)];
  std::vector<std::string> out;
  out.push_back(fmt::format("{}: {} steps ({} used), median step {} (the step written out: {}, {})", file_name,
                            a.steps.size(),
                            std::count_if(a.steps.begin(), a.steps.end(), [](const StepSpan& x) { return x.used; }),
                            ms(p.step_s), med.name, ms(med.duration_s)));
  out.push_back(fmt::format("layers: {}{}{}, batch {}", a.layers.size(),
                            a.layers_from_modules ? " from the leaf modules of its nn.Module annotations" : "",
                            im.zoo.empty() ? " (no zoo model has these weight shapes)"
                                           : fmt::format(" named after zoo model {}", im.zoo),
                            a.batch ? std::to_string(*a.batch) : "unknown"));
  const double host_sum = other_host_s(p) + p.data_loading_s + p.forward_s + p.backward_s + p.optimizer_host_s;
  out.push_back(fmt::format(
      "host parts: iteration {} + data loading {} + forward {} + backward {} + optimizer {} = {} "
      "({:+.1f} % of the median step; blocked in synchronisation {}; the input copy's GPU time {} is in iteration)",
      ms(other_host_s(p)), ms(p.data_loading_s), ms(p.forward_s), ms(p.backward_s), ms(p.optimizer_host_s),
      ms(host_sum), 100 * (host_sum / p.step_s - 1), ms(p.sync_wait_s), ms(p.h2d_copy_s)));
  const double gpu_layers =
      total(a.layers, &TracedLayer::forward_gpu_s) + total(a.layers, &TracedLayer::backward_gpu_s);
  out.push_back(fmt::format("GPU: layers {} (forward {}, backward {}) + optimizer {} + other {} = {}; all kernels {}, "
                            "busy {}, NCCL kernels {}",
                            ms(gpu_layers), ms(total(a.layers, &TracedLayer::forward_gpu_s)),
                            ms(total(a.layers, &TracedLayer::backward_gpu_s)), ms(p.optimizer_gpu_s), ms(p.other_gpu_s),
                            ms(gpu_layers + p.optimizer_gpu_s + p.other_gpu_s), ms(p.gpu_kernels_s), ms(p.gpu_busy_s),
                            ms(p.nccl_s)));
  out.push_back(fmt::format("host per GPU task launched {} (median over the layers' operators); input copy {} at {}",
                            us_text(p.launch_s), format_bytes(p.h2d_bytes),
                            p.h2d_copy_s > 0 ? format_bandwidth(p.h2d_bytes / p.h2d_copy_s) : std::string("-")));
  std::map<std::string, std::pair<int, double>> by_kind;
  for (const auto& c : a.collectives) {
    auto& k = by_kind[fmt::format("{} ({})", c.kind, c.phase)];
    ++k.first;
    k.second += c.bytes.value_or(0);
  }
  for (const auto& [k, v] : by_kind)
    out.push_back(fmt::format("collectives: {} x {}, {} per step", v.first, k, format_bytes(v.second)));
  if (!im.gpu_is_preset)
    out.push_back(device_assumed(im));
  for (const auto& m : missing)
    out.push_back("not in the trace / not simulated: " + m);
  return out;
}

} // namespace

Imported import_trace(const std::string& path, const ImportOptions& options) {
  Imported im;
  const KinetoTrace trace = read_kineto(path);
  im.analysis = analyse(trace);
  TraceAnalysis& a = im.analysis;
  a.path = utf8_text(a.path); // as the files written name it
  const auto& p = a.phases;
  const std::string stem = scenario_name(path);
  const int batch = a.batch.value_or(1);
  if (!a.batch)
    a.notes.push_back("the batch size: no operator carries Input Dims (record_shapes off); batch_per_gpu 1 stands "
                      "for the traced batch");
  add_gradient_tensors(a);
  const std::vector<std::string> names = layer_names(im, stem);
  if (p.h2d_bytes > 0)
    im.model.input_bytes_per_sample = std::round(p.h2d_bytes / batch);
  im.calibration = trace_calibration(a, names, options.host_scale);
  for (const auto& l : im.model.layers)
    if (!im.calibration.layers.count(l.name))
      im.calibration.layers[l.name] = dag::LayerTime{0, 0, 0.0, 0.0};
  // Collectives as traced: the gradient collectives of backward, in launch order; the rest reported.
  OrderedJson traced = traced_collectives(a, names);
  const std::vector<std::string> missing = not_simulated(a);
  const std::string file_name = utf8_text(std::filesystem::path(path).filename().string());
  im.gpu_candidate = gpu_preset_candidate(a.device.name);
  im.gpu_is_preset = !im.gpu_candidate.empty() && (!options.is_gpu_preset || options.is_gpu_preset(im.gpu_candidate));
  im.scenario = scenario_json(im, stem, file_name, missing, std::move(traced));
  im.traced_step = traced_step_events(trace, a);
  im.summary = summary_lines(im, file_name, missing);
  return im;
}

void write_import(const Imported& im, const std::string& dir) {
  namespace fs = std::filesystem;
  const auto at = [&](const char* f) { return (fs::path(dir) / f).string(); };
  dag::write_workload(at("workload.json"), im.model, fmt::format("ddlsim import-trace {}", im.analysis.path));
  write_file_atomic(at("calibration.json"), dag::calibration_json(im.calibration).dump(2) + "\n");
  write_file_atomic(at("traced_step.json"), im.traced_step.dump() + "\n");
  write_file_atomic(at("scenario.json"), im.scenario.dump(2) + "\n");
}

} // namespace ddlsim::traces
