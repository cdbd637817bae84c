// How the processes of a multi-node probe find each other (issue #13): each process is one GPU's rank, told its rank
// by torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR) or Slurm's srun (SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_NNODES, SLURM_LAUNCH_NODE_IPADDR); rank 0 creates the NCCL unique id and serves
// it over TCP to the others, or, where nodes cannot open ports to each other, writes it to a file on a shared file
// system (DDLSIM_PROBE_ID_FILE) that they read. NCCL's own examples exchange the id with MPI_Bcast; this does the same
// without MPI. Plain C++ and POSIX sockets: tested on the loopback with a fake id.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace ddlsim::probe {

/// A rendezvous that cannot proceed (bad environment, timeout, refused connection); `what()` says what to fix.
class RendezvousError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct RankEnvironment {
  std::string launcher = "none"; ///< "torchrun", "slurm" or "none" (one process)
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int nodes = 1;
  std::string master_host; ///< where rank 0 serves the id
  int port = 0;
  std::string id_file; ///< DDLSIM_PROBE_ID_FILE: exchange through this file instead of TCP
};

/// Default TCP port when neither DDLSIM_PROBE_PORT nor torchrun's MASTER_PORT gives one.
inline constexpr int kDefaultPort = 29517;

/// The rank environment from `getenv` (std::getenv in the program; a table in tests). torchrun's variables win over
/// Slurm's (torchrun inside an allocation); DDLSIM_PROBE_MASTER and DDLSIM_PROBE_PORT override the host and port
/// (torchrun: MASTER_PORT + 1, because torchrun's own store listens on MASTER_PORT). Throws RendezvousError naming
/// the variable that is missing or malformed.
[[nodiscard]] RankEnvironment rank_environment(const std::function<std::optional<std::string>(const char*)>& getenv);

/// Rank 0's side: listens on `port` (0: any free port) on every interface.
class IdServer {
public:
  explicit IdServer(int port);
  ~IdServer();
  IdServer(const IdServer&) = delete;
  IdServer& operator=(const IdServer&) = delete;
  [[nodiscard]] int port() const { return port_; }
  /// Sends `id` to `clients` connections, then returns; RendezvousError after `timeout_s` without all of them.
  void serve(const std::string& id, int clients, double timeout_s);

private:
  int fd_ = -1;
  int port_ = 0;
};

/// Another rank's side: connects to `host`:`port` (retrying until rank 0 listens) and returns the id it serves.
[[nodiscard]] std::string fetch_id(const std::string& host, int port, double timeout_s);

/// The shared-file fallback: rank 0 writes the id (atomically: a temporary file and a rename); the others wait for
/// the file and read it.
void publish_id_file(const std::string& path, const std::string& id);
[[nodiscard]] std::string read_id_file(const std::string& path, std::size_t id_bytes, double timeout_s);

} // namespace ddlsim::probe
