// MetricsServer against a real loopback socket and httplib's client (port 0: the kernel
// picks a free port, so tests never collide).
#include "metrics/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

namespace gpuman::metrics {
namespace {

// The test binary's own layout: the module sits beside it in the build tree.
InstalledLayout Layout() { return InstalledLayout::ForExecutable(ReadExecutablePath()); }

std::unique_ptr<MetricsServer> StartOrFail(const std::string& address) {
  auto server = MetricsServer::Start(address, Layout());
  EXPECT_TRUE(server.has_value()) << server.error().message;
  return server.has_value() ? std::move(*server) : nullptr;
}

TEST(MetricsServer, ServesTheLastTextAtMetrics) {
  auto server = StartOrFail("127.0.0.1:0");
  ASSERT_TRUE(server);
  ASSERT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));
  httplib::Client client("127.0.0.1", server->port());
  client.set_connection_timeout(5);
  client.set_read_timeout(5);

  auto before = client.Get("/metrics");
  ASSERT_TRUE(before) << httplib::to_string(before.error());
  EXPECT_EQ(before->status, 503) << "nothing collected yet";

  server->SetText("# HELP a x\n# TYPE a gauge\na 1\n");
  auto first = client.Get("/metrics");
  ASSERT_TRUE(first) << httplib::to_string(first.error());
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->body, "# HELP a x\n# TYPE a gauge\na 1\n");
  EXPECT_EQ(first->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  server->SetText("# HELP a x\n# TYPE a gauge\na 2\n");
  auto second = client.Get("/metrics");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->body, "# HELP a x\n# TYPE a gauge\na 2\n");

  for (const char* path : {"/", "/metrics/", "/favicon.ico", "/debug"}) {
    auto other = client.Get(path);
    ASSERT_TRUE(other) << path;
    EXPECT_EQ(other->status, 404) << path;
  }
}

TEST(MetricsServer, ASecondServerOnTheSamePortFailsCleanly) {
  auto first = StartOrFail("127.0.0.1:0");
  ASSERT_TRUE(first);
  std::string address = "127.0.0.1:" + std::to_string(first->port());
  auto second = MetricsServer::Start(address, Layout());
  ASSERT_FALSE(second.has_value()) << "two servers share port " << first->port();
  EXPECT_EQ(second.error().code, ErrorCode::kConflict);
  EXPECT_EQ(second.error().message, "metrics address '" + address + "': address already in use");
  // The first one still serves.
  first->SetText("ok 1\n");
  httplib::Client client("127.0.0.1", first->port());
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok 1\n");
}

TEST(MetricsServer, PortIsFreeAgainAfterDestruction) {
  int port = 0;
  {
    auto server = StartOrFail("127.0.0.1:0");
    ASSERT_TRUE(server);
    port = server->port();
    server->SetText("x 1\n");
    httplib::Client client("127.0.0.1", port);
    ASSERT_TRUE(client.Get("/metrics"));  // leaves a connection in TIME_WAIT
  }
  auto again = StartOrFail("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->port(), port);
}

TEST(MetricsServer, Ipv6Loopback) {
  auto server = MetricsServer::Start("[::1]:0", Layout());
  if (!server.has_value()) GTEST_SKIP() << "no IPv6 loopback here: " << server.error().message;
  EXPECT_EQ((*server)->address(), "[::1]:" + std::to_string((*server)->port()));
  (*server)->SetText("v6 1\n");
  httplib::Client client("::1", (*server)->port());
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "v6 1\n");
}

TEST(MetricsServer, BadAddressesAreErrorValues) {
  auto bad = MetricsServer::Start("example.com:9400", Layout());
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  // An address this machine does not have (TEST-NET-1, RFC 5737).
  auto foreign = MetricsServer::Start("192.0.2.1:0", Layout());
  ASSERT_FALSE(foreign.has_value());
  EXPECT_EQ(foreign.error().message.rfind("metrics address '192.0.2.1:0': cannot listen", 0), 0u)
      << foreign.error().message;
}

TEST(MetricsServer, StopsPromptlyWithAClientConnected) {
  auto server = StartOrFail("127.0.0.1:0");
  ASSERT_TRUE(server);
  server->SetText("x 1\n");
  httplib::Client client("127.0.0.1", server->port());
  client.set_keep_alive(true);
  ASSERT_TRUE(client.Get("/metrics"));
  server.reset();  // must return (the test would hang otherwise)
  auto after = client.Get("/metrics");
  EXPECT_FALSE(after) << "still answering after destruction";
}

TEST(MetricsServer, MissingModuleIsAClearError) {
  InstalledLayout nowhere;
  nowhere.module_dirs = {"/nonexistent"};
  auto server = MetricsServer::Start("127.0.0.1:0", nowhere);
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(server.error().message,
            "the metrics endpoint needs gpuman-metrics-http.so, which is not installed (looked in "
            "/nonexistent/gpuman-metrics-http.so)");
}

}  // namespace
}  // namespace gpuman::metrics
