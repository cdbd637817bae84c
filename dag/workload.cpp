// Workload files (dag/workload.hpp): strict parsing through core's ObjectReader, layers ordered topologically.
#include "dag/workload.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/graph/adjacency_list.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <vector>

namespace ddlsim::dag {
namespace {

/// The most elements one parameter tensor may have (2^50: 4 PiB of fp32 gradient, far beyond any model), so that
/// shapes and counts cannot wrap 64-bit arithmetic downstream.
constexpr std::int64_t kMaxTensorElements = std::int64_t{1} << 50;

double flops_value(const Json& v, const std::string& file, const std::string& pointer) {
  if (v.is_number()) {
    const double x = v.get<double>();
    if (!(x >= 0))
      throw InputError(file, pointer, fmt::format("{} must be at least 0", x));
    if (const auto range = quantity_range_error(x, Dimension::flops, v.dump()); !range.empty())
      throw InputError(file, pointer, range);
    return x;
  }
  return parse_quantity_at(v, Dimension::flops, file, pointer);
}

} // namespace

namespace {
// Transformer blocks (`block`) are numbered 0, 1, ... in forward order, each a run of consecutive layers
// (Layer::block, as the partitioner and the tensor-parallel split read them).
void check_blocks(const Model& model, const std::string& file, const std::string& pointer) {
  int current = -1;
  for (const auto& layer : model.layers) {
    if (layer.block < 0 || layer.block == current)
      continue;
    if (layer.block != current + 1)
      throw InputError(file, pointer,
                       fmt::format("layer '{}' is in block {} after block {}: blocks are numbered 0, 1, ... in "
                                   "forward order, each a run of consecutive layers",
                                   clip_user_text(layer.name), layer.block, current));
    current = layer.block;
  }
}
} // namespace

Model parse_layers(const Json& layers, const std::string& file, const std::string& pointer) {
  if (!layers.is_array() || layers.empty())
    throw InputError(file, pointer, "expected a non-empty array of layers");
  Model model;
  std::map<std::string, int> index;
  std::vector<std::vector<std::string>> input_names(layers.size());
  std::vector<bool> explicit_inputs(layers.size(), false); // "inputs": [] means none, absent means the previous
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string lp = json_pointer_append(pointer, i);
    ObjectReader r(layers[i], file, lp);
    Layer layer;
    layer.name = r.string("name");
    if (layer.name.empty())
      r.fail("name", "must not be empty");
    if (!index.emplace(layer.name, static_cast<int>(i)).second)
      r.fail("name", fmt::format("duplicate layer name '{}'", layer.name));
    layer.kind = r.optional_string("kind").value_or("custom");
    if (const Json* p = r.optional("params")) {
      const std::string pp = r.path("params");
      if (p->is_number_integer()) {
        const auto n = p->get<std::int64_t>();
        if (n < 0 || n > kMaxTensorElements)
          throw InputError(file, pp, fmt::format("{} must be between 0 and 2^50", n));
        if (n > 0)
          layer.params.push_back({layer.name + ".weight", {n}, n});
      } else if (p->is_array()) {
        for (std::size_t k = 0; k < p->size(); ++k) {
          ObjectReader tr((*p)[k], file, json_pointer_append(pp, k));
          ParamTensor t;
          t.name = tr.string("name");
          const Json& shape = tr.required("shape");
          if (!shape.is_array() || shape.empty())
            tr.fail("shape", "expected a non-empty array of positive integers");
          t.numel = 1;
          for (std::size_t d = 0; d < shape.size(); ++d) {
            if (!shape[d].is_number_integer() || shape[d].get<std::int64_t>() <= 0)
              throw InputError(file, json_pointer_append(tr.path("shape"), d), "expected a positive integer");
            t.shape.push_back(shape[d].get<std::int64_t>());
            if (t.shape.back() > kMaxTensorElements / t.numel)
              throw InputError(file, tr.path("shape"), "more than 2^50 elements in one tensor");
            t.numel *= t.shape.back();
          }
          tr.finish();
          layer.params.push_back(std::move(t));
        }
      } else {
        throw InputError(
            file, pp, "expected a parameter count or an array of {name, shape} tensors, got " + json_type_phrase(*p));
      }
    }
    layer.fwd_flops = flops_value(r.required("fwd_flops"), file, r.path("fwd_flops"));
    if (const Json* b = r.optional("bwd_flops"))
      layer.bwd_flops = flops_value(*b, file, r.path("bwd_flops"));
    else // input and weight gradients (docs/engines.md, "Where the numbers come from")
      layer.bwd_flops = 2 * layer.fwd_flops;
    layer.activation_bytes = r.optional_quantity("activation_bytes", Dimension::bytes).value_or(0);
    layer.block = static_cast<int>(r.optional_integer("block", 0, 1 << 20).value_or(-1));
    if (const Json* in = r.optional("inputs")) {
      if (!in->is_array())
        r.fail("inputs", "expected an array of layer names");
      explicit_inputs[i] = true;
      for (std::size_t k = 0; k < in->size(); ++k) {
        if (!(*in)[k].is_string())
          throw InputError(file, json_pointer_append(r.path("inputs"), k), "expected a layer name");
        input_names[i].push_back((*in)[k].get<std::string>());
      }
    }
    r.finish();
    model.layers.push_back(std::move(layer));
  }
  // Resolve inputs and order the layers topologically (stable: the given order where it is already valid).
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  Graph g(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (std::size_t k = 0; k < input_names[i].size(); ++k) {
      const auto it = index.find(input_names[i][k]);
      const std::string ip = json_pointer_append(json_pointer_append(json_pointer_append(pointer, i), "inputs"), k);
      if (it == index.end())
        throw InputError(file, ip, fmt::format("no layer named '{}'", clip_user_text(input_names[i][k])));
      if (it->second == static_cast<int>(i))
        throw InputError(file, ip, "a layer cannot be its own input");
      boost::add_edge(static_cast<std::size_t>(it->second), i, g);
    }
    if (!explicit_inputs[i] && i > 0)
      boost::add_edge(i - 1, i, g);
  }
  // Kahn's algorithm, smallest index first, so acyclic input keeps its order.
  std::vector<std::size_t> indegree(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i)
    indegree[i] = boost::in_degree(i, g);
  std::set<std::size_t> ready;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (indegree[i] == 0)
      ready.insert(i);
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const std::size_t v = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(v);
    for (auto [it, end] = boost::adjacent_vertices(v, g); it != end; ++it)
      if (--indegree[*it] == 0)
        ready.insert(*it);
  }
  if (order.size() != layers.size()) {
    std::vector<std::string> cyclic;
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (indegree[i] > 0)
        cyclic.push_back(model.layers[i].name);
    throw InputError(file, pointer, fmt::format("layers form a cycle through: {}", fmt::join(cyclic, ", ")));
  }
  Model sorted;
  std::vector<int> position(layers.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    position[order[k]] = static_cast<int>(k);
  for (std::size_t k = 0; k < order.size(); ++k) {
    Layer l = std::move(model.layers[order[k]]);
    std::vector<int> inputs;
    for (const auto& name : input_names[order[k]])
      inputs.push_back(position[static_cast<std::size_t>(index[name])]);
    l.inputs = std::move(inputs);
    sorted.layers.push_back(std::move(l));
  }
  check_blocks(sorted, file, pointer);
  return sorted;
}

Model read_workload(const std::string& resolved) {
  const Json doc = load_json_file(resolved);
  ObjectReader r(doc, resolved, "");
  auto model = parse_layers(r.required("layers"), resolved, "/layers");
  model.name = r.optional_string("name").value_or(std::filesystem::path(resolved).stem().string());
  model.input_bytes_per_sample = r.optional_quantity("input_bytes_per_sample", Dimension::bytes).value_or(0);
  r.optional_string("source");
  r.finish();
  return model;
}

OrderedJson workload_json(const Model& model, const std::string& source) {
  OrderedJson doc;
  doc["name"] = model.name;
  if (!source.empty())
    doc["source"] = source;
  if (model.input_bytes_per_sample > 0)
    doc["input_bytes_per_sample"] = fmt::format("{} B", model.input_bytes_per_sample);
  OrderedJson layers = OrderedJson::array();
  for (const auto& l : model.layers) {
    OrderedJson j;
    j["name"] = l.name;
    j["kind"] = l.kind;
    OrderedJson params = OrderedJson::array();
    for (const auto& t : l.params)
      params.push_back({{"name", t.name}, {"shape", t.shape.empty() ? std::vector<std::int64_t>{t.numel} : t.shape}});
    j["params"] = std::move(params);
    j["fwd_flops"] = l.fwd_flops;
    j["bwd_flops"] = l.bwd_flops;
    j["activation_bytes"] = fmt::format("{} B", l.activation_bytes);
    if (l.block >= 0)
      j["block"] = l.block;
    if (!l.inputs.empty()) {
      OrderedJson inputs = OrderedJson::array();
      for (int i : l.inputs)
        inputs.push_back(model.layers.at(static_cast<std::size_t>(i)).name);
      j["inputs"] = std::move(inputs);
    }
    layers.push_back(std::move(j));
  }
  doc["layers"] = std::move(layers);
  return doc;
}

void write_workload(const std::string& path, const Model& model, const std::string& source) {
  write_file_atomic(path, workload_json(model, source).dump(2) + "\n");
}

} // namespace ddlsim::dag
