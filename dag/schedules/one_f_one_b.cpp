// One forward, one backward: PipeDream-Flush's 1F1B (Narayanan et al., ICML 2021) with a flush, and the asynchronous
// schedules that run the same order over the micro-batches unrolled without one: PipeDream (Narayanan et al.,
// SOSP 2019; a weight version stashed per micro-batch in flight), PipeDream-2BW (ICML 2021; two buffered versions,
// an update every m micro-batches) and SpecTrain (Chen et al., 2018; weights predicted instead of stashed).
#include "dag/pipeline.hpp"

#include <algorithm>

namespace ddlsim::dag::builtin {
namespace {

// Rank r runs p - r - 1 warm-up forwards, then alternates forward and backward, then drains its backwards.
void one_f_one_b_order(int stages, int m, int /*chunks*/, int rank, std::vector<PipelineOp>& ops) {
  const int warmup = std::min(stages - rank - 1, m);
  const int remaining = m - warmup;
  for (int i = 0; i < warmup; ++i)
    ops.push_back({true, i, 0});
  for (int i = 0; i < remaining; ++i) {
    ops.push_back({true, warmup + i, 0});
    ops.push_back({false, i, 0});
  }
  for (int i = remaining; i < m; ++i)
    ops.push_back({false, i, 0});
}

int stashed_versions(int stages, int rank, bool /*predicts*/) {
  return stages - rank;
}
int double_buffered(int /*stages*/, int /*rank*/, bool /*predicts*/) {
  return 2;
}
// A stage that predicts keeps the live weights aside while the predicted ones are used.
int predicted_versions(int /*stages*/, int /*rank*/, bool predicts) {
  return predicts ? 2 : 1;
}

} // namespace

extern const PipelineScheduleInfo one_f_one_b{
    .name = "1f1b",
    .description = "one forward, one backward after p - r - 1 warm-up forwards, then a flush (PipeDream-Flush)",
    .order = one_f_one_b_order,
    .weight_versions = one_weight_version,
    .bubble = flushing_bubble,
};

extern const PipelineScheduleInfo pipedream{
    .name = "pipedream",
    .description = "1F1B without a flush, a weight version stashed per micro-batch in flight (PipeDream, SOSP 2019)",
    .asynchronous = true,
    .updates = WeightUpdates::every_micro_batch,
    .order = one_f_one_b_order,
    .weight_versions = stashed_versions,
    .bubble = no_bubble,
};

extern const PipelineScheduleInfo pipedream_2bw{
    .name = "pipedream-2bw",
    .description = "1F1B without a flush, two weight buffers, an update every m micro-batches (PipeDream-2BW)",
    .asynchronous = true,
    .updates = WeightUpdates::every_iteration,
    .order = one_f_one_b_order,
    .weight_versions = double_buffered,
    .bubble = no_bubble,
};

extern const PipelineScheduleInfo spectrain{
    .name = "spectrain",
    .description = "1F1B without a flush, each pass on weights predicted from the momentum (SpecTrain)",
    .asynchronous = true,
    .predicts_weights = true,
    .updates = WeightUpdates::every_micro_batch,
    .order = one_f_one_b_order,
    .weight_versions = predicted_versions,
    .bubble = no_bubble,
};

} // namespace ddlsim::dag::builtin
