// `ddlsim node` (node.hpp).
#include "sim/cli/node.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "core/units.hpp"
#include "sim/spec/gpus.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <vector>

namespace ddlsim::sim {
namespace {

std::string rings_line(const NodeTopology& node, const GpuPreset* preset) {
  const int rings = nvlink_rings(node);
  if (rings == 0)
    return "  NVLink rings: none (the GPUs' rings run over PCIe)\n";
  if (preset == nullptr || preset->nvlink_link_Bps() <= 0)
    return fmt::format("  NVLink rings: {} (give --gpu for their bus bandwidth)\n", rings);
  return fmt::format("  NVLink rings: {} x {} a link and direction = {} of ring bus bandwidth ({})\n", rings,
                     format_bandwidth(preset->nvlink_link_Bps()), format_bandwidth(rings * preset->nvlink_link_Bps()),
                     preset->name);
}

std::string staged_pairs(const NodeTopology& node) {
  std::vector<std::string> pairs;
  for (int i = 0; i < node.gpus; ++i)
    for (int j = i + 1; j < node.gpus; ++j)
      if (!peer_to_peer(node, i, j))
        pairs.push_back(fmt::format("{}-{}", i, j));
  if (pairs.empty())
    return "  peer-to-peer: every GPU pair (NVLink, NVLink through a GPU, or PCIe up to PXB, NCCL's default level)\n";
  return fmt::format("  through host memory (no NVLink path, PCIe beyond NCCL's default P2P level PXB): GPU pairs {}\n",
                     fmt::join(pairs, ", "));
}

std::string nic_line(const NodeTopology& node, std::size_t nic) {
  std::vector<int> direct, staged;
  for (int g = 0; g < node.gpus; ++g)
    (gpudirect_rdma(node, static_cast<int>(nic), g) ? direct : staged).push_back(g);
  return fmt::format("  {}: GPUDirect RDMA for GPUs {}; through host memory for GPUs {}\n", node.nics[nic],
                     direct.empty() ? "none" : fmt::format("{}", fmt::join(direct, ", ")),
                     staged.empty() ? "none" : fmt::format("{}", fmt::join(staged, ", ")));
}

} // namespace

std::string node_report(const NodeTopology& node, const std::string& gpu) {
  const GpuPreset* preset = gpu.empty() ? nullptr : find_gpu_preset(gpu);
  std::string out = fmt::format("node: {} GPUs, {} NICs\n", node.gpus, node.nics.size());
  out += rings_line(node, preset);
  out += staged_pairs(node);
  for (std::size_t n = 0; n < node.nics.size(); ++n)
    out += nic_line(node, n);
  return out;
}

int node_command(const std::string& path, const std::string& gpu) {
  if (!gpu.empty() && find_gpu_preset(gpu) == nullptr) {
    std::vector<std::string> names;
    for (const auto& p : gpu_presets())
      names.emplace_back(p.name);
    throw InputError("", "--gpu", fmt::format("unknown GPU preset '{}'{}", gpu, did_you_mean(gpu, names)));
  }
  const NodeTopology node = parse_nvidia_smi_topo(read_file(path), path);
  std::fputs(node_report(node, gpu).c_str(), stdout);
  return 0;
}

} // namespace ddlsim::sim
