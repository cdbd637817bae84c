// Compression cost models of the DAG layer (dag/compression.hpp, dag/powersgd.hpp): selection kernels' memory
// traffic, quantised wire formats, and PowerSGD's rule for which tensors it compresses.
#include "dag/compression.hpp"
#include "dag/powersgd.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace ddlsim;
using Catch::Matchers::WithinRel;

namespace {
constexpr double kBandwidth = 900e9 * 0.642;
} // namespace

TEST_CASE("dag::selection kernels cost the reads and writes of their implementations", "[dag][compression]") {
  const double m = 25557032, k = 25558, e = 4; // ResNet-50 at density 0.001
  const double ef = 4 * m * e, pairs = k * 8, compact = (m * e + m) + (m + 8 * k);
  // sort: 36 passes over the values (torch.topk on an H20) and the k pairs.
  const auto sort = dag::sparsification_cost(dag::Selection::sort, m, k, e);
  CHECK_THAT(sort.bytes, WithinRel(ef + 36 * m * e + pairs, 1e-12));
  CHECK(sort.launches == 6);
  // sampling: |g|, the sort model on 1 % of the values, threshold comparison and compaction.
  const auto sampling = dag::sparsification_cost(dag::Selection::sampling, m, k, e);
  CHECK_THAT(sampling.bytes, WithinRel(ef + 2 * m * e + 36 * std::ceil(0.01 * m) * e + compact + pairs, 1e-12));
  CHECK(sampling.launches == 9);
  // threshold: |g| and its mean, 3 counting steps, the final comparison and compaction.
  const auto threshold = dag::sparsification_cost(dag::Selection::threshold, m, k, e);
  CHECK_THAT(threshold.bytes, WithinRel(ef + 3 * m * e + 3 * (m * e + 2 * m) + compact + pairs, 1e-12));
  CHECK(threshold.launches == 14);
  // Time: traffic at the bandwidth plus 5 us per launch.
  CHECK_THAT(sort.seconds(kBandwidth), WithinRel(sort.bytes / kBandwidth + 6 * 5e-6, 1e-12));
  // On a large gradient, sampling streams the least and the exact sort the most.
  CHECK(sampling.bytes < threshold.bytes);
  CHECK(threshold.bytes < sort.bytes);
  SECTION("a sample is never smaller than 2 / density and never larger than the gradient") {
    // 1,000 elements at density 0.01: 10 samples would be 1 %, 2 / 0.01 = 200 are taken.
    const auto small = dag::sparsification_cost(dag::Selection::sampling, 1000, 10, e);
    CHECK_THAT(small.bytes, WithinRel(4000 * 4 + 2 * 4000 + 36 * 200 * 4 + (5000 + 1000 + 80) + 80, 1e-12));
    const auto tiny = dag::sparsification_cost(dag::Selection::sampling, 50, 1, e);
    CHECK_THAT(tiny.bytes, WithinRel(4 * 200 + 400 + 36 * 50 * 4 + (250 + 58) + 8, 1e-12));
  }
}

TEST_CASE("dag::quantised wire formats", "[dag][compression][quantisation]") {
  const double m = 1e6;
  // QSGD: ceil(log2(2s + 1)) bits and a 4-byte norm per 512 elements.
  const auto bits = [&](int levels) { return dag::quantised_wire(dag::Quantiser::qsgd, levels, m, 3).bits; };
  CHECK(bits(127) == 8);
  CHECK(bits(7) == 4);
  CHECK(bits(1) == 2);
  CHECK(bits(128) == 9);
  CHECK_THAT(dag::quantised_wire(dag::Quantiser::qsgd, 127, m, 3).bytes(m),
             WithinRel(m + 4 * std::ceil(m / 512), 1e-12));
  // TernGrad: 2 bits and a scaler per tensor; signSGD: 1 bit and a scale per tensor.
  CHECK_THAT(dag::quantised_wire(dag::Quantiser::terngrad, 0, m, 3).bytes(m), WithinRel(m / 4 + 12, 1e-12));
  CHECK_THAT(dag::quantised_wire(dag::Quantiser::signsgd, 0, m, 3).bytes(m), WithinRel(m / 8 + 12, 1e-12));
}

TEST_CASE("dag::powersgd_view follows the hook's _should_compress", "[dag][powersgd]") {
  // (n + m) r_eff x 2 < n m, with the tensor viewed as shape[0] x (numel / shape[0]) and r_eff = min(r, n, m).
  auto [shape, rank, n, m, r_eff, matrix, compress] =
      GENERATE(table<std::vector<std::int64_t>, int, std::int64_t, std::int64_t, std::int64_t, bool, bool>({
          {{64, 3, 7, 7}, 4, 64, 147, 4, true, true},           // 211 x 4 x 2 = 1688 < 9408
          {{1000, 2048}, 4, 1000, 2048, 4, true, true},         // ResNet-50's fc
          {{64, 64, 1, 1}, 4, 64, 64, 4, true, true},           // 1024 < 4096
          {{16, 16}, 4, 16, 16, 4, true, false},                // 256 < 256 fails: not worth compressing
          {{16, 16}, 2, 16, 16, 2, true, true},                 // 128 < 256
          {{3, 5}, 4, 3, 5, 3, true, false},                    // r_eff = 3: 48 < 15 fails
          {{1, 4096}, 4, 1, 4096, 1, true, false},              // a single row: 8194 < 4096 fails
          {{2048}, 4, 2048, 1, 1, false, false},                // a bias: the rule never passes for a vector
          {{512, 512, 3, 3}, 1000, 512, 4608, 512, true, false} // rank above min(n, m): 10,485,760 < 2,359,296 fails
      }));
  dag::ParamTensor t{"w", shape, 1};
  for (auto d : shape)
    t.numel *= d;
  CAPTURE(shape, rank);
  const auto v = dag::powersgd_view(t, rank);
  CHECK(v.rows == n);
  CHECK(v.cols == m);
  CHECK(v.rank == r_eff);
  CHECK(v.matrix == matrix);
  CHECK(v.compress == compress);
}
