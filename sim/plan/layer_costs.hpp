// Forward and backward time of each layer from its kernels' shapes (docs/engines.md, "Shape-aware compute
// efficiency"): GEMMs, convolutions as implicit GEMMs and eager attention's batched GEMMs through the tile and wave
// model (gemm_efficiency.hpp), fused (flash) attention through its own, memory-bound kernels at the memory bandwidth.
// Under tensor parallelism each GEMM is timed at one rank's shard (Megatron-LM's column- and row-parallel linears) and
// reported for the whole layer, which the pipeline divides over the group (sim/plan/pipeline.cpp). Model FP8 training
// as Transformer Engine runs it: the transformer blocks' linear layers at the FP8 peak, with the casts of their inputs,
// weights and output gradients as memory-bound kernels.
#pragma once

#include "sim/spec/scenario.hpp"

#include <string>
#include <vector>

namespace ddlsim::sim {

/// Bytes each FP8 cast moves per element: Transformer Engine's fused cast-transpose reads the 16-bit tensor once and
/// writes it in FP8 twice (as is and transposed, for the other GEMM of the backward), updating its amax on the way
/// (transformer_engine/common/transpose/cast_transpose.cu): 2 + 1 + 1 bytes.
inline constexpr double kFp8CastBytesPerElement = 4.0;

/// The bytes per sample a layer reads from its producers (the model's input for the first layer), fp32 activations.
[[nodiscard]] double input_activation_bytes(const dag::Model& m, std::size_t layer);

/// Where a layer's GEMMs run: the transformer blocks' linear layers in FP8 when model.compute_dtype is fp8 (Transformer
/// Engine under Megatron-LM: fprop, dgrad and wgrad of te.Linear; embeddings, the LM head and attention's core stay in
/// 16 bits); every other GEMM in the compute format (16 bits under fp8).
[[nodiscard]] bool runs_in_fp8(const Scenario& s, const dag::Layer& layer);

/// The bytes Transformer Engine's casts move for one FP8 layer per sample, forward (its input and weight) and
/// backward (its output gradient); zero for any other layer.
struct CastBytes {
  double forward = 0, backward = 0;
};
[[nodiscard]] CastBytes fp8_cast_bytes(const Scenario& s, std::size_t layer);

struct LayerTimes {
  std::vector<double> fwd_s, bwd_s; ///< per layer, the whole layer (before the tensor-parallel split)
};

/// Every layer's shape-aware time at the scenario's batch (a preset gives the compute units, ceilings and peaks; a
/// calibration's `gemm` entry, fitted in a format on that GPU, the ceiling of the GEMMs in that format).
[[nodiscard]] LayerTimes shape_aware_layer_times(const Scenario& s);

/// Where the scenario's calibration gives its `gemm` entry, for notes: "calib.json /gemm", "s.json /calibration/gemm".
[[nodiscard]] std::string gemm_entry_place(const Scenario& s);

/// The report's note on what the shape-aware model rests on for this scenario (its GPU, tiles, ceilings, sources).
[[nodiscard]] std::string shape_aware_note(const Scenario& s);

} // namespace ddlsim::sim
