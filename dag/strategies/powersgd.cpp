// PowerSGD per DDP bucket, as PyTorch's powerSGD_hook: the buckets of the ddp planner (PyTorch's defaults), each
// turned into the hook's chain of kernels and allreduces (dag/powersgd.hpp has the sources and the formulas).
#include "dag/powersgd.hpp"

#include "core/json.hpp"

#include <fmt/format.h>

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

namespace {

constexpr std::string_view kPowersgdKeys[] = {"first_bucket", "bucket_cap", "rank", "compression_stream"};

// The rank must let at least one weight matrix of the model be compressed, and the kernels need the GPU's roofline.
StrategyOptions parse_powersgd_options(ObjectReader& r, const StrategyContext& ctx) {
  PowerSgdOptions o;
  o.buckets = parse_bucket_options(r);
  if (const Json* rank = r.optional("rank")) {
    if (!rank->is_number_integer())
      r.fail("rank",
             fmt::format("expected a positive integer (the rank of the low-rank approximation), got {}", rank->dump()));
    // Parsed JSON holds non-negative integers as unsigned, values set from C++ as signed.
    if (rank->is_number_unsigned() ? rank->get<std::uint64_t>() < 1 : rank->get<std::int64_t>() < 1)
      r.fail("rank", fmt::format("{} is below 1: the rank of the low-rank approximation", rank->dump()));
    o.rank = static_cast<int>(std::min<std::uint64_t>(rank->get<std::uint64_t>(), 1U << 30));
  }
  o.separate_compression_stream =
      r.optional_choice("compression_stream", {"inline", "separate"}).value_or("inline") == "separate";
  const std::string key = r.has("rank") ? "rank" : "kind";
  const Model& model = *ctx.model;
  const ParamTensor* widest = nullptr; // the weight matrix with the largest min(n, m)
  std::int64_t widest_min = 0;
  bool any_compressed = false;
  for (const auto& layer : model.layers)
    for (const auto& p : layer.params) {
      const auto v = powersgd_view(p, o.rank);
      if (!v.matrix)
        continue;
      any_compressed = any_compressed || v.compress;
      if (std::min(v.rows, v.cols) > widest_min) {
        widest_min = std::min(v.rows, v.cols);
        widest = &p;
      }
    }
  if (widest == nullptr)
    r.fail(key,
           fmt::format("model '{}' has no weight matrix (a tensor of 2 or more dimensions) to compress", model.name));
  const auto describe = [&] {
    return fmt::format("{} ({} x {})", widest->name, widest->shape.front(), widest->numel / widest->shape.front());
  };
  if (o.rank > widest_min)
    r.fail(key, fmt::format("{} is above min(n, m) of every weight matrix of '{}', so no matrix can be compressed: "
                            "the largest min(n, m) is {}, of {}",
                            o.rank, model.name, widest_min, describe()));
  if (!any_compressed)
    r.fail(key, fmt::format("at rank {} no weight matrix of '{}' is worth compressing (PyTorch's rule: "
                            "(n + m) x rank x {} < n x m); the largest min(n, m) is {}, of {}",
                            o.rank, model.name, kMinCompressionRate, widest_min, describe()));
  if (!(ctx.memory_bandwidth > 0) || !(ctx.peak_flops > 0))
    r.fail("kind", "'powersgd' costs its matmuls and orthogonalisation on the GPU's roofline: give gpu.preset, or "
                   "gpu.peak_flops and gpu.memory_bandwidth");
  return o;
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

  const auto& options = options_as<PowerSgdOptions>(in.options);
  auto groups = ddp_buckets(in, options.buckets); // the hook runs once per DDP bucket
  for (auto& g : groups) {
    const double bucket = static_cast<double>(g.elements);
    double dense = 0, p_elements = 0, q_elements = 0;
    // Error feedback: input += error, then a copy of the input for the new error.
    double compress_s = time(bucket, 3 * bucket * e) + time(0, 2 * bucket * e);
    double orthogonalise_s = 0, decompress_s = 0;
    int matrices = 0; // tensors sent as low-rank factors
    for (const int t : g.tensors) {
      const auto& tensor = *params[static_cast<std::size_t>(t)];
      const auto v = powersgd_view(tensor, options.rank);
      if (!v.compress) {
        dense += static_cast<double>(tensor.numel);
        continue;
      }
      ++matrices;
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
    g.steps = {{.kernel_s = compress_s, .collective = allreduce_of(dense), .bytes = dense * e},
               {.kernel_s = unpack_s, .collective = allreduce_of(p_elements), .bytes = p_elements * e},
               {.kernel_s = p_elements > 0 ? orthogonalise_s : 0,
                .collective = allreduce_of(q_elements),
                .bytes = q_elements * e},
               {.kernel_s = decompress_s}};
    g.on_wire = LowRank{.low_rank_matrices = matrices,
                        .wire_elements = static_cast<std::int64_t>(dense + p_elements + q_elements)};
    g.kernel_resource = options.separate_compression_stream ? Resource::gpu_compression : Resource::gpu_compute;
  }
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo powersgd{
    .name = "powersgd",
    .description =
        "PowerSGD low-rank compression per DDP bucket, PyTorch's powerSGD_hook (Vogels et al., NeurIPS 2019)",
    .family = StrategyFamily::low_rank,
    .keys = kPowersgdKeys,
    .parse = &parse_powersgd_options,
    .plan = &plan_powersgd,
};
} // namespace builtin

} // namespace ddlsim::dag
