// QSGD (Alistarh, Grubic, Li, Tomioka, Vojnovic: "QSGD: Communication-Efficient SGD via Gradient Quantization and
// Encoding", NeurIPS 2017): each bucket of 512 elements is scaled by its norm and stochastically rounded to one of
// s levels (strategy.levels). Run per DDP bucket, as PyTorch's quantisation comm hooks run, and allgathered
// (compression.hpp gives the wire format and the kernels).
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> plan_qsgd(const StrategyInput& in) {
  auto groups = plan_ddp(in);
  for (auto& g : groups)
    quantise_group(g, in, Quantiser::qsgd);
  return groups;
}

} // namespace ddlsim::dag
