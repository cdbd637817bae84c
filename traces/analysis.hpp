// What one PyTorch profiler trace says about a training step (docs/traces.md): the steps (ProfilerStep#N), the
// phases of each (data loading, host-to-device copy, forward, backward, optimizer, the rest), the layers formed from
// module annotations or else parameterised operators (with their weight shapes), each layer's GPU kernel time (kernels
// reached from its operators' launches by correlation id) and host time (the CPU thread's time from the layer's first
// operator to the next layer's; backward operators join their forward operator's layer by sequence number), and the
// collectives with their sizes. Per-step figures are reduced to medians over the steps (minimum for NCCL kernels, which
// include waiting for peers). No engine: the import (import.hpp) turns this into a workload, a calibration and a
// scenario.
#pragma once

#include "core/collective.hpp"
#include "dag/model.hpp"
#include "traces/kineto.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::traces {

/// A layer as traced, with its figures reduced over the steps (seconds).
struct TracedLayer {
  std::string name;                      ///< "conv_1", "bn_2", ..., a module's "Conv2d_3" (zoo names: import.hpp)
  std::string kind;                      ///< conv, linear, bn, ln, embedding, pool, compiled, module, ops
  std::string op;                        ///< the operator that opened it (a module's: its parameterised one)
  std::vector<dag::ParamTensor> params;  ///< from the operator's Input Dims (names "<layer>.weight", ".bias")
  std::vector<std::int64_t> input_shape; ///< the operator's first input (batch first)
  double fwd_flops = 0;                  ///< per sample, when derivable (conv, linear)
  double activation_bytes = 0;           ///< per sample: the next layer's input, fp32
  double forward_gpu_s = 0;
  double backward_gpu_s = 0;
  double forward_host_s = 0;
  double backward_host_s = 0;
  int kernels_forward = 0; ///< GPU tasks launched (median step)
  int kernels_backward = 0;
};

/// A collective call as traced (one per NCCL call, in launch order within the median step).
struct TracedCollective {
  std::string op;                           ///< nccl:all_reduce, c10d::allreduce_, ...
  std::string kind;                         ///< allreduce, allgather, reduce_scatter, alltoall, broadcast, send, recv
  Collective collective = Collective::none; ///< none when ddlsim does not simulate it (alltoall, send, recv)
  std::optional<double> bytes;              ///< whole buffer (allgather: gathered; reduce_scatter: input)
  std::string size_from;                    ///< "Input Dims", "record_param_comms", "allocation", ""
  std::string phase;                        ///< forward, backward, data_loading, optimizer, other
  int layer = -1;                           ///< backward: the layer whose backward issued it
  bool after_backward = false;              ///< issued by layer 0's backward, which ends the pass
  std::optional<double> gpu_min_s;          ///< NCCL kernel time, minimum over the steps
  std::string kernel_mismatch; ///< the NCCL kernel reached by correlation is of another collective (its name)
  int group_size = 0;          ///< 0: unknown
  double host_s = 0;           ///< host time of the call (median)
};

struct StepSpan {
  std::string name; ///< ProfilerStep#N
  double start_us = 0;
  double duration_s = 0;
  bool used = false; ///< taken into the medians (the first of three or more is not: profiler warm-up)
};

/// Medians over the used steps, seconds.
struct PhaseFigures {
  double step_s = 0;         ///< median step
  double data_loading_s = 0; ///< DataLoader spans on the main thread
  double h2d_host_s = 0;     ///< host time of the input's host-to-device copy
  double h2d_copy_s = 0;     ///< the copies' GPU time
  double h2d_bytes = 0;
  double forward_s = 0;        ///< host: forward operators (the layers' forward_host summed)
  double backward_s = 0;       ///< host: the autograd thread's backward (layers' backward_host summed)
  double optimizer_host_s = 0; ///< Optimizer.step spans
  double optimizer_gpu_s = 0;  ///< kernels launched by them
  double other_host_s = 0;     ///< the rest of the main thread (zero_grad, loss bookkeeping, loop)
  double sync_wait_s = 0;      ///< main thread blocked in cuda*Synchronize / synchronous copies (not host work)
  double backward_wait_s = 0;  ///< main thread waiting for the autograd thread
  double gpu_busy_s = 0;       ///< union of all GPU activity launched in the step
  double gpu_kernels_s = 0;    ///< sum of all GPU activity launched in the step, NCCL excluded
  double other_gpu_s = 0;      ///< GPU activity outside layers and optimizer (zero_grad memsets, copies ...)
  double nccl_s = 0;           ///< sum of NCCL kernels
  double launch_s = 0;         ///< host time per GPU task launched by a layer operator (median over operators)
  int gpu_tasks = 0;
};

/// The largest batch per GPU a trace may show: the largest a scenario or a calibration takes.
inline constexpr int kMaxBatch = 1 << 24;

struct TraceAnalysis {
  std::string path;
  DeviceProperties device;
  std::optional<int> world_size;
  std::optional<int> rank;
  std::vector<StepSpan> steps;
  int median_step = 0;      ///< index into steps of the step closest to the median (the traced step written out)
  std::optional<int> batch; ///< 1 to kMaxBatch
  std::vector<TracedLayer> layers;
  bool layers_from_modules = false; ///< layers are leaf modules ("nn.Module: ..." annotations), not operators
  std::vector<TracedCollective> collectives;
  PhaseFigures phases;
  bool prefetch = false;          ///< DataLoader workers (the loader's own threads/processes) vs single-process loading
  std::vector<std::string> notes; ///< what the trace did not contain, what was assumed
};

/// Analyses a trace. Errors (no ProfilerStep, no kernels) are InputErrors naming the file.
[[nodiscard]] TraceAnalysis analyse(const KinetoTrace& trace);

/// Chrome trace events of one step (traceEvents of the step's CPU threads and GPU streams, complete events only,
/// names kept, times shifted so that the step starts at 0 us): DIR/traced_step.json.
[[nodiscard]] OrderedJson traced_step_events(const KinetoTrace& trace, const TraceAnalysis& analysis);

} // namespace ddlsim::traces
