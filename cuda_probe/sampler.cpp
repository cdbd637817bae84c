// The probe's timing loop and statistics (sampler.hpp).
#include "cuda_probe/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace ddlsim::probe {
namespace {

double checked(double s) {
  if (!(s > 0) || !std::isfinite(s))
    throw std::invalid_argument("probe: a timed sample must be a positive, finite duration, not " + std::to_string(s));
  return s;
}

// The p-th percentile of sorted values, interpolated between the order statistics around rank p (n - 1) / 100.
double percentile(const std::vector<double>& sorted, double p) {
  const double rank = p / 100 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

double relative_stdev(const std::vector<double>& v, double sum) {
  if (v.size() < 2)
    return 0;
  const double mean = sum / static_cast<double>(v.size());
  double squares = 0;
  for (const double x : v)
    squares += (x - mean) * (x - mean);
  return std::sqrt(squares / static_cast<double>(v.size() - 1)) / mean;
}

} // namespace

Statistics summarise(std::vector<double> samples) {
  if (samples.empty())
    throw std::invalid_argument("probe: no samples to summarise");
  for (const double s : samples)
    checked(s);
  Statistics st;
  st.samples = static_cast<int>(samples.size());
  st.total_s = std::accumulate(samples.begin(), samples.end(), 0.0);
  st.mean_s = st.total_s / static_cast<double>(samples.size());
  st.noise = relative_stdev(samples, st.total_s);
  std::sort(samples.begin(), samples.end());
  st.min_s = samples.front();
  st.max_s = samples.back();
  st.p10_s = percentile(samples, 10);
  st.median_s = percentile(samples, 50);
  st.p90_s = percentile(samples, 90);
  return st;
}

double SampleSource::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - made_).count();
}

Statistics measure(SampleSource& source, const StoppingRule& rule) {
  if (!(rule.timeout_s > 0) || !std::isfinite(rule.timeout_s))
    throw std::invalid_argument("probe: the stopping rule needs a positive, finite timeout");
  int warmup = 0;
  for (double warm = 0; warmup == 0 || warm < rule.warmup_s; ++warmup)
    warm += checked(source.sample_s());
  std::vector<double> samples;
  double total = 0;
  // Welford's running mean and sum of squared deviations: the relative standard deviation in O(1) per sample
  double mean = 0, m2 = 0;
  std::string stopped_by;
  while (true) {
    const double s = checked(source.sample_s());
    samples.push_back(s);
    total += s;
    const double n = static_cast<double>(samples.size());
    const double delta = s - mean;
    mean += delta / n;
    m2 += delta * (s - mean);
    const bool enough = static_cast<int>(samples.size()) >= rule.min_samples && total >= rule.min_time_s;
    const double noise = samples.size() < 2 ? 0 : std::sqrt(m2 / (n - 1)) / mean;
    if (enough && noise <= rule.max_noise) {
      stopped_by = "noise";
      break;
    }
    if (source.elapsed_s() >= rule.timeout_s) {
      stopped_by = "timeout";
      break;
    }
  }
  Statistics st = summarise(samples);
  st.warmup_samples = warmup;
  st.converged = stopped_by == "noise";
  st.stopped_by = stopped_by;
  return st;
}

} // namespace ddlsim::probe
