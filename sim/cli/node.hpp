// `ddlsim node TOPO.txt [--gpu PRESET]`: what NCCL builds on a node that `nvidia-smi topo -m` describes (issue #34):
// its NVLink rings and their bus bandwidth on the GPU's links, the GPU pairs that stage through host memory, the
// GPUs each NIC reaches with GPUDirect RDMA (sim/spec/node_topology.hpp; docs/engines.md, "A node's topology").
#pragma once

#include "sim/spec/node_topology.hpp"

#include <string>

namespace ddlsim::sim {

/// The report `node` prints: one line per finding. `gpu` is a preset name or empty (then the rings' rate is left out).
[[nodiscard]] std::string node_report(const NodeTopology& node, const std::string& gpu);

/// Reads `path` (exit 2 on bad input, naming its line; an unknown preset names --gpu) and prints node_report.
int node_command(const std::string& path, const std::string& gpu);

} // namespace ddlsim::sim
