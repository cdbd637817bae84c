// PowerSGD per DDP bucket, as PyTorch's powerSGD_hook: the buckets of the ddp planner (PyTorch's defaults), each
// turned into the hook's chain of kernels and allreduces (dag/powersgd.hpp has the sources and the formulas).
#include "dag/powersgd.hpp"

#include <algorithm>
#include <stdexcept>

namespace ddlsim::dag {

LowRankView powersgd_view(const ParamTensor& t, std::int64_t rank) {
  LowRankView v;
  if (t.shape.empty() || t.numel <= 0)
    return v;
  // matrix = tensor.view(tensor.shape[0], -1); matrix_approximation_rank = min(n, m, rank)
  v.rows = t.shape.front();
  v.cols = t.numel / v.rows;
  v.rank = std::min({rank, v.rows, v.cols});
  v.matrix = t.shape.size() >= 2;
  // _should_compress: compressed_size * min_compression_rate < uncompressed_size. The hook applies it to every
  // tensor; a vector (m = 1) never passes, so only matrices can be compressed.
  const double compressed = static_cast<double>(v.rows + v.cols) * static_cast<double>(v.rank);
  v.compress = compressed * kMinCompressionRate < static_cast<double>(v.rows) * static_cast<double>(v.cols);
  return v;
}

KernelWork gram_schmidt_work(double a, double r, double e) {
  // Column i of r, c = r - i - 1 columns after it: norm (2a FLOPs, reads a), divide (a; reads and writes a), then
  // for c > 0: col * rest (ac; a + ac read, ac written), sum over rows (ac; ac read, c written), times col (ac;
  // c + a read, ac written), rest -= (ac; 2ac read, ac written).
  const double pairs = r * (r - 1) / 2; // sum of c over the columns
  return {.flops = 3 * a * r + 4 * a * pairs, .bytes = e * (3 * a * r + 2 * a * (r - 1) + 7 * a * pairs + 2 * pairs)};
}

double roofline_s(KernelWork w, const WorkerCosts& costs) {
  return std::max(w.flops / costs.peak_flops, w.bytes / costs.memory_bandwidth);
}

std::vector<GradientGroup> plan_powersgd(const StrategyInput& in) {
  if (!(in.costs.memory_bandwidth > 0) || !(in.costs.peak_flops > 0))
    throw std::logic_error("powersgd needs the GPU's peak FLOPS and memory bandwidth to cost its kernels");
  std::vector<const ParamTensor*> params;
  for (const auto& layer : in.model.layers)
    for (const auto& p : layer.params)
      params.push_back(&p);
  const double e = in.bytes_per_element;
  // One kernel: its roofline time and its launch (compression.hpp, kKernelLaunchS).
  auto time = [&](double flops, double bytes) { return roofline_s({flops, bytes}, in.costs) + kKernelLaunchS; };
  // _orthogonalize_gram_schmidt launches, per column, a norm and a division, and for every column but the last a
  // projection of the rest (multiply, sum, multiply, subtract): 6 r - 4 kernels.
  auto gram_schmidt_s = [&](double a, double r) {
    return roofline_s(gram_schmidt_work(a, r, e), in.costs) + (6 * r - 4) * kKernelLaunchS;
  };

  auto groups = plan_ddp(in); // the hook runs once per DDP bucket
  for (auto& g : groups) {
    const double bucket = static_cast<double>(g.elements);
    double dense = 0, p_elements = 0, q_elements = 0;
    // Error feedback: input += error, then a copy of the input for the new error.
    double compress_s = time(bucket, 3 * bucket * e) + time(0, 2 * bucket * e);
    double orthogonalise_s = 0, decompress_s = 0;
    for (const int t : g.tensors) {
      const auto& tensor = *params[static_cast<std::size_t>(t)];
      const auto v = powersgd_view(tensor, in.options.rank);
      if (!v.compress) {
        dense += static_cast<double>(tensor.numel);
        continue;
      }
      ++g.low_rank_matrices;
      const double n = static_cast<double>(v.rows), m = static_cast<double>(v.cols), r = static_cast<double>(v.rank);
      p_elements += n * r;
      q_elements += m * r;
      const double matmul_flops = 2 * n * m * r, matmul_bytes = (n * m + n * r + m * r) * e;
      compress_s += gram_schmidt_s(m, r) + time(matmul_flops, matmul_bytes);         // orthogonalise Q; P = M Q
      orthogonalise_s += gram_schmidt_s(n, r) + time(matmul_flops, matmul_bytes);    // orthogonalise P; Q = M^T P
      decompress_s += time(m * r, 2 * m * r * e) + time(matmul_flops, matmul_bytes); // Q /= p; M = P Q^T
    }
    decompress_s += time(bucket, 3 * bucket * e); // new error = copy - decompressed bucket
    const double unpack_s = dense > 0 ? time(dense, 4 * dense * e) : 0;
    auto allreduce_of = [&](double elements) { return elements > 0 ? Collective::allreduce : Collective::none; };
    // Empty allreduces (a bucket without dense tensors, or without compressed ones) are left out.
    g.stages = {{.kernel_s = compress_s, .collective = allreduce_of(dense), .bytes = dense * e},
                {.kernel_s = unpack_s, .collective = allreduce_of(p_elements), .bytes = p_elements * e},
                {.kernel_s = p_elements > 0 ? orthogonalise_s : 0,
                 .collective = allreduce_of(q_elements),
                 .bytes = q_elements * e},
                {.kernel_s = decompress_s}};
    g.wire_elements = static_cast<std::int64_t>(dense + p_elements + q_elements);
    g.kernel_resource = in.options.separate_compression_stream ? Resource::gpu_compression : Resource::gpu_compute;
  }
  return groups;
}

} // namespace ddlsim::dag
