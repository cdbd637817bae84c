// Iteration DAG on Boost.Graph: construction, cycle check and critical path (see graph.hpp).
#include "dag/graph.hpp"

#include <boost/graph/topological_sort.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ddlsim::dag {

std::string_view resource_name(Resource r) {
  switch (r) {
  case Resource::host_cpu:
    return "host_cpu";
  case Resource::gpu_compute:
    return "gpu_compute";
  case Resource::comm:
    return "comm";
  case Resource::gpu_compression:
    return "gpu_compression";
  case Resource::comm_pull:
    return "comm_pull";
  case Resource::none:
    return "none";
  case Resource::p2p:
    return "p2p";
  case Resource::host_thread:
    return "host_thread";
  case Resource::copy:
    return "copy";
  }
  return "?";
}

std::string device_name(Device d) {
  return (d.kind == Device::Kind::gpu ? "gpu" : "host") + std::to_string(d.index);
}

std::vector<WireStep> GradientGroup::effective_steps() const {
  if (!steps.empty())
    return steps;
  return {{.kernel_s = 0, .collective = Collective::allreduce, .bytes = bytes}};
}

Collective GradientGroup::first_collective() const {
  for (const auto& s : effective_steps())
    if (s.collective != Collective::none)
      return s.collective;
  return Collective::none;
}

double GradientGroup::kernel_s() const {
  double sum = 0;
  for (const auto& s : steps)
    sum += s.kernel_s;
  return sum;
}

std::string_view task_kind_name(TaskKind k) {
  switch (k) {
  case TaskKind::data_load:
    return "data_load";
  case TaskKind::h2d:
    return "h2d";
  case TaskKind::forward:
    return "forward";
  case TaskKind::backward:
    return "backward";
  case TaskKind::compression:
    return "compression";
  case TaskKind::communication:
    return "communication";
  case TaskKind::update:
    return "update";
  case TaskKind::delay:
    return "delay";
  case TaskKind::prediction:
    return "prediction";
  case TaskKind::launch:
    return "launch";
  }
  return "?";
}

IterationGraph::IterationGraph(const IterationGraph& other)
    : graph_(std::make_unique<Graph>(*other.graph_)), communicators_(other.communicators_),
      replication_(other.replication_), priority_credit_bytes_(other.priority_credit_bytes_) {}

IterationGraph& IterationGraph::operator=(const IterationGraph& other) {
  if (this != &other)
    *this = IterationGraph(other);
  return *this;
}

IterationGraph::IterationGraph(IterationGraph&& other)
    : graph_(std::exchange(other.graph_, std::make_unique<Graph>())),
      communicators_(std::exchange(other.communicators_, {})), replication_(std::exchange(other.replication_, {})),
      priority_credit_bytes_(std::exchange(other.priority_credit_bytes_, 0)) {}

IterationGraph& IterationGraph::operator=(IterationGraph&& other) noexcept {
  graph_.swap(other.graph_);
  communicators_.swap(other.communicators_);
  std::swap(replication_, other.replication_);
  std::swap(priority_credit_bytes_, other.priority_credit_bytes_);
  return *this;
}

IterationGraph::~IterationGraph() = default;

IterationGraph::Id IterationGraph::add(const Task& task) {
  // add_vertex(graph) then assign: add_vertex(property, graph) trips GCC 12's -Wuninitialized inside Boost's
  // named-graph lookup when optimised with sanitizers.
  const Id id = boost::add_vertex(*graph_);
  (*graph_)[id] = task;
  return id;
}

void IterationGraph::depend(Id before, Id after) {
  if (before >= size() || after >= size())
    throw std::logic_error("IterationGraph::depend: no such task");
  boost::add_edge(before, after, *graph_);
}

int IterationGraph::add_communicator(const Communicator& c) {
  if (c.ranks.empty())
    throw std::logic_error("IterationGraph::add_communicator: a communicator needs at least one rank");
  const auto it = std::find(communicators_.begin(), communicators_.end(), c);
  if (it != communicators_.end())
    return static_cast<int>(it - communicators_.begin());
  communicators_.push_back(c);
  return static_cast<int>(communicators_.size() - 1);
}

const Communicator& IterationGraph::communicator(int index) const {
  if (index < 0 || static_cast<std::size_t>(index) >= communicators_.size())
    throw std::logic_error("IterationGraph::communicator: no communicator " + std::to_string(index));
  return communicators_[static_cast<std::size_t>(index)];
}

void IterationGraph::place(const Placement& where) {
  const int group =
      add_communicator(where.data_parallel.ranks.empty() ? Communicator{{where.gpu}} : where.data_parallel);
  for (Id v = 0; v < size(); ++v) {
    auto& t = (*graph_)[v];
    t.device = t.resource == Resource::host_cpu ? Device::host(where.node) : Device::gpu(where.gpu);
    if (const Collective c = collective_of(t); c != Collective::none && c != Collective::point_to_point)
      wire(t)->communicator = group; // collectives and server transfers: a transfer names its own pair
  }
  if (where.gpus_per_node < 1 || where.gpu / where.gpus_per_node != where.node)
    throw std::logic_error(fmt::format("IterationGraph::place: GPU {} is not on node {} with {} GPUs per node",
                                       where.gpu, where.node, where.gpus_per_node));
  replicate({{where.gpu, group}}, where.gpus_per_node);
}

void IterationGraph::replicate(const std::vector<ReplicaGroup>& groups, int gpus_per_node) {
  if (gpus_per_node < 1)
    throw std::logic_error("IterationGraph::replicate: no GPUs per node");
  Replication r{{}, gpus_per_node};
  const auto position = [&](int gpu, int index, const char* what) {
    const auto& ranks = communicator(index).ranks;
    const auto self = std::find(ranks.begin(), ranks.end(), gpu);
    if (self == ranks.end())
      throw std::logic_error(fmt::format("IterationGraph::replicate: GPU {} is not in its {} group", gpu, what));
    return static_cast<int>(self - ranks.begin());
  };
  for (const auto& [gpu, index, tensor] : groups) {
    const int d = static_cast<int>(communicator(index).ranks.size());
    const int t = tensor < 0 ? 1 : static_cast<int>(communicator(tensor).ranks.size());
    if (r.gpus.empty()) {
      r.data = d;
      r.tensor = t;
    }
    if (d != r.data || t != r.tensor)
      throw std::logic_error("IterationGraph::replicate: data-parallel or tensor groups of different sizes");
    r.gpus.push_back(
        {gpu, index, position(gpu, index, "data-parallel"), tensor, tensor < 0 ? 0 : position(gpu, tensor, "tensor")});
  }
  replication_ = std::move(r);
}

int IterationGraph::replicas() const {
  return replication_.gpus.empty() ? 1 : replication_.data * replication_.tensor;
}

int IterationGraph::tensor_peers() const {
  return replication_.gpus.empty() ? 1 : replication_.tensor;
}

const IterationGraph::Replica& IterationGraph::replica_of(int gpu) const {
  for (const auto& r : replication_.gpus)
    if (r.gpu == gpu)
      return r;
  throw std::logic_error(
      fmt::format("IterationGraph::replica_device: gpu{} is not a device of the replicated DAG", gpu));
}

Device IterationGraph::replica_device(int k, Device d) const {
  if (k < 0 || k >= replicas())
    throw std::logic_error(fmt::format("IterationGraph::replica_device: no replica {} of {}", k, replicas()));
  if (k == 0)
    return d;
  const int g = replication_.gpus_per_node;
  const int t = replication_.tensor;
  const auto image = [&](const Replica& r) {
    const auto& ranks = communicator(r.group).ranks;
    int gpu = ranks[static_cast<std::size_t>(r.first + k / t) % ranks.size()];
    if (r.tensor >= 0) {
      const auto& peers = communicator(r.tensor).ranks;
      gpu += peers[static_cast<std::size_t>(r.tensor_first + k % t) % peers.size()] - r.gpu;
    }
    return gpu;
  };
  if (d.kind == Device::Kind::gpu)
    return Device::gpu(image(replica_of(d.index)));
  for (const auto& r : replication_.gpus)
    if (r.gpu / g == d.index)
      return Device::host(image(r) / g);
  throw std::logic_error(
      fmt::format("IterationGraph::replica_device: {} is not a device of the replicated DAG", device_name(d)));
}

IterationGraph::Axis IterationGraph::axis(const Task& task) const {
  for (const auto& r : replication_.gpus) {
    if (r.group == communicator_of(task))
      return Axis::data;
    if (r.tensor >= 0 && r.tensor == communicator_of(task))
      return Axis::tensor;
  }
  return Axis::copy;
}

int IterationGraph::instances(const Task& task) const {
  switch (axis(task)) {
  case Axis::data:
    return replication_.gpus.empty() ? 1 : replication_.tensor;
  case Axis::tensor:
    return replication_.data;
  case Axis::copy:
    break;
  }
  return replicas();
}

int IterationGraph::instance_of(Axis axis, int r) const {
  switch (axis) {
  case Axis::data:
    return replication_.gpus.empty() ? 0 : r % replication_.tensor;
  case Axis::tensor:
    return r / replication_.tensor;
  case Axis::copy:
    break;
  }
  return r;
}

Communicator IterationGraph::instance_communicator(const Task& task, int i) const {
  Communicator c = communicator(communicator_of(task));
  if (i == 0)
    return c;
  // The copy that stands for instance i: tensor rank i (data), replica i (tensor), copy i.
  const Axis a = axis(task);
  const int copy = a == Axis::tensor ? i * replication_.tensor : i;
  if (a == Axis::copy) {
    for (int& rank : c.ranks)
      rank = replica_device(copy, Device::gpu(rank)).index;
    return c;
  }
  // A group of the DAG's GPU moves with that GPU: every member by the same offset.
  const int offset = replica_device(copy, task.device).index - task.device.index;
  for (int& rank : c.ranks)
    rank += offset;
  return c;
}

std::vector<Device> IterationGraph::devices() const {
  std::vector<Device> out; // few devices, many tasks: a linear search per task
  for (Id v = 0; v < size(); ++v)
    if (std::find(out.begin(), out.end(), (*graph_)[v].device) == out.end())
      out.push_back((*graph_)[v].device);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<IterationGraph::Id> IterationGraph::successors(Id id) const {
  std::vector<Id> out;
  for (auto [it, end] = boost::adjacent_vertices(id, *graph_); it != end; ++it)
    out.push_back(*it);
  return out;
}

std::vector<IterationGraph::Id> IterationGraph::predecessors(Id id) const {
  std::vector<Id> out;
  for (auto [it, end] = boost::inv_adjacent_vertices(id, *graph_); it != end; ++it)
    out.push_back(*it);
  return out;
}

std::vector<IterationGraph::Id> IterationGraph::topological_order() const {
  std::vector<Id> reversed;
  try {
    boost::topological_sort(*graph_, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    // Find a task on a cycle for the message: Kahn's algorithm leaves exactly the cyclic part unprocessed.
    std::vector<std::size_t> indegree(size(), 0);
    for (Id v = 0; v < size(); ++v)
      indegree[v] = boost::in_degree(v, *graph_);
    std::vector<Id> stack;
    for (Id v = 0; v < size(); ++v)
      if (indegree[v] == 0)
        stack.push_back(v);
    while (!stack.empty()) {
      const Id v = stack.back();
      stack.pop_back();
      for (Id s : successors(v))
        if (--indegree[s] == 0)
          stack.push_back(s);
    }
    const auto on_cycle = std::find_if(indegree.begin(), indegree.end(), [](std::size_t d) { return d > 0; });
    const auto id = static_cast<std::size_t>(on_cycle - indegree.begin());
    throw std::logic_error("iteration graph has a cycle through task " + std::to_string(id) + " (" +
                           std::string(task_kind_name((*graph_)[id].kind)) + ", layer " +
                           std::to_string(layer_of((*graph_)[id])) + ")");
  }
  return {reversed.rbegin(), reversed.rend()};
}

IterationGraph::CriticalPath IterationGraph::critical_path() const {
  const auto order = topological_order();
  std::vector<double> finish(size(), 0);
  std::vector<Id> via(size(), size());
  for (Id v : order) {
    double start = 0;
    for (auto [it, end] = boost::inv_adjacent_vertices(v, *graph_); it != end; ++it) {
      if (via[v] == size() || finish[*it] > start) {
        start = finish[*it];
        via[v] = *it;
      }
    }
    finish[v] = start + (*graph_)[v].duration_s;
  }
  CriticalPath path;
  if (order.empty())
    return path;
  Id last = order.front();
  for (Id v : order)
    if (finish[v] > finish[last])
      last = v;
  path.length_s = finish[last];
  for (Id v = last; v != size(); v = via[v])
    path.tasks.push_back(v);
  std::reverse(path.tasks.begin(), path.tasks.end());
  return path;
}

} // namespace ddlsim::dag
