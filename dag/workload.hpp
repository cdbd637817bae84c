// The workload file: a model's layers as JSON (`model.workload` in a scenario; `model.layers` inline), read and
// written here so that the scenario parser, `ddlsim import-trace` (traces/) and calibration (calibrate/) share one
// schema without linking an engine. Layer keys: name, kind, params (a count or [{name, shape}]), fwd_flops,
// bwd_flops (default 2 x fwd_flops), activation_bytes, inputs (layer names; absent: the previous layer).
#pragma once

#include "core/json.hpp"
#include "dag/model.hpp"

#include <string>

namespace ddlsim::dag {

/// Parses inline layers (`model.layers`, or a workload file's `layers`) into a model; checks names, references
/// and that the layer graph is acyclic; returns layers in a topological order. Errors are InputErrors naming
/// `file` and the JSON path under `pointer`.
[[nodiscard]] Model parse_layers(const Json& layers, const std::string& file, const std::string& pointer);

/// Reads a workload file ({name, input_bytes_per_sample, source, layers}); the model is named after the file when
/// it gives no name.
[[nodiscard]] Model read_workload(const std::string& path);

/// The workload file of `model` (read_workload reads it back to an equal model); `source` says where it came from
/// (empty: not written).
[[nodiscard]] OrderedJson workload_json(const Model& model, const std::string& source = "");

/// Writes workload_json(model, source) to `path` atomically.
void write_workload(const std::string& path, const Model& model, const std::string& source = "");

} // namespace ddlsim::dag
