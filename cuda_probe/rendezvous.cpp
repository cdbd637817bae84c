// Rank discovery and the NCCL id exchange (rendezvous.hpp). The wire format is a fixed magic line, the id's length
// as 8 decimal digits and its bytes, so that a client that reached some other service fails clearly.
#include "cuda_probe/rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ddlsim::probe {
namespace {

constexpr char kMagic[] = "ddlsim-probe-id 1\n";

using Clock = std::chrono::steady_clock;

int integer_variable(const std::function<std::optional<std::string>(const char*)>& getenv, const char* name,
                     int minimum) {
  const auto v = getenv(name);
  if (!v)
    throw RendezvousError(std::string("environment variable ") + name + " is not set");
  std::size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v->size() || x < minimum)
    throw RendezvousError(std::string("environment variable ") + name + "='" + *v +
                          "' is not an integer >= " + std::to_string(minimum));
  return x;
}

std::string errno_text() {
  return std::strerror(errno);
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits until fd is ready for `events` or the deadline passes.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const double left = seconds_left(deadline);
    if (left <= 0)
      return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r > 0)
      return true;
    if (r < 0 && errno != EINTR)
      throw RendezvousError("poll: " + errno_text());
  }
}

void send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw RendezvousError("sending the NCCL id: " + errno_text());
    sent += static_cast<std::size_t>(n);
  }
}

std::string receive_exactly(int fd, std::size_t bytes, Clock::time_point deadline) {
  std::string out;
  char buf[256];
  while (out.size() < bytes) {
    if (!wait_ready(fd, POLLIN, deadline))
      throw RendezvousError("timed out receiving the NCCL id");
    const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, bytes - out.size()), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw RendezvousError("the connection closed before the NCCL id was received");
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

class Socket {
public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  [[nodiscard]] int fd() const { return fd_; }

private:
  int fd_;
};

} // namespace

RankEnvironment rank_environment(const std::function<std::optional<std::string>(const char*)>& getenv) {
  RankEnvironment e;
  if (getenv("RANK") && getenv("WORLD_SIZE")) {
    e.launcher = "torchrun";
    e.rank = integer_variable(getenv, "RANK", 0);
    e.world_size = integer_variable(getenv, "WORLD_SIZE", 1);
    e.local_rank = integer_variable(getenv, "LOCAL_RANK", 0);
    e.local_world_size = integer_variable(getenv, "LOCAL_WORLD_SIZE", 1);
    if (const auto host = getenv("MASTER_ADDR"))
      e.master_host = *host;
    if (getenv("MASTER_PORT"))
      e.port = integer_variable(getenv, "MASTER_PORT", 1) + 1;
  } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
    e.launcher = "slurm";
    e.rank = integer_variable(getenv, "SLURM_PROCID", 0);
    e.world_size = integer_variable(getenv, "SLURM_NTASKS", 1);
    e.local_rank = integer_variable(getenv, "SLURM_LOCALID", 0);
    const int nodes = integer_variable(getenv, "SLURM_NNODES", 1);
    if (e.world_size % nodes != 0)
      throw RendezvousError("SLURM_NTASKS=" + std::to_string(e.world_size) + " is not a multiple of SLURM_NNODES=" +
                            std::to_string(nodes) + ": run the same number of tasks (one per GPU) on every node");
    e.local_world_size = e.world_size / nodes;
    if (const auto host = getenv("MASTER_ADDR"))
      e.master_host = *host;
    else if (const auto launch = getenv("SLURM_LAUNCH_NODE_IPADDR"))
      e.master_host = *launch;
  } else {
    return e;
  }
  if (e.rank >= e.world_size)
    throw RendezvousError("rank " + std::to_string(e.rank) + " is not below the world size " +
                          std::to_string(e.world_size));
  if (e.local_rank >= e.local_world_size)
    throw RendezvousError("local rank " + std::to_string(e.local_rank) + " is not below the ranks per node " +
                          std::to_string(e.local_world_size));
  if (e.world_size % e.local_world_size != 0)
    throw RendezvousError("the world size " + std::to_string(e.world_size) +
                          " is not a multiple of the ranks per node " + std::to_string(e.local_world_size));
  e.nodes = e.world_size / e.local_world_size;
  if (const auto host = getenv("DDLSIM_PROBE_MASTER"))
    e.master_host = *host;
  if (getenv("DDLSIM_PROBE_PORT"))
    e.port = integer_variable(getenv, "DDLSIM_PROBE_PORT", 1);
  if (e.port == 0)
    e.port = kDefaultPort;
  if (e.port > 65535)
    throw RendezvousError("port " + std::to_string(e.port) + " is above 65535: set DDLSIM_PROBE_PORT");
  if (const auto file = getenv("DDLSIM_PROBE_ID_FILE"))
    e.id_file = *file;
  if (e.world_size > 1 && e.id_file.empty() && e.master_host.empty())
    throw RendezvousError(std::string("no host for rank 0: set MASTER_ADDR or DDLSIM_PROBE_MASTER (or ") +
                          "DDLSIM_PROBE_ID_FILE to a path on a shared file system)");
  return e;
}

IdServer::IdServer(int port) {
  fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = fd_ >= 0;
  if (!v6)
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0)
    throw RendezvousError("socket: " + errno_text());
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = 0;
  if (v6) {
    const int zero = 0; // accept IPv4 too
    ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    rc = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(fd_, 128) != 0) {
    const std::string why = errno_text();
    ::close(fd_);
    fd_ = -1;
    throw RendezvousError("cannot listen on port " + std::to_string(port) + " for the NCCL id: " + why +
                          " (set DDLSIM_PROBE_PORT to a free port)");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

IdServer::~IdServer() {
  if (fd_ >= 0)
    ::close(fd_);
}

void IdServer::serve(const std::string& id, int clients, double timeout_s) {
  char length[16];
  std::snprintf(length, sizeof length, "%08zu", id.size());
  const std::string message = std::string(kMagic) + length + id;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (int served = 0; served < clients; ++served) {
    if (!wait_ready(fd_, POLLIN, deadline))
      throw RendezvousError("timed out after " + std::to_string(timeout_s) + " s with " + std::to_string(served) +
                            " of " + std::to_string(clients) + " ranks connected for the NCCL id");
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) {
        --served;
        continue;
      }
      throw RendezvousError("accept: " + errno_text());
    }
    const Socket client(c);
    send_all(client.fd(), message);
  }
}

std::string fetch_id(const std::string& host, int port, double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string last_error = "no attempt";
  while (seconds_left(deadline) > 0) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (g != 0) {
      last_error = std::string("cannot resolve ") + host + ": " + gai_strerror(g);
    } else {
      for (addrinfo* a = found; a; a = a->ai_next) {
        const Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
        if (s.fd() < 0)
          continue;
        if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
          last_error = "connect to " + host + ":" + std::to_string(port) + ": " + errno_text();
          continue;
        }
        ::freeaddrinfo(found);
        const std::string magic = receive_exactly(s.fd(), sizeof kMagic - 1, deadline);
        if (magic != kMagic)
          throw RendezvousError(host + ":" + std::to_string(port) +
                                " is not a ddlsim-probe rank 0 (another service on that port? set DDLSIM_PROBE_PORT)");
        const std::string length = receive_exactly(s.fd(), 8, deadline);
        std::size_t bytes = 0;
        for (const char ch : length) {
          if (ch < '0' || ch > '9')
            throw RendezvousError("malformed NCCL id length from " + host);
          bytes = bytes * 10 + static_cast<std::size_t>(ch - '0');
        }
        return receive_exactly(s.fd(), bytes, deadline);
      }
      ::freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw RendezvousError("no NCCL id from rank 0 at " + host + ":" + std::to_string(port) + " within " +
                        std::to_string(timeout_s) + " s (" + last_error + ")");
}

void publish_id_file(const std::string& path, const std::string& id) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << id;
    if (!out.flush())
      throw RendezvousError("cannot write the NCCL id to " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw RendezvousError("cannot write the NCCL id to " + path + ": " + ec.message());
}

std::string read_id_file(const std::string& path, std::size_t id_bytes, double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      if (text.str().size() == id_bytes)
        return text.str();
      throw RendezvousError(path + " holds " + std::to_string(text.str().size()) + " bytes, not a " +
                            std::to_string(id_bytes) + "-byte NCCL id (a stale file from an earlier run? remove it)");
    }
    if (seconds_left(deadline) <= 0)
      throw RendezvousError("no NCCL id in " + path + " within " + std::to_string(timeout_s) +
                            " s (is it on a file system every node shares?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace ddlsim::probe
