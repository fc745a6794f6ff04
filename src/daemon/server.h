// The daemon's socket server: the listening Unix socket, accepted connections with their
// SO_PEERCRED identity, framing, the hello-first rule, and the limits that keep every
// client served: connection caps per user and in all (root and the admin group keep a
// reserve), per-connection bounds on queued requests and unsent reply bytes (backpressure:
// a client that does not read its replies is not read from), and round-robin service, a
// few requests per connection per turn, so that one client's flood cannot hold up
// another's request. It knows nothing about operations: each request goes to the handler
// it was given (Daemon::Handle). The daemon's poll loop drives it (AddPollFds, OnReady,
// ServeTurn, CloseStale) from its one thread.
#pragma once

#include <poll.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "daemon/access.h"
#include "protocol/envelope.h"

namespace gpuman::daemon {

struct ServerLimits {
  size_t max_clients = 1024;           // connections of everyone together
  size_t admin_reserve = 64;           // of max_clients, only root and the admin group may use these
  size_t max_clients_per_user = 64;    // connections of one uid (root: only max_clients)
  size_t max_queued_requests = 32;     // per connection: received and not yet answered
  size_t max_unsent_bytes = 4 << 20;   // per connection: replies it has not read; beyond, it is not read from
  size_t requests_per_turn = 4;        // per connection in one ServeTurn, at most
  int64_t turn_budget_us = 1000;       // and no more once this much time went on it (one at least)
  size_t read_bytes_per_turn = 64 << 10;  // per connection in one OnReady
  int64_t idle_timeout_ms = 120000;    // a connection that says nothing this long goes
  int64_t partial_frame_ms = 10000;    // a frame must arrive within this once begun
};

/// Counts connections per uid and decides whether one more may join (the caps of
/// ServerLimits). Pure; one thread.
class ConnectionBudget {
 public:
  explicit ConnectionBudget(const ServerLimits& limits) : limits_(limits) {}
  /// Counts `peer` in and returns nullopt, or returns the refusal's message
  /// ("too many connections from user alice (limit 64)") and counts nothing.
  std::optional<std::string> Admit(const Peer& peer);
  /// One connection of `uid` went.
  void Release(uint32_t uid);
  size_t total() const { return total_; }
  size_t of(uint32_t uid) const;

 private:
  ServerLimits limits_;
  size_t total_ = 0;
  std::map<uint32_t, size_t> by_uid_;
};

/// Where one connection stands, for the read decision below.
struct FlowState {
  size_t queued_requests = 0;  // whole requests received, not yet handled
  size_t buffered_input = 0;   // bytes of a request still arriving
  size_t unsent_bytes = 0;     // replies not yet taken by the client
  bool read_closed = false;    // the client shut its sending side (or closed)
  bool closing = false;        // the server closes it once its replies are out
};
/// Whether the server reads more from a connection: not when it has enough requests
/// queued, a whole frame's worth of bytes buffered, or replies it does not read.
bool ShouldRead(const FlowState& flow, const ServerLimits& limits);

class Server {
 public:
  using Handler = std::function<protocol::Reply(const Peer&, const protocol::Request&)>;
  /// Turns the kernel's uid, gid and pid of a new connection into a Peer.
  using Identify = std::function<Peer(uint32_t uid, uint32_t gid, int32_t pid)>;

  Server(Identify identify, Handler handler, const Clock& clock, ServerLimits limits = {});
  /// Closes every connection; removes the socket file if Listen() bound it.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds and listens on `path`, creating its directory. Never replaces the socket of a
  /// server that still answers there (a stale socket file is replaced). `shared`: the
  /// directory is 0755 and the socket 0666 (every request is still authorised by the
  /// peer's uid); otherwise 0700 and 0600.
  /// Socket activation: when systemd passed a listening Unix socket ($LISTEN_PID is this
  /// process, $LISTEN_FDS >= 1), fd 3 is served instead and `path` is left alone (systemd
  /// owns the file); the LISTEN_* variables are removed either way.
  /// Errors: kInvalidArgument (path too long), kConflict (a live server answers),
  /// kPermissionDenied, kIo.
  Status Listen(const std::string& path, bool shared);

  /// Serves an already connected socket as if accepted from a caller `peer` (tests use
  /// a socketpair). Beyond the caps it gets the refusal reply and is closed, as an
  /// accepted one would.
  void Adopt(UniqueFd fd, Peer peer);

  /// Appends the listening socket and every connection, with the events each waits for
  /// (no POLLIN for a connection the limits stop reading from).
  void AddPollFds(std::vector<pollfd>& fds) const;
  /// Handles poll's answer for one fd: accepts, reads (a bounded amount) or sends; never
  /// runs the handler. Returns false when the fd is not the server's.
  bool OnReady(const pollfd& ready);
  /// Answers queued requests, at most requests_per_turn per connection, round-robin,
  /// sends what it can and closes connections that are done.
  void ServeTurn();
  /// Whether ServeTurn has requests to answer now (the poll loop should not sleep).
  bool has_pending_work() const;
  /// Closes connections idle longer than idle_timeout_ms or stuck inside a frame longer
  /// than partial_frame_ms.
  void CloseStale(int64_t now_unix_ms);

  size_t client_count() const { return clients_.size(); }
  const ConnectionBudget& budget() const { return budget_; }

 private:
  struct Connection;
  using Clients = std::map<int, std::unique_ptr<Connection>>;
  void AcceptClients();
  void Refuse(UniqueFd fd, const std::string& message);
  void ReadFrom(Connection& c);
  void TakeFrames(Connection& c);
  void Answer(Connection& c, const std::string& payload);
  bool Flush(Connection& c);  // false: the connection broke
  bool Done(const Connection& c) const;
  Clients::iterator Close(Clients::iterator it);

  Identify identify_;
  Handler handler_;
  const Clock& clock_;
  ServerLimits limits_;
  ConnectionBudget budget_;
  std::string path_;  // bound by Listen(); removed on destruction (empty when inherited)
  UniqueFd listen_fd_;
  UniqueFd spare_fd_;  // given up for a moment to accept and refuse when fds run out
  Clients clients_;
  int last_served_fd_ = -1;  // round-robin: the next turn starts after it
};

}  // namespace gpuman::daemon
