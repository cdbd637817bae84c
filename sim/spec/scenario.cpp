// Scenario parsing and validation (docs/scenario.md, "Quantities" and "Keys"). The whole document is read through
// strict ObjectReaders: unknown keys, missing units, wrong types and out-of-range values are InputErrors with a path.
#include "sim/spec/scenario.hpp"

#include "sim/spec/node_topology.hpp"

#include "core/io.hpp"
#include "dag/calibration.hpp"
#include "dag/workload.hpp"
#include "dag/zoo/zoo.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/spec/decoder.hpp"
#include "sim/spec/limits.hpp"
#include "sim/spec/measured_timeline.hpp"

#include <fmt/ranges.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_set>

namespace ddlsim::sim {
namespace {

const std::vector<std::string> kDTypes(dag::kDTypeNames.begin(), dag::kDTypeNames.end());
// The engines' names (sim/spec/engine.hpp), the default first.
std::vector<std::string> engine_names() {
  std::vector<std::string> names;
  for (const auto& e : engines())
    names.emplace_back(e.name);
  return names;
}

std::string resolve_relative(const std::string& scenario_file, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  if (p.is_absolute() || scenario_file.empty())
    return path;
  return (fs::path(scenario_file).parent_path() / p).lexically_normal().string();
}

std::vector<std::string> names_of_algorithms() {
  std::vector<std::string> out;
  for (const auto& a : lowerings(Collective::allreduce))
    out.emplace_back(a.algorithm);
  return out;
}

// ---- model -------------------------------------------------------------------------------------------------

dag::Model parse_workload_file(const std::string& path, const std::string& scenario_file, const std::string& pointer) {
  const std::string resolved = resolve_relative(scenario_file, path);
  if (!path_exists(resolved))
    throw InputError(scenario_file, pointer,
                     fmt::format("workload file '{}' does not exist", clip_user_text(resolved)));
  return dag::read_workload(resolved);
}

// A decoder language model: the zoo entry `zoo` (or the parametric "transformer") with `transformer`'s changes to its
// shape and `attention`'s kernel. `pointer` becomes the parametric decoder's `layers` key (messages about its size).
dag::Model read_decoder(ObjectReader& r, const std::string& zoo, dag::TransformerSpec spec, std::string& pointer) {
  const bool parametric = zoo == "transformer";
  if (parametric || r.has("transformer")) {
    auto t = r.object("transformer");
    if (parametric)
      pointer = t.path("layers");
    spec = parse_decoder(std::move(t), spec, parametric);
  }
  const std::vector<std::string> kernels(dag::kAttentionNames.begin(), dag::kAttentionNames.end());
  if (const auto kernel = r.optional_choice("attention", kernels))
    spec.attention = *kernel == "flash" ? dag::AttentionKernel::flash : dag::AttentionKernel::eager;
  try {
    return dag::build_transformer_lm(spec, zoo);
  } catch (const std::invalid_argument& e) {
    r.fail(parametric || r.has("transformer") ? "transformer" : "zoo", e.what());
  }
}

void parse_model(ObjectReader r, Scenario& s) {
  const bool has_zoo = r.has("zoo"), has_layers = r.has("layers"), has_workload = r.has("workload");
  if (static_cast<int>(has_zoo) + static_cast<int>(has_layers) + static_cast<int>(has_workload) != 1)
    r.fail_here("give exactly one of \"zoo\", \"layers\" or \"workload\"");
  if (has_zoo) {
    const std::string zoo = r.string("zoo");
    s.model_pointer = r.path("zoo");
    if (const auto base = decoder_base(zoo)) {
      s.model = read_decoder(r, zoo, *base, s.model_pointer);
    } else {
      for (const std::string_view key : {"transformer", "attention"})
        if (r.has(key))
          r.fail(key, fmt::format("`{}` shapes a decoder language model (`ddlsim list models`: gpt2, llama3-8b, ... "
                                  "or \"transformer\"); '{}' is not one",
                                  key, clip_user_text(zoo)));
      auto model = dag::build_zoo_model(zoo);
      if (!model)
        r.fail("zoo", fmt::format("unknown model '{}'{} (`ddlsim list models` shows the built-in ones)",
                                  clip_user_text(zoo), did_you_mean(zoo, dag::zoo_model_names())));
      s.model = std::move(*model);
    }
  } else if (has_layers) {
    s.model = dag::parse_layers(r.required("layers"), r.file(), r.path("layers"));
    s.model_pointer = r.path("layers");
    s.model.name = "inline";
    s.model.input_bytes_per_sample = r.optional_quantity("input_bytes_per_sample", Dimension::bytes).value_or(0);
  } else {
    s.model = parse_workload_file(r.string("workload"), r.file(), r.path("workload"));
    s.model_pointer = r.path("workload");
  }
  s.batch_per_gpu = static_cast<int>(r.integer("batch_per_gpu", 1, 1 << 24));
  const auto dtype = r.optional_choice("gradient_dtype", kDTypes).value_or("fp32");
  s.gradient_dtype = dag::find_dtype(dtype);
  const std::vector<std::string> formats(kComputeDtypeNames.begin(), kComputeDtypeNames.end());
  const std::string format = r.optional_choice("compute_dtype", formats).value_or(dtype);
  s.compute_dtype = static_cast<ComputeDtype>(std::find(formats.begin(), formats.end(), format) - formats.begin());
  r.finish();
}

// ---- gpu ---------------------------------------------------------------------------------------------------

// A calibration, `gpu.calibration` or the top-level `calibration`: a file (relative to the scenario) or inline.
void read_calibration(ObjectReader& r, Scenario& s) {
  const Json& c = r.required("calibration");
  if (c.is_string()) {
    const std::string path = resolve_relative(r.file(), c.get<std::string>());
    if (!path_exists(path))
      r.fail("calibration", fmt::format("calibration file '{}' does not exist", clip_user_text(path)));
    s.gpu.calibration = dag::parse_calibration(load_json_file(path), path, "");
  } else {
    s.gpu.calibration = dag::parse_calibration(c, r.file(), r.path("calibration"));
    s.gpu.calibration->origin = "<inline>";
  }
  // By name through a hash set: a scan of the layers per calibrated layer was quadratic in a profiler-derived
  // workload's size (#31 R28).
  std::unordered_set<std::string_view> names;
  names.reserve(s.model.layers.size());
  for (const auto& layer : s.model.layers)
    names.insert(layer.name);
  for (const auto& [name, unused] : s.gpu.calibration->layers)
    if (!names.contains(name))
      r.fail("calibration", fmt::format("calibrated layer '{}' is not a layer of model '{}'", name, s.model.name));
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : gpu_presets())
    names.emplace_back(p.name);
  return names;
}

void parse_gpu(ObjectReader r, Scenario& s) {
  if (auto name = r.optional_string("preset")) {
    const GpuPreset* preset = find_gpu_preset(*name);
    if (preset == nullptr)
      r.fail("preset", fmt::format("unknown value '{}'{} (`ddlsim list gpus` shows the presets)", clip_user_text(*name),
                                   did_you_mean(*name, gpu_preset_names())));
    s.gpu.preset = *preset;
  }
  if (s.gpu.preset) {
    const auto& p = *s.gpu.preset;
    s.gpu.peak_flops = peak_of(p.peaks, sixteen_bit_format(s));
    s.gpu.fp8_flops = p.peaks.fp8;
    if (s.compute_dtype == ComputeDtype::fp8 && s.gpu.fp8_flops == 0)
      r.fail("preset", fmt::format("{} has no FP8 tensor cores, which model.compute_dtype fp8 needs (`ddlsim list "
                                   "gpus` shows the presets with an fp8 peak)",
                                   p.name));
    if (s.gpu.peak_flops == 0 && sixteen_bit_format(s) == ComputeDtype::bf16)
      r.fail("preset", fmt::format("{} has no bf16 tensor cores; use gradient_dtype fp16 or fp32", p.name));
    if (s.gpu.peak_flops == 0)
      r.fail("preset", fmt::format("{} has no {} peak, which model.compute_dtype asks for (`ddlsim list gpus`)", p.name,
                                   compute_dtype_name(s.compute_dtype)));
    s.gpu.memory_bandwidth = p.memory_bandwidth;
    s.gpu.memory_bytes = p.memory_bytes;
    s.gpu.host_link = p.host_link;
  }
  s.gpu.peak_flops = r.optional_quantity("peak_flops", Dimension::flop_rate, 0, true).value_or(s.gpu.peak_flops);
  s.gpu.memory_bandwidth =
      r.optional_quantity("memory_bandwidth", Dimension::bandwidth, 0, true).value_or(s.gpu.memory_bandwidth);
  s.gpu.memory_bytes = r.optional_quantity("memory", Dimension::bytes, 0, true).value_or(s.gpu.memory_bytes);
  s.gpu.host_link = r.optional_quantity("host_link", Dimension::bandwidth, 0, true).value_or(s.gpu.host_link);
  const auto efficiency = r.optional_number("efficiency", 1e-6, 1.0);
  s.gpu.efficiency = efficiency.value_or(1.0);
  s.gpu.shape_aware = s.gpu.preset && !efficiency && !r.has("peak_flops") && !r.has("memory_bandwidth");
  if (s.compute_dtype == ComputeDtype::fp8 && !s.gpu.preset)
    r.fail_here("model.compute_dtype fp8 takes the FP8 peak of a GPU preset: give \"preset\"");
  s.gpu.single_gpu_iteration_s = r.optional_quantity("single_gpu_iteration", Dimension::time, 0, true);
  s.gpu.speedup = r.optional_number("speedup", 1e-6, 1e6).value_or(1.0);
  s.gpu.comm_slowdown = r.optional_number("comm_slowdown", 0.0, 10.0);
  if (r.has("calibration")) {
    if (s.gpu.calibration)
      r.fail("calibration", "the scenario's top-level \"calibration\" is given too: keep one of them");
    read_calibration(r, s);
  }
  // Every layer must be costed by one of the three sources (docs/engines.md, "Where the numbers come from").
  const bool calibrated_all = s.gpu.calibration && s.gpu.calibration->layers.size() == s.model.layers.size();
  if (!calibrated_all && !s.gpu.single_gpu_iteration_s && s.gpu.peak_flops == 0)
    r.fail_here("cannot cost compute: give \"preset\" (or \"peak_flops\"), \"single_gpu_iteration\" or a "
                "\"calibration\" that covers every layer");
  if (!calibrated_all && !s.gpu.single_gpu_iteration_s && s.gpu.memory_bandwidth == 0)
    r.fail_here("the roofline needs \"memory_bandwidth\" (or a \"preset\")");
  r.finish();
}

// ---- cluster, collectives, strategy, data ----------------------------------------------------------------------

// What `cluster.node` gives the intra-node link (node_topology.hpp, ring_link).
RingLink parse_node(ObjectReader r, const Scenario& s) {
  const std::string path = resolve_relative(r.file(), r.string("topology_file"));
  if (!path_exists(path))
    r.fail("topology_file", fmt::format("topology file '{}' does not exist", clip_user_text(path)));
  const NodeTopology node = parse_nvidia_smi_topo(read_file(path), path);
  if (node.gpus != s.cluster.gpus_per_node)
    r.fail("topology_file",
           fmt::format("the file's node has {} GPUs, the cluster {} per node", node.gpus, s.cluster.gpus_per_node));
  if (nvlink_rings(node) == 0)
    r.fail("topology_file", "no NVLink ring through the node's GPUs: cluster.node reads NVLink nodes so far; describe "
                            "a PCIe node in cluster.intra_node (bandwidth, fabric \"two-sockets\", host_link)");
  if (!s.gpu.preset || s.gpu.preset->nvlink_link_Bps() == 0)
    r.fail("topology_file", "the rings' rate is the GPU preset's per NVLink: give a gpu.preset with NVLink");
  r.finish();
  return ring_link(node, s.gpu.preset->nvlink_link_Bps());
}

// A link: its rate and latency, and optionally the transport NCCL uses over it, whose share of the rate
// (network/cluster.hpp: transport_efficiency, nvlink_efficiency from the GPU preset) or the scenario's own
// `efficiency` scales the rate. `fabric` and `host_link` (the intra-node link only, else null) receive `fabric` and,
// for two sockets, the host link between them.
LinkSpec parse_link(ObjectReader r, const GpuSpec& gpu, Fabric* fabric = nullptr, LinkSpec* host_link = nullptr,
                    const RingLink* node = nullptr) {
  LinkSpec l;
  if (node != nullptr) {
    if (r.has("bandwidth") || r.has("fabric"))
      r.fail(r.has("bandwidth") ? "bandwidth" : "fabric",
             "cluster.node gives the intra-node link's bandwidth and fabric: give one or the other");
    l.bandwidth = node->bandwidth;
    *fabric = node->nvswitch ? Fabric::nvswitch : Fabric::switch_;
  } else {
    l.bandwidth = r.quantity("bandwidth", Dimension::bandwidth, 0, true);
  }
  l.latency_s = r.quantity("latency", Dimension::time);
  std::vector<std::string> transports;
  for (const auto t : kTransportNames)
    transports.emplace_back(t);
  const auto transport = r.optional_choice("transport", transports);
  const auto efficiency = r.optional_number("efficiency", 0, 1);
  if (transport) {
    l.transport = *transport;
    l.efficiency = transport_efficiency(*transport);
    if (*transport == "nvlink") {
      if (fabric == nullptr)
        r.fail("transport", "nvlink joins the GPUs of a node: give it in cluster.intra_node");
      if (!efficiency && (!gpu.preset || gpu.preset->nvlink_link_Bps() == 0))
        r.fail("transport", fmt::format("nvlink takes NCCL's share of the GPU's NVLink rate, and {}: give the link's "
                                        "`efficiency` instead",
                                        gpu.preset ? fmt::format("{} has no NVLink", gpu.preset->name)
                                                   : std::string("the GPU is not a preset")));
      if (!efficiency)
        l.efficiency = nvlink_efficiency(gpu.preset->nvlink_link_Bps(), gpu.preset->nccl_nvlink_link_Bps);
    }
  }
  if (efficiency) {
    if (!(*efficiency > 0))
      r.fail("efficiency", "expected a share of the link's rate in (0, 1]");
    l.efficiency = *efficiency;
  }
  l.bandwidth *= l.efficiency;
  if (fabric != nullptr && node == nullptr) {
    if (const auto f = r.optional_choice("fabric", {"switch", "nvswitch", "two-sockets"}))
      *fabric = *f == "nvswitch" ? Fabric::nvswitch : *f == "two-sockets" ? Fabric::two_sockets : Fabric::switch_;
    if (*fabric == Fabric::two_sockets) {
      if (l.transport == "nvlink")
        r.fail("fabric", "two sockets join PCIe GPUs through their hosts; an NVLink fabric is a \"switch\" or an "
                         "\"nvswitch\"");
      if (!r.has("host_link"))
        r.fail("host_link", "missing required key: two sockets are joined by a host link (QPI, UPI, Infinity "
                            "Fabric): give its {bandwidth, latency}");
      *host_link = parse_link(r.object("host_link"), gpu);
    } else if (r.has("host_link")) {
      r.fail("host_link", "applies to the \"two-sockets\" fabric only");
    }
  }
  r.finish();
  return l;
}

std::vector<unsigned> positive_list(ObjectReader& r, std::string_view key, std::size_t size) {
  const Json& v = r.required(key);
  if (!v.is_array() || v.empty() || (size != 0 && v.size() != size))
    r.fail(key, size ? fmt::format("expected an array of {} positive integers", size)
                     : "expected a non-empty array of positive integers");
  std::vector<unsigned> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 1 || v[i].get<std::int64_t>() > 1 << 20)
      throw InputError(r.file(), json_pointer_append(r.path(key), i), "expected a positive integer");
    out.push_back(v[i].get<unsigned>());
  }
  return out;
}

// Topologies (docs/scenario.md, "Keys": cluster.topology): "star", or {"kind": "fat-tree", "down": [...], "up": [...],
// "parallel": [...], "link": {...}}, {"kind": "ring", "link": {...}}, {"kind": "torus", "dimensions": [...],
// "link": {...}}. The network's endpoints are the nodes, or the GPUs with "nic": "per-gpu".
void parse_topology(const Json& t, const std::string& file, const std::string& pointer, ClusterSpec& c,
                    const GpuSpec& gpu) {
  const std::vector<std::string> kinds(kTopologyNames.begin(), kTopologyNames.end());
  auto& topo = c.topology;
  if (t.is_string()) {
    const auto name = t.get<std::string>();
    const auto kind = find_topology(name);
    if (!kind)
      throw InputError(file, pointer,
                       fmt::format("unknown topology '{}' (expected one of: {})", name, fmt::join(kinds, ", ")));
    topo.kind = *kind;
    if (topo.kind != TopologyKind::star)
      throw InputError(file, pointer,
                       fmt::format("topology '{}' needs an object with its parameters, e.g. "
                                   "{{\"kind\": \"{}\", ...}}",
                                   name, name));
    return;
  }
  ObjectReader r(t, file, pointer);
  topo.kind = *find_topology(r.choice("kind", kinds));
  const auto endpoints = static_cast<std::int64_t>(c.endpoints());
  const std::string what = c.nic_per_gpu ? "GPUs (nic: per-gpu)" : "nodes";
  if (topo.kind != TopologyKind::star) {
    if (auto l = r.optional_object("link"))
      topo.link = parse_link(*l, gpu);
    else
      topo.link = c.inter;
  }
  if (topo.kind == TopologyKind::fat_tree) {
    topo.down = positive_list(r, "down", 0);
    topo.up = positive_list(r, "up", topo.down.size());
    topo.parallel =
        r.has("parallel") ? positive_list(r, "parallel", topo.down.size()) : std::vector<unsigned>(topo.down.size(), 1);
    // Leaves, and SimGrid's switches and links (level l has prod(down above l) x prod(up up to l) switches, each
    // with down[l] x parallel[l] links below it), counted in doubles: a product of levels may overflow 64 bits.
    double leaves = 1, switches = 0, links = 0;
    for (unsigned d : topo.down)
      leaves *= d;
    for (std::size_t l = 0; l < topo.down.size(); ++l) {
      double at_level = 1;
      for (std::size_t i = l + 1; i < topo.down.size(); ++i)
        at_level *= topo.down[i];
      for (std::size_t i = 0; i <= l; ++i)
        at_level *= topo.up[i];
      switches += at_level;
      links += at_level * topo.down[l] * topo.parallel[l];
    }
    if (leaves != static_cast<double>(endpoints))
      r.fail("down", fmt::format("the fat-tree has {:.0f} leaves (product of down) but the cluster has {} {}", leaves,
                                 endpoints, what));
    const auto max_fat_tree =
        static_cast<double>(capabilities(Engine::flow).max_hosts); // as many as the flow engine's hosts
    if (switches > max_fat_tree || links > max_fat_tree)
      r.fail("up", fmt::format("the fat-tree has {:.0f} switches and {:.0f} links; the limit is {:.0f} of each",
                               switches, links, max_fat_tree));
  } else if (topo.kind == TopologyKind::torus) {
    topo.dimensions = positive_list(r, "dimensions", 0);
    double size = 1; // in doubles: a product of dimensions may overflow 64 bits
    for (unsigned d : topo.dimensions)
      size *= d;
    if (size != static_cast<double>(endpoints))
      r.fail("dimensions", fmt::format("the torus has {:.0f} positions (product of dimensions) but the cluster has "
                                       "{} {}",
                                       size, endpoints, what));
  } else if (topo.kind == TopologyKind::ring) {
    topo.dimensions = {static_cast<unsigned>(endpoints)};
  }
  r.finish();
}

void parse_cluster(ObjectReader r, Scenario& s) {
  s.cluster.nodes = static_cast<int>(r.integer("nodes", 1, 1 << 20));
  s.cluster.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 1, 1024));
  std::optional<RingLink> node;
  if (auto n = r.optional_object("node"))
    node = parse_node(*n, s);
  if (auto intra = r.optional_object("intra_node"))
    s.cluster.intra = parse_link(*intra, s.gpu, &s.cluster.fabric, &s.cluster.host_link, node ? &*node : nullptr);
  else if (s.cluster.gpus_per_node > 1)
    r.fail("intra_node", "missing required key: a node with several GPUs needs its intra-node link");
  if (auto inter = r.optional_object("inter_node"))
    s.cluster.inter = parse_link(*inter, s.gpu);
  else if (s.cluster.nodes > 1)
    r.fail("inter_node", "missing required key: several nodes need the inter-node link");
  if (auto nic = r.optional_choice("nic", {"per-node", "per-gpu"}))
    s.cluster.nic_per_gpu = *nic == "per-gpu";
  if (s.cluster.fabric == Fabric::two_sockets && (s.cluster.gpus_per_node < 2 || s.cluster.gpus_per_node % 2 != 0))
    throw InputError(r.file(), r.path("intra_node") + "/fabric",
                     fmt::format("two sockets hold half of the node's GPUs each: gpus_per_node must be even, not {}",
                                 s.cluster.gpus_per_node));
  if (s.cluster.fabric == Fabric::nvswitch && s.gpu.preset) {
    if (s.gpu.preset->nvlink_link_Bps() == 0)
      throw InputError(r.file(), r.path("intra_node") + "/fabric",
                       fmt::format("an NVSwitch joins NVLink GPUs, and {} has no NVLink", s.gpu.preset->name));
    s.cluster.nvls = s.gpu.preset->compute_capability >= 90;
  }
  if (const Json* t = r.optional("topology"))
    parse_topology(*t, r.file(), r.path("topology"), s.cluster, s.gpu);
  r.finish();
}

void parse_collectives(ObjectReader r, Scenario& s) {
  if (const Json* a = r.optional("allreduce")) {
    const std::string path = r.path("allreduce");
    std::string algorithm;
    if (a->is_string()) {
      algorithm = a->get<std::string>();
    } else {
      ObjectReader ar(*a, r.file(), path);
      if (ar.has("alpha") || ar.has("beta")) {
        s.allreduce.measured =
            AlphaBeta{ar.quantity("alpha", Dimension::time), ar.quantity("beta", Dimension::inverse_bandwidth)};
      } else {
        algorithm = ar.string("algorithm");
      }
      ar.finish();
    }
    if (!s.allreduce.measured) {
      s.allreduce.algorithm = find_lowering(Collective::allreduce, algorithm);
      if (s.allreduce.algorithm == nullptr)
        throw InputError(r.file(), path,
                         fmt::format("unknown allreduce algorithm '{}' (expected one of: {})", algorithm,
                                     fmt::join(names_of_algorithms(), ", ")));
      if (s.allreduce.algorithm->reduces_in_switch && !s.cluster.nvls)
        throw InputError(r.file(), path,
                         fmt::format("{} reduces in the node's NVSwitch (NVLink SHARP), which needs Hopper GPUs (an "
                                     "H100 preset) and cluster.intra_node.fabric \"nvswitch\"",
                                     algorithm));
      if (s.allreduce.algorithm->reduces_in_switch && s.cluster.gpus_per_node < 2)
        throw InputError(r.file(), path,
                         fmt::format("{} reduces in a node's switch: it needs at least 2 GPUs per node", algorithm));
    }
  }
  for (const auto c : {Collective::allgather, Collective::reduce_scatter, Collective::broadcast}) {
    const auto key = std::string(collective_name(c));
    const auto available = lowerings(c);
    std::vector<std::string> names;
    for (const auto& a : available)
      names.emplace_back(a.algorithm);
    if (const auto algorithm = r.optional_choice(key, names))
      s.algorithms[c] = find_lowering(c, *algorithm);
  }
  r.finish();
}

// The strategy's keys are the registry's (dag/strategy.hpp): the chosen kind's parser reads them, with what it needs
// of the rest of the scenario passed explicitly.
void parse_strategy(ObjectReader r, Scenario& s) {
  const auto& topology = s.cluster.topology;
  const dag::StrategyContext context{
      .model = &s.model,
      .nodes = s.cluster.nodes,
      .memory_bandwidth = s.gpu.memory_bandwidth,
      .peak_flops = s.gpu.peak_flops,
      .selection_curves = s.gpu.calibration ? &s.gpu.calibration->selection : nullptr,
      .topology = topology_name(topology.kind),
      .star_network = topology.kind == TopologyKind::star,
  };
  // Backup workers (Chen et al., arXiv:1604.00981) apply to every synchronous strategy: read here, checked against the
  // data-parallel degree once the parallelism is known (check_feasible).
  s.backup_workers = static_cast<int>(r.optional_integer("backup_workers", 0, kMaxGpus).value_or(0));
  s.strategy = dag::parse_strategy(r, context);
  if (s.backup_workers > 0 && s.strategy.asynchronous())
    r.fail("backup_workers",
           fmt::format("applies to synchronous strategies; '{}' has no barrier to wait at", s.strategy.kind()));
  if (const auto* ps = s.strategy.parameter_server(); ps != nullptr && ps->dedicated_servers)
    s.cluster.server_hosts = ps->servers;
}

void parse_data(ObjectReader r, Scenario& s) {
  s.data.loading_per_sample_s = r.optional_quantity("loading_per_sample", Dimension::time).value_or(0);
  s.data.prefetch = r.optional_boolean("prefetch").value_or(true);
  r.finish();
}

void parse_host(ObjectReader r, Scenario& s) {
  s.host.launch_s = r.optional_quantity("launch", Dimension::time);
  r.finish();
}

void parse_measured(ObjectReader r, Scenario& s) {
  s.measured.iteration_s = r.optional_quantity("iteration", Dimension::time, 0, true);
  if (const auto timeline = r.optional_string("timeline")) {
    s.measured.timeline = resolve_relative(r.file(), *timeline);
    if (!path_exists(s.measured.timeline))
      r.fail("timeline", fmt::format("measured timeline '{}' does not exist", clip_user_text(s.measured.timeline)));
    (void)read_measured_timeline(s.measured.timeline); // refused now, not after simulating
  }
  s.measured.source = r.optional_string("source").value_or("");
  if (const Json* steps = r.optional("steps"))
    s.measured.steps_s = parse_times_at(*steps, r.file(), r.path("steps"));
  r.finish();
}

// ---- sweep ---------------------------------------------------------------------------------------------------

// An axis: its key, its values and where they are in the file.
struct AxisText {
  std::string key;
  const Json* values;
  std::string pointer;
};

// Validates an axis, or the axes of one zip group together: the i-th value of every axis of the group is set at
// once (a zip pairs values that are only valid together, e.g. pipeline.schedule with pipeline.virtual_stages). An
// error points at the value of the axis whose key it concerns (else the group's first), and names every value set.
void check_axis_values(const Json& doc_without_sweep, const std::vector<AxisText>& group, const std::string& file) {
  for (const auto& a : group)
    if (!a.values->is_array() || a.values->empty())
      throw InputError(file, a.pointer, "expected a non-empty array of values");
  for (std::size_t i = 0; i < group.front().values->size(); ++i) {
    Json point = doc_without_sweep;
    std::string assigned;
    for (const auto& a : group)
      assigned += fmt::format("{}{} = {}", assigned.empty() ? "" : ", ", a.key, (*a.values)[i].dump());
    try {
      for (const auto& a : group)
        apply_override(point, a.key, (*a.values)[i], file);
      (void)parse_scenario(point, file);
    } catch (const InputError& e) {
      const AxisText* at = &group.front();
      for (const auto& a : group) {
        const std::string key_pointer = dotted_key_pointer(a.key);
        if (e.pointer() == key_pointer || e.pointer().starts_with(key_pointer + "/"))
          at = &a;
      }
      throw InputError(file, json_pointer_append(at->pointer, i),
                       fmt::format("{}: {}{}", assigned, e.pointer().empty() ? "" : e.pointer() + ": ", e.detail()));
    }
  }
}

// The keys of `object` in `order` first (those present), then the rest in the object's own (alphabetical) order.
std::vector<std::string> keys_in_order(const Json& object, const std::vector<std::string>& order) {
  std::vector<std::string> keys;
  for (const auto& k : order)
    if (object.contains(k) && std::find(keys.begin(), keys.end(), k) == keys.end())
      keys.push_back(k);
  for (const auto& [k, unused] : object.items())
    if (std::find(keys.begin(), keys.end(), k) == keys.end())
      keys.push_back(k);
  return keys;
}

std::vector<SweepAxis> parse_sweep(const Json& sweep, const Json& doc, const std::string& file,
                                   const SweepKeyOrder& order) {
  ObjectReader r(sweep, file, "/sweep");
  Json base = doc;
  base.erase("sweep");
  // How many points the axes make, counted (without overflowing) before any value is validated: each zip group
  // counts once, by its first array.
  std::size_t points = 1;
  const auto count = [&](std::size_t n) {
    if (n > 0 && n > kMaxSweepPoints / points)
      throw InputError(file, "/sweep",
                       fmt::format("more than {} points (the axes multiply to more): split the sweep into several "
                                   "scenarios, or sweep fewer values",
                                   kMaxSweepPoints));
    points *= std::max<std::size_t>(n, 1);
  };
  for (const auto& [key, values] : sweep.items()) {
    if (key != "zip")
      count(values.is_array() ? values.size() : 1);
    else if (values.is_array())
      for (const auto& group : values)
        if (group.is_object() && !group.empty() && group.begin()->is_array())
          count(group.begin()->size());
  }
  std::vector<SweepAxis> axes;
  std::set<std::string> seen;
  auto add_axis = [&](const std::string& key, const Json& values, const std::string& pointer, int group) {
    if (!seen.insert(key).second)
      throw InputError(file, pointer, fmt::format("'{}' is swept twice", key));
    axes.push_back({key, values.get<std::vector<Json>>(), group});
  };
  for (const auto& key : keys_in_order(sweep, order.keys)) {
    const Json& values = sweep.at(key);
    if (key == "zip") {
      const Json& zip = *r.optional("zip");
      if (!zip.is_array())
        r.fail("zip", "expected an array of objects of equal-length arrays");
      for (std::size_t g = 0; g < zip.size(); ++g) {
        const std::string gp = json_pointer_append(r.path("zip"), g);
        ObjectReader zr(zip[g], file, gp);
        std::size_t length = 0;
        std::vector<AxisText> group;
        if (!zip[g].is_object())
          zr.fail_here("expected an object of equal-length arrays");
        for (const auto& zkey :
             keys_in_order(zip[g], g < order.zip.size() ? order.zip[g] : std::vector<std::string>{})) {
          const Json& zvalues = zip[g].at(zkey);
          zr.optional(zkey);
          const std::string zp = json_pointer_append(gp, zkey);
          if (zvalues.is_array() && length != 0 && zvalues.size() != length)
            throw InputError(file, zp,
                             fmt::format("zipped axes must have equal lengths ({} vs {})", zvalues.size(), length));
          if (!zvalues.is_array() || zvalues.empty())
            throw InputError(file, zp, "expected a non-empty array of values");
          group.push_back({zkey, &zvalues, zp});
          length = zvalues.size();
        }
        if (group.empty())
          continue;
        check_axis_values(base, group, file);
        for (const auto& a : group)
          add_axis(a.key, *a.values, a.pointer, static_cast<int>(g));
      }
      continue;
    }
    r.optional(key);
    check_axis_values(base, {{key, &values, r.path(key)}}, file);
    add_axis(key, values, r.path(key), -1);
  }
  return axes;
}

} // namespace

ComputeDtype sixteen_bit_format(const Scenario& s) {
  if (s.compute_dtype != ComputeDtype::fp8)
    return s.compute_dtype;
  return s.gradient_dtype == DType::fp16 ? ComputeDtype::fp16 : ComputeDtype::bf16;
}

CommSlowdown comm_slowdown(const Scenario& s) {
  if (s.gpu.comm_slowdown)
    return {*s.gpu.comm_slowdown, "gpu.comm_slowdown"};
  if (s.gpu.calibration && s.gpu.calibration->compute_slowdown)
    return {*s.gpu.calibration->compute_slowdown, s.gpu.calibration->origin};
  return {};
}

const CollectiveLowering& task_lowering(const Scenario& s, const dag::Task& task) {
  if (dag::gathers_parameters(task) && s.sharding && s.sharding->gather_algorithm != nullptr)
    return *s.sharding->gather_algorithm;
  return collective_lowering(s, dag::collective_of(task));
}

const CollectiveLowering& collective_lowering(const Scenario& s, dag::Collective c) {
  const auto chosen = s.algorithms.find(c);
  const auto* lowering = c == dag::Collective::allreduce ? nullptr
                         : chosen != s.algorithms.end()  ? chosen->second
                                                         : default_lowering(c);
  if (lowering == nullptr)
    throw std::logic_error(fmt::format("no sparse lowering for collective {}", dag::collective_name(c)));
  return *lowering;
}

std::unique_ptr<CollectiveModel> allreduce_model(const Scenario& s, const Network& net) {
  return s.allreduce.measured ? make_measured_allreduce(net, *s.allreduce.measured)
                              : make_cost_model(*s.allreduce.algorithm, net);
}

SweepKeyOrder sweep_key_order(std::string_view text) {
  SweepKeyOrder order;
  const auto doc = OrderedJson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("sweep") || !doc["sweep"].is_object())
    return order;
  for (const auto& [key, values] : doc["sweep"].items()) {
    order.keys.push_back(key);
    if (key != "zip" || !values.is_array())
      continue;
    for (const auto& group : values) {
      order.zip.emplace_back();
      if (group.is_object())
        for (const auto& [zkey, unused] : group.items())
          order.zip.back().push_back(zkey);
    }
  }
  return order;
}

namespace {

// `memory` (docs/memory.md): the reserve is refused at 64 GiB and above (no GPU has that much beside its tensors) or
// when it leaves nothing of the GPU's memory; the fragmentation factor above 4 (measured: 0.17 to 0.24).
constexpr double kMaxReserveBytes = 64.0 * (1ULL << 30);
constexpr double kMaxFragmentation = 4;

void parse_memory(ObjectReader& r, Scenario& s) {
  if (const auto reserve = r.optional_quantity("reserve", Dimension::bytes)) {
    if (*reserve >= kMaxReserveBytes)
      r.fail("reserve", fmt::format("{} is not a plausible reserve beside the tensors: give less than 64 GiB",
                                    format_bytes(*reserve)));
    if (s.gpu.memory_bytes > 0 && *reserve >= s.gpu.memory_bytes)
      r.fail("reserve", fmt::format("{} leaves nothing of the GPU's {} for the model", format_bytes(*reserve),
                                    format_bytes(s.gpu.memory_bytes)));
    s.memory.reserve_bytes = *reserve;
  }
  s.memory.fragmentation = r.optional_number("fragmentation", 0, kMaxFragmentation).value_or(s.memory.fragmentation);
  r.finish();
}

} // namespace

Scenario parse_scenario(const Json& doc, const std::string& file, const SweepKeyOrder& order, SweepBlock sweep) {
  ObjectReader r(doc, file, "");
  Scenario s;
  s.file = file;
  s.raw = doc;
  s.name = r.optional_string("name").value_or(std::filesystem::path(file).stem().string());
  if (s.name.empty())
    r.fail("name", "must not be empty");
  // The name is the default output directory's last component (out/<name>): one plain file name.
  if (s.name == "." || s.name == ".." || s.name.size() > 200 || std::any_of(s.name.begin(), s.name.end(), [](char c) {
        return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      }))
    r.fail("name", fmt::format("'{}' cannot name the output directory out/<name>: write a file name of at most 200 "
                               "bytes without '/', '\\' or control characters, other than '.' and '..'",
                               s.name));
  r.optional_string("description");
  parse_model(r.object("model"), s);
  // measured costs for the whole scenario: layers, selection, collectives (docs/scenario.md, "Keys": calibration)
  if (r.has("calibration"))
    read_calibration(r, s);
  parse_gpu(r.object("gpu"), s);
  parse_cluster(r.object("cluster"), s);
  if (auto c = r.optional_object("collectives"))
    parse_collectives(*c, s);
  parse_strategy(r.object("strategy"), s);
  if (auto d = r.optional_object("data"))
    parse_data(*d, s);
  if (auto h = r.optional_object("host"))
    parse_host(*h, s);
  if (auto m = r.optional_object("measured"))
    parse_measured(*m, s);
  if (const auto o = r.optional_choice("optimizer", {"sgd", "sgd-momentum", "adam"}))
    s.optimizer = *o == "sgd"    ? dag::Optimizer::sgd
                  : *o == "adam" ? dag::Optimizer::adam
                                 : dag::Optimizer::sgd_momentum;
  // `null` is the key left out (a sweep can switch a pipeline off: "pipeline": [null, {...}]).
  const auto object_or_null = [&r](std::string_view key) -> std::optional<ObjectReader> {
    if (const Json* j = r.optional(key); j != nullptr && j->is_null())
      return std::nullopt;
    return r.optional_object(key);
  };
  parse_parallelism(object_or_null("parallelism"), object_or_null("pipeline"), s);
  if (auto sh = object_or_null("sharding"))
    parse_sharding(std::move(*sh), s);
  s.engine = find_engine(r.optional_choice("engine", engine_names()).value_or(std::string(engines().front().name)))
                 .value_or(Engine::analytic);
  if (auto f = r.optional_object("flow")) {
    s.flow_per_message =
        f->optional_choice("granularity", {"aggregated", "per-message"}).value_or("aggregated") == "per-message";
    s.flow_symmetry = f->optional_choice("symmetry", {"auto", "off"}).value_or("auto") == "auto";
    s.flow_own_links = f->optional_choice("own_links", {"auto", "off"}).value_or("auto") == "auto";
    if (const auto listed = f->optional_integer("report_replicas", 1, 1 << 30))
      s.flow_report_replicas = static_cast<int>(*listed);
    f->finish();
  }
  if (auto v = r.optional_object("variability"))
    s.variability = parse_variability(std::move(*v), s.measured.steps_s);
  if (auto m = r.optional_object("memory"))
    parse_memory(*m, s);
  if (const Json* sw = r.optional("sweep"); sw != nullptr && sweep == SweepBlock::validated)
    s.sweep = parse_sweep(*sw, doc, file, order);
  r.finish();
  check_feasible(s, file);
  return s;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides, SweepBlock sweep) {
  const std::string text = read_file(path);
  Json doc = parse_json_text(text, path);
  SweepKeyOrder order = sweep_key_order(text);
  for (const auto& o : overrides) // a sweep given whole on the command line runs in its own order too
    if (o.starts_with("sweep="))
      order = sweep_key_order("{\"sweep\": " + o.substr(6) + "}");
  if (!doc.is_object())
    throw InputError(path, "", "expected a JSON object at the top level");
  const Json original = doc.contains("measured") && !overrides.empty() ? doc : Json();
  for (const auto& o : overrides)
    apply_override(doc, o, path);
  try {
    Scenario s = parse_scenario(doc, path, order, sweep);
    if (s.measured.iteration_s && !overrides.empty())
      s.measured.what_if_keys = what_if_keys(original, doc, overrides);
    return s;
  } catch (const InputError& e) {
    // Say so when the offending value came from the command line rather than the file.
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it) {
      const std::string pointer = dotted_key_pointer(it->substr(0, it->find('=')));
      if (e.pointer() == pointer || e.pointer().starts_with(pointer + "/"))
        throw InputError(e.file(), e.pointer(), fmt::format("{} (from --set {})", e.detail(), clip_user_text(*it)));
    }
    throw;
  }
}

} // namespace ddlsim::sim
