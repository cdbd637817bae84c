// Traced: the gradient collectives of a profiled run, as `ddlsim import-trace` found them (docs/traces.md): each call
// with its collective, its size and when it became ready (after the whole backward, or after a layer's backward as
// DDP's buckets do), launched in the listed order. The gradient tensors are shared out over the calls in
// gradient-ready order by their sizes, so that reports can name them; the sizes on the wire are the traced ones.
#include "dag/strategy.hpp"

#include "core/json.hpp"

#include <fmt/format.h>

namespace ddlsim::dag {
namespace {

constexpr std::string_view kKeys[] = {"collectives"};

StrategyOptions parse(ObjectReader& r, const StrategyContext& ctx) {
  TracedOptions o;
  const Json& list = r.required("collectives");
  if (!list.is_array())
    r.fail("collectives", fmt::format("expected an array of {{\"collective\", \"bytes\", \"after\"}}, not {}",
                                      json_type_phrase(list)));
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader c(list[i], r.file(), json_pointer_append(r.path("collectives"), i));
    TracedOptions::Call call;
    const std::string kind = c.choice("collective", {"allreduce", "allgather", "reduce_scatter", "broadcast"});
    call.collective = kind == "allreduce"        ? Collective::allreduce
                      : kind == "allgather"      ? Collective::allgather
                      : kind == "reduce_scatter" ? Collective::reduce_scatter
                                                 : Collective::broadcast;
    call.bytes = c.quantity("bytes", Dimension::bytes);
    const std::string after = c.optional_string("after").value_or("backward");
    if (after != "backward") {
      if (ctx.model == nullptr)
        c.fail("after", "a layer name needs the scenario's model");
      const auto& layers = ctx.model->layers;
      const auto it = std::find_if(layers.begin(), layers.end(), [&](const Layer& l) { return l.name == after; });
      if (it == layers.end())
        c.fail("after", fmt::format("'{}' is not a layer of model '{}' (or \"backward\")", after, ctx.model->name));
      call.after_layer = static_cast<int>(it - layers.begin());
    }
    c.finish();
    o.calls.push_back(call);
  }
  return o;
}

std::vector<GradientGroup> plan(const StrategyInput& in) {
  const auto& calls = options_as<TracedOptions>(in.options).calls;
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  std::vector<GradientGroup> groups;
  double traced = 0, cumulative = 0;
  std::size_t next = 0;
  for (const auto& call : calls) {
    traced += call.bytes;
    GradientGroup g;
    // the tensors whose bytes fall within this call's share of the traced bytes (at least one while any is left)
    while (next < order.size()) {
      const double b = static_cast<double>(tensors[static_cast<std::size_t>(order[next])].numel) * in.bytes_per_element;
      if (!g.tensors.empty() && cumulative + b > traced * (1 + 1e-9) && &call != &calls.back())
        break;
      g.tensors.push_back(order[next++]);
      cumulative += b;
    }
    if (g.tensors.empty() && !order.empty())
      g.tensors.push_back(order.back());
    for (const int t : g.tensors)
      g.elements += tensors[static_cast<std::size_t>(t)].numel;
    g.bytes = call.bytes;
    g.ready_layer = call.after_layer >= 0 ? call.after_layer : 0;
    if (call.collective != Collective::allreduce)
      g.steps = {{.kernel_s = 0, .collective = call.collective, .bytes = call.bytes}};
    groups.push_back(std::move(g));
  }
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo traced{
    .name = "traced",
    .description = "the gradient collectives of a profiled run, as ddlsim import-trace found them",
    .family = StrategyFamily::dense,
    .keys = kKeys,
    .parse = &parse,
    .plan = &plan,
};
} // namespace builtin

} // namespace ddlsim::dag
