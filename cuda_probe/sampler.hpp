// The probe's timing loop, apart from CUDA: a measurement is a source of timed samples (CUDA events on the GPU, a
// scripted fake in tests), warmed up, then sampled until its relative noise is low enough or time runs out, and
// summarised by order statistics. The stopping rule is nvbench's default "stdrel" criterion (NVIDIA/nvbench,
// docs/cli_help.md: --min-samples 10, --min-time 0.5 s, --max-noise 0.5 % relative standard deviation, --timeout
// 15 s) after a warm-up of at least 25 ms (issue #13). The minimum time counts the samples' own (GPU) time, the
// timeout the source's wall-clock time (as nvbench's --timeout), which a scripted source scripts too, so that tests
// reproduce every decision; the noise is kept as running sums (Welford), so a check costs O(1) per sample.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ddlsim::probe {

/// Runs the measured operation once and returns how long it took, in seconds. The GPU implementation flushes L2 and
/// records CUDA events around the operation; the flush is outside the timed region.
class SampleSource {
public:
  SampleSource() = default;
  SampleSource(const SampleSource&) = delete;
  SampleSource& operator=(const SampleSource&) = delete;
  virtual ~SampleSource() = default;
  [[nodiscard]] virtual double sample_s() = 0;
  /// Wall-clock seconds since the source was made (the timeout's clock). Sources whose samples several processes
  /// take together return a value they agreed on, so that every process stops at the same sample.
  [[nodiscard]] virtual double elapsed_s() const;

private:
  std::chrono::steady_clock::time_point made_ = std::chrono::steady_clock::now();
};

struct StoppingRule {
  double warmup_s = 25e-3; ///< warm-up samples (discarded) until their time reaches this, at least one
  int min_samples = 10;
  double min_time_s = 0.5;  ///< measured samples' total time before the noise may stop the measurement
  double max_noise = 0.005; ///< relative standard deviation of the samples (stdev / mean)
  double timeout_s = 15;    ///< wall-clock time (SampleSource::elapsed_s) after which the measurement stops anyway
};

/// Order statistics of the measured samples (seconds). Percentiles interpolate linearly between order statistics
/// (the p-th percentile of n sorted samples sits at rank p (n - 1) / 100; numpy's default).
struct Statistics {
  int samples = 0;
  int warmup_samples = 0;
  double total_s = 0; ///< of the measured samples
  double min_s = 0, p10_s = 0, median_s = 0, p90_s = 0, max_s = 0, mean_s = 0;
  double noise = 0;       ///< sample standard deviation / mean (0 for one sample)
  bool converged = false; ///< stopped by the noise rule, not by the timeout
  std::string stopped_by; ///< "noise" or "timeout"
};

/// The statistics of `samples` (seconds, at least one, each positive and finite; else std::invalid_argument).
[[nodiscard]] Statistics summarise(std::vector<double> samples);

/// Warms `source` up and samples it under `rule` (std::invalid_argument for a rule that cannot stop: a timeout not
/// above zero, or a sample that is not positive and finite).
[[nodiscard]] Statistics measure(SampleSource& source, const StoppingRule& rule = {});

} // namespace ddlsim::probe
