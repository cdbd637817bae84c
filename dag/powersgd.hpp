// PowerSGD (Vogels, Karimireddy, Jaggi: "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
// Optimization", NeurIPS 2019) as PyTorch runs it: the DDP communication hook powerSGD_hook
// (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py), called once per DDP bucket, in steady state
// (after start_powerSGD_iter, with error feedback and warm start on, the hook's defaults).
//
// Per bucket of N elements, the hook's chain (each arrow waits for the previous step):
//   error feedback on the bucket, Q orthogonalised, P = M Q per matrix   (GPU)
//   -> allreduce of the uncompressed tensors, concatenated (D elements)
//   -> copy them back into the bucket                                     (GPU)
//   -> allreduce of all P's of the bucket, concatenated (sum of n r)
//   -> orthogonalise each P, Q = M^T P                                    (GPU)
//   -> allreduce of all Q's (sum of m r)
//   -> Q /= world size, M = P Q^T, new error = copy - M over the bucket   (GPU)
// A tensor is viewed as n x m (n = shape[0], m = numel / n), r_eff = min(rank, n, m); it is compressed when the
// hook's _should_compress holds, (n + m) r_eff x min_compression_rate < n m (default rate 2); vectors never pass.
// Warm start reuses last iteration's Q instead of drawing a random one: no extra work (the hook orthogonalises Q
// either way, counted below). Traffic per compressed matrix: (n + m) r_eff elements, n r_eff in the P allreduce and
// m r_eff in the Q allreduce; dense tensors as themselves.
//
// Kernel costs, e bytes per element, each op on the roofline max(FLOPs / peak, bytes / bandwidth) of the GPU's
// effective peak and memory bandwidth (with r = 4 every op is memory-bound: 2r/e FLOPs per byte):
//   error feedback   input += error: N FLOPs, 3 N e; clone: 2 N e; new error = copy - M: N FLOPs, 3 N e
//   P = M Q          2 n m r FLOPs, (n m + m r + n r) e          (Q = M^T P and M = P Q^T the same)
//   Gram-Schmidt     of an a x r matrix, the hook's _orthogonalize column by column (norm, divide, project the
//                    rest): 3 a r + 2 a r (r - 1) ~ 2 a r^2 FLOPs, (3 a r + 2 a (r - 1) + 3.5 a r (r - 1) + r (r - 1))
//                    e
//   unpack dense     divide by world size and copy back: D FLOPs, 4 D e;  Q /= world size: m r FLOPs, 2 m r e
// Every op is one kernel launch (kKernelLaunchS, compression.hpp), Gram-Schmidt 6 r - 4 of them (per column a norm
// and a division, and for all but the last a projection of the rest in four ops).
// Not modelled: the first iterations' plain allreduce (start_powerSGD_iter) and the memory of the error and P/Q
// buffers.
#pragma once

#include "dag/compression.hpp"
#include "dag/model.hpp"
#include "dag/strategy.hpp"

#include <cstdint>

namespace ddlsim::dag {

/// PowerSGDState's default min_compression_rate.
inline constexpr double kMinCompressionRate = 2;

/// A parameter tensor as powerSGD_hook views it.
struct LowRankView {
  std::int64_t rows = 0; ///< n = shape[0] (0 for a scalar)
  std::int64_t cols = 0; ///< m = numel / n
  std::int64_t rank = 0; ///< r_eff = min(rank, n, m)
  bool matrix = false;   ///< at least 2 dimensions: a weight matrix (the others are sent dense)
  bool compress = false; ///< _should_compress: (n + m) r_eff x kMinCompressionRate < n m
};
[[nodiscard]] LowRankView powersgd_view(const ParamTensor& t, std::int64_t rank);

/// FLOPs and bytes of memory traffic of one GPU op.
struct KernelWork {
  double flops = 0;
  double bytes = 0;
};
/// Gram-Schmidt of an a x r matrix of e-byte elements, as the hook's _orthogonalize (header comment).
[[nodiscard]] KernelWork gram_schmidt_work(double a, double r, double e);
/// max(FLOPs / peak, bytes / bandwidth) on the worker's effective GPU roofline.
[[nodiscard]] double roofline_s(KernelWork w, const WorkerCosts& costs);

} // namespace ddlsim::dag
