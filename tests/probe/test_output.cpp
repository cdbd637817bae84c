// The probe's outputs with fake timings (cuda_probe/results.hpp): the "ddlsim-probe" JSON, its collectives in
// nccl-tests' text format read back by ddlsim's nccl-tests reader, and `ddlsim calibrate --probe` on a file the
// probe's own writer produced: the calibration's per-layer times and selection curves equal the fake inputs.
#include "calibrate/nccl_tests.hpp"
#include "calibrate/probe.hpp"
#include "core/json.hpp"
#include "cuda_probe/results.hpp"
#include "dag/calibration.hpp"
#include "sim/cli/calibrate.hpp"
#include "sim/cli/calibrate_gemm.hpp"
#include "sim/cli/probe_plan.hpp"
#include "sim/cli/run.hpp"
#include "sim/plan/compute.hpp"
#include "sim/plan/gemm_efficiency.hpp"
#include "support/cli.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

using namespace ddlsim;
using Catch::Matchers::WithinRel;

namespace {

// A plan of three layers (a convolution, a memory-bound kernel, a GEMM) and one sparsified group.
probe::ProbePlan fake_plan() {
  probe::ProbePlan p;
  p.file = "plan.json";
  p.scenario = "fake";
  p.model = "tiny";
  p.gpu = "H100-SXM5-80GB";
  p.batch_per_gpu = 16;
  probe::LayerKernel conv;
  conv.name = "conv1";
  conv.kind = "conv";
  conv.kernel = probe::KernelKind::convolution;
  conv.input = {16, 3, 32, 32};
  conv.filters = {8, 3, 3, 3};
  probe::LayerKernel bn;
  bn.name = "bn1";
  bn.kind = "bn";
  bn.kernel = probe::KernelKind::memory;
  bn.bytes = 262144;
  probe::LayerKernel fc;
  fc.name = "fc";
  fc.kind = "fc";
  fc.kernel = probe::KernelKind::gemm;
  fc.m = 16;
  fc.n = 10;
  fc.k = 8192;
  p.layers = {conv, bn, fc};
  p.selection = {{1 << 22, 4195}};
  return p;
}

// Eleven samples around t: the median is t.
probe::gpu::Result timed(double t) {
  probe::gpu::Result result;
  std::vector<double> samples;
  for (int i = -5; i <= 5; ++i)
    samples.push_back(t * (1 + 1e-3 * i));
  result.stats = probe::summarise(samples);
  result.stats.stopped_by = "noise";
  result.stats.converged = true;
  return result;
}

// Every measurement of the plan on 4 GPUs of one node, timed by formulas: layers by index and pass; selection
// curves fixed + e m + s k per algorithm; collectives 20 us + bytes / 100 GB/s (in-place 1 % faster); h2d
// 10 us + bytes / 25 GB/s pinned, / 10 GB/s pageable.
probe::ProbeResults fake_results(const probe::ProbePlan& plan) {
  probe::ProbeResults r;
  r.plan = plan;
  r.options.ranks = 4;
  r.options.nodes = 1;
  r.options.max_collective_bytes = 1 << 20;
  r.device.name = "NVIDIA H100 80GB HBM3";
  r.device.pci_bus_id = "00000000:18:00.0";
  r.device.compute_capability_major = 9;
  r.device.multiprocessors = 132;
  r.device.memory_bytes = 85e9;
  r.device.l2_bytes = 52428800;
  r.device.max_sm_clock_hz = 1.98e9;
  r.device.driver_version = "580.65.06";
  r.device.runtime_version = "13.0";
  r.device.cudnn_version = "9.19.0";
  r.device.cublas_version = "13.1.0";
  r.device.cusolver_version = "12.0.0";
  r.device.nccl_version = "2.28.3";
  r.hosts = {"gpu-node-1"};
  for (const auto& m : probe::measurements(plan, r.options)) {
    double t = 0;
    switch (m.group) {
    case probe::Group::layer:
      t = 1e-4 * (m.layer + 1) * (m.pass == "forward" ? 1 : m.pass == "backward_data" ? 1.5 : 2.25);
      break;
    case probe::Group::gemm: // 50 TFLOP/s
      t = 2.0 * static_cast<double>(m.gemm.m * m.gemm.n) * static_cast<double>(m.gemm.k) / 50e12;
      break;
    case probe::Group::selection: {
      const double fixed = m.algorithm == "sampling" ? 40e-6 : 25e-6;
      const double per_element = m.algorithm == "threshold" ? 20e-12 : 70e-12;
      t = fixed + per_element * static_cast<double>(m.elements) + 1e-9 * static_cast<double>(m.selected);
      break;
    }
    case probe::Group::collective:
      t = (20e-6 + m.bytes / 100e9) * (m.in_place ? 0.99 : 1);
      break;
    case probe::Group::h2d:
      t = 10e-6 + m.bytes / (m.pinned ? 25e9 : 10e9);
      break;
    case probe::Group::memory_bandwidth:
      t = 5e-6 + m.bytes / 3e12;
      break;
    case probe::Group::launch:
      t = 2.5e-6;
      break;
    case probe::Group::low_rank:
      t = 30e-6;
      break;
    case probe::Group::overlap:
      t = m.overlap_case == "alone" ? 8e-3 : 9e-3;
      break;
    }
    r.entries.push_back({m, timed(t)});
  }
  return r;
}

// Writes `r` with the probe's writer into `dir` and runs `ddlsim calibrate --probe` on it; the calibration's path.
std::string calibrate_probe(const probe::ProbeResults& r, const test::TempDir& dir) {
  const std::string probe_path = (dir.path() / "probe.json").string();
  probe::write_file_atomic(probe_path, probe::probe_json(r));
  sim::CalibrateRequest request;
  request.probes = {probe_path};
  request.out = (dir.path() / "calib.json").string();
  REQUIRE(sim::calibrate_command(request) == 0);
  return request.out;
}

} // namespace

TEST_CASE("probe::probe_json writes every measurement with units and the device", "[probe]") {
  const auto plan = fake_plan();
  const auto r = fake_results(plan);
  const Json j = Json::parse(probe::probe_json(r));
  CHECK(j["format"] == "ddlsim-probe");
  CHECK(j["version"] == 2);
  CHECK(j["device"]["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(j["device"]["compute_capability"] == "9.0");
  CHECK(j["device"]["clocks"]["max_sm"] == "1980000000 Hz");
  CHECK(j["device"]["clocks"]["sm"].is_null()); // NVML unknown
  CHECK(j["device"]["nccl"] == "2.28.3");
  CHECK(j["communicator"]["ranks"] == 4);
  REQUIRE(j["measurements"].size() == r.entries.size());
  const auto& first_layer = *std::find_if(j["measurements"].begin(), j["measurements"].end(),
                                          [](const Json& m) { return m["group"] == "layer"; });
  CHECK(first_layer["layer"] == "conv1");
  CHECK(first_layer["pass"] == "forward");
  CHECK(first_layer["time"]["median"] == "0.0001 s"); // shortest round-trip digits
  CHECK(first_layer["time"]["samples"] == 11);
  CHECK(first_layer["time"]["stopped_by"] == "noise");
  SECTION("the same results give the same bytes") {
    CHECK(probe::probe_json(r) == probe::probe_json(r));
  }
}

TEST_CASE("probe::nccl_tests_text is read back by ddlsim's nccl-tests reader", "[probe]") {
  const auto r = fake_results(fake_plan());
  const std::string text = probe::nccl_tests_text(r);
  const auto log = calibrate::parse_nccl_tests(text, "probe.nccl-tests.txt");
  CHECK(log.notes.empty()); // busbw consistent with the ranks and the collective
  std::map<calibrate::NcclCollective, int> rows;
  for (const auto& row : log.rows) {
    ++rows[row.collective];
    CHECK(row.ranks == 4);
    CHECK(row.nodes == 1);
    const double t = 20e-6 + static_cast<double>(row.size_bytes) / 100e9;
    REQUIRE(row.out_of_place);
    CHECK_THAT(row.out_of_place->time_s, WithinRel(t, 0.01)); // printed with 2-3 significant decimals in us
    CHECK_THAT(row.in_place.time_s, WithinRel(0.99 * t, 0.01));
  }
  CHECK(rows.size() == 6); // all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv
  CHECK(rows.at(calibrate::NcclCollective::all_reduce) == 18); // 8 B .. 1 MiB
  CHECK(rows.at(calibrate::NcclCollective::all_gather) == 17); // 16 B .. 1 MiB: whole floats per rank
}

TEST_CASE("calibrate --probe turns the probe's file into layer times and selection curves equal to its inputs",
          "[probe][calibrate]") {
  const auto plan = fake_plan();
  const auto r = fake_results(plan);
  test::TempDir dir;
  const std::string calibration = calibrate_probe(r, dir);
  const auto c = dag::parse_calibration(load_json_file(calibration), calibration, "");
  CHECK(c.batch_per_gpu == 16);
  REQUIRE(c.layers.size() == 3);
  // conv1 is the first layer: no backward-data kernel (the batch needs no gradient); the others add both passes
  CHECK_THAT(c.layers.at("conv1").forward_s, WithinRel(1e-4, 1e-12));
  CHECK_THAT(c.layers.at("conv1").backward_s, WithinRel(2.25e-4, 1e-12));
  CHECK_THAT(c.layers.at("bn1").forward_s, WithinRel(2e-4, 1e-12));
  CHECK_THAT(c.layers.at("bn1").backward_s, WithinRel(2e-4 * 2.25, 1e-12)); // its one "backward" pass
  CHECK_THAT(c.layers.at("fc").forward_s, WithinRel(3e-4, 1e-12));
  CHECK_THAT(c.layers.at("fc").backward_s, WithinRel(3e-4 * (1.5 + 2.25), 1e-12));
  // radix_select -> sort, sampling, threshold: the fit recovers each formula; radix_sort has no calibration name
  REQUIRE(c.selection.size() == 3);
  for (const auto& [name, fixed, per_element] :
       {std::tuple{"sort", 25e-6, 70e-12}, std::tuple{"sampling", 40e-6, 70e-12},
        std::tuple{"threshold", 25e-6, 20e-12}}) {
    CAPTURE(name);
    const auto& curve = c.selection.at(name);
    CHECK_THAT(curve.fixed_s, WithinRel(fixed, 1e-9));
    CHECK_THAT(curve.per_element_s, WithinRel(per_element, 1e-9));
    CHECK_THAT(curve.per_selected_s, WithinRel(1e-9, 1e-9));
  }
  // pinned copies: 256 MiB at 10 us + bytes / 25 GB/s
  const double big = 256.0 * 1024 * 1024;
  REQUIRE(c.host.h2d_bandwidth);
  CHECK_THAT(*c.host.h2d_bandwidth, WithinRel(big / (10e-6 + big / 25e9), 1e-12));
  CHECK(!c.host.launch_s);
  // the GEMM took 9 ms beside the allreduces, 8 ms alone
  REQUIRE(c.compute_slowdown);
  CHECK_THAT(*c.compute_slowdown, WithinRel(9.0 / 8 - 1, 1e-9));
  // the collectives as measured tables over 4 ranks on one node, the faster (in-place) side per size
  REQUIRE(c.collectives.size() == 5); // alltoall is not simulated
  for (const auto& m : c.collectives) {
    CHECK((m.ranks == 4 && m.nodes == 1));
    for (const auto& p : m.table)
      CHECK_THAT(p.time_s, WithinRel(0.99 * (20e-6 + p.size_bytes / 100e9), 1e-9));
  }
}

TEST_CASE("a measurement that failed on the GPU is listed in the probe file and noted by calibrate", "[probe]") {
  auto r = fake_results(fake_plan());
  const auto failed = r.entries.back().measurement;
  r.entries.pop_back();
  r.failures.push_back({failed, "cudaMalloc failed: out of memory"});
  test::TempDir dir;
  const std::string path = (dir.path() / "probe.json").string();
  probe::write_file_atomic(path, probe::probe_json(r));
  const auto p = calibrate::read_probe(path);
  REQUIRE(p.failed.size() == 1);
  CHECK(p.failed.front() == failed.label + ": cudaMalloc failed: out of memory");
  dag::Calibration c;
  const auto notes = calibrate::add_probe_calibration(c, {p});
  CHECK(std::count(notes.begin(), notes.end(),
                   path + ": failed on the GPU, not measured: " + failed.label +
                       ": cudaMalloc failed: out of memory") == 1);
}

TEST_CASE("calibrate --probe refuses a malformed probe file naming the path", "[probe][calibrate]") {
  const auto r = fake_results(fake_plan());
  test::TempDir dir;
  const std::string path = (dir.path() / "probe.json").string();
  Json j = Json::parse(probe::probe_json(r));
  j["measurements"][3]["time"]["median"] = "12";
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(calibrate::read_probe(path), Catch::Matchers::Contains("/measurements/3/time/median"));
  j = Json::parse(probe::probe_json(r));
  j["version"] = 7;
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(calibrate::read_probe(path), Catch::Matchers::Contains("/version"));
}

TEST_CASE("ResNet-50: a probe file of the quickstart plan calibrates every layer the engine then runs",
          "[probe][calibrate]") {
  // The plan of the shipped quickstart scenario, every measurement timed by formula, written by the probe's writer,
  // read by calibrate and used by a run: each layer's forward and backward tasks take the probe's times (the plan's
  // batch is the scenario's, so no scaling).
  const auto scenario_path = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";
  const auto scenario = sim::load_scenario(scenario_path, {});
  const auto plan = probe::parse_plan(sim::probe_plan(scenario).dump(2), "plan.json");
  auto r = fake_results(plan);
  test::TempDir dir;
  const std::string calibration = calibrate_probe(r, dir);
  const auto calibrated = sim::load_scenario(scenario_path, {"calibration=" + calibration});
  const auto run = sim::run_scenario(calibrated);
  int forward = 0, backward = 0;
  for (std::size_t v = 0; v < run.graph.size(); ++v) {
    const auto& t = run.graph.task(v);
    if (dag::layer_of(t) < 0 || t.iteration != 0)
      continue;
    const double l = dag::layer_of(t) + 1;
    if (t.kind == dag::TaskKind::forward) {
      ++forward;
      CHECK_THAT(t.duration_s, WithinRel(1e-4 * l, 1e-9));
    }
    if (t.kind == dag::TaskKind::backward) {
      ++backward;
      const bool memory = plan.layers[static_cast<std::size_t>(dag::layer_of(t))].kernel == probe::KernelKind::memory;
      // memory-bound: one backward kernel (x 2.25); otherwise backward-data (x 1.5, none for conv1) + filter (x 2.25)
      const double expected = memory ? 2.25 : (dag::layer_of(t) == 0 ? 0 : 1.5) + 2.25;
      CHECK_THAT(t.duration_s, WithinRel(1e-4 * l * expected, 1e-9));
    }
  }
  CHECK(forward == 109);
  CHECK(backward == 109);
}

TEST_CASE("probe::probe_json writes the GEMM sweep in version 2; calibrate reads it, and version 1 without it",
          "[probe][gemm]") {
  auto r = fake_results(fake_plan());
  r.options.dtype = probe::Dtype::bf16;
  const Json j = Json::parse(probe::probe_json(r));
  CHECK(j["version"] == 2);
  std::vector<std::size_t> sweep;
  for (std::size_t i = 0; i < j["measurements"].size(); ++i)
    if (j["measurements"][i]["group"] == "gemm")
      sweep.push_back(i);
  REQUIRE(sweep.size() == 51);
  const Json& first = j["measurements"][sweep.front()];
  CHECK(first["m"] == 256);
  CHECK(first["n"] == 4096);
  CHECK(first["k"] == 16384);
  CHECK(first["dtype"] == "bf16");
  test::TempDir dir;
  const std::string path = (dir.path() / "probe.json").string();
  std::ofstream(path) << j.dump();
  const auto p = calibrate::read_probe(path);
  CHECK(p.version == 2);
  CHECK(p.device_name == "NVIDIA H100 80GB HBM3");
  CHECK(p.multiprocessors == 132);
  REQUIRE(p.gemm.size() == 51);
  CHECK((p.gemm.front().m == 256 && p.gemm.front().n == 4096 && p.gemm.front().k == 16384));
  CHECK_THAT(p.gemm.front().time_s, WithinRel(2.0 * 256 * 4096 * 16384 / 50e12, 1e-12));
  SECTION("a version 1 file is read as before; a GEMM in one is refused") {
    Json v1 = j;
    v1["version"] = 1;
    std::ofstream(path) << v1.dump();
    CHECK_THROWS_WITH(calibrate::read_probe(path),
                      Catch::Matchers::Contains(fmt::format("/measurements/{}/group", sweep.front())) &&
                          Catch::Matchers::Contains("needs \"version\": 2"));
    Json kept = Json::array();
    for (const auto& m : v1["measurements"])
      if (m["group"] != "gemm")
        kept.push_back(m);
    v1["measurements"] = kept;
    std::ofstream(path) << v1.dump();
    const auto old = calibrate::read_probe(path);
    CHECK(old.version == 1);
    CHECK(old.gemm.empty());
    CHECK(old.layers.size() == 3);
  }
}

TEST_CASE("calibrate --probe fits the GEMM sweep's ceiling: the one its times were made with", "[probe][gemm]") {
  auto r = fake_results(fake_plan());
  r.options.dtype = probe::Dtype::bf16;
  test::TempDir dir;
  const std::string path = (dir.path() / "probe.json").string();
  probe::write_file_atomic(path, probe::probe_json(r));
  // the device the fit sees: the H100 SXM's bf16 peak, the probe's SMs, the best bandwidth of its copies (1 GiB)
  sim::GemmDevice d = sim::probe_gemm_device(calibrate::read_probe(path)).device;
  CHECK(d.peak_flops == 989.4e12);
  CHECK(d.units == 132);
  const double gib = 1024.0 * 1024 * 1024;
  CHECK_THAT(d.bandwidth, WithinRel(gib / (5e-6 + gib / 3e12), 1e-12));
  d.ceiling = 0.7317;
  for (auto& e : r.entries)
    if (e.measurement.group == probe::Group::gemm) {
      const auto& g = e.measurement.gemm;
      e.result = timed(sim::gemm_time_s({.m = g.m, .n = g.n, .k = g.k, .count = 1}, d));
    }
  const std::string calibration = calibrate_probe(r, dir);
  const auto c = dag::parse_calibration(load_json_file(calibration), calibration, "");
  REQUIRE(c.gemm);
  CHECK_THAT(c.gemm->ceiling, WithinRel(0.7317, 1e-6));
  CHECK(c.gemm->dtype == "bf16");
  CHECK(c.gemm->gpu == "H100-SXM5-80GB");
  CHECK(c.gemm->points == 51);
  CHECK(*c.gemm->mean_relative_error < 1e-9);
  CHECK(*c.gemm->max_relative_error < 1e-9);
  CHECK_THAT(c.gemm->source, Catch::Matchers::StartsWith("ddlsim-probe " + (dir.path() / "probe.json").string() +
                                                         ": 51 cuBLASLt GEMMs on NVIDIA H100 80GB HBM3"));
  // written as read: the same bytes again
  CHECK(test::read_text(calibration) == dag::calibration_json(c).dump(2) + "\n");
}

TEST_CASE("calibrate --probe on a GEMM sweep: the scenario's GEMM then takes the model's time at the fitted ceiling",
          "[probe][gemm]") {
  // tests/data/gemm/h100-bf16.probe.json: six GEMMs timed by the model at 0.75, moved by up to 3 %
  const std::string fixture = std::string(DDLSIM_SOURCE_DIR) + "/tests/data/gemm/h100-bf16.probe.json";
  test::TempDir dir;
  sim::CalibrateRequest request;
  request.probes = {fixture};
  request.out = (dir.path() / "calib.json").string();
  REQUIRE(sim::calibrate_command(request) == 0);
  const Json written = load_json_file(request.out);
  REQUIRE(written.contains("gemm"));
  CHECK(written["gemm"]["dtype"] == "bf16");
  CHECK(written["gemm"]["gpu"] == "H100-SXM5-80GB");
  CHECK(written["gemm"]["points"] == 6);
  const double ceiling = written["gemm"]["ceiling"].get<double>();
  CHECK_THAT(ceiling, WithinRel(0.75, 0.02));
  CHECK(written["gemm"]["max_relative_error"].get<double>() < 0.04);
  CHECK(!written.contains("layers"));
  // one linear layer of 4096 x 4096 over 4 x 2048 tokens on an H100 in bf16, calibrated by that file
  Json doc = Json::parse(R"({"name": "one-gemm",
    "model": {"layers": [{"name": "fc", "kind": "linear", "params": [{"name": "fc.weight", "shape": [4096, 4096]}],
                          "fwd_flops": 68719476736, "activation_bytes": "33554432 B"}],
              "input_bytes_per_sample": "33554432 B", "batch_per_gpu": 4, "gradient_dtype": "bf16"},
    "gpu": {"preset": "H100-SXM5-80GB"}, "cluster": {"nodes": 1, "gpus_per_node": 1}, "strategy": {"kind": "bsp"}})");
  doc["calibration"] = request.out;
  const auto s = sim::parse_scenario(doc, (dir.path() / "s.json").string());
  const sim::GemmDevice d{
      .peak_flops = 989.4e12, .ceiling = ceiling, .bandwidth = 3350e9, .units = 132, .in_bytes = 2, .out_bytes = 2};
  const auto costs = sim::compute_costs(s);
  CHECK_THAT(costs.worker.fwd_s[0],
             WithinRel(sim::gemm_time_s({.m = 8192, .n = 4096, .k = 4096, .count = 1}, d), 1e-12));
  CHECK_THAT(costs.note,
             Catch::Matchers::Contains(fmt::format("(calibration {} /gemm: fitted to 6 measured GEMMs", request.out)));
}
