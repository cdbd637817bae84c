// Gradient compression for data-parallel strategies: which collective carries a compressed gradient group, how many
// bytes it puts on the wire, and the GPU kernels around it, costed as memory traffic at the GPU's effective memory
// bandwidth (these kernels stream the gradient and do little arithmetic) plus a launch latency per kernel.
//
// Sparsification wire format (Shi et al., ICDCS 2019, Sec. III): k = ceil(density x m) selected elements of a group
// of m, each a value in the gradient dtype and an int32 index. Quantisation wire formats: see QuantWire.
#pragma once

#include "dag/graph.hpp"

#include <cstdint>
#include <string_view>

namespace ddlsim::dag {

/// How the top-k is selected (strategy.selection).
///  - `sort`: torch.topk's radix select over all m values (exact).
///  - `sampling`: DGC's hierarchical selection (Lin et al., ICLR 2018, Sec. 3; synxlin/deep-gradient-compression,
///    dgc/compression.py `_sparsify`): the threshold is the top-k of a strided 1 % sample, every element is
///    compared with it and the survivors compacted (approximate k).
///  - `threshold`: the threshold is estimated from a Laplacian fit of the gradient (scale b = mean |g|, so that
///    P(|g| > t) = exp(-t / b) = density gives t = b ln(1 / density)) and corrected by a bounded binary search on
///    the count above it (Chen, Liu, Han, J. Zhejiang Univ. 2021; the bounded correction loop as in Shi et al.'s
///    gaussian-k, "Understanding Top-k Sparsification in Distributed Deep Learning", arXiv:1911.08772).
enum class Selection { sort, sampling, threshold };

/// Passes over the values that torch.topk's radix select costs (see compression_traffic_bytes).
inline constexpr double kSortPasses = 36;
/// DGC's sample ratio (dgc/compression.py: sample_ratio = 0.01, at least ceil(2 / compress_ratio) samples, taken here
/// as 2 m / k).
inline constexpr double kDgcSampleRatio = 0.01;
/// Correction steps of the threshold search (Shi et al.'s gaussian-k loop bound: `while loops < 3`).
inline constexpr int kThresholdSearchSteps = 3;
/// Launch latency charged per GPU kernel: 4-6 us per submission measured with CUDA 13 (xiaguan/cuda-kernel-launch-lab,
/// "From Launch Overhead to CUDA Graph"); the selection kernels that compact with nonzero() synchronise with the host,
/// so their launches are not hidden behind the previous kernel.
inline constexpr double kKernelLaunchS = 5e-6;

[[nodiscard]] std::string_view selection_name(Selection s);

/// k of m elements at `density` (at least one when m > 0).
[[nodiscard]] std::int64_t selected_elements(std::int64_t m, double density);

/// Bytes of one selected element on the wire: its value and an int32 index.
[[nodiscard]] double pair_bytes(double bytes_per_element);

/// Memory traffic and kernel launches of a GPU kernel sequence.
struct KernelCost {
  double bytes = 0;
  int launches = 0;
  /// Time at `memory_bandwidth` (B/s): traffic / bandwidth + launches x kKernelLaunchS.
  [[nodiscard]] double seconds(double memory_bandwidth) const;
};

/// The compression before the collective, on m elements of `bytes_per_element` with k selected: error feedback
/// (Stich et al., NeurIPS 2018; Karimireddy et al., ICML 2019: the residual of what was not sent is added to the
/// next gradient) reads the gradient and the residual and writes their sum (3 m e), the selection (below), and the
/// new residual is written with the k selected entries zeroed (m e); three kernels.
/// Selections, by the reads and writes of their kernels:
///  - sort: torch.topk's radix select, calibrated on a published measurement: PyTorch 2.6 takes 3.56 ms for the
///    top-100 of 100 M float32 and 36.6 ms for 1 B on an NVIDIA H20 (4.0 TB/s; PyTorch PR #164459), 35.6-36.6 ps per
///    element, i.e. the time of kSortPasses = 36 passes over the values at the H20's bandwidth; plus writing the k
///    pairs. Three kernels.
///  - sampling: |g| (read and write m e), the sort model on the s = min(m, max(0.01 m, 2 m / k)) samples, the
///    comparison with the threshold (read m e, write a 1-byte mask), nonzero() (read the mask, write int64 indices
///    of the k survivors), gathering the k pairs. Six kernels. DGC's adaptation loop re-selects only when the
///    count misses [0.8 k, 1.3 k], which a 1 % sample makes rare; it is not charged.
///  - threshold: |g| (read and write m e) and its mean (read m e), kThresholdSearchSteps counting steps (read m e,
///    write and reduce a 1-byte mask each), the final comparison and nonzero() (as for sampling), gathering the
///    pairs. 5 + 2 x kThresholdSearchSteps kernels.
[[nodiscard]] KernelCost sparsification_cost(Selection s, double m, double k, double bytes_per_element);

/// A measured cost curve of one selection algorithm (calibration file, `selection`): time = fixed + per_element x m +
/// per_selected x k. When the scenario's calibration has one for its selection, it replaces the traffic model of the
/// selection kernels (error feedback keeps its traffic model).
struct SelectionCurve {
  double fixed_s = 0;
  double per_element_s = 0;
  double per_selected_s = 0;
  [[nodiscard]] double seconds(double m, double k) const { return fixed_s + per_element_s * m + per_selected_s * k; }
};

/// Time of the compression kernels (error feedback and selection) of m elements with k selected, at
/// `memory_bandwidth`: from `curve` when given, else from sparsification_cost. `streaming_only` leaves out the
/// per-kernel costs (launches, the curve's fixed time): the part that grows with the elements.
[[nodiscard]] double compression_seconds(Selection s, const SelectionCurve* curve, double m, double k,
                                         double bytes_per_element, double memory_bandwidth,
                                         bool streaming_only = false);

/// GPU memory traffic of the decompression after a sparse collective: the dense gradient is cleared (m e) and the
/// `received_pairs` pairs are read and added into it (pair bytes read + read-modify-write of e each); two kernels.
[[nodiscard]] KernelCost sparse_decompression_cost(double m, double received_pairs, double bytes_per_element);

/// Quantisation schemes (strategy kinds qsgd, terngrad, signsgd).
enum class Quantiser { qsgd, terngrad, signsgd };
[[nodiscard]] std::string_view quantiser_name(Quantiser q);

/// Elements per QSGD bucket sharing one fp32 norm (Alistarh et al., "QSGD", NeurIPS 2017, Sec. 5: bucket size 512).
inline constexpr double kQsgdBucket = 512;

/// A quantised gradient group on the wire, per worker: `bits` per element plus `scale_bytes` of fp32 scales.
///  - qsgd with s levels: a signed level in {-s..s}, ceil(log2(2s + 1)) bits (s = 127: 8 bits, s = 7: 4 bits, the
///    paper's 8- and 4-bit variants), and one fp32 norm per bucket of 512 elements.
///  - terngrad (Wen et al., NeurIPS 2017): a ternary {-1, 0, 1}, 2 bits, and one fp32 scaler per tensor.
///  - signsgd (Bernstein et al., "signSGD with Majority Vote", ICLR 2019): 1 bit, and one fp32 scale per tensor (the
///    mean magnitude, so that the vote is rescaled).
struct QuantWire {
  double bits = 0;
  double scale_bytes = 0;
  [[nodiscard]] double bytes(double m) const { return m * bits / 8 + scale_bytes; }
};
[[nodiscard]] QuantWire quantised_wire(Quantiser q, int levels, double m, int tensors);

/// The quantisation kernels before the collective on m elements of `bytes_per_element`, writing `wire` bytes:
///  - qsgd: the bucket norms (read m e), uniform random numbers for stochastic rounding (write m e), the quantiser
///    (read the values and the random numbers, write the wire); three kernels.
///  - terngrad: gradient clipping at 2.5 standard deviations (the std: read m e; the clip: read and write m e), the
///    scaler max |g| (read m e), random numbers (write m e) and the ternariser (read 2 m e, write the wire); five
///    kernels.
///  - signsgd: the mean magnitude (read m e) and the bit packing (read m e, write the wire); two kernels.
[[nodiscard]] KernelCost quantisation_cost(Quantiser q, double m, double wire, double bytes_per_element);

/// Decoding after the allgather of p workers' `wire` bytes, as PyTorch's quantisation comm hooks do it
/// (torch/distributed/algorithms/ddp_comm_hooks/quantization_hooks.py: every gathered message is dequantised and
/// summed): p accumulating kernels, each reading one message and updating the dense sum (read + write m e), then one
/// kernel that turns the sum into the mean (qsgd, terngrad) or the rescaled majority sign (signsgd; read + write m e).
[[nodiscard]] KernelCost dequantisation_cost(double m, double wire, int workers, double bytes_per_element);

} // namespace ddlsim::dag
