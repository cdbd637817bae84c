// The probe's compute measurements: layer kernels (cuDNN convolutions with cudnnFind*Ex's pick, as cudnn.benchmark;
// cuBLASLt GEMMs; memory-bound kernels as a copy), memory bandwidth, launch cost, host-to-device copies, and PowerSGD's
// kernels (Vogels et al., NeurIPS 2019, Algorithm 1: P = M Q, Q = M^T P, P orthogonalised by QR: geqrf + orgqr).
#include "cuda_probe/gpu/common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace ddlsim::probe::gpu {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kHeadroomBytes = 64 * kMiB;        ///< left free for the libraries' own allocations
constexpr std::size_t kConvWorkspaceCapBytes = kGiB;     ///< cuDNN's algorithm search: at most this, or free / 4
constexpr std::size_t kMatmulWorkspaceBytes = 32 * kMiB; ///< cuBLASLt (PyTorch's cuBLAS workspace on Hopper)
constexpr std::size_t kConvSearchFloorBytes = 64 * kMiB; ///< searched at least, should the heuristic's sizes be low
constexpr std::size_t kMaxSize = std::size_t{1} << 50;   ///< elements or bytes: no device holds this (sums cannot wrap)
constexpr int kThreads = 256;
constexpr int kLaunchesPerSample = 1000;

// ---- sizes, checked ----

/// The product of positive sizes, or std::runtime_error naming `what` (a size not positive, or overflow).
std::size_t product(std::initializer_list<std::int64_t> factors, const std::string& what) {
  std::size_t p = 1;
  for (const std::int64_t f : factors) {
    if (f <= 0)
      throw std::runtime_error(what + ": size " + std::to_string(f) + " is not positive");
    if (p > kMaxSize / static_cast<std::size_t>(f))
      throw std::runtime_error(what + ": sizes overflow");
    p *= static_cast<std::size_t>(f);
  }
  return p;
}

int to_int(std::int64_t v, const std::string& what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw std::runtime_error(what + ": size " + std::to_string(v) + " does not fit the library's int");
  return static_cast<int>(v);
}

std::string bytes_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f B", bytes);
  return text;
}

std::size_t to_bytes(double bytes, const std::string& what) {
  if (!(bytes >= 1) || !(bytes < static_cast<double>(kMaxSize)))
    throw std::runtime_error(what + ": bytes " + bytes_text(bytes) + " out of range (at least 1 B)");
  return static_cast<std::size_t>(bytes + 0.5);
}

std::string dims_text(std::initializer_list<std::int64_t> dims) {
  // Appended piece by piece: GCC 12 at -O3 flags `"," + string` with a false -Wrestrict (GCC bug 105329).
  std::string s = "[";
  for (const std::int64_t d : dims) {
    if (s.size() > 1)
      s += ',';
    s += std::to_string(d);
  }
  s += ']';
  return s;
}

/// Grows the buffers to `bytes` each after checking that what they need beyond what they hold fits in free memory.
struct Need {
  DeviceBuffer& buffer;
  std::size_t bytes;
};
void reserve(const std::string& what, std::initializer_list<Need> needs) {
  std::size_t total_bytes = 0, extra_bytes = 0;
  for (const Need& n : needs) {
    total_bytes += n.bytes;
    extra_bytes += n.bytes > n.buffer.size() ? n.bytes - n.buffer.size() : 0;
  }
  std::size_t free_bytes = 0, device_bytes = 0;
  PROBE_CUDA(cudaMemGetInfo(&free_bytes, &device_bytes));
  if (extra_bytes > 0 && extra_bytes + kHeadroomBytes > free_bytes)
    throw std::runtime_error(what + ": needs " + probe::size_text(total_bytes) + " of device memory (" +
                             probe::size_text(extra_bytes) + " more than the probe holds), " +
                             probe::size_text(free_bytes) + " free of " + probe::size_text(device_bytes));
  for (const Need& n : needs)
    n.buffer.get(n.bytes);
}

/// Owns a library descriptor (created by the caller through `out()`), destroyed with its owner.
template <class Handle, auto Destroy> class Owned {
public:
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (h_)
      Destroy(h_);
  }
  Handle* out() { return &h_; }
  [[nodiscard]] Handle get() const { return h_; }

private:
  Handle h_ = nullptr;
};

class PinnedBuffer {
public:
  explicit PinnedBuffer(std::size_t bytes) { PROBE_CUDA(cudaMallocHost(&ptr_, bytes)); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  [[nodiscard]] void* get() const { return ptr_; }

private:
  void* ptr_ = nullptr;
};

// ---- dtypes ----

cudnnDataType_t cudnn_type(Dtype d) {
  switch (d) {
  case Dtype::fp32:
    return CUDNN_DATA_FLOAT;
  case Dtype::fp16:
    return CUDNN_DATA_HALF;
  case Dtype::bf16:
    return CUDNN_DATA_BFLOAT16;
  }
  throw std::logic_error("probe: unknown dtype");
}

cudaDataType_t cuda_type(Dtype d) {
  switch (d) {
  case Dtype::fp32:
    return CUDA_R_32F;
  case Dtype::fp16:
    return CUDA_R_16F;
  case Dtype::bf16:
    return CUDA_R_16BF;
  }
  throw std::logic_error("probe: unknown dtype");
}

// ---- kernels: operand fill, the memory-bound copy, the empty kernel ----

/// A value in +-[1/8, 1) from a hash of the index (murmur3's finaliser): no zeros, denormals, NaNs or overflow.
__device__ float hashed_value(std::size_t i, std::uint32_t seed) {
  std::uint32_t h = static_cast<std::uint32_t>(i) ^ (static_cast<std::uint32_t>(i >> 32) * 0x9e3779b9u) ^ seed;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  const float magnitude = 0.125f + 0.875f * static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
  return (h & 1u) ? -magnitude : magnitude;
}

template <class T> __global__ void fill_kernel(T* p, std::size_t n, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = hashed_value(i, seed);
    if constexpr (std::is_same_v<T, __half>)
      p[i] = __float2half(v);
    else if constexpr (std::is_same_v<T, __nv_bfloat16>)
      p[i] = __float2bfloat16(v);
    else
      p[i] = v;
  }
}

/// y = alpha x over n floats, grid-stride, as float4 when both are 16-byte aligned: reads n, writes n floats.
__global__ void scale_copy_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t n, float alpha,
                                  bool vector) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t n4 = vector ? n / 4 : 0;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  auto* y4 = reinterpret_cast<float4*>(y);
  for (std::size_t i = first; i < n4; i += stride) {
    float4 v = x4[i];
    v.x *= alpha;
    v.y *= alpha;
    v.z *= alpha;
    v.w *= alpha;
    y4[i] = v;
  }
  for (std::size_t i = 4 * n4 + first; i < n; i += stride)
    y[i] = alpha * x[i];
}

__global__ void empty_kernel() {}

/// Blocks for a grid-stride kernel over `items`: as many as the device holds at once, no more than the work needs.
template <class Kernel> int grid_for(const Device& dev, Kernel kernel, std::size_t items) {
  int sms = 0, per_sm = 0;
  PROBE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev.index));
  PROBE_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const std::size_t resident = static_cast<std::size_t>(std::max(sms, 1)) * std::max(per_sm, 1);
  return static_cast<int>(std::clamp<std::size_t>((items + kThreads - 1) / kThreads, 1, resident));
}

template <class T> void fill_as(const Device& dev, void* p, std::size_t elements, std::uint32_t seed) {
  fill_kernel<T>
      <<<grid_for(dev, fill_kernel<T>, elements), kThreads, 0, dev.stream>>>(static_cast<T*>(p), elements, seed);
  PROBE_CUDA(cudaGetLastError());
}

/// Writes hashed values into `elements` of `dtype` at `p` on dev.stream.
void fill(const Device& dev, void* p, std::size_t elements, Dtype dtype, std::uint32_t seed) {
  switch (dtype) {
  case Dtype::fp32:
    return fill_as<float>(dev, p, elements, seed);
  case Dtype::fp16:
    return fill_as<__half>(dev, p, elements, seed);
  case Dtype::bf16:
    return fill_as<__nv_bfloat16>(dev, p, elements, seed);
  }
}

/// The copy kernel moving about `bytes` (half read, half written) between dev.a and dev.b.
struct Copy {
  const float* x = nullptr;
  float* y = nullptr;
  std::size_t floats = 0;
  bool vector = false;
  int blocks = 1;
  [[nodiscard]] std::size_t moved_bytes() const { return 2 * floats * sizeof(float); }
  void launch(cudaStream_t s) const {
    scale_copy_kernel<<<blocks, kThreads, 0, s>>>(x, y, floats, 1.0f, vector);
    PROBE_CUDA(cudaGetLastError());
  }
};

Copy prepare_copy(Device& dev, std::size_t bytes, const std::string& what) {
  Copy copy;
  copy.floats = std::max<std::size_t>(bytes / 2 / sizeof(float), 1);
  const std::size_t side_bytes = copy.floats * sizeof(float);
  reserve(what, {{dev.a, side_bytes}, {dev.b, side_bytes}});
  copy.x = static_cast<const float*>(dev.a.get(side_bytes));
  copy.y = static_cast<float*>(dev.b.get(side_bytes));
  copy.vector =
      reinterpret_cast<std::uintptr_t>(copy.x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(copy.y) % 16 == 0;
  copy.blocks = grid_for(dev, scale_copy_kernel, copy.vector ? copy.floats / 4 : copy.floats);
  fill(dev, dev.a.get(side_bytes), copy.floats, Dtype::fp32, 1);
  PROBE_CUDA(cudaStreamSynchronize(dev.stream));
  return copy;
}

/// Times the copy kernel over `bytes`; `bandwidth` adds the achieved bandwidth at the median to the note.
Result run_copy(Device& dev, std::size_t bytes, const StoppingRule& rule, const std::string& what, bool bandwidth) {
  const Copy copy = prepare_copy(dev, bytes, what);
  EventSource source(dev, [&copy](cudaStream_t s) { copy.launch(s); });
  Result r{measure(source, rule), std::string("copy kernel y = a x") + (copy.vector ? " (float4)" : "") + ", " +
                                      probe::size_text(copy.moved_bytes() / 2) + " read + " +
                                      probe::size_text(copy.moved_bytes() / 2) + " written"};
  if (bandwidth) {
    char text[64];
    std::snprintf(text, sizeof text, "; %.1f GB/s at the median",
                  static_cast<double>(copy.moved_bytes()) / r.stats.median_s / 1e9);
    r.note += text;
  }
  return r;
}

// ---- convolutions (cuDNN) ----

const char* const kForwardAlgos[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                                     "WINOGRAD",      "WINOGRAD_NONFUSED"};
const char* const kBackwardDataAlgos[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
const char* const kBackwardFilterAlgos[] = {"ALGO_0",    "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                                            "FFT_TILING"};
const char* const kMathTypes[] = {"default math", "tensor-op math", "tensor-op math with conversion", "FMA math"};

template <std::size_t N> const char* name_of(const char* const (&names)[N], int i) {
  return i >= 0 && static_cast<std::size_t>(i) < N ? names[i] : "unknown";
}

struct ConvChoice {
  int algo = 0;
  const char* name = "";
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace_bytes = 0;
  std::size_t search_bytes = 0; ///< the workspace the search was allowed
};

/// The most workspace cuDNN's search may use: 1 GiB or a quarter of the memory left (the held workspace counted as
/// free), whichever is less.
std::size_t conv_workspace_cap(const Device& dev) {
  std::size_t free_bytes = 0, device_bytes = 0;
  PROBE_CUDA(cudaMemGetInfo(&free_bytes, &device_bytes));
  const std::size_t available = free_bytes + dev.workspace.size();
  return std::min(kConvWorkspaceCapBytes, available > kHeadroomBytes ? (available - kHeadroomBytes) / 4 : 0);
}

/// The fastest algorithm cudnnFind*AlgorithmEx measures within the workspace: `heuristic(count, &returned, perfs)`
/// (cudnnGet*Algorithm_v7) sizes the workspace (the largest any algorithm asks for, at least 64 MiB, at most the
/// cap), `find(count, &returned, perfs, workspace, bytes)` times every algorithm that fits.
template <class Perf, std::size_t N, class Heuristic, class Find>
ConvChoice search(Device& dev, int max_count, Heuristic heuristic, Find find, const char* const (&names)[N],
                  const std::string& what) {
  std::vector<Perf> perfs(static_cast<std::size_t>(std::max(max_count, 1)));
  int returned = 0;
  heuristic(max_count, &returned, perfs.data());
  std::size_t wanted_bytes = kConvSearchFloorBytes;
  for (int i = 0; i < returned; ++i)
    if (perfs[i].status == CUDNN_STATUS_SUCCESS)
      wanted_bytes = std::max(wanted_bytes, perfs[i].memory);
  const std::size_t search_bytes = std::min(wanted_bytes, conv_workspace_cap(dev));
  reserve(what, {{dev.workspace, search_bytes}});
  find(max_count, &returned, perfs.data(), dev.workspace.get(search_bytes), search_bytes);
  for (int i = 0; i < returned; ++i) // sorted by time, fastest first
    if (perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].memory <= search_bytes)
      return ConvChoice{static_cast<int>(perfs[i].algo), name_of(names, static_cast<int>(perfs[i].algo)),
                        perfs[i].mathType, perfs[i].memory, search_bytes};
  throw std::runtime_error(what + ": cuDNN found no algorithm within a workspace of " + probe::size_text(search_bytes));
}

Result run_convolution(Device& dev, const LayerKernel& L, const std::string& pass, const StoppingRule& rule,
                       const std::string& what) {
  const Dtype dtype = dev.options.dtype;
  const cudnnDataType_t type = cudnn_type(dtype);
  const auto& in = L.input;
  const auto& f = L.filters;
  if (L.groups <= 0 || in[1] != f[1] * L.groups || f[0] % L.groups != 0)
    throw std::runtime_error(what + ": input " + dims_text({in[0], in[1], in[2], in[3]}) + ", filters " +
                             dims_text({f[0], f[1], f[2], f[3]}) + " and groups " + std::to_string(L.groups) +
                             " disagree (C = C/groups x groups, K divisible by groups)");
  const std::size_t x_elements = product({in[0], in[1], in[2], in[3]}, what);
  const std::size_t w_elements = product({f[0], f[1], f[2], f[3]}, what);
  if (L.stride[0] <= 0 || L.stride[1] <= 0 || L.padding[0] < 0 || L.padding[1] < 0)
    throw std::runtime_error(what + ": stride " + dims_text({L.stride[0], L.stride[1]}) + " or padding " +
                             dims_text({L.padding[0], L.padding[1]}) + " out of range");
  Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x_desc, y_desc;
  Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w_desc;
  Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv;
  PROBE_CUDNN(cudnnCreateTensorDescriptor(x_desc.out()));
  PROBE_CUDNN(cudnnCreateTensorDescriptor(y_desc.out()));
  PROBE_CUDNN(cudnnCreateFilterDescriptor(w_desc.out()));
  PROBE_CUDNN(cudnnCreateConvolutionDescriptor(conv.out()));
  PROBE_CUDNN(cudnnSetTensor4dDescriptor(x_desc.get(), CUDNN_TENSOR_NCHW, type, to_int(in[0], what),
                                         to_int(in[1], what), to_int(in[2], what), to_int(in[3], what)));
  PROBE_CUDNN(cudnnSetFilter4dDescriptor(w_desc.get(), type, CUDNN_TENSOR_NCHW, to_int(f[0], what), to_int(f[1], what),
                                         to_int(f[2], what), to_int(f[3], what)));
  PROBE_CUDNN(cudnnSetConvolution2dDescriptor(conv.get(), to_int(L.padding[0], what), to_int(L.padding[1], what),
                                              to_int(L.stride[0], what), to_int(L.stride[1], what), 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  PROBE_CUDNN(cudnnSetConvolutionGroupCount(conv.get(), to_int(L.groups, what)));
  // PyTorch's defaults: fp32 with CUDNN_DEFAULT_MATH (torch.backends.cudnn.allow_tf32 is true, so cuDNN may use TF32
  // on Ampere and later), fp16 and bf16 with tensor-op math
  PROBE_CUDNN(
      cudnnSetConvolutionMathType(conv.get(), dtype == Dtype::fp32 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH));
  int yn = 0, yc = 0, yh = 0, yw = 0;
  PROBE_CUDNN(cudnnGetConvolution2dForwardOutputDim(conv.get(), x_desc.get(), w_desc.get(), &yn, &yc, &yh, &yw));
  PROBE_CUDNN(cudnnSetTensor4dDescriptor(y_desc.get(), CUDNN_TENSOR_NCHW, type, yn, yc, yh, yw));

  // x (or dx) in a, w (or dw) in b, y (or dy) in c; every one filled, the pass's output overwritten
  const std::size_t y_elements = product({yn, yc, yh, yw}, what);
  const std::size_t element_bytes = static_cast<std::size_t>(dtype_bytes(dtype));
  reserve(
      what,
      {{dev.a, x_elements * element_bytes}, {dev.b, w_elements * element_bytes}, {dev.c, y_elements * element_bytes}});
  void* x = dev.a.get(x_elements * element_bytes);
  void* w = dev.b.get(w_elements * element_bytes);
  void* y = dev.c.get(y_elements * element_bytes);
  fill(dev, x, x_elements, dtype, 1);
  fill(dev, w, w_elements, dtype, 2);
  fill(dev, y, y_elements, dtype, 3);
  PROBE_CUDA(cudaStreamSynchronize(dev.stream));

  const cudnnHandle_t h = dev.cudnn;
  const cudnnTensorDescriptor_t xd = x_desc.get(), yd = y_desc.get();
  const cudnnFilterDescriptor_t wd = w_desc.get();
  const cudnnConvolutionDescriptor_t cd = conv.get();
  ConvChoice choice;
  int count = 0;
  if (pass == "forward") {
    PROBE_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count));
    choice = search<cudnnConvolutionFwdAlgoPerf_t>(
        dev, count,
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* p) {
          PROBE_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, n, got, p));
        },
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* p, void* ws, std::size_t ws_bytes) {
          PROBE_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, n, got, p, ws, ws_bytes));
        },
        kForwardAlgos, what);
  } else if (pass == "backward_data") {
    PROBE_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &count));
    choice = search<cudnnConvolutionBwdDataAlgoPerf_t>(
        dev, count,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* p) {
          PROBE_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, yd, cd, xd, n, got, p));
        },
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* p, void* ws, std::size_t ws_bytes) {
          PROBE_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, yd, y, cd, xd, x, n, got, p, ws, ws_bytes));
        },
        kBackwardDataAlgos, what);
  } else if (pass == "backward_filter") {
    PROBE_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &count));
    choice = search<cudnnConvolutionBwdFilterAlgoPerf_t>(
        dev, count,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* p) {
          PROBE_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, n, got, p));
        },
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* p, void* ws, std::size_t ws_bytes) {
          PROBE_CUDNN(
              cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, yd, y, cd, wd, w, n, got, p, ws, ws_bytes));
        },
        kBackwardFilterAlgos, what);
  } else {
    throw std::runtime_error(what + ": unknown pass (forward, backward_data or backward_filter)");
  }

  // run as found: the algorithm with the math type it was timed with (as PyTorch does), and its workspace
  PROBE_CUDNN(cudnnSetConvolutionMathType(cd, choice.math));
  std::size_t queried_bytes = 0;
  if (pass == "forward")
    PROBE_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(
        h, xd, wd, cd, yd, static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), &queried_bytes));
  else if (pass == "backward_data")
    PROBE_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, wd, yd, cd, xd, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), &queried_bytes));
  else
    PROBE_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, xd, yd, cd, wd, static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), &queried_bytes));
  const std::size_t ws_bytes = std::max(choice.workspace_bytes, queried_bytes);
  reserve(what, {{dev.workspace, ws_bytes}});
  void* ws = dev.workspace.get(ws_bytes);

  const float alpha = 1, beta = 0;
  std::function<void(cudaStream_t)> op;
  if (pass == "forward")
    op = [&, ws, ws_bytes](cudaStream_t) {
      PROBE_CUDNN(cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd,
                                          static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), ws, ws_bytes, &beta, yd,
                                          y));
    };
  else if (pass == "backward_data")
    op = [&, ws, ws_bytes](cudaStream_t) {
      PROBE_CUDNN(cudnnConvolutionBackwardData(h, &alpha, wd, w, yd, y, cd,
                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), ws, ws_bytes,
                                               &beta, xd, x));
    };
  else
    op = [&, ws, ws_bytes](cudaStream_t) {
      PROBE_CUDNN(cudnnConvolutionBackwardFilter(h, &alpha, xd, x, yd, y, cd,
                                                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), ws,
                                                 ws_bytes, &beta, wd, w));
    };
  EventSource source(dev, std::move(op)); // the cuDNN handle is bound to dev.stream
  const Statistics stats = measure(source, rule);
  return Result{stats, std::string("cudnn algo ") + choice.name + " (" + std::to_string(choice.algo) + ", " +
                           name_of(kMathTypes, static_cast<int>(choice.math)) + "), workspace " +
                           probe::size_text(ws_bytes) + " (search allowed " + probe::size_text(choice.search_bytes) +
                           "); x " + dims_text({in[0], in[1], in[2], in[3]}) + ", w " +
                           dims_text({f[0], f[1], f[2], f[3]}) + ", y " + dims_text({yn, yc, yh, yw}) + ", stride " +
                           dims_text({L.stride[0], L.stride[1]}) + ", padding " +
                           dims_text({L.padding[0], L.padding[1]}) + ", groups " + std::to_string(L.groups) + ", " +
                           dtype_name(dtype)};
}

// ---- GEMMs (cuBLASLt) ----

/// Row-major C[rows, cols] = op(A)[rows, inner] op(B)[inner, cols], `batch` of them at whole-matrix strides; A is
/// stored [rows, inner] ([inner, rows] when trans_a), B [inner, cols] ([cols, inner] when trans_b). cuBLASLt is
/// column-major, where a row-major X reads as X^T: it computes C^T[cols, rows] = op(B)^T op(A)^T.
class LtMatmul {
public:
  LtMatmul(Device& dev, Dtype dtype, std::int64_t rows, std::int64_t cols, std::int64_t inner, bool trans_a,
           bool trans_b, int batch, std::size_t workspace_bytes)
      : lt_(dev.lt) {
    const cudaDataType_t type = cuda_type(dtype);
    PROBE_CUBLAS(cublasLtMatmulDescCreate(desc_.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F)); // fp32: no TF32
    const std::int32_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    PROBE_CUBLAS(cublasLtMatmulDescSetAttribute(desc_.get(), CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    PROBE_CUBLAS(
        cublasLtMatmulDescSetAttribute(desc_.get(), CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
    // stored column-major: B as [cols, inner] (ld cols) or [inner, cols]; A as [inner, rows] or [rows, inner]
    layout(first_, type, trans_b ? inner : cols, trans_b ? cols : inner, batch);
    layout(second_, type, trans_a ? rows : inner, trans_a ? inner : rows, batch);
    layout(out_, type, cols, rows, batch);
    Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
    PROBE_CUBLAS(cublasLtMatmulPreferenceCreate(pref.out()));
    const std::uint64_t max_workspace = workspace_bytes;
    PROBE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &max_workspace, sizeof max_workspace));
    int returned = 0;
    PROBE_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt_, desc_.get(), first_.get(), second_.get(), out_.get(), out_.get(),
                                                pref.get(), 1, &heuristic_, &returned));
    if (returned < 1 || heuristic_.state != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cuBLASLt has no algorithm for C[" + std::to_string(rows) + "," + std::to_string(cols) +
                               "] with inner dimension " + std::to_string(inner));
    PROBE_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&heuristic_.algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id_,
                                                      sizeof algo_id_, nullptr));
  }

  void run(const void* a, const void* b, void* c, void* workspace, std::size_t workspace_bytes, cudaStream_t s) const {
    const float alpha = 1, beta = 0;
    PROBE_CUBLAS(cublasLtMatmul(lt_, desc_.get(), &alpha, b, first_.get(), a, second_.get(), &beta, c, out_.get(), c,
                                out_.get(), &heuristic_.algo, workspace, workspace_bytes, s));
  }

  [[nodiscard]] std::string describe() const {
    return "heuristic algo " + std::to_string(algo_id_) + " (workspace " + probe::size_text(heuristic_.workspaceSize) +
           ")";
  }

private:
  using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
  static void layout(Layout& l, cudaDataType_t type, std::int64_t rows, std::int64_t cols, int batch) {
    PROBE_CUBLAS(cublasLtMatrixLayoutCreate(l.out(), type, static_cast<std::uint64_t>(rows),
                                            static_cast<std::uint64_t>(cols), rows));
    const std::int32_t count = batch;
    const std::int64_t stride = rows * cols; // elements, below 2^62 (product() checked the caller's sizes)
    PROBE_CUBLAS(cublasLtMatrixLayoutSetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    PROBE_CUBLAS(
        cublasLtMatrixLayoutSetAttribute(l.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }

  cublasLtHandle_t lt_;
  Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc_;
  Layout first_, second_, out_;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  std::int32_t algo_id_ = -1;
};

Result run_matmul(Device& dev, const LayerKernel& L, const std::string& pass, const StoppingRule& rule,
                  const std::string& what) {
  const Dtype dtype = dev.options.dtype;
  const int batch = L.kernel == KernelKind::batched_gemm ? to_int(L.count, what) : 1;
  if (batch < 1)
    throw std::runtime_error(what + ": count " + std::to_string(L.count) + " is not positive");
  // A[m,k] in a, B[k,n] in b (the weight), C[m,n] (or dC) in c; per matrix, `batch` of each
  const std::size_t element_bytes = static_cast<std::size_t>(dtype_bytes(dtype));
  const std::size_t a_bytes = product({L.m, L.k, batch}, what) * element_bytes;
  const std::size_t b_bytes = product({L.k, L.n, batch}, what) * element_bytes;
  const std::size_t c_bytes = product({L.m, L.n, batch}, what) * element_bytes;
  reserve(what, {{dev.a, a_bytes}, {dev.b, b_bytes}, {dev.c, c_bytes}, {dev.workspace, kMatmulWorkspaceBytes}});
  void* a = dev.a.get(a_bytes);
  void* b = dev.b.get(b_bytes);
  void* c = dev.c.get(c_bytes);
  void* ws = dev.workspace.get(kMatmulWorkspaceBytes);
  fill(dev, a, a_bytes / element_bytes, dtype, 1);
  fill(dev, b, b_bytes / element_bytes, dtype, 2);
  fill(dev, c, c_bytes / element_bytes, dtype, 3);
  PROBE_CUDA(cudaStreamSynchronize(dev.stream));

  std::int64_t rows = L.m, cols = L.n, inner = L.k;
  bool trans_a = false, trans_b = false;
  const void *first = a, *second = b;
  void* out = c;
  std::string shapes;
  if (pass == "forward") { // C = A B
    shapes = "C" + dims_text({L.m, L.n}) + " = A" + dims_text({L.m, L.k}) + " B" + dims_text({L.k, L.n});
  } else if (pass == "backward_data") { // dA = dC B^T
    cols = L.k;
    inner = L.n;
    trans_b = true;
    first = c;
    out = a;
    shapes = "dA" + dims_text({L.m, L.k}) + " = dC" + dims_text({L.m, L.n}) + " B^T" + dims_text({L.n, L.k});
  } else if (pass == "backward_filter") { // dB = A^T dC
    rows = L.k;
    inner = L.m;
    trans_a = true;
    second = c;
    out = b;
    shapes = "dB" + dims_text({L.k, L.n}) + " = A^T" + dims_text({L.k, L.m}) + " dC" + dims_text({L.m, L.n});
  } else {
    throw std::runtime_error(what + ": unknown pass (forward, backward_data or backward_filter)");
  }
  const LtMatmul matmul(dev, dtype, rows, cols, inner, trans_a, trans_b, batch, kMatmulWorkspaceBytes);
  EventSource source(dev, [&matmul, first, second, out, ws](cudaStream_t s) {
    matmul.run(first, second, out, ws, kMatmulWorkspaceBytes, s);
  });
  const Statistics stats = measure(source, rule);
  return Result{stats, "cublasLt " + shapes + " row-major" +
                           (batch > 1 ? ", " + std::to_string(batch) + " of them" : "") + ", " + dtype_name(dtype) +
                           " (compute fp32), " + matmul.describe() + " of " + probe::size_text(kMatmulWorkspaceBytes)};
}

} // namespace

// ---- the measurements ----

Result run_layer(Device& dev, const Measurement& m, const StoppingRule& rule) {
  if (!dev.plan || m.layer < 0 || static_cast<std::size_t>(m.layer) >= dev.plan->layers.size())
    throw std::runtime_error("probe: layer index " + std::to_string(m.layer) + " is not in the plan");
  const LayerKernel& L = dev.plan->layers[static_cast<std::size_t>(m.layer)];
  const std::string what = "layer '" + L.name + "' (" + L.kind + ", " + m.pass + ")";
  switch (L.kernel) {
  case KernelKind::convolution:
    return run_convolution(dev, L, m.pass, rule, what);
  case KernelKind::gemm:
  case KernelKind::batched_gemm:
    return run_matmul(dev, L, m.pass, rule, what);
  case KernelKind::memory:
    // the backward of an elementwise or normalisation layer reads the output gradient and the saved input and
    // writes the input gradient: twice the forward's traffic
    if (m.pass == "forward")
      return run_copy(dev, to_bytes(L.bytes, what), rule, what, false);
    if (m.pass == "backward")
      return run_copy(dev, to_bytes(2 * L.bytes, what), rule, what, false);
    throw std::runtime_error(what + ": unknown pass (forward or backward)");
  }
  throw std::logic_error("probe: unknown kernel kind");
}

// The sweep's GEMM as the forward of a GEMM layer of its shape: the same cuBLASLt call, heuristic and operands.
Result run_gemm(Device& dev, const Measurement& m, const StoppingRule& rule) {
  LayerKernel sweep;
  sweep.name = "gemm sweep";
  sweep.kind = "gemm";
  sweep.kernel = KernelKind::gemm;
  sweep.m = m.gemm.m;
  sweep.n = m.gemm.n;
  sweep.k = m.gemm.k;
  const std::string what =
      "gemm sweep m " + std::to_string(m.gemm.m) + " n " + std::to_string(m.gemm.n) + " k " + std::to_string(m.gemm.k);
  return run_matmul(dev, sweep, "forward", rule, what);
}

Result run_memory_bandwidth(Device& dev, const Measurement& m, const StoppingRule& rule) {
  const std::string what = "memory bandwidth over " + bytes_text(m.bytes);
  return run_copy(dev, to_bytes(m.bytes, what), rule, what, true);
}

namespace {

/// The host's wall-clock time of 1000 back-to-back launches of an empty kernel (one sample), the stream drained before
/// the clock starts and after it stops. A sample is the whole 1000 launches' time, not the time per launch: the
/// stopping rule sums samples against its minimum time and timeout, so that a per-launch sample would keep the loop
/// running 1000 times longer than the rule's times (0.5 s of "samples" = 500 s of launching, 15 s = over 4 hours);
/// run_launch divides the statistics by the launches afterwards.
class LaunchSource final : public SampleSource {
public:
  explicit LaunchSource(cudaStream_t stream) : stream_(stream) {}
  [[nodiscard]] double sample_s() override {
    PROBE_CUDA(cudaStreamSynchronize(stream_));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunchesPerSample; ++i)
      empty_kernel<<<1, 1, 0, stream_>>>();
    const auto stop = std::chrono::steady_clock::now();
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaStreamSynchronize(stream_));
    return std::chrono::duration<double>(stop - start).count();
  }

private:
  cudaStream_t stream_;
};

} // namespace

Result run_launch(Device& dev, const Measurement& /*m*/, const StoppingRule& rule) {
  LaunchSource source(dev.stream);
  Statistics stats = measure(source, rule);
  // per launch: every time statistic scales by 1 / launches (the relative noise does not change)
  for (double* t :
       {&stats.total_s, &stats.min_s, &stats.p10_s, &stats.median_s, &stats.p90_s, &stats.max_s, &stats.mean_s})
    *t /= kLaunchesPerSample;
  return Result{stats, "per launch, host time, " + std::to_string(kLaunchesPerSample) +
                           " launches per sample of an empty <<<1,1>>> kernel"};
}

Result run_h2d(Device& dev, const Measurement& m, const StoppingRule& rule) {
  const std::string what =
      std::string("host-to-device copy (") + (m.pinned ? "pinned" : "pageable") + ") of " + bytes_text(m.bytes);
  const std::size_t bytes = to_bytes(m.bytes, what);
  reserve(what, {{dev.a, bytes}});
  void* device = dev.a.get(bytes);
  std::unique_ptr<PinnedBuffer> pinned;
  std::vector<unsigned char> pageable;
  const void* host = nullptr;
  if (m.pinned) {
    pinned = std::make_unique<PinnedBuffer>(bytes);
    std::memset(pinned->get(), 1, bytes);
    host = pinned->get();
  } else {
    pageable.assign(bytes, 1); // written once, so that its pages exist before the copy
    host = pageable.data();
  }
  EventSource source(
      dev,
      [device, host, bytes](cudaStream_t s) {
        PROBE_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s));
      },
      /*flush=*/false);
  return Result{measure(source, rule), "cudaMemcpyAsync host to device, " + probe::size_text(bytes) + " from " +
                                           (m.pinned ? "pinned (cudaMallocHost)" : "pageable") + " host memory"};
}

Result run_low_rank(Device& dev, const Measurement& m, const StoppingRule& rule) {
  // column-major (LAPACK's layout, so that QR runs on P in place): M [n, m] ld n, Q [m, r] ld m, P [n, r] ld n
  const std::int64_t n = m.matrix.n, cols = m.matrix.m, r = m.matrix.rank;
  const std::string what = "PowerSGD " + m.step + " of M" + dims_text({n, cols}) + " at rank " + std::to_string(r);
  const std::size_t m_bytes = product({n, cols}, what) * sizeof(float);
  const std::size_t q_bytes = product({cols, r}, what) * sizeof(float);
  const std::size_t p_bytes = product({n, r}, what) * sizeof(float);
  const float alpha = 1, beta = 0;
  std::function<void(cudaStream_t)> op;
  std::string shapes;
  int* info = nullptr;

  if (m.step == "p_matmul" || m.step == "q_matmul") {
    reserve(what, {{dev.a, m_bytes}, {dev.b, q_bytes}, {dev.c, p_bytes}});
    float* M = static_cast<float*>(dev.a.get(m_bytes));
    float* Q = static_cast<float*>(dev.b.get(q_bytes));
    float* P = static_cast<float*>(dev.c.get(p_bytes));
    fill(dev, M, m_bytes / sizeof(float), Dtype::fp32, 1);
    fill(dev, Q, q_bytes / sizeof(float), Dtype::fp32, 2);
    fill(dev, P, p_bytes / sizeof(float), Dtype::fp32, 3);
    if (m.step == "p_matmul") { // P = M Q
      op = [&dev, n, cols, r, M, Q, P, &alpha, &beta](cudaStream_t) {
        PROBE_CUBLAS(
            cublasSgemm_64(dev.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, r, cols, &alpha, M, n, Q, cols, &beta, P, n));
      };
      shapes = "P" + dims_text({n, r}) + " = M" + dims_text({n, cols}) + " Q" + dims_text({cols, r});
    } else { // Q = M^T P
      op = [&dev, n, cols, r, M, Q, P, &alpha, &beta](cudaStream_t) {
        PROBE_CUBLAS(
            cublasSgemm_64(dev.blas, CUBLAS_OP_T, CUBLAS_OP_N, cols, r, n, &alpha, M, n, P, n, &beta, Q, cols));
      };
      shapes = "Q" + dims_text({cols, r}) + " = M^T" + dims_text({cols, n}) + " P" + dims_text({n, r});
    }
    shapes = "cublasSgemm " + shapes + " column-major, fp32";
  } else if (m.step == "orthogonalise") {
    if (r > n)
      throw std::runtime_error(what + ": the rank exceeds the rows of P, which has no QR with orthonormal columns");
    const int rows = to_int(n, what), rank = to_int(r, what);
    // tau (r floats) then devInfo in d; the factorisation's and the explicit Q's work in the workspace
    const std::size_t info_offset = (static_cast<std::size_t>(rank) * sizeof(float) + 255) / 256 * 256;
    reserve(what, {{dev.c, p_bytes}, {dev.d, info_offset + sizeof(int)}});
    float* P = static_cast<float*>(dev.c.get(p_bytes));
    float* tau = static_cast<float*>(dev.d.get(info_offset + sizeof(int)));
    info = reinterpret_cast<int*>(reinterpret_cast<unsigned char*>(tau) + info_offset);
    int geqrf_floats = 0, orgqr_floats = 0;
    PROBE_CUSOLVER(cusolverDnSgeqrf_bufferSize(dev.solver, rows, rank, P, rows, &geqrf_floats));
    PROBE_CUSOLVER(cusolverDnSorgqr_bufferSize(dev.solver, rows, rank, rank, P, rows, tau, &orgqr_floats));
    const int work_floats = std::max({geqrf_floats, orgqr_floats, 1});
    const std::size_t work_bytes = static_cast<std::size_t>(work_floats) * sizeof(float);
    reserve(what, {{dev.workspace, work_bytes}});
    float* work = static_cast<float*>(dev.workspace.get(work_bytes));
    fill(dev, P, p_bytes / sizeof(float), Dtype::fp32, 3);
    PROBE_CUDA(cudaMemsetAsync(info, 0, sizeof(int), dev.stream));
    // in place: after the first sample P holds the orthonormal Q, whose QR costs the same (no pivoting)
    op = [&dev, rows, rank, P, tau, work, work_floats, info](cudaStream_t) {
      PROBE_CUSOLVER(cusolverDnSgeqrf(dev.solver, rows, rank, P, rows, tau, work, work_floats, info));
      PROBE_CUSOLVER(cusolverDnSorgqr(dev.solver, rows, rank, rank, P, rows, tau, work, work_floats, info));
    };
    shapes = "cusolverDnSgeqrf + cusolverDnSorgqr of P" + dims_text({n, r}) + " in place, column-major, fp32, work " +
             probe::size_text(work_bytes);
  } else {
    throw std::runtime_error(what + ": unknown step (p_matmul, q_matmul or orthogonalise)");
  }
  PROBE_CUDA(cudaStreamSynchronize(dev.stream));

  EventSource source(dev, std::move(op)); // cuBLAS and cuSOLVER are bound to dev.stream
  Result result{measure(source, rule), shapes + "; one of " + std::to_string(m.matrix.count) + " such matrices"};
  if (info) {
    int host_info = 0;
    PROBE_CUDA(cudaMemcpyAsync(&host_info, info, sizeof host_info, cudaMemcpyDeviceToHost, dev.stream));
    PROBE_CUDA(cudaStreamSynchronize(dev.stream));
    if (host_info != 0)
      throw std::runtime_error(what + ": cuSOLVER reported info " + std::to_string(host_info));
  }
  return result;
}

} // namespace ddlsim::probe::gpu
