// Layers of a step's forward (modules.hpp). PyTorch's Python tracer (torch.profiler.profile(with_stack=True): the
// tracer runs when with_stack is set and CPU activity profiled, RecordQueue::tracePython in
// torch/csrc/profiler/collection.cpp) names a module call "nn.Module: {class}_{id}" (toString of
// ExtraFields<EventType::PyCall> there), the id counting the class's instances in the order of their first call
// (PythonIDVisitor in torch/csrc/autograd/profiler_python.cpp): the same instance has the same name in every step.
#include "traces/modules.hpp"
#include "traces/operators.hpp"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>

namespace ddlsim::traces::detail {
namespace {

constexpr std::string_view kModulePrefix = "nn.Module: ";

bool ends_with_text(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// The module's class: "Conv2d_3" -> "Conv2d".
std::string_view module_class(std::string_view module) {
  const auto u = module.rfind('_');
  if (u == std::string_view::npos || u + 1 == module.size())
    return module;
  for (std::size_t i = u + 1; i < module.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(module[i])) == 0)
      return module;
  return module.substr(0, u);
}

/// A new layer at every layer-opening operator; the other leaves join the layer before them.
Layering operator_layers(const std::vector<ForwardLeaf>& leaves) {
  Layering out;
  out.leaf_layer.assign(leaves.size(), -1);
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const Event& e = *leaves[k].event;
    const std::string kind = layer_kind(e);
    if (!kind.empty()) {
      TracedLayer l;
      l.kind = kind;
      l.op = e.name;
      l.name = fmt::format("{}_{}", kind, out.layers.size());
      derive_params(e, l);
      out.layers.push_back(std::move(l));
    }
    out.leaf_layer[k] = out.layers.empty() ? 0 : static_cast<int>(out.layers.size()) - 1;
  }
  return out;
}

/// A layer per call of a leaf module (a module call with an operator inside and none in a module call nested in it);
/// nullopt when no operator is inside a module call. Calls are told apart by their event's position in the trace.
std::optional<Layering> module_layers(const std::vector<ForwardLeaf>& leaves) {
  std::set<std::size_t> with_operator, enclosing;
  for (const auto& leaf : leaves) {
    if (leaf.event->cat != Category::cpu_op || leaf.modules.empty())
      continue;
    with_operator.insert(leaf.modules.back()->index);
    for (std::size_t m = 0; m + 1 < leaf.modules.size(); ++m)
      enclosing.insert(leaf.modules[m]->index);
  }
  std::set<std::size_t> leaf_modules;
  for (const auto call : with_operator)
    if (enclosing.count(call) == 0)
      leaf_modules.insert(call);
  if (leaf_modules.empty())
    return std::nullopt;

  Layering out;
  out.from_modules = true;
  out.leaf_layer.assign(leaves.size(), -1);
  std::vector<bool> inside(leaves.size(), false); // the leaf is inside its layer's module call (not joined to it)
  std::vector<bool> repeated;                     // the layer is a module's second or later call in the step
  std::map<std::size_t, int> layer_of_call;
  std::map<std::string, int> calls; // per module name, its calls so far
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const Event* module = nullptr;
    for (auto it = leaves[k].modules.rbegin(); it != leaves[k].modules.rend() && module == nullptr; ++it)
      if (leaf_modules.count((*it)->index) > 0)
        module = *it;
    if (module == nullptr) {
      out.leaf_layer[k] = out.layers.empty() ? 0 : static_cast<int>(out.layers.size()) - 1;
      continue;
    }
    const auto [it, added] = layer_of_call.emplace(module->index, static_cast<int>(out.layers.size()));
    if (added) {
      TracedLayer l;
      const std::string name = module->name.substr(kModulePrefix.size());
      const int call = ++calls[name];
      l.name = call == 1 ? name : fmt::format("{}#{}", name, call);
      l.kind = module_kind(name);
      out.layers.push_back(std::move(l));
      repeated.push_back(call > 1);
    }
    out.leaf_layer[k] = it->second;
    inside[k] = true;
  }

  // Per layer: the parameters of its layer-opening operators (none from a repeated call: the module's weights are
  // its first call's; its FLOPs count again), the kind of the first when the class does not say, and the input of the
  // first (else of its first operator).
  std::vector<int> parameterised(out.layers.size(), 0);
  std::vector<bool> from_operator(out.layers.size(), false);
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const Event& e = *leaves[k].event;
    if (e.cat != Category::cpu_op)
      continue;
    const auto li = static_cast<std::size_t>(out.leaf_layer[k]);
    TracedLayer& l = out.layers[li];
    const std::string kind = layer_kind(e);
    if (!kind.empty()) {
      TracedLayer op; // the operator's own parameters, named after the layer (the second one's "<layer>.1.weight")
      op.kind = kind;
      const int n = parameterised[li]++;
      op.name = n == 0 ? l.name : fmt::format("{}.{}", l.name, n);
      derive_params(e, op);
      if (!(inside[k] && repeated[li]))
        l.params.insert(l.params.end(), op.params.begin(), op.params.end());
      l.fwd_flops += op.fwd_flops;
      if (inside[k] && !from_operator[li]) {
        from_operator[li] = true;
        if (l.kind.empty())
          l.kind = kind;
        l.op = e.name;
        l.input_shape = op.input_shape;
      }
    }
    if (inside[k] && l.op.empty()) {
      l.op = e.name;
      if (!e.input_dims.empty())
        l.input_shape = e.input_dims[0];
    }
  }
  for (auto& l : out.layers)
    if (l.kind.empty())
      l.kind = "module";
  return out;
}

} // namespace

bool is_module(const Event& e) {
  return e.cat == Category::python && starts_with(e.name, kModulePrefix) && e.name.size() > kModulePrefix.size();
}

std::string module_kind(std::string_view module) {
  std::string_view c = module_class(module);
  if (starts_with(c, "Lazy"))
    c = c.substr(4);
  const bool conv = c.size() == 6 && starts_with(c, "Conv") && c[4] >= '1' && c[4] <= '3' && c[5] == 'd';
  const bool conv_t = c.size() == 15 && starts_with(c, "ConvTranspose") && c[13] >= '1' && c[13] <= '3' && c[14] == 'd';
  if (conv || conv_t)
    return "conv";
  if (ends_with_text(c, "Linear"))
    return "linear";
  if (contains(c, "BatchNorm"))
    return "bn";
  if (contains(c, "LayerNorm") || contains(c, "GroupNorm") || contains(c, "RMSNorm"))
    return "ln";
  if (c == "Embedding" || c == "EmbeddingBag")
    return "embedding";
  if (contains(c, "Pool"))
    return "pool";
  return "";
}

Layering form_layers(const std::vector<ForwardLeaf>& leaves) {
  auto out = module_layers(leaves);
  if (!out)
    out = operator_layers(leaves);
  if (out->layers.empty()) {
    TracedLayer l; // nothing recognisable: the whole forward as one layer
    l.kind = "ops";
    l.name = "model";
    out->layers.push_back(std::move(l));
  }
  return std::move(*out);
}

} // namespace ddlsim::traces::detail
