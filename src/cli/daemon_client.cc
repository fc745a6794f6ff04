#include "cli/daemon_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "cli/socket_trust.h"
#include "daemon/daemon.h"
#include "protocol/framing.h"

namespace gpuman::cli {

std::string FindDaemonSocket(const std::map<std::string, std::string>& env) {
  auto it = env.find("GPUMAN_SOCKET");
  if (it != env.end() && !it->second.empty()) return it->second;
  if (getuid() != 0) {
    std::string user = daemon::DefaultSocketPath(false, env);
    if (access(user.c_str(), F_OK) == 0) return user;
  }
  return daemon::DefaultSocketPath(true, env);
}

Result<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const std::string& socket_path) {
  const uint32_t my_uid = getuid();
  // Before anything is sent: whose socket is it (docs/protocol.md, "Which daemon a client trusts").
  if (auto trusted = CheckSocketTrust(socket_path, my_uid); !trusted) return trusted.error();
  std::unique_ptr<DaemonClient> client(new DaemonClient());
  client->path_ = socket_path;
  client->fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  if (client->fd_ < 0 || connect(client->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return MakeError(ErrorCode::kUnavailable, "no gpuman daemon at " + socket_path + ": " + std::strerror(errno) +
                                                  " (start one with `gpuman daemon`, or set GPUMAN_SOCKET)");
  }
  // And who answers: the kernel's word for the listening process, not the hello's.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(client->fd_, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    return MakeError(ErrorCode::kIo, "daemon socket " + socket_path + ": SO_PEERCRED: " + std::strerror(errno));
  }
  if (auto trusted = CheckPeerTrust(socket_path, peer.uid, my_uid); !trusted) return trusted.error();
  protocol::HelloArgs hello;
  hello.client = "gpuman";
  auto result = client->Call<protocol::HelloResult>(hello);
  if (!result) return result.error();
  client->uid_ = result->uid;
  return client;
}

DaemonClient::~DaemonClient() {
  if (fd_ >= 0) close(fd_);
}

Result<protocol::Reply> DaemonClient::RoundTrip(protocol::RequestArgs args) {
  protocol::Request request{next_id_++, std::move(args)};
  auto frame = protocol::EncodeRequestFrame(request);
  if (!frame) return frame.error();
  const std::string& out = *frame;
  bool send_failed = false;
  for (size_t sent = 0; sent < out.size();) {
    ssize_t w = send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
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
    if (!next) return MakeError(ErrorCode::kUnavailable, "bad reply from the daemon: " + next.error().message);
    if (*next) {
      auto reply = protocol::ParseReply(**next);
      if (!reply) return MakeError(ErrorCode::kUnavailable, "bad reply from the daemon: " + reply.error().message);
      return *reply;
    }
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 && send_failed) return MakeError(ErrorCode::kUnavailable, "lost the connection to the daemon at " + path_);
    if (n <= 0) return MakeError(ErrorCode::kUnavailable, "the daemon at " + path_ + " closed the connection");
    (void)decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace gpuman::cli
