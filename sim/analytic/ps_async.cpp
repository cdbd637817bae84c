// The asynchronous parameter server's discrete-event simulation (ps_async.hpp).
#include "sim/analytic/ps_async.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <queue>
#include <tuple>

namespace ddlsim::sim {
namespace {

enum EventKind { computed = 0, applied = 1, pulled = 2 };

struct Event {
  double t;
  int worker;
  int kind;
  [[nodiscard]] bool operator>(const Event& o) const {
    return std::tie(t, worker, kind) > std::tie(o.t, o.worker, o.kind);
  }
};

// FIFO link directions: a GPU link per rank (same node), a NIC per endpoint (nodes or GPUs, then dedicated servers).
class Links {
public:
  Links(const LoweringShape& shape, const Network& net)
      : net_(net), p_(shape.workers()), g_(shape.gpus_per_node), base_(net.nic_per_gpu ? p_ : shape.nodes),
        intra_up_(static_cast<std::size_t>(shape.ranks()), 0.0), intra_down_(intra_up_),
        nic_up_(static_cast<std::size_t>(base_ + net.server_hosts), 0.0), nic_down_(nic_up_) {}

  /// Reserves a transfer of `bytes` from rank a to rank b requested at t; returns its arrival.
  double transfer(int a, int b, double bytes, double t) {
    if (a == b || bytes <= 0)
      return t;
    const bool same_node = a < p_ && b < p_ && a / g_ == b / g_;
    double& up = same_node ? intra_up_[static_cast<std::size_t>(a)] : nic_up_[endpoint(a)];
    double& down = same_node ? intra_down_[static_cast<std::size_t>(b)] : nic_down_[endpoint(b)];
    const LinkSpec& link = same_node ? net_.intra : net_.inter;
    const double end = std::max({t, up, down}) + bytes / link.bandwidth;
    up = down = end;
    return end + 2 * link.latency_s;
  }

private:
  [[nodiscard]] std::size_t endpoint(int rank) const {
    return static_cast<std::size_t>(rank >= p_ ? base_ + rank - p_ : net_.nic_per_gpu ? rank : rank / g_);
  }
  const Network& net_;
  int p_, g_, base_;
  std::vector<double> intra_up_, intra_down_, nic_up_, nic_down_;
};

struct Record {
  double t;
  int worker;
  int staleness; // pushes; -1 for a completed iteration
  double push_s, pull_s;
};

} // namespace

AsyncPsResult simulate_ps_async(const AsyncPsInput& in) {
  const int p = in.shape.workers();
  const int servers = in.shape.server_count();
  assert(static_cast<int>(in.compute_s.size()) == p && "ps-async: one compute time per worker");
  assert(static_cast<int>(in.server_bytes.size()) == servers && "ps-async: one shard size per server");
  assert(in.warmup >= 0 && in.measured >= 1 && "ps-async: needs at least one measured iteration");
  Links links(in.shape, in.net);
  const auto n = static_cast<std::size_t>(p);
  std::vector<long> done(n, 0), read_version(n, 0);
  std::vector<double> computed_at(n, 0), applied_at(n, 0);
  long versions = 0;
  int warmed = 0, finished = 0;
  double t_start = 0, t_end = 0;
  std::vector<Record> records;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  // The pull of worker v's parameters, requested at t: every server's shard back; the next compute starts when the
  // last has arrived.
  const auto pull = [&](int v, double t) {
    read_version[static_cast<std::size_t>(v)] = versions; // reads the parameters with every applied update
    double arrival = t;
    for (int s = 0; s < servers; ++s)
      arrival = std::max(arrival,
                         links.transfer(in.shape.server_rank(s), v, in.server_bytes[static_cast<std::size_t>(s)], t));
    events.push({arrival, v, pulled});
  };
  for (int w = 0; w < p; ++w)
    events.push({in.compute_s[static_cast<std::size_t>(w)], w, computed});
  while (!events.empty() && finished < p) {
    const Event e = events.top();
    events.pop();
    const auto w = static_cast<std::size_t>(e.worker);
    double last = e.t;
    if (e.kind == computed) {
      computed_at[w] = e.t;
      for (int s = 0; s < servers; ++s) {
        const auto k = static_cast<std::size_t>(s);
        const double update = in.server_update_s.empty() ? 0.0 : in.server_update_s[k];
        last = std::max(last, links.transfer(e.worker, in.shape.server_rank(s), in.server_bytes[k], e.t) + update);
      }
      events.push({last, e.worker, applied});
    } else if (e.kind == applied) {
      applied_at[w] = e.t;
      records.push_back({e.t, e.worker, static_cast<int>(versions - read_version[w]), e.t - computed_at[w], 0});
      ++versions;
      pull(e.worker, e.t);
    } else {
      records.push_back({e.t, e.worker, -1, 0, e.t - applied_at[w]});
      if (++done[w] == in.warmup && ++warmed == p)
        t_start = e.t;
      if (done[w] == in.warmup + in.measured && ++finished == p)
        t_end = e.t;
      events.push({e.t + in.compute_s[w], e.worker, computed});
    }
  }
  if (in.warmup == 0)
    t_start = 0;

  AsyncPsResult r;
  r.window_s = t_end - t_start;
  r.iterations_per_s.assign(n, 0);
  r.mean_push_s.assign(n, 0);
  r.mean_pull_s.assign(n, 0);
  std::vector<long> pushes(n, 0);
  long updates = 0;
  double staleness_sum = 0;
  for (const auto& rec : records) {
    if (!(rec.t > t_start && rec.t <= t_end))
      continue;
    const auto w = static_cast<std::size_t>(rec.worker);
    if (rec.staleness < 0) {
      r.iterations_per_s[w] += 1;
      r.mean_pull_s[w] += rec.pull_s;
      continue;
    }
    ++pushes[w];
    r.mean_push_s[w] += rec.push_s;
    ++r.staleness[rec.staleness];
    ++updates;
    staleness_sum += rec.staleness;
    r.staleness_max = std::max(r.staleness_max, rec.staleness);
  }
  for (std::size_t w = 0; w < n; ++w) {
    if (r.iterations_per_s[w] > 0)
      r.mean_pull_s[w] /= r.iterations_per_s[w];
    if (pushes[w] > 0)
      r.mean_push_s[w] /= static_cast<double>(pushes[w]);
    r.iterations_per_s[w] = r.window_s > 0 ? r.iterations_per_s[w] / r.window_s : 0;
  }
  r.staleness_mean = updates > 0 ? staleness_sum / static_cast<double>(updates) : 0;
  return r;
}

} // namespace ddlsim::sim
