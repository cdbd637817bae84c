// signSGD with majority vote (Bernstein, Zhao, Azizzadenesheli, Anandkumar, ICLR 2019): every worker sends the sign
// of each gradient element (1 bit) and a per-tensor scale; signs do not add, so they are allgathered and every worker
// takes the majority (the sign of their sum). Run per DDP bucket.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> plan_signsgd(const StrategyInput& in) {
  auto groups = plan_ddp(in);
  for (auto& g : groups)
    quantise_group(g, in, Quantiser::signsgd);
  return groups;
}

} // namespace ddlsim::dag
