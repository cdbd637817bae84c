// The asynchronous parameter server's discrete-event simulation (ps_async.hpp).
#include "sim/analytic/ps_async.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <queue>
#include <tuple>

namespace ddlsim::sim {
namespace {

enum EventKind { computed = 0, push_shard = 1, applied = 2, pull_shard = 3, pulled = 4 };

struct Event {
  double t;
  int worker;
  int kind;
  int shard = 0; ///< push_shard, pull_shard: the k-th of the worker's turn round the servers
  [[nodiscard]] bool operator>(const Event& o) const {
    return std::tie(t, worker, kind, shard) > std::tie(o.t, o.worker, o.kind, o.shard);
  }
};

struct Sent {
  double left; ///< the last byte has left the links (they are free again)
  double arrival;
};

// FIFO link directions: a GPU link per rank (same node), a NIC per endpoint (nodes or GPUs, then dedicated servers),
// and with two sockets each node's host link each way.
class Links {
public:
  Links(const LoweringShape& shape, const Network& net)
      : net_(net), p_(shape.workers()), g_(shape.gpus_per_node), base_(net.nic_per_gpu ? p_ : shape.nodes),
        intra_up_(static_cast<std::size_t>(shape.ranks()), 0.0), intra_down_(intra_up_),
        nic_up_(static_cast<std::size_t>(base_ + net.server_hosts), 0.0), nic_down_(nic_up_),
        host_(net.two_sockets ? static_cast<std::size_t>(2 * shape.nodes) : 0, 0.0) {}

  /// Reserves a transfer of `bytes` from rank a to rank b requested at t.
  Sent transfer(int a, int b, double bytes, double t) {
    if (a == b || bytes <= 0)
      return {t, t};
    const bool same_node = a < p_ && b < p_ && a / g_ == b / g_;
    double& up = same_node ? intra_up_[static_cast<std::size_t>(a)] : nic_up_[endpoint(a)];
    double& down = same_node ? intra_down_[static_cast<std::size_t>(b)] : nic_down_[endpoint(b)];
    const LinkSpec& link = same_node ? net_.intra : net_.inter;
    // between a node's two sockets, the host link that way too (cluster.hpp: Network::host_link)
    const int h = same_node ? net_.host_link(a, b) : -1;
    double* host = h >= 0 ? &host_[static_cast<std::size_t>(h)] : nullptr;
    const double rate = host != nullptr ? std::min(link.bandwidth, net_.host.bandwidth) : link.bandwidth;
    const double end = std::max({t, up, down, host != nullptr ? *host : t}) + bytes / rate;
    up = down = end;
    if (host != nullptr)
      *host = end;
    return {end, end + 2 * link.latency_s + (host != nullptr ? net_.host.latency_s : 0.0)};
  }

private:
  [[nodiscard]] std::size_t endpoint(int rank) const {
    return static_cast<std::size_t>(rank >= p_ ? base_ + rank - p_ : net_.nic_per_gpu ? rank : rank / g_);
  }
  const Network& net_;
  int p_, g_, base_;
  std::vector<double> intra_up_, intra_down_, nic_up_, nic_down_;
  std::vector<double> host_; ///< by node x 2 + direction (two sockets)
};

// The figures over the window, tallied as the events are processed: in time order, so that every update and
// iteration recorded falls before the window's end (the slowest worker's last measured pull), and those after its
// start (every worker warmed up) count. The sums are added in the order the records were once kept and summed in
// afterwards, so the figures are the same; the memory is per worker, not per iteration (#31 R24).
class Tally {
public:
  explicit Tally(std::size_t workers)
      : iterations_(workers, 0), push_s_(workers, 0), pull_s_(workers, 0), pushes_(workers, 0) {}
  void open(double t_start) {
    open_ = true;
    t_start_ = t_start;
  }
  void update(std::size_t w, double t, int staleness, double push_s) {
    if (!counts(t))
      return;
    ++pushes_[w];
    push_s_[w] += push_s;
    ++staleness_[staleness];
    ++updates_;
    staleness_sum_ += staleness;
    staleness_max_ = std::max(staleness_max_, staleness);
  }
  void iteration(std::size_t w, double t, double pull_s) {
    if (!counts(t))
      return;
    iterations_[w] += 1;
    pull_s_[w] += pull_s;
  }
  [[nodiscard]] AsyncPsResult result(double window_s) const;

private:
  [[nodiscard]] bool counts(double t) const { return open_ && t > t_start_; }
  bool open_ = false;
  double t_start_ = 0;
  std::vector<double> iterations_, push_s_, pull_s_;
  std::vector<long> pushes_;
  std::map<int, long> staleness_;
  long updates_ = 0;
  double staleness_sum_ = 0;
  int staleness_max_ = 0;
};

AsyncPsResult Tally::result(double window_s) const {
  AsyncPsResult r;
  r.window_s = window_s;
  r.iterations_per_s = iterations_;
  r.mean_push_s = push_s_;
  r.mean_pull_s = pull_s_;
  r.staleness = staleness_;
  r.staleness_max = staleness_max_;
  for (std::size_t w = 0; w < iterations_.size(); ++w) {
    if (r.iterations_per_s[w] > 0)
      r.mean_pull_s[w] /= r.iterations_per_s[w];
    if (pushes_[w] > 0)
      r.mean_push_s[w] /= static_cast<double>(pushes_[w]);
    r.iterations_per_s[w] = window_s > 0 ? r.iterations_per_s[w] / window_s : 0;
  }
  r.staleness_mean = updates_ > 0 ? staleness_sum_ / static_cast<double>(updates_) : 0;
  return r;
}

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
  Tally tally(n);
  if (in.warmup == 0)
    tally.open(0);
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  // A worker's turn round the servers, starting with its own (w mod S): its k-th server.
  const auto server_of = [&](int w, int k) { return (w + k) % servers; };
  std::vector<double> last(n, 0); // the current push's (or pull's) latest arrival, with the servers' updates
  for (int w = 0; w < p; ++w)
    events.push({in.compute_s[static_cast<std::size_t>(w)], w, computed});
  while (!events.empty() && finished < p) {
    const Event e = events.top();
    events.pop();
    const auto w = static_cast<std::size_t>(e.worker);
    if (e.kind == computed) {
      computed_at[w] = e.t;
      last[w] = e.t;
      events.push({e.t, e.worker, push_shard, 0});
    } else if (e.kind == push_shard || e.kind == pull_shard) {
      const int server = server_of(e.worker, e.shard);
      const auto k = static_cast<std::size_t>(server);
      const bool push = e.kind == push_shard;
      const auto sent = push ? links.transfer(e.worker, in.shape.server_rank(server), in.server_bytes[k], e.t)
                             : links.transfer(in.shape.server_rank(server), e.worker, in.server_bytes[k], e.t);
      const double update = push && !in.server_update_s.empty() ? in.server_update_s[k] : 0.0;
      last[w] = std::max(last[w], sent.arrival + update);
      if (e.shard + 1 < servers)
        events.push({sent.left, e.worker, e.kind, e.shard + 1});
      else
        events.push({last[w], e.worker, push ? applied : pulled});
    } else if (e.kind == applied) {
      applied_at[w] = e.t;
      tally.update(w, e.t, static_cast<int>(versions - read_version[w]), e.t - computed_at[w]);
      ++versions;
      read_version[w] = versions; // the pull reads the parameters with every applied update
      last[w] = e.t;
      events.push({e.t, e.worker, pull_shard, 0});
    } else {
      tally.iteration(w, e.t, e.t - applied_at[w]);
      if (++done[w] == in.warmup && ++warmed == p) {
        t_start = e.t;
        tally.open(t_start);
      }
      if (done[w] == in.warmup + in.measured && ++finished == p)
        t_end = e.t;
      events.push({e.t + in.compute_s[w], e.worker, computed});
    }
  }
  return tally.result(t_end - t_start);
}

} // namespace ddlsim::sim
