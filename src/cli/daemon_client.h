// DaemonClient: one connection to `gpuman daemon` over its Unix socket, hello included.
// Used by the queue commands; main thread only.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "base/result.h"
#include "protocol/envelope.h"

namespace gpuman::cli {

class DaemonClient {
 public:
  /// Connects and says hello, to a daemon of root or of the calling user only: the socket
  /// and its directory must pass CheckSocketTrust before connect(2), and the listening
  /// process's SO_PEERCRED uid must pass CheckPeerTrust before the hello is sent.
  /// Errors: kPermissionDenied when either check refuses (one line naming the path and
  /// its owner); kUnavailable when no daemon answers at `socket_path` (the message says
  /// how to start one); errors from the hello.
  static Result<std::unique_ptr<DaemonClient>> Connect(const std::string& socket_path);
  ~DaemonClient();

  /// Sends one request and waits for its reply (errors inside the reply are returned as
  /// Error). Errors: kUnavailable when the connection breaks.
  template <typename Result_, typename Args>
  Result<Result_> Call(const Args& args) {
    auto reply = RoundTrip(protocol::RequestArgs(args));
    if (!reply) return reply.error();
    return protocol::ResultOf<Result_>(*reply);
  }

  uint32_t uid() const { return uid_; }

 private:
  DaemonClient() = default;
  Result<protocol::Reply> RoundTrip(protocol::RequestArgs args);
  int fd_ = -1;
  int64_t next_id_ = 1;
  uint32_t uid_ = 0;
  std::string path_;
};

/// Where the daemon's socket is: $GPUMAN_SOCKET, else the user daemon's socket when it
/// exists, else the system daemon's /run/gpuman/gpuman.sock. Whether to trust it is
/// Connect's business: a user socket that exists but is not trusted is returned, so the
/// refusal is said rather than silently passed over.
std::string FindDaemonSocket(const std::map<std::string, std::string>& env);

}  // namespace gpuman::cli
