// The sweep's journal (sweep_journal.hpp): one JSON line per finished point after a header line.
#include "sim/cli/sweep_journal.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

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

namespace {

// A finished point's summary as the sweep wrote it: an object whose figures a results table reads are finite and not
// negative (an iteration takes time, a run has at least one worker).
void check_summary(const OrderedJson& summary) {
  if (!summary.is_object())
    throw std::invalid_argument("its summary is not an object");
  for (const char* key : {"iteration_time_s", "throughput_samples_per_s", "workers"}) {
    const auto it = summary.find(key);
    if (it == summary.end() || !it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      throw std::invalid_argument(fmt::format("its summary's {} is not a finite number >= 0", key));
  }
  if (summary.at("iteration_time_s").get<double>() <= 0 || summary.at("workers").get<double>() < 1)
    throw std::invalid_argument("its summary has no positive iteration time or no worker");
}

// One journal line, nested at most kMaxJsonDepth levels (a deeper line would exhaust the stack of whatever walks it).
OrderedJson parse_line(const std::string& line) {
  return OrderedJson::parse(line, [](int depth, OrderedJson::parse_event_t event, OrderedJson&) {
    using E = OrderedJson::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxJsonDepth)
      throw std::invalid_argument(fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    return true;
  });
}

} // namespace

PointResult result_from_json(const OrderedJson& j) {
  PointResult r;
  r.index = j.at("index").get<std::size_t>();
  r.params = j.at("params");
  r.ok = j.at("ok").get<bool>();
  if (r.ok) {
    r.summary = j.at("summary");
    check_summary(r.summary);
  } else {
    r.error = j.at("error").get<std::string>();
  }
  return r;
}

std::string identity_of(const Json& base) {
  return fingerprint(base.dump());
}

std::string changed_input(const std::map<std::string, std::string>& before,
                          const std::map<std::string, std::string>& now) {
  for (const auto& [path, print] : now) {
    const auto it = before.find(path);
    if (it == before.end())
      return fmt::format("{} (not read before)", path);
    if (it->second != print)
      return fmt::format("{} (fingerprint {} then, {} now)", path, it->second, print);
  }
  for (const auto& [path, print] : before)
    if (!now.contains(path))
      return fmt::format("{} (read before, not now)", path);
  return {};
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
      doc = parse_line(line);
    } catch (const std::exception& e) {
      if (!complete) // the last line of a killed sweep may be cut short: that point is simply not done
        break;
      const bool deep = dynamic_cast<const std::invalid_argument*>(&e) != nullptr;
      throw InputError(path, "",
                       fmt::format("line {}: not a JSON line{} (the journal is damaged)", line_no,
                                   deep ? fmt::format(": {}", e.what()) : std::string()));
    }
    try {
      if (line_no == 1) {
        j.identity = doc.at("sweep").get<std::string>();
        j.name = doc.at("name").get<std::string>();
        j.keys = doc.at("keys").get<std::vector<std::string>>();
        j.shard = doc.at("shard").get<std::string>();
        j.points = doc.at("points").get<std::size_t>();
        if (doc.contains("inputs"))
          j.inputs = doc.at("inputs").get<std::map<std::string, std::string>>();
        if (j.points == 0 || j.points > kMaxSweepPoints)
          throw InputError(path, "",
                           fmt::format("line 1: {} points: a sweep has 1 to {} (the journal is damaged)", j.points,
                                       kMaxSweepPoints));
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
