// TernGrad (Wen, Xu, Yan, Wu, Wang, Chen, Li: "TernGrad: Ternary Gradients to Reduce Communication in Distributed
// Deep Learning", NeurIPS 2017): gradients clipped at 2.5 standard deviations, then stochastically ternarised to
// {-1, 0, 1} times a per-tensor scaler. Run per DDP bucket and allgathered, as PyTorch's quantisation comm hooks do.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> plan_terngrad(const StrategyInput& in) {
  auto groups = plan_ddp(in);
  for (auto& g : groups)
    quantise_group(g, in, Quantiser::terngrad);
  return groups;
}

} // namespace ddlsim::dag
