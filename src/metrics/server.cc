#include "metrics/server.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <httplib.h>
#include <mutex>
#include <thread>

namespace gpuman::metrics {
namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// httplib's default sets SO_REUSEPORT, which lets a second process bind the same port and
// share the traffic: two daemons would answer scrapes in turn. SO_REUSEADDR only allows a
// restart over connections in TIME_WAIT. CLOEXEC keeps the port out of job processes.
void ListenSocketOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  fcntl(sock, F_SETFD, FD_CLOEXEC);
}

}  // namespace

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> loop_returned{false};
  ListenAddress bound;
  std::mutex mu;
  std::shared_ptr<const std::string> text;  // guarded by mu; null until the first SetText

  // httplib's stop() only acts once its accept loop runs, so wait for that (or its end).
  void Stop() {
    if (!thread.joinable()) return;
    while (!loop_returned && !server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server.stop();
    thread.join();
  }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { impl_->Stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address) {
  Result<ListenAddress> parsed = ParseListenAddress(address);
  if (!parsed) return parsed.error();
  auto impl = std::make_unique<Impl>();
  Impl* raw = impl.get();
  httplib::Server& server = impl->server;
  // One scrape at a time is plenty; httplib's default is a pool of 8+ threads.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.set_socket_options(ListenSocketOptions);
  // One request per connection: httplib polls idle keep-alive connections every few ms
  // and would hold stop() up for the keep-alive timeout.
  server.set_keep_alive_max_count(1);
  server.set_keep_alive_timeout(2);
  server.set_read_timeout(2, 0);
  server.set_write_timeout(5, 0);
  server.Get("/metrics", [raw](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<const std::string> text;
    {
      std::lock_guard<std::mutex> lock(raw->mu);
      text = raw->text;
    }
    if (!text) {
      res.status = 503;
      res.set_content("gpuman: metrics not collected yet\n", "text/plain; charset=utf-8");
      return;
    }
    res.set_content(*text, kContentType);
  });

  auto fail = [&](ErrorCode code, const std::string& why) -> Error {
    return MakeError(code, "metrics address '" + address + "': " + why);
  };
  errno = 0;
  int port = parsed->port;
  bool bound = false;
  if (port == 0) {
    port = server.bind_to_any_port(parsed->host);
    bound = port > 0;
  } else {
    bound = server.bind_to_port(parsed->host, port);
  }
  int err = errno;
  if (!bound) {
    if (err == EADDRINUSE) return fail(ErrorCode::kConflict, "address already in use");
    if (err == EACCES) return fail(ErrorCode::kPermissionDenied, "permission denied");
    return fail(ErrorCode::kIo, err ? std::string("cannot listen: ") + std::strerror(err) : "cannot listen");
  }
  impl->bound = ListenAddress{parsed->host, port};
  try {
    impl->thread = std::thread([raw] {
      raw->server.listen_after_bind();
      raw->loop_returned = true;
    });
  } catch (const std::system_error& e) {
    return fail(ErrorCode::kIo, std::string("cannot start a thread: ") + e.what());
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

void MetricsServer::SetText(std::string text) {
  auto shared = std::make_shared<const std::string>(std::move(text));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->text = std::move(shared);
}

int MetricsServer::port() const { return impl_->bound.port; }

std::string MetricsServer::address() const { return impl_->bound.ToString(); }

}  // namespace gpuman::metrics
