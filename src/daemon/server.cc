#include "daemon/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "protocol/framing.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::WireCode;
using protocol::WireError;

struct Server::Connection {
  UniqueFd fd;
  Peer peer;
  protocol::FrameDecoder decoder;
  std::string out;
  bool said_hello = false;
  bool closing = false;  // close once `out` is flushed
  int64_t last_activity_ms = 0;
  int64_t frame_started_ms = 0;
};

Server::Server(Identify identify, Handler handler, const Clock& clock, ServerLimits limits)
    : identify_(std::move(identify)), handler_(std::move(handler)), clock_(clock), limits_(limits) {}

Server::~Server() {
  clients_.clear();
  if (listen_fd_) {
    listen_fd_.reset();
    if (!path_.empty()) unlink(path_.c_str());
  }
}

namespace {

// The listening socket systemd passed us (socket activation, sd_listen_fds(3) protocol
// without libsystemd): $LISTEN_PID is our pid and $LISTEN_FDS >= 1, so fd 3 is the first
// inherited socket. The variables are removed so that children (supervisors, jobs, hooks)
// never mistake fd 3 for theirs. -1 when there is none or it is not a listening Unix
// stream socket.
int InheritedListenFd() {
  const char* pid_text = std::getenv("LISTEN_PID");
  const char* fds_text = std::getenv("LISTEN_FDS");
  bool ours = pid_text && fds_text && std::strtol(pid_text, nullptr, 10) == getpid() &&
              std::strtol(fds_text, nullptr, 10) >= 1;
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (!ours) return -1;
  constexpr int kFirst = 3;  // SD_LISTEN_FDS_START
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  if (getsockopt(kFirst, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return -1;
  len = sizeof listening;
  if (getsockopt(kFirst, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) return -1;
  sockaddr_un addr{};
  len = sizeof addr;
  if (getsockname(kFirst, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_family != AF_UNIX) return -1;
  fcntl(kFirst, F_SETFD, FD_CLOEXEC);
  fcntl(kFirst, F_SETFL, fcntl(kFirst, F_GETFL) | O_NONBLOCK);
  return kFirst;
}

}  // namespace

Status Server::Listen(const std::string& path, bool shared) {
  if (int inherited = InheritedListenFd(); inherited >= 0) {
    // systemd owns the socket file (gpuman.socket: its path and mode); we neither
    // create nor remove it, so path_ stays empty.
    listen_fd_.reset(inherited);
    return {};
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return MakeError(ErrorCode::kInvalidArgument, "socket path " + path + " is too long");
  }
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(parent, ec);
  chmod(parent.c_str(), shared ? 0755 : 0700);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  // Never replace the socket of a server that still answers (Kakoune's check_session).
  UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (probe && connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    return MakeError(ErrorCode::kConflict, "another gpuman daemon is already serving " + path);
  }
  probe.reset();
  unlink(path.c_str());
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return MakeError(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd.get(), 64) != 0) {
    int err = errno;
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "listen on " + path + ": " + std::strerror(err));
  }
  chmod(path.c_str(), shared ? 0666 : 0600);
  listen_fd_ = std::move(fd);
  path_ = path;
  return {};
}

void Server::Adopt(UniqueFd fd, Peer peer) {
  if (!fd || clients_.size() >= limits_.max_clients) return;  // fd closes here
  auto c = std::make_unique<Connection>();
  c->peer = std::move(peer);
  c->last_activity_ms = clock_.NowUnixMs();
  const int raw = fd.get();
  c->fd = std::move(fd);
  clients_[raw] = std::move(c);
}

void Server::AcceptClients() {
  while (true) {
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;
    if (clients_.size() >= limits_.max_clients) continue;  // closed by `fd`
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    Adopt(std::move(fd), identify_(cred.uid, cred.gid, cred.pid));
  }
}

void Server::AddPollFds(std::vector<pollfd>& fds) const {
  if (listen_fd_) fds.push_back({listen_fd_.get(), POLLIN, 0});
  for (const auto& [fd, c] : clients_) {
    short events = POLLIN;
    if (!c->out.empty()) events |= POLLOUT;
    fds.push_back({fd, events, 0});
  }
}

bool Server::OnReady(const pollfd& ready) {
  if (listen_fd_ && ready.fd == listen_fd_.get()) {
    AcceptClients();
    return true;
  }
  auto it = clients_.find(ready.fd);
  if (it == clients_.end()) return false;
  if ((ready.revents & (POLLERR | POLLNVAL)) || !Serve(*it->second)) clients_.erase(it);
  return true;
}

void Server::CloseStale(int64_t now_unix_ms) {
  std::erase_if(clients_, [&](const auto& entry) {
    const Connection& c = *entry.second;
    return now_unix_ms - c.last_activity_ms > limits_.idle_timeout_ms ||
           (!c.decoder.at_frame_boundary() && now_unix_ms - c.frame_started_ms > limits_.partial_frame_ms);
  });
}

bool Server::Serve(Connection& c) {
  char buf[65536];
  while (true) {
    ssize_t n = read(c.fd.get(), buf, sizeof buf);
    if (n > 0) {
      if (c.decoder.at_frame_boundary()) c.frame_started_ms = clock_.NowUnixMs();
      c.last_activity_ms = clock_.NowUnixMs();
      (void)c.decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) return false;  // the client closed
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  while (true) {
    auto frame = c.decoder.Next();
    if (!frame) {
      // Oversized or zero-length frame: the stream cannot be trusted any more.
      WireCode code = c.decoder.error_code().value_or(WireCode::kBadMessage);
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(std::nullopt, WireError{code, frame.error().message}));
      c.closing = true;
      break;
    }
    if (!*frame) break;
    auto parsed = protocol::ParseRequest(**frame);
    if (auto* err = std::get_if<protocol::RequestError>(&parsed)) {
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(*err));
      continue;
    }
    const auto& request = std::get<protocol::Request>(parsed);
    if (!c.said_hello && request.op() != protocol::Op::kHello) {
      c.out += protocol::EncodeReplyFrame(
          MakeErrorReply(request.id, WireError{WireCode::kHelloRequired, "say hello first"}));
      c.closing = true;
      break;
    }
    protocol::Reply reply = handler_(c.peer, request);
    if (request.op() == protocol::Op::kHello && reply.ok()) c.said_hello = true;
    c.out += protocol::EncodeReplyFrame(reply);
    if (c.out.size() > limits_.max_output_buffer) return false;
  }
  while (!c.out.empty()) {
    ssize_t w = send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      c.out.erase(0, static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  return !(c.closing && c.out.empty());
}

}  // namespace gpuman::daemon
