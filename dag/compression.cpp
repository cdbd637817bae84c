// Sparsification costs (compression.hpp).
#include "dag/compression.hpp"

#include "dag/strategy.hpp"

#include <stdexcept>

#include <cmath>

namespace ddlsim::dag {

std::string_view selection_name(Selection s) {
  switch (s) {
  case Selection::sort:
    return "sort";
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

double compression_traffic_bytes(Selection s, double m, double k, double bytes_per_element) {
  const double e = bytes_per_element;
  const double error_feedback = 3 * m * e + m * e;
  double selection = 0;
  switch (s) {
  case Selection::sort:
    selection = kSortPasses * m * e + k * pair_bytes(e);
    break;
  }
  return error_feedback + selection;
}

double decompression_traffic_bytes(double m, double received_pairs, double bytes_per_element) {
  const double e = bytes_per_element;
  return m * e + received_pairs * (pair_bytes(e) + 2 * e);
}

std::vector<GradientGroup> plan_sparse_whole_model(const StrategyInput& in, Collective collective) {
  auto groups = plan_bsp(in);
  if (groups.empty())
    return groups;
  if (in.costs.memory_bandwidth <= 0)
    throw std::logic_error("sparsification needs the GPU's memory bandwidth to cost its kernels");
  auto& g = groups.front();
  const double e = in.bytes_per_element;
  const double m = static_cast<double>(g.elements);
  g.selected = selected_elements(g.elements, in.options.density);
  const double k = static_cast<double>(g.selected);
  const double p = in.workers;
  // Payloads in the lowerings' convention: allgather the gathered result (p x k pairs), gTop-k one rank's pairs.
  const double wire_bytes = (collective == Collective::allgather ? p : 1.0) * k * pair_bytes(e);
  const double received = collective == Collective::allgather ? p * k : k;
  g.stages = {{.kernel_s = compression_traffic_bytes(in.options.selection, m, k, e) / in.costs.memory_bandwidth,
               .collective = collective,
               .bytes = wire_bytes},
              {.kernel_s = decompression_traffic_bytes(m, received, e) / in.costs.memory_bandwidth}};
  return groups;
}

} // namespace ddlsim::dag
