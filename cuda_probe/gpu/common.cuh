// What the probe's CUDA files share: error checks that name the failing call, the device state of one context
// (handles, stream, workspaces, the L2 flush buffer), and the timed sample source: CUDA events around the operation,
// L2 flushed before it outside the timed region (issue #13; nvbench flushes the same way, `l2flush.cuh`).
#pragma once

#include "cuda_probe/gpu/gpu.hpp"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cusolverDn.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace ddlsim::probe::gpu {

[[noreturn]] void fail(const char* call, const std::string& error, const char* file, int line);

#define PROBE_CUDA(call)                                                                                               \
  do {                                                                                                                 \
    const cudaError_t probe_e_ = (call);                                                                               \
    if (probe_e_ != cudaSuccess)                                                                                       \
      ::ddlsim::probe::gpu::fail(#call, cudaGetErrorString(probe_e_), __FILE__, __LINE__);                             \
  } while (0)
#define PROBE_CUDNN(call)                                                                                              \
  do {                                                                                                                 \
    const cudnnStatus_t probe_e_ = (call);                                                                             \
    if (probe_e_ != CUDNN_STATUS_SUCCESS)                                                                              \
      ::ddlsim::probe::gpu::fail(#call, cudnnGetErrorString(probe_e_), __FILE__, __LINE__);                            \
  } while (0)
#define PROBE_CUBLAS(call)                                                                                             \
  do {                                                                                                                 \
    const cublasStatus_t probe_e_ = (call);                                                                            \
    if (probe_e_ != CUBLAS_STATUS_SUCCESS)                                                                             \
      ::ddlsim::probe::gpu::fail(#call, cublasGetStatusString(probe_e_), __FILE__, __LINE__);                          \
  } while (0)
#define PROBE_CUSOLVER(call)                                                                                           \
  do {                                                                                                                 \
    const cusolverStatus_t probe_e_ = (call);                                                                          \
    if (probe_e_ != CUSOLVER_STATUS_SUCCESS)                                                                           \
      ::ddlsim::probe::gpu::fail(#call, "cusolver status " + std::to_string(static_cast<int>(probe_e_)), __FILE__,     \
                                 __LINE__);                                                                            \
  } while (0)

/// A device allocation that grows on demand and is freed with its owner.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  /// At least `bytes` (contents undefined after growing).
  void* get(std::size_t bytes);
  [[nodiscard]] std::size_t size() const { return bytes_; }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct NcclState; // collectives.cu

/// The state of one context: what every measurement needs.
struct Device {
  int index = 0;
  const ProbePlan* plan = nullptr;
  ProbeOptions options;
  Communicator comm;
  cudaStream_t stream = nullptr;
  cudaStream_t side_stream = nullptr; ///< a second stream (overlap)
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cusolverDnHandle_t solver = nullptr;
  DeviceBuffer flush;      ///< twice the L2, written before each timed sample
  DeviceBuffer workspace;  ///< library workspaces (cuDNN, cuBLASLt, cuSOLVER, CUB temporary storage)
  DeviceBuffer a, b, c, d; ///< operands
  std::unique_ptr<NcclState, void (*)(NcclState*)> nccl{nullptr, nullptr};
};

/// Writes the flush buffer on `stream` so that the next operation starts with a cold L2.
void flush_l2(Device& dev, cudaStream_t stream);

/// Times `op(stream)` with CUDA events on dev.stream, flushing L2 before each sample outside the events.
class EventSource final : public SampleSource {
public:
  EventSource(Device& dev, std::function<void(cudaStream_t)> op, bool flush = true);
  ~EventSource() override;
  [[nodiscard]] double sample_s() override;

private:
  Device& dev_;
  std::function<void(cudaStream_t)> op_;
  bool flush_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// One function per measurement group (plan.hpp's Group), in compute.cu, selection.cu and collectives.cu.
Result run_layer(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_gemm(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_memory_bandwidth(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_launch(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_h2d(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_low_rank(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_selection(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_collective(Device& dev, const Measurement& m, const StoppingRule& rule);
Result run_overlap(Device& dev, const Measurement& m, const StoppingRule& rule);
void destroy_nccl(NcclState* state);

} // namespace ddlsim::probe::gpu
