// Compression costs (compression.hpp), and the sparsifying and quantising strategies' shared group builders and
// option parser (strategy.hpp).
#include "dag/compression.hpp"

#include "core/json.hpp"
#include "dag/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ddlsim::dag {

std::string_view selection_name(Selection s) {
  switch (s) {
  case Selection::sort:
    return "sort";
  case Selection::sampling:
    return "sampling";
  case Selection::threshold:
    return "threshold";
  }
  return "?";
}

std::string_view quantiser_name(Quantiser q) {
  switch (q) {
  case Quantiser::qsgd:
    return "qsgd";
  case Quantiser::terngrad:
    return "terngrad";
  case Quantiser::signsgd:
    return "signsgd";
  }
  return "?";
}

std::int64_t selected_elements(std::int64_t m, double density) {
  if (m <= 0)
    return 0;
  const auto k = static_cast<std::int64_t>(std::ceil(density * static_cast<double>(m)));
  return k < 1 ? 1 : (k > m ? m : k);
}

double pair_bytes(double bytes_per_element) {
  return bytes_per_element + 4.0; // value + int32 index
}

double KernelCost::seconds(double memory_bandwidth) const {
  return bytes / memory_bandwidth + launches * kKernelLaunchS;
}

KernelCost sparsification_cost(Selection s, double m, double k, double bytes_per_element) {
  const double e = bytes_per_element;
  const double pairs = k * pair_bytes(e);
  KernelCost c{3 * m * e + m * e, 3}; // error feedback
  const double abs = 2 * m * e;       // |g|: read and write
  const double compact = (m * e + m) + (m + 8 * k);
  switch (s) {
  case Selection::sort:
    c.bytes += kSortPasses * m * e + pairs;
    c.launches += 3;
    break;
  case Selection::sampling: {
    const double samples = std::min(m, std::max(std::ceil(kDgcSampleRatio * m), std::ceil(2 * m / std::max(k, 1.0))));
    c.bytes += abs + kSortPasses * samples * e + compact + pairs;
    c.launches += 6;
    break;
  }
  case Selection::threshold:
    c.bytes += abs + m * e + kThresholdSearchSteps * (m * e + 2 * m) + compact + pairs;
    c.launches += 5 + 2 * kThresholdSearchSteps;
    break;
  }
  return c;
}

double compression_seconds(Selection s, const SelectionCurve* curve, double m, double k, double bytes_per_element,
                           double memory_bandwidth, bool streaming_only) {
  if (curve == nullptr) {
    const auto c = sparsification_cost(s, m, k, bytes_per_element);
    return streaming_only ? c.bytes / memory_bandwidth : c.seconds(memory_bandwidth);
  }
  const KernelCost error_feedback{4 * m * bytes_per_element, 3};
  const double selection = curve->seconds(m, k) - (streaming_only ? curve->fixed_s : 0.0);
  return (streaming_only ? error_feedback.bytes / memory_bandwidth : error_feedback.seconds(memory_bandwidth)) +
         selection;
}

KernelCost sparse_decompression_cost(double m, double received_pairs, double bytes_per_element) {
  const double e = bytes_per_element;
  return {m * e + received_pairs * (pair_bytes(e) + 2 * e), 2};
}

QuantWire quantised_wire(Quantiser q, int levels, double m, int tensors) {
  switch (q) {
  case Quantiser::qsgd:
    return {std::ceil(std::log2(2.0 * levels + 1)), 4 * std::ceil(m / kQsgdBucket)};
  case Quantiser::terngrad:
    return {2, 4.0 * tensors};
  case Quantiser::signsgd:
    return {1, 4.0 * tensors};
  }
  return {};
}

KernelCost quantisation_cost(Quantiser q, double m, double wire, double bytes_per_element) {
  const double e = bytes_per_element;
  switch (q) {
  case Quantiser::qsgd:
    return {m * e + m * e + 2 * m * e + wire, 3};
  case Quantiser::terngrad:
    return {m * e + 2 * m * e + m * e + m * e + 2 * m * e + wire, 5};
  case Quantiser::signsgd:
    return {m * e + m * e + wire, 2};
  }
  return {};
}

KernelCost dequantisation_cost(double m, double wire, int workers, double bytes_per_element) {
  const double e = bytes_per_element;
  return {workers * (wire + 2 * m * e) + 2 * m * e, workers + 1};
}

namespace {
double memory_bandwidth(const StrategyInput& in) {
  if (in.costs.memory_bandwidth <= 0)
    throw std::logic_error("compression needs the GPU's memory bandwidth to cost its kernels");
  return in.costs.memory_bandwidth;
}
} // namespace

void sparsify_group(GradientGroup& g, const StrategyInput& in, Collective collective) {
  if (collective != Collective::allgather && collective != Collective::global_topk)
    throw std::logic_error("sparsify_group: sparse groups go by allgather or global_topk");
  const double bw = memory_bandwidth(in);
  const double e = in.bytes_per_element;
  const double m = static_cast<double>(g.elements);
  const auto& options = options_as<SparsificationOptions>(in.options);
  const std::int64_t selected = selected_elements(g.elements, options.density);
  g.on_wire = Sparsified{.selected = selected};
  const double k = static_cast<double>(selected);
  const double p = in.workers;
  // Payloads in the lowerings' convention: allgather the gathered result (p x k pairs), gTop-k one rank's pairs.
  const double wire_bytes = (collective == Collective::allgather ? p : 1.0) * k * pair_bytes(e);
  const double received = collective == Collective::allgather ? p * k : k;
  const SelectionCurve* curve = options.selection_curve ? &*options.selection_curve : nullptr;
  g.steps = {{.kernel_s = compression_seconds(options.selection, curve, m, k, e, bw),
              .collective = collective,
              .bytes = wire_bytes},
             {.kernel_s = sparse_decompression_cost(m, received, e).seconds(bw)}};
}

void quantise_group(GradientGroup& g, const StrategyInput& in, Quantiser q) {
  const double bw = memory_bandwidth(in);
  const double e = in.bytes_per_element;
  const double m = static_cast<double>(g.elements);
  const int levels = options_as<QuantisationOptions>(in.options).levels.value_or(0); // qsgd's only
  const auto wire = quantised_wire(q, levels, m, static_cast<int>(g.tensors.size()));
  const double per_worker = wire.bytes(m);
  g.on_wire = Quantised{.wire_bits = wire.bits};
  g.steps = {{.kernel_s = quantisation_cost(q, m, per_worker, e).seconds(bw),
              .collective = Collective::allgather,
              .bytes = in.workers * per_worker},
             {.kernel_s = dequantisation_cost(m, per_worker, in.workers, e).seconds(bw)}};
}

std::vector<GradientGroup> plan_quantised_buckets(const StrategyInput& in, Quantiser q) {
  auto groups = ddp_buckets(in, options_as<QuantisationOptions>(in.options).buckets);
  for (auto& g : groups)
    quantise_group(g, in, q);
  return groups;
}

StrategyOptions parse_quantised_bucket_options(ObjectReader& r, const StrategyContext& ctx) {
  QuantisationOptions o;
  o.buckets = parse_bucket_options(r);
  require_memory_bandwidth(r, ctx);
  return o;
}

std::vector<GradientGroup> plan_sparse_whole_model(const StrategyInput& in, Collective collective) {
  auto groups = one_group_after_backward(in);
  for (auto& g : groups)
    sparsify_group(g, in, collective);
  return groups;
}

StrategyOptions parse_sparsification_options(ObjectReader& r, const StrategyContext& ctx) {
  SparsificationOptions o;
  if (const Json* d = r.optional("density")) {
    if (!d->is_number())
      r.fail("density", fmt::format("expected a number in (0, 1], got {}", d->dump()));
    const double density = d->get<double>();
    if (!(density > 0 && density <= 1))
      r.fail("density", fmt::format("{} is outside (0, 1]: the fraction of gradient elements sent", d->dump()));
    o.density = density;
  }
  const auto selection = r.optional_choice("selection", {"sort", "sampling", "threshold"}).value_or("sort");
  o.selection = selection == "sampling"    ? Selection::sampling
                : selection == "threshold" ? Selection::threshold
                                           : Selection::sort;
  if (ctx.selection_curves != nullptr)
    if (const auto it = ctx.selection_curves->find(std::string(selection_name(o.selection)));
        it != ctx.selection_curves->end())
      o.selection_curve = it->second;
  require_memory_bandwidth(r, ctx);
  return o;
}

void require_memory_bandwidth(ObjectReader& r, const StrategyContext& ctx) {
  if (!(ctx.memory_bandwidth > 0))
    r.fail("kind", fmt::format("'{}' costs its compression kernels from the GPU's memory bandwidth: give "
                               "gpu.preset or gpu.memory_bandwidth",
                               ctx.kind));
}

} // namespace ddlsim::dag
