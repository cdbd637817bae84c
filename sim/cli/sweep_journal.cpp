// The sweep's journal (sweep_journal.hpp): one JSON line per finished point after a header line.
#include "sim/cli/sweep_journal.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace ddlsim::sim::detail {

OrderedJson result_json(const PointResult& r) {
  OrderedJson j;
  j["index"] = r.index;
  j["params"] = r.params;
  j["ok"] = r.ok;
  if (!r.ok)
    j["error"] = r.error;
  else
    j["summary"] = r.summary;
  return j;
}

PointResult result_from_json(const OrderedJson& j) {
  PointResult r;
  r.index = j.at("index").get<std::size_t>();
  r.params = j.at("params");
  r.ok = j.at("ok").get<bool>();
  if (r.ok)
    r.summary = j.at("summary");
  else
    r.error = j.at("error").get<std::string>();
  return r;
}

std::string identity_of(const Json& base) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : base.dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

Journal read_journal(const std::string& path) {
  const std::string text = read_file(path);
  Journal j;
  Shard shard;
  std::size_t line_no = 0, start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    const std::string line = text.substr(start, complete ? end - start : std::string::npos);
    start = complete ? end + 1 : text.size();
    ++line_no;
    if (line.empty())
      continue;
    OrderedJson doc;
    try {
      doc = OrderedJson::parse(line);
    } catch (const std::exception&) {
      if (!complete) // the last line of a killed sweep may be cut short: that point is simply not done
        break;
      throw InputError(path, "", fmt::format("line {}: not a JSON line (the journal is damaged)", line_no));
    }
    try {
      if (line_no == 1) {
        j.identity = doc.at("sweep").get<std::string>();
        j.name = doc.at("name").get<std::string>();
        j.keys = doc.at("keys").get<std::vector<std::string>>();
        j.shard = doc.at("shard").get<std::string>();
        j.points = doc.at("points").get<std::size_t>();
        shard = parse_shard(j.shard);
        continue;
      }
      auto r = result_from_json(doc);
      if (r.index >= j.points || !shard.owns(r.index))
        throw InputError(path, "",
                         fmt::format("line {}: point {} is not a point of shard {} of this {}-point sweep (the "
                                     "journal is damaged)",
                                     line_no, r.index, j.shard, j.points));
      const auto index = r.index;
      if (!j.results.emplace(index, std::move(r)).second)
        throw InputError(path, "",
                         fmt::format("line {}: point {} is recorded twice (the journal is damaged)", line_no, index));
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError(path, "", fmt::format("line {}: {}", line_no, e.what()));
    }
  }
  if (line_no == 0 || j.identity.empty())
    throw InputError(path, "", "empty journal: no sweep header");
  return j;
}

} // namespace ddlsim::sim::detail
