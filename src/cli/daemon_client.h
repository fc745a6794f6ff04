// DaemonClient: one connection to `gpuman daemon` over its Unix socket, hello included.
// Used by the queue commands; main thread only (top: its sampler thread only).
//
// Reconnector: the one reconnect loop of the clients that follow something over time
// (`wait`, `logs -f`, `top`, `run --wait` through the daemon). Time is passed in (a
// Clock and a sleep function), so it is unit-testable with a fake clock. docs/cli.md,
// "When the daemon restarts".
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "protocol/envelope.h"

namespace gpuman::cli {

struct ReconnectOptions {
  int64_t timeout_ms = 60000;     // [client] reconnect_timeout: give up after this long
  int64_t first_delay_ms = 100;   // the first retry waits this long; each next one twice as long
  int64_t max_delay_ms = 2000;    // ... up to this
};

/// "60s", "2.5s", "500ms": how the reconnect notes name a timeout.
std::string FormatReconnectTimeout(int64_t ms);

class Reconnector {
 public:
  using Sleep = std::function<void(int64_t ms)>;
  using Say = std::function<void(const std::string& line)>;
  enum class Step { kReconnected, kRetry, kGaveUp };

  /// `say` gets whole lines without the newline; `sleep` waits (a fake one moves a fake clock).
  Reconnector(ReconnectOptions options, const Clock& clock, Sleep sleep, Say say);

  /// Blocking: after a lost connection, calls `connect` with backoff until it succeeds, fails
  /// with something other than kUnavailable (a daemon that refuses us is not coming back),
  /// or the timeout has passed since the loss. Says "gpuman: lost the daemon; reconnecting
  /// for up to 60s..." once at the start and "gpuman: reconnected" on success.
  /// Errors: kUnavailable "lost the daemon and it did not come back within 60s: <last>";
  /// connect's errors other than kUnavailable.
  Status Recover(const std::function<Status()>& connect);

  // Step-wise, for a loop that keeps doing other work meanwhile (top's sampler); says nothing.
  /// Starts an outage now (nothing when one is already under way).
  void Lost();
  bool lost() const { return lost_since_ms_ >= 0; }
  /// Whether the next attempt is due (always, outside an outage).
  bool Due() const;
  /// Records one attempt's result: kReconnected (the outage is over), kRetry (try again once
  /// Due()), kGaveUp (the timeout has passed, or a lasting refusal; last_error() says which).
  Step Record(const Status& attempt);
  const Error& last_error() const { return last_error_; }
  /// The wait before the next attempt (the backoff in force).
  int64_t delay_ms() const { return delay_ms_; }
  const ReconnectOptions& options() const { return options_; }

 private:
  ReconnectOptions options_;
  const Clock& clock_;
  Sleep sleep_;
  Say say_;
  int64_t lost_since_ms_ = -1;
  int64_t next_attempt_ms_ = 0;
  int64_t delay_ms_ = 0;
  Error last_error_{ErrorCode::kUnavailable, ""};
};

class DaemonClient {
 public:
  /// Connects and says hello, to a daemon of root or of the calling user only: the socket
  /// and its directory must pass CheckSocketTrust before connect(2), and the listening
  /// process's SO_PEERCRED uid must pass CheckPeerTrust before the hello is sent.
  /// Errors: kPermissionDenied when either check refuses (one line naming the path and
  /// its owner); kUnavailable when no daemon answers at `socket_path` (the message says
  /// how to start one); errors from the hello. `lost_in_hello`, when given, is set to whether
  /// the connection was accepted and then lost before the hello's reply (a daemon that was
  /// stopping), as against refused or answered with an error.
  static Result<std::unique_ptr<DaemonClient>> Connect(const std::string& socket_path, bool* lost_in_hello = nullptr);
  ~DaemonClient();

  /// Sends one request and waits for its reply (errors inside the reply are returned as
  /// Error). Errors: kUnavailable when the connection breaks (then broken() is true).
  template <typename Result_, typename Args>
  Result<Result_> Call(const Args& args) {
    auto reply = RoundTrip(protocol::RequestArgs(args));
    if (!reply) return reply.error();
    return protocol::ResultOf<Result_>(*reply);
  }

  /// Call for requests that are safe to send again (reads, and those a client following
  /// something repeats anyway): when the connection breaks, reconnects through the
  /// client's Reconnector (SetReconnect) and sends the request again on the new connection.
  /// Errors: Call's; Reconnector::Recover's when the daemon does not come back.
  template <typename Result_, typename Args>
  Result<Result_> CallResuming(const Args& args) {
    while (true) {
      auto result = Call<Result_>(args);
      if (result || !broken_) return result;
      if (Status back = Recover(); !back) return back.error();
    }
  }

  /// How CallResuming reconnects: the options, the clock, and where the two notes go.
  /// Without this call: 60 s on the system clock, notes on stderr.
  void SetReconnect(ReconnectOptions options, const Clock& clock, Reconnector::Say say);
  /// One blocking recovery (Reconnector::Recover with Reopen).
  Status Recover();
  /// Connects again to the same socket (trust checks and hello included), replacing the
  /// connection. Errors: Connect's.
  Status Reopen();
  /// The connection broke (send or read failed); cleared by a successful Reopen. A garbled
  /// reply is an error of its own (never resent), after which the connection is closed.
  bool broken() const { return broken_; }
  const ReconnectOptions& reconnect_options() const { return reconnector_->options(); }

  uint32_t uid() const { return uid_; }
  const std::string& path() const { return path_; }

 private:
  DaemonClient();
  Result<protocol::Reply> RoundTrip(protocol::RequestArgs args);
  Result<protocol::Reply> Lost(const std::string& why);     // the connection broke: broken()
  Result<protocol::Reply> Garbled(const std::string& why);  // a bad reply: closed, not resent
  UniqueFd fd_;
  int64_t next_id_ = 1;
  uint32_t uid_ = 0;
  bool broken_ = false;
  std::string path_;
  std::unique_ptr<Reconnector> reconnector_;
};

/// Where the daemon's socket is: $GPUMAN_SOCKET, else the user daemon's socket when it
/// exists and is trusted (CheckSocketTrust), else the system daemon's
/// /run/gpuman/gpuman.sock. A named socket is returned whatever it is: Connect refuses an
/// untrusted one hard. A default one that is not trusted (planted at /tmp/gpuman-<uid> by
/// another user) is skipped, and `skipped` gets the line that says so (issue 23): the
/// machine's daemon or lease table is used, not nothing.
std::string FindDaemonSocket(const std::map<std::string, std::string>& env, std::string* skipped = nullptr);

}  // namespace gpuman::cli
