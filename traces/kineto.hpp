// Reading PyTorch profiler (Kineto) Chrome traces: JSON or gzip'd JSON, streamed through a SAX parser so that a
// 50 MB trace is never held as a DOM; each event is reduced to the fields the import uses (docs/traces.md). Both
// category spellings are read: the old profiler's (Operator, Kernel, Runtime, Memcpy, Memset) and Kineto's
// (cpu_op, kernel, cuda_runtime, gpu_memcpy, gpu_memset, user_annotation).
#pragma once

#include "core/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::traces {

enum class Category : std::uint8_t {
  cpu_op,          ///< Operator / cpu_op (ProfilerStep#N, aten::..., autograd nodes)
  user_annotation, ///< user_annotation (record_function; ProfilerStep#N and nccl:* in Kineto traces)
  python,          ///< python_function (module annotations "nn.Module: ...")
  runtime,         ///< Runtime / cuda_runtime (cudaLaunchKernel, ...)
  kernel,          ///< Kernel / kernel
  memcpy,          ///< Memcpy / gpu_memcpy
  memset,          ///< Memset / gpu_memset
  memory,          ///< [memory] instant events (allocations; "Bytes" < 0 frees)
  other,
};

/// One trace event, reduced. Times in microseconds as the trace gives them.
struct Event {
  Category cat = Category::other;
  std::string name;
  int thread = -1; ///< index into KinetoTrace::threads (pid and tid together)
  double ts_us = 0;
  double dur_us = 0;
  std::int64_t correlation = -1; ///< runtime calls and GPU activities: links a launch to what it launched
  std::int64_t sequence = -1;    ///< "Sequence number": a backward op's forward op has the same one
  std::int64_t fwd_thread = -1;  ///< "Fwd thread id"
  std::vector<std::vector<std::int64_t>> input_dims; ///< "Input Dims" (an empty list per non-tensor argument)
  std::vector<std::string> input_types;              ///< "Input type"
  double bytes = 0;                                  ///< memcpy/memset "bytes"; [memory] "Bytes"
  std::int64_t in_nelems = -1;                       ///< record_param_comms "In msg nelems"
  std::int64_t out_nelems = -1;                      ///< "Out msg nelems"
  std::int64_t group_size = -1;                      ///< "Group size"
  std::string dtype;                                 ///< "dtype"
  std::size_t index = 0;                             ///< position in traceEvents, for messages

  [[nodiscard]] double end_us() const { return ts_us + dur_us; }
};

struct Thread {
  std::string pid; ///< as written ("25738", "0")
  std::string tid; ///< as written ("25738", "stream 7", "7")
  std::string name;
  bool gpu = false; ///< a GPU stream (kernels, memcpys on it)
};

/// The most ranks a trace's distributedInfo may give: ddlsim's largest cluster (sim/spec/scenario.hpp, kMaxGpus).
inline constexpr int kMaxWorldSize = 1 << 20;

/// The traced GPU as deviceProperties[0] describes it (each field absent when the trace does not give it).
struct DeviceProperties {
  std::string name;                      ///< "" if absent
  std::optional<double> memory_bytes;    ///< totalGlobalMem: 1 MiB to 1 PiB
  std::optional<int> multiprocessors;    ///< numSms: 1 to 65,536
  std::optional<int> compute_capability; ///< computeMajor (0 to 99) x 10 + computeMinor (0 to 9)
};

struct KinetoTrace {
  std::string path;
  std::vector<Event> events; ///< complete events (ph X) and [memory] instants, in file order
  std::vector<Thread> threads;
  DeviceProperties device;
  std::optional<int> world_size; ///< distributedInfo: 1 to kMaxWorldSize
  std::optional<int> rank;       ///< 0 to world_size - 1
  std::string backend;
  std::size_t event_count = 0; ///< every entry of traceEvents, kept or not
};

/// Reads a trace (gzip'd when the file starts with the gzip magic; at most kMaxInputBytes of it, and of its inflated
/// text). Errors are InputErrors naming the file and the JSON path of the bad value (e.g. "/traceEvents/1234/ts"), or
/// the byte offset of a syntax error; counts and sizes out of ddlsim's range are errors too.
[[nodiscard]] KinetoTrace read_kineto(const std::string& path);

/// Reads a trace from text already in memory (tests); `origin` names it in errors.
[[nodiscard]] KinetoTrace parse_kineto(const std::string& text, const std::string& origin);

/// The bytes of one element of a profiler "Input type" / "dtype" ("float" 4, "c10::Half" 2, "long int" 8, ...);
/// 0 when unknown.
[[nodiscard]] int dtype_size(const std::string& type);

} // namespace ddlsim::traces
