// Parsing of `sharding` (sim/spec/sharding.hpp): the keys, and the combinations the frameworks (or ddlsim) refuse.
#include "sim/spec/sharding.hpp"

#include "dag/pipeline.hpp"
#include "sim/network/communicator.hpp"
#include "sim/spec/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

namespace {

const std::vector<std::string> kDTypeChoices(dag::kDTypeNames.begin(), dag::kDTypeNames.end());

bool has_blocks(const dag::Model& model) {
  return std::any_of(model.layers.begin(), model.layers.end(), [](const dag::Layer& l) { return l.block >= 0; });
}

// The GPUs a shard group (or a replica group) spans must lie evenly over the nodes, as every communicator does.
void check_layout(ObjectReader& r, const Scenario& s, const std::vector<int>& ranks, const std::string& what) {
  try {
    (void)layout_of(ranks, s.cluster);
  } catch (const std::invalid_argument& e) {
    r.fail("group", fmt::format("{} is uneven over the nodes: {}; choose a shard group that fills whole nodes or "
                                "divides one ({} GPUs per node)",
                                what, e.what(), s.cluster.gpus_per_node));
  }
}

// `group`: "data", "node" or a number of GPUs dividing the data-parallel group.
void read_group(ObjectReader& r, const Scenario& s, ShardingSpec& sh) {
  const int d = data_parallel_degree(s);
  sh.shard_size = d;
  const Json* g = r.optional("group");
  if (g == nullptr)
    return;
  const std::string expected =
      fmt::format("expected \"data\", \"node\" or a number of GPUs that divides the data-parallel group of {}", d);
  if (g->is_string()) {
    sh.group = g->get<std::string>();
    if (sh.group != "data" && sh.group != "node")
      r.fail("group", fmt::format("{}, got \"{}\"", expected, clip_user_text(sh.group)));
    if (sh.group == "node")
      sh.shard_size = std::min(d, s.cluster.gpus_per_node);
  } else if (g->is_number_integer()) {
    const auto n = g->get<std::int64_t>();
    if (n < 1 || n > d || d % n != 0)
      r.fail("group", fmt::format("{}, got {}", expected, n));
    sh.shard_size = static_cast<int>(n);
    sh.group = std::to_string(n);
  } else {
    r.fail("group", expected);
  }
  if (d % sh.shard_size != 0)
    r.fail("group",
           fmt::format("a node's {} GPUs do not divide the data-parallel group of {}", s.cluster.gpus_per_node, d));
  if (sh.shard_size == d || s.pipeline) // HSDP with a pipeline or tensor parallelism: check_parallelism refuses it
    return;
  std::vector<int> shard, replica;
  for (int k = 0; k < sh.shard_size; ++k)
    shard.push_back(k);
  for (int k = 0; k < d; k += sh.shard_size)
    replica.push_back(k);
  check_layout(r, s, shard, fmt::format("a shard group of {} GPUs", sh.shard_size));
  check_layout(r, s, replica, fmt::format("a replica group of {} GPUs (one per shard group)", replica.size()));
}

// `unit`: "layer", "block" or a size.
void read_unit(ObjectReader& r, const Scenario& s, ShardingSpec& sh) {
  sh.unit = has_blocks(s.model) ? dag::UnitKind::block : dag::UnitKind::layer;
  const Json* u = r.optional("unit");
  if (u == nullptr)
    return;
  const std::string expected = "expected \"layer\", \"block\" or a size such as \"50 MB\"";
  if (!u->is_string())
    r.fail("unit", expected);
  const auto text = u->get<std::string>();
  if (text == "layer" || text == "block") {
    sh.unit = text == "layer" ? dag::UnitKind::layer : dag::UnitKind::block;
    if (sh.unit == dag::UnitKind::block && !has_blocks(s.model))
      r.fail("unit",
             fmt::format("model '{}' has no blocks (transformer layers): use \"layer\" or a size", s.model.name));
    return;
  }
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text.front())) == 0)
    r.fail("unit", fmt::format("{}, got \"{}\"", expected, clip_user_text(text)));
  sh.unit = dag::UnitKind::size;
  sh.unit_bytes = parse_quantity_at(*u, Dimension::bytes, r.file(), r.path("unit"), 0, true);
}

bool compresses(const dag::Strategy& st) {
  return st.is(dag::StrategyFamily::sparsification) || st.is(dag::StrategyFamily::quantisation) ||
         st.is(dag::StrategyFamily::low_rank);
}

// `reshard_after_forward`: true (every unit but the last, FSDP2's default), false, or "all" (the last too).
void read_reshard(ObjectReader& r, ShardingSpec& sh) {
  const Json* v = r.optional("reshard_after_forward");
  if (v == nullptr)
    return;
  if (v->is_boolean()) {
    sh.reshard_after_forward = v->get<bool>();
  } else if (v->is_string() && v->get<std::string>() == "all") {
    sh.reshard_last = true;
  } else {
    r.fail("reshard_after_forward", "expected true (every unit but the last), false or \"all\" (the last unit too)");
  }
}

// `offload` and `host_memory_bandwidth`: what frameworks offload, at which stages, over which link.
void read_offload(ObjectReader& r, const Scenario& s, ShardingSpec& sh) {
  const std::vector<std::string> names(kOffloadNames.begin(), kOffloadNames.end());
  const auto offload = r.optional_choice("offload", names).value_or(names.front());
  sh.offload = static_cast<Offload>(std::find(names.begin(), names.end(), offload) - names.begin());
  if (const auto bw = r.optional_quantity("host_memory_bandwidth", Dimension::bandwidth, 0, true)) {
    sh.host_memory_bandwidth = *bw;
    sh.host_memory_bandwidth_given = true;
  }
  if (sh.offload == Offload::none)
    return;
  if (sh.stage == 0)
    r.fail("offload", "offloading applies to sharded state: set sharding.stage 1-3 (DeepSpeed's offload_optimizer "
                      "works with ZeRO stages 1-3)");
  if (sh.offload == Offload::parameters && sh.stage < 3)
    r.fail("offload", fmt::format("\"parameters\" offloads the parameter shards of stage 3 (DeepSpeed's offload_param "
                                  "is available only with ZeRO stage 3); stage {} keeps whole parameters on every GPU: "
                                  "use \"optimizer\"",
                                  sh.stage));
  if (s.gpu.host_link <= 0)
    r.fail("offload", "offloading copies state over each GPU's host link: give gpu.host_link (e.g. \"32 GB/s\" for "
                      "PCIe 4.0 x16) or a GPU preset");
}

// Strategies whose gradients the sharded schedule reduces: the dense ones, DDP's buckets and Horovod's fusion
// (stages 1-2); stage 3 reduces each unit's gradients (wfbp), or merges consecutive units (mg-wfbp).
void check_strategy(const Scenario& s, const ShardingSpec& sh, const std::string& file) {
  const auto& st = s.strategy;
  const auto refuse = [&](const std::string& why) {
    throw InputError(file, "/strategy/kind", fmt::format("'{}' with sharding.stage {}: {}", st.kind(), sh.stage, why));
  };
  if (st.parameter_server() != nullptr)
    refuse("parameter servers keep the model state on the servers; sharding applies to collective strategies "
           "(bsp, wfbp, mg-wfbp, ddp, fusion)");
  if (st.is(dag::StrategyFamily::scheduled))
    refuse("ByteScheduler lets the next iteration's forward start on a layer as soon as its partitions are updated, "
           "across the iteration barrier, while a sharded step waits for the reductions of the rank's whole shard; "
           "use ddp, wfbp or mg-wfbp");
  if (st.get_if<dag::TracedOptions>() != nullptr)
    refuse("a traced run's collectives are replayed as they were recorded");
  if (compresses(st) && sh.stage >= 2)
    refuse("stages 2-3 shard the gradients by reduce-scattering them, and a compressed message (top-k pairs, "
           "quantised values, low-rank factors) is gathered or allreduced whole; compression shards with stage 1, "
           "where every GPU receives the decompressed gradient and steps on its shard of the optimizer state");
  if (compresses(st) && sh.shard_size < data_parallel_degree(s))
    refuse(fmt::format("HSDP (sharding.group {}) reduces in two levels, reduce-scatter then allreduce, which a "
                       "compressed exchange does not have; use group \"data\"",
                       sh.group));
  const bool whole_gradient = st.is(dag::StrategyFamily::dense) && st.kind() == "bsp";
  if (sh.stage >= 2 && whole_gradient)
    refuse("bsp reduces the whole gradient after backward, holding every gradient unsharded until then; stages 2-3 "
           "shard gradients as they are reduced (use wfbp, mg-wfbp or ddp)");
  if (sh.stage == 3 && !st.is(dag::StrategyFamily::dense))
    refuse("stage 3 reduces each unit's gradients as FSDP and ZeRO-3 do: use wfbp (one reduce-scatter per unit) "
           "or mg-wfbp (consecutive units merged optimally)");
}

// The flushing schedules' names, for the refusal of the asynchronous ones.
std::string flushing_schedules() {
  std::vector<std::string_view> names;
  for (const auto* info : dag::pipeline_schedules())
    if (!info->asynchronous)
      names.push_back(info->name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Pipelines and tensor parallelism: stage 1 is Megatron-Core's distributed optimizer (use_distributed_optimizer:
// megatron/core/optimizer/distrib_optimizer.py), sharded over each stage's whole data-parallel group; DeepSpeed
// refuses stages 2-3 with a pipeline; the rest is not modelled yet.
void check_parallelism(const Scenario& s, const ShardingSpec& sh, const std::string& file) {
  const auto& par = s.parallelism;
  if (!s.pipeline)
    return;
  const std::string with = par.pipeline > 1 ? "a pipeline"
                           : par.tensor > 1 ? "tensor parallelism"
                                            : "a pipeline object (one stage)";
  if (sh.stage >= 2 && par.pipeline > 1)
    throw InputError(file, "/sharding/stage",
                     fmt::format("stage {} with a pipeline of {} stages: DeepSpeed refuses ZeRO stages 2 and 3 with "
                                 "pipeline parallelism (deepspeed/runtime/pipe/engine.py); use stage 1",
                                 sh.stage, par.pipeline));
  if (sh.stage >= 2)
    throw InputError(file, "/sharding/stage",
                     fmt::format("stage {} with {} is not modelled yet: with {} sharding is stage 1 (Megatron-Core's "
                                 "distributed optimizer)",
                                 sh.stage, with, with));
  if (sh.shard_size != data_parallel_degree(s))
    throw InputError(file, "/sharding/group",
                     fmt::format("shard groups of {} GPUs (HSDP) with {} are not modelled yet: with {} the shard "
                                 "group is each stage's whole data-parallel group of {} GPUs (\"data\")",
                                 sh.shard_size, with, with, data_parallel_degree(s)));
  if (s.pipeline->schedule->asynchronous)
    throw InputError(file, "/pipeline/schedule",
                     fmt::format("sharding with the asynchronous schedule '{}' is not modelled yet: Megatron-Core's "
                                 "distributed optimizer steps once per iteration, after the flush (use {})",
                                 s.pipeline->schedule->name, flushing_schedules()));
}

} // namespace

void parse_sharding(ObjectReader r, Scenario& s) {
  ShardingSpec sh;
  sh.stage = static_cast<int>(r.optional_integer("stage", 0, 3).value_or(0));
  read_group(r, s, sh);
  read_unit(r, s, sh);
  sh.prefetch = static_cast<int>(r.optional_integer("prefetch", 0, 1024).value_or(1));
  read_reshard(r, sh);
  sh.param_dtype = dag::find_dtype(
      r.optional_choice("param_dtype", kDTypeChoices).value_or(std::string(dag::dtype_name(s.gradient_dtype))));
  sh.reduce_dtype = dag::find_dtype(
      r.optional_choice("reduce_dtype", kDTypeChoices).value_or(std::string(dag::dtype_name(s.gradient_dtype))));
  read_offload(r, s, sh);
  r.finish();
  sh.ring_gathers_by_default = !s.algorithms.contains(Collective::allgather);
  sh.gather_algorithm = sh.ring_gathers_by_default ? find_lowering(Collective::allgather, "ring")
                                                   : s.algorithms.at(Collective::allgather);
  if (sh.stage >= 1) {
    check_strategy(s, sh, r.file());
    check_parallelism(s, sh, r.file());
    if (s.backup_workers > 0)
      throw InputError(r.file(), "/strategy/backup_workers",
                       "backup workers drop the slowest replicas' gradients, but with sharding.stage >= 1 each rank "
                       "owns a shard of the model state that no other rank updates");
  }
  s.sharding = sh;
}

bool exchanges_compressed(const Scenario& s) {
  return sharded(s) != nullptr && compresses(s.strategy);
}

const ShardingSpec* sharded(const Scenario& s) {
  return s.sharding && s.sharding->stage >= 1 ? &*s.sharding : nullptr;
}

} // namespace ddlsim::sim
