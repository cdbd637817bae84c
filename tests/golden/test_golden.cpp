// Golden summaries: every shipped scenario (and a fixed subset of each sweep's points, tests/golden/cases.json) is
// run with the built `ddlsim` and its summary.json compared field by field with the checked-in one; only
// sim.wall_s may differ. scripts/update-goldens.py regenerates them, on purpose, when a change moves figures.
// CTest runs one test per scenario (DDLSIM_GOLDEN_SCENARIO names it; tests/golden/CMakeLists.txt).
#include "support/cli.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

using ddlsim::test::read_text;
using ddlsim::test::run_ddlsim;
using ddlsim::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = DDLSIM_SOURCE_DIR;

json read_json(const fs::path& path) {
  return json::parse(read_text(path));
}

// Every difference between `want` and `got` as "JSON pointer: want ..., got ...", depth first.
void diff(const json& want, const json& got, const std::string& path, std::vector<std::string>& out) {
  if (want.is_object() && got.is_object()) {
    for (const auto& [key, value] : want.items()) {
      const std::string at = path + "/" + key;
      if (!got.contains(key))
        out.push_back(at + ": missing (golden " + value.dump() + ")");
      else
        diff(value, got.at(key), at, out);
    }
    for (const auto& [key, value] : got.items())
      if (!want.contains(key))
        out.push_back(path + "/" + key + ": not in the golden (got " + value.dump() + ")");
    return;
  }
  if (want.is_array() && got.is_array() && want.size() == got.size()) {
    for (std::size_t i = 0; i < want.size(); ++i)
      diff(want[i], got[i], path + "/" + std::to_string(i), out);
    return;
  }
  if (want != got)
    out.push_back((path.empty() ? "/" : path) + ": golden " + want.dump() + ", got " + got.dump());
}

std::string stem_of(const std::string& case_name) {
  return case_name.substr(0, case_name.find('/'));
}

} // namespace

TEST_CASE("golden: every shipped scenario has golden summaries", "[golden]") {
  const auto cases = read_json(kSource / "tests/golden/cases.json").at("cases");
  std::set<std::string> covered;
  for (const auto& c : cases) {
    covered.insert(stem_of(c.at("name").get<std::string>()));
    CAPTURE(c.at("name").get<std::string>());
    CHECK(fs::exists(kSource / "tests/golden" / (c.at("name").get<std::string>() + ".json")));
  }
  for (const auto& entry : fs::directory_iterator(kSource / "scenarios")) {
    if (entry.path().extension() != ".json")
      continue;
    CAPTURE(entry.path().filename().string());
    CHECK(covered.count(entry.path().stem().string()) == 1);
  }
}

TEST_CASE("golden: summaries equal the checked-in ones apart from sim.wall_s", "[golden]") {
  const char* only = std::getenv("DDLSIM_GOLDEN_SCENARIO");
  // The asan preset sets DDLSIM_GOLDEN_FLOW_ONLY: there each scenario's base case and its flow-engine points run; its
  // analytic points are points of the sweeps that "scenarios: every shipped scenario ... its sweep runs" runs in the
  // same build (one shard of each sweep, DDLSIM_SWEEP_TEST_SHARD, so the sanitizers see half of them there), and
  // their figures are the dev build's to check.
  const char* flow_only = std::getenv("DDLSIM_GOLDEN_FLOW_ONLY");
  const bool some = flow_only != nullptr && *flow_only != '\0' && std::string(flow_only) != "0";
  const auto cases = read_json(kSource / "tests/golden/cases.json").at("cases");
  int ran = 0;
  for (const auto& c : cases) {
    const auto name = c.at("name").get<std::string>();
    if (only != nullptr && *only != '\0' && stem_of(name) != only)
      continue;
    if (some && !name.ends_with("/base") && !name.ends_with(".flow"))
      continue;
    ++ran;
    DYNAMIC_SECTION(name) {
      TempDir dir;
      std::vector<std::string> args{"run", (kSource / c.at("scenario").get<std::string>()).string(), "--out",
                                    dir / "out", "--no-trace"};
      for (const auto& s : c.at("set")) {
        args.push_back("--set");
        args.push_back(s.get<std::string>());
      }
      const auto o = run_ddlsim(args);
      INFO("stderr: " << o.err);
      REQUIRE(o.exit_code == 0);
      auto got = read_json(dir / "out/summary.json");
      REQUIRE(got.at("sim").contains("wall_s"));
      got.at("sim").erase("wall_s");
      const auto want = read_json(kSource / "tests/golden" / (name + ".json"));
      std::vector<std::string> differences;
      diff(want, got, "", differences);
      std::string report;
      for (std::size_t i = 0; i < std::min<std::size_t>(differences.size(), 20); ++i)
        report += "\n  " + differences[i];
      INFO(differences.size() << " field(s) differ from tests/golden/" << name << ".json:" << report);
      CHECK(differences.empty());
    }
  }
  CAPTURE(only == nullptr ? "" : only);
  CHECK(ran > 0);
}
