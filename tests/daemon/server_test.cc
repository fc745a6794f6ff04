// The socket server over a socketpair: hello first, the peer it was given, and the limits
// on silent clients and half-sent frames.
#include "daemon/server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "protocol/framing.h"

namespace gpuman::daemon {
namespace {

class SettableClock final : public Clock {
 public:
  int64_t NowUnixMs() const override { return now; }
  int64_t now = 1'000'000;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerLimits limits;
    limits.idle_timeout_ms = 1000;
    limits.partial_frame_ms = 100;
    limits.max_clients = 2;
    server_ = std::make_unique<Server>(
        [](uint32_t uid, uint32_t gid, int32_t pid) { return Peer{uid, gid, pid, "u", false}; },
        [this](const Peer& peer, const protocol::Request& request) {
          seen_.push_back({peer.uid, request.op()});
          return protocol::MakeReply(request.id, protocol::EmptyResult{});
        },
        clock_, limits);
  }

  // A connected client; the server holds the other end as a caller with `uid`.
  UniqueFd Connect(uint32_t uid) {
    int pair[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
    server_->Adopt(UniqueFd(pair[0]), Peer{uid, uid, 0, "u", false});
    return UniqueFd(pair[1]);
  }
  void Send(const UniqueFd& client, const std::string& bytes) {
    ASSERT_EQ(write(client.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    Pump();
  }
  void Pump() {
    std::vector<pollfd> fds;
    server_->AddPollFds(fds);
    for (auto& p : fds) {
      p.revents = POLLIN;
      EXPECT_TRUE(server_->OnReady(p));
    }
  }
  // Every reply the server has written to `client` so far.
  std::vector<protocol::Reply> Replies(const UniqueFd& client) {
    protocol::FrameDecoder decoder;
    char buf[65536];
    ssize_t n;
    while ((n = read(client.get(), buf, sizeof buf)) > 0) (void)decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    std::vector<protocol::Reply> out;
    while (true) {
      auto frame = decoder.Next();
      if (!frame || !*frame) break;
      auto reply = protocol::ParseReply(**frame);
      if (reply) out.push_back(*reply);
    }
    return out;
  }
  static bool ClosedByServer(const UniqueFd& client) {
    char c;
    return read(client.get(), &c, 1) == 0;
  }
  static std::string Frame(int64_t id, protocol::RequestArgs args) {
    auto frame = protocol::EncodeRequestFrame(protocol::Request{id, std::move(args)});
    return frame ? *frame : "";
  }

  SettableClock clock_;
  std::unique_ptr<Server> server_;
  std::vector<std::pair<uint32_t, protocol::Op>> seen_;
};

TEST_F(ServerTest, HelloFirstThenRequestsReachTheHandlerWithThePeer) {
  UniqueFd client = Connect(1234);
  Send(client, Frame(1, protocol::HelloArgs{}) + Frame(2, protocol::QueueArgs{}));
  auto replies = Replies(client);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_TRUE(replies[0].ok());
  EXPECT_EQ(replies[1].id, 2);
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(seen_[1], std::make_pair(1234u, protocol::Op::kQueue));
  EXPECT_EQ(server_->client_count(), 1u);
}

TEST_F(ServerTest, AnythingBeforeHelloIsRefusedAndCloses) {
  UniqueFd client = Connect(1);
  Send(client, Frame(7, protocol::QueueArgs{}));
  auto replies = Replies(client);
  ASSERT_EQ(replies.size(), 1u);
  ASSERT_TRUE(replies[0].error.has_value());
  EXPECT_EQ(replies[0].error->code, protocol::WireCode::kHelloRequired);
  EXPECT_TRUE(seen_.empty()) << "the handler never saw it";
  EXPECT_EQ(server_->client_count(), 0u);
  EXPECT_TRUE(ClosedByServer(client));
}

TEST_F(ServerTest, SilentAndHalfSentClientsAreClosed) {
  UniqueFd silent = Connect(1);
  UniqueFd half = Connect(2);
  std::string frame = Frame(1, protocol::HelloArgs{});
  Send(half, frame.substr(0, 3));
  clock_.now += 101;  // past the partial-frame limit, not yet idle
  server_->CloseStale(clock_.now);
  EXPECT_EQ(server_->client_count(), 1u);
  EXPECT_TRUE(ClosedByServer(half));
  clock_.now += 1000;
  server_->CloseStale(clock_.now);
  EXPECT_EQ(server_->client_count(), 0u);
  EXPECT_TRUE(ClosedByServer(silent));
}

TEST_F(ServerTest, ClientsBeyondTheLimitAreClosed) {
  UniqueFd a = Connect(1), b = Connect(2), c = Connect(3);
  EXPECT_EQ(server_->client_count(), 2u);
  EXPECT_TRUE(ClosedByServer(c));
}

TEST_F(ServerTest, ListenRefusesASocketThatStillAnswers) {
  char dir[] = "/tmp/gpuman-server-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/s.sock";
  ASSERT_TRUE(server_->Listen(path, false));
  Server second([](uint32_t, uint32_t, int32_t) { return Peer{}; },
                [](const Peer&, const protocol::Request& r) { return protocol::MakeReply(r.id, protocol::EmptyResult{}); },
                clock_);
  auto refused = second.Listen(path, false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  server_.reset();  // removes its socket file
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  rmdir(dir);
}

// Socket activation (sd_listen_fds protocol): with $LISTEN_PID == getpid() and
// $LISTEN_FDS >= 1, Listen serves fd 3, binds nothing at `path`, leaves the inherited
// socket file alone on destruction and removes the LISTEN_* variables.
TEST_F(ServerTest, ListenServesTheSocketSystemdPassed) {
  char dir[] = "/tmp/gpuman-server-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string activated = std::string(dir) + "/activated.sock";
  const std::string own = std::string(dir) + "/own.sock";
  UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, activated.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener.get(), 8), 0);
  // Put it at fd 3, keeping whatever this process had there.
  UniqueFd saved(fcntl(3, F_DUPFD_CLOEXEC, 10));
  ASSERT_EQ(dup2(listener.get(), 3), 3);
  setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
  setenv("LISTEN_FDS", "1", 1);
  setenv("LISTEN_FDNAMES", "gpuman.socket", 1);

  EXPECT_TRUE(server_->Listen(own, false));
  EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDNAMES"), nullptr);
  EXPECT_NE(access(own.c_str(), F_OK), 0) << "bound its own socket despite the inherited one";

  // A client of the activated path is accepted and served.
  UniqueFd client(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::vector<pollfd> fds;
  server_->AddPollFds(fds);
  ASSERT_EQ(fds.size(), 1u);
  EXPECT_EQ(fds[0].fd, 3);
  fds[0].revents = POLLIN;
  EXPECT_TRUE(server_->OnReady(fds[0]));
  fds.clear();
  server_->AddPollFds(fds);
  EXPECT_EQ(fds.size(), 2u) << "the connection was not accepted";

  server_.reset();  // closes fd 3, but the socket file is systemd's
  EXPECT_EQ(access(activated.c_str(), F_OK), 0);
  if (saved) dup2(saved.get(), 3);
  unlink(activated.c_str());
  rmdir(dir);
}

TEST_F(ServerTest, ListenIgnoresListenFdsMeantForAnotherProcess) {
  char dir[] = "/tmp/gpuman-server-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string own = std::string(dir) + "/own.sock";
  setenv("LISTEN_PID", std::to_string(getpid() + 1).c_str(), 1);
  setenv("LISTEN_FDS", "1", 1);
  EXPECT_TRUE(server_->Listen(own, false));
  EXPECT_EQ(access(own.c_str(), F_OK), 0) << "did not bind its own socket";
  EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
  server_.reset();
  rmdir(dir);
}

}  // namespace
}  // namespace gpuman::daemon
