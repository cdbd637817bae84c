// Helpers on trace operators (operators.hpp).
#include "traces/operators.hpp"

#include <algorithm>
#include <cctype>

namespace ddlsim::traces::detail {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}
bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_cpu(Category c) {
  return c == Category::cpu_op || c == Category::user_annotation || c == Category::python;
}
bool is_gpu(Category c) {
  return c == Category::kernel || c == Category::memcpy || c == Category::memset;
}
bool is_nccl(const Event& e) {
  return e.cat == Category::kernel && contains(lower(e.name), "nccl");
}
bool is_sync(const Event& e) {
  return e.cat == Category::runtime && (contains(e.name, "Synchronize") || e.name == "cudaMemcpy" ||
                                        e.name == "cuMemcpy" || e.name == "cudaMemcpy2D");
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::int64_t numel(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (const auto d : dims)
    n *= d;
  return n;
}

std::string layer_kind(const Event& e) {
  const std::string& n = e.name;
  if (n == "CompiledFunction")
    return "compiled";
  if (!starts_with(n, "aten::"))
    return "";
  const std::string_view op = std::string_view(n).substr(6);
  if (starts_with(op, "conv") || op == "_convolution" || op == "cudnn_convolution")
    return "conv";
  if (op == "linear" || op == "addmm")
    return "linear";
  if (op == "matmul" && e.input_dims.size() >= 2 && e.input_dims[1].size() == 2 && e.input_dims[0].size() >= 2)
    return "linear"; // x @ W: a weight without bias; attention's activation x activation has a batched right side
  if (op == "batch_norm" || op == "native_batch_norm" || op == "_batch_norm_impl_index")
    return "bn";
  if (op == "layer_norm" || op == "native_layer_norm" || op == "group_norm")
    return "ln";
  if (op == "embedding" || op == "embedding_bag" || op == "_embedding_bag")
    return "embedding";
  if (contains(op, "pool"))
    return "pool";
  return "";
}

void derive_params(const Event& e, TracedLayer& l) {
  const auto& d = e.input_dims;
  const auto dim = [&](std::size_t i) -> std::vector<std::int64_t> {
    return i < d.size() ? d[i] : std::vector<std::int64_t>{};
  };
  const auto add = [&](const char* what, std::vector<std::int64_t> shape) {
    if (!shape.empty() && numel(shape) > 0)
      l.params.push_back({l.name + "." + what, shape, numel(shape)});
  };
  l.input_shape = dim(0);
  const std::string op = e.name.substr(std::min<std::size_t>(6, e.name.size()));
  if (l.kind == "conv") {
    add("weight", dim(1));
    add("bias", dim(2));
    const auto w = dim(1);
    const auto x = dim(0);
    if (w.size() == 4 && x.size() == 4 && x[0] > 0) {
      // output spatial size unknown from inputs alone: taken as the input's (stride 1) and corrected by the next
      // layer's input in finish_layers()
      l.fwd_flops = 2.0 * static_cast<double>(w[0] * w[1] * w[2] * w[3]) * static_cast<double>(x[2] * x[3]);
    }
  } else if (l.kind == "linear") {
    if (op == "addmm") { // addmm(bias, input, weight^T)
      const auto w = dim(2);
      if (w.size() == 2)
        add("weight", {w[1], w[0]});
      add("bias", dim(0));
      l.input_shape = dim(1);
    } else {
      add("weight", dim(1));
      if (op == "linear")
        add("bias", dim(2));
    }
    if (!l.params.empty()) {
      const auto& w = l.params.front().shape;
      const auto x = l.input_shape;
      double rows = 1; // per sample: every dimension between batch and features
      for (std::size_t i = 1; i + 1 < x.size(); ++i)
        rows *= static_cast<double>(x[i]);
      l.fwd_flops = 2.0 * static_cast<double>(numel(w)) * rows;
    }
  } else if (l.kind == "bn") {
    add("weight", dim(1));
    add("bias", dim(2));
  } else if (l.kind == "ln") {
    add("weight", dim(op == "group_norm" ? 2 : 2));
    add("bias", dim(3));
  } else if (l.kind == "embedding") {
    add("weight", dim(0));
    l.input_shape = dim(1);
  }
}

Index build_index(const KinetoTrace& t) {
  Index ix;
  const std::size_t threads = t.threads.size();
  ix.cpu.resize(threads);
  ix.runtime.resize(threads);
  ix.memory.resize(threads);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    const auto th = static_cast<std::size_t>(e.thread);
    if (is_cpu(e.cat))
      ix.cpu[th].push_back(i);
    else if (e.cat == Category::runtime)
      ix.runtime[th].push_back(i);
    else if (e.cat == Category::memory)
      ix.memory[th].push_back(i);
    else if (is_gpu(e.cat) && e.correlation >= 0)
      ix.gpu_by_correlation.emplace(e.correlation, i);
  }
  const auto by_start = [&](std::size_t a, std::size_t b) {
    const Event& x = t.events[a];
    const Event& y = t.events[b];
    if (x.ts_us != y.ts_us)
      return x.ts_us < y.ts_us;
    if (x.dur_us != y.dur_us)
      return x.dur_us > y.dur_us;
    return a < b;
  };
  for (std::size_t th = 0; th < threads; ++th) {
    std::sort(ix.cpu[th].begin(), ix.cpu[th].end(), by_start);
    std::sort(ix.runtime[th].begin(), ix.runtime[th].end(), by_start);
    std::sort(ix.memory[th].begin(), ix.memory[th].end(), by_start);
  }
  return ix;
}

} // namespace ddlsim::traces::detail
