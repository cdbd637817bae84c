// Helpers on trace operators shared by the step analysis and the traced-step writer (traces/ only): name tests,
// event categories, medians, and the layer an operator opens with its parameters from its Input Dims.
#pragma once

#include "traces/analysis.hpp"
#include "traces/kineto.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::traces::detail {

inline constexpr double kUs = 1e-6;

[[nodiscard]] bool contains(std::string_view s, std::string_view part);
[[nodiscard]] bool starts_with(std::string_view s, std::string_view p);
[[nodiscard]] std::string lower(std::string_view s);
[[nodiscard]] bool is_cpu(Category c);
[[nodiscard]] bool is_gpu(Category c);
[[nodiscard]] bool is_nccl(const Event& e);
/// A runtime call that blocks the host until the GPU catches up (cuda*Synchronize, synchronous cudaMemcpy).
[[nodiscard]] bool is_sync(const Event& e);
[[nodiscard]] double median(std::vector<double> v);
[[nodiscard]] std::int64_t numel(const std::vector<std::int64_t>& dims);
/// The layer an operator opens: its kind, or "" when it joins the layer before it.
[[nodiscard]] std::string layer_kind(const Event& e);
/// Parameter shapes and forward FLOPs per sample of a layer-opening operator, from its Input Dims.
void derive_params(const Event& e, TracedLayer& l);

/// Indexes built once per trace.
struct Index {
  std::vector<std::vector<std::size_t>> cpu;     ///< per thread: CPU events sorted by (ts, -dur)
  std::vector<std::vector<std::size_t>> runtime; ///< per thread: runtime calls sorted by ts
  std::vector<std::vector<std::size_t>> memory;  ///< per thread: [memory] events sorted by ts
  std::multimap<std::int64_t, std::size_t> gpu_by_correlation;
};
[[nodiscard]] Index build_index(const KinetoTrace& t);

} // namespace ddlsim::traces::detail
