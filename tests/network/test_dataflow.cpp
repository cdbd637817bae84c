// Data-flow correctness of the per-message lowerings (sim/network/lowering), checked by invariants that do not re-run
// the algorithms: bytes each rank sends or receives (Thakur, Rabenseifner, Gropp, IJHPCA 2005; Patarasuk & Yuan, JPDC
// 2009), the step structure of rings and halving-doubling, and a symbolic execution that propagates what every rank
// holds along the flows, phase by phase.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <set>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

/// Which ranks' contributions a rank (or one chunk at a rank) holds: a bit set over the p ranks.
class Set {
public:
  explicit Set(std::size_t p) : words_((p + 63) / 64, 0), size_(p) {}
  [[nodiscard]] bool test(std::size_t r) const { return (words_[r / 64] >> (r % 64) & 1U) != 0; }
  void set(std::size_t r) { words_[r / 64] |= std::uint64_t{1} << (r % 64); }
  void merge(const Set& other) {
    for (std::size_t i = 0; i < words_.size(); ++i)
      words_[i] |= other.words_[i];
  }
  [[nodiscard]] bool full() const {
    for (std::size_t r = 0; r < size_; ++r)
      if (!test(r))
        return false;
    return true;
  }

private:
  std::vector<std::uint64_t> words_;
  std::size_t size_;
};

bool full(const Set& s) {
  return s.full();
}

/// Whole-buffer propagation: rank r starts with {r} (broadcast: rank 0 with {0}, the others with nothing); a flow
/// merges what its source held at the start of the phase into its destination. Returns what each rank ends with.
std::vector<Set> propagate(const std::vector<Phase>& phases, int p, bool root_only) {
  std::vector<Set> held(static_cast<std::size_t>(p), Set(static_cast<std::size_t>(p)));
  for (int r = 0; r < p; ++r)
    if (!root_only || r == 0)
      held[static_cast<std::size_t>(r)].set(static_cast<std::size_t>(r));
  std::vector<Set> in_flight;
  for (const auto& ph : phases) {
    in_flight.clear();
    for (const auto& f : ph.flows)
      in_flight.push_back(held[static_cast<std::size_t>(f.src)]);
    for (std::size_t i = 0; i < ph.flows.size(); ++i)
      held[static_cast<std::size_t>(ph.flows[i].dst)].merge(in_flight[i]);
  }
  return held;
}

/// Chunk-level execution of a ring whose phases are the lowering's, with the ring's chunk schedule as the spec
/// (Patarasuk & Yuan): the buffer is p chunks. In reduce-scatter step s (the first `reduce_steps` phases) rank r
/// sends chunk (r - s) mod p to r + 1, which adds its own; after p-1 steps rank r holds chunk r + 1 reduced. In
/// allgather step s rank r sends chunk (r + gather_offset - s) mod p, which r + 1 copies (gather_offset 1 after a
/// reduce-scatter, 0 for an allgather where rank r starts with block r). Every flow must be r -> r + 1 mod p
/// carrying one chunk. Returns held[rank][chunk], the contributions the rank holds of that chunk.
std::vector<std::vector<Set>> ring_chunks(const std::vector<Phase>& phases, int p, int reduce_steps, int gather_offset,
                                          double chunk_bytes) {
  const auto P = static_cast<std::size_t>(p);
  std::vector<std::vector<Set>> held(P, std::vector<Set>(P, Set(P)));
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t c = 0; c < P; ++c)
      if (reduce_steps > 0 || c == r) // reducing: a contribution to every chunk; gathering: block r
        held[r][c].set(r);
  int step = 0;
  std::vector<Set> in_flight;
  for (const auto& ph : phases) {
    const bool reducing = step < reduce_steps;
    const int s = reducing ? step : step - reduce_steps;
    const auto chunk = [&](const Flow& f) {
      return static_cast<std::size_t>((((reducing ? f.src - s : f.src + gather_offset - s) % p) + p) % p);
    };
    in_flight.clear(); // what each flow carries: its source's chunk as of the start of the phase
    for (const auto& f : ph.flows) {
      REQUIRE(f.dst == (f.src + 1) % p);
      REQUIRE_THAT(f.bytes, WithinRel(chunk_bytes, 1e-12) || WithinAbs(chunk_bytes, 1e-12));
      in_flight.push_back(held[static_cast<std::size_t>(f.src)][chunk(f)]);
    }
    for (std::size_t i = 0; i < ph.flows.size(); ++i) {
      auto& to = held[static_cast<std::size_t>(ph.flows[i].dst)][chunk(ph.flows[i])];
      if (reducing)
        to.merge(in_flight[i]);
      else
        to = in_flight[i];
    }
    ++step;
  }
  return held;
}

struct Named {
  Collective kind;
  const char* algorithm;
};

} // namespace

TEST_CASE("lowering::every rank sends and receives the algorithm's known byte count", "[lowering][dataflow]") {
  const double n = 12e6;
  // Runs `check(shape, granularity, p, g, nodes)` for every shape and both granularities.
  const auto each = [](auto check) {
    for (const auto& shape : shapes())
      for (auto granularity : {Granularity::per_message, Granularity::aggregated}) {
        CAPTURE(describe(shape), describe(granularity));
        check(shape, granularity, shape.workers(), shape.gpus_per_node, shape.nodes);
      }
  };
  const auto bytes = [n](Collective k, const char* a, const LoweringShape& shape, Granularity granularity) {
    return rank_bytes(lower(k, a, shape, n, granularity), shape.workers());
  };
  SECTION("ring allreduce: 2(p-1)/p n per rank") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      for (double b : bytes(Collective::allreduce, "ring", shape, gr).sent)
        CHECK_THAT(b, WithinRel(2.0 * (p - 1) / p * n, 1e-12) || WithinAbs(0, 0));
    });
  }
  SECTION("halving-doubling: 2(p'-1)/p' n per core rank, n more for paired ones; n for ranks 2i, i < r") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      const auto sent = bytes(Collective::allreduce, "halving-doubling", shape, gr).sent;
      const int core = static_cast<int>(std::bit_floor(static_cast<unsigned>(p))), extra = p - core;
      for (int r = 0; r < p && p > 1; ++r) {
        CAPTURE(r);
        const double expected = r < 2 * extra && r % 2 == 0 ? n
                                : r < 2 * extra             ? 2.0 * (core - 1) / core * n + n
                                                            : 2.0 * (core - 1) / core * n;
        CHECK_THAT(sent[static_cast<std::size_t>(r)], WithinRel(expected, 1e-12));
      }
    });
  }
  SECTION("hierarchical: 2(g-1)/g n inside the node plus 2(N-1)/N n/g across nodes per rank") {
    each([&](const LoweringShape& shape, Granularity gr, int, int g, int nodes) {
      for (double b : bytes(Collective::allreduce, "hierarchical", shape, gr).sent)
        CHECK_THAT(b, WithinRel(2.0 * (g - 1) / g * n + 2.0 * (nodes - 1) / nodes * n / g, 1e-12) || WithinAbs(0, 0));
    });
  }
  SECTION("tree: every edge of both spanning trees carries n/2 each way; no GPU link or NIC carries over 2n") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int g, int nodes) {
      std::vector<double> gpu_out(static_cast<std::size_t>(p)), nic_out(static_cast<std::size_t>(nodes)),
          nic_in(static_cast<std::size_t>(nodes));
      double total = 0;
      for (const auto& ph : lower(Collective::allreduce, "tree", shape, n, gr))
        for (const auto& f : ph.flows) {
          total += f.bytes;
          if (f.src / g == f.dst / g) {
            gpu_out[static_cast<std::size_t>(f.src)] += f.bytes;
          } else {
            nic_out[static_cast<std::size_t>(f.src / g)] += f.bytes;
            nic_in[static_cast<std::size_t>(f.dst / g)] += f.bytes;
          }
        }
      CHECK_THAT(total, WithinRel(2.0 * (p - 1) * n, 1e-12) || WithinAbs(0, 0));
      for (const auto* v : {&gpu_out, &nic_out, &nic_in})
        CHECK(std::all_of(v->begin(), v->end(), [n](double b) { return b <= 2 * n * (1 + 1e-12); }));
    });
  }
  SECTION("ring allgather and reduce-scatter: (p-1)/p n sent and received per rank") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      for (auto kind : {Collective::allgather, Collective::reduce_scatter}) {
        CAPTURE(collective_name(kind));
        const auto b = bytes(kind, "ring", shape, gr);
        for (int r = 0; r < p; ++r) {
          CHECK_THAT(b.sent[static_cast<std::size_t>(r)], WithinRel(1.0 * (p - 1) / p * n, 1e-12) || WithinAbs(0, 0));
          CHECK_THAT(b.received[static_cast<std::size_t>(r)],
                     WithinRel(1.0 * (p - 1) / p * n, 1e-12) || WithinAbs(0, 0));
        }
      }
    });
  }
  SECTION("recursive-doubling allgather: every rank receives the (p-1)/p n it lacks, nothing twice") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      for (double b : bytes(Collective::allgather, "recursive-doubling", shape, gr).received)
        CHECK_THAT(b, WithinRel(1.0 * (p - 1) / p * n, 1e-12) || WithinAbs(0, 0));
    });
  }
  SECTION("broadcasts: every rank but the root receives n, the root nothing") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      for (const char* a : {"ring", "tree"}) {
        CAPTURE(a);
        const auto received = bytes(Collective::broadcast, a, shape, gr).received;
        CHECK(received[0] == 0);
        for (int r = 1; r < p; ++r)
          CHECK_THAT(received[static_cast<std::size_t>(r)], WithinRel(n, 1e-12));
      }
    });
  }
  SECTION("point-to-point: n from rank 0 to rank p-1") {
    each([&](const LoweringShape& shape, Granularity gr, int p, int, int) {
      const auto phases = lower(Collective::point_to_point, "direct", shape, n, gr);
      if (p > 1) {
        REQUIRE(phases.size() == 1);
        REQUIRE(phases[0].flows.size() == 1);
        const auto& f = phases[0].flows[0];
        CHECK(f.src == 0);
        CHECK(f.dst == p - 1);
        CHECK(f.bytes == n);
      }
    });
  }
}

TEST_CASE("lowering::the tree over every NIC: g pairs of trees, each GPU's NIC one pair's share", "[lowering][rails]") {
  // NICs per GPU (rails): pair c's trees enter each node at GPU c (tree 0) and GPU c-1 (tree 1), so NIC c carries
  // tree 0 of pair c and tree 1 of pair c+1, each n/(2g) per edge: the node's inter-node bytes spread evenly over its
  // g NICs (n/g each way on two nodes, 2n/g from four); every GPU link carries 2n(g-1)/g each way.
  const double n = 64.0 * 1048576;
  for (const auto gr : {Granularity::aggregated, Granularity::per_message})
    for (const int nodes : {2, 3, 4, 7}) {
      for (const int g : {2, 4, 8}) {
        CAPTURE(describe(gr), nodes, g);
        const int p = nodes * g;
        std::vector<double> gpu_out(static_cast<std::size_t>(p)), nic_out(static_cast<std::size_t>(p)),
            nic_in(static_cast<std::size_t>(p));
        for (const auto& ph :
             lower(Collective::allreduce, "tree", {.nodes = nodes, .gpus_per_node = g, .rails = true}, n, gr))
          for (const auto& f : ph.flows) {
            if (f.src / g == f.dst / g) {
              gpu_out[static_cast<std::size_t>(f.src)] += f.bytes;
            } else {
              CHECK(f.src % g == f.dst % g); // a tree crosses between the same NIC of both nodes
              nic_out[static_cast<std::size_t>(f.src)] += f.bytes;
              nic_in[static_cast<std::size_t>(f.dst)] += f.bytes;
            }
          }
        const double busiest = nodes == 2 ? n : nodes == 3 ? 1.5 * n : 2 * n;
        for (int m = 0; m < nodes; ++m) {
          double node_out = 0;
          for (int c = 0; c < g; ++c) {
            const auto r = static_cast<std::size_t>(m * g + c);
            CHECK_THAT(nic_out[r], WithinRel(nic_out[static_cast<std::size_t>(m * g)], 1e-12)); // even over NICs
            CHECK_THAT(nic_in[r], WithinRel(nic_out[r], 1e-12));
            CHECK_THAT(gpu_out[r], WithinRel(2.0 * (g - 1) / g * n, 1e-12));
            node_out += nic_out[r];
          }
          CHECK(node_out <= busiest * (1 + 1e-12));
        }
        CHECK_THAT(*std::max_element(nic_out.begin(), nic_out.end()), WithinRel(busiest / g, 1e-12));
      }
    }
}

TEST_CASE("lowering::per-message step structure of rings, halving-doubling and the binomial tree",
          "[lowering][dataflow]") {
  // Runs `check(shape, p)` for every shape of more than one rank.
  const auto each = [](auto check) {
    for (const auto& shape : shapes())
      if (shape.workers() > 1) {
        CAPTURE(describe(shape));
        check(shape, shape.workers());
      }
  };
  SECTION("ring steps: every rank sends once to r+1 and receives once in every phase") {
    each([](const LoweringShape& shape, int p) {
      for (auto [kind, steps] : {std::pair{Collective::allreduce, 2 * (p - 1)}, std::pair{Collective::allgather, p - 1},
                                 std::pair{Collective::reduce_scatter, p - 1}}) {
        CAPTURE(collective_name(kind));
        const auto phases = lower(kind, "ring", shape, 1e6, Granularity::per_message);
        CHECK(phases.size() == static_cast<std::size_t>(steps));
        for (const auto& ph : phases) {
          std::vector<int> sends(static_cast<std::size_t>(p)), receives(static_cast<std::size_t>(p));
          for (const auto& f : ph.flows) {
            CHECK(f.dst == (f.src + 1) % p);
            ++sends[static_cast<std::size_t>(f.src)];
            ++receives[static_cast<std::size_t>(f.dst)];
          }
          CHECK(std::all_of(sends.begin(), sends.end(), [](int c) { return c == 1; }));
          CHECK(std::all_of(receives.begin(), receives.end(), [](int c) { return c == 1; }));
        }
      }
    });
  }
  SECTION("halving-doubling: log2 p' symmetric exchange phases each way, plus one-way pairing phases 2i <-> 2i+1") {
    each([](const LoweringShape& shape, int p) {
      const int core = static_cast<int>(std::bit_floor(static_cast<unsigned>(p))), extra = p - core;
      for (auto granularity : {Granularity::per_message, Granularity::aggregated}) {
        CAPTURE(describe(granularity));
        const auto phases = lower(Collective::allreduce, "halving-doubling", shape, 1e6, granularity);
        int symmetric = 0, pairing = 0;
        for (const auto& ph : phases) {
          std::set<std::tuple<int, int, double>> flows;
          for (const auto& f : ph.flows)
            flows.emplace(f.src, f.dst, f.bytes);
          const bool sym = std::all_of(ph.flows.begin(), ph.flows.end(), [&](const Flow& f) {
            return flows.count({f.dst, f.src, f.bytes}) == 1;
          });
          const bool pairs = std::all_of(ph.flows.begin(), ph.flows.end(), [&](const Flow& f) {
            return std::min(f.src, f.dst) % 2 == 0 && std::max(f.src, f.dst) == std::min(f.src, f.dst) + 1 &&
                   f.src < 2 * extra && f.dst < 2 * extra;
          });
          if (sym) {
            ++symmetric;
            CHECK(ph.flows.size() == static_cast<std::size_t>(core)); // every core rank exchanges
          } else {
            CHECK(pairs);
            CHECK(ph.flows.size() == static_cast<std::size_t>(extra));
            ++pairing;
          }
        }
        const int steps = std::countr_zero(static_cast<unsigned>(core));
        CHECK(symmetric == (granularity == Granularity::per_message ? 2 : 1) * steps);
        CHECK(pairing == (extra > 0 ? 2 : 0));
      }
    });
  }
  SECTION("hierarchical: g-1 intra-node ring steps, 2(N-1) steps of the g rings across nodes, g-1 intra-node steps") {
    each([](const LoweringShape& shape, int p) {
      const int g = shape.gpus_per_node, nodes = shape.nodes;
      const auto phases = lower(Collective::allreduce, "hierarchical", shape, 1e6, Granularity::per_message);
      REQUIRE(phases.size() == static_cast<std::size_t>(2 * (g - 1) + 2 * (nodes - 1)));
      for (std::size_t s = 0; s < phases.size(); ++s) {
        CAPTURE(s);
        const bool inter =
            s >= static_cast<std::size_t>(g - 1) && s < static_cast<std::size_t>(g - 1 + 2 * (nodes - 1));
        REQUIRE(phases[s].flows.size() == static_cast<std::size_t>(p));
        for (int r = 0; r < p; ++r) {
          const auto& f = phases[s].flows[static_cast<std::size_t>(r)];
          const int node = r / g, local = r % g;
          CHECK(f.src == r);
          CHECK(f.dst == (inter ? (node + 1) % nodes * g + local : node * g + (local + 1) % g));
        }
      }
    });
  }
  SECTION("binomial broadcast: ceil(log2 p) phases") {
    each([](const LoweringShape& shape, int p) {
      const auto phases = lower(Collective::broadcast, "tree", shape, 1e6, Granularity::per_message);
      CHECK(phases.size() == static_cast<std::size_t>(std::ceil(std::log2(p))));
    });
  }
}

TEST_CASE("lowering::after a per-message collective every rank holds every contribution", "[lowering][dataflow]") {
  // Whole-buffer propagation (see propagate): allreduce, allgather and gTop-k end with every rank holding all p
  // contributions, a broadcast with every rank holding rank 0's.
  const std::vector<Named> all_to_all{
      {Collective::allreduce, "ring"},  {Collective::allreduce, "halving-doubling"},
      {Collective::allreduce, "tree"},  {Collective::allreduce, "hierarchical"},
      {Collective::allgather, "ring"},  {Collective::allgather, "recursive-doubling"},
      {Collective::global_topk, "tree"}}; // the global top-k depends on every rank's pairs
  for (const auto& shape : shapes())
    for (double bytes : {0.0, 1e6, 64e6}) {
      const int p = shape.workers();
      CAPTURE(describe(shape), bytes);
      for (const auto& [kind, algorithm] : all_to_all) {
        CAPTURE(collective_name(kind), algorithm);
        const auto held = propagate(lower(kind, algorithm, shape, bytes, Granularity::per_message), p, false);
        CHECK(std::all_of(held.begin(), held.end(), full));
      }
      for (const char* algorithm : {"ring", "tree"}) {
        CAPTURE(algorithm);
        const auto held =
            propagate(lower(Collective::broadcast, algorithm, shape, bytes, Granularity::per_message), p, true);
        CHECK(std::all_of(held.begin(), held.end(), [](const Set& s) { return s.test(0); }));
      }
    }
}

TEST_CASE("lowering::ring collectives deliver every chunk under the ring's chunk schedule", "[lowering][dataflow]") {
  const double n = 8e6;
  SECTION("allreduce: every rank ends with every chunk reduced over all ranks") {
    for (const auto& shape : shapes()) {
      const int p = shape.workers();
      CAPTURE(describe(shape));
      const auto phases = lower(Collective::allreduce, "ring", shape, n, Granularity::per_message);
      const auto held = ring_chunks(phases, p, p - 1, 1, n / p);
      for (const auto& rank : held)
        CHECK(std::all_of(rank.begin(), rank.end(), full));
      if (p > 1) {
        // The check can fail: without its last step, the last allgathered chunk is missing somewhere.
        const auto cut = ring_chunks({phases.begin(), phases.end() - 1}, p, p - 1, 1, n / p);
        bool all = true;
        for (const auto& rank : cut)
          all = all && std::all_of(rank.begin(), rank.end(), full);
        CHECK(!all);
      }
    }
  }
  SECTION("reduce-scatter: every rank ends with one chunk reduced over all ranks, a different one each") {
    for (const auto& shape : shapes()) {
      const int p = shape.workers();
      CAPTURE(describe(shape));
      const auto held = ring_chunks(lower(Collective::reduce_scatter, "ring", shape, n, Granularity::per_message), p,
                                    p - 1, 1, n / p);
      std::set<std::size_t> reduced;
      for (const auto& rank : held)
        for (std::size_t c = 0; c < rank.size(); ++c)
          if (full(rank[c]))
            CHECK(reduced.insert(c).second);
      CHECK(reduced.size() == static_cast<std::size_t>(p));
    }
  }
  SECTION("allgather: every rank ends with every rank's block") {
    for (const auto& shape : shapes()) {
      const int p = shape.workers();
      CAPTURE(describe(shape));
      const auto held =
          ring_chunks(lower(Collective::allgather, "ring", shape, n, Granularity::per_message), p, 0, 0, n / p);
      for (std::size_t r = 0; r < held.size(); ++r)
        for (std::size_t c = 0; c < held.size(); ++c)
          CHECK(held[r][c].test(c));
    }
  }
}
