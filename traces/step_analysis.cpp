// One profiler step's analysis (step_analysis.hpp): call trees of the CPU threads and the GPU work they launch, the
// step's phases, layers and collectives, in the class StepAnalyser.
#include "traces/step_analysis.hpp"
#include "traces/modules.hpp"
#include "traces/operators.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddlsim::traces::detail {
namespace {

/// One operator (or annotation) of a CPU thread in a step, with its place in the call tree.
struct Node {
  std::size_t ev = 0;
  int parent = -1;
  std::vector<int> children;
  std::vector<std::size_t> launches; ///< runtime calls directly inside it
};

/// The call trees of one thread's CPU events in a window.
struct Forest {
  std::vector<Node> nodes;
  std::vector<int> roots;
};

Forest build_forest(const KinetoTrace& t, const Index& ix, std::size_t thread, double from_us, double to_us) {
  Forest f;
  std::vector<int> stack;
  const auto& cpu = ix.cpu[thread];
  auto it =
      std::lower_bound(cpu.begin(), cpu.end(), from_us, [&](std::size_t i, double v) { return t.events[i].ts_us < v; });
  for (; it != cpu.end() && t.events[*it].ts_us < to_us; ++it) {
    const Event& e = t.events[*it];
    while (!stack.empty() && t.events[f.nodes[static_cast<std::size_t>(stack.back())].ev].end_us() <= e.ts_us)
      stack.pop_back();
    Node n;
    n.ev = *it;
    n.parent = stack.empty() ? -1 : stack.back();
    const int id = static_cast<int>(f.nodes.size());
    f.nodes.push_back(std::move(n));
    if (stack.empty())
      f.roots.push_back(id);
    else
      f.nodes[static_cast<std::size_t>(stack.back())].children.push_back(id);
    stack.push_back(id);
  }
  // Runtime calls: into the innermost node around them (a sweep with the same stack discipline).
  stack.clear();
  std::size_t next = 0;
  const auto& rt = ix.runtime[thread];
  auto r =
      std::lower_bound(rt.begin(), rt.end(), from_us, [&](std::size_t i, double v) { return t.events[i].ts_us < v; });
  for (; r != rt.end() && t.events[*r].ts_us < to_us; ++r) {
    const Event& e = t.events[*r];
    while (next < f.nodes.size() && t.events[f.nodes[next].ev].ts_us <= e.ts_us) {
      while (!stack.empty() &&
             t.events[f.nodes[static_cast<std::size_t>(stack.back())].ev].end_us() <= t.events[f.nodes[next].ev].ts_us)
        stack.pop_back();
      stack.push_back(static_cast<int>(next++));
    }
    while (!stack.empty() && t.events[f.nodes[static_cast<std::size_t>(stack.back())].ev].end_us() < e.ts_us)
      stack.pop_back();
    if (!stack.empty())
      f.nodes[static_cast<std::size_t>(stack.back())].launches.push_back(*r);
  }
  return f;
}

/// What one span of host work launched on the GPU.
struct GpuWork {
  double compute_s = 0; ///< kernels, memsets and copies other than NCCL's
  double nccl_s = 0;
  double h2d_s = 0;
  double h2d_bytes = 0;
  double sync_s = 0; ///< host time blocked in synchronising runtime calls
  int tasks = 0;     ///< GPU activities launched (NCCL included)
  std::vector<std::size_t> gpu_events;
};

enum class Phase { data_loading, h2d, forward, backward_marker, optimizer, other };

class StepAnalyser {
public:
  StepAnalyser(const KinetoTrace& t, const Index& ix, std::size_t main_thread, double from_us, double to_us)
      : t_(t), ix_(ix), main_(main_thread), from_(from_us), to_(to_us) {
    forests_.resize(t.threads.size());
    for (std::size_t th = 0; th < t.threads.size(); ++th)
      if (!t.threads[th].gpu)
        forests_[th] = build_forest(t, ix, th, from_us, to_us);
  }

  StepResult run();

private:
  const Event& ev(std::size_t th, int node) const {
    return t_.events[forests_[th].nodes[static_cast<std::size_t>(node)].ev];
  }

  void collect(std::size_t th, int node, GpuWork& w) const {
    const Node& n = forests_[th].nodes[static_cast<std::size_t>(node)];
    for (const std::size_t r : n.launches) {
      const Event& call = t_.events[r];
      if (is_sync(call))
        w.sync_s += call.dur_us * kUs;
      if (call.correlation < 0)
        continue;
      const auto [lo, hi] = ix_.gpu_by_correlation.equal_range(call.correlation);
      for (auto it = lo; it != hi; ++it) {
        const Event& g = t_.events[it->second];
        ++w.tasks;
        w.gpu_events.push_back(it->second);
        if (is_nccl(g))
          w.nccl_s += g.dur_us * kUs;
        else
          w.compute_s += g.dur_us * kUs;
        if (g.cat == Category::memcpy && contains(g.name, "HtoD")) {
          w.h2d_s += g.dur_us * kUs;
          w.h2d_bytes += g.bytes;
        }
      }
    }
    for (const int c : n.children)
      collect(th, c, w);
  }
  GpuWork work(std::size_t th, int node) const {
    GpuWork w;
    collect(th, node, w);
    return w;
  }

  /// The operators under an annotation: descends through user annotations and python functions to cpu_ops.
  void leaves(std::size_t th, int node, std::vector<int>& out) const {
    const Event& e = ev(th, node);
    if (e.cat == Category::cpu_op || forests_[th].nodes[static_cast<std::size_t>(node)].children.empty()) {
      out.push_back(node);
      return;
    }
    for (const int c : forests_[th].nodes[static_cast<std::size_t>(node)].children)
      leaves(th, c, out);
  }

  void sequence_numbers(std::size_t th, int node, std::vector<std::int64_t>& out) const {
    const Event& e = ev(th, node);
    if (e.sequence >= 0)
      out.push_back(e.sequence);
    for (const int c : forests_[th].nodes[static_cast<std::size_t>(node)].children)
      sequence_numbers(th, c, out);
  }

  // The phases of run(): a backward unit is an operator (thread, node) of the backward.
  using Unit = std::pair<std::size_t, int>;
  std::vector<int> top_level_spans() const;
  std::vector<Unit> autograd_units();
  void set_backward_window(std::vector<Unit>& backward_units);
  void place_by_position(const std::vector<int>& top, bool forward_marker, std::vector<Phase>& phase) const;
  void time_top_level_spans(const std::vector<int>& top, const std::vector<Phase>& phase, bool marker_backward,
                            PhaseFigures& p, std::vector<int>& forward_leaves, std::vector<double>& leaf_end);
  void time_forward_layers(const std::vector<int>& forward_leaves, const std::vector<double>& leaf_end, StepResult& r);
  void time_backward_units(const std::vector<Unit>& backward_units, StepResult& r);
  void add_gpu_busy(PhaseFigures& p) const;
  void find_collectives(StepResult& r);

  const KinetoTrace& t_;
  const Index& ix_;
  std::size_t main_;
  double from_, to_;
  std::vector<Forest> forests_;
  std::vector<std::size_t> backward_threads_;
  double backward_from_ = 0, backward_to_ = 0;
  std::map<std::int64_t, int> layer_of_sequence_;
  // host intervals of the layer operators, for attributing collectives: (thread, start) -> layer, phase
  struct Span {
    double from_us, to_us;
    int layer;
    std::string phase;
  };
  std::vector<Span> spans_;
};

Phase classify(const Event& e) {
  const std::string n = lower(e.name);
  if (contains(n, "dataloader") || contains(n, "wait_for_batch") || contains(n, "sparse_data_dist"))
    return Phase::data_loading;
  if (starts_with(e.name, "Optimizer.step") || n == "## optimizer ##")
    return Phase::optimizer;
  if (contains(n, "zero_grad"))
    return Phase::other;
  if (contains(n, "copy_batch_to_gpu"))
    return Phase::h2d;
  if (e.cat != Category::cpu_op && contains(n, "backward"))
    return Phase::backward_marker;
  if (e.cat != Category::cpu_op && contains(n, "forward"))
    return Phase::forward;
  return Phase::other; // decided by position (StepAnalyser::place_by_position)
}

StepResult StepAnalyser::run() {
  StepResult r;
  r.duration_s = (to_ - from_) * kUs;
  PhaseFigures& p = r.phases;
  p.step_s = r.duration_s;

  const std::vector<int> top = top_level_spans();
  std::vector<Unit> backward_units = autograd_units();
  // A backward marker on the main thread without an autograd thread: backward runs there.
  const bool marker_backward = backward_units.empty();
  std::vector<Phase> phase(top.size(), Phase::other);
  bool forward_marker = false;
  for (std::size_t i = 0; i < top.size(); ++i) {
    phase[i] = classify(ev(main_, top[i]));
    forward_marker = forward_marker || phase[i] == Phase::forward;
  }
  if (marker_backward)
    for (std::size_t i = 0; i < top.size(); ++i)
      if (phase[i] == Phase::backward_marker) {
        std::vector<int> ls;
        leaves(main_, top[i], ls);
        for (const int l : ls)
          backward_units.emplace_back(main_, l);
      }
  if (backward_units.empty()) {
    r.ok = false;
    r.problem = "no backward pass (no autograd operators)";
    return r;
  }
  set_backward_window(backward_units);
  place_by_position(top, forward_marker, phase);

  std::vector<int> forward_leaves;
  std::vector<double> leaf_end;
  time_top_level_spans(top, phase, marker_backward, p, forward_leaves, leaf_end);
  time_forward_layers(forward_leaves, leaf_end, r);
  time_backward_units(backward_units, r);
  add_gpu_busy(p);

  find_collectives(r);
  return r;
}

// The step's own node on the main thread: its children are the top-level spans.
std::vector<int> StepAnalyser::top_level_spans() const {
  const Forest& mf = forests_[main_];
  int step_node = -1;
  for (const int root : mf.roots)
    if (starts_with(ev(main_, root).name, "ProfilerStep#"))
      step_node = root;
  return step_node >= 0 ? mf.nodes[static_cast<std::size_t>(step_node)].children : mf.roots;
}

// Backward: the top-level operators of the other CPU threads that run autograd (sequence numbers or *Backward*).
std::vector<StepAnalyser::Unit> StepAnalyser::autograd_units() {
  std::vector<Unit> backward_units;
  for (std::size_t th = 0; th < forests_.size(); ++th) {
    if (th == main_ || t_.threads[th].gpu || forests_[th].roots.empty())
      continue;
    bool autograd = false;
    for (const auto& n : forests_[th].nodes) {
      const Event& e = t_.events[n.ev];
      if (e.fwd_thread >= 0 || contains(e.name, "Backward") || contains(e.name, "evaluate_function")) {
        autograd = true;
        break;
      }
    }
    if (!autograd)
      continue;
    backward_threads_.push_back(th);
    for (const int root : forests_[th].roots)
      backward_units.emplace_back(th, root);
  }
  return backward_units;
}

// Sorts the backward units by start; the backward window runs from the first's start to the latest end.
void StepAnalyser::set_backward_window(std::vector<Unit>& backward_units) {
  std::sort(backward_units.begin(), backward_units.end(),
            [&](const auto& a, const auto& b) { return ev(a.first, a.second).ts_us < ev(b.first, b.second).ts_us; });
  backward_from_ = ev(backward_units.front().first, backward_units.front().second).ts_us;
  backward_to_ = backward_from_;
  for (const auto& [th, n] : backward_units)
    backward_to_ = std::max(backward_to_, ev(th, n).end_us());
}

// Main-thread spans by position: unclassified spans before the backward are forward (after the data loading and
// the input's copy) unless a forward marker names the forward; spans that launch host-to-device copies before the
// first layer operator are the copy. Between the first layer operator and the backward everything is forward
// (zero_grad called there, the loss): a layer's host time runs to the next layer's first operator, and the last
// forward layer's to the backward's.
void StepAnalyser::place_by_position(const std::vector<int>& top, bool forward_marker,
                                     std::vector<Phase>& phase) const {
  bool seen_layer = false;
  for (std::size_t i = 0; i < top.size(); ++i) {
    const Event& e = ev(main_, top[i]);
    if (phase[i] != Phase::other)
      continue;
    if (e.ts_us >= backward_from_)
      continue;
    const GpuWork w = work(main_, top[i]);
    if (!seen_layer && w.h2d_bytes > 0) {
      phase[i] = Phase::h2d;
      continue;
    }
    if (forward_marker)
      continue;
    std::vector<int> ls;
    leaves(main_, top[i], ls);
    for (const int l : ls)
      seen_layer = seen_layer || !layer_kind(ev(main_, l)).empty();
    if (seen_layer)
      phase[i] = Phase::forward;
  }
}

// Host intervals of the top-level spans: from a span's start to the next one's (the last to the step's end); the
// main thread's time inside the backward window is waiting for autograd (unless backward runs on it). The forward
// spans' operators go to `forward_leaves`, each with the end of its interval.
void StepAnalyser::time_top_level_spans(const std::vector<int>& top, const std::vector<Phase>& phase,
                                        bool marker_backward, PhaseFigures& p, std::vector<int>& forward_leaves,
                                        std::vector<double>& leaf_end) {
  for (std::size_t i = 0; i < top.size(); ++i) {
    const Event& e = ev(main_, top[i]);
    const double start = i == 0 ? from_ : e.ts_us;
    const double end = i + 1 < top.size() ? ev(main_, top[i + 1]).ts_us : to_;
    double host = (end - start) * kUs;
    const GpuWork w = work(main_, top[i]);
    p.sync_wait_s += w.sync_s;
    if (!marker_backward) { // the part of the interval inside the backward window is waiting
      const double overlap = std::max(0.0, std::min(end, backward_to_) - std::max(start, backward_from_));
      p.backward_wait_s += overlap * kUs;
      host -= overlap * kUs;
    }
    p.gpu_kernels_s += w.compute_s;
    p.nccl_s += w.nccl_s;
    static constexpr const char* kPhaseNames[] = {"data_loading", "h2d", "forward", "backward", "optimizer", "other"};
    if (phase[i] != Phase::forward)
      spans_.push_back({start, end, -1, kPhaseNames[static_cast<int>(phase[i])]});
    switch (phase[i]) {
    case Phase::data_loading:
      p.data_loading_s += host - w.sync_s;
      p.other_gpu_s += w.compute_s;
      break;
    case Phase::h2d:
      p.h2d_host_s += host;
      p.h2d_copy_s += w.h2d_s;
      p.h2d_bytes += w.h2d_bytes;
      p.other_gpu_s += w.compute_s;
      break;
    case Phase::optimizer:
      p.optimizer_host_s += host - w.sync_s;
      p.optimizer_gpu_s += w.compute_s;
      break;
    case Phase::forward: {
      // its operators' intervals (each to the next one's start, the last to the span's end or the backward's
      // start); the rest of the span's interval (annotation overhead before its first operator) is other host time
      std::vector<int> ls;
      leaves(main_, top[i], ls);
      const double until = marker_backward ? end : std::min(end, std::max(start, backward_from_));
      double in_leaves = 0;
      for (std::size_t k = 0; k < ls.size(); ++k) {
        const double leaf_from = ev(main_, ls[k]).ts_us;
        const double leaf_to = std::max(leaf_from, k + 1 < ls.size() ? ev(main_, ls[k + 1]).ts_us : until);
        forward_leaves.push_back(ls[k]);
        leaf_end.push_back(leaf_to);
        in_leaves += (leaf_to - leaf_from) * kUs;
      }
      p.other_host_s += std::max(0.0, host - in_leaves);
      break;
    }
    case Phase::backward_marker:
      if (marker_backward)
        break; // its leaves are the backward units
      [[fallthrough]];
    case Phase::other:
      p.other_host_s += host - w.sync_s;
      p.other_gpu_s += w.compute_s;
      break;
    }
  }
}

// Layers: leaf modules when the forward has module annotations, else layer-opening operators (modules.hpp).
void StepAnalyser::time_forward_layers(const std::vector<int>& forward_leaves, const std::vector<double>& leaf_end,
                                       StepResult& r) {
  const Forest& mf = forests_[main_];
  PhaseFigures& p = r.phases;
  std::vector<ForwardLeaf> fl(forward_leaves.size());
  for (std::size_t k = 0; k < forward_leaves.size(); ++k) {
    fl[k].event = &ev(main_, forward_leaves[k]);
    for (int up = mf.nodes[static_cast<std::size_t>(forward_leaves[k])].parent; up >= 0;
         up = mf.nodes[static_cast<std::size_t>(up)].parent)
      if (is_module(ev(main_, up)))
        fl[k].modules.insert(fl[k].modules.begin(), &ev(main_, up));
  }
  Layering layering = form_layers(fl);
  r.layers = std::move(layering.layers);
  r.from_modules = layering.from_modules;
  const std::vector<int>& leaf_layer = layering.leaf_layer;
  for (const auto& l : r.layers)
    if (!r.batch && !l.input_shape.empty() && l.input_shape[0] > 0 && l.kind != "compiled") {
      if (l.input_shape[0] > kMaxBatch)
        throw InputError(t_.path, "",
                         fmt::format("a batch of {} (the first size of {}'s input) is more than {}", l.input_shape[0],
                                     l.op, kMaxBatch));
      r.batch = static_cast<int>(l.input_shape[0]);
    }
  for (std::size_t k = 0; k < forward_leaves.size(); ++k) {
    TracedLayer& l = r.layers[static_cast<std::size_t>(leaf_layer[k])];
    const Event& e = ev(main_, forward_leaves[k]);
    // the first leaf of a span takes the span's opening gap with it
    const GpuWork w = work(main_, forward_leaves[k]);
    const double host = (leaf_end[k] - e.ts_us) * kUs - w.sync_s;
    l.forward_host_s += host;
    l.forward_gpu_s += w.compute_s;
    l.kernels_forward += w.tasks;
    p.forward_s += host;
    if (w.tasks > 0 && layer_kind(e) != "compiled")
      r.launch_per_task.push_back(host / w.tasks);
    std::vector<std::int64_t> seqs;
    sequence_numbers(main_, forward_leaves[k], seqs);
    for (const auto s : seqs)
      layer_of_sequence_.emplace(s, leaf_layer[k]);
    spans_.push_back({e.ts_us, leaf_end[k], leaf_layer[k], "forward"});
  }
}

// Backward: each unit's interval to the next unit's start; its layer by sequence number, else the previous one's.
void StepAnalyser::time_backward_units(const std::vector<Unit>& backward_units, StepResult& r) {
  PhaseFigures& p = r.phases;
  int current = static_cast<int>(r.layers.size()) - 1;
  for (std::size_t k = 0; k < backward_units.size(); ++k) {
    const auto [th, n] = backward_units[k];
    const Event& e = ev(th, n);
    std::vector<std::int64_t> seqs;
    sequence_numbers(th, n, seqs);
    for (const auto s : seqs)
      if (const auto it = layer_of_sequence_.find(s); it != layer_of_sequence_.end()) {
        current = it->second;
        break;
      }
    const double end = k + 1 < backward_units.size()
                           ? ev(backward_units[k + 1].first, backward_units[k + 1].second).ts_us
                           : backward_to_;
    const GpuWork w = work(th, n);
    const double host = std::max(0.0, (end - e.ts_us) * kUs - w.sync_s);
    TracedLayer& l = r.layers[static_cast<std::size_t>(current)];
    l.backward_host_s += host;
    l.backward_gpu_s += w.compute_s;
    l.kernels_backward += w.tasks;
    p.backward_s += host;
    p.gpu_kernels_s += w.compute_s;
    p.nccl_s += w.nccl_s;
    p.sync_wait_s += w.sync_s;
    if (w.tasks > 0 && !contains(e.name, "CompiledFunction"))
      r.launch_per_task.push_back(host / w.tasks);
    spans_.push_back({e.ts_us, end, current, "backward"});
  }
}

// GPU busy time: the union of every activity launched in the step.
void StepAnalyser::add_gpu_busy(PhaseFigures& p) const {
  std::vector<std::pair<double, double>> busy;
  for (std::size_t th = 0; th < forests_.size(); ++th)
    for (std::size_t n = 0; n < forests_[th].nodes.size(); ++n)
      for (const std::size_t rt : forests_[th].nodes[n].launches) {
        const auto [lo, hi] = ix_.gpu_by_correlation.equal_range(t_.events[rt].correlation);
        for (auto it = lo; it != hi; ++it) {
          const Event& g = t_.events[it->second];
          busy.emplace_back(g.ts_us, g.end_us());
          ++p.gpu_tasks;
        }
      }
  std::sort(busy.begin(), busy.end());
  double covered = 0, reach = -1e300;
  for (const auto& [a, b] : busy) {
    if (b <= reach)
      continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  p.gpu_busy_s = covered * kUs;
}

struct CollectiveKind {
  std::string kind;
  Collective collective;
};

std::optional<CollectiveKind> collective_kind(std::string_view name) {
  const std::string n = lower(name);
  if (contains(n, "barrier") || contains(n, "wait"))
    return std::nullopt;
  if (contains(n, "all_reduce") || contains(n, "allreduce"))
    return CollectiveKind{"allreduce", Collective::allreduce};
  if (contains(n, "all_gather") || contains(n, "allgather"))
    return CollectiveKind{"allgather", Collective::allgather};
  if (contains(n, "reduce_scatter"))
    return CollectiveKind{"reduce_scatter", Collective::reduce_scatter};
  if (contains(n, "all_to_all") || contains(n, "alltoall"))
    return CollectiveKind{"alltoall", Collective::none};
  if (contains(n, "broadcast"))
    return CollectiveKind{"broadcast", Collective::broadcast};
  if (contains(n, "send"))
    return CollectiveKind{"send", Collective::none};
  if (contains(n, "recv"))
    return CollectiveKind{"recv", Collective::none};
  return std::nullopt;
}

void StepAnalyser::find_collectives(StepResult& r) {
  // One per NCCL call: the nccl:* annotations when the trace has them, else the c10d:: operators.
  bool annotated = false;
  for (std::size_t th = 0; th < forests_.size() && !annotated; ++th)
    for (const auto& n : forests_[th].nodes)
      if (starts_with(t_.events[n.ev].name, "nccl:") && collective_kind(t_.events[n.ev].name)) {
        annotated = true;
        break;
      }
  struct Found {
    double ts;
    std::size_t th;
    int node;
  };
  std::vector<Found> found;
  for (std::size_t th = 0; th < forests_.size(); ++th)
    for (std::size_t i = 0; i < forests_[th].nodes.size(); ++i) {
      const Event& e = t_.events[forests_[th].nodes[i].ev];
      const bool candidate = annotated ? starts_with(e.name, "nccl:") : starts_with(e.name, "c10d::");
      if (!candidate || !collective_kind(e.name))
        continue;
      if (!annotated) { // the outermost c10d:: operator only
        int parent = forests_[th].nodes[i].parent;
        bool nested = false;
        for (; parent >= 0; parent = forests_[th].nodes[static_cast<std::size_t>(parent)].parent)
          nested = nested || starts_with(ev(th, parent).name, "c10d::");
        if (nested)
          continue;
      }
      found.push_back({e.ts_us, th, static_cast<int>(i)});
    }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.ts < b.ts; });

  std::map<std::size_t, double> previous_on_thread; // allocation events count from the previous collective on
  for (const auto& f : found) {
    const Event& e = ev(f.th, f.node);
    const auto kind = *collective_kind(e.name);
    TracedCollective c;
    c.op = e.name;
    c.kind = kind.kind;
    c.collective = kind.collective;
    // The chain of collective operators around it (record_param_comms, c10d::...): sizes and the outermost start.
    std::vector<int> chain{f.node};
    int outer = f.node;
    for (int up = forests_[f.th].nodes[static_cast<std::size_t>(f.node)].parent; up >= 0;
         up = forests_[f.th].nodes[static_cast<std::size_t>(up)].parent) {
      const std::string& n = ev(f.th, up).name;
      if (n == "record_param_comms" || starts_with(n, "c10d::") || starts_with(n, "nccl:")) {
        chain.push_back(up);
        outer = up;
      }
    }
    double best = -1;
    for (const int node : chain) {
      const Event& x = ev(f.th, node);
      if (x.in_nelems >= 0 || x.out_nelems >= 0) {
        const int size = dtype_size(x.dtype) > 0 ? dtype_size(x.dtype) : 4;
        const double b = static_cast<double>(std::max(x.in_nelems, x.out_nelems)) * size;
        if (b > best) {
          best = b;
          c.size_from = "record_param_comms";
        }
        if (x.group_size > 0)
          c.group_size = static_cast<int>(x.group_size);
      }
      std::int64_t small = -1, large = -1;
      for (std::size_t a = 0; a < x.input_dims.size(); ++a) {
        if (x.input_dims[a].empty())
          continue;
        const std::string type = a < x.input_types.size() ? x.input_types[a] : "";
        const int size = dtype_size(type);
        if (size == 0)
          continue;
        const std::int64_t n = numel(x.input_dims[a]);
        small = small < 0 ? n : std::min(small, n);
        large = std::max(large, n);
        const double b = static_cast<double>(n) * size;
        if (b > best) {
          best = b;
          c.size_from = "Input Dims";
        }
      }
      if (c.group_size == 0 && small > 0 && large > small && (c.kind == "allgather" || c.kind == "reduce_scatter") &&
          large % small == 0 && large / small <= kMaxWorldSize)
        c.group_size = static_cast<int>(large / small);
    }
    const double outer_ts = ev(f.th, outer).ts_us;
    if (best < 0) { // the last allocation on the thread before the call, since the previous collective
      const auto& mem = ix_.memory[f.th];
      const double since = previous_on_thread.count(f.th) ? previous_on_thread[f.th] : from_;
      for (auto it = std::lower_bound(mem.begin(), mem.end(), outer_ts,
                                      [&](std::size_t i, double v) { return t_.events[i].ts_us < v; });
           it != mem.begin();) {
        --it;
        const Event& m = t_.events[*it];
        if (m.ts_us < since)
          break;
        if (m.bytes > 0) {
          best = m.bytes;
          c.size_from = "allocation";
          break;
        }
      }
    }
    previous_on_thread[f.th] = outer_ts;
    if (best >= 0)
      c.bytes = best;
    const GpuWork w = work(f.th, outer);
    // NCCL names its kernels after the collective (ncclKernel_AllReduce_..., ncclDevKernel_ReduceScatter_...; alltoall
    // and send/recv run SendRecv); a kernel of another collective reached by correlation is a profiler mix-up
    const std::string expected = c.kind == "allreduce"        ? "allreduce"
                                 : c.kind == "allgather"      ? "allgather"
                                 : c.kind == "reduce_scatter" ? "reducescatter"
                                 : c.kind == "broadcast"      ? "broadcast"
                                                              : "sendrecv";
    for (const std::size_t g : w.gpu_events)
      if (is_nccl(t_.events[g]) && !contains(lower(t_.events[g].name), expected) &&
          !(c.kind == "alltoall" && contains(lower(t_.events[g].name), "alltoall")))
        c.kernel_mismatch = t_.events[g].name.substr(0, t_.events[g].name.find('('));
    if (w.nccl_s > 0 && c.kernel_mismatch.empty())
      c.gpu_min_s = w.nccl_s;
    c.host_s = ev(f.th, outer).dur_us * kUs;
    // Where it was issued.
    c.phase = "other";
    for (const auto& s : spans_)
      if (outer_ts >= s.from_us && outer_ts < s.to_us) {
        c.phase = s.phase;
        if (s.phase == "backward") {
          c.layer = s.layer;
          // layer 0's backward ends the pass: a call it issues waits for the whole backward
          c.after_backward = s.layer == 0;
        }
      }
    r.collectives.push_back(std::move(c));
  }
}

} // namespace

StepResult analyse_step(const KinetoTrace& t, const Index& ix, std::size_t main_thread, double from_us, double to_us) {
  StepAnalyser sa(t, ix, main_thread, from_us, to_us);
  return sa.run();
}

} // namespace ddlsim::traces::detail
