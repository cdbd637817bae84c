// core json: strict object reading with JSON-pointer messages; atomic file output.
#include "core/io.hpp"
#include "core/json.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace ddlsim;

TEST_CASE("core::ObjectReader reports unknown keys with their path", "[core][json]") {
  const Json doc = Json::parse(R"({"cluster": {"nodes": 2, "bandwith": "10 Gbps"}})");
  ObjectReader root(doc, "s.json", "");
  auto cluster = root.object("cluster");
  CHECK(cluster.integer("nodes", 1) == 2);
  (void)cluster.optional_quantity("bandwidth", Dimension::bandwidth);
  REQUIRE_THROWS_WITH(cluster.finish(), "s.json: /cluster/bandwith: unknown key (allowed here: bandwidth, nodes)");
}

TEST_CASE("core::ObjectReader checks types, ranges and units", "[core][json]") {
  const Json doc = Json::parse(R"({"n": -1, "s": 3, "b": 10, "q": "10 GB", "t": "-5 us", "x": 1.5, "a/b": true})");
  ObjectReader r(doc, "f.json", "/root");
  SECTION("range") {
    REQUIRE_THROWS_WITH(r.integer("n", 1), "f.json: /root/n: -1 is out of range [1, 9223372036854775807]");
  }
  SECTION("type") {
    REQUIRE_THROWS_WITH(r.string("s"), "f.json: /root/s: expected a string, got an integer");
  }
  SECTION("bare number where a unit is needed") {
    REQUIRE_THROWS_WITH(r.quantity("b", Dimension::bandwidth), Catch::Contains("/root/b: 10 has no unit"));
  }
  SECTION("amount where a rate is needed") {
    REQUIRE_THROWS_WITH(r.quantity("q", Dimension::bandwidth), Catch::Contains("/root/q: unknown unit 'GB'"));
  }
  SECTION("negative time") {
    REQUIRE_THROWS_WITH(r.quantity("t", Dimension::time), "f.json: /root/t: -5 us must be at least 0");
  }
  SECTION("integer expected") {
    REQUIRE_THROWS_WITH(r.integer("x"), "f.json: /root/x: expected an integer, got a number");
  }
  SECTION("missing") {
    REQUIRE_THROWS_WITH(r.string("nope"), "f.json: /root/nope: missing required key");
  }
  SECTION("pointer escaping (RFC 6901)") {
    REQUIRE_THROWS_WITH(r.string("a/b"), "f.json: /root/a~1b: expected a string, got a boolean");
  }
}

TEST_CASE("core::parse_json_text gives line and column of syntax errors", "[core][json]") {
  REQUIRE_THROWS_WITH(parse_json_text("{\n  \"a\": 1,\n  \"b\": ]\n}", "bad.json"),
                      Catch::StartsWith("bad.json: invalid JSON at line 3, column 8"));
}

TEST_CASE("core::parse_json_text rejects numbers beyond a double with their line and column (#15 D5)", "[core][json]") {
  REQUIRE_THROWS_WITH(parse_json_text("{\n  \"a\": 1e309\n}", "big.json"),
                      Catch::StartsWith("big.json: invalid JSON at line 2, column 8: the number is beyond"));
  // the first that overflows, after a string that only looks like one, a negative one too
  REQUIRE_THROWS_WITH(parse_json_text(R"({"s": "1e309", "b": [1e308, -2e400]})", "big.json"),
                      Catch::StartsWith("big.json: invalid JSON at line 1, column 29"));
  CHECK(parse_json_text(R"({"s": "1e309", "b": 1.7e308})", "ok.json")["b"] == 1.7e308);
}

TEST_CASE("core::write_file_atomic replaces the file and leaves no temporary", "[core][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "ddlsim-test-io" / "nested";
  fs::remove_all(dir.parent_path());
  write_file_atomic((dir / "a.txt").string(), "first");
  write_file_atomic((dir / "a.txt").string(), "second");
  CHECK(read_file((dir / "a.txt").string()) == "second");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++files;
  CHECK(files == 1);
  REQUIRE_THROWS_WITH(read_file((dir / "missing.txt").string()), Catch::EndsWith("missing.txt: cannot open file"));
  fs::remove_all(dir.parent_path());
}
