// Top-k sparsification (Aji & Heafield, EMNLP 2017; Lin et al., DGC, ICLR 2018): after backward every worker
// selects the k = density x m largest-magnitude elements of its whole gradient (with error feedback) and the
// workers allgather their (value, index) pairs; each adds the p x k pairs it received. The traffic per worker
// grows linearly with p: (p-1) k pairs received.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

namespace builtin {
extern constinit const StrategyInfo topk{
    .name = "topk",
    .description = "local top-k sparsification of the whole gradient, allgather of (value, index) pairs",
    .family = StrategyFamily::sparsification,
    .keys = kSparsificationKeys,
    .parse = &parse_sparsification_options,
    .plan = [](const StrategyInput& in) { return plan_sparse_whole_model(in, Collective::allgather); },
};
} // namespace builtin

} // namespace ddlsim::dag
