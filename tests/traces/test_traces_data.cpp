// The profiler traces by others (tests/data/shared/traces; README in tests/data/shared) and issue #12's acceptance
// figures: each trace is read and analysed once per test process (a static; Catch2 runs the SECTIONs in one process).
#include "traces/import.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <numeric>
#include <string>

using namespace ddlsim;
using namespace ddlsim::traces;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {
const std::string kDir = std::string(DDLSIM_SOURCE_DIR) + "/tests/data/shared/traces/";

const Imported& imported(const std::string& name) {
  static std::map<std::string, Imported> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, import_trace(kDir + name, {})).first;
  return it->second;
}

double sum(const std::vector<TracedLayer>& layers, double TracedLayer::*field) {
  return std::accumulate(layers.begin(), layers.end(), 0.0,
                         [&](double s, const TracedLayer& l) { return s + l.*field; });
}
} // namespace

TEST_CASE("traces: the ResNet-50 V100 trace: zoo names, host and GPU sums", "[traces][data]") {
  const auto& im = imported("kineto_resnet50_1xV100_bs32.json.gz");
  const auto& a = im.analysis;
  const auto& p = a.phases;
  for (const auto& l : im.summary)
    UNSCOPED_INFO(l);
  SECTION("109 layers with torchvision's names") {
    CHECK(im.zoo == "resnet50");
    REQUIRE(im.model.layers.size() == 109);
    CHECK(im.calibration.layers.size() == 109);
    CHECK(im.calibration.layers.count("layer1.0.downsample.1") == 1);
    CHECK(im.calibration.layers.count("maxpool") == 1);
    CHECK(a.batch == 32);
  }
  SECTION("steps: ProfilerStep#16 (the first) left out, median of #17..21") {
    REQUIRE(a.steps.size() == 6);
    CHECK_FALSE(a.steps[0].used);
    CHECK_THAT(p.step_s, WithinRel(0.151733, 1e-9)); // ProfilerStep#19
  }
  SECTION("the host parts add up to the median step (host-bound), the layers' kernels to the GPU's busy time") {
    const double host = im.calibration.host.iteration_s.value() + im.calibration.host.data_loading_s.value() +
                        sum(a.layers, &TracedLayer::forward_host_s) + sum(a.layers, &TracedLayer::backward_host_s) +
                        im.calibration.optimizer.host_s.value();
    CHECK_THAT(host, WithinRel(p.step_s, 0.02));
    const double gpu = sum(a.layers, &TracedLayer::forward_gpu_s) + sum(a.layers, &TracedLayer::backward_gpu_s) +
                       p.optimizer_gpu_s + p.other_gpu_s;
    CHECK(gpu > 0.097);
    CHECK(gpu < 0.101);
    CHECK_THAT(gpu, WithinRel(p.gpu_busy_s, 0.01));
    CHECK_FALSE(im.calibration.host.prefetch.value()); // num_workers 0
    CHECK_THAT(im.calibration.host.h2d_bandwidth.value(), WithinRel(11.6e9, 0.1));
  }
}

TEST_CASE("traces: the compiled 2xV100 trace: 404 allreduces after backward", "[traces][data]") {
  const auto& im = imported("hta_compiled_2xV100_rank1.json.gz");
  const auto& list = im.scenario["strategy"]["collectives"];
  REQUIRE(list.size() == 404);
  double bytes = 0;
  for (const auto& c : list) {
    CHECK(c["after"] == "backward");
    bytes += parse_quantity(c["bytes"].get<std::string>(), Dimension::bytes);
  }
  CHECK(bytes == 1093771264.0); // 1.094 GB per step
  // The backward host time that issued them is charged once: one launch per replayed allreduce, the rest to layers.
  double traced_backward_host = 0, calibrated_backward_host = 0;
  for (const auto& l : im.analysis.layers)
    traced_backward_host += l.backward_host_s;
  for (const auto& [name, t] : im.calibration.layers)
    calibrated_backward_host += t.backward_host_s.value_or(0);
  REQUIRE(im.calibration.host.launch_s.has_value());
  CHECK(traced_backward_host > 0.2);
  CHECK_THAT(calibrated_backward_host + 404 * *im.calibration.host.launch_s, WithinRel(traced_backward_host, 1e-9));
  CHECK(im.scenario["cluster"]["gpus_per_node"] == 2);
  CHECK(im.model.tensor_count() == 404);
}

TEST_CASE("traces: the 16xA100 trace: phases, collective sizes and what is missing", "[traces][data]") {
  const auto& im = imported("hta_16xA100_rank0.json.gz");
  const auto& p = im.analysis.phases;
  CHECK(p.data_loading_s > 0.15); // torchrec's sparse_data_dist of the next batch
  CHECK(p.forward_s > 0.005);
  CHECK(p.backward_s > 0.010);
  CHECK(p.optimizer_host_s > 0.001);
  std::map<std::string, double> bytes;
  for (const auto& c : im.analysis.collectives) {
    REQUIRE(c.bytes.has_value());
    bytes[c.kind] += *c.bytes;
  }
  CHECK(bytes["reduce_scatter"] == 2 * 65536.0 * (384 + 64) * 4 / 2); // [65536, 384] and [65536, 64] fp32
  CHECK(bytes["allgather"] == 65536.0 * (384 + 64) * 4);
  CHECK(bytes["allreduce"] == (366336.0 + 447923396.0) * 4);
  CHECK(bytes["alltoall"] > 0);
  const std::string description = im.scenario["description"];
  CHECK(description.find("alltoall") != std::string::npos);
  CHECK(description.find("world size 16") != std::string::npos);
  CHECK(im.scenario["cluster"]["nodes"] == 2);
  // #31: the description's "other" host time is the summary's "iteration" and the calibration's host.iteration: the
  // main thread's rest with the input copy's host time (the description left that out: 29.001 ms of 214.068)
  const std::string other = fmt::format("{:.3f} ms", (p.other_host_s + p.h2d_host_s) * 1e3);
  CHECK(other == "30.447 ms");
  CHECK_THAT(description, Contains("host per step 215.514 ms (") && Contains(", other " + other + ")"));
  CHECK_THAT(im.summary.at(2), Contains("host parts: iteration " + other + " + ") && Contains("= 215.514 ms"));
  CHECK_THAT(*im.calibration.host.iteration_s, WithinRel(p.other_host_s + p.h2d_host_s, 1e-12));
}
