// DaemonClient: one connection to `gpuman daemon` over its Unix socket, hello included.
// Used by the queue commands; main thread only.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "protocol/envelope.h"

namespace gpuman::cli {

class DaemonClient {
 public:
  /// Connects and says hello. Errors: kUnavailable when no daemon answers at `socket_path`
  /// (the message says how to start one); errors from the hello.
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
/// exists, else the system daemon's /run/gpuman/gpuman.sock.
std::string FindDaemonSocket(const std::map<std::string, std::string>& env);

}  // namespace gpuman::cli
