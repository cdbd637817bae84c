// The shared profiler traces ($DDLSIM_SHARED_DATA/traces; README there): each is read and analysed once per test
// process (a static), then checked in SECTIONs.
#include "traces/import.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ddlsim::traces;

namespace {
const std::string kDir = std::string(DDLSIM_SHARED_DATA) + "/traces/";

const Imported& imported(const std::string& name) {
  static std::map<std::string, Imported> cache;
  auto it = cache.find(name);
  if (it == cache.end())
    it = cache.emplace(name, import_trace(kDir + name, {})).first;
  return it->second;
}
} // namespace

TEST_CASE("traces: the ResNet-50 V100 trace", "[traces][data]") {
  const auto& im = imported("kineto_resnet50_1xV100_bs32.json.gz");
  for (const auto& l : im.summary)
    UNSCOPED_INFO(l);
  CHECK(im.zoo == "resnet50");
  CHECK(im.analysis.layers.size() == 109);
}
