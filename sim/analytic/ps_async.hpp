// Asynchronous parameter server (ps-async; Li et al., OSDI 2014, Sec. 4 "asynchronous tasks"; MXNet KVStore
// dist_async, where the server applies every push as it arrives): there is no barrier, each worker loops compute ->
// push -> (server applies) -> pull on its own. A deterministic discrete-event simulation of p workers and S servers
// whose only shared resources are the links:
//
// - Every transfer goes from one rank to another over the source's up-link and the destination's down-link (its NIC
//   for ranks on different nodes, its GPU link inside a node); each link direction is a FIFO queue that serves one
//   transfer at a time at full bandwidth: a transfer of b bytes requested at t starts at s = max(t, both links
//   free), holds both until s + b/B and arrives at s + b/B + 2 latency. Requests are served in time order (then
//   worker).
// - A push sends worker w's shard of server s (server_bytes[s]) to every server, one shard after the other: the next
//   is requested when the previous has left the worker's link, starting with server w mod S (its own when
//   co-located) and going round. ps-lite sends to all servers at once and the NIC shares itself among them; taking
//   turns in this order keeps workers that push together off the same server, so that every link is busy as long as
//   fair sharing keeps it busy (with all p workers sending first to server 0, the FIFO queues would convoy: on
//   ResNet-50 over 10 GbE with 16 co-located servers the exchange took 4x the NICs' time). The server applies a
//   shard when it has arrived (taking server_update_s[s]), and the update counts as applied when its last shard has
//   been (a global version counter). The worker then requests the shards back in the same order, one after the
//   other (the pull reads the parameters at that instant), and starts its next iteration's compute when the last has
//   arrived.
// - Staleness of an update (Ho et al., "More Effective Distributed ML via a Stale Synchronous Parallel Parameter
//   Server", NIPS 2013; Dutta et al., AISTATS 2018): the number of other workers' updates applied between the pull
//   that read the parameters the gradient was computed on and the application of this push.
// - Each worker runs `warmup` iterations first; the figures are taken over the window from the moment every worker
//   has finished its warm-up to the moment the slowest has finished `measured` more.
#pragma once

#include "sim/network/collectives.hpp"
#include "sim/network/lowering/lowering.hpp"
#include "sim/spec/limits.hpp"

#include <map>
#include <vector>

namespace ddlsim::sim {

struct AsyncPsInput {
  LoweringShape shape;                 ///< workers, servers and their placement
  Network net;                         ///< links (dedicated servers: net.server_hosts)
  std::vector<double> compute_s;       ///< per worker: one iteration's compute before the push
  std::vector<double> server_bytes;    ///< per server: bytes of its shards in one worker's push (and pull)
  std::vector<double> server_update_s; ///< per server: applying one push to its shards (empty: instant)
  int warmup = kAsyncPsWarmup;
  int measured = kAsyncPsMeasured;
};

struct AsyncPsResult {
  std::vector<double> iterations_per_s; ///< per worker, over the window
  std::vector<double> mean_push_s;      ///< per worker: from the end of compute to the update's application
  std::vector<double> mean_pull_s;      ///< per worker: from the application to the last pulled shard
  std::map<int, long> staleness;        ///< staleness -> updates, over the window
  double staleness_mean = 0;
  int staleness_max = 0;
  double window_s = 0;
};

[[nodiscard]] AsyncPsResult simulate_ps_async(const AsyncPsInput& in);

} // namespace ddlsim::sim
