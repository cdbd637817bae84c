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

[[nodiscard]] std::string_view selection_name(Selection s);

/// k of m elements at `density` (at least one when m > 0).
[[nodiscard]] std::int64_t selected_elements(std::int64_t m, double density);

/// Bytes of one selected element on the wire: its value and an int32 index.
[[nodiscard]] double pair_bytes(double bytes_per_element);

/// GPU memory traffic of the compression before the collective, on m elements of `bytes_per_element` with k
/// selected: error feedback (Stich et al., NeurIPS 2018; Karimireddy et al., ICML 2019: the residual of what was
/// not sent is added to the next gradient) reads the gradient and the residual and writes their sum (3 m e), the
/// selection streams the sum (below), and the new residual is written with the k selected entries zeroed (m e).
/// Selection `sort` is modelled as a radix select over 32-bit keys in four passes of 8-bit digits, each reading
/// the m values, plus a pass that gathers the k values and indices: 5 m e + k pair bytes. This is an assumption
/// about the kernel's shape, to be replaced by a calibrated cost curve; it is not a measurement.
[[nodiscard]] double compression_traffic_bytes(Selection s, double m, double k, double bytes_per_element);

/// GPU memory traffic of the decompression after the collective: the dense gradient is cleared (m e) and the
/// `received_pairs` pairs are read and added into it (pair bytes read + read-modify-write of e each).
[[nodiscard]] double decompression_traffic_bytes(double m, double received_pairs, double bytes_per_element);

} // namespace ddlsim::dag
