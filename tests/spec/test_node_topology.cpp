// A node read from `nvidia-smi topo -m` (sim/spec/node_topology.hpp, issue #34): its paths, NCCL's rings over NVLink
// against hand-worked packings, peer-to-peer and GPUDirect RDMA by NCCL's default levels, and the refusals by line.
#include "core/error.hpp"
#include "sim/spec/node_topology.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Contains;

namespace {

// A DGX-1 with V100s: the hybrid cube-mesh (NVIDIA, "DGX-1 with Tesla V100 System Architecture", WP-08437-002: two
// fully connected quads joined GPU i to GPU i + 4, each V100's six NVLinks, some pairs doubled), as nvidia-smi
// topo -m prints it.
const std::string kDgx1V = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\n"
                           "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\t0-19,40-59\n"
                           "GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\t0-19,40-59\n"
                           "GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\t0-19,40-59\n"
                           "GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\t0-19,40-59\n"
                           "GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\t20-39,60-79\n"
                           "GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\t20-39,60-79\n"
                           "GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\t20-39,60-79\n"
                           "GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \t20-39,60-79\n"
                           "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP "
                           "interconnect between NUMA nodes (e.g., QPI/UPI)\n";

// A dual-socket PCIe server: two GPUs behind one PCIe switch on each socket, one NIC beside GPUs 0 and 1; CRLF line
// ends and a terminal's underlined header, a command line before it.
const std::string kPcie4 = "$ nvidia-smi topo -m\r\n"
                           "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\x1b[0m\r\n"
                           "GPU0\t X \tPIX\tSYS\tSYS\tPIX\t0-11\t0\r\n"
                           "GPU1\tPIX\t X \tSYS\tSYS\tPIX\t0-11\t0\r\n"
                           "GPU2\tSYS\tSYS\t X \tPIX\tSYS\t12-23\t1\r\n"
                           "GPU3\tSYS\tSYS\tPIX\t X \tSYS\t12-23\t1\r\n"
                           "NIC0\tPIX\tPIX\tSYS\tSYS\t X \t\t\r\n"
                           "\r\nLegend:\r\n\r\n  X    = Self\r\n\r\nNIC Legend:\r\n\r\n  NIC0: mlx5_0\r\n";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

} // namespace

TEST_CASE("node topology: a DGX-1V's cube-mesh packs six rings of its NVLinks", "[spec][node]") {
  const NodeTopology node = parse_nvidia_smi_topo(kDgx1V, "dgx1v.txt");
  CHECK(node.gpus == 8);
  CHECK(node.nics.empty());
  CHECK(node.nvlinks[0][3] == 2);
  CHECK(node.nvlinks[0][5] == 0);
  CHECK(node.gpu_paths[0][5] == PathType::sys);
  // By hand: every GPU has six links, so at most six rings leave it; six directed rings use every link once each way:
  // 0-1-2-3-7-5-6-4, 0-2-6-7-4-5-1-3, 0-3-1-5-4-7-6-2, 0-3-2-1-5-6-7-4, 0-4-6-5-7-3-2-1, 0-4-7-6-5-1-2-3. At NVLink 2's
  // 25 GB/s a link and direction the ring's bus bandwidth is 6 x 25 = 150 GB/s.
  CHECK(nvlink_rings(node) == 6);
  // Without the link 3-7, GPUs 3 and 7 keep five links each: five rings at most, and five exist (e.g.
  // 0-1-3-2-6-5-7-4, 0-3-1-5-4-7-6-2, 0-3-2-1-5-6-7-4, 0-4-6-7-5-1-2-3, 0-4-7-6-5-1-2-3).
  NodeTopology cut = node;
  cut.nvlinks[3][7] = cut.nvlinks[7][3] = 0;
  CHECK(nvlink_rings(cut) == 5);
  CHECK(peer_to_peer(node, 0, 1));
  CHECK(peer_to_peer(node, 0, 5)); // SYS in topo -m, but NVLink through GPU 1 (or 4): NCCL's NVB path
  cut.nvlinks.assign(8, std::vector<int>(8, 0));
  CHECK(!peer_to_peer(cut, 0, 5)); // without NVLink, SYS: through host memory on Intel CPUs
}

TEST_CASE("node topology: an NVSwitch node's every pair has the same links: one ring per link", "[spec][node]") {
  std::string text = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  for (int i = 0; i < 4; ++i) {
    text += "GPU" + std::to_string(i);
    for (int j = 0; j < 4; ++j)
      text += i == j ? "\t X " : "\tNV12";
    text += "\t0-63\t0\t\tN/A\n";
  }
  const NodeTopology node = parse_nvidia_smi_topo(text, "a100.txt");
  CHECK(node.gpus == 4);
  CHECK(nvlink_rings(node) == 12); // A100: 12 links of 25 GB/s, 300 GB/s
}

TEST_CASE("node topology: a dual-socket PCIe node, peer-to-peer within a switch, GPUDirect RDMA beside the NIC",
          "[spec][node]") {
  const NodeTopology node = parse_nvidia_smi_topo(kPcie4, "pcie.txt");
  CHECK(node.gpus == 4);
  REQUIRE(node.nics == std::vector<std::string>{"NIC0"});
  CHECK(nvlink_rings(node) == 0);
  CHECK(node.gpu_paths[0][1] == PathType::pix);
  CHECK(node.gpu_paths[1][2] == PathType::sys);
  CHECK(peer_to_peer(node, 0, 1));
  CHECK(peer_to_peer(node, 2, 3));
  CHECK(!peer_to_peer(node, 1, 2));                 // SYS beyond NCCL's PXB level: staged through host memory
  CHECK(peer_to_peer(node, 1, 2, PathType::sys));   // NCCL_P2P_LEVEL=SYS
  CHECK(gpudirect_rdma(node, 0, 0));                // PIX
  CHECK(!gpudirect_rdma(node, 0, 3));               // SYS: the NIC's traffic for GPU 3 crosses host memory
  CHECK(gpudirect_rdma(node, 0, 3, PathType::sys)); // NCCL_NET_GDR_LEVEL=SYS
  CHECK(node.nic_paths[0] == std::vector<PathType>{PathType::pix, PathType::pix, PathType::sys, PathType::sys});
}

TEST_CASE("node topology: bad nvidia-smi output is refused with its line", "[spec][node][errors]") {
  const auto fails = [](const std::string& text, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_AS(parse_nvidia_smi_topo(text, "topo.txt"), InputError);
    CHECK_THROWS_WITH(parse_nvidia_smi_topo(text, "topo.txt"), Contains("topo.txt") && Contains(what));
  };
  fails("", "no header row");
  fails("Legend:\n", "no header row");
  fails(replaced(kDgx1V, "GPU0\t X \tNV1", "GPU0\t X \tNV"), "line 2: unknown path 'NV'");
  fails(replaced(kDgx1V, "GPU0\t X \tNV1", "GPU0\t X \tNV3"), "GPU1 to GPU0 differs from GPU0 to GPU1");
  fails(replaced(kDgx1V, "GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \t20-39,60-79\n", ""), "no row for GPU7");
  fails(replaced(kDgx1V, "GPU3\tNV2\tNV1\tNV2\t X ", "GPU3\tNV2\tNV1\t X \tNV2"), "line 5: 'GPU3' to GPU2");
  fails(replaced(kDgx1V, "\tGPU2\tGPU3\tGPU4", "\tGPU3\tGPU2\tGPU4"), "line 1: GPUs must come first and in order");
  fails(replaced(kPcie4, "NIC0\tPIX\tPIX\tSYS\tSYS\t X ", "NIC1\tPIX\tPIX\tSYS\tSYS\t X "),
        "line 7: 'NIC1' is not a device of the header");
  fails("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPIX\t X \n", "line 2: 'GPU0' has 1 cells, the header 2 devices");
}

TEST_CASE("node topology: cluster.node sets the intra-node link from the node's NVLink rings", "[spec][node]") {
  // One DGX-1V (tests/data/node): six rings at the V100's 25 GB/s = 150 GB/s, a switch of NVLinks (not an NVSwitch:
  // its pairs have 1 or 2 links); with NCCL's share of NVLink (`transport`) as for a link given by hand.
  const std::string file = std::string(DDLSIM_SOURCE_DIR) + "/tests/data/node/scenario.json";
  Json doc = Json::parse(R"({"name": "n", "model": {"zoo": "resnet50", "batch_per_gpu": 32},
      "gpu": {"preset": "V100-SXM2-32GB"},
      "cluster": {"nodes": 1, "gpus_per_node": 8, "node": {"topology_file": "dgx1v-topo.txt"},
                  "intra_node": {"latency": "1 us"}},
      "strategy": {"kind": "ddp"}})");
  const Scenario s = parse_scenario(doc, file);
  CHECK(s.cluster.intra.bandwidth == 6 * 25e9);
  CHECK(s.cluster.fabric == Fabric::switch_);
  doc["cluster"]["intra_node"]["transport"] = "nvlink";
  const Scenario nccl = parse_scenario(doc, file);
  CHECK(nccl.cluster.intra.bandwidth == 6 * 25e9 * nccl.cluster.intra.efficiency);
  CHECK(nccl.cluster.intra.efficiency < 1);

  const auto refused = [&](Json d, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_WITH(parse_scenario(d, file), Contains(what));
  };
  Json both = doc;
  both["cluster"]["intra_node"]["bandwidth"] = "300 GB/s";
  refused(both, "/cluster/intra_node/bandwidth: cluster.node gives the intra-node link's bandwidth and fabric");
  Json four = doc;
  four["cluster"]["gpus_per_node"] = 4;
  refused(four, "/cluster/node/topology_file: the file's node has 8 GPUs, the cluster 4 per node");
  Json pcie = four;
  pcie["cluster"]["node"]["topology_file"] = "pcie-2socket-4gpu-topo.txt";
  refused(pcie, "no NVLink ring through the node's GPUs");
  Json missing = doc;
  missing["cluster"]["node"]["topology_file"] = "nope.txt";
  refused(missing, "/cluster/node/topology_file: topology file");
  Json no_nvlink = doc;
  no_nvlink["gpu"] = {{"preset", "L4"}};
  refused(no_nvlink, "give a gpu.preset with NVLink");
  Json unknown = doc;
  unknown["cluster"]["node"]["file"] = "x";
  refused(unknown, "/cluster/node/file");
}
