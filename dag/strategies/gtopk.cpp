// gTop-k sparsification (Shi, Wang, Chu, Li, Qian, ICDCS 2019): every worker selects its local top-k (with error
// feedback); log2 p rounds of a reduction tree merge pairs of top-k sets into the top-k of their 2k elements, and
// the root broadcasts the global top-k back (sim/network/lowering/global_topk_tree.cpp). Every worker applies the same
// k pairs; the traffic per worker grows with log2 p instead of p.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

namespace builtin {
extern constinit const StrategyInfo gtopk{
    .name = "gtopk",
    .description =
        "global top-k sparsification: log2 p rounds of tree merging, then a broadcast (Shi et al., ICDCS 2019)",
    .family = StrategyFamily::sparsification,
    .keys = kSparsificationKeys,
    .parse = &parse_sparsification_options,
    .plan = [](const StrategyInput& in) { return plan_sparse_whole_model(in, Collective::global_topk); },
};
} // namespace builtin

} // namespace ddlsim::dag
