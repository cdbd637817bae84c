// Forming a step's layers from its forward operators (traces/ only): from the module annotations PyTorch's Python
// tracer writes ("nn.Module: Conv2d_3", category python_function) when the forward has them, else from the
// parameterised operators (aten::conv2d, aten::linear, aten::batch_norm, ...), as docs/traces.md describes.
#pragma once

#include "traces/analysis.hpp"
#include "traces/kineto.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::traces::detail {

/// A module annotation: a python_function event named "nn.Module: <class>_<instance>".
[[nodiscard]] bool is_module(const Event& e);
/// The layer kind of a module class ("Conv2d_3" -> conv, "BatchNorm2d_0" -> bn, "MaxPool2d_0" -> pool, ...);
/// "" for a class the import does not know.
[[nodiscard]] std::string module_kind(std::string_view module);

/// One forward leaf (an operator, or an annotation without children) and the module annotations around it.
struct ForwardLeaf {
  const Event* event = nullptr;
  std::vector<const Event*> modules; ///< outermost first
};

struct Layering {
  std::vector<TracedLayer> layers;
  std::vector<int> leaf_layer; ///< per leaf: its layer
  bool from_modules = false;   ///< the layers are leaf modules (else parameterised operators)
};

/// The layers of a step's forward, leaves in time order: one per leaf module that contains an operator when any
/// operator is inside a module annotation, else one per layer-opening operator (layer_kind); leaves outside a layer
/// join the layer before them (the first layer when none is before them). Without any, the whole forward is one
/// layer "model".
[[nodiscard]] Layering form_layers(const std::vector<ForwardLeaf>& leaves);

} // namespace ddlsim::traces::detail
