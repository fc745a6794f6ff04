// The daemon's socket server: the listening Unix socket, accepted connections with their
// SO_PEERCRED identity, framing, the hello-first rule, and the limits that keep slow or
// silent clients from holding a slot. It knows nothing about operations: each request
// goes to the handler it was given (Daemon::Handle). The daemon's poll loop drives it
// (AddPollFds, OnReady, CloseStale) from its one thread.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "daemon/access.h"
#include "protocol/envelope.h"

namespace gpuman::daemon {

struct ServerLimits {
  size_t max_clients = 256;
  int64_t idle_timeout_ms = 120000;     // a connection that says nothing this long goes
  int64_t partial_frame_ms = 10000;     // a frame must arrive within this once begun
  size_t max_output_buffer = 8 << 20;   // a client that does not read its replies goes
};

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
  /// a socketpair). Closed (and not added) beyond max_clients.
  void Adopt(UniqueFd fd, Peer peer);

  /// Appends the listening socket and every connection, with the events each waits for.
  void AddPollFds(std::vector<pollfd>& fds) const;
  /// Handles poll's answer for one fd. Returns false when the fd is not the server's.
  bool OnReady(const pollfd& ready);
  /// Closes connections idle longer than idle_timeout_ms or stuck inside a frame longer
  /// than partial_frame_ms.
  void CloseStale(int64_t now_unix_ms);

  size_t client_count() const { return clients_.size(); }

 private:
  struct Connection;
  void AcceptClients();
  bool Serve(Connection& c);  // false: close it

  Identify identify_;
  Handler handler_;
  const Clock& clock_;
  ServerLimits limits_;
  std::string path_;  // bound by Listen(); removed on destruction (empty when inherited)
  UniqueFd listen_fd_;
  std::map<int, std::unique_ptr<Connection>> clients_;
};

}  // namespace gpuman::daemon
