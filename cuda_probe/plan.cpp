// The probe plan read strictly, and the probe's list of measurements (plan.hpp).
#include "cuda_probe/plan.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

namespace ddlsim::probe {

PlanError::PlanError(const std::string& file, const std::string& pointer, const std::string& detail)
    : std::runtime_error(file + (pointer.empty() ? "" : ": " + pointer) + ": " + detail) {}

namespace {

using Json = nlohmann::json;

// A strict view of one JSON object: every key read is checked for its type, and the keys left unread are errors.
class Object {
public:
  Object(const Json& j, std::string file, std::string pointer)
      : j_(j), file_(std::move(file)), pointer_(std::move(pointer)) {
    if (!j.is_object())
      fail("", "expected an object");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& detail) const {
    throw PlanError(file_, key.empty() ? pointer_ : pointer_ + "/" + key, detail);
  }
  [[nodiscard]] std::string at_path(const std::string& key) const { return pointer_ + "/" + key; }
  [[nodiscard]] bool has(const std::string& key) const { return j_.contains(key); }
  const Json& get(const std::string& key) {
    if (!j_.contains(key))
      fail(key, "missing");
    read_.insert(key);
    return j_.at(key);
  }
  std::string string(const std::string& key) {
    const auto& v = get(key);
    if (!v.is_string())
      fail(key, "expected a string");
    return v.get<std::string>();
  }
  std::int64_t integer(const std::string& key, std::int64_t minimum) {
    const auto& v = get(key);
    if (!v.is_number_integer())
      fail(key, "expected an integer");
    const auto x = v.get<std::int64_t>();
    if (x < minimum)
      fail(key, "expected an integer >= " + std::to_string(minimum) + ", not " + std::to_string(x));
    return x;
  }
  double number(const std::string& key) {
    const auto& v = get(key);
    if (!v.is_number())
      fail(key, "expected a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x <= 0)
      fail(key, "expected a positive number");
    return x;
  }
  // "8196000 B": the plan writes sizes in bytes with the unit
  double bytes(const std::string& key) {
    const std::string s = string(key);
    std::istringstream in(s);
    double x = 0;
    std::string unit, rest;
    if (!(in >> x) || !(in >> unit) || unit != "B" || (in >> rest) || !std::isfinite(x) || x <= 0)
      fail(key, "expected a positive size in bytes such as \"4096 B\", not \"" + s + "\"");
    return x;
  }
  template <std::size_t N> std::array<std::int64_t, N> integers(const std::string& key, std::int64_t minimum) {
    const auto& v = get(key);
    if (!v.is_array() || v.size() != N)
      fail(key, "expected an array of " + std::to_string(N) + " integers");
    std::array<std::int64_t, N> out{};
    for (std::size_t i = 0; i < N; ++i) {
      if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < minimum)
        fail(key + "/" + std::to_string(i), "expected an integer >= " + std::to_string(minimum));
      out[i] = v[i].get<std::int64_t>();
    }
    return out;
  }
  // The objects of an array, each checked by `each`.
  void array(const std::string& key, const std::function<void(Object&)>& each) {
    const auto& v = get(key);
    if (!v.is_array())
      fail(key, "expected an array");
    for (std::size_t i = 0; i < v.size(); ++i) {
      Object o(v[i], file_, pointer_ + "/" + key + "/" + std::to_string(i));
      each(o);
      o.done();
    }
  }
  void skip(const std::string& key) {
    if (j_.contains(key))
      read_.insert(key);
  }
  void done() const {
    for (const auto& [key, value] : j_.items())
      if (!read_.count(key))
        fail(key, "unknown key");
  }

private:
  const Json& j_;
  std::string file_, pointer_;
  std::set<std::string> read_;
};

LayerKernel read_layer(Object& o) {
  LayerKernel l;
  l.name = o.string("name");
  l.kind = o.string("kind");
  const std::string kernel = o.string("kernel");
  o.skip("forward_flops");
  if (kernel == "convolution") {
    l.kernel = KernelKind::convolution;
    l.input = o.integers<4>("input", 1);
    l.filters = o.integers<4>("filters", 1);
    l.stride = o.integers<2>("stride", 1);
    l.padding = o.integers<2>("padding", 0);
    l.groups = o.integer("groups", 1);
    if (l.input[1] % l.groups != 0 || l.filters[0] % l.groups != 0 || l.filters[1] * l.groups != l.input[1])
      o.fail("filters", "the filters' channels times the groups must equal the input's channels");
  } else if (kernel == "gemm" || kernel == "batched_gemm") {
    l.kernel = kernel == "gemm" ? KernelKind::gemm : KernelKind::batched_gemm;
    l.m = o.integer("m", 1);
    l.n = o.integer("n", 1);
    l.k = o.integer("k", 1);
    if (l.kernel == KernelKind::batched_gemm)
      l.count = o.integer("count", 1);
  } else if (kernel == "memory") {
    l.kernel = KernelKind::memory;
    l.bytes = o.bytes("bytes");
    o.skip("note");
  } else {
    o.fail("kernel", "unknown kernel '" + kernel + "' (expected convolution, gemm, batched_gemm or memory)");
  }
  return l;
}

std::string join(const std::array<std::int64_t, 4>& a) {
  return "[" + std::to_string(a[0]) + "," + std::to_string(a[1]) + "," + std::to_string(a[2]) + "," +
         std::to_string(a[3]) + "]";
}

std::string layer_label(const LayerKernel& l, const std::string& pass, Dtype dtype) {
  const std::string head = "layer " + l.name + " " + pass + ": ";
  const std::string dt = std::string(" (") + dtype_name(dtype) + ")";
  switch (l.kernel) {
  case KernelKind::convolution: {
    const char* call = pass == "forward"         ? "cudnnConvolutionForward"
                       : pass == "backward_data" ? "cudnnConvolutionBackwardData"
                                                 : "cudnnConvolutionBackwardFilter";
    return head + call + " input " + join(l.input) + " filters " + join(l.filters) + " stride " +
           std::to_string(l.stride[0]) + "x" + std::to_string(l.stride[1]) + " padding " +
           std::to_string(l.padding[0]) + "x" + std::to_string(l.padding[1]) + " groups " + std::to_string(l.groups) +
           dt;
  }
  case KernelKind::gemm:
  case KernelKind::batched_gemm: {
    const std::string what = pass == "forward"         ? "C[m,n] = A[m,k] B[k,n]"
                             : pass == "backward_data" ? "dA[m,k] = dC[m,n] B^T"
                                                       : "dB[k,n] = A^T dC[m,n]";
    const std::string count = l.kernel == KernelKind::batched_gemm ? std::to_string(l.count) + " x " : "";
    return head + "cublasLtMatmul " + count + what + " with m " + std::to_string(l.m) + " n " + std::to_string(l.n) +
           " k " + std::to_string(l.k) + dt;
  }
  case KernelKind::memory:
    return head + "memory-bound kernel moving " + size_text(pass == "forward" ? l.bytes : 2 * l.bytes) +
           " (read + written)";
  }
  return head;
}

} // namespace

ProbePlan parse_plan(const std::string& text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw PlanError(file, "", std::string("not JSON: ") + e.what());
  }
  Object o(j, file, "");
  if (o.string("format") != "ddlsim-probe-plan")
    o.fail("format", "expected \"ddlsim-probe-plan\" (write one with `ddlsim probe-plan SCENARIO --out PLAN.json`)");
  if (o.integer("version", 0) != 1)
    o.fail("version", "this probe reads version 1 plans");
  ProbePlan p;
  p.file = file;
  p.scenario = o.string("scenario");
  p.model = o.string("model");
  p.gpu = o.string("gpu");
  p.batch_per_gpu = o.integer("batch_per_gpu", 1);
  p.gradient_bytes_per_element = o.number("gradient_bytes_per_element");
  o.array("layers", [&](Object& l) { p.layers.push_back(read_layer(l)); });
  o.array("selection", [&](Object& s) {
    SelectionShape shape;
    shape.elements = s.integer("elements", 1);
    shape.selected = s.integer("selected", 1);
    s.skip("density");
    if (shape.selected > shape.elements)
      s.fail("selected", "more selected than elements");
    p.selection.push_back(shape);
  });
  o.array("low_rank", [&](Object& l) {
    LowRankShape shape;
    shape.n = l.integer("n", 1);
    shape.m = l.integer("m", 1);
    shape.rank = l.integer("rank", 1);
    shape.count = l.integer("count", 1);
    p.low_rank.push_back(shape);
  });
  o.array("collectives", [&](Object& c) {
    CollectiveShape shape;
    shape.collective = c.string("collective");
    shape.bytes = c.bytes("bytes");
    shape.ranks = static_cast<int>(c.integer("ranks", 1));
    shape.nodes = static_cast<int>(c.integer("nodes", 1));
    shape.count = static_cast<int>(c.integer("count", 1));
    p.collectives.push_back(shape);
  });
  o.done();
  return p;
}

ProbePlan read_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw PlanError(path, "", "cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_plan(text.str(), path);
}

std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  std::ostringstream out;
  out << bytes << " " << units[u];
  return out.str();
}

bool partitioned_collective(const std::string& nccl_name) {
  return nccl_name == "all_gather" || nccl_name == "reduce_scatter" || nccl_name == "alltoall";
}

double busbw_factor(const std::string& nccl_name, int ranks) {
  const double n = ranks;
  if (nccl_name == "all_reduce")
    return 2 * (n - 1) / n;
  if (nccl_name == "all_gather" || nccl_name == "reduce_scatter" || nccl_name == "alltoall")
    return (n - 1) / n;
  return 1;
}

const char* dtype_name(Dtype d) {
  switch (d) {
  case Dtype::fp32:
    return "fp32";
  case Dtype::fp16:
    return "fp16";
  case Dtype::bf16:
    return "bf16";
  }
  return "?";
}

int dtype_bytes(Dtype d) {
  return d == Dtype::fp32 ? 4 : 2;
}

const char* group_name(Group g) {
  switch (g) {
  case Group::layer:
    return "layer";
  case Group::gemm:
    return "gemm";
  case Group::memory_bandwidth:
    return "memory_bandwidth";
  case Group::launch:
    return "launch";
  case Group::h2d:
    return "h2d";
  case Group::selection:
    return "selection";
  case Group::low_rank:
    return "low_rank";
  case Group::collective:
    return "collective";
  case Group::overlap:
    return "overlap";
  }
  return "?";
}

std::vector<GemmSweepShape> gemm_sweep_shapes() {
  using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  std::set<Shape> shapes;
  for (const std::int64_t m : {256, 1024, 4096, 16384})
    for (const std::int64_t n : {256, 1024, 4096, 16384})
      for (const std::int64_t k : {256, 1024, 4096, 16384})
        shapes.insert({m, n, k});
  for (const std::int64_t side : {2048, 3000, 6000, 8192, 10000})
    shapes.insert({side, side, side});
  // (n, k) of transformer linear layers over 8192 tokens: Llama 3 8B, GPT-3 175B's shards at t = 8, GPT-2 small
  for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{6144, 4096},
                             {4096, 4096},
                             {28672, 4096},
                             {4096, 14336},
                             {4608, 12288},
                             {12288, 1536},
                             {6144, 12288},
                             {12288, 6144},
                             {2304, 768},
                             {3072, 768},
                             {768, 3072}})
    shapes.insert({8192, n, k});
  for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{1024, 1024}, {768, 3072}, {4096, 4096}})
    shapes.insert({m, n, 65536}); // weight gradients over 65536 tokens
  std::vector<GemmSweepShape> out;
  for (const auto& [m, n, k] : shapes)
    if (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= kMinSweepGemmFlops)
      out.push_back({m, n, k});
  return out;
}

const std::vector<SelectionAlgorithm>& selection_algorithms() {
  static const std::vector<SelectionAlgorithm> all = {
      {"radix_sort", "", "CUB DeviceRadixSort of |g| with indices, the first k kept (a full sort)"},
      {"radix_select", "sort", "radix select on |g|, 8 bits per pass (torch.topk's algorithm), then compaction"},
      {"sampling", "sampling", "DGC: top-k of a 1 % strided sample as threshold, then compaction"},
      {"threshold", "threshold", "Laplacian threshold b ln(1/density), at most 3 counts to bracket k, then compaction"},
  };
  return all;
}

std::string nccl_tests_name(const std::string& c) {
  if (c == "allreduce")
    return "all_reduce";
  if (c == "allgather")
    return "all_gather";
  if (c == "reduce_scatter" || c == "reducescatter")
    return "reduce_scatter";
  if (c == "broadcast")
    return "broadcast";
  if (c == "alltoall")
    return "alltoall";
  if (c == "sendrecv" || c == "point_to_point" || c == "p2p")
    return "sendrecv";
  return "";
}

std::vector<double> collective_sizes(const ProbePlan& plan, const std::string& nccl_name, double max_bytes, int ranks) {
  // nccl-tests' sizes: float elements, and for the collectives whose size is the whole buffer a whole number of
  // elements per rank (src/*.cu GetCollByteCount rounds the count down to a multiple of the ranks)
  const double unit = 4.0 * (partitioned_collective(nccl_name) ? std::max(ranks, 1) : 1);
  std::set<double> sizes;
  auto add = [&](double b) {
    const double rounded = std::floor(b / unit) * unit;
    if (rounded > 0)
      sizes.insert(rounded);
  };
  for (double b = 8; b <= max_bytes; b *= 2)
    add(b);
  for (const auto& c : plan.collectives)
    if (nccl_tests_name(c.collective) == nccl_name && c.bytes <= max_bytes)
      add(c.bytes);
  return {sizes.begin(), sizes.end()};
}

std::vector<Measurement> measurements(const ProbePlan& plan, const ProbeOptions& options) {
  std::vector<Measurement> out;
  auto add = [&](Measurement m) { out.push_back(std::move(m)); };
  if (options.device) {
    Measurement launch;
    launch.group = Group::launch;
    launch.label = "launch: an empty kernel, host time per launch (1000 launches per sample)";
    add(launch);
    // The memory-bandwidth curve: a copy kernel from 64 KiB to 1 GiB moved (read + written), by factors of 4.
    for (double b = 64.0 * 1024; b <= 1024.0 * 1024 * 1024; b *= 4) {
      Measurement m;
      m.group = Group::memory_bandwidth;
      m.bytes = b;
      m.label = "memory_bandwidth: copy kernel moving " + size_text(b) + " (read + written)";
      add(m);
    }
    // Host-to-device copies from 64 KiB to 256 MiB, pinned and pageable.
    for (const bool pinned : {true, false})
      for (double b = 64.0 * 1024; b <= 256.0 * 1024 * 1024; b *= 4) {
        Measurement m;
        m.group = Group::h2d;
        m.bytes = b;
        m.pinned = pinned;
        m.label =
            "h2d: cudaMemcpyAsync of " + size_text(b) + " from " + (pinned ? "pinned" : "pageable") + " host memory";
        add(m);
      }
  }
  if (options.layers)
    for (std::size_t i = 0; i < plan.layers.size(); ++i) {
      const auto& l = plan.layers[i];
      const std::vector<std::string> passes =
          l.kernel == KernelKind::memory ? std::vector<std::string>{"forward", "backward"}
                                         : std::vector<std::string>{"forward", "backward_data", "backward_filter"};
      for (const auto& pass : passes) {
        Measurement m;
        m.group = Group::layer;
        m.layer = static_cast<int>(i);
        m.pass = pass;
        m.label = layer_label(l, pass, options.dtype);
        add(m);
      }
    }
  if (options.gemm)
    for (const auto& g : gemm_sweep_shapes()) {
      Measurement m;
      m.group = Group::gemm;
      m.gemm = g;
      m.label = "gemm m " + std::to_string(g.m) + " n " + std::to_string(g.n) + " k " + std::to_string(g.k) +
                ": cublasLtMatmul C[m,n] = A[m,k] B[k,n] (" + dtype_name(options.dtype) + ")";
      add(m);
    }
  if (options.selection) {
    // A grid wide enough to fit fixed + per_element m + per_selected k (three unknowns: several m at two densities),
    // and the plan's own groups.
    std::set<std::pair<std::int64_t, std::int64_t>> points;
    for (const std::int64_t m :
         {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24, std::int64_t{1} << 26})
      for (const double density : {0.001, 0.01})
        points.insert({m, static_cast<std::int64_t>(std::ceil(density * static_cast<double>(m)))});
    for (const auto& s : plan.selection)
      points.insert({s.elements, s.selected});
    for (const auto& a : selection_algorithms())
      for (const auto& [elements, selected] : points) {
        Measurement m;
        m.group = Group::selection;
        m.algorithm = a.probe_name;
        m.elements = elements;
        m.selected = selected;
        m.label = std::string("selection ") + a.probe_name + ": top " + std::to_string(selected) + " of " +
                  std::to_string(elements) + " fp32 values: " + a.what;
        add(m);
      }
  }
  if (options.low_rank) {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
    for (const auto& shape : plan.low_rank) {
      if (!seen.insert({shape.n, shape.m, shape.rank}).second)
        continue;
      for (const char* step : {"p_matmul", "q_matmul", "orthogonalise"}) {
        Measurement m;
        m.group = Group::low_rank;
        m.matrix = shape;
        m.step = step;
        const std::string dims =
            std::to_string(shape.n) + " x " + std::to_string(shape.m) + ", rank " + std::to_string(shape.rank);
        m.label = std::string("low_rank ") + step + ": " +
                  (m.step == "p_matmul"   ? "cuBLAS P = M Q, M " + dims
                   : m.step == "q_matmul" ? "cuBLAS Q = M^T P, M " + dims
                                          : "cuSOLVER geqrf + orgqr of P (" + std::to_string(shape.n) + " x " +
                                                std::to_string(shape.rank) + ")");
        add(m);
      }
    }
  }
  if (options.collectives && options.ranks >= 2)
    for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"})
      for (const double b : collective_sizes(plan, name, options.max_collective_bytes, options.ranks))
        for (const bool in_place : {false, true}) {
          Measurement m;
          m.group = Group::collective;
          m.collective = name;
          m.bytes = b;
          m.ranks = options.ranks;
          m.nodes = options.nodes;
          m.in_place = in_place;
          m.label = std::string("collective ") + name + " " + size_text(b) + (in_place ? " in-place" : "") +
                    ": NCCL over " + std::to_string(options.ranks) + " ranks on " + std::to_string(options.nodes) +
                    (options.nodes == 1 ? " node" : " nodes");
          add(m);
        }
  if (options.overlap && options.ranks >= 2)
    for (const char* c : {"alone", "with_allreduce"}) {
      Measurement m;
      m.group = Group::overlap;
      m.overlap_case = c;
      m.ranks = options.ranks;
      m.nodes = options.nodes;
      m.label = std::string("overlap ") + c + ": a cuBLAS GEMM" +
                (m.overlap_case == "alone" ? " alone" : " while NCCL allreduces 256 MiB beside it");
      add(m);
    }
  return out;
}

} // namespace ddlsim::probe
