// The /metrics HTTP server proper, built as a loadable module (gpuman-metrics-http.so)
// that only `gpuman daemon --metrics` dlopen()s. cpp-httplib's shared library pulls in
// OpenSSL, zlib and brotli; linked into gpuman itself they cost every command ~9 ms of
// start-up on our machines (status went from 8.8 to 22 ms). Plain C entry points, so the
// loader in server.cc needs no C++ ABI agreement beyond the C calling convention.
#include <fcntl.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <httplib.h>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

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

struct Server {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> loop_returned{false};
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

}  // namespace

extern "C" __attribute__((visibility("default"))) void* gpuman_metrics_http_start(const char* host, int port,
                                                                                   int* bound_port, int* error) {
  *error = 0;
  std::unique_ptr<Server> s;
  try {
    s = std::make_unique<Server>();
  } catch (...) {
    *error = ENOMEM;
    return nullptr;
  }
  Server* raw = s.get();
  httplib::Server& server = s->server;
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
  errno = 0;
  bool bound = false;
  if (port == 0) {
    port = server.bind_to_any_port(host);
    bound = port > 0;
  } else {
    bound = server.bind_to_port(host, port);
  }
  if (!bound) {
    *error = errno ? errno : EIO;
    return nullptr;
  }
  *bound_port = port;
  try {
    s->thread = std::thread([raw] {
      raw->server.listen_after_bind();
      raw->loop_returned = true;
    });
  } catch (...) {
    *error = EAGAIN;
    return nullptr;
  }
  return s.release();
}

extern "C" __attribute__((visibility("default"))) void gpuman_metrics_http_set_text(void* handle, const char* data,
                                                                                    size_t size) {
  auto* s = static_cast<Server*>(handle);
  auto shared = std::make_shared<const std::string>(data, size);
  std::lock_guard<std::mutex> lock(s->mu);
  s->text = std::move(shared);
}

extern "C" __attribute__((visibility("default"))) void gpuman_metrics_http_stop(void* handle) {
  auto* s = static_cast<Server*>(handle);
  s->Stop();
  delete s;
}
