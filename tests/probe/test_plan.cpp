// The probe reads the plans that `ddlsim probe-plan` writes (cuda_probe/plan.hpp) for ResNet-50 and BERT-base and
// lists what it measures: every layer's passes, the selection grid with the plan's own groups, PowerSGD's steps and
// the collectives at nccl-tests' sizes; a malformed plan is refused naming its JSON path.
#include "cuda_probe/plan.hpp"
#include "sim/cli/probe_plan.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

using namespace ddlsim;
using Catch::Matchers::Contains;

namespace {

probe::ProbePlan plan_for(const std::string& model, int batch, const Json& strategy) {
  Json doc = Json::parse(R"({"gpu": {"preset": "A100-SXM4-80GB"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "5 us"}}})");
  doc["model"] = {{"zoo", model}, {"batch_per_gpu", batch}};
  doc["strategy"] = strategy;
  const auto plan = sim::probe_plan(sim::parse_scenario(doc, "t.json"));
  return probe::parse_plan(plan.dump(2), "plan.json");
}

std::map<probe::Group, int> count_groups(const std::vector<probe::Measurement>& list) {
  std::map<probe::Group, int> n;
  for (const auto& m : list)
    ++n[m.group];
  return n;
}

} // namespace

TEST_CASE("probe::parse_plan reads ResNet-50's plan and lists every layer's kernels", "[probe]") {
  const auto plan = plan_for("resnet50", 32, {{"kind", "wfbp"}});
  CHECK(plan.model == "resnet50");
  CHECK(plan.batch_per_gpu == 32);
  REQUIRE(plan.layers.size() == 109); // 53 convolutions, 1 GEMM, 55 memory-bound (docs/calibration.md)
  const auto& conv1 = plan.layers.front();
  CHECK(conv1.kernel == probe::KernelKind::convolution);
  CHECK(conv1.input == std::array<std::int64_t, 4>{32, 3, 224, 224});
  CHECK(conv1.filters == std::array<std::int64_t, 4>{64, 3, 7, 7});
  CHECK(conv1.stride == std::array<std::int64_t, 2>{2, 2});
  CHECK(conv1.padding == std::array<std::int64_t, 2>{3, 3});
  const auto& fc = plan.layers.back();
  CHECK(fc.kernel == probe::KernelKind::gemm);
  CHECK((fc.m == 32 && fc.n == 1000 && fc.k == 2048));
  int convolutions = 0, gemms = 0, memory = 0;
  for (const auto& l : plan.layers) {
    convolutions += l.kernel == probe::KernelKind::convolution;
    gemms += l.kernel == probe::KernelKind::gemm;
    memory += l.kernel == probe::KernelKind::memory;
  }
  CHECK((convolutions == 53 && gemms == 1 && memory == 55));

  probe::ProbeOptions options;
  options.ranks = 8;
  options.nodes = 2;
  const auto list = probe::measurements(plan, options);
  const auto n = count_groups(list);
  // three passes (forward, backward-data, backward-filter) for each convolution and GEMM, two for the others
  CHECK(n.at(probe::Group::layer) == 3 * (53 + 1) + 2 * 55);
  CHECK(n.at(probe::Group::launch) == 1);
  CHECK(n.at(probe::Group::memory_bandwidth) == 8); // 64 KiB .. 1 GiB by 4
  CHECK(n.at(probe::Group::h2d) == 2 * 7);          // 64 KiB .. 256 MiB by 4, pinned and pageable
  CHECK(n.at(probe::Group::overlap) == 2);
  CHECK(n.at(probe::Group::gemm) == 51); // the sweep (gemm_sweep_shapes)
  CHECK(!n.count(probe::Group::low_rank));
  // WFBP's allreduces have 161 sizes, some of them equal: every size of the plan is in the all_reduce sweep, and
  // every collective is measured out-of-place and in-place
  std::set<double> swept;
  for (const auto& m : list)
    if (m.group == probe::Group::collective && m.collective == "all_reduce")
      swept.insert(m.bytes);
  for (const auto& c : plan.collectives)
    CHECK(swept.count(c.bytes));
  CHECK(n.at(probe::Group::collective) % 2 == 0);
  const auto& first = list[static_cast<std::size_t>(
      std::find_if(list.begin(), list.end(), [](const auto& m) { return m.group == probe::Group::layer; }) -
      list.begin())];
  CHECK(first.label == "layer conv1 forward: cudnnConvolutionForward input [32,3,224,224] filters [64,3,7,7] "
                       "stride 2x2 padding 3x3 groups 1 (fp32)");
  SECTION("one GPU: no collectives and no overlap") {
    options.ranks = 1;
    const auto one = count_groups(probe::measurements(plan, options));
    CHECK(!one.count(probe::Group::collective));
    CHECK(!one.count(probe::Group::overlap));
  }
  SECTION("--skip leaves a group out") {
    options.layers = false;
    options.device = false;
    options.gemm = false;
    const auto some = count_groups(probe::measurements(plan, options));
    CHECK(!some.count(probe::Group::layer));
    CHECK(!some.count(probe::Group::h2d));
    CHECK(!some.count(probe::Group::gemm));
    CHECK(some.count(probe::Group::selection));
  }
}

TEST_CASE("probe::measurements for BERT-base: batched GEMMs, gTop-k's selection, PowerSGD's steps", "[probe]") {
  SECTION("DDP: attention's batched GEMMs") {
    const auto plan = plan_for("bert-base", 8, {{"kind", "ddp"}});
    int batched = 0;
    for (const auto& l : plan.layers)
      if (l.kernel == probe::KernelKind::batched_gemm) {
        ++batched;
        CHECK(l.count == 8 * 12); // batch x heads
      }
    CHECK(batched == 2 * 12); // Q K^T and scores x V in each of the 12 layers
  }
  SECTION("gTop-k: the plan's group is among the selection points of every algorithm") {
    const auto plan = plan_for("bert-base", 8, {{"kind", "gtopk"}, {"density", 0.01}});
    REQUIRE(plan.selection.size() == 1);
    const auto g = plan.selection.front();
    probe::ProbeOptions options;
    std::map<std::string, int> per_algorithm;
    bool plan_point = false;
    for (const auto& m : probe::measurements(plan, options))
      if (m.group == probe::Group::selection) {
        ++per_algorithm[m.algorithm];
        plan_point |= m.elements == g.elements && m.selected == g.selected && m.algorithm == "threshold";
        CHECK(m.selected <= m.elements);
      }
    CHECK(plan_point);
    CHECK(per_algorithm ==
          std::map<std::string, int>{{"radix_select", 9}, {"radix_sort", 9}, {"sampling", 9}, {"threshold", 9}});
  }
  SECTION("PowerSGD: three steps per distinct matrix shape") {
    const auto plan = plan_for("bert-base", 8, {{"kind", "powersgd"}, {"rank", 4}});
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
    for (const auto& s : plan.low_rank)
      shapes.insert({s.n, s.m, s.rank});
    const auto n = count_groups(probe::measurements(plan, {}));
    CHECK(n.at(probe::Group::low_rank) == 3 * static_cast<int>(shapes.size()));
  }
}

TEST_CASE("probe::gemm_sweep_shapes: the documented grid of GEMMs, in the probe's dtype", "[probe][gemm]") {
  const auto shapes = probe::gemm_sweep_shapes();
  REQUIRE(shapes.size() == 51);
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  std::vector<Shape> in_order;
  for (const auto& g : shapes) {
    CAPTURE(g.m, g.n, g.k);
    CHECK(2.0 * static_cast<double>(g.m * g.n) * static_cast<double>(g.k) >= probe::kMinSweepGemmFlops);
    in_order.emplace_back(g.m, g.n, g.k);
  }
  CHECK(std::is_sorted(in_order.begin(), in_order.end()));
  CHECK(std::adjacent_find(in_order.begin(), in_order.end()) == in_order.end());
  const std::set<Shape> seen(in_order.begin(), in_order.end());
  // powers of two from 256 to 16384 (the smallest kept: 2^33 = m n k), squares, tensor-parallel shards, gradients
  for (const auto& shape : {Shape{256, 4096, 16384},
                            {16384, 16384, 16384},
                            {16384, 16384, 256},
                            {2048, 2048, 2048},
                            {3000, 3000, 3000},
                            {8192, 12288, 1536},
                            {8192, 2304, 768},
                            {4096, 4096, 65536}})
    CHECK(seen.count(shape));
  CHECK(!seen.count({256, 256, 256})); // 2^25 FLOPs: below the floor
  CHECK(!seen.count({8192, 768, 768}));
  const auto plan = plan_for("resnet50", 32, {{"kind", "wfbp"}});
  probe::ProbeOptions options;
  options.dtype = probe::Dtype::bf16;
  const auto list = probe::measurements(plan, options);
  const auto first =
      std::find_if(list.begin(), list.end(), [](const auto& m) { return m.group == probe::Group::gemm; });
  REQUIRE(first != list.end());
  CHECK(first->label == "gemm m 256 n 4096 k 16384: cublasLtMatmul C[m,n] = A[m,k] B[k,n] (bf16)");
  CHECK((first->gemm.m == 256 && first->gemm.n == 4096 && first->gemm.k == 16384));
}

TEST_CASE("probe::collective_sizes follows nccl-tests' rounding", "[probe]") {
  probe::ProbePlan plan;
  plan.collectives.push_back({"allgather", 1000, 8, 1, 1});
  plan.collectives.push_back({"allreduce", 1002, 8, 1, 1});
  // all_gather over 8 ranks: whole float elements per rank, multiples of 32 B; 8 and 16 B round to nothing
  const auto gather = probe::collective_sizes(plan, "all_gather", 1024, 8);
  CHECK(gather == std::vector<double>{32, 64, 128, 256, 512, 992, 1024});
  // all_reduce: whole float elements
  const auto reduce = probe::collective_sizes(plan, "all_reduce", 1024, 8);
  CHECK(reduce == std::vector<double>{8, 16, 32, 64, 128, 256, 512, 1000, 1024});
}

TEST_CASE("probe::parse_plan refuses malformed plans naming the JSON path", "[probe]") {
  const std::string good = R"({"format": "ddlsim-probe-plan", "version": 1, "scenario": "s", "model": "m",
    "gpu": "g", "batch_per_gpu": 4, "gradient_bytes_per_element": 4,
    "layers": [{"name": "bn", "kind": "bn", "kernel": "memory", "bytes": "4096 B", "forward_flops": 1.0}],
    "selection": [], "low_rank": [], "collectives": []})";
  CHECK(probe::parse_plan(good, "p.json").layers.at(0).bytes == 4096);
  auto broken = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  CHECK_THROWS_WITH(probe::parse_plan(broken("\"4096 B\"", "\"4096\""), "p.json"),
                    Contains("p.json: /layers/0/bytes: expected a positive size in bytes"));
  CHECK_THROWS_WITH(probe::parse_plan(broken("\"forward_flops\"", "\"flops\""), "p.json"),
                    Contains("p.json: /layers/0/flops: unknown key"));
  CHECK_THROWS_WITH(probe::parse_plan(broken("\"version\": 1", "\"version\": 2"), "p.json"),
                    Contains("p.json: /version: this probe reads version 1 plans"));
  CHECK_THROWS_WITH(probe::parse_plan(broken("\"memory\"", "\"fft\""), "p.json"),
                    Contains("/layers/0/kernel: unknown kernel 'fft'"));
  CHECK_THROWS_WITH(probe::parse_plan(broken("\"batch_per_gpu\": 4", "\"batch_per_gpu\": 0"), "p.json"),
                    Contains("/batch_per_gpu: expected an integer >= 1"));
  CHECK_THROWS_WITH(probe::parse_plan("{", "p.json"), Contains("p.json: not JSON"));
}
