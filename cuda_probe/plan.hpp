// What the probe measures: the plan that `ddlsim probe-plan` writes for a scenario (docs/calibration.md#probe-plan,
// "ddlsim-probe-plan" version 1) read into plain structs, and the list of measurements the probe runs for it. The
// list is the single source of truth for both `--dry-run` and the GPU run, so that what a dry run prints is what a
// run measures. Plain C++ (no CUDA): it is tested on machines without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddlsim::probe {

/// A plan that cannot be used: names the file and the JSON path (`what()` is the whole line).
class PlanError : public std::runtime_error {
public:
  PlanError(const std::string& file, const std::string& pointer, const std::string& detail);
};

enum class KernelKind { convolution, gemm, batched_gemm, memory };

/// One layer's forward kernel at the plan's batch (dag/kernel_shapes.hpp on the ddlsim side).
struct LayerKernel {
  std::string name;
  std::string kind; ///< the layer's kind in the model ("conv", "fc", "bn", ...)
  KernelKind kernel = KernelKind::memory;
  // convolution: NCHW input, KCRS filters (C per group), stride and padding (height, width), groups
  std::array<std::int64_t, 4> input{};
  std::array<std::int64_t, 4> filters{};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::int64_t groups = 1;
  // gemm and batched_gemm: C[m, n] = A[m, k] B[k, n], `count` of them
  std::int64_t m = 0, n = 0, k = 0, count = 1;
  // memory: bytes read and written by the forward kernel
  double bytes = 0;
};

/// A gradient group a sparsifying strategy selects from: k = `selected` of m = `elements`.
struct SelectionShape {
  std::int64_t elements = 0;
  std::int64_t selected = 0;
};

/// A matrix PowerSGD factorises: n x m at `rank`, `count` of them in the model.
struct LowRankShape {
  std::int64_t n = 0, m = 0, rank = 0, count = 1;
};

/// A collective of one iteration: nccl-tests' size convention is the probe's (the whole buffer for allgather and
/// reduce-scatter), as the plan's bytes are the lowering's.
struct CollectiveShape {
  std::string collective; ///< ddlsim's name: allreduce, allgather, reduce_scatter, broadcast, alltoall, sendrecv, ...
  double bytes = 0;
  int ranks = 0;
  int nodes = 0;
  int count = 1;
};

struct ProbePlan {
  std::string file;
  std::string scenario, model, gpu;
  std::int64_t batch_per_gpu = 0;
  double gradient_bytes_per_element = 4;
  std::vector<LayerKernel> layers;
  std::vector<SelectionShape> selection;
  std::vector<LowRankShape> low_rank;
  std::vector<CollectiveShape> collectives;
};

/// Reads a "ddlsim-probe-plan" version 1 document (PlanError on anything else: unknown keys, wrong types, sizes not
/// positive, a bytes string without its unit).
[[nodiscard]] ProbePlan read_plan(const std::string& path);
[[nodiscard]] ProbePlan parse_plan(const std::string& text, const std::string& file);

enum class Dtype { fp32, fp16, bf16 };
[[nodiscard]] const char* dtype_name(Dtype d);
[[nodiscard]] int dtype_bytes(Dtype d);

/// What to measure beyond the plan, and how (the probe's command line).
struct ProbeOptions {
  Dtype dtype = Dtype::fp32; ///< of the layers' kernels (PyTorch's default; --dtype)
  bool layers = true;        ///< per-layer kernels (--skip layers)
  bool gemm = true;          ///< the GEMM sweep of gemm_sweep_shapes() (--skip gemm)
  bool device = true;        ///< memory bandwidth, launch cost, host-to-device copies (--skip device)
  bool selection = true;     ///< top-k selection (--skip selection)
  bool low_rank = true;      ///< PowerSGD's kernels (--skip low_rank)
  bool collectives = true;   ///< NCCL collectives (--skip collectives)
  bool overlap = true;       ///< compute slowed by a concurrent allreduce (--skip overlap)
  double max_collective_bytes = 1024.0 * 1024 * 1024; ///< the sweep's largest size (--max-bytes)
  int ranks = 1;                                      ///< GPUs in the communicator (all of the node's, or the job's)
  int nodes = 1;
};

enum class Group { layer, gemm, memory_bandwidth, launch, h2d, selection, low_rank, collective, overlap };
[[nodiscard]] const char* group_name(Group g);

/// The GEMM sweep's shapes, sorted by (m, n, k), each of at least kMinSweepGemmFlops (51 of them):
/// - every (m, n, k) of {256, 1024, 4096, 16384}^3 (powers of two: the tile and wave quantisation, small K's epilogue,
///   split-K of a small C over a long K, the memory floor);
/// - squares 2048 and 8192, and 3000, 6000, 10000 (no power of two: partial tiles and waves);
/// - transformer linear layers over 8192 tokens, (n, k): Llama 3 8B's (hidden 4096, 8 key/value heads of 128,
///   feed-forward 14336) QKV (6144, 4096), output (4096, 4096), gate and up together (28672, 4096), down (4096,
///   14336); GPT-3 175B's (hidden 12288) tensor-parallel shards at t = 8, QKV (4608, 12288), output (12288, 1536),
///   up (6144, 12288), down (12288, 6144); GPT-2 small's (hidden 768) QKV (2304, 768), up (3072, 768), down (768,
///   3072);
/// - weight gradients over 65536 tokens (K): 1024 x 1024, 768 x 3072, 4096 x 4096.
/// The FLOP floor keeps the group short: a smaller GEMM's samples take a few microseconds against the L2 flush and the
/// event round trip between them (about 60 us), so that its 0.5 s of samples (sampler.hpp's default rule) would cost
/// seconds of wall time. Estimated, not measured (no GPU yet), from the shape-aware model's times at 80 % of the peak
/// plus those 60 us per sample: about 45 s on an H100 SXM in bf16, 30 s in fp32; 7 s under gpu-check.sh's rule.
struct GemmSweepShape {
  std::int64_t m = 0, n = 0, k = 0;
};
inline constexpr double kMinSweepGemmFlops = 17179869184.0; ///< 2^34 FLOPs = 2 m n k: m n k >= 2^33
[[nodiscard]] std::vector<GemmSweepShape> gemm_sweep_shapes();

/// One measurement: which group it belongs to, a line saying what it runs, and the parameters its group needs (the
/// others are left at their defaults).
struct Measurement {
  Group group = Group::layer;
  std::string label; ///< one line: what runs, with which library and shapes

  // layer: the plan's layer and the pass: "forward", "backward_data", "backward_filter" (convolutions and GEMMs:
  // the weight gradient) or "backward" (memory-bound kernels: twice the forward's traffic)
  int layer = -1;
  std::string pass;
  // gemm: C[m,n] = A[m,k] B[k,n] of the sweep (gemm_sweep_shapes), in the probe's dtype
  GemmSweepShape gemm;
  // memory_bandwidth, h2d: bytes moved (memory: read + written); h2d: from pinned or pageable host memory
  double bytes = 0;
  bool pinned = false;
  // selection: algorithm ("radix_sort", "radix_select", "sampling", "threshold") over m elements choosing k
  std::string algorithm;
  std::int64_t elements = 0, selected = 0;
  // low_rank: the matrix and the step ("p_matmul": P = M Q, "q_matmul": Q = M^T P, "orthogonalise": QR of P)
  LowRankShape matrix;
  std::string step;
  // collective: nccl-tests' name of the collective ("all_reduce", ...), the size, the communicator
  std::string collective;
  int ranks = 0, nodes = 0;
  bool in_place = false; ///< nccl-tests' in-place variant (the result in the send buffer), measured after out-of-place
  // overlap: "alone" or "with_allreduce"
  std::string overlap_case;
};

/// The selection algorithms the probe times, by their probe names, and the calibration's name of each (empty: kept
/// in the probe file only): radix_select is torch.topk's algorithm, ddlsim's `sort`.
struct SelectionAlgorithm {
  const char* probe_name;
  const char* calibration_name;
  const char* what;
};
[[nodiscard]] const std::vector<SelectionAlgorithm>& selection_algorithms();

/// Whether nccl-tests' size of the collective is the whole buffer split over the ranks (all_gather, reduce_scatter,
/// alltoall: src/*.cu GetCollByteCount) rather than one rank's buffer.
[[nodiscard]] bool partitioned_collective(const std::string& nccl_name);

/// nccl-tests' bus bandwidth factor for `ranks` (all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n;
/// broadcast, sendrecv 1).
[[nodiscard]] double busbw_factor(const std::string& nccl_name, int ranks);

/// A size as ddlsim prints it: "64 MiB", "8 B", "1.5 KiB".
[[nodiscard]] std::string size_text(double bytes);

/// nccl-tests' name of a ddlsim collective ("allreduce" -> "all_reduce"); empty when NCCL has none.
[[nodiscard]] std::string nccl_tests_name(const std::string& ddlsim_collective);

/// The sweep of sizes a collective is measured at: 8 B doubling to `max_bytes`, with the plan's sizes of that
/// collective added, each rounded down as nccl-tests does to whole float elements (and, for all_gather,
/// reduce_scatter and alltoall, whose size is the whole buffer, to whole elements per rank); sorted, unique, > 0.
[[nodiscard]] std::vector<double> collective_sizes(const ProbePlan& plan, const std::string& nccl_name,
                                                   double max_bytes, int ranks);

/// Every measurement of `plan` under `options`, in the order the probe runs them.
[[nodiscard]] std::vector<Measurement> measurements(const ProbePlan& plan, const ProbeOptions& options);

} // namespace ddlsim::probe
