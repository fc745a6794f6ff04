// The socket server over a socketpair: hello first, the peer it was given, and the limits
// on silent clients and half-sent frames.
#include "daemon/server.h"

#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace
}  // namespace gpuman::daemon
