// The journal of a sweep (`points.jsonl` in its output directory): a header line naming the sweep (its identity, the
// swept keys, the shard and the number of points), then one JSON line per finished point, appended as points finish,
// so that --resume and merge can read back what a killed or sharded sweep did. Internal to the command line.
#pragma once

#include "core/json.hpp"
#include "sim/cli/sweep.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::sim::detail {

/// One finished point as a journal line, and back.
[[nodiscard]] OrderedJson result_json(const PointResult& r);
[[nodiscard]] PointResult result_from_json(const OrderedJson& j);

/// FNV-1a over the scenario as JSON (keys sorted): the sweep's identity for --resume and merge.
[[nodiscard]] std::string identity_of(const Json& base);

/// The first file whose fingerprint differs between two sets of a sweep's inputs (path -> fingerprint), said with
/// both fingerprints; empty when they are the same files with the same content.
[[nodiscard]] std::string changed_input(const std::map<std::string, std::string>& before,
                                        const std::map<std::string, std::string>& now);

struct Journal {
  std::string identity;
  std::string name;
  std::vector<std::string> keys;
  std::string shard;
  std::size_t points = 0;
  std::map<std::string, std::string> inputs; ///< files the scenario and its swept values read -> fingerprint
  std::map<std::size_t, PointResult> results;
};

/// Reads a journal; a last line cut short (a killed sweep) is a point not done. A damaged line, a point outside the
/// header's shard or one recorded twice is an InputError naming the line.
[[nodiscard]] Journal read_journal(const std::string& path);

} // namespace ddlsim::sim::detail
