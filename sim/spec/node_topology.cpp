// `nvidia-smi topo -m` and what NCCL builds on it (node_topology.hpp).
#include "sim/spec/node_topology.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

namespace ddlsim::sim {
namespace {

// A line without ANSI escape sequences (ESC [ ... letter) and without a trailing carriage return.
std::string plain(std::string_view line) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i])))
        ++i;
      continue;
    }
    out.push_back(line[i]);
  }
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// The tab-separated cells of a row, trimmed, without the empty ones a leading tab or a run of tabs leaves.
std::vector<std::string> cells(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= line.size()) {
    const std::size_t tab = std::min(line.find('\t', start), line.size());
    if (const auto cell = trimmed(line.substr(start, tab - start)); !cell.empty())
      out.emplace_back(cell);
    start = tab + 1;
  }
  return out;
}

std::optional<int> gpu_index(std::string_view name) {
  if (!name.starts_with("GPU") || name.size() == 3)
    return std::nullopt;
  int index = 0;
  const auto [end, ec] = std::from_chars(name.data() + 3, name.data() + name.size(), index);
  if (ec != std::errc{} || end != name.data() + name.size())
    return std::nullopt;
  return index;
}

bool affinity_column(std::string_view name) {
  return name.find("Affinity") != std::string_view::npos || name == "GPU NUMA ID";
}

struct Cell {
  bool self = false;
  int nvlinks = 0;
  PathType path = PathType::sys;
};

std::optional<Cell> parse_cell(std::string_view text) {
  if (text == "X")
    return Cell{.self = true, .nvlinks = 0, .path = PathType::nvlink};
  if (text.starts_with("NV") && text.size() > 2) {
    int links = 0;
    const auto [end, ec] = std::from_chars(text.data() + 2, text.data() + text.size(), links);
    if (ec != std::errc{} || end != text.data() + text.size() || links < 1)
      return std::nullopt;
    return Cell{.self = false, .nvlinks = links, .path = PathType::nvlink};
  }
  static constexpr std::pair<std::string_view, PathType> kPaths[] = {{"PIX", PathType::pix}, {"PXB", PathType::pxb},
                                                                     {"PHB", PathType::phb}, {"NODE", PathType::node},
                                                                     {"SYS", PathType::sys}, {"SOC", PathType::sys}};
  for (const auto& [name, path] : kPaths)
    if (text == name)
      return Cell{.self = false, .nvlinks = 0, .path = path};
  return std::nullopt;
}

class TopoReader {
public:
  explicit TopoReader(std::string origin) : origin_(std::move(origin)) {}
  NodeTopology read(std::string_view text);

private:
  [[noreturn]] void fail(std::size_t line, const std::string& message) const {
    throw InputError(origin_, fmt::format("line {}", line), message);
  }
  void header(const std::vector<std::string>& row, std::size_t line);
  void device_row(const std::vector<std::string>& row, std::size_t line);
  void finish(std::size_t line);

  std::string origin_;
  std::vector<std::string> devices_; // header order: GPUs, then NICs
  NodeTopology node_;
  std::vector<bool> gpu_seen_;
};

void TopoReader::header(const std::vector<std::string>& row, std::size_t line) {
  for (const auto& name : row) {
    if (affinity_column(name))
      break;
    devices_.push_back(name);
  }
  for (const auto& name : devices_) {
    if (const auto g = gpu_index(name)) {
      if (*g != node_.gpus || !node_.nics.empty())
        fail(line, fmt::format("GPUs must come first and in order: '{}' where GPU{} was expected", name, node_.gpus));
      if (++node_.gpus > kMaxNodeGpus)
        fail(line, fmt::format("more than {} GPUs in one node", kMaxNodeGpus));
    } else {
      node_.nics.push_back(name);
    }
  }
  if (node_.gpus == 0)
    fail(line, "no GPU in the header (expected 'GPU0 GPU1 ...' as nvidia-smi topo -m prints it)");
  const auto g = static_cast<std::size_t>(node_.gpus);
  node_.nvlinks.assign(g, std::vector<int>(g, 0));
  node_.gpu_paths.assign(g, std::vector<PathType>(g, PathType::nvlink));
  node_.nic_paths.assign(node_.nics.size(), std::vector<PathType>(g, PathType::sys));
  gpu_seen_.assign(g, false);
}

void TopoReader::device_row(const std::vector<std::string>& row, std::size_t line) {
  const auto at = std::find(devices_.begin(), devices_.end(), row.front());
  if (at == devices_.end())
    fail(line, fmt::format("'{}' is not a device of the header", row.front()));
  if (row.size() < devices_.size() + 1)
    fail(line, fmt::format("'{}' has {} cells, the header {} devices", row.front(), row.size() - 1, devices_.size()));
  const auto self = static_cast<std::size_t>(at - devices_.begin());
  for (std::size_t c = 0; c < devices_.size(); ++c) {
    const auto cell = parse_cell(row[c + 1]);
    if (!cell)
      fail(line, fmt::format("unknown path '{}' (X, NV#, PIX, PXB, PHB, NODE or SYS)", row[c + 1]));
    if (cell->self != (c == self))
      fail(line, fmt::format("'{}' to {}: 'X' marks a device's own column only", row.front(), devices_[c]));
    if (self >= static_cast<std::size_t>(node_.gpus) || c == self)
      continue; // a NIC's row repeats what the GPUs' rows give
    if (c < static_cast<std::size_t>(node_.gpus)) {
      node_.nvlinks[self][c] = cell->nvlinks;
      node_.gpu_paths[self][c] = cell->path;
    } else {
      node_.nic_paths[c - static_cast<std::size_t>(node_.gpus)][self] = cell->path;
    }
  }
  if (self < static_cast<std::size_t>(node_.gpus))
    gpu_seen_[self] = true;
}

void TopoReader::finish(std::size_t line) {
  for (int i = 0; i < node_.gpus; ++i) {
    if (!gpu_seen_[static_cast<std::size_t>(i)])
      fail(line, fmt::format("no row for GPU{}", i));
    for (int j = 0; j < i; ++j) {
      const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
      if (node_.nvlinks[a][b] != node_.nvlinks[b][a] || node_.gpu_paths[a][b] != node_.gpu_paths[b][a])
        fail(line, fmt::format("GPU{} to GPU{} differs from GPU{} to GPU{}", i, j, j, i));
    }
  }
}

NodeTopology TopoReader::read(std::string_view text) {
  std::size_t line = 0, pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string raw = plain(text.substr(pos, end - pos));
    pos = end + 1;
    ++line;
    const auto row = cells(raw);
    if (row.empty())
      continue;
    if (row.front().starts_with("Legend"))
      break;
    if (devices_.empty()) {
      if (gpu_index(row.front()))
        header(row, line);
      continue; // lines before the header (a command line, a banner)
    }
    device_row(row, line);
  }
  if (devices_.empty())
    fail(std::max<std::size_t>(line, 1), "no header row ('GPU0 GPU1 ... CPU Affinity', as nvidia-smi topo -m prints)");
  finish(line);
  return std::move(node_);
}

// The directed Hamiltonian cycles of the NVLink graph that start at GPU 0, each as its edges (from, to), at most
// `limit` of them.
using Cycle = std::vector<std::pair<int, int>>;
void extend_cycles(const NodeTopology& node, std::vector<int>& path, std::vector<bool>& used, std::vector<Cycle>& out,
                   std::size_t limit) {
  const int g = node.gpus, last = path.back();
  if (out.size() >= limit)
    return;
  if (static_cast<int>(path.size()) == g) {
    if (node.nvlinks[static_cast<std::size_t>(last)][0] > 0) {
      Cycle c;
      for (std::size_t k = 0; k < path.size(); ++k)
        c.emplace_back(path[k], path[(k + 1) % path.size()]);
      out.push_back(std::move(c));
    }
    return;
  }
  for (int next = 1; next < g; ++next) {
    if (used[static_cast<std::size_t>(next)] ||
        node.nvlinks[static_cast<std::size_t>(last)][static_cast<std::size_t>(next)] == 0)
      continue;
    used[static_cast<std::size_t>(next)] = true;
    path.push_back(next);
    extend_cycles(node, path, used, out, limit);
    path.pop_back();
    used[static_cast<std::size_t>(next)] = false;
  }
}

// The most cycles (each may repeat) packed within the links' counts per direction, from cycle `from` on.
struct Packing {
  const std::vector<Cycle>& cycles;
  std::vector<std::vector<int>> free;
  int upper = 0; // no more rings than any GPU has links leaving it
  int best = 0;
  std::int64_t steps = 0;

  void search(std::size_t from, int rings) {
    best = std::max(best, rings);
    if (best == upper || ++steps > kMaxSteps)
      return;
    for (std::size_t c = from; c < cycles.size(); ++c) {
      if (!fits(cycles[c]))
        continue;
      take(cycles[c], -1);
      search(c, rings + 1);
      take(cycles[c], +1);
      if (best == upper || steps > kMaxSteps)
        return;
    }
  }
  [[nodiscard]] bool fits(const Cycle& c) const {
    return std::all_of(c.begin(), c.end(), [&](const auto& e) {
      return free[static_cast<std::size_t>(e.first)][static_cast<std::size_t>(e.second)] > 0;
    });
  }
  void take(const Cycle& c, int delta) {
    for (const auto& [a, b] : c)
      free[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] += delta;
  }
  static constexpr std::int64_t kMaxSteps = 2'000'000;
};

// The links every GPU pair shares when all pairs share the same positive number (an NVSwitch), else 0.
int uniform_nvlinks(const NodeTopology& node) {
  const int g = node.gpus, k = g < 2 ? 0 : node.nvlinks[0][1];
  for (int i = 0; i < g; ++i)
    for (int j = 0; j < g; ++j)
      if (i != j && node.nvlinks[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] != k)
        return 0;
  return k;
}

} // namespace

NodeTopology parse_nvidia_smi_topo(std::string_view text, const std::string& origin) {
  return TopoReader(origin).read(text);
}

int nvlink_rings(const NodeTopology& node) {
  const int g = node.gpus;
  if (g < 2)
    return 0;
  if (const int k = uniform_nvlinks(node); k > 0)
    return k;
  if (g > 12)
    return 0;
  std::vector<Cycle> cycles;
  std::vector<int> path{0};
  std::vector<bool> used(static_cast<std::size_t>(g), false);
  used[0] = true;
  extend_cycles(node, path, used, cycles, 100'000);
  Packing p{.cycles = cycles, .free = node.nvlinks, .upper = 0, .best = 0, .steps = 0};
  p.upper = std::numeric_limits<int>::max();
  for (const auto& row : node.nvlinks) {
    int out = 0;
    for (const int links : row)
      out += links;
    p.upper = std::min(p.upper, out);
  }
  p.search(0, 0);
  return p.best;
}

RingLink ring_link(const NodeTopology& node, double link_Bps) {
  return {.bandwidth = nvlink_rings(node) * link_Bps, .nvswitch = uniform_nvlinks(node) > 0};
}

bool peer_to_peer(const NodeTopology& node, int i, int j, PathType level) {
  const auto a = static_cast<std::size_t>(i), b = static_cast<std::size_t>(j);
  if (node.gpu_paths.at(a).at(b) <= level)
    return true; // NVLink (0), or PCIe within the level
  for (std::size_t k = 0; k < node.nvlinks.size(); ++k)
    if (node.nvlinks[a][k] > 0 && node.nvlinks[k][b] > 0)
      return true; // NVLink through one GPU (NCCL's PATH_NVB)
  return false;
}

bool gpudirect_rdma(const NodeTopology& node, int nic, int gpu, PathType level) {
  return node.nic_paths.at(static_cast<std::size_t>(nic)).at(static_cast<std::size_t>(gpu)) <= level;
}

} // namespace ddlsim::sim
