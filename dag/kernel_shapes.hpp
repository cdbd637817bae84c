// What a layer's forward runs on the GPU, as shapes a benchmark can time: a convolution (cuDNN), a GEMM or a batch of
// GEMMs (cuBLASLt), or a memory-bound kernel (normalisation, pooling, softmax, embedding lookup, concatenation). Read
// back from the model's layers (zoo builders and workload files alike): a convolution's weight [K, C/g, R, S], the
// channels flowing between layers, and each layer's output bytes give its input and output sizes; a linear layer's
// weight and bias and its output bytes give the GEMM. `ddlsim probe-plan` lists them for the probe (issue #13).
#pragma once

#include "dag/model.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ddlsim::dag {

struct LayerKernel {
  enum class Kind : std::uint8_t { convolution, gemm, batched_gemm, memory };
  Kind kind = Kind::memory;
  int layer = 0; ///< index in Model::layers
  // convolution: NCHW input, K filters of R x S, stride and padding per dimension, groups
  std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0,
               groups = 1;
  // gemm: C[m x n] = A[m x k] B[k x n], `count` of them (batched_gemm: one per sample and head)
  std::int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0, count = 1;
  double bytes = 0; ///< memory: bytes read and written by the forward kernel, for the whole batch
  std::string why;  ///< memory kernel standing in for a layer whose shapes could not be read back: the reason
};

[[nodiscard]] std::string_view layer_kernel_name(LayerKernel::Kind kind);

/// One kernel per layer with work (a layer of no FLOPs and no parameters, such as a flatten, gets none), forward,
/// at `batch` samples per GPU. Spatial sizes are taken as square (as the zoo's models are).
[[nodiscard]] std::vector<LayerKernel> layer_kernels(const Model& model, int batch);

} // namespace ddlsim::dag
