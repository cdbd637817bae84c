// The probe's timing loop (cuda_probe/sampler.hpp) against scripted sample sources: every count and statistic below
// is worked out by hand. Durations are sums of powers of two, so that totals are exact.
#include "cuda_probe/sampler.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace ddlsim::probe;
using Catch::Matchers::WithinRel;

namespace {

// Replays `script` in a loop; counts the samples taken. Its wall clock advances by each sample's time (warm-up
// included): the operation alone, nothing around it.
class Scripted final : public SampleSource {
public:
  explicit Scripted(std::vector<double> script) : script_(std::move(script)) {}
  double sample_s() override {
    const double s = script_[taken_++ % script_.size()];
    elapsed_ += s;
    return s;
  }
  [[nodiscard]] double elapsed_s() const override { return elapsed_; }
  [[nodiscard]] std::size_t taken() const { return taken_; }

private:
  std::vector<double> script_;
  std::size_t taken_ = 0;
  double elapsed_ = 0;
};

constexpr double kTick = 1.0 / 64; // 15.625 ms

} // namespace

TEST_CASE("probe: summarise gives order statistics and the relative noise", "[probe]") {
  // Sorted 1..5: percentile p at rank p (n - 1) / 100: p10 at rank 0.4 (1.4), p90 at 3.6 (4.6); mean 3, sample
  // standard deviation sqrt(10 / 4).
  const auto st = summarise({4, 1, 3, 2, 5});
  CHECK(st.samples == 5);
  CHECK(st.min_s == 1);
  CHECK(st.max_s == 5);
  CHECK(st.median_s == 3);
  CHECK_THAT(st.p10_s, WithinRel(1.4, 1e-12));
  CHECK_THAT(st.p90_s, WithinRel(4.6, 1e-12));
  CHECK(st.mean_s == 3);
  CHECK(st.total_s == 15);
  CHECK_THAT(st.noise, WithinRel(std::sqrt(2.5) / 3, 1e-12));
  SECTION("one sample: no noise") {
    const auto one = summarise({0.5});
    CHECK(one.median_s == 0.5);
    CHECK(one.p10_s == 0.5);
    CHECK(one.noise == 0);
  }
  SECTION("no samples, or a sample that is not a positive finite time, is refused") {
    CHECK_THROWS_AS(summarise({}), std::invalid_argument);
    CHECK_THROWS_AS(summarise({1, 0}), std::invalid_argument);
    CHECK_THROWS_AS(summarise({1, std::numeric_limits<double>::quiet_NaN()}), std::invalid_argument);
  }
}

TEST_CASE("probe: a steady kernel stops when its samples reach the minimum time", "[probe]") {
  // Warm-up: 15.625 ms, 31.25 ms >= 25 ms: two samples. Then no noise: the rule stops as soon as there are 10
  // samples and 0.5 s, at 32 samples of 1/64 s.
  Scripted source({kTick});
  const auto st = measure(source);
  CHECK(st.warmup_samples == 2);
  CHECK(st.samples == 32);
  CHECK(st.total_s == 0.5);
  CHECK(st.converged);
  CHECK(st.stopped_by == "noise");
  CHECK(st.median_s == kTick);
  CHECK(source.taken() == 34);
}

TEST_CASE("probe: a long kernel stops at the minimum sample count", "[probe]") {
  // 0.25 s per sample: one warm-up sample; 0.5 s after two samples, but ten are needed.
  Scripted source({0.25});
  const auto st = measure(source);
  CHECK(st.warmup_samples == 1);
  CHECK(st.samples == 10);
  CHECK(st.total_s == 2.5);
  CHECK(st.stopped_by == "noise");
}

TEST_CASE("probe: a noisy kernel runs until the timeout", "[probe]") {
  // Alternating 1/64 +- 1/512 s: the relative noise stays at 1/8 (x sqrt(n / (n - 1))), far above 0.5 %; each pair
  // takes 1/32 s. Warm-up: the first pair (0.03125 s >= 25 ms); the wall clock reaches the 15 s timeout after 960
  // samples in all, 958 of them measured (479 pairs, 14.96875 s).
  const double high = kTick + 1.0 / 512, low = kTick - 1.0 / 512;
  Scripted source({high, low});
  const auto st = measure(source);
  CHECK(st.warmup_samples == 2);
  CHECK(st.samples == 958);
  CHECK(st.total_s == 14.96875);
  CHECK_FALSE(st.converged);
  CHECK(st.stopped_by == "timeout");
  CHECK(st.min_s == low);
  CHECK(st.p10_s == low);
  CHECK(st.median_s == kTick); // halfway between the 479th (low) and 480th (high) sorted samples
  CHECK(st.p90_s == high);
  CHECK_THAT(st.noise, WithinRel(0.125 * std::sqrt(958.0 / 957.0), 1e-12));
  SECTION("a looser noise bound stops it early") {
    Scripted again({high, low});
    StoppingRule rule;
    rule.max_noise = 0.13; // 1/8 x sqrt(n / (n - 1)) <= 0.13 from n = 14 on; 0.5 s needs 32 samples
    const auto loose = measure(again, rule);
    CHECK(loose.samples == 32);
    CHECK(loose.converged);
  }
}

TEST_CASE("probe: the timeout is the source's wall clock, not the samples' time", "[probe]") {
  // An operation of 2^-18 or 3 x 2^-18 s (about 4 and 11 us, never settling) whose every sample takes 2^-15 s of wall
  // time (launch, synchronisation, the L2 flush). Warm-up: 25 ms of samples is 1,639 pairs (1,638 pairs and one more
  // sample fall short), 3,278 samples. A 0.5 s timeout is 16,384 samples of wall time, so 13,106 are measured; they
  // add up to only 6,553 x 2^-16 = 0.09999 s, below the minimum time, so the noise rule never stops it.
  class Slow final : public SampleSource {
  public:
    double sample_s() override {
      elapsed_ += 1.0 / 32768;
      return (taken_++ % 2 == 0 ? 1.0 : 3.0) / 262144;
    }
    [[nodiscard]] double elapsed_s() const override { return elapsed_; }

  private:
    int taken_ = 0;
    double elapsed_ = 0;
  } source;
  StoppingRule rule;
  rule.timeout_s = 0.5;
  const auto st = measure(source, rule);
  CHECK(st.stopped_by == "timeout");
  CHECK(st.warmup_samples == 3278);
  CHECK(st.samples == 13106);
  CHECK(st.total_s == 6553.0 / 65536);
}

TEST_CASE("probe: a rule that cannot stop, or a source that gives no time, is refused", "[probe]") {
  Scripted source({kTick});
  StoppingRule rule;
  rule.timeout_s = 0;
  CHECK_THROWS_AS(measure(source, rule), std::invalid_argument);
  Scripted zero({kTick, 0.0});
  CHECK_THROWS_WITH(measure(zero), Catch::Contains("positive, finite"));
}
