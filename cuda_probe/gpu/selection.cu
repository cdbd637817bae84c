// Top-k by magnitude of a gradient group, timed the ways ddlsim models it (dag/compression.hpp): a full CUB radix sort,
// torch.topk's radix select (PyTorch aten/src/ATen/native/cuda/TensorTopK.cu), DGC's sampled threshold (Lin et al.,
// ICLR 2018; dgc/compression.py `_sparsify`) and the Laplacian threshold with a bounded search (arXiv:1911.08772).
#include "cuda_probe/gpu/common.cuh"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_partition.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace ddlsim::probe::gpu {
namespace {

constexpr int kThreads = 256;                                  // every kernel's block
constexpr std::uint64_t kGradientSeed = 0x9e3779b97f4a7c15ULL; // fixed: every run selects from the same values
// The threshold search (ddlsim's `threshold`): counting steps (dag::kThresholdSearchSteps, Shi et al.'s gaussian-k loop
// bound `while loops < 3`) and the band of counts it accepts, [k / 2, 2 k]: symmetric in log(count), so that a miss
// costs at most a factor of two of the k pairs on the wire; on normal data the search below ends inside it for
// m >= 2^20 and densities 1e-5..0.3 (worked on the normal tail), where gaussian-k's tighter [2k/3, 4k/3] is often
// missed.
constexpr int kThresholdSearchSteps = 3;
constexpr double kBandLow = 0.5, kBandHigh = 2.0;

std::size_t align_up(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

/// Pieces of one allocation, each aligned to 256 bytes: add() them all, then allocate total() and take at(offset).
class Layout {
public:
  std::size_t add(std::size_t bytes) {
    const std::size_t offset = total_;
    total_ += align_up(bytes);
    return offset;
  }
  [[nodiscard]] std::size_t total() const { return total_; }
  template <class T> static T* at(void* base, std::size_t offset) {
    return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
  }

private:
  std::size_t total_ = 0;
};

/// Page-locked host memory for the readbacks inside the threshold search.
template <class T> class PinnedHost {
public:
  PinnedHost() { PROBE_CUDA(cudaMallocHost(&ptr_, sizeof(T))); }
  ~PinnedHost() { cudaFreeHost(ptr_); }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  T* get() const { return ptr_; }

private:
  T* ptr_ = nullptr;
};

/// Blocks of kThreads for a grid-stride loop over `items`: enough to fill the GPU (8 blocks per SM), no more than
/// needed, and enough that no block sees 2^31 items (the histogram's per-block counters are 32-bit).
int grid_for(std::int64_t items, int sms) {
  const std::int64_t needed = (items + kThreads - 1) / kThreads;
  const std::int64_t floor_blocks = items / (std::int64_t{1} << 31) + 1;
  const std::int64_t blocks = std::max(std::min(needed, std::int64_t{sms} * 8), floor_blocks);
  return static_cast<int>(std::clamp<std::int64_t>(blocks, 1, std::numeric_limits<int>::max()));
}

void check_launch() {
  PROBE_CUDA(cudaGetLastError());
}

// ---- the gradient --------------------------------------------------------------------------------------------------

__device__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Unit normal values by Box-Muller from a counter-based hash (the same values for a given seed and index on every
/// GPU). Normal rather than Laplacian: gradients are bell-shaped, close to normal (Shi et al., arXiv:1911.08772, Sec.
/// 3), and on normal data the Laplacian threshold estimate is off, so that the search corrects it as ddlsim charges.
__global__ void fill_normal(float* g, std::int64_t elements, std::uint64_t seed) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < elements; i += stride) {
    const std::uint64_t h1 = splitmix64(seed + 2 * static_cast<std::uint64_t>(i));
    const std::uint64_t h2 = splitmix64(seed + 2 * static_cast<std::uint64_t>(i) + 1);
    const double u1 = static_cast<double>((h1 >> 11) + 1) * 0x1p-53; // (0, 1]
    const double u2 = static_cast<double>(h2 >> 11) * 0x1p-53;       // [0, 1)
    g[i] = static_cast<float>(sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
  }
}

/// |g|'s bits as an unsigned integer: for non-negative floats, their order is the numbers' order.
__device__ __forceinline__ unsigned magnitude_key(float x) {
  return __float_as_uint(x) & 0x7fffffffu;
}

// ---- radix_sort: the full sort -------------------------------------------------------------------------------------

template <class Index>
__global__ void abs_and_iota(const float* g, std::int64_t elements, float* keys, Index* indices) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < elements; i += stride) {
    keys[i] = fabsf(g[i]);
    indices[i] = static_cast<Index>(i);
  }
}

/// The selected pairs from the first k sorted indices: (index, signed value).
template <class Index>
__global__ void gather_first(const float* g, const Index* sorted, std::int64_t k, Index* out_index, float* out_value) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < k; i += stride) {
    const Index index = sorted[i];
    out_index[i] = index;
    out_value[i] = g[index];
  }
}

// ---- radix_select: torch.topk's algorithm --------------------------------------------------------------------------

constexpr int kRadixBits = 8;
constexpr int kRadixBins = 1 << kRadixBits;
constexpr int kRadixPasses = 32 / kRadixBits;

/// The digits of the k-th largest key found so far: the keys that match `prefix` under `mask` hold it, and it is the
/// `k_left`-th largest of them.
struct RadixState {
  unsigned prefix;
  unsigned mask;
  unsigned long long k_left;
  int error; ///< set when a histogram held fewer than k_left keys (cannot happen unless the kernels are wrong)
};

__global__ void radix_init(unsigned long long* histograms, RadixState* state, std::int64_t k) {
  for (int i = threadIdx.x; i < kRadixPasses * kRadixBins; i += blockDim.x)
    histograms[i] = 0;
  if (threadIdx.x == 0)
    *state = RadixState{0u, 0u, static_cast<unsigned long long>(k), 0};
}

/// One pass: the histogram of the digit at `shift` of the keys that match the prefix found so far, counted in shared
/// memory (one atomic per distinct digit per warp: __match_any_sync groups the lanes with equal digits, as the first
/// pass's digits are the exponent's and collide) and added to the global histogram. Four loads in flight per thread.
__global__ void radix_histogram(const float* g, std::int64_t elements, const RadixState* state, int shift,
                                unsigned long long* histogram) {
  constexpr int kUnroll = 4;
  __shared__ unsigned counts[kRadixBins];
  for (int i = threadIdx.x; i < kRadixBins; i += blockDim.x)
    counts[i] = 0;
  __syncthreads();
  const unsigned prefix = state->prefix, mask = state->mask;
  const unsigned lane = threadIdx.x % 32;
  const std::int64_t tile = std::int64_t{blockDim.x} * kUnroll;
  // `base` is the same for every lane of a warp, so that all lanes take the same trips (full-mask __match_any_sync)
  for (std::int64_t base = std::int64_t{blockIdx.x} * tile; base < elements; base += std::int64_t{gridDim.x} * tile) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = base + u * std::int64_t{blockDim.x} + threadIdx.x;
      x[u] = i < elements ? g[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = base + u * std::int64_t{blockDim.x} + threadIdx.x;
      const unsigned key = magnitude_key(x[u]);
      const unsigned bin = i < elements && (key & mask) == prefix ? (key >> shift) & (kRadixBins - 1) : kRadixBins;
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin < kRadixBins && lane == static_cast<unsigned>(__ffs(peers) - 1))
        atomicAdd(&counts[bin], static_cast<unsigned>(__popc(peers)));
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRadixBins; i += blockDim.x)
    if (counts[i] != 0)
      atomicAdd(&histogram[i], static_cast<unsigned long long>(counts[i]));
}

/// One block of kRadixBins threads: the digit that holds the k_left-th largest key (a suffix sum over the digits from
/// the largest down), appended to the prefix; k_left loses the keys of the larger digits. On the device, as torch's
/// multi-block top-k does: no readback between passes.
__global__ void radix_pick_digit(const unsigned long long* histogram, RadixState* state, int shift) {
  using Scan = cub::BlockScan<unsigned long long, kRadixBins>;
  __shared__ typename Scan::TempStorage scan_storage;
  const unsigned digit = kRadixBins - 1 - threadIdx.x;
  const unsigned long long count = histogram[digit];
  const unsigned long long k_left = state->k_left;
  __syncthreads(); // every thread has read the state before one of them writes it
  unsigned long long inclusive = 0;
  Scan(scan_storage).InclusiveSum(count, inclusive);
  const unsigned long long exclusive = inclusive - count;
  if (exclusive < k_left && k_left <= inclusive) {
    state->prefix |= digit << shift;
    state->mask |= static_cast<unsigned>(kRadixBins - 1) << shift;
    state->k_left = k_left - exclusive;
  }
  if (threadIdx.x == kRadixBins - 1 && inclusive < k_left)
    state->error = 1;
}

struct KeyAbove {
  const float* g;
  const RadixState* state;
  template <class Index> __device__ bool operator()(Index i) const { return magnitude_key(g[i]) > state->prefix; }
};
struct KeyEqual {
  const float* g;
  const RadixState* state;
  template <class Index> __device__ bool operator()(Index i) const { return magnitude_key(g[i]) == state->prefix; }
};

/// The k pairs: the keys above the k-th (exactly k - k_left of them, already in out_index) and the first k_left of the
/// keys equal to it (in index order).
template <class Index>
__global__ void gather_exact(const float* g, const std::int64_t* selected, const Index* ties, std::int64_t k,
                             Index* out_index, float* out_value) {
  const std::int64_t above = selected[0], equal = selected[1];
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < k; i += stride) {
    if (i >= above && i - above >= equal)
      continue; // fewer than k candidates: the host check after the measurement reports it
    const Index index = i < above ? out_index[i] : ties[i - above];
    out_index[i] = index;
    out_value[i] = g[index];
  }
}

// ---- sampling and threshold: compare with a threshold and compact --------------------------------------------------

struct DgcSample {
  std::int64_t stride = 1, samples = 0;
  std::int64_t top = 1; ///< the sample's top that sets the threshold
};

/// DGC's sample (dgc/compression.py, DGCCompressor.initialize): at least max(ceil(0.01 m), ceil(2 / ratio)) values at
/// an odd stride (a multiple of 32, plus 1, stepped down by 8 until there are enough), all m when m <= ceil(2 / ratio);
/// its top ceil(samples x ratio) sets the threshold; ratio = k / m. Strided from 0 (DGC starts at a random offset).
DgcSample dgc_sample(std::int64_t elements, std::int64_t k) {
  const std::int64_t percent = (elements + 99) / 100;
  const std::int64_t twice_inverse_ratio = (2 * elements + k - 1) / k;
  const std::int64_t wanted = std::max(percent, twice_inverse_ratio);
  DgcSample s;
  s.samples = elements;
  if (elements > twice_inverse_ratio) {
    s.stride = (elements / wanted + (elements % wanted != 0) + 31) / 32 * 32 + 1;
    s.samples = elements / s.stride;
    while (s.samples < wanted && s.stride > 1) {
      s.stride = std::max<std::int64_t>(s.stride - 8, 1);
      s.samples = elements / s.stride;
    }
  }
  // ceil(samples k / m), exactly (the product may pass 2^63)
  const auto m128 = static_cast<unsigned __int128>(elements);
  const auto top = (static_cast<unsigned __int128>(s.samples) * static_cast<unsigned __int128>(k) + m128 - 1) / m128;
  s.top = std::clamp<std::int64_t>(static_cast<std::int64_t>(top), 1, s.samples);
  return s;
}

__global__ void strided_sample(const float* g, std::int64_t stride, std::int64_t samples, float* out) {
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < samples; i += step)
    out[i] = fabsf(g[i * stride]);
}

/// |g[i]| >= the threshold in device memory (left there by the kernel before: no readback).
struct AbsAtLeast {
  const float* g;
  const float* threshold;
  template <class Index> __device__ bool operator()(Index i) const { return fabsf(g[i]) >= *threshold; }
};

/// The values of the `*count` compacted indices.
template <class Index>
__global__ void gather_counted(const float* g, const std::int64_t* count, const Index* index, float* out_value) {
  const std::int64_t n = *count;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    out_value[i] = g[index[i]];
}

struct ThresholdState {
  double abs_sum;           ///< sum of |g| (cub::DeviceReduce)
  float threshold;          ///< the current threshold
  unsigned long long count; ///< elements with |g| >= threshold (count_at_least)
};

struct AbsToDouble {
  __host__ __device__ double operator()(float x) const { return fabs(static_cast<double>(x)); }
};

/// The Laplacian estimate: b = mean |g|, t = b ln(1 / density) (dag/compression.hpp, Selection::threshold).
__global__ void threshold_init(ThresholdState* state, std::int64_t elements, double log_inverse_density) {
  state->threshold = static_cast<float>(state->abs_sum / static_cast<double>(elements) * log_inverse_density);
  state->count = 0;
}

__global__ void threshold_set(ThresholdState* state, float threshold) {
  state->threshold = threshold;
  state->count = 0;
}

__global__ void count_at_least(const float* g, std::int64_t elements, ThresholdState* state) {
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage reduce_storage;
  const float threshold = state->threshold;
  unsigned long long count = 0;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < elements; i += stride)
    count += fabsf(g[i]) >= threshold ? 1 : 0;
  const unsigned long long block_count = Reduce(reduce_storage).Sum(count);
  if (threadIdx.x == 0 && block_count != 0)
    atomicAdd(&state->count, block_count);
}

/// The bracketing search of the threshold (ddlsim's `threshold` selection): `lo` counted too many (above the band;
/// lo = 0 counts all m), `hi` too few (+inf while none has). Inside a bracket, the next threshold is false position on
/// log(count), which is linear in t for a Laplacian tail (the estimate's own model), and stays strictly inside the
/// bracket as bisection does; without an upper end, the same line through (0, m) and (lo, count at lo), at most 4 lo.
class ThresholdSearch {
public:
  ThresholdSearch(double k, double elements) : k_(k), elements_(elements), c_lo_(elements) {}
  /// Whether `count` elements at threshold t are within the band; if not, the bracket narrows.
  bool in_band(double t, double count) {
    if (count >= kBandLow * k_ && count <= kBandHigh * k_)
      return true;
    if (count > kBandHigh * k_) {
      lo_ = t;
      c_lo_ = count;
    } else {
      hi_ = t;
      c_hi_ = count;
    }
    return false;
  }
  [[nodiscard]] double next() const {
    if (std::isfinite(hi_)) {
      const double f = (std::log(c_lo_) - std::log(k_)) / (std::log(c_lo_) - std::log(std::max(c_hi_, 0.5)));
      return lo_ + (hi_ - lo_) * f;
    }
    if (lo_ > 0 && c_lo_ < elements_)
      return std::min(lo_ * std::log(elements_ / k_) / std::log(elements_ / c_lo_), 4 * lo_);
    return 2 * lo_;
  }

private:
  double k_, elements_;
  double lo_ = 0, c_lo_;
  double hi_ = std::numeric_limits<double>::infinity(), c_hi_ = 0;
};

std::string count_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", x);
  return text;
}

std::string real_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", x);
  return text;
}

template <class T> T read_device(const T* source) {
  T value{};
  PROBE_CUDA(cudaMemcpy(&value, source, sizeof(T), cudaMemcpyDeviceToHost));
  return value;
}

// ---- the measurement -----------------------------------------------------------------------------------------------

template <class Index> Result run(Device& dev, const Measurement& m, const StoppingRule& rule) {
  const std::int64_t elements = m.elements, k = m.selected;
  const auto items = static_cast<Index>(elements); // CUB's item counts: 32-bit offsets where they fit
  const std::string selected_of = " of " + count_text(static_cast<double>(elements));
  int sms = 0;
  PROBE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev.index));
  const int grid = grid_for(elements, sms);
  const int grid_k = grid_for(k, sms);
  const cudaStream_t stream = dev.stream;

  auto* g = static_cast<float*>(dev.a.get(static_cast<std::size_t>(elements) * sizeof(float)));
  fill_normal<<<grid, kThreads, 0, stream>>>(g, elements, kGradientSeed);
  check_launch();
  PROBE_CUDA(cudaStreamSynchronize(stream));

  DeviceBuffer small; // states, histograms and counts of a few bytes
  Result result;

  if (m.algorithm == "radix_sort") {
    float* keys = static_cast<float*>(dev.b.get(2 * static_cast<std::size_t>(elements) * sizeof(float)));
    Index* indices = static_cast<Index*>(dev.c.get(2 * static_cast<std::size_t>(elements) * sizeof(Index)));
    Layout out;
    const std::size_t out_index_at = out.add(static_cast<std::size_t>(k) * sizeof(Index));
    const std::size_t out_value_at = out.add(static_cast<std::size_t>(k) * sizeof(float));
    void* out_base = dev.d.get(out.total());
    Index* out_index = Layout::at<Index>(out_base, out_index_at);
    float* out_value = Layout::at<float>(out_base, out_value_at);
    std::size_t temp_bytes = 0;
    {
      cub::DoubleBuffer<float> key_buffers(keys, keys + elements);
      cub::DoubleBuffer<Index> index_buffers(indices, indices + elements);
      PROBE_CUDA(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, key_buffers, index_buffers, items, 0,
                                                           32, stream));
    }
    void* temp = dev.workspace.get(temp_bytes);
    EventSource source(dev, [&](cudaStream_t s) {
      abs_and_iota<<<grid, kThreads, 0, s>>>(g, elements, keys, indices);
      check_launch();
      cub::DoubleBuffer<float> key_buffers(keys, keys + elements);
      cub::DoubleBuffer<Index> index_buffers(indices, indices + elements);
      std::size_t bytes = temp_bytes;
      PROBE_CUDA(cub::DeviceRadixSort::SortPairsDescending(temp, bytes, key_buffers, index_buffers, items, 0, 32, s));
      gather_first<<<grid_k, kThreads, 0, s>>>(g, index_buffers.Current(), k, out_index, out_value);
      check_launch();
    });
    result.stats = measure(source, rule);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    result.note = "selected " + count_text(static_cast<double>(k)) + selected_of +
                  " (exact: cub::DeviceRadixSort::SortPairsDescending of all |g| with their indices, first k)";
    return result;
  }

  if (m.algorithm == "radix_select") {
    Layout layout;
    const std::size_t histograms_at = layout.add(kRadixPasses * kRadixBins * sizeof(unsigned long long));
    const std::size_t state_at = layout.add(sizeof(RadixState));
    const std::size_t selected_at = layout.add(2 * sizeof(std::int64_t));
    void* base = small.get(layout.total());
    auto* histograms = Layout::at<unsigned long long>(base, histograms_at);
    auto* state = Layout::at<RadixState>(base, state_at);
    auto* selected = Layout::at<std::int64_t>(base, selected_at);
    // the keys equal to the k-th: all of them in the worst case (equal values), k_left of them taken
    Index* ties = static_cast<Index*>(dev.c.get(static_cast<std::size_t>(elements) * sizeof(Index)));
    Layout out;
    const std::size_t out_index_at = out.add(static_cast<std::size_t>(k) * sizeof(Index));
    const std::size_t out_value_at = out.add(static_cast<std::size_t>(k) * sizeof(float));
    void* out_base = dev.d.get(out.total());
    Index* out_index = Layout::at<Index>(out_base, out_index_at);
    float* out_value = Layout::at<float>(out_base, out_value_at);
    const thrust::counting_iterator<Index> positions(0);
    const auto discard = thrust::make_discard_iterator();
    std::size_t temp_bytes = 0;
    PROBE_CUDA(cub::DevicePartition::If(nullptr, temp_bytes, positions, out_index, ties, discard, selected, items,
                                        KeyAbove{g, state}, KeyEqual{g, state}, stream));
    void* temp = dev.workspace.get(temp_bytes);
    EventSource source(dev, [&](cudaStream_t s) {
      radix_init<<<1, kRadixBins, 0, s>>>(histograms, state, k);
      check_launch();
      for (int pass = 0; pass < kRadixPasses; ++pass) {
        const int shift = 32 - kRadixBits * (pass + 1); // most significant digit first
        radix_histogram<<<grid, kThreads, 0, s>>>(g, elements, state, shift, histograms + pass * kRadixBins);
        check_launch();
        radix_pick_digit<<<1, kRadixBins, 0, s>>>(histograms + pass * kRadixBins, state, shift);
        check_launch();
      }
      // one pass: the keys above the k-th and those equal to it (three-way partition, the rest discarded)
      std::size_t bytes = temp_bytes;
      PROBE_CUDA(cub::DevicePartition::If(temp, bytes, positions, out_index, ties, discard, selected, items,
                                          KeyAbove{g, state}, KeyEqual{g, state}, s));
      gather_exact<<<grid_k, kThreads, 0, s>>>(g, selected, ties, k, out_index, out_value);
      check_launch();
    });
    result.stats = measure(source, rule);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    const RadixState found = read_device(state);
    std::int64_t counts[2] = {};
    PROBE_CUDA(cudaMemcpy(counts, selected, sizeof counts, cudaMemcpyDeviceToHost));
    const auto k_left = static_cast<std::int64_t>(found.k_left);
    if (found.error != 0 || found.mask != 0xffffffffu || counts[0] != k - k_left || counts[1] < k_left)
      throw std::logic_error("radix_select: inconsistent selection (" + count_text(static_cast<double>(counts[0])) +
                             " above the k-th key, " + count_text(static_cast<double>(counts[1])) + " equal, " +
                             count_text(static_cast<double>(k_left)) + " of them wanted, k " +
                             count_text(static_cast<double>(k)) + ")");
    result.note = "selected " + count_text(static_cast<double>(k)) + selected_of + " (exact: k-th largest |g| " +
                  real_text(std::bit_cast<float>(found.prefix)) + ", " + count_text(static_cast<double>(counts[1])) +
                  " element(s) equal to it, the first " + count_text(static_cast<double>(k_left)) +
                  " by index taken; 4 histogram passes of 8 bits, digits found on the device)";
    return result;
  }

  if (m.algorithm == "sampling") {
    const auto [sample_stride, samples, top] = dgc_sample(elements, k);
    Layout sample_layout;
    const std::size_t sample_at = sample_layout.add(static_cast<std::size_t>(samples) * sizeof(float));
    const std::size_t sorted_at = sample_layout.add(static_cast<std::size_t>(samples) * sizeof(float));
    void* sample_base = dev.b.get(sample_layout.total());
    float* sample = Layout::at<float>(sample_base, sample_at);
    float* sorted = Layout::at<float>(sample_base, sorted_at);
    // the survivors: up to all m (the count is approximate)
    Index* out_index = static_cast<Index*>(dev.c.get(static_cast<std::size_t>(elements) * sizeof(Index)));
    float* out_value = static_cast<float*>(dev.d.get(static_cast<std::size_t>(elements) * sizeof(float)));
    auto* count = static_cast<std::int64_t*>(small.get(sizeof(std::int64_t)));
    const thrust::counting_iterator<Index> positions(0);
    const AbsAtLeast survives{g, sorted + (top - 1)};
    std::size_t sort_bytes = 0, select_bytes = 0;
    PROBE_CUDA(cub::DeviceRadixSort::SortKeysDescending(nullptr, sort_bytes, sample, sorted,
                                                        static_cast<Index>(samples), 0, 32, stream));
    PROBE_CUDA(cub::DeviceSelect::If(nullptr, select_bytes, positions, out_index, count, elements, survives, stream));
    const std::size_t temp_bytes = std::max(sort_bytes, select_bytes);
    void* temp = dev.workspace.get(temp_bytes);
    const int grid_samples = grid_for(samples, sms);
    EventSource source(dev, [&](cudaStream_t s) {
      strided_sample<<<grid_samples, kThreads, 0, s>>>(g, sample_stride, samples, sample);
      check_launch();
      std::size_t bytes = temp_bytes;
      PROBE_CUDA(
          cub::DeviceRadixSort::SortKeysDescending(temp, bytes, sample, sorted, static_cast<Index>(samples), 0, 32, s));
      bytes = temp_bytes;
      PROBE_CUDA(cub::DeviceSelect::If(temp, bytes, positions, out_index, count, elements, survives, s));
      gather_counted<<<grid, kThreads, 0, s>>>(g, count, out_index, out_value);
      check_launch();
    });
    result.stats = measure(source, rule);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    const std::int64_t survivors = read_device(count);
    const float threshold = read_device(sorted + (top - 1));
    result.note = "selected " + count_text(static_cast<double>(survivors)) + selected_of + " (k " +
                  count_text(static_cast<double>(k)) + "; threshold " + real_text(threshold) + ": the top " +
                  count_text(static_cast<double>(top)) + " of " + count_text(static_cast<double>(samples)) +
                  " samples at stride " + count_text(static_cast<double>(sample_stride)) +
                  ", CUB radix sort; no adaptation loop, as ddlsim charges none)";
    return result;
  }

  if (m.algorithm == "threshold") {
    Layout layout;
    const std::size_t state_at = layout.add(sizeof(ThresholdState));
    const std::size_t count_at = layout.add(sizeof(std::int64_t));
    void* base = small.get(layout.total());
    auto* state = Layout::at<ThresholdState>(base, state_at);
    auto* count = Layout::at<std::int64_t>(base, count_at);
    Index* out_index = static_cast<Index*>(dev.c.get(static_cast<std::size_t>(elements) * sizeof(Index)));
    float* out_value = static_cast<float*>(dev.d.get(static_cast<std::size_t>(elements) * sizeof(float)));
    const thrust::counting_iterator<Index> positions(0);
    const AbsAtLeast survives{g, &state->threshold};
    std::size_t reduce_bytes = 0, select_bytes = 0;
    PROBE_CUDA(cub::DeviceReduce::TransformReduce(nullptr, reduce_bytes, g, &state->abs_sum, items,
                                                  ::cuda::std::plus<double>{}, AbsToDouble{}, 0.0, stream));
    PROBE_CUDA(cub::DeviceSelect::If(nullptr, select_bytes, positions, out_index, count, elements, survives, stream));
    const std::size_t temp_bytes = std::max(reduce_bytes, select_bytes);
    void* temp = dev.workspace.get(temp_bytes);
    PinnedHost<ThresholdState> readback;
    const double kd = static_cast<double>(k), md = static_cast<double>(elements);
    const double log_inverse_density = std::log(md / kd);
    int counts_done = 0; // of the last sample
    double first_threshold = 0, final_threshold = 0;
    EventSource source(dev, [&](cudaStream_t s) {
      std::size_t bytes = temp_bytes;
      PROBE_CUDA(cub::DeviceReduce::TransformReduce(temp, bytes, g, &state->abs_sum, items, ::cuda::std::plus<double>{},
                                                    AbsToDouble{}, 0.0, s));
      threshold_init<<<1, 1, 0, s>>>(state, elements, log_inverse_density);
      check_launch();
      ThresholdSearch search(kd, md);
      counts_done = 0;
      for (int step = 0; step < kThresholdSearchSteps; ++step) {
        count_at_least<<<grid, kThreads, 0, s>>>(g, elements, state);
        check_launch();
        // the host decides the next step (a readback per step, as gaussian-k's count does): inside the timing
        PROBE_CUDA(cudaMemcpyAsync(readback.get(), state, sizeof(ThresholdState), cudaMemcpyDeviceToHost, s));
        PROBE_CUDA(cudaStreamSynchronize(s));
        ++counts_done;
        const double t = readback.get()->threshold, c = static_cast<double>(readback.get()->count);
        if (step == 0)
          first_threshold = t;
        final_threshold = t;
        if (search.in_band(t, c))
          break;
        // after the last count, the next threshold is the one compacted at (its count: the survivors')
        final_threshold = search.next();
        threshold_set<<<1, 1, 0, s>>>(state, static_cast<float>(final_threshold));
        check_launch();
      }
      bytes = temp_bytes;
      PROBE_CUDA(cub::DeviceSelect::If(temp, bytes, positions, out_index, count, elements, survives, s));
      gather_counted<<<grid, kThreads, 0, s>>>(g, count, out_index, out_value);
      check_launch();
    });
    result.stats = measure(source, rule);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    const std::int64_t survivors = read_device(count);
    result.note = "selected " + count_text(static_cast<double>(survivors)) + selected_of + " (k " +
                  count_text(static_cast<double>(k)) + "; Laplacian threshold " + real_text(first_threshold) +
                  ", final " + real_text(final_threshold) + " after " + std::to_string(counts_done) +
                  " count(s) of at most " + std::to_string(kThresholdSearchSteps) + ", band [k/2, 2k])";
    return result;
  }

  throw std::invalid_argument("selection: unknown algorithm '" + m.algorithm +
                              "' (radix_sort, radix_select, sampling, threshold)");
}

} // namespace

Result run_selection(Device& dev, const Measurement& m, const StoppingRule& rule) {
  if (m.elements <= 0 || m.selected <= 0 || m.selected > m.elements)
    throw std::invalid_argument("selection: need 0 < k <= m, got k " + std::to_string(m.selected) + " of m " +
                                std::to_string(m.elements));
  // 32-bit indices (the wire format's) where they can address the group, else 64-bit
  if (m.elements <= std::numeric_limits<std::int32_t>::max())
    return run<std::int32_t>(dev, m, rule);
  return run<std::int64_t>(dev, m, rule);
}

} // namespace ddlsim::probe::gpu
