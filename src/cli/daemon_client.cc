#include "cli/daemon_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/posix_error.h"
#include "cli/socket_trust.h"
#include "daemon/daemon.h"
#include "protocol/framing.h"

namespace gpuman::cli {

std::string FindDaemonSocket(const std::map<std::string, std::string>& env, std::string* skipped) {
  auto it = env.find("GPUMAN_SOCKET");
  if (it != env.end() && !it->second.empty()) return it->second;
  if (getuid() != 0) {
    std::string user = daemon::DefaultSocketPath(false, env);
    if (access(user.c_str(), F_OK) == 0) {
      auto trusted = CheckSocketTrust(user, getuid());
      if (trusted) return user;
      if (skipped) {
        std::string why = trusted.error().message;
        if (why.rfind("refusing ", 0) == 0) why = "skipping " + why.substr(9);
        *skipped = why + "; using the machine's daemon or lease table instead";
      }
    }
  }
  return daemon::DefaultSocketPath(true, env);
}

Result<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const std::string& socket_path, bool* lost_in_hello) {
  if (lost_in_hello != nullptr) *lost_in_hello = false;
  const uint32_t my_uid = getuid();
  // Before anything is sent: whose socket is it (docs/protocol.md, "Which daemon a client trusts").
  if (auto trusted = CheckSocketTrust(socket_path, my_uid); !trusted) return trusted.error();
  std::unique_ptr<DaemonClient> client(new DaemonClient());
  client->path_ = socket_path;
  client->fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  if (!client->fd_ || connect(client->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return MakeError(ErrorCode::kUnavailable, "no gpuman daemon at " + socket_path + ": " + ErrnoDescription(errno) +
                                                  " (" + NoDaemonAdvice() + ")");
  }
  // And who answers: the kernel's word for the listening process, not the hello's.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(client->fd_.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    return MakeError(ErrorCode::kIo, "daemon socket " + socket_path + ": SO_PEERCRED: " + ErrnoDescription(errno));
  }
  if (auto trusted = CheckPeerTrust(socket_path, peer.uid, my_uid); !trusted) return trusted.error();
  protocol::HelloArgs hello;
  hello.client = "gpuman";
  auto result = client->Call<protocol::HelloResult>(hello);
  if (!result) {
    if (lost_in_hello != nullptr) *lost_in_hello = client->broken_;
    return result.error();
  }
  client->uid_ = result->uid;
  return client;
}

std::string FormatReconnectTimeout(int64_t ms) {
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buf;
}

Reconnector::Reconnector(ReconnectOptions options, const Clock& clock, Sleep sleep, Say say)
    : options_(options), clock_(clock), sleep_(std::move(sleep)), say_(std::move(say)) {
  options_.first_delay_ms = std::max<int64_t>(options_.first_delay_ms, 1);
  options_.max_delay_ms = std::max(options_.max_delay_ms, options_.first_delay_ms);
  options_.timeout_ms = std::max<int64_t>(options_.timeout_ms, 0);
}

void Reconnector::Lost() {
  if (lost()) return;
  lost_since_ms_ = clock_.NowUnixMs();
  next_attempt_ms_ = lost_since_ms_;  // the first attempt at once: a daemon may be back already
  delay_ms_ = options_.first_delay_ms;
  last_error_ = Error{ErrorCode::kUnavailable, "the connection broke"};
}

bool Reconnector::Due() const { return !lost() || clock_.NowUnixMs() >= next_attempt_ms_; }

Reconnector::Step Reconnector::Record(const Status& attempt) {
  if (attempt) {
    lost_since_ms_ = -1;
    return Step::kReconnected;
  }
  last_error_ = attempt.error();
  if (last_error_.code != ErrorCode::kUnavailable) return Step::kGaveUp;
  const int64_t now = clock_.NowUnixMs();
  const int64_t deadline = lost_since_ms_ + options_.timeout_ms;
  if (now >= deadline) {
    last_error_ = Error{ErrorCode::kUnavailable, "lost the daemon and it did not come back within " +
                                                     FormatReconnectTimeout(options_.timeout_ms) + " (" +
                                                     attempt.error().message + ")"};
    return Step::kGaveUp;
  }
  // The last attempt falls on the deadline, so the whole time is used.
  next_attempt_ms_ = std::min(now + delay_ms_, deadline);
  delay_ms_ = std::min(delay_ms_ * 2, options_.max_delay_ms);
  return Step::kRetry;
}

Status Reconnector::Recover(const std::function<Status()>& connect) {
  Lost();
  say_("gpuman: lost the daemon; reconnecting for up to " + FormatReconnectTimeout(options_.timeout_ms) + "...");
  while (true) {
    const int64_t now = clock_.NowUnixMs();
    if (now < next_attempt_ms_) sleep_(next_attempt_ms_ - now);
    switch (Record(connect())) {
      case Step::kReconnected:
        say_("gpuman: reconnected");
        return {};
      case Step::kGaveUp:
        lost_since_ms_ = -1;  // the next loss is a new outage
        return last_error_;
      case Step::kRetry:
        break;
    }
  }
}

DaemonClient::DaemonClient() {
  static const SystemClock system_clock;
  SetReconnect(ReconnectOptions{}, system_clock, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
}

void DaemonClient::SetReconnect(ReconnectOptions options, const Clock& clock, Reconnector::Say say) {
  reconnector_ = std::make_unique<Reconnector>(
      options, clock, [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, std::move(say));
}

Status DaemonClient::Recover() {
  return reconnector_->Recover([this] { return Reopen(); });
}

Status DaemonClient::Reopen() {
  auto fresh = Connect(path_);
  if (!fresh) return fresh.error();
  fd_ = std::move((*fresh)->fd_);
  uid_ = (*fresh)->uid_;
  next_id_ = (*fresh)->next_id_;
  broken_ = false;
  return {};
}

Result<protocol::Reply> DaemonClient::Lost(const std::string& why) {
  broken_ = true;
  return MakeError(ErrorCode::kUnavailable, why);
}

Result<protocol::Reply> DaemonClient::Garbled(const std::string& why) {
  // Not a lost connection (sending the request again would get the same reply), but the
  // stream is out of step: the connection is closed, so a later request reconnects.
  fd_.reset();
  return MakeError(ErrorCode::kUnavailable, why);
}

DaemonClient::~DaemonClient() = default;

Result<protocol::Reply> DaemonClient::RoundTrip(protocol::RequestArgs args) {
  if (!fd_) return Lost("the connection to the daemon at " + path_ + " was closed");
  protocol::Request request{next_id_++, std::move(args)};
  auto frame = protocol::EncodeRequestFrame(request);
  if (!frame) return frame.error();
  const std::string& out = *frame;
  bool send_failed = false;
  for (size_t sent = 0; sent < out.size();) {
    ssize_t w = send(fd_.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      // The daemon may have answered before closing (a refused connection's one error
      // reply): read it rather than say only that the connection went.
      send_failed = true;
      break;
    }
    sent += static_cast<size_t>(w);
  }
  protocol::FrameDecoder decoder;
  char buf[65536];
  while (true) {
    auto next = decoder.Next();
    if (!next) return Garbled("bad reply from the daemon: " + next.error().message);
    if (*next) {
      auto reply = protocol::ParseReply(**next);
      if (!reply) return Garbled("bad reply from the daemon: " + reply.error().message);
      return std::move(*reply);  // not a copy of the reply's JSON
    }
    ssize_t n = read(fd_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 && send_failed) return Lost("lost the connection to the daemon at " + path_);
    if (n <= 0) return Lost("the daemon at " + path_ + " closed the connection");
    (void)decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace gpuman::cli
