// NCCL collectives timed as nccl-tests times them (NVIDIA/nccl-tests src/*.cu sizes, doc/PERFORMANCE.md bus bandwidth),
// and a GEMM's slowdown beside a running allreduce (Echo's and Lumos's interference); each sample is the slowest GPU's,
// maxed over the processes, so that every rank's stopping rule stops at the same sample.
#include "cuda_probe/gpu/common.cuh"

#include <cuda_fp16.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#define PROBE_NCCL(call)                                                                                               \
  do {                                                                                                                 \
    const ncclResult_t probe_e_ = (call);                                                                              \
    if (probe_e_ != ncclSuccess)                                                                                       \
      ::ddlsim::probe::gpu::fail(#call, ::ddlsim::probe::gpu::nccl_error_text(probe_e_), __FILE__, __LINE__);          \
  } while (0)

namespace ddlsim::probe::gpu {

namespace {

std::string nccl_error_text(ncclResult_t e) {
  std::string text = ncclGetErrorString(e);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0')
    text += std::string(" (") + last + ")";
  return text;
}

} // namespace

/// The communicator and, per GPU this process drives, its rank's stream, events and buffers.
struct NcclState {
  struct Rank {
    int device = 0;
    int rank = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr, mark = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
    std::size_t send_bytes = 0, recv_bytes = 0;
    float* agree = nullptr; ///< two floats: the values maxed over the ranks
  };
  bool multi_process = false;
  int ranks = 0;           ///< the communicator's size
  std::vector<Rank> local; ///< the ranks of this process: all of them (single process) or one
  bool failed = false;     ///< an error left the communicator in an unknown state: abort it, use it no more
  NcclState() = default;
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState();
};

NcclState::~NcclState() {
  int current = -1;
  cudaGetDevice(&current);
  // while unwinding from an error the peers may be gone or waiting: finalizing would wait for them
  const bool abort = failed || std::uncaught_exceptions() > 0;
  if (!abort)
    for (Rank& r : local)
      if (r.stream != nullptr) {
        cudaSetDevice(r.device);
        cudaStreamSynchronize(r.stream);
      }
  if (abort) {
    for (Rank& r : local)
      if (r.comm != nullptr)
        ncclCommAbort(r.comm);
  } else {
    // finalized together: one thread driving several ranks finalizes them in a group (NCCL's examples)
    ncclGroupStart();
    for (Rank& r : local)
      if (r.comm != nullptr)
        ncclCommFinalize(r.comm);
    ncclGroupEnd();
    for (Rank& r : local)
      if (r.comm != nullptr)
        ncclCommDestroy(r.comm);
  }
  for (Rank& r : local) {
    cudaSetDevice(r.device);
    if (r.send != nullptr)
      cudaFree(r.send);
    if (r.recv != nullptr)
      cudaFree(r.recv);
    if (r.agree != nullptr)
      cudaFree(r.agree);
    for (cudaEvent_t e : {r.start, r.stop, r.mark})
      if (e != nullptr)
        cudaEventDestroy(e);
    if (r.stream != nullptr)
      cudaStreamDestroy(r.stream);
  }
  if (current >= 0)
    cudaSetDevice(current);
}

void destroy_nccl(NcclState* state) {
  delete state;
}

std::string nccl_unique_id() {
  ncclUniqueId id;
  PROBE_NCCL(ncclGetUniqueId(&id));
  static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

namespace {

constexpr std::size_t kOverlapAllreduceBytes = std::size_t{256} << 20;

/// Sets the current device back to the context's when a measurement ends, however it ends.
class RestoreDevice {
public:
  explicit RestoreDevice(int device) : device_(device) {}
  ~RestoreDevice() { cudaSetDevice(device_); }
  RestoreDevice(const RestoreDevice&) = delete;
  RestoreDevice& operator=(const RestoreDevice&) = delete;

private:
  int device_;
};

/// A timing event of the current device.
class Event {
public:
  Event() { PROBE_CUDA(cudaEventCreate(&event_)); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  operator cudaEvent_t() const { return event_; }

private:
  cudaEvent_t event_ = nullptr;
};

NcclState& nccl(Device& dev) {
  if (dev.nccl) {
    if (dev.nccl->failed)
      throw std::runtime_error("nccl: the communicator is unusable after an earlier error");
    return *dev.nccl;
  }
  RestoreDevice restore(dev.index);
  std::unique_ptr<NcclState, void (*)(NcclState*)> state(new NcclState, destroy_nccl);
  if (dev.comm.world_size > 1) {
    // one GPU per process, the id from rank 0 (rendezvous.hpp)
    if (dev.comm.unique_id.size() != sizeof(ncclUniqueId))
      throw std::runtime_error("nccl: the unique id has " + std::to_string(dev.comm.unique_id.size()) + " bytes, not " +
                               std::to_string(sizeof(ncclUniqueId)));
    ncclUniqueId id;
    std::memcpy(&id, dev.comm.unique_id.data(), sizeof id);
    state->multi_process = true;
    state->ranks = dev.comm.world_size;
    state->local.resize(1);
    NcclState::Rank& r = state->local[0];
    r.device = dev.index;
    r.rank = dev.comm.rank;
    PROBE_CUDA(cudaSetDevice(dev.index));
    PROBE_NCCL(ncclCommInitRank(&r.comm, dev.comm.world_size, id, dev.comm.rank));
  } else {
    // one process: the first `ranks` GPUs, rank i on GPU i
    const int ranks = std::max(dev.options.ranks, 1);
    int devices = 0;
    PROBE_CUDA(cudaGetDeviceCount(&devices));
    if (ranks > devices)
      throw std::runtime_error("nccl: " + std::to_string(ranks) + " ranks asked, " + std::to_string(devices) +
                               " GPUs visible");
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks), nullptr);
    std::vector<int> list(static_cast<std::size_t>(ranks));
    for (int i = 0; i < ranks; ++i)
      list[static_cast<std::size_t>(i)] = i;
    PROBE_NCCL(ncclCommInitAll(comms.data(), ranks, list.data()));
    state->ranks = ranks;
    state->local.resize(static_cast<std::size_t>(ranks));
    for (int i = 0; i < ranks; ++i) {
      NcclState::Rank& r = state->local[static_cast<std::size_t>(i)];
      r.device = i;
      r.rank = i;
      r.comm = comms[static_cast<std::size_t>(i)];
    }
  }
  for (NcclState::Rank& r : state->local) {
    PROBE_CUDA(cudaSetDevice(r.device));
    PROBE_CUDA(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    PROBE_CUDA(cudaEventCreate(&r.start));
    PROBE_CUDA(cudaEventCreate(&r.stop));
    PROBE_CUDA(cudaEventCreate(&r.mark));
    PROBE_CUDA(cudaMalloc(&r.agree, 2 * sizeof(float)));
  }
  dev.nccl = std::move(state);
  return *dev.nccl;
}

/// Grows a rank's buffers (zeroed: no NaN from stale memory) to at least these sizes.
void reserve(NcclState::Rank& r, std::size_t send_bytes, std::size_t recv_bytes) {
  PROBE_CUDA(cudaSetDevice(r.device));
  const auto grow = [&r](void*& buffer, std::size_t& have, std::size_t want) {
    if (have >= want)
      return;
    if (buffer != nullptr)
      PROBE_CUDA(cudaFree(buffer));
    buffer = nullptr;
    have = 0;
    PROBE_CUDA(cudaMalloc(&buffer, want));
    have = want;
    PROBE_CUDA(cudaMemsetAsync(buffer, 0, want, r.stream));
  };
  grow(r.send, r.send_bytes, send_bytes);
  grow(r.recv, r.recv_bytes, recv_bytes);
  PROBE_CUDA(cudaStreamSynchronize(r.stream)); // the streams are non-blocking: nothing else orders the memsets
}

/// Waits for `event`, watching the local communicators for asynchronous errors (a peer gone) instead of hanging, as
/// nccl-tests' testStreamSynchronize does.
void wait_for(NcclState& state, cudaEvent_t event) {
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess)
      return;
    if (e != cudaErrorNotReady)
      PROBE_CUDA(e);
    for (NcclState::Rank& r : state.local) {
      ncclResult_t async = ncclSuccess;
      PROBE_NCCL(ncclCommGetAsyncError(r.comm, &async));
      if (async != ncclSuccess && async != ncclInProgress)
        fail("ncclCommGetAsyncError", nccl_error_text(async), __FILE__, __LINE__);
    }
    std::this_thread::yield();
  }
}

void wait_for_streams(NcclState& state) {
  for (NcclState::Rank& r : state.local) {
    PROBE_CUDA(cudaSetDevice(r.device));
    PROBE_CUDA(cudaEventRecord(r.mark, r.stream));
    wait_for(state, r.mark);
  }
}

/// The maximum of `values` over all ranks (multi-process: a small ncclAllReduce(ncclMax) on the first rank's stream,
/// after the timed work; one process: the values are already the maximum over its GPUs).
void agree_max(NcclState& state, float* values, int count) {
  if (!state.multi_process)
    return;
  NcclState::Rank& r = state.local[0];
  const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
  PROBE_CUDA(cudaSetDevice(r.device));
  PROBE_CUDA(cudaMemcpyAsync(r.agree, values, bytes, cudaMemcpyHostToDevice, r.stream));
  PROBE_NCCL(ncclAllReduce(r.agree, r.agree, static_cast<std::size_t>(count), ncclFloat, ncclMax, r.comm, r.stream));
  PROBE_CUDA(cudaEventRecord(r.mark, r.stream));
  wait_for(state, r.mark);
  PROBE_CUDA(cudaMemcpy(values, r.agree, bytes, cudaMemcpyDeviceToHost));
}

/// A sample in seconds from milliseconds of cudaEventElapsedTime (about 0.5 us resolution, as EventSource).
double seconds_of(float ms) {
  return ms > 0 ? static_cast<double>(ms) * 1e-3 : 0.5e-6;
}

/// One collective per sample, issued for every local rank in one group, each rank timed by events on its stream: the
/// sample is the slowest rank's time, maxed over the processes.
class CollectiveSource final : public SampleSource {
public:
  CollectiveSource(NcclState& state, std::function<void(NcclState::Rank&)> issue)
      : state_(state), issue_(std::move(issue)) {}
  double sample_s() override {
    for (NcclState::Rank& r : state_.local) {
      PROBE_CUDA(cudaSetDevice(r.device));
      PROBE_CUDA(cudaEventRecord(r.start, r.stream));
    }
    PROBE_NCCL(ncclGroupStart());
    for (NcclState::Rank& r : state_.local)
      issue_(r);
    PROBE_NCCL(ncclGroupEnd());
    for (NcclState::Rank& r : state_.local) {
      PROBE_CUDA(cudaSetDevice(r.device));
      PROBE_CUDA(cudaEventRecord(r.stop, r.stream));
    }
    float slowest_ms = 0;
    for (NcclState::Rank& r : state_.local) {
      wait_for(state_, r.stop);
      float ms = 0;
      PROBE_CUDA(cudaEventElapsedTime(&ms, r.start, r.stop));
      slowest_ms = std::max(slowest_ms, ms);
    }
    // the sample and the wall clock (the timeout's) agreed over the processes: every one stops at the same sample
    float agreed[2] = {slowest_ms, static_cast<float>(SampleSource::elapsed_s())};
    agree_max(state_, agreed, 2);
    elapsed_s_ = agreed[1];
    return seconds_of(agreed[0]);
  }
  [[nodiscard]] double elapsed_s() const override { return elapsed_s_; }

private:
  NcclState& state_;
  std::function<void(NcclState::Rank&)> issue_;
  double elapsed_s_ = 0;
};

/// A collective's float counts at a size in nccl-tests' convention (src/*.cu `*GetCollByteCount`): `bytes` is the
/// buffer per rank for all_reduce, broadcast and sendrecv, the whole gathered (scattered) buffer for all_gather
/// (reduce_scatter), the total a rank sends for alltoall; the partitioned ones round down to whole elements per rank.
enum class Collective { all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv };

Collective collective_named(const std::string& name) {
  if (name == "all_reduce")
    return Collective::all_reduce;
  if (name == "all_gather")
    return Collective::all_gather;
  if (name == "reduce_scatter")
    return Collective::reduce_scatter;
  if (name == "broadcast")
    return Collective::broadcast;
  if (name == "alltoall")
    return Collective::alltoall;
  if (name == "sendrecv")
    return Collective::sendrecv;
  throw std::invalid_argument("collective: unknown nccl-tests collective '" + name +
                              "' (all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv)");
}

struct CollectiveCounts {
  std::size_t send = 0, recv = 0;
  std::size_t per_call = 0; ///< the count argument of the NCCL call (per peer for alltoall)
  // in place (nccl-tests' sendInplaceOffset and recvInplaceOffset, times the rank): both buffers inside the receive
  // buffer, the send part at rank x send_offset, the receive part at rank x recv_offset (elements)
  std::size_t send_offset = 0, recv_offset = 0;
  double bytes = 0; ///< the size actually run, in the same convention
};

CollectiveCounts counts_of(Collective collective, bool partitioned, double requested_bytes, int ranks) {
  const auto elements = static_cast<std::size_t>(std::floor(requested_bytes / sizeof(float)));
  const auto n = static_cast<std::size_t>(ranks);
  CollectiveCounts c;
  if (!partitioned) {
    const std::size_t count = std::max<std::size_t>(elements, 1);
    c.send = c.recv = c.per_call = count;
    c.bytes = static_cast<double>(count * sizeof(float));
    return c;
  }
  const std::size_t per_rank = std::max<std::size_t>(elements / n, 1);
  c.bytes = static_cast<double>(per_rank * n * sizeof(float));
  c.per_call = per_rank;
  c.send = collective == Collective::all_gather ? per_rank : per_rank * n;
  c.recv = collective == Collective::reduce_scatter ? per_rank : per_rank * n;
  c.send_offset = collective == Collective::all_gather ? per_rank : 0;
  c.recv_offset = collective == Collective::reduce_scatter ? per_rank : 0;
  return c;
}

std::string format(const char* pattern, double a, double b = 0) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b);
  return text;
}

// ---- overlap: the GEMM ---------------------------------------------------------------------------------------------

__global__ void fill_uniform_half(__half* x, std::int64_t count, std::uint64_t seed) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    std::uint64_t h = seed + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    x[i] = __float2half(static_cast<float>(h >> 40) * 0x1p-23f - 1.0f); // [-1, 1)
  }
}

/// C = A B, n x n x n, fp16 operands with fp32 accumulation (tensor cores) on dev.blas; random operands, as the power
/// (and so the clock) of a GEMM depends on its data.
struct Gemm {
  int n = 0;
  __half *a = nullptr, *b = nullptr, *c = nullptr;

  explicit Gemm(Device& dev) {
    std::size_t free_bytes = 0, total_bytes = 0;
    PROBE_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    // 8192^3 (3 x 128 MiB of operands) unless the GPU is small; by the GPU's total memory, so that every run agrees
    n = total_bytes >= (std::size_t{8} << 30) ? 8192 : 4096;
    const auto elements = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    a = static_cast<__half*>(dev.a.get(elements * sizeof(__half)));
    b = static_cast<__half*>(dev.b.get(elements * sizeof(__half)));
    c = static_cast<__half*>(dev.c.get(elements * sizeof(__half)));
    int sms = 0;
    PROBE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev.index));
    const auto count = static_cast<std::int64_t>(elements);
    fill_uniform_half<<<sms * 8, 256, 0, dev.stream>>>(a, count, 1);
    PROBE_CUDA(cudaGetLastError());
    fill_uniform_half<<<sms * 8, 256, 0, dev.stream>>>(b, count, 2);
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaMemsetAsync(c, 0, elements * sizeof(__half), dev.stream));
    PROBE_CUBLAS(cublasSetStream(dev.blas, dev.stream));
    PROBE_CUDA(cudaStreamSynchronize(dev.stream));
  }
  void operator()(cublasHandle_t blas) const {
    const float alpha = 1, beta = 0;
    PROBE_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16F, n, b, CUDA_R_16F, n,
                              &beta, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  [[nodiscard]] double flops() const { return 2.0 * n * static_cast<double>(n) * n; }
  [[nodiscard]] std::string what() const {
    const std::string side = std::to_string(n);
    return "cublasGemmEx " + side + "x" + side + "x" + side + " fp16, fp32 compute";
  }
};

/// Issues one allreduce of the overlap's 256 MiB on every local rank (a group of one collective per rank: NCCL would
/// fuse several collectives of one group into one launch).
void issue_allreduce(NcclState& state, std::size_t count) {
  PROBE_NCCL(ncclGroupStart());
  for (NcclState::Rank& r : state.local)
    PROBE_NCCL(ncclAllReduce(r.send, r.recv, count, ncclFloat, ncclSum, r.comm, r.stream));
  PROBE_NCCL(ncclGroupEnd());
}

/// The GEMM timed while allreduces run: `allreduces` of them are enqueued back to back on the NCCL streams, the GEMM
/// waits for the first to end (so that NCCL is running when it starts), and the rest, enough for twice the GEMM's own
/// time, keep NCCL busy to its end; they drain after the GEMM's events, outside its time. The same count on every
/// rank, and the sample maxed over the ranks, so that every rank runs the same collectives.
class OverlapSource final : public SampleSource {
public:
  OverlapSource(Device& dev, NcclState& state, NcclState::Rank& own, const Gemm& gemm, int allreduces,
                std::size_t count)
      : dev_(dev), state_(state), own_(own), gemm_(gemm), allreduces_(allreduces), count_(count) {}
  double sample_s() override {
    issue_allreduce(state_, count_);
    PROBE_CUDA(cudaSetDevice(own_.device));
    PROBE_CUDA(cudaEventRecord(own_.mark, own_.stream)); // the first allreduce's end
    for (int i = 1; i < allreduces_; ++i)
      issue_allreduce(state_, count_);
    PROBE_CUDA(cudaSetDevice(own_.device));
    PROBE_CUDA(cudaEventRecord(own_.stop, own_.stream)); // the last one's end
    PROBE_CUDA(cudaSetDevice(dev_.index));               // cuBLAS's handle and the events are this GPU's
    flush_l2(dev_, dev_.stream);                         // as EventSource does for the GEMM alone
    PROBE_CUDA(cudaStreamWaitEvent(dev_.stream, own_.mark, 0));
    PROBE_CUDA(cudaEventRecord(start_, dev_.stream));
    gemm_(dev_.blas);
    PROBE_CUDA(cudaEventRecord(end_, dev_.stream));
    wait_for(state_, end_);
    wait_for_streams(state_);
    float gemm_ms = 0, margin_ms = 0;
    PROBE_CUDA(cudaEventElapsedTime(&gemm_ms, start_, end_));
    PROBE_CUDA(cudaEventElapsedTime(&margin_ms, end_, own_.stop));
    ++samples;
    if (margin_ms >= 0)
      ++covered;
    float agreed[2] = {gemm_ms, static_cast<float>(SampleSource::elapsed_s())}; // as CollectiveSource
    agree_max(state_, agreed, 2);
    elapsed_s_ = agreed[1];
    return seconds_of(agreed[0]);
  }
  [[nodiscard]] double elapsed_s() const override { return elapsed_s_; }
  int samples = 0, covered = 0; ///< samples, and those whose allreduces ended after the GEMM (this GPU's)

private:
  double elapsed_s_ = 0;
  Device& dev_;
  NcclState& state_;
  NcclState::Rank& own_;
  const Gemm& gemm_;
  int allreduces_;
  std::size_t count_;
  Event start_, end_;
};

/// Marks the communicator failed when a measurement using it throws (ranks may now be out of step).
template <class F> Result guarded(Device& dev, F&& body) {
  try {
    return body();
  } catch (...) {
    if (dev.nccl)
      dev.nccl->failed = true;
    throw;
  }
}

} // namespace

Result run_collective(Device& dev, const Measurement& m, const StoppingRule& rule) {
  if (!(m.bytes > 0) || !std::isfinite(m.bytes))
    throw std::invalid_argument("collective: size must be positive, got " + std::to_string(m.bytes));
  RestoreDevice restore(dev.index);
  return guarded(dev, [&] {
    const Collective collective = collective_named(m.collective);
    NcclState& state = nccl(dev);
    const int n = state.ranks;
    const CollectiveCounts counts = counts_of(collective, partitioned_collective(m.collective), m.bytes, n);
    // in place, everything lives in the receive buffer, which then holds the larger of the two (as in nccl-tests)
    const std::size_t recv_elements = m.in_place ? std::max(counts.send, counts.recv) : counts.recv;
    for (NcclState::Rank& r : state.local)
      reserve(r, m.in_place ? 0 : counts.send * sizeof(float), recv_elements * sizeof(float));
    const std::size_t count = counts.per_call;
    const bool in_place = m.in_place;
    CollectiveSource source(state, [collective, count, counts, in_place, n](NcclState::Rank& r) {
      const auto rank = static_cast<std::size_t>(r.rank);
      const void* send = in_place ? static_cast<const float*>(r.recv) + rank * counts.send_offset : r.send;
      void* recv = in_place ? static_cast<float*>(r.recv) + rank * counts.recv_offset : r.recv;
      switch (collective) {
      case Collective::all_reduce:
        PROBE_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, r.comm, r.stream));
        return;
      case Collective::all_gather:
        PROBE_NCCL(ncclAllGather(send, recv, count, ncclFloat, r.comm, r.stream));
        return;
      case Collective::reduce_scatter:
        PROBE_NCCL(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, r.comm, r.stream));
        return;
      case Collective::broadcast:
        PROBE_NCCL(ncclBroadcast(send, recv, count, ncclFloat, 0, r.comm, r.stream));
        return;
      case Collective::alltoall: // nccl-tests' alltoall: count elements to and from every peer, itself included
        for (int peer = 0; peer < n; ++peer) {
          const std::size_t offset = static_cast<std::size_t>(peer) * count;
          PROBE_NCCL(ncclSend(static_cast<const float*>(send) + offset, count, ncclFloat, peer, r.comm, r.stream));
          PROBE_NCCL(ncclRecv(static_cast<float*>(recv) + offset, count, ncclFloat, peer, r.comm, r.stream));
        }
        return;
      case Collective::sendrecv: // nccl-tests' ring: to rank + 1, from rank - 1
        PROBE_NCCL(ncclSend(send, count, ncclFloat, (r.rank + 1) % n, r.comm, r.stream));
        PROBE_NCCL(ncclRecv(recv, count, ncclFloat, (r.rank - 1 + n) % n, r.comm, r.stream));
        return;
      }
    });
    Result result;
    result.stats = measure(source, rule);
    const double algbw = counts.bytes / result.stats.median_s / 1e9;
    result.note = format("algbw %.1f GB/s busbw %.1f GB/s", algbw, algbw * busbw_factor(m.collective, n)) +
                  " (median; " + std::to_string(n) + " rank" + (n == 1 ? "" : "s") +
                  (m.in_place ? ", in place" : ", out of place") + ", a sample is the slowest rank's time";
    if (counts.bytes != m.bytes)
      result.note += format("; %.0f B run for the %.0f B asked: whole float elements", counts.bytes, m.bytes) +
                     (partitioned_collective(m.collective) ? ", the same number from every rank" : "");
    if (m.ranks > 0 && m.ranks != n)
      result.note +=
          "; the measurement names " + std::to_string(m.ranks) + " ranks, the communicator has " + std::to_string(n);
    result.note += ")";
    return result;
  });
}

Result run_overlap(Device& dev, const Measurement& m, const StoppingRule& rule) {
  RestoreDevice restore(dev.index);
  if (m.overlap_case == "alone") {
    const Gemm gemm(dev);
    EventSource source(dev, [&](cudaStream_t) { gemm(dev.blas); });
    Result result;
    result.stats = measure(source, rule);
    result.note = gemm.what() + format(": median %.3f ms, %.0f TFLOP/s", result.stats.median_s * 1e3,
                                       gemm.flops() / result.stats.median_s / 1e12);
    return result;
  }
  if (m.overlap_case != "with_allreduce")
    throw std::invalid_argument("overlap: unknown case '" + m.overlap_case + "' (alone, with_allreduce)");
  return guarded(dev, [&] {
    NcclState& state = nccl(dev);
    NcclState::Rank* own = nullptr;
    for (NcclState::Rank& r : state.local)
      if (r.device == dev.index)
        own = &r;
    if (own == nullptr)
      throw std::runtime_error("overlap: GPU " + std::to_string(dev.index) + " is not one of the communicator's");
    const std::size_t count = kOverlapAllreduceBytes / sizeof(float);
    for (NcclState::Rank& r : state.local)
      reserve(r, kOverlapAllreduceBytes, kOverlapAllreduceBytes);
    PROBE_CUDA(cudaSetDevice(dev.index));
    const Gemm gemm(dev);

    // How many allreduces cover the GEMM: each timed alone (after warm-ups), maxed over the ranks so that every rank
    // enqueues the same number.
    constexpr int kWarmups = 2, kTimed = 5;
    Event begin, end;
    for (int i = 0; i < kWarmups; ++i)
      gemm(dev.blas);
    PROBE_CUDA(cudaEventRecord(begin, dev.stream));
    for (int i = 0; i < kTimed; ++i)
      gemm(dev.blas);
    PROBE_CUDA(cudaEventRecord(end, dev.stream));
    PROBE_CUDA(cudaEventSynchronize(end));
    float alone_ms[2] = {};
    PROBE_CUDA(cudaEventElapsedTime(&alone_ms[0], begin, end));
    for (int i = 0; i < kWarmups; ++i)
      issue_allreduce(state, count);
    PROBE_CUDA(cudaSetDevice(own->device));
    PROBE_CUDA(cudaEventRecord(own->start, own->stream));
    for (int i = 0; i < kTimed; ++i)
      issue_allreduce(state, count);
    PROBE_CUDA(cudaSetDevice(own->device));
    PROBE_CUDA(cudaEventRecord(own->stop, own->stream));
    wait_for_streams(state);
    PROBE_CUDA(cudaEventElapsedTime(&alone_ms[1], own->start, own->stop));
    alone_ms[0] /= kTimed;
    alone_ms[1] /= kTimed;
    agree_max(state, alone_ms, 2);
    const double gemm_ms = std::max(alone_ms[0], 1e-3f), allreduce_ms = std::max(alone_ms[1], 1e-3f);
    const int allreduces = static_cast<int>(std::clamp(2 + std::ceil(2 * gemm_ms / allreduce_ms), 3.0, 10000.0));

    PROBE_CUDA(cudaSetDevice(dev.index)); // the source's events are this GPU's
    OverlapSource source(dev, state, *own, gemm, allreduces, count);
    Result result;
    result.stats = measure(source, rule);
    const int n = state.ranks;
    result.note = gemm.what() + format(": median %.3f ms beside ", result.stats.median_s * 1e3) +
                  std::to_string(allreduces) + " back-to-back 256 MiB ncclAllReduce per sample over " +
                  std::to_string(n) + " rank" + (n == 1 ? "" : "s") +
                  format(" (alone: GEMM %.3f ms, allreduce %.3f ms); ", gemm_ms, allreduce_ms) +
                  "the allreduces outlasted the GEMM in " + std::to_string(source.covered) + " of " +
                  std::to_string(source.samples) + " samples";
    if (source.covered < source.samples)
      result.note += " (in the others the slowdown is underestimated)";
    if (n == 1)
      result.note += "; one rank: NCCL's allreduce is a local copy, so the slowdown is not that of communication";
    if (state.multi_process)
      result.note += "; samples maxed over the ranks";
    return result;
  });
}

} // namespace ddlsim::probe::gpu
