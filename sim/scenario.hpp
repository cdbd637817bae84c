// A what-if scenario: model, GPU, cluster, collectives, strategy, engine — parsed and validated as a whole
// into plain structs before anything runs (DESIGN.md, "Scenario JSON"). Every error names file and JSON path.
#pragma once

#include "core/json.hpp"
#include "dag/model.hpp"
#include "dag/strategy.hpp"
#include "sim/collectives.hpp"
#include "sim/gpus.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::sim {

enum class DType { fp32, fp16, bf16 };
[[nodiscard]] double dtype_bytes(DType d);

struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
};

/// Kernel times measured on one GPU (format documented in README, "Calibration file"): per layer, and cost curves
/// of the top-k selection algorithms.
struct Calibration {
  std::string origin;                      ///< file it came from, or "<inline>"
  int batch_per_gpu = 0;                   ///< batch the times were measured at; scaled linearly to the scenario's
  std::map<std::string, LayerTime> layers; ///< by layer name
  std::map<std::string, dag::SelectionCurve> selection; ///< by selection name (sort, sampling, threshold)
  std::string selection_pointer;                        ///< JSON pointer of `selection`, for messages
};

struct GpuSpec {
  std::optional<GpuPreset> preset;
  double peak_flops = 0;       ///< FLOP/s used by the roofline (preset by dtype, or `peak_flops`); 0 = unknown
  double memory_bandwidth = 0; ///< B/s; 0 = unknown
  double memory_bytes = 0;     ///< B; 0 = unknown
  double host_link = 0;        ///< B/s; 0 = host-to-device copy not modelled
  double efficiency = 1.0;     ///< achieved fraction of the roofline
  std::optional<double> single_gpu_iteration_s;
  std::optional<Calibration> calibration;
};

/// How the NIC links connect. The endpoints of the network are the nodes (one NIC per node) or the GPUs (a NIC
/// per GPU); every endpoint has its `inter_node` link into the network.
struct TopologySpec {
  std::string kind = "star";                ///< star | fat-tree | ring | torus
  std::vector<unsigned> down, up, parallel; ///< fat-tree, per level from the leaves (SimGrid's FatTreeParams)
  std::vector<unsigned> dimensions;         ///< torus; a ring is the torus {endpoints}
  LinkSpec link;                            ///< switch-to-switch (fat-tree) or neighbour (ring, torus) links
};

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;
  LinkSpec inter;
  bool nic_per_gpu = false; ///< `nic`: "per-node" (default, shared by the node's GPUs) or "per-gpu"
  TopologySpec topology;
  /// Dedicated parameter-server hosts (strategy.placement "dedicated"): one host per server after the workers,
  /// each with its own `inter_node` NIC on the star; set by the scenario parser from the strategy.
  int server_hosts = 0;
  [[nodiscard]] int workers() const { return nodes * gpus_per_node; }
  [[nodiscard]] int endpoints() const { return nic_per_gpu ? workers() : nodes; }
  [[nodiscard]] Network network() const { return {nodes, gpus_per_node, intra, inter, nic_per_gpu, server_hosts}; }
};

struct AllreduceSpec {
  std::string algorithm = "ring"; ///< used unless `measured` is set
  std::optional<AlphaBeta> measured;
};

struct DataSpec {
  double loading_per_sample_s = 0;
  bool prefetch = true;
};

/// One sweep axis: a dotted scenario key and its values; axes in one zip group vary together.
struct SweepAxis {
  std::string key;
  std::vector<Json> values;
  int zip_group = -1; ///< -1: a cartesian axis of its own
};

struct Scenario {
  std::string name;
  std::string file; ///< path it was loaded from (for messages and relative paths)
  dag::Model model;
  int batch_per_gpu = 1;
  DType gradient_dtype = DType::fp32;
  GpuSpec gpu;
  ClusterSpec cluster;
  AllreduceSpec allreduce;
  dag::StrategyOptions strategy;
  std::string engine = "analytic";
  bool flow_per_message = false; ///< `flow.granularity`: "aggregated" (default) or "per-message" (reference)
  bool flow_symmetry = true;     ///< `flow.symmetry`: "auto" (default: use node symmetry when exact) or "off"
  DataSpec data;
  std::vector<SweepAxis> sweep;
  Json raw; ///< the document after overrides, for sweeps and reports
};

/// Applies one `--set key.path=VALUE` override to a raw scenario document. VALUE is parsed as JSON; text that
/// is not valid JSON is taken as a string. Throws InputError naming `origin` (the scenario file).
void apply_override(Json& doc, const std::string& assignment, const std::string& origin);
void apply_override(Json& doc, const std::string& dotted_key, const Json& value, const std::string& origin);

/// Parses a whole scenario document. `file` is used in messages and to resolve relative paths.
[[nodiscard]] Scenario parse_scenario(const Json& doc, const std::string& file);

/// Loads a scenario file, applies overrides in order, parses and validates it.
[[nodiscard]] Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

/// Parses inline layers (`model.layers`, or a workload file's `layers`) into a model; checks names, references
/// and that the layer graph is acyclic; returns layers in a topological order.
[[nodiscard]] dag::Model parse_layers(const Json& layers, const std::string& file, const std::string& pointer);

} // namespace ddlsim::sim
