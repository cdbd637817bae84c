// The probe's GPU side, as seen from the plain C++ driver (main.cpp): what the device is, and a context that runs one
// measurement of the plan (plan.hpp) under the stopping rule (sampler.hpp). Implemented in CUDA (gpu/*.cu); this
// header includes no CUDA header so that the driver compiles with the host compiler.
#pragma once

#include "cuda_probe/plan.hpp"
#include "cuda_probe/sampler.hpp"

#include <memory>
#include <string>

namespace ddlsim::probe::gpu {

/// The number of CUDA devices, or -1 with `error` set (no driver, no device, CUDA_VISIBLE_DEVICES empty, ...).
[[nodiscard]] int device_count(std::string& error);

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int compute_capability_major = 0, compute_capability_minor = 0;
  int multiprocessors = 0;
  double memory_bytes = 0;
  double l2_bytes = 0;
  double max_sm_clock_hz = 0;     ///< cudaDevAttrClockRate
  double max_memory_clock_hz = 0; ///< cudaDevAttrMemoryClockRate
  int memory_bus_bits = 0;
  double sm_clock_hz = 0;      ///< current, from NVML when the driver's libnvidia-ml loads (0: unknown)
  double memory_clock_hz = 0;  ///< current, from NVML (0: unknown)
  std::string driver_version;  ///< NVML's ("580.65.06"), else the CUDA driver API version ("13.0")
  std::string runtime_version; ///< CUDA runtime
  std::string cudnn_version, cublas_version, nccl_version, cusolver_version;
};

/// Describes device `index` (and samples its current clocks).
[[nodiscard]] DeviceInfo describe(int index);

/// What a measurement gives: its statistics, and for collectives the bus bandwidth factor's inputs (nccl-tests'
/// algbw = bytes / time; busbw = algbw x factor).
struct Result {
  Statistics stats;
  std::string note; ///< e.g. the cuDNN algorithm or the cuBLASLt heuristic chosen, the k a selection found
};

/// Owns the device's handles (cuDNN, cuBLASLt, cuBLAS, cuSOLVER), streams, the L2 flush buffer and workspaces for
/// the measurements of one device; NCCL communicators are made on first use (single process: ncclCommInitAll over
/// `options.ranks` local GPUs; several processes: ncclCommInitRank with the id from rendezvous.hpp).
class Context {
public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  virtual ~Context() = default;
  /// Runs `m` (plan.hpp) under `rule`; throws std::runtime_error naming the CUDA/library call that failed.
  [[nodiscard]] virtual Result run(const Measurement& m, const StoppingRule& rule) = 0;
};

/// Multi-process communicator set-up (rendezvous.hpp gives these; world_size 1: single process).
struct Communicator {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string unique_id; ///< ncclUniqueId's bytes (world_size > 1)
};

[[nodiscard]] std::unique_ptr<Context> open(int device, const ProbePlan& plan, const ProbeOptions& options,
                                            const Communicator& comm);

/// The bytes of a fresh ncclUniqueId (rank 0 of a multi-process run makes it and serves it).
[[nodiscard]] std::string nccl_unique_id();

} // namespace ddlsim::probe::gpu
