// GPipe (Huang et al., NeurIPS 2019): every micro-batch's forward, then every backward in reverse order, then a flush.
#include "dag/pipeline.hpp"

namespace ddlsim::dag::builtin {
namespace {

void gpipe_order(int /*stages*/, int m, int /*chunks*/, int /*rank*/, std::vector<PipelineOp>& ops) {
  for (int i = 0; i < m; ++i)
    ops.push_back({true, i, 0});
  for (int i = m; i-- > 0;)
    ops.push_back({false, i, 0});
}

} // namespace

extern const PipelineScheduleInfo gpipe{
    .name = "gpipe",
    .description = "all forwards, then all backwards, then a flush (Huang et al., NeurIPS 2019)",
    .order = gpipe_order,
    .weight_versions = one_weight_version,
    .bubble = flushing_bubble,
};

} // namespace ddlsim::dag::builtin
