#include "daemon/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/posix_error.h"
#include "protocol/framing.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::WireCode;
using protocol::WireError;

std::optional<std::string> ConnectionBudget::Admit(const Peer& peer) {
  const bool privileged = peer.uid == 0 || peer.is_admin;
  const std::string who = peer.user.empty() ? std::to_string(peer.uid) : peer.user;
  if (peer.uid != 0 && of(peer.uid) >= limits_.max_clients_per_user) {
    return "too many connections from user " + who + " (limit " + std::to_string(limits_.max_clients_per_user) + ")";
  }
  const size_t open_to_all = limits_.max_clients > limits_.admin_reserve ? limits_.max_clients - limits_.admin_reserve : 0;
  const size_t cap = privileged ? limits_.max_clients : open_to_all;
  if (total_ >= cap) {
    return "the daemon serves too many connections (limit " + std::to_string(cap) + (privileged ? "" : " for users outside the admin group") +
           "); try again later";
  }
  ++total_;
  ++by_uid_[peer.uid];
  return std::nullopt;
}

void ConnectionBudget::Release(uint32_t uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return;
  if (--it->second == 0) by_uid_.erase(it);
  if (total_ > 0) --total_;
}

size_t ConnectionBudget::of(uint32_t uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second;
}

bool ShouldRead(const FlowState& flow, const ServerLimits& limits) {
  return !flow.read_closed && !flow.closing && flow.queued_requests < limits.max_queued_requests &&
         flow.buffered_input < protocol::kMaxMessageBytes + protocol::kFrameHeaderBytes &&
         flow.unsent_bytes < limits.max_unsent_bytes;
}

struct Server::Connection {
  UniqueFd fd;
  Peer peer;
  protocol::FrameDecoder decoder;
  std::deque<std::string> queued;         // whole request payloads, in order
  std::optional<protocol::WireError> fatal;  // a framing error, answered after `queued`
  std::string out;
  size_t out_sent = 0;                    // bytes of `out` already sent
  bool said_hello = false;
  bool read_closed = false;  // end of stream seen: answer what came, then close
  bool closing = false;      // close once `out` is flushed
  bool broken = false;       // a read or send failed: close now
  int64_t last_activity_ms = 0;
  int64_t frame_started_ms = 0;

  size_t unsent() const { return out.size() - out_sent; }
  FlowState flow() const {
    return FlowState{queued.size(), decoder.buffered_bytes(), unsent(), read_closed || fatal.has_value(), closing};
  }
};

Server::Server(Identify identify, Handler handler, const Clock& clock, ServerLimits limits)
    : identify_(std::move(identify)),
      handler_(std::move(handler)),
      clock_(clock),
      limits_(limits),
      budget_(limits),
      spare_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

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
  // The socket's directory gets the socket's reach only when the daemon made it: an existing
  // one (/tmp, /run, a user's runtime directory) keeps its owner's mode. Changing it once
  // turned a root daemon given --socket /tmp/x.sock into a machine whose /tmp was 0755.
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && std::filesystem::create_directories(parent, ec)) {
    chmod(parent.c_str(), shared ? 0755 : 0700);
  }
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
  if (!fd) return MakeError(ErrorCode::kIo, std::string("socket: ") + ErrnoDescription(errno));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd.get(), 64) != 0) {
    int err = errno;
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "listen on " + path + ": " + ErrnoDescription(err));
  }
  chmod(path.c_str(), shared ? 0666 : 0600);
  listen_fd_ = std::move(fd);
  path_ = path;
  return {};
}

void Server::Refuse(UniqueFd fd, const std::string& message) {
  // Take what the client sent already (its hello), so that closing does not reset the
  // connection before it reads the one error reply.
  char drain[4096];
  while (recv(fd.get(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
  }
  const std::string frame =
      protocol::EncodeReplyFrame(MakeErrorReply(std::nullopt, WireError{WireCode::kUnavailable, message}));
  (void)send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd.get(), SHUT_WR);
}

void Server::Adopt(UniqueFd fd, Peer peer) {
  if (!fd) return;
  if (auto refusal = budget_.Admit(peer)) {
    Refuse(std::move(fd), *refusal);
    return;
  }
  auto c = std::make_unique<Connection>();
  c->peer = std::move(peer);
  c->last_activity_ms = clock_.NowUnixMs();
  const int raw = fd.get();
  c->fd = std::move(fd);
  clients_[raw] = std::move(c);
}

void Server::AcceptClients() {
  // A bounded number per call, so that a storm of connections cannot starve the clients
  // already served.
  for (int i = 0; i < 64; ++i) {
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_) {
        // Out of descriptors: free the spare, take the connection to tell it so, and close
        // it (otherwise the listening socket stays readable and poll spins).
        spare_fd_.reset();
        UniqueFd refused(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (refused) Refuse(std::move(refused), "the daemon has run out of file descriptors; try again later");
        spare_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
        continue;
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    Adopt(std::move(fd), identify_(cred.uid, cred.gid, cred.pid));
  }
}

void Server::AddPollFds(std::vector<pollfd>& fds) const {
  if (listen_fd_) fds.push_back({listen_fd_.get(), POLLIN, 0});
  for (const auto& [fd, c] : clients_) {
    short events = ShouldRead(c->flow(), limits_) ? POLLIN : 0;
    if (c->unsent() > 0) events |= POLLOUT;
    fds.push_back({fd, events, 0});
  }
}

Server::Clients::iterator Server::Close(Clients::iterator it) {
  budget_.Release(it->second->peer.uid);
  if (last_served_fd_ == it->first) last_served_fd_ = -1;
  return clients_.erase(it);
}

bool Server::OnReady(const pollfd& ready) {
  if (listen_fd_ && ready.fd == listen_fd_.get()) {
    AcceptClients();
    return true;
  }
  auto it = clients_.find(ready.fd);
  if (it == clients_.end()) return false;
  Connection& c = *it->second;
  if (ready.revents & (POLLERR | POLLNVAL)) {
    Close(it);
    return true;
  }
  if ((ready.revents & (POLLIN | POLLHUP)) && ShouldRead(c.flow(), limits_)) ReadFrom(c);
  if ((ready.revents & POLLHUP) && !ShouldRead(c.flow(), limits_) && !c.read_closed) {
    // Hung up while the limits hold its input: nothing more will be read, and its
    // replies cannot be delivered.
    c.read_closed = true;
  }
  if ((ready.revents & POLLOUT) && !Flush(c)) c.broken = true;
  if (c.broken || Done(c)) Close(it);
  return true;
}

void Server::ReadFrom(Connection& c) {
  char buf[65536];
  size_t taken = 0;
  while (taken < limits_.read_bytes_per_turn && ShouldRead(c.flow(), limits_)) {
    ssize_t n = read(c.fd.get(), buf, sizeof buf);
    if (n > 0) {
      if (c.decoder.at_frame_boundary()) c.frame_started_ms = clock_.NowUnixMs();
      c.last_activity_ms = clock_.NowUnixMs();
      (void)c.decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
      taken += static_cast<size_t>(n);
      TakeFrames(c);
      continue;
    }
    if (n == 0) {
      c.read_closed = true;  // the client closed, or shut its side after its requests
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.broken = true;
    return;
  }
}

void Server::TakeFrames(Connection& c) {
  while (!c.fatal && c.queued.size() < limits_.max_queued_requests) {
    auto frame = c.decoder.Next();
    if (!frame) {
      // Oversized or zero-length frame: the stream cannot be trusted any more. Answered
      // once the requests before it are.
      c.fatal = WireError{c.decoder.error_code().value_or(WireCode::kBadMessage), frame.error().message};
      return;
    }
    if (!*frame) return;
    c.queued.push_back(std::move(**frame));
  }
}

void Server::Answer(Connection& c, const std::string& payload) {
  auto parsed = protocol::ParseRequest(payload);
  if (auto* err = std::get_if<protocol::RequestError>(&parsed)) {
    c.out += protocol::EncodeReplyFrame(MakeErrorReply(*err));
    return;
  }
  const auto& request = std::get<protocol::Request>(parsed);
  if (!c.said_hello && request.op() != protocol::Op::kHello) {
    c.out += protocol::EncodeReplyFrame(
        MakeErrorReply(request.id, WireError{WireCode::kHelloRequired, "say hello first"}));
    c.closing = true;
    c.queued.clear();
    return;
  }
  protocol::Reply reply = handler_(c.peer, request);
  if (request.op() == protocol::Op::kHello && reply.ok()) c.said_hello = true;
  c.out += protocol::EncodeReplyFrame(reply);
}

bool Server::Flush(Connection& c) {
  while (c.unsent() > 0) {
    ssize_t w = send(c.fd.get(), c.out.data() + c.out_sent, c.unsent(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out_sent += static_cast<size_t>(w);
      c.last_activity_ms = clock_.NowUnixMs();
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent > (1u << 20) && c.out_sent * 2 > c.out.size()) {
    c.out.erase(0, c.out_sent);
    c.out_sent = 0;
  }
  return true;
}

bool Server::Done(const Connection& c) const {
  if (c.unsent() > 0) return false;
  if (c.closing) return true;
  // End of stream: every whole request that came is answered and sent (a framing error
  // after them still gets its reply first).
  return c.read_closed && c.queued.empty() && !c.fatal;
}

bool Server::has_pending_work() const {
  for (const auto& [fd, c] : clients_) {
    if (c->closing) continue;
    if ((!c->queued.empty() || c->fatal) && c->unsent() < limits_.max_unsent_bytes) return true;
  }
  return false;
}

void Server::ServeTurn() {
  if (clients_.empty()) return;
  // Round-robin: start after the connection served first last time.
  auto it = clients_.upper_bound(last_served_fd_);
  if (it == clients_.end()) it = clients_.begin();
  const int first = it->first;
  last_served_fd_ = first;
  std::vector<int> visit;
  visit.reserve(clients_.size());
  for (auto v = it; v != clients_.end(); ++v) visit.push_back(v->first);
  for (auto v = clients_.begin(); v != it; ++v) visit.push_back(v->first);
  for (int fd : visit) {
    auto found = clients_.find(fd);
    if (found == clients_.end()) continue;
    Connection& c = *found->second;
    const auto turn_start = std::chrono::steady_clock::now();
    for (size_t n = 0; n < limits_.requests_per_turn && !c.closing && !c.queued.empty() &&
                       c.unsent() < limits_.max_unsent_bytes;
         ++n) {
      if (n > 0 && std::chrono::steady_clock::now() - turn_start > std::chrono::microseconds(limits_.turn_budget_us)) break;
      std::string payload = std::move(c.queued.front());
      c.queued.pop_front();
      Answer(c, payload);
      TakeFrames(c);  // refill from what was read but not yet taken
    }
    if (c.queued.empty() && c.fatal && !c.closing) {
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(std::nullopt, *c.fatal));
      c.closing = true;
    }
    if (c.unsent() > 0 && !Flush(c)) c.broken = true;
    if (c.broken || Done(c)) Close(found);
  }
}

void Server::CloseStale(int64_t now_unix_ms) {
  for (auto it = clients_.begin(); it != clients_.end();) {
    Connection& c = *it->second;
    // A partial frame counts only while the server reads from it: while the limits hold
    // the rest back its clock starts again, so the client has the whole limit once
    // reading resumes.
    const bool reading = ShouldRead(c.flow(), limits_);
    if (!reading) c.frame_started_ms = now_unix_ms;
    const bool stale = now_unix_ms - c.last_activity_ms > limits_.idle_timeout_ms ||
                       (!c.decoder.at_frame_boundary() && reading &&
                        now_unix_ms - c.frame_started_ms > limits_.partial_frame_ms);
    it = stale ? Close(it) : std::next(it);
  }
}

}  // namespace gpuman::daemon
