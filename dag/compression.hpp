// Gradient sparsification for data-parallel strategies (issue: compression strategies): which collective carries a
// compressed gradient group, how many bytes it puts on the wire, and the GPU kernels around it, costed as memory
// traffic at the GPU's effective memory bandwidth (these kernels stream the gradient and do little arithmetic).
//
// Wire format (Shi et al., ICDCS 2019, Sec. III): k = ceil(density x m) selected elements of a group of m, each a
// value in the gradient dtype and an int32 index.
#pragma once

#include "dag/graph.hpp"

#include <cstdint>
#include <string_view>

namespace ddlsim::dag {

/// How the top-k is selected (strategy.selection).
enum class Selection { sort };

/// Passes over the values that torch.topk's radix select costs (see compression_traffic_bytes).
inline constexpr double kSortPasses = 36;

[[nodiscard]] std::string_view selection_name(Selection s);

/// k of m elements at `density` (at least one when m > 0).
[[nodiscard]] std::int64_t selected_elements(std::int64_t m, double density);

/// Bytes of one selected element on the wire: its value and an int32 index.
[[nodiscard]] double pair_bytes(double bytes_per_element);

/// GPU memory traffic of the compression before the collective, on m elements of `bytes_per_element` with k
/// selected: error feedback (Stich et al., NeurIPS 2018; Karimireddy et al., ICML 2019: the residual of what was
/// not sent is added to the next gradient) reads the gradient and the residual and writes their sum (3 m e), the
/// selection streams the sum (below), and the new residual is written with the k selected entries zeroed (m e).
/// Selection `sort` is torch.topk's radix select, calibrated on a published measurement: PyTorch 2.6 takes
/// 3.56 ms for the top-100 of 100 M float32 and 36.6 ms for 1 B on an NVIDIA H20 (4.0 TB/s; PyTorch PR #164459),
/// 35.6-36.6 ps per element, i.e. the time of kSortPasses = 36 passes over the values at the H20's bandwidth;
/// on other GPUs the same traffic at their effective bandwidth: kSortPasses m e + k pair bytes (writing the
/// result). A measurement on one GPU scaled by bandwidth, until the probe calibrates the user's GPU.
[[nodiscard]] double compression_traffic_bytes(Selection s, double m, double k, double bytes_per_element);

/// GPU memory traffic of the decompression after the collective: the dense gradient is cleared (m e) and the
/// `received_pairs` pairs are read and added into it (pair bytes read + read-modify-write of e each).
[[nodiscard]] double decompression_traffic_bytes(double m, double received_pairs, double bytes_per_element);

} // namespace ddlsim::dag
