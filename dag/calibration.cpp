// Calibration files (dag/calibration.hpp), read strictly: unknown keys and missing units are errors with a path.
#include "dag/calibration.hpp"

#include "core/error.hpp"

namespace ddlsim::dag {

Calibration parse_calibration(const Json& doc, const std::string& file, const std::string& pointer) {
  ObjectReader r(doc, file, pointer);
  Calibration c;
  c.origin = file;
  r.optional_string("format");
  r.optional_integer("version", 1, 1);
  r.optional_string("source");
  if (!r.has("layers") && !r.has("selection"))
    r.fail_here("a calibration gives \"layers\", \"selection\" or both");
  if (r.has("layers")) {
    c.batch_per_gpu = static_cast<int>(r.integer("batch_per_gpu", 1, 1 << 24));
    auto layers = r.object("layers");
    for (const auto& [name, value] : layers.json().items()) {
      auto l = layers.object(name);
      c.layers[name] = {l.quantity("forward", Dimension::time), l.quantity("backward", Dimension::time)};
      l.finish();
    }
    layers.finish();
  } else {
    r.optional_integer("batch_per_gpu", 1, 1 << 24);
  }
  if (r.has("selection")) {
    c.selection_pointer = r.path("selection");
    auto curves = r.object("selection");
    for (const auto& [name, value] : curves.json().items()) {
      if (name != "sort" && name != "sampling" && name != "threshold")
        curves.fail(name, "unknown selection (expected one of: sort, sampling, threshold)");
      auto k = curves.object(name);
      // time = fixed + per_element x m + per_selected x k, per selection call
      c.selection[name] = {k.optional_quantity("fixed", Dimension::time).value_or(0),
                           k.quantity("per_element", Dimension::time),
                           k.optional_quantity("per_selected", Dimension::time).value_or(0)};
      k.finish();
    }
    curves.finish();
  }
  r.finish();
  return c;
}

} // namespace ddlsim::dag
