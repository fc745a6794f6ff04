// MetricsServer: the HTTP endpoint Prometheus scrapes. cpp-httplib runs in its own thread
// and serves whatever text the daemon last handed over with SetText(); it never touches
// NVML or the state db, so a slow or hostile scraper cannot stall the daemon's loop.
// The httplib part lives in a module (gpuman-metrics-http.so, http_module/) loaded on
// Start(), so that commands other than `daemon --metrics` never load OpenSSL & co.
// Start, SetText and the destructor may be called from any one owning thread.
#pragma once

#include <memory>
#include <string>

#include "base/installed_layout.h"
#include "base/result.h"
#include "metrics/listen_address.h"

namespace gpuman::metrics {

class MetricsServer {
 public:
  /// Parses `address` (see ParseListenAddress), binds it and starts serving:
  ///   GET /metrics  200, `text/plain; version=0.0.4; charset=utf-8`, the last SetText();
  ///                 503 until the first SetText()
  ///   anything else 404
  /// The socket is bound without SO_REUSEPORT, so a port another process listens on is an
  /// error rather than a silently shared port.
  /// Errors: kInvalidArgument (bad address), kConflict (address in use),
  /// kPermissionDenied (privileged port), kIo (other bind or thread failures).
  /// kUnavailable when the module cannot be found or loaded (one line naming the missing
  /// file or library and its Debian package, base/module.h). The module
  /// (gpuman-metrics-http.so) is looked for in layout.module_dirs, in order.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& address, const InstalledLayout& layout);

  /// What the next scrape of /metrics returns. Thread-safe.
  void SetText(std::string text);

  /// The bound port (the kernel's choice when the address asked for port 0).
  int port() const;
  /// The bound address, e.g. "127.0.0.1:9400" or "[::1]:41235".
  std::string address() const;

  /// Stops the server thread (in-flight requests are finished or cut off).
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuman::metrics
