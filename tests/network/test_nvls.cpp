// The NVLS allreduce (sim/network/lowering/allreduce_nvls.cpp): its closed form against a hand computation from
// NCCL's constants and against its aggregated lowering timed phase by phase (contention free, 1e-9), on one node and
// across nodes (pipelined: the slower of the node's switch and the network sets the pace), and the link traffic of
// NVLS against a ring's.
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinRel;

namespace {

double closed_form(const Network& net, double bytes) {
  return find_lowering(Collective::allreduce, "nvls")->closed_form(net)->cost(bytes).time_s;
}

double lowered(const Network& net, double bytes, Granularity granularity) {
  return phase_synchronous_time(
      lower(Collective::allreduce, "nvls", {net.nodes, net.gpus_per_node}, bytes, granularity), net);
}

} // namespace

TEST_CASE("lowering::nvls on one node: 25 us + a + n(1 + 1/g) / (0.85 x 15/16 x B)", "[lowering][nvls]") {
  const double bytes = GENERATE(0.0, 4096.0, 64.0 * 1048576, 17179869184.0);
  const int g = GENERATE(2, 4, 8);
  CAPTURE(bytes, g);
  const Network net{1, g, {370.8e9, 1.7e-6}, {}};
  const double expected = 25e-6 + 2 * 1.7e-6 + (1 + 1.0 / g) * bytes / (0.85 * 15 / 16 * 370.8e9);
  CHECK_THAT(closed_form(net, bytes), WithinRel(expected, 1e-12));
  for (const auto granularity : {Granularity::aggregated, Granularity::per_message})
    CHECK_THAT(lowered(net, bytes, granularity), WithinRel(expected, 1e-9));
  // each GPU link carries n(1 + 1/g) each way where a ring carries 2(g-1)/g n: less from g = 2 on (3n/2 against n
  // at g = 2 is more; NVLS wins from g = 3)
  const double nvls_sent = find_lowering(Collective::allreduce, "nvls")->closed_form(net)->cost(bytes).bytes_sent;
  CHECK_THAT(nvls_sent, WithinRel((1 + 1.0 / g) * bytes, 1e-12));
}

TEST_CASE("lowering::nvls across nodes: the slower of the switch and the inter-node ring of n/g sets the time",
          "[lowering][nvls]") {
  const double bytes = GENERATE(1048576.0, 1073741824.0);
  const int nodes = GENERATE(2, 3, 4, 16);
  const bool nic_per_gpu = GENERATE(false, true);
  CAPTURE(bytes, nodes, nic_per_gpu);
  const int g = 8;
  const LinkSpec nvlink{370.8e9, 1.7e-6}, nic{25e9, 5e-6};
  const Network net{nodes, g, nvlink, nic, nic_per_gpu};
  const double intra = 2 * 1.7e-6 + (1 + 1.0 / g) * bytes / (0.85 * 15 / 16 * 370.8e9);
  // g rings (one per local GPU) share the node's NIC unless every GPU has its own
  const double nic_rate = nic_per_gpu ? 25e9 : 25e9 / g;
  const double inter = 2.0 * (nodes - 1) * 2 * 5e-6 + 2.0 * (nodes - 1) / nodes * bytes / g / nic_rate;
  const double expected = 25e-6 + std::max(intra, inter);
  CHECK_THAT(closed_form(net, bytes), WithinRel(expected, 1e-12));
  CHECK_THAT(lowered(net, bytes, Granularity::aggregated), WithinRel(expected, 1e-9));
  // per message, the inter-node ring's 2(N-1) steps run one after the other, the first beside the switch's flows
  const int steps = 2 * (nodes - 1);
  const double step = 2 * 5e-6 + bytes / g / nodes / nic_rate;
  CHECK_THAT(lowered(net, bytes, Granularity::per_message),
             WithinRel(25e-6 + std::max(intra, step) + (steps - 1) * step, 1e-9));
}
