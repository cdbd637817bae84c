// Parsing of `parallelism` and `pipeline` (sim/spec/parallelism.hpp).
#include "sim/spec/parallelism.hpp"

#include "sim/network/communicator.hpp"

#include "core/error.hpp"
#include "sim/spec/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <numeric>
#include <string>

namespace ddlsim::sim {

namespace {
// One name table per enum, by enumerator; the parser offers the first three partitions (explicit layers are given
// as `layers`, not by name).
constexpr std::array<std::string_view, 4> kPartitionNames{"uniform", "balanced", "pipedream", "explicit"};
constexpr std::array<std::string_view, 4> kRecomputeNames{"none", "full", "selective", "except-last"};
static_assert(kPartitionNames.size() == static_cast<std::size_t>(PartitionKind::explicit_layers) + 1);
static_assert(kRecomputeNames.size() == static_cast<std::size_t>(dag::Recompute::except_last) + 1);
} // namespace

std::string_view partition_name(PartitionKind k) {
  return kPartitionNames.at(static_cast<std::size_t>(k));
}

std::string_view recompute_name(dag::Recompute k) {
  return kRecomputeNames.at(static_cast<std::size_t>(k));
}

namespace {

// The registered schedules' names, in registration order (dag/CMakeLists.txt).
std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const auto* info : dag::pipeline_schedules())
    names.emplace_back(info->name);
  return names;
}

// The registered schedules that have a property, for messages: "a", "a or b".
std::string schedules_that(bool dag::PipelineScheduleInfo::*property) {
  std::vector<std::string_view> names;
  for (const auto* info : dag::pipeline_schedules())
    if (info->*property)
      names.push_back(info->name);
  return fmt::format("{}", fmt::join(names, " or "));
}
const std::vector<std::string> kPartitions(kPartitionNames.begin(), kPartitionNames.end() - 1); // not "explicit"
const std::vector<std::string> kRecompute(kRecomputeNames.begin(), kRecomputeNames.end());

template <class Enum> Enum enum_at(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<Enum>(std::find(names.begin(), names.end(), name) - names.begin());
}

PipelineSpec parse_pipeline(ObjectReader& r, const Scenario& s, int stages) {
  PipelineSpec p;
  p.schedule = &dag::pipeline_schedule(r.optional_choice("schedule", schedule_names()).value_or("1f1b"));
  p.micro_batches = static_cast<int>(r.integer("micro_batches", 1, 1 << 20));
  const bool interleaved = p.schedule->interleaved;
  p.virtual_stages = static_cast<int>(r.optional_integer("virtual_stages", 1, 1 << 10).value_or(interleaved ? 2 : 1));
  // v = 1 (one chunk per GPU) is every schedule's own, so that a sweep can zip schedules with their v.
  if (p.virtual_stages > 1 && !interleaved)
    r.fail("virtual_stages",
           fmt::format("only {} runs virtual stages", schedules_that(&dag::PipelineScheduleInfo::interleaved)));
  if (interleaved && p.micro_batches % stages != 0)
    r.fail("micro_batches", fmt::format("{} needs micro-batches divisible by the {} pipeline stages "
                                        "(as Megatron-LM), got {}",
                                        p.schedule->name, stages, p.micro_batches));
  const int virtual_stages = stages * p.virtual_stages;
  // The schedule simulates every micro-batch on every virtual stage: 16,384 micro-batches on 4 stages took 11 s and
  // 0.7 GiB (release build), and the cost grows faster than the count.
  constexpr std::int64_t kMaxPasses = std::int64_t{1} << 16;
  if (const auto passes = std::int64_t{p.micro_batches} * virtual_stages; passes > kMaxPasses)
    r.fail("micro_batches", fmt::format("{} micro-batches x {} virtual stages = {} micro-batch passes to simulate; "
                                        "the limit is {} (16,384 on 4 stages took 11 s and 0.7 GiB)",
                                        p.micro_batches, virtual_stages, passes, kMaxPasses));
  const int layers = static_cast<int>(s.model.layers.size());
  if (virtual_stages > layers)
    r.fail_here(fmt::format("{} virtual stages ({} stages x {}) for a model of {} layers", virtual_stages, stages,
                            p.virtual_stages, layers));
  if (const Json* partition = r.optional("partition"); partition != nullptr && partition->is_array()) {
    p.partition = PartitionKind::explicit_layers;
    const std::string at = r.path("partition");
    if (partition->size() != static_cast<std::size_t>(virtual_stages))
      throw InputError(
          s.file, at,
          fmt::format("expected {} layer counts (one per virtual stage), got {}", virtual_stages, partition->size()));
    for (std::size_t i = 0; i < partition->size(); ++i) {
      const auto& count = (*partition)[i];
      if (!count.is_number_integer() || count.get<std::int64_t>() < 1)
        throw InputError(s.file, json_pointer_append(at, i), "expected a layer count of at least 1");
      p.layers_per_stage.push_back(count.get<int>());
    }
    const int sum = std::accumulate(p.layers_per_stage.begin(), p.layers_per_stage.end(), 0);
    if (sum != layers)
      throw InputError(s.file, at, fmt::format("the layer counts add up to {}, the model has {} layers", sum, layers));
  } else if (partition != nullptr) {
    p.partition = enum_at<PartitionKind>(kPartitions, r.choice("partition", kPartitions));
  }
  // The computed partitions cut a transformer between its blocks: at most one virtual stage per block.
  if (p.partition != PartitionKind::explicit_layers && s.model.transformer &&
      virtual_stages > s.model.transformer->layers)
    r.fail_here(fmt::format("{} virtual stages ({} stages x {}) for a transformer of {} blocks: the partition puts at "
                            "least one block on each",
                            virtual_stages, stages, p.virtual_stages, s.model.transformer->layers));
  p.recompute = enum_at<dag::Recompute>(kRecompute, r.optional_choice("recompute", kRecompute).value_or("none"));
  if (r.has("weight_prediction") && !p.schedule->predicts_weights)
    r.fail("weight_prediction",
           fmt::format("only {} predicts weights", schedules_that(&dag::PipelineScheduleInfo::predicts_weights)));
  p.weight_prediction = r.optional_choice("weight_prediction", {"v1", "v2"}).value_or("v1") == "v2"
                            ? dag::WeightPrediction::v2
                            : dag::WeightPrediction::v1;
  if (p.recompute == dag::Recompute::selective && !s.model.transformer)
    r.fail("recompute", fmt::format("selective recomputation recomputes a transformer's attention; {} is not a "
                                    "transformer (use full or except-last)",
                                    s.model.name.empty() ? std::string("the model") : s.model.name));
  return p;
}

// Megatron's tensor split of a transformer: whole query heads per rank, and the MLP's width divided; key/value heads
// divided as Megatron-Core does (attention.py: num_query_groups / t), or each one replicated on t/g ranks where t is
// a multiple of the g groups (as vLLM's QKVParallelLinear does: Megatron-Core refuses it).
void check_tensor_split(ObjectReader& r, const dag::TransformerSpec& tf, int t) {
  if (tf.heads % t != 0 || tf.hidden % t != 0)
    r.fail("tensor", fmt::format("{} does not divide the model's {} attention heads and hidden size {} (Megatron "
                                 "gives each tensor rank whole heads)",
                                 t, tf.heads, tf.hidden));
  const int groups = tf.query_groups();
  if (groups % t != 0 && t % groups != 0)
    r.fail("tensor", fmt::format("{} neither divides the model's {} key/value heads nor is a multiple of them (each "
                                 "rank needs whole key/value heads, split or replicated)",
                                 t, groups));
  if (t > groups && tf.names != dag::DecoderNames::llama)
    r.fail("tensor", fmt::format("{} ranks for {} key/value heads would replicate them, which this model's fused "
                                 "query/key/value projection cannot (Megatron-Core refuses it too); use t dividing {}",
                                 t, groups, groups));
  if (tf.ffn() % t != 0)
    r.fail("tensor", fmt::format("{} does not divide the model's MLP width {} (ffn_hidden)", t, tf.ffn()));
}
} // namespace

void parse_parallelism(std::optional<ObjectReader> parallelism, std::optional<ObjectReader> pipeline, Scenario& s) {
  Parallelism& par = s.parallelism;
  if (parallelism) {
    auto& r = *parallelism;
    par.pipeline = static_cast<int>(r.optional_integer("pipeline", 1, 1 << 20).value_or(1));
    par.tensor = static_cast<int>(r.optional_integer("tensor", 1, 1 << 20).value_or(1));
    if (par.tensor > 1) {
      if (!s.model.transformer)
        r.fail("tensor", fmt::format("tensor parallelism splits a transformer's layers (Megatron-LM); model '{}' is "
                                     "not a transformer (use 1)",
                                     s.model.name));
      check_tensor_split(r, *s.model.transformer, par.tensor);
    }
    par.sequence_parallel = r.optional_boolean("sequence_parallel").value_or(false);
    if (par.sequence_parallel && par.tensor == 1)
      r.fail("sequence_parallel", "sequence parallelism needs tensor parallelism (tensor > 1)");
    const int gpus = s.cluster.workers();
    if (gpus % (par.pipeline * par.tensor) != 0)
      r.fail_here(fmt::format("the cluster's {} GPUs are not divisible by pipeline x tensor = {}", gpus,
                              par.pipeline * par.tensor));
    par.data = gpus / (par.pipeline * par.tensor);
    // Every communicator (a stage's data-parallel group, a stage's tensor group) must have as many GPUs on each of
    // its nodes as the collectives' closed forms and lowerings assume (sim/network/communicator.hpp).
    const auto check_group = [&](const std::vector<int>& ranks, const std::string& what) {
      try {
        (void)layout_of(ranks, s.cluster);
      } catch (const std::invalid_argument& e) {
        r.fail_here(fmt::format(
            "{} (GPUs {}{}) is uneven over the nodes: {}; choose pipeline and tensor so that "
            "each group fills whole nodes or divides one ({} GPUs per node)",
            what, fmt::join(ranks.begin(), ranks.begin() + std::min<std::ptrdiff_t>(8, std::ssize(ranks)), ", "),
            ranks.size() > 8 ? ", ..." : "", e.what(), s.cluster.gpus_per_node));
      }
    };
    for (int stage = 0; stage < par.pipeline; ++stage) {
      std::vector<int> data, tensor;
      for (int k = 0; k < par.data; ++k)
        data.push_back(par.gpu(stage, k));
      for (int j = 0; j < par.tensor; ++j)
        tensor.push_back(par.gpu(stage, 0, j));
      if (par.data > 1)
        check_group(data, fmt::format("stage {}'s data-parallel group", stage));
      if (par.tensor > 1)
        check_group(tensor, fmt::format("stage {}'s tensor-parallel group", stage));
    }
    r.finish();
  }
  if (!pipeline && par.pipeline > 1)
    throw InputError(s.file, "/pipeline",
                     "parallelism.pipeline > 1 needs a pipeline object with at least micro_batches");
  if (!pipeline && par.tensor == 1)
    return;
  if (s.strategy.parameter_server() != nullptr || s.strategy.is(dag::StrategyFamily::scheduled))
    throw InputError(s.file, "/strategy/kind",
                     fmt::format("{} does not combine with a {}: {} gradients are reduced over {} data-parallel group "
                                 "by a collective strategy",
                                 s.strategy.kind(), pipeline ? "pipeline" : "tensor-parallel group",
                                 pipeline ? "a stage's" : "each tensor rank's", pipeline ? "its" : "its own"));
  if (!pipeline) { // tensor parallelism alone: one stage, one micro-batch of batch_per_gpu
    s.pipeline = PipelineSpec{};
    s.pipeline->partition = PartitionKind::uniform;
    return;
  }
  s.pipeline = parse_pipeline(*pipeline, s, par.pipeline);
  pipeline->finish();
}

} // namespace ddlsim::sim
