// From `ddlsim-probe` output (the "ddlsim-probe" JSON, cuda_probe/results.hpp; docs/calibration.md#probe-file) to a
// calibration: per-layer forward and backward kernel times at the plan's batch, the top-k selection curves fitted to
// fixed + per_element m + per_selected k, the collectives as measured tables with their α-β fit (the same path as
// nccl-tests logs), and the host-to-device bandwidth. What the calibration has no entry for (launch cost, memory
// bandwidth, PowerSGD's kernels, the overlap slowdown, the full radix sort) is reported in notes.
#pragma once

#include "calibrate/nccl_tests.hpp"
#include "dag/calibration.hpp"

#include <map>
#include <string>
#include <vector>

namespace ddlsim::calibrate {

/// One measurement's median time and its point: what a probe file gives, read strictly.
struct ProbeFile {
  std::string path;
  int version = 1;         ///< of the file: 1, or 2 (which may hold the "gemm" group)
  std::string device;      ///< "NVIDIA H100 80GB HBM3 (sm 9.0, driver ..., CUDA ..., cuDNN ..., NCCL ...)"
  std::string device_name; ///< the CUDA device's name alone ("NVIDIA H100 80GB HBM3")
  int multiprocessors = 0; ///< the device's SMs (0: not given)
  std::string dtype;       ///< of the layers and the GEMM sweep
  std::int64_t batch_per_gpu = 0;
  /// per layer name, in the file's order: the sum of its kernels' median times per pass
  struct Layer {
    std::string name;
    double forward_s = 0;
    double backward_data_s = 0;
    double backward_filter_s = 0;
    double backward_s = 0; ///< memory-bound kernels
    bool first = false;    ///< the plan's first layer (autograd computes no gradient for the batch)
  };
  std::vector<Layer> layers;
  /// The GEMM sweep (version 2, group "gemm"): C[m x n] = A[m x k] B[k x n] in `dtype`, its median time.
  struct GemmPoint {
    std::int64_t m = 0, n = 0, k = 0;
    double time_s = 0;
  };
  std::vector<GemmPoint> gemm;
  struct SelectionPoint {
    double elements = 0, selected = 0, time_s = 0;
  };
  std::map<std::string, std::vector<SelectionPoint>> selection; ///< by probe algorithm name
  struct Bandwidth {
    double bytes = 0, time_s = 0;
  };
  std::vector<Bandwidth> memory, h2d_pinned, h2d_pageable;
  std::optional<double> launch_s;
  std::optional<double> overlap_alone_s, overlap_with_allreduce_s;
  int low_rank = 0;                ///< PowerSGD measurements
  std::vector<std::string> failed; ///< what failed on the GPU ("what: error")
  NcclTestsLog collectives;        ///< as nccl-tests rows (out-of-place and in-place), ranks and nodes per row
};

/// The largest side of a swept GEMM a probe file may give (m, n or k; 2^30, 1,073,741,824).
inline constexpr std::int64_t kMaxGemmSide = std::int64_t{1} << 30;

/// Reads a probe file (version 1 or 2); bad input is an InputError naming the file and JSON path.
[[nodiscard]] ProbeFile read_probe(const std::string& path);
/// read_probe on a parsed document; `path` names it in errors.
[[nodiscard]] ProbeFile parse_probe(const Json& doc, const std::string& path);

/// A selection curve fitted to points: weighted least squares on relative error with non-negative coefficients
/// (per_element always kept), so that a curve spanning decades of sizes fits the small ones as well as the large.
[[nodiscard]] dag::SelectionCurve fit_selection(const std::vector<ProbeFile::SelectionPoint>& points);

/// Adds what `probes` measured to `c` (layers and batch only when `c` has none yet), returning notes on what was
/// used, what was not and why.
[[nodiscard]] std::vector<std::string> add_probe_calibration(dag::Calibration& c, const std::vector<ProbeFile>& probes);

} // namespace ddlsim::calibrate
