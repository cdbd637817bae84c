// A star cluster for tests that build one by hand: nodes of GPUs with the given GPU and NIC links, NICs per node or
// per GPU, and dedicated parameter-server hosts.
#pragma once

#include "sim/network/cluster.hpp"

namespace ddlsim::test {

inline sim::ClusterSpec star_cluster(int nodes, int gpus, sim::LinkSpec intra, sim::LinkSpec inter,
                                     bool nic_per_gpu = false, int server_hosts = 0) {
  sim::ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.intra = intra;
  c.inter = inter;
  c.nic_per_gpu = nic_per_gpu;
  c.server_hosts = server_hosts;
  return c;
}

} // namespace ddlsim::test
