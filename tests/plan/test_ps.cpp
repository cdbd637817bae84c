// Parameter-server strategies on the analytic engine (dag/strategies/ps.cpp, sim/network/lowering/ps_*_sharded.cpp,
// sim/analytic/ps_async.hpp): MXNet's key placement, push and pull against their closed forms on an alpha-beta star,
// the servers' NICs as the bottleneck that more servers relieve, ps-sync's steady-state period against its bounds,
// ps-async's staleness and throughput on cases computed by hand, ps-ssp's replay (ps-sync with equal workers at any
// bound, lockstep at the slowest pace, ps-async's rates when the bound never binds, staleness by hand), the summary,
// and bad input.
#include "dag/strategy.hpp"
#include "sim/analytic/ps_async.hpp"
#include "sim/cli/run.hpp"
#include "sim/plan/compute.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {

// Two layers of 4 M and 250 k fp32 parameters (16 MB and 1 MB), single-GPU nodes on a 10 Gb/s star.
Json two_layers_ps(int nodes, const std::string& kind) {
  Json doc = Json::parse(R"({"name": "ps",
    "model": {"layers": [{"name": "big", "params": 4000000, "fwd_flops": "40 GFLOP"},
                         {"name": "small", "params": 250000, "fwd_flops": "20 GFLOP"}], "batch_per_gpu": 16},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {}})");
  doc["cluster"]["nodes"] = nodes;
  doc["strategy"]["kind"] = kind;
  return doc;
}

std::vector<const dag::Task*> tasks_of_collective(const RunResult& r, dag::Collective c, int iteration = 0) {
  std::vector<const dag::Task*> out;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (dag::collective_of(r.graph.task(v)) == c && r.graph.task(v).iteration == iteration)
      out.push_back(&r.graph.task(v));
  return out;
}

const double B = 1.25e9, a = 2 * 25e-6; // 10 Gb/s; a message crosses two NIC links

} // namespace

TEST_CASE("sim::parameter-server keys are placed as MXNet's KVStore places them", "[dag][ps]") {
  // kvstore_dist.h EncodeDefaultKey: below the bound, server (key x 9973) mod S; from the bound on, all servers.
  CHECK(dag::shard_key(3, 999999, 4, 1000000).first == 3 * 9973 % 4);
  CHECK(dag::shard_key(3, 999999, 4, 1000000).count == 1);
  CHECK(dag::shard_key(3, 1000000, 4, 1000000).first == 0);
  CHECK(dag::shard_key(3, 1000000, 4, 1000000).count == 4);
  CHECK(dag::shard_key(7, 10, 1, 1000000).first == 0);
  const auto s = parse_scenario(two_layers_ps(4, "ps-sync"), "ps.json");
  const auto r = run_scenario(s);
  REQUIRE(r.groups.size() == 2);
  // Gradient-ready order: tensor 1 (small, key 1) first, to server 9973 mod 4 = 1; then tensor 0 split over 4.
  CHECK(dag::shard_first_of(r.groups[0]) == 1);
  CHECK(dag::shard_count_of(r.groups[0]) == 1);
  CHECK(dag::shard_first_of(r.groups[1]) == 0);
  CHECK(dag::shard_count_of(r.groups[1]) == 4);
  CHECK(s.strategy.get<dag::ParameterServerOptions>().servers == 4); // one per node by default
}

TEST_CASE("sim::ps push and pull take their closed forms on an alpha-beta star", "[sim][ps]") {
  // Dedicated servers: a worker's NIC sends m over S flows, a server's NIC receives p m / S over p flows:
  //   push = pull = 2 latency + max(m, p m / S) / B for the split key; p m / B for a key on one server.
  // Co-located, one server per single-GPU node (S = p): each NIC sends and receives (p-1) m / p.
  const int p = GENERATE(2, 4, 8, 16);
  const int servers = GENERATE(1, 2, 4);
  CAPTURE(p, servers);
  const double big = 16e6, small = 1e6;
  Json doc = two_layers_ps(p, "ps-sync");
  doc["strategy"]["servers"] = servers;
  doc["strategy"]["placement"] = "dedicated";
  const auto r = run_scenario(parse_scenario(doc, "ps.json"));
  const auto push = tasks_of_collective(r, dag::Collective::ps_push),
             pull = tasks_of_collective(r, dag::Collective::ps_pull);
  REQUIRE(push.size() == 2);
  REQUIRE(pull.size() == 2);
  CHECK_THAT(push[0]->duration_s, WithinRel(a + p * small / B, 1e-12));
  CHECK_THAT(push[1]->duration_s, WithinRel(a + std::max(big, p * big / servers) / B, 1e-12));
  CHECK_THAT(pull[1]->duration_s, WithinRel(push[1]->duration_s, 1e-12));
  CHECK_THAT(r.communication_bytes_per_worker, WithinRel(big + small, 1e-12));

  Json colocated = two_layers_ps(p, "ps-sync");
  const auto c = run_scenario(parse_scenario(colocated, "ps.json"));
  const auto cpush = tasks_of_collective(c, dag::Collective::ps_push);
  REQUIRE(cpush.size() == 2);
  CHECK_THAT(cpush[1]->duration_s, WithinRel(a + (p - 1.0) / p * big / B, 1e-12));
  CHECK_THAT(cpush[0]->duration_s, WithinRel(a + (p - 1.0) * small / B, 1e-12)); // the server's own worker is local
}

TEST_CASE("sim::the servers' NICs are the bottleneck: push time falls as p/S until it reaches m/B", "[sim][ps]") {
  // 16 workers, dedicated servers: the split key's push takes 2 latency + 16 m / (S B) for S <= 16.
  const double m = 16e6;
  double previous = 0;
  for (int servers : {1, 2, 4, 8, 16, 32}) {
    CAPTURE(servers);
    Json doc = two_layers_ps(16, "ps-sync");
    doc["strategy"]["servers"] = servers;
    doc["strategy"]["placement"] = "dedicated";
    const auto r = run_scenario(parse_scenario(doc, "ps.json"));
    const double t = tasks_of_collective(r, dag::Collective::ps_push)[1]->duration_s;
    CHECK_THAT(t, WithinRel(a + std::max(1.0, 16.0 / servers) * m / B, 1e-12));
    if (servers > 1 && servers <= 16)
      CHECK_THAT(t - a, WithinRel((previous - a) / 2, 1e-12));
    previous = t;
  }
}

TEST_CASE("sim::ps-sync's steady-state period lies between its bounds", "[sim][ps]") {
  // The period is at least the compute of one iteration and at least each stream's work per iteration: a split key
  // holds every lane of the push (pull) stream, a key on one server its server's lane, so the split keys' pushes
  // plus the busiest lane's; and at most all of it (with the servers' updates) back to back.
  const int p = GENERATE(2, 8, 32);
  const bool dedicated = GENERATE(false, true);
  CAPTURE(p, dedicated);
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 64},
    "gpu": {"preset": "V100-PCIe-32GB", "single_gpu_iteration": "252.9 ms"},
    "cluster": {"gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "ps-sync"}})");
  doc["cluster"]["nodes"] = p;
  if (dedicated) {
    doc["strategy"]["placement"] = "dedicated";
    doc["strategy"]["servers"] = 2;
  }
  const auto r = run_scenario(parse_scenario(doc, "ps.json"));
  double compute = 0, push = 0, pull = 0, updates = 0;
  std::map<std::pair<dag::Collective, int>, double> lanes; // lane -1: the split keys
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (t.iteration != 0)
      continue;
    if (t.kind == dag::TaskKind::forward || t.kind == dag::TaskKind::backward || t.kind == dag::TaskKind::h2d)
      compute += t.duration_s;
    if (dag::collective_of(t) == dag::Collective::ps_push)
      push += t.duration_s;
    if (dag::collective_of(t) == dag::Collective::ps_pull)
      pull += t.duration_s;
    if (t.kind == dag::TaskKind::delay)
      updates += t.duration_s;
    if (t.kind == dag::TaskKind::communication)
      lanes[{dag::collective_of(t), t.lane}] += t.duration_s;
  }
  for (auto c : {dag::Collective::ps_push, dag::Collective::ps_pull}) {
    double busiest = 0;
    for (const auto& [key, sum] : lanes)
      if (key.first == c && key.second >= 0)
        busiest = std::max(busiest, sum);
    CHECK(r.iteration_time_s >= (lanes[{c, -1}] + busiest) * (1 - 1e-12));
  }
  CHECK(updates > 0);
  const double period = r.iteration_time_s;
  CHECK(period >= compute * (1 - 1e-12));
  CHECK(period <= (compute + push + pull + updates) * (1 + 1e-12));
  CHECK(period >= r.critical_path_s * (1 - 1e-12));
  const auto& b = r.breakdown;
  CHECK_THAT(b.compute_s + b.compression_s + b.exposed_communication_s + b.idle_s, WithinRel(period, 1e-9));
  REQUIRE(r.parameter_server);
  CHECK(r.parameter_server->iteration_end.size() == static_cast<std::size_t>(kPsSyncIterations));
}

TEST_CASE("sim::ps-sync's period is the per-iteration schedule when communication is negligible", "[sim][ps]") {
  // With a 1000 Tb/s network and no latency every push and pull is instant: the period is forward + backward
  // (no optimizer step on the worker) plus the longer of the next batch's copy and the servers' update of the last
  // key (the first layer's, pulled last). The big layer's key is split over 4 servers: each updates a quarter.
  Json doc = two_layers_ps(4, "ps-sync");
  doc["cluster"]["inter_node"] = {{"bandwidth", "1000 Tbps"}, {"latency", "0 s"}};
  const auto s = parse_scenario(doc, "ps.json");
  const auto r = run_scenario(s);
  double compute = 0, h2d = 0, last_update = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (t.iteration != 0)
      continue;
    if (t.kind == dag::TaskKind::forward || t.kind == dag::TaskKind::backward)
      compute += t.duration_s;
    if (t.kind == dag::TaskKind::h2d)
      h2d = t.duration_s;
    if (t.kind == dag::TaskKind::delay && dag::group_of(t) == 1)
      last_update = t.duration_s;
  }
  const auto alone = dag::build_iteration(s.model, compute_costs(s).worker, {}, false);
  double update = 0;
  for (std::size_t v = 0; v < alone.size(); ++v)
    if (alone.task(v).kind == dag::TaskKind::update)
      update = alone.task(v).duration_s;
  CHECK(update > 0);
  CHECK_THAT(last_update, WithinRel(update * 4e6 / 4.25e6 / 4, 1e-12));
  CHECK_THAT(r.iteration_time_s, WithinRel(compute + std::max(h2d, last_update), 1e-6));
}

TEST_CASE("sim::ps-async on a single server: throughput and staleness by hand", "[sim][ps][async]") {
  // p workers of equal compute C on one dedicated server; each shard is b bytes, tau = b / B, no latency.
  // The server's down-link serves the p pushes one after the other, so a worker's period is max(C + 2 tau, p tau)
  // (compute, its push and its pull; or one turn of the server's queue). Between a worker's pull and its next push
  // every other worker is applied exactly once: staleness p - 1 for every update.
  const int p = 4;
  const double b = 1.25e6, tau = b / B;
  for (double compute : {0.0, 0.5}) {
    CAPTURE(compute);
    AsyncPsInput in;
    in.shape = {p, 1, 1, true};
    in.net = {p, 1, {B, 0}, {B, 0}, false, 1};
    in.compute_s.assign(p, compute);
    in.server_bytes = {b};
    const auto r = simulate_ps_async(in);
    for (int w = 0; w < p; ++w)
      CHECK_THAT(r.iterations_per_s[static_cast<std::size_t>(w)],
                 WithinRel(1 / std::max(compute + 2 * tau, p * tau), 1e-9));
    CHECK(r.staleness == std::map<int, long>{{p - 1, p * 100L}});
    CHECK(r.staleness_max == p - 1);
  }
}

TEST_CASE("sim::ps-async with p co-located servers: the workers take turns round the servers, no queue convoys",
          "[sim][ps][async]") {
  // p single-GPU nodes, a server on each, equal shards of b bytes (tau = b/B), latency a per NIC link, compute C.
  // Worker w sends its own server's shard first (no network), then servers w+1, w+2, ... mod p, one after the other:
  // at every step the p workers send to p different servers, so the push is applied at C + (p-1) tau + 2a and the
  // pull, taken round the same way, arrives (p-1) tau + 2a later: the period is C + 2 (p-1) tau + 4a for every worker
  // (the NICs' time, as fair sharing gives it). Every worker is applied once between another's pull and its push:
  // staleness p - 1.
  const double b = 2.5e6, tau = b / B, lat = 25e-6, compute = 0.1;
  for (int p : {2, 4, 16}) {
    CAPTURE(p);
    AsyncPsInput in;
    in.shape = {p, 1, p, false};
    in.net = {p, 1, {B, 0}, {B, lat}, false, 0};
    in.compute_s.assign(static_cast<std::size_t>(p), compute);
    in.server_bytes.assign(static_cast<std::size_t>(p), b);
    const auto r = simulate_ps_async(in);
    for (int w = 0; w < p; ++w)
      CHECK_THAT(r.iterations_per_s[static_cast<std::size_t>(w)],
                 WithinRel(1 / (compute + 2 * (p - 1) * tau + 4 * lat), 1e-9));
    CHECK(r.staleness_max == p - 1);
  }
}

TEST_CASE("sim::ps-async across a node's two sockets: the host link's rate and latency", "[sim][ps][async][sockets]") {
  // One node of 2 GPUs, the server on GPU 0 (socket 0), GPU 1 behind socket 1: worker 1 pushes and pulls its shard of
  // b bytes over its GPU link, the host link and GPU 0's link, at the slower of 12 and 10 GB/s, paying 2 a_i + a_h
  // each way: its period is C + 2 (b / min(B_i, B_h) + 2 a_i + a_h).
  const double b = 25e6, compute = 0.01, Bi = 12e9, Bh = 10e9, ai = 1e-6, ah = 2e-6;
  AsyncPsInput in;
  in.shape = {1, 2, 1, false};
  in.net = {1, 2, {Bi, ai}, {}, false, 0, true, {Bh, ah}};
  in.compute_s.assign(2, compute);
  in.server_bytes = {b};
  const auto r = simulate_ps_async(in);
  CHECK_THAT(r.iterations_per_s[1], WithinRel(1 / (compute + 2 * (b / Bh + 2 * ai + ah)), 1e-9));
  in.net.two_sockets = false; // one switch: the GPU links alone
  CHECK_THAT(simulate_ps_async(in).iterations_per_s[1], WithinRel(1 / (compute + 2 * (b / Bi + 2 * ai)), 1e-9));
}

TEST_CASE("sim::ps-async with a worker twice as slow: staleness 0, 1 for the fast one, 2 for the slow one",
          "[sim][ps][async]") {
  // Two workers, compute C and 2C, instant communication. The fast one applies at C, 2C, 3C, ...; the slow one at
  // 2C, 4C, ..., after the fast one (ties go to the lower worker). The fast one's update at an odd multiple of C
  // follows the slow one's (staleness 1), at an even multiple nothing (0); the slow one's always follows two of
  // the fast one's (2). Window: from 20C (the slow worker's 10th iteration) to 220C (its 110th): the fast one
  // applies 200 times (100 odd, 100 even), the slow one 100 times.
  const double c = 0.25;
  AsyncPsInput in;
  in.shape = {2, 1, 1, true};
  in.net = {2, 1, {B, 0}, {B, 0}, false, 1};
  in.compute_s = {c, 2 * c};
  in.server_bytes = {0.0};
  const auto r = simulate_ps_async(in);
  CHECK(r.staleness == std::map<int, long>{{0, 100}, {1, 100}, {2, 100}});
  CHECK_THAT(r.staleness_mean, WithinRel(1.0, 1e-12));
  CHECK(r.staleness_max == 2);
  CHECK_THAT(r.window_s, WithinRel(200 * c, 1e-12));
  CHECK_THAT(r.iterations_per_s[0], WithinRel(1 / c, 1e-12));
  CHECK_THAT(r.iterations_per_s[1], WithinRel(1 / (2 * c), 1e-12));
}

TEST_CASE("sim::ps-async reports per-worker throughput and staleness, and the spread slows the later workers",
          "[sim][ps][async][report]") {
  Json doc = two_layers_ps(4, "ps-async");
  doc["strategy"]["worker_speed_spread"] = 1.0;
  const auto s = parse_scenario(doc, "ps.json");
  const auto r = run_scenario(s);
  REQUIRE(r.parameter_server);
  REQUIRE(r.parameter_server->async);
  const auto& ps = *r.parameter_server->async;
  REQUIRE(ps.worker_throughput_samples_per_s.size() == 4);
  CHECK(ps.worker_compute_s[3] == 2 * ps.worker_compute_s[0]);
  for (std::size_t w = 1; w < 4; ++w)
    CHECK(ps.worker_throughput_samples_per_s[w] < ps.worker_throughput_samples_per_s[w - 1]);
  double total = 0;
  for (double t : ps.worker_throughput_samples_per_s)
    total += t;
  CHECK_THAT(ps.aggregate_throughput_samples_per_s, WithinRel(total, 1e-12));
  CHECK_THAT(r.throughput_samples_per_s, WithinRel(total, 1e-12));
  const auto j = summary_json(s, r);
  REQUIRE(j.contains("parameter_server"));
  const auto& o = j["parameter_server"];
  CHECK(o["mode"] == "async");
  CHECK(o["servers"] == 4);
  CHECK(o["placement"] == "colocated");
  CHECK(o["staleness"]["histogram"].size() > 1); // heterogeneous workers: not one value
  CHECK(o["worker_throughput_samples_per_s"].size() == 4);
  long updates = 0;
  for (const auto& [k, v] : o["staleness"]["histogram"].items())
    updates += v.get<long>();
  CHECK(updates > 4 * 100);
  CHECK_FALSE(summary_json(parse_scenario(two_layers_ps(4, "wfbp"), "w.json"),
                           run_scenario(parse_scenario(two_layers_ps(4, "wfbp"), "w.json")))
                  .contains("parameter_server"));
}

namespace {
// The two-layer model with calibrated layer times (18 ms of forward and backward, no optimizer, no host launches) on
// a 1000 Tb/s star without latency: communication takes a fraction of a microsecond.
Json instant_two_layers(int p, const std::string& kind) {
  Json doc = two_layers_ps(p, kind);
  doc["cluster"]["inter_node"] = {{"bandwidth", "1000 Tbps"}, {"latency", "0 s"}};
  doc["gpu"] = Json::parse(R"({"calibration": {"batch_per_gpu": 16,
      "layers": {"big": {"forward": "4 ms", "backward": "8 ms"}, "small": {"forward": "2 ms", "backward": "4 ms"}}}})");
  doc["host"] = {{"launch", "0 s"}};
  return doc;
}
} // namespace

TEST_CASE("sim::ps-ssp with two workers, one twice as slow: lockstep at any bound, ps-async's rates when it never "
          "binds, staleness by hand",
          "[sim][ps][ssp]") {
  // Worker 0 takes C = 18 ms an iteration, worker 1 (spread 1) 2C; communication is instant. With bound s the fast
  // worker runs ahead until a pull of its waits for the slow one's push of s iterations back, and from then on both go
  // at the slow one's pace (the warm-up of 10 + 50 s iterations lets it get there: it gains half an iteration per
  // iteration). A bound it never reaches leaves both at their own pace: ps-async's 1/C and 1/(2C).
  // Staleness with s = 0, from B_i, the end of the slow worker's iteration i: both start iteration i + 1 at B_i; the
  // fast one pushes the small layer's key at B_i + 10 ms and the big one's at B_i + 18 ms, the slow one at
  // B_i + 20 ms and B_i + 36 ms = B_(i+1). A pull reads once both pushes of its key are applied (the slow one's), so
  // the fast one's update follows no other (staleness 0) and the slow one's follows the fast one's (1), per key. The
  // window runs from B_(W-1) to the fast worker's last end, B_(I-2) + 18 ms; a push is applied 8 ns (small key) or
  // 64 ns (big key) after its backward ends, so the window holds the fast one's small-key updates of iterations W ..
  // I-1 and big-key ones of W .. I-2, and the slow one's small-key ones of W .. I-2 and big-key ones of W-1 .. I-2: 2
  // (I - W) - 1 updates of staleness 0 and as many of 1.
  const double c = 0.018;
  Json doc = instant_two_layers(2, "ps-ssp");
  doc["strategy"]["worker_speed_spread"] = 1.0;
  double lockstep = 0;
  for (int bound : {0, 1, 2, 4, 8}) {
    CAPTURE(bound);
    doc["strategy"]["staleness_bound"] = bound;
    const auto r = run_scenario(parse_scenario(doc, "ssp.json"));
    const auto& ps = *r.parameter_server->async;
    CHECK(ps.clock_lead_max == bound);
    CHECK(ps.staleness_max <= 1 + bound);
    for (double rate : ps.worker_throughput_samples_per_s)
      CHECK_THAT(rate, WithinRel(16 / (2 * c), 1e-4));
    if (bound == 0) {
      lockstep = r.iteration_time_s;
      const long each = 2L * (ps.iterations_simulated - ps.warmup_iterations) - 1;
      CHECK(ps.staleness_histogram == std::map<int, long>{{0, each}, {1, each}});
    }
    CHECK_THAT(r.iteration_time_s, WithinRel(lockstep, 1e-9));
  }
  doc["strategy"]["staleness_bound"] = 1000;
  const auto free = run_scenario(parse_scenario(doc, "ssp.json"));
  const auto& ps = *free.parameter_server->async;
  CHECK(ps.clock_lead_max < 1000);
  CHECK(ps.clock_lead_max > 8);
  CHECK_THAT(ps.worker_throughput_samples_per_s[0], WithinRel(16 / c, 1e-4));
  CHECK_THAT(ps.worker_throughput_samples_per_s[1], WithinRel(16 / (2 * c), 1e-4));
  Json async = instant_two_layers(2, "ps-async");
  async["strategy"]["worker_speed_spread"] = 1.0;
  CHECK_THAT(free.throughput_samples_per_s,
             WithinRel(run_scenario(parse_scenario(async, "a.json")).throughput_samples_per_s, 1e-4));
  // with communication that little of backward hides (the two-layer model on 4 workers over 10 Gb/s, 50 % spread),
  // the free-running workers come within 1 % of ps-async's whole-gradient loop (371.6 ms and 373.3 ms)
  Json slow = two_layers_ps(4, "ps-ssp");
  slow["strategy"]["worker_speed_spread"] = 0.5;
  slow["strategy"]["staleness_bound"] = 1000000;
  Json slow_async = two_layers_ps(4, "ps-async");
  slow_async["strategy"]["worker_speed_spread"] = 0.5;
  CHECK_THAT(run_scenario(parse_scenario(slow, "s.json")).iteration_time_s,
             WithinRel(run_scenario(parse_scenario(slow_async, "a.json")).iteration_time_s, 0.01));
}

TEST_CASE("sim::ps-ssp with equal workers is ps-sync, communication included, at any bound", "[sim][ps][ssp]") {
  // On the 10 Gb/s star the 17 MB of pushes and pulls take ~27 ms an iteration, partly behind backward and forward.
  // Equal workers stay in lockstep whatever the bound: each pull waits for its own push and ps-sync's durations.
  for (int p : {2, 4}) {
    CAPTURE(p);
    const auto sync = run_scenario(parse_scenario(two_layers_ps(p, "ps-sync"), "ps.json"));
    for (int bound : {0, 3}) {
      CAPTURE(bound);
      Json doc = two_layers_ps(p, "ps-ssp");
      doc["strategy"]["staleness_bound"] = bound;
      const auto ssp = run_scenario(parse_scenario(doc, "ps.json"));
      CHECK_THAT(ssp.iteration_time_s, WithinRel(sync.iteration_time_s, 1e-9));
      CHECK_THAT(ssp.throughput_samples_per_s, WithinRel(sync.throughput_samples_per_s, 1e-9));
      CHECK(ssp.parameter_server->async->clock_lead_max == 0);
    }
    CHECK(sync.iteration_time_s > 1.01 * sync.single_gpu_iteration_s); // communication shows
  }
}

TEST_CASE("sim::ps-ssp runs as a strategy and reports its bound", "[sim][ps][ssp][report]") {
  Json doc = two_layers_ps(4, "ps-ssp");
  doc["strategy"]["worker_speed_spread"] = 1.0;
  doc["strategy"]["staleness_bound"] = 2;
  const auto s = parse_scenario(doc, "ps.json");
  const auto r = run_scenario(s);
  const auto j = summary_json(s, r);
  CHECK(j["parameter_server"]["stale_synchronous"]["staleness_bound"] == 2);
  CHECK(j["parameter_server"]["stale_synchronous"]["max_lead"].get<int>() <= 2);
  CHECK(j["parameter_server"]["stale_synchronous"]["max_lead"].get<int>() == 2); // the spread makes the bound bite
  CHECK(j["parameter_server"]["mode"] == "async");
  CHECK(j["parameter_server"]["worker_throughput_samples_per_s"].size() == 4);
  // persistent speed differences: in the long run every worker goes at the slowest one's pace, as without staleness;
  // asynchronous workers do not wait
  Json async = two_layers_ps(4, "ps-async");
  async["strategy"]["worker_speed_spread"] = 1.0;
  Json sync = doc;
  sync["strategy"]["staleness_bound"] = 0;
  const auto ra = run_scenario(parse_scenario(async, "a.json"));
  const auto r0 = run_scenario(parse_scenario(sync, "s.json"));
  CHECK_THAT(r.throughput_samples_per_s, WithinRel(r0.throughput_samples_per_s, 1e-6));
  CHECK(r.throughput_samples_per_s < 0.8 * ra.throughput_samples_per_s);
  // the bound is required, an integer >= 0, and belongs to ps-ssp
  doc["strategy"].erase("staleness_bound");
  CHECK_THROWS_WITH(parse_scenario(doc, "ps.json"), Contains("/strategy/staleness_bound"));
  doc["strategy"]["staleness_bound"] = -1;
  CHECK_THROWS_WITH(parse_scenario(doc, "ps.json"), Contains("/strategy/staleness_bound"));
  async["strategy"]["staleness_bound"] = 2;
  CHECK_THROWS_WITH(parse_scenario(async, "ps.json"), Contains("applies to strategy kind 'ps-ssp'"));
}

TEST_CASE("sim::parameter-server keys are checked and belong to the ps strategies", "[sim][ps][errors]") {
  const auto error = [](Json doc) -> std::pair<std::string, std::string> {
    try {
      (void)parse_scenario(doc, "bad.json");
    } catch (const InputError& e) {
      CHECK(e.file() == "bad.json");
      return {e.pointer(), e.detail()};
    }
    FAIL("accepted bad parameter-server input");
    return {};
  };
  Json doc = two_layers_ps(4, "ps-sync");
  doc["strategy"]["servers"] = 0;
  CHECK(error(doc).first == "/strategy/servers");
  doc["strategy"]["servers"] = "two";
  CHECK(error(doc).first == "/strategy/servers");
  doc["strategy"].erase("servers");
  doc["strategy"]["placement"] = "remote";
  CHECK(error(doc).first == "/strategy/placement");
  doc["strategy"].erase("placement");
  doc["strategy"]["worker_speed_spread"] = 0.5;
  auto [pointer, detail] = error(doc);
  CHECK(pointer == "/strategy/worker_speed_spread");
  CHECK_THAT(detail, Contains("ps-async"));
  Json other = two_layers_ps(4, "wfbp");
  other["strategy"]["servers"] = 2;
  std::tie(pointer, detail) = error(other);
  CHECK(pointer == "/strategy/servers");
  CHECK_THAT(detail, Contains("'ps-sync', 'ps-async', 'ps-ssp', 'bytescheduler', not 'wfbp'"));
  Json async = two_layers_ps(4, "ps-async");
  async["strategy"]["worker_speed_spread"] = -1;
  CHECK(error(async).first == "/strategy/worker_speed_spread");
  Json tree = two_layers_ps(4, "ps-sync");
  tree["strategy"]["placement"] = "dedicated";
  tree["cluster"]["topology"] = {{"kind", "ring"}, {"link", {{"bandwidth", "10 Gbps"}, {"latency", "1 us"}}}};
  std::tie(pointer, detail) = error(tree);
  CHECK(pointer == "/strategy/placement");
  CHECK_THAT(detail, Contains("star"));
}

TEST_CASE("sim::schedule runs the lanes of a resource concurrently, a lane -1 task after all of them",
          "[sim][ps][schedule]") {
  // All ready at 0, taken in id order: lanes 0 and 1 start together (1 s and 2 s); the lane -1 task waits for
  // both (2 s to 2.5 s); the next lane 0 task waits for it (2.5 s to 3.5 s); a lane -1 task after it starts then.
  dag::IterationGraph g;
  const auto add = [&g](int lane, double d) {
    return g.add(
        {.kind = dag::TaskKind::communication, .resource = dag::Resource::comm, .duration_s = d, .lane = lane});
  };
  const auto a = add(0, 1.0), b = add(1, 2.0), all = add(-1, 0.5), c = add(0, 1.0), all2 = add(-1, 0.25);
  g.depend(c, all2);
  const auto t = schedule(g);
  CHECK(t[a].start_s == 0.0);
  CHECK(t[b].start_s == 0.0);
  CHECK(t[all].start_s == 2.0);
  CHECK(t[c].start_s == 2.5);
  CHECK(t[all2].start_s == 3.5);
}

TEST_CASE("sim::BytePS mode: nodes push once, one node uses no network, each NIC carries 2(N-1)/N m per iteration",
          "[sim][ps][byteps]") {
  // The two-layer model (4.25 M fp32 parameters, m = 17 MB) on N nodes of 2 GPUs, one co-located server per node.
  const auto doc = [](int nodes) {
    Json d = two_layers_ps(nodes, "ps-sync");
    d["cluster"]["gpus_per_node"] = 2;
    d["cluster"]["intra_node"] = {{"bandwidth", "100 GB/s"}, {"latency", "1 us"}};
    d["strategy"]["mode"] = "byteps";
    return d;
  };
  const double m = 4250000.0 * 4;
  SECTION("partitions of 4,096,000 B round-robin over the servers; the servers' summation is costed") {
    const auto s = parse_scenario(doc(3), "b.json");
    const auto& o = s.strategy.get<dag::ParameterServerOptions>();
    CHECK(o.byteps);
    CHECK(o.partition_bytes == 4096000);
    CHECK(o.server_sum_bandwidth == 15e9);
    const auto r = run_scenario(s);
    // in the order they are ready: 1 MB (the last layer's) whole, then 16 MB as 3 partitions of 4,096,000 B and one
    // of 3,712,000 B: 5 keys on servers 0, 1, 2, 0, 1
    REQUIRE(r.groups.size() == 5);
    double total = 0;
    for (std::size_t i = 0; i < r.groups.size(); ++i) {
      CHECK(dag::shard_first_of(r.groups[i]) == static_cast<int>(i % 3));
      CHECK(dag::shard_count_of(r.groups[i]) == 1);
      CHECK_THAT(dag::server_s_of(r.groups[i]), WithinRel(3 * r.groups[i].bytes / 15e9, 1e-12));
      total += r.groups[i].bytes;
    }
    CHECK_THAT(total, WithinRel(m, 1e-12));
    CHECK(r.groups[0].bytes == 1e6);
    CHECK(r.groups[1].bytes == 4096000);
    CHECK(r.groups[4].bytes == 16e6 - 3 * 4096000);
  }
  SECTION("one node: no server traffic") {
    const auto r = run_scenario(parse_scenario(doc(1), "b.json"));
    REQUIRE(r.parameter_server);
    CHECK(r.parameter_server->server_bytes_received == 0);
  }
  SECTION("flow engine, 3 nodes: the NICs carry 2(N-1)/N m per iteration on average, m + (N-2) x own share each") {
    // (one flow-engine run per process: SimGrid's engine is a singleton; the lowering tests cover other N)
    {
      const int nodes = 3;
      Json d = doc(nodes);
      d["engine"] = "flow";
      const auto s = parse_scenario(d, "b.json");
      const auto r = run_scenario(s);
      // per node: the keys of other nodes' servers pushed, its own server's keys pulled by the N-1 others
      std::vector<double> own(static_cast<std::size_t>(nodes), 0.0);
      for (const auto& g : r.groups)
        own[static_cast<std::size_t>(dag::shard_first_of(g))] += g.bytes;
      double sum = 0;
      int nics = 0;
      for (const auto& l : r.links)
        if (l.role == "nic" && l.name.ends_with("_UP")) {
          const int node = std::stoi(l.name.substr(4));
          const double per_iteration = l.bytes / r.parameter_server->iterations_simulated;
          CHECK_THAT(per_iteration, WithinRel(m + (nodes - 2) * own[static_cast<std::size_t>(node)], 1e-9));
          sum += per_iteration;
          ++nics;
        }
      REQUIRE(nics == nodes);
      CHECK_THAT(sum / nodes, WithinRel(2.0 * (nodes - 1) / nodes * m, 1e-9));
    }
  }
  SECTION("its keys are checked") {
    Json bad = doc(2);
    bad["strategy"]["mode"] = "horovod";
    CHECK_THROWS_WITH(parse_scenario(bad, "b.json"), Contains("/strategy/mode"));
    Json kv = two_layers_ps(2, "ps-sync");
    kv["strategy"]["partition_bytes"] = "1 MB";
    CHECK_THROWS_WITH(parse_scenario(kv, "b.json"), Contains("/strategy/partition_bytes") && Contains("byteps"));
    Json bound = doc(2);
    bound["strategy"]["bigarray_bound"] = 1000;
    CHECK_THROWS_WITH(parse_scenario(bound, "b.json"), Contains("/strategy/bigarray_bound"));
    Json async = doc(2);
    async["strategy"]["kind"] = "ps-async";
    CHECK_THROWS_WITH(parse_scenario(async, "b.json"), Contains("/strategy/mode"));
  }
}
