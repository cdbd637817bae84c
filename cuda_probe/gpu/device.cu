// The device: how many there are, what one is (name, capability, clocks, driver and library versions), the context
// that owns its handles, and the event-timed sample source with the L2 flush (common.cuh).
#include "cuda_probe/gpu/common.cuh"

#include <nccl.h>

#include <dlfcn.h>

#include <cstdio>
#include <string>

namespace ddlsim::probe::gpu {

void fail(const char* call, const std::string& error, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed: " + error + " (" + file + ":" + std::to_string(line) + ")");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_)
    cudaFree(ptr_);
}

void* DeviceBuffer::get(std::size_t bytes) {
  if (bytes <= bytes_ && ptr_)
    return ptr_;
  if (ptr_)
    PROBE_CUDA(cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
  PROBE_CUDA(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  bytes_ = bytes;
  return ptr_;
}

void flush_l2(Device& dev, cudaStream_t stream) {
  if (dev.flush.size() > 0)
    PROBE_CUDA(cudaMemsetAsync(dev.flush.get(dev.flush.size()), 0, dev.flush.size(), stream));
}

EventSource::EventSource(Device& dev, std::function<void(cudaStream_t)> op, bool flush)
    : dev_(dev), op_(std::move(op)), flush_(flush) {
  PROBE_CUDA(cudaEventCreate(&start_));
  PROBE_CUDA(cudaEventCreate(&stop_));
}

EventSource::~EventSource() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

double EventSource::sample_s() {
  if (flush_)
    flush_l2(dev_, dev_.stream);
  PROBE_CUDA(cudaEventRecord(start_, dev_.stream));
  op_(dev_.stream);
  PROBE_CUDA(cudaEventRecord(stop_, dev_.stream));
  PROBE_CUDA(cudaEventSynchronize(stop_));
  float ms = 0;
  PROBE_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  // cudaEventElapsedTime resolves about 0.5 us; an operation faster than that reads as the resolution, not zero
  return ms > 0 ? static_cast<double>(ms) * 1e-3 : 0.5e-6;
}

int device_count(std::string& error) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    error = cudaGetErrorString(e);
    return -1;
  }
  if (n == 0) {
    error = "no CUDA device";
    return -1;
  }
  return n;
}

namespace {

std::string dotted(int version, int major_div, int minor_div, int minor_mod) {
  return std::to_string(version / major_div) + "." + std::to_string(version / minor_div % minor_mod);
}

// NVML from the driver, loaded at run time (the probe must start without a driver for --dry-run, and the toolkit
// ships only a link stub). Declarations as in nvml.h (NVML API version 2, stable since R450).
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*clock)(Device, int, unsigned*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;
  void* lib = nullptr;
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return;
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    by_pci = reinterpret_cast<int (*)(const char*, Device*)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<int (*)(Device, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    driver = reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    if (!init || !shutdown || !by_pci || !clock || !driver || init() != 0) {
      dlclose(lib);
      lib = nullptr;
    }
  }
  ~Nvml() {
    if (lib) {
      shutdown();
      dlclose(lib);
    }
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
};
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2; // NVML_CLOCK_MEM

} // namespace

DeviceInfo describe(int index) {
  DeviceInfo info;
  info.index = index;
  cudaDeviceProp prop{};
  PROBE_CUDA(cudaGetDeviceProperties(&prop, index));
  info.name = prop.name;
  char bus[32] = {};
  PROBE_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, index));
  info.pci_bus_id = bus;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  info.l2_bytes = prop.l2CacheSize;
  int khz = 0;
  PROBE_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index));
  info.max_sm_clock_hz = khz * 1e3;
  PROBE_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index));
  info.max_memory_clock_hz = khz * 1e3;
  PROBE_CUDA(cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, index));
  int v = 0;
  PROBE_CUDA(cudaRuntimeGetVersion(&v));
  info.runtime_version = dotted(v, 1000, 10, 100);
  PROBE_CUDA(cudaDriverGetVersion(&v));
  info.driver_version = "CUDA " + dotted(v, 1000, 10, 100);
  const Nvml nvml;
  if (nvml.lib) {
    char text[96] = {};
    if (nvml.driver(text, sizeof text) == 0)
      info.driver_version = text;
    Nvml::Device handle = nullptr;
    unsigned mhz = 0;
    if (nvml.by_pci(bus, &handle) == 0) {
      if (nvml.clock(handle, kNvmlClockSm, &mhz) == 0)
        info.sm_clock_hz = mhz * 1e6;
      if (nvml.clock(handle, kNvmlClockMem, &mhz) == 0)
        info.memory_clock_hz = mhz * 1e6;
    }
  }
  const std::size_t cudnn = cudnnGetVersion(); // major * 10000 + minor * 100 + patch since cuDNN 9
  info.cudnn_version =
      std::to_string(cudnn / 10000) + "." + std::to_string(cudnn / 100 % 100) + "." + std::to_string(cudnn % 100);
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  info.cublas_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  cusolverGetProperty(MAJOR_VERSION, &major);
  cusolverGetProperty(MINOR_VERSION, &minor);
  cusolverGetProperty(PATCH_LEVEL, &patch);
  info.cusolver_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) // major * 10000 + minor * 100 + patch since NCCL 2.9
    info.nccl_version =
        std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." + std::to_string(nccl % 100);
  return info;
}

namespace {

class DeviceContext final : public Context {
public:
  DeviceContext(int device, const ProbePlan& plan, const ProbeOptions& options, const Communicator& comm) {
    dev_.index = device;
    dev_.plan = &plan;
    dev_.options = options;
    dev_.comm = comm;
    PROBE_CUDA(cudaSetDevice(device));
    PROBE_CUDA(cudaStreamCreateWithFlags(&dev_.stream, cudaStreamNonBlocking));
    PROBE_CUDA(cudaStreamCreateWithFlags(&dev_.side_stream, cudaStreamNonBlocking));
    PROBE_CUDNN(cudnnCreate(&dev_.cudnn));
    PROBE_CUDNN(cudnnSetStream(dev_.cudnn, dev_.stream));
    PROBE_CUBLAS(cublasCreate(&dev_.blas));
    PROBE_CUBLAS(cublasSetStream(dev_.blas, dev_.stream));
    PROBE_CUBLAS(cublasLtCreate(&dev_.lt));
    PROBE_CUSOLVER(cusolverDnCreate(&dev_.solver));
    PROBE_CUSOLVER(cusolverDnSetStream(dev_.solver, dev_.stream));
    int l2 = 0;
    PROBE_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    if (l2 > 0)
      dev_.flush.get(2 * static_cast<std::size_t>(l2));
  }
  ~DeviceContext() override {
    dev_.nccl.reset();
    cudaStreamSynchronize(dev_.stream);
    cusolverDnDestroy(dev_.solver);
    cublasLtDestroy(dev_.lt);
    cublasDestroy(dev_.blas);
    cudnnDestroy(dev_.cudnn);
    cudaStreamDestroy(dev_.side_stream);
    cudaStreamDestroy(dev_.stream);
  }
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  Result run(const Measurement& m, const StoppingRule& rule) override {
    PROBE_CUDA(cudaSetDevice(dev_.index));
    switch (m.group) {
    case Group::layer:
      return run_layer(dev_, m, rule);
    case Group::gemm:
      return run_gemm(dev_, m, rule);
    case Group::memory_bandwidth:
      return run_memory_bandwidth(dev_, m, rule);
    case Group::launch:
      return run_launch(dev_, m, rule);
    case Group::h2d:
      return run_h2d(dev_, m, rule);
    case Group::selection:
      return run_selection(dev_, m, rule);
    case Group::low_rank:
      return run_low_rank(dev_, m, rule);
    case Group::collective:
      return run_collective(dev_, m, rule);
    case Group::overlap:
      return run_overlap(dev_, m, rule);
    }
    throw std::logic_error("probe: unknown measurement group");
  }

private:
  Device dev_;
};

} // namespace

std::unique_ptr<Context> open(int device, const ProbePlan& plan, const ProbeOptions& options,
                              const Communicator& comm) {
  return std::make_unique<DeviceContext>(device, plan, options, comm);
}

} // namespace ddlsim::probe::gpu
