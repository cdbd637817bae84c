// The engines' capability records (sim/spec/engine.hpp).
#include "sim/spec/engine.hpp"

#include <array>

namespace ddlsim::sim {
namespace {

// Limits measured on the release build (docs/scenario.md, "Limits"): the flow engine's hosts take ~16 KiB each with
// node symmetry (65,536 nodes x 4 GPUs took 8 s and 1.0 GiB); parameter-server pairs ~46 B each on the analytic
// engine (1,024 x 8,192 took 20 s and 0.4 GiB), while the flow engine times every push and pull (64 x 512 took 47 s).
constexpr std::array<EngineCapabilities, 2> kEngines{{
    {.engine = Engine::analytic,
     .name = "analytic",
     .description = "closed forms and list scheduling (the default; seconds for any size)",
     .folds_tensor_collectives = true,
     .replays_measured_collectives = true,
     .draws_communication = true,
     .samples_backup_workers = true,
     .simulates_asynchronous_workers = true,
     .one_run_per_process = false,
     .max_hosts = 0,
     .bytes_per_host = 0,
     .max_server_pairs = std::int64_t{1} << 24,
     .bytes_per_server_pair = 46},
    {.engine = Engine::flow,
     .name = "flow",
     .description = "every collective as point-to-point flows sharing links on SimGrid",
     .folds_tensor_collectives = false,
     .replays_measured_collectives = false,
     .draws_communication = false,
     .samples_backup_workers = false,
     .simulates_asynchronous_workers = false,
     .one_run_per_process = true,
     .max_hosts = std::int64_t{1} << 18,
     .bytes_per_host = 16384,
     .max_server_pairs = std::int64_t{1} << 15,
     .bytes_per_server_pair = 0},
}};

} // namespace

std::span<const EngineCapabilities> engines() {
  return kEngines;
}

const EngineCapabilities& capabilities(Engine e) {
  return kEngines[static_cast<std::size_t>(e)];
}

std::optional<Engine> find_engine(std::string_view name) {
  for (const auto& e : kEngines)
    if (e.name == name)
      return e.engine;
  return std::nullopt;
}

std::string_view engine_name(Engine e) {
  return capabilities(e).name;
}

} // namespace ddlsim::sim
