// Megatron-LM's interleaved 1F1B (Narayanan et al., SC 2021, §2.2): each rank runs v model chunks (virtual stages
// chunk x p + rank), its k-th virtual micro-batch on chunk (k mod pv) / p; the bubble shrinks by v.
#include "dag/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace ddlsim::dag::builtin {
namespace {

void interleaved_order(int p, int m, int v, int rank, std::vector<PipelineOp>& ops) {
  if (m % p != 0)
    throw std::invalid_argument(fmt::format(
        "pipeline_ops: interleaved-1f1b needs micro-batches divisible by the stages (Megatron), got {} and {}", m, p));
  const int total = m * v;
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  const int remaining = total - warmup;
  // Megatron's get_model_chunk_id and get_microbatch_id_in_model_chunk for the k-th virtual micro-batch.
  const auto op = [&](int k, bool forward) {
    const int chunk = (k % (p * v)) / p;
    return PipelineOp{forward, (k / (p * v)) * p + k % p, forward ? chunk : v - 1 - chunk};
  };
  for (int k = 0; k < warmup; ++k)
    ops.push_back(op(k, true));
  for (int i = 0; i < remaining; ++i) {
    ops.push_back(op(warmup + i, true));
    ops.push_back(op(i, false));
  }
  for (int i = remaining; i < total; ++i)
    ops.push_back(op(i, false));
}

} // namespace

extern const PipelineScheduleInfo interleaved_1f1b{
    .name = "interleaved-1f1b",
    .description = "Megatron's interleaved 1F1B: v model chunks per rank, the bubble divided by v (SC 2021)",
    .interleaved = true,
    .order = interleaved_order,
    .weight_versions = one_weight_version,
    .bubble = flushing_bubble,
};

} // namespace ddlsim::dag::builtin
