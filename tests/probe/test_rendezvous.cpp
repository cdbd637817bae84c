// How the probe's processes find rank 0 and its NCCL id (cuda_probe/rendezvous.hpp): torchrun's and Slurm's
// variables, the TCP exchange on the loopback with a fake id, the shared-file fallback, and the errors that say what
// to set.
#include "cuda_probe/rendezvous.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

using namespace ddlsim::probe;
using Catch::Matchers::Contains;

namespace {

auto from(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

// 128 bytes (sizeof(ncclUniqueId)) including NULs and every byte value's neighbourhood
std::string fake_id() {
  std::string id(128, '\0');
  for (std::size_t i = 0; i < id.size(); ++i)
    id[i] = static_cast<char>((i * 37 + 11) % 256);
  return id;
}

} // namespace

TEST_CASE("probe::rank_environment reads torchrun's and Slurm's variables", "[probe][rendezvous]") {
  SECTION("no launcher: one process") {
    const auto e = rank_environment(from({}));
    CHECK(e.launcher == "none");
    CHECK(e.world_size == 1);
  }
  SECTION("torchrun: 2 nodes x 4; the id one port above torchrun's store") {
    const auto e = rank_environment(from({{"RANK", "5"},
                                          {"WORLD_SIZE", "8"},
                                          {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "4"},
                                          {"MASTER_ADDR", "node-a"},
                                          {"MASTER_PORT", "29500"}}));
    CHECK(e.launcher == "torchrun");
    CHECK((e.rank == 5 && e.world_size == 8 && e.local_rank == 1 && e.local_world_size == 4 && e.nodes == 2));
    CHECK(e.master_host == "node-a");
    CHECK(e.port == 29501);
  }
  SECTION("srun: 16 tasks on 2 nodes, rank 0's host from the launch node") {
    const auto e = rank_environment(from({{"SLURM_PROCID", "9"},
                                          {"SLURM_NTASKS", "16"},
                                          {"SLURM_LOCALID", "1"},
                                          {"SLURM_NNODES", "2"},
                                          {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.7"}}));
    CHECK(e.launcher == "slurm");
    CHECK((e.rank == 9 && e.world_size == 16 && e.local_world_size == 8 && e.nodes == 2));
    CHECK(e.master_host == "10.0.0.7");
    CHECK(e.port == kDefaultPort);
  }
  SECTION("overrides: DDLSIM_PROBE_MASTER, DDLSIM_PROBE_PORT, DDLSIM_PROBE_ID_FILE") {
    const auto e = rank_environment(from({{"SLURM_PROCID", "0"},
                                          {"SLURM_NTASKS", "2"},
                                          {"SLURM_LOCALID", "0"},
                                          {"SLURM_NNODES", "2"},
                                          {"DDLSIM_PROBE_MASTER", "head"},
                                          {"DDLSIM_PROBE_PORT", "40000"},
                                          {"DDLSIM_PROBE_ID_FILE", "/shared/id"}}));
    CHECK((e.master_host == "head" && e.port == 40000 && e.id_file == "/shared/id"));
  }
  SECTION("errors name the variable") {
    CHECK_THROWS_WITH(rank_environment(from({{"RANK", "x"}, {"WORLD_SIZE", "2"}})),
                      Contains("RANK='x' is not an integer >= 0"));
    CHECK_THROWS_WITH(rank_environment(from({{"RANK", "0"}, {"WORLD_SIZE", "2"}})), Contains("LOCAL_RANK is not set"));
    CHECK_THROWS_WITH(rank_environment(from({{"RANK", "2"},
                                             {"WORLD_SIZE", "2"},
                                             {"LOCAL_RANK", "0"},
                                             {"LOCAL_WORLD_SIZE", "1"},
                                             {"MASTER_ADDR", "a"}})),
                      Contains("rank 2 is not below the world size 2"));
    CHECK_THROWS_WITH(rank_environment(from({{"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "3"},
                                             {"SLURM_LOCALID", "0"},
                                             {"SLURM_NNODES", "2"},
                                             {"MASTER_ADDR", "a"}})),
                      Contains("SLURM_NTASKS=3 is not a multiple of SLURM_NNODES=2"));
    CHECK_THROWS_WITH(
        rank_environment(
            from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_NNODES", "2"}})),
        Contains("set MASTER_ADDR or DDLSIM_PROBE_MASTER"));
  }
}

TEST_CASE("probe::IdServer serves the NCCL id to every rank over the loopback", "[probe][rendezvous]") {
  const std::string id = fake_id();
  IdServer server(0); // any free port
  REQUIRE(server.port() > 0);
  std::vector<std::future<std::string>> ranks;
  for (int r = 1; r < 4; ++r)
    ranks.push_back(std::async(std::launch::async, [&] { return fetch_id("127.0.0.1", server.port(), 20); }));
  server.serve(id, 3, 20);
  for (auto& f : ranks)
    CHECK(f.get() == id);
  SECTION("a rank that starts before rank 0 listens retries until it does") {
    int port = 0;
    {
      const IdServer free_port(0); // a port nobody listens on once it is closed
      port = free_port.port();
    }
    auto early = std::async(std::launch::async, [port] { return fetch_id("localhost", port, 20); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    IdServer late(port);
    late.serve(id, 1, 20);
    CHECK(early.get() == id);
  }
}

TEST_CASE("probe rendezvous errors: timeouts and a port held by another service", "[probe][rendezvous]") {
  IdServer server(0);
  CHECK_THROWS_WITH(server.serve("id", 1, 0.2), Contains("timed out after") && Contains("0 of 1 ranks connected"));
  // another program on the port: it accepts and answers something else
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  auto impostor = std::async(std::launch::async, [fd] {
    const int c = ::accept(fd, nullptr, nullptr);
    const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    (void)!::write(c, reply, sizeof reply - 1);
    ::close(c);
  });
  CHECK_THROWS_WITH(fetch_id("127.0.0.1", port, 5), Contains("is not a ddlsim-probe rank 0"));
  impostor.get();
  ::close(fd);
  // nobody listening at all
  CHECK_THROWS_WITH(fetch_id("127.0.0.1", port, 0.3), Contains("no NCCL id from rank 0 at 127.0.0.1:"));
}

TEST_CASE("probe id file: rank 0 publishes, the others wait for it", "[probe][rendezvous]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ddlsim-probe-id-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "nccl-id").string();
  const std::string id = fake_id();
  auto reader = std::async(std::launch::async, [&] { return read_id_file(path, id.size(), 20); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  publish_id_file(path, id);
  CHECK(reader.get() == id);
  std::ofstream(path, std::ios::trunc) << "short";
  CHECK_THROWS_WITH(read_id_file(path, id.size(), 1), Contains("holds 5 bytes, not a 128-byte NCCL id"));
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(read_id_file(path, id.size(), 0.2), Contains("no NCCL id in"));
  std::filesystem::remove_all(dir);
}
