// Made-up profiler traces for the trace tests: one step of a two-layer model, in the old profiler's or Kineto's
// category spellings, with or without its ProfilerStep span and kernels; and gzip for writing them compressed.
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ddlsim::test {

// One step of a two-layer model (conv + relu, linear), old spellings (Operator, Runtime, Kernel) or new ones.
inline std::string tiny_trace(bool kineto_names, bool with_step = true, bool with_kernels = true) {
  const std::string op = kineto_names ? "cpu_op" : "Operator";
  const std::string rt = kineto_names ? "cuda_runtime" : "Runtime";
  const std::string kn = kineto_names ? "kernel" : "Kernel";
  std::string ev;
  const auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  const auto x = [&](const std::string& cat, const std::string& name, int tid, double ts, double dur,
                     const std::string& args) {
    add(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", cat, name,
                    tid, ts, dur, args));
  };
  if (with_step)
    x(op, "ProfilerStep#1", 1, 1000, 1000, "");
  // forward on thread 1: conv (seq 10) launches kernel c1, relu (seq 11), linear (seq 12)
  x(op, "aten::conv2d", 1, 1100, 50, R"("Input Dims":[[8,3,32,32],[16,3,3,3],[16]],"Sequence number":10)");
  x(rt, "cudaLaunchKernel", 1, 1110, 10, R"("correlation":101)");
  x(op, "aten::relu_", 1, 1200, 20, R"("Input Dims":[[8,16,32,32]],"Sequence number":11)");
  x(rt, "cudaLaunchKernel", 1, 1205, 10, R"("correlation":102)");
  x(op, "aten::linear", 1, 1300, 40, R"("Input Dims":[[8,16384],[10,16384],[10]],"Sequence number":12)");
  x(rt, "cudaLaunchKernel", 1, 1310, 10, R"("correlation":103)");
  // backward on thread 2, reverse order
  x(op, "AddmmBackward", 2, 1500, 50, R"("Sequence number":12,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1510, 10, R"("correlation":201)");
  x(op, "ReluBackward1", 2, 1600, 30, R"("Sequence number":11,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1605, 10, R"("correlation":202)");
  x(op, "CudnnConvolutionBackward", 2, 1700, 60, R"("Sequence number":10,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1710, 10, R"("correlation":203)");
  x(op, "torch::autograd::AccumulateGrad", 2, 1780, 20, "");
  x(op, "Optimizer.step#SGD.step", 1, 1850, 100, "");
  x(rt, "cudaLaunchKernel", 1, 1860, 10, R"("correlation":301)");
  if (with_kernels) {
    const std::pair<int, double> kernels[] = {{101, 30}, {102, 5}, {103, 8}, {201, 16}, {202, 6}, {203, 40}, {301, 7}};
    double ts = 1120;
    for (const auto& [corr, dur] : kernels) {
      x(kn, fmt::format("k{}", corr), 7, ts, dur, fmt::format(R"("correlation":{})", corr));
      ts += corr < 200 ? 60 : 100;
    }
  }
  return fmt::format(R"({{"schemaVersion":1,"deviceProperties":[{{"name":"Tesla V100-SXM2-32GB"}}],
"traceEvents":[{}]}})",
                     ev);
}

inline std::string write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / fmt::format("ddlsim-test-traces-{}-{}", ::getpid(), name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

inline std::string gzip(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

} // namespace ddlsim::test
