// A node's inside as `nvidia-smi topo -m` prints it (issue #34): per GPU pair the path between them (NVLink and its
// link count, or the PCIe path NCCL classifies: PIX, PXB, PHB, NODE, SYS), per NIC its path to each GPU; and what
// NCCL builds on it: the rings over NVLink (their count sets the ring's bus bandwidth), whether two GPUs talk
// peer-to-peer, whether a NIC reads a GPU's memory directly (GPUDirect RDMA).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

/// The path between two devices of a node, nearest first, as nvidia-smi's legend and NCCL's path types
/// (src/graph/topo.h: PATH_NVL, PATH_PIX, PATH_PXB, PATH_PHB, PATH_SYS; nvidia-smi's NODE is NCCL's PHB across
/// host bridges of one NUMA node, its SYS (SOC in old drivers) crosses the SMP interconnect between NUMA nodes).
enum class PathType { nvlink, pix, pxb, phb, node, sys };

struct NodeTopology {
  int gpus = 0;
  std::vector<std::string> nics;                ///< the NICs' names as the header gives them (NIC0, mlx5_0, ...)
  std::vector<std::vector<int>> nvlinks;        ///< [i][j]: NVLinks between GPUs i and j (0: none; NV# in topo -m)
  std::vector<std::vector<PathType>> gpu_paths; ///< [i][j] for i != j
  std::vector<std::vector<PathType>> nic_paths; ///< [nic][gpu]
};

/// Reads `nvidia-smi topo -m` output: the header row of devices (GPU0.., then NICs, then the affinity columns, all
/// tab-separated), one row per device, up to the legend; ANSI escapes (a terminal's underlining) are ignored.
/// Throws InputError(origin, "line N", ...) for a missing header, no GPU, an unknown cell, a row of the wrong length,
/// a matrix that is not symmetric, or more than kMaxNodeGpus GPUs.
[[nodiscard]] NodeTopology parse_nvidia_smi_topo(std::string_view text, const std::string& origin);

/// The most GPUs read from one node (NVIDIA's largest NVLink domain in one chassis is 72).
inline constexpr int kMaxNodeGpus = 72;

/// The rings over NVLink NCCL can run at once on the node, each a directed cycle through every GPU that takes one
/// link in its direction on each of its edges (a link carries one ring each way: full duplex). Every pair joined by
/// the same k links (an NVSwitch: every GPU's k links reach every other) gives k. Otherwise the most directed
/// Hamiltonian cycles packed within the link counts, by exhaustive search (at most 12 GPUs; beyond, 0 rings are
/// claimed). 0 when some pair has no NVLink path of its own and the NVLink graph has no ring through every GPU.
/// A simplification of NCCL's search (src/graph/search.cc), which looks for the same rings by bandwidth; the ring's
/// bus bandwidth is rings x one link's rate.
[[nodiscard]] int nvlink_rings(const NodeTopology& node);

/// The intra-node link NCCL's rings make of the node: nvlink_rings x `link_Bps` (one link's rate and direction), and
/// whether it is an NVSwitch (every pair joined by the same links).
struct RingLink {
  double bandwidth = 0;
  bool nvswitch = false;
};
[[nodiscard]] RingLink ring_link(const NodeTopology& node, double link_Bps);

/// Whether NCCL moves data between GPUs i and j peer-to-peer rather than through host memory: over NVLink, over the
/// NVLinks of a GPU both reach (NCCL's PATH_NVB, on unless NCCL_NVB_DISABLE), or over PCIe up to `level`
/// (NCCL_P2P_LEVEL, PXB on Intel CPUs by default; src/graph/paths.cc, ncclTopoCheckP2p).
[[nodiscard]] bool peer_to_peer(const NodeTopology& node, int i, int j, PathType level = PathType::pxb);

/// Whether NIC `nic` reads and writes GPU `gpu`'s memory directly (GPUDirect RDMA) instead of staging through host
/// memory: its path at most `level` (NCCL_NET_GDR_LEVEL, PXB by default, src/graph/paths.cc ncclTopoCheckGdr).
[[nodiscard]] bool gpudirect_rdma(const NodeTopology& node, int nic, int gpu, PathType level = PathType::pxb);

} // namespace ddlsim::sim
