// `ddlsim probe-plan` (probe_plan.hpp).
#include "sim/cli/probe_plan.hpp"

#include "core/io.hpp"
#include "core/units.hpp"
#include "dag/kernel_shapes.hpp"
#include "dag/powersgd.hpp"
#include "sim/plan/prepare.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <tuple>

namespace ddlsim::sim {
namespace {

OrderedJson layer_entry(const dag::Model& m, const dag::LayerKernel& k) {
  const auto& layer = m.layers[static_cast<std::size_t>(k.layer)];
  OrderedJson j;
  j["name"] = layer.name;
  j["kind"] = layer.kind;
  j["kernel"] = std::string(dag::layer_kernel_name(k.kind));
  switch (k.kind) {
  case dag::LayerKernel::Kind::convolution:
    j["input"] = {k.n, k.c, k.h, k.w};
    j["filters"] = {k.k, k.c / k.groups, k.r, k.s};
    j["stride"] = {k.stride_h, k.stride_w};
    j["padding"] = {k.pad_h, k.pad_w};
    j["groups"] = k.groups;
    break;
  case dag::LayerKernel::Kind::batched_gemm:
    j["count"] = k.count;
    [[fallthrough]];
  case dag::LayerKernel::Kind::gemm:
    j["m"] = k.gemm_m;
    j["n"] = k.gemm_n;
    j["k"] = k.gemm_k;
    break;
  case dag::LayerKernel::Kind::memory:
    j["bytes"] = fmt::format("{} B", k.bytes);
    if (!k.why.empty())
      j["note"] = k.why;
    break;
  }
  j["forward_flops"] = layer.fwd_flops; // per sample, as the model counts them
  return j;
}

} // namespace

OrderedJson probe_plan(const Scenario& s) {
  const auto r = prepare(s, Engine::analytic); // the plan: groups and DAG
  OrderedJson plan;
  plan["format"] = "ddlsim-probe-plan";
  plan["version"] = 1;
  plan["scenario"] = s.name;
  plan["model"] = s.model.name;
  plan["gpu"] = s.gpu.preset ? std::string(s.gpu.preset->name) : std::string();
  plan["batch_per_gpu"] = s.batch_per_gpu;
  plan["gradient_bytes_per_element"] = dag::dtype_bytes(s.gradient_dtype);
  OrderedJson layers = OrderedJson::array();
  for (const auto& k : dag::layer_kernels(s.model, s.batch_per_gpu))
    layers.push_back(layer_entry(s.model, k));
  plan["layers"] = std::move(layers);

  // Top-k selection: each compressed group's elements and the k it keeps.
  OrderedJson selection = OrderedJson::array();
  for (const auto& g : r.groups)
    if (dag::selected_of(g) > 0)
      selection.push_back({{"elements", g.elements},
                           {"selected", dag::selected_of(g)},
                           {"density", static_cast<double>(dag::selected_of(g)) / static_cast<double>(g.elements)}});
  plan["selection"] = std::move(selection);

  // PowerSGD: every matrix it factorises, n x m at the effective rank (dag/powersgd.hpp).
  OrderedJson low_rank = OrderedJson::array();
  if (s.strategy.is(dag::StrategyFamily::low_rank)) {
    const int rank = s.strategy.get<dag::PowerSgdOptions>().rank;
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int> matrices;
    for (const auto& layer : s.model.layers)
      for (const auto& t : layer.params)
        if (const auto v = dag::powersgd_view(t, rank); v.compress)
          ++matrices[{v.rows, v.cols, v.rank}];
    for (const auto& [shape, count] : matrices)
      low_rank.push_back(
          {{"n", std::get<0>(shape)}, {"m", std::get<1>(shape)}, {"rank", std::get<2>(shape)}, {"count", count}});
  }
  plan["low_rank"] = std::move(low_rank);

  // Collectives of one iteration on the first GPU's DAG, by (collective, size, communicator size and nodes): a
  // transfer between two GPUs, or a collective over its communicator's layout (as the engines cost it).
  std::map<std::tuple<std::string, double, int, int>, int> calls;
  std::vector<std::optional<CommunicatorLayout>> layouts(r.graph.communicators().size());
  const int per_node = s.cluster.gpus_per_node;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (dag::collective_of(t) == dag::Collective::none || t.iteration != 0)
      continue;
    const auto* transfer = std::get_if<dag::Transfer>(&t.payload);
    const auto* shape = transfer != nullptr ? nullptr : &task_layout(s, r.graph, t, layouts).shape;
    const int ranks = transfer != nullptr ? 2 : shape->workers();
    const int nodes =
        transfer != nullptr ? (transfer->src / per_node == transfer->dst / per_node ? 1 : 2) : shape->nodes;
    ++calls[{std::string(dag::collective_name(dag::collective_of(t))), dag::bytes_of(t), ranks, nodes}];
  }
  OrderedJson collectives = OrderedJson::array();
  for (const auto& [key, count] : calls) {
    const auto& [name, bytes, ranks, nodes] = key;
    collectives.push_back({{"collective", name},
                           {"bytes", fmt::format("{} B", bytes)},
                           {"ranks", ranks},
                           {"nodes", nodes},
                           {"count", count}});
  }
  plan["collectives"] = std::move(collectives);
  return plan;
}

int probe_plan_command(const std::string& path, const std::vector<std::string>& overrides, const std::string& out) {
  const auto s = load_scenario(path, overrides, SweepBlock::ignored);
  const auto plan = probe_plan(s);
  write_file_atomic(out, plan.dump(2) + "\n");
  int convolutions = 0, gemms = 0, memory = 0;
  for (const auto& l : plan["layers"]) {
    const auto kernel = l["kernel"].get<std::string>();
    convolutions += kernel == "convolution" ? 1 : 0;
    gemms += kernel == "gemm" || kernel == "batched_gemm" ? 1 : 0;
    memory += kernel == "memory" ? 1 : 0;
  }
  int calls = 0;
  for (const auto& c : plan["collectives"])
    calls += c["count"].get<int>();
  fmt::print("{}: {} layers of {} at batch {} ({} convolutions, {} GEMMs, {} memory-bound), {} selections, {} "
             "PowerSGD matrix shapes, {} collective calls in {} sizes\nwrote {}\n",
             s.name, plan["layers"].size(), s.model.name, s.batch_per_gpu, convolutions, gemms, memory,
             plan["selection"].size(), plan["low_rank"].size(), calls, plan["collectives"].size(), out);
  return 0;
}

} // namespace ddlsim::sim
