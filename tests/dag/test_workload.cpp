// The workload and calibration schemas (dag/workload.hpp, dag/calibration.hpp): strict parsing with JSON paths, and
// a workload written by write_workload reads back to the same model.
#include "core/error.hpp"
#include "core/io.hpp"
#include "dag/calibration.hpp"
#include "dag/workload.hpp"
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <unistd.h>

using namespace ddlsim;
using namespace ddlsim::dag;

namespace {

// Every field of every layer, so that a failure names the layer and the field.
void require_same_model(const Model& want, const Model& got) {
  CHECK(got.name == want.name);
  CHECK(got.input_bytes_per_sample == want.input_bytes_per_sample);
  REQUIRE(got.layers.size() == want.layers.size());
  for (std::size_t i = 0; i < want.layers.size(); ++i) {
    const auto &w = want.layers[i], &g = got.layers[i];
    CAPTURE(i, w.name);
    CHECK(g.name == w.name);
    CHECK(g.kind == w.kind);
    CHECK(g.fwd_flops == w.fwd_flops);
    CHECK(g.bwd_flops == w.bwd_flops);
    CHECK(g.activation_bytes == w.activation_bytes);
    CHECK(g.inputs == w.inputs);
    REQUIRE(g.params.size() == w.params.size());
    for (std::size_t k = 0; k < w.params.size(); ++k) {
      CAPTURE(k, w.params[k].name);
      CHECK(g.params[k].name == w.params[k].name);
      CHECK(g.params[k].numel == w.params[k].numel);
      CHECK(g.params[k].shape ==
            (w.params[k].shape.empty() ? std::vector<std::int64_t>{w.params[k].numel} : w.params[k].shape));
    }
  }
}

} // namespace

TEST_CASE("dag::parse_layers orders inline layers topologically and rejects cycles", "[dag][workload]") {
  const Json ok = Json::parse(R"([{"name": "head", "fwd_flops": 1, "inputs": ["body"]},
                                  {"name": "stem", "fwd_flops": 1, "inputs": []},
                                  {"name": "body", "fwd_flops": 1, "inputs": ["stem"],
                                   "params": [{"name": "body.w", "shape": [3, 4]}]}])");
  const auto m = parse_layers(ok, "f.json", "/model/layers");
  REQUIRE(m.layers.size() == 3);
  CHECK(m.layers[0].name == "stem");
  CHECK(m.layers[1].name == "body");
  CHECK(m.layers[1].params[0].numel == 12);
  CHECK(m.layers[2].inputs == std::vector<int>{1});
  CHECK(m.layers[1].bwd_flops == 2); // default: twice the forward

  const Json cyclic = Json::parse(R"([{"name": "a", "fwd_flops": 1, "inputs": ["c"]},
                                      {"name": "b", "fwd_flops": 1, "inputs": ["a"]},
                                      {"name": "c", "fwd_flops": 1, "inputs": ["b"]}])");
  REQUIRE_THROWS_WITH(parse_layers(cyclic, "f.json", "/model/layers"),
                      "f.json: /model/layers: layers form a cycle through: a, b, c");
}

TEST_CASE("dag::workload_json reads back to the same model", "[dag][workload]") {
  // resnet50: branches (explicit inputs); bert-base: embeddings, attention; both with many parameter tensors.
  for (const char* name : {"resnet50", "bert-base", "densenet121"}) {
    CAPTURE(name);
    auto model = build_zoo_model(name);
    REQUIRE(model);
    model->input_bytes_per_sample = 602112;
    const auto doc = workload_json(*model, "test");
    CHECK(doc.at("source") == "test");
    auto back = parse_layers(Json::parse(doc.at("layers").dump()), "w.json", "/layers");
    back.name = doc.at("name").get<std::string>();
    back.input_bytes_per_sample = model->input_bytes_per_sample;
    require_same_model(*model, back);
  }
}

TEST_CASE("dag::write_workload and read_workload round-trip through a file", "[dag][workload]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim-test-workload-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "vgg16.workload.json").string();
  const auto model = build_zoo_model("vgg16");
  REQUIRE(model);
  write_workload(path, *model);
  require_same_model(*model, read_workload(path));
  // Without a name the file's stem names the model.
  auto doc = Json::parse(read_file(path));
  doc.erase("name");
  write_file_atomic(path, doc.dump());
  CHECK(read_workload(path).name == "vgg16.workload");
  std::filesystem::remove_all(dir);
}

TEST_CASE("dag::parse_calibration reads layer times and selection curves, and names bad paths", "[dag][calibration]") {
  const Json doc = Json::parse(R"({"batch_per_gpu": 32, "layers": {"conv1": {"forward": "1 ms", "backward": "2 ms"}},
                                   "selection": {"sort": {"fixed": "10 us", "per_element": "0.5 ns"}}})");
  const auto c = parse_calibration(doc, "c.json", "");
  CHECK(c.origin == "c.json");
  CHECK(c.batch_per_gpu == 32);
  CHECK(c.layers.at("conv1").forward_s == 1e-3);
  CHECK(c.layers.at("conv1").backward_s == 2e-3);
  CHECK(c.selection.at("sort").per_element_s == 0.5e-9);
  CHECK(c.selection_pointer == "/selection");

  Json bad = doc;
  bad["selection"]["heap"] = bad["selection"]["sort"];
  REQUIRE_THROWS_WITH(parse_calibration(bad, "c.json", "/gpu/calibration"),
                      Catch::Contains("c.json: /gpu/calibration/selection/heap: unknown selection"));
  bad = doc;
  bad["layers"]["conv1"]["forward"] = 1;
  REQUIRE_THROWS_WITH(parse_calibration(bad, "c.json", ""), Catch::Contains("/layers/conv1/forward"));
  REQUIRE_THROWS_WITH(parse_calibration(Json::parse("{}"), "c.json", ""),
                      Catch::Contains("gives \"layers\", \"selection\" or both"));
}
