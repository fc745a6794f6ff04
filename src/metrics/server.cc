#include "metrics/server.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/module.h"
#include "base/posix_error.h"

namespace gpuman::metrics {
namespace {

constexpr const char* kModuleName = "gpuman-metrics-http.so";
#ifndef GPUMAN_METRICS_HTTP_PACKAGE
#define GPUMAN_METRICS_HTTP_PACKAGE "libcpp-httplib"  // CMakeLists.txt names the Debian package
#endif

using StartFn = void* (*)(const char* host, int port, int* bound_port, int* error);
using SetTextFn = void (*)(void* handle, const char* data, size_t size);
using StopFn = void (*)(void* handle);

}  // namespace

struct MetricsServer::Impl {
  void* module = nullptr;
  void* handle = nullptr;
  SetTextFn set_text = nullptr;
  StopFn stop = nullptr;
  ListenAddress bound;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  if (impl_->handle) impl_->stop(impl_->handle);
  // The module stays loaded: its threads are joined, but unloading C++ code that
  // registered static destructors is not worth the risk for one process-lifetime server.
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                            const InstalledLayout& layout) {
  Result<ListenAddress> parsed = ParseListenAddress(address);
  if (!parsed) return parsed.error();
  auto fail = [&](ErrorCode code, const std::string& why) -> Error {
    return MakeError(code, "metrics address '" + address + "': " + why);
  };

  auto impl = std::make_unique<Impl>();
  // Relative to the running binary only (InstalledLayout), never a compiled-in path, so
  // an installed gpuman works wherever its prefix is and holds no build-tree path.
  auto module = OpenModule(layout.ModulePaths(kModuleName),
                           {kModuleName, "the metrics endpoint", GPUMAN_METRICS_HTTP_PACKAGE});
  if (!module) return module.error();
  impl->module = *module;
  auto start = reinterpret_cast<StartFn>(dlsym(impl->module, "gpuman_metrics_http_start"));
  impl->set_text = reinterpret_cast<SetTextFn>(dlsym(impl->module, "gpuman_metrics_http_set_text"));
  impl->stop = reinterpret_cast<StopFn>(dlsym(impl->module, "gpuman_metrics_http_stop"));
  if (!start || !impl->set_text || !impl->stop) {
    return fail(ErrorCode::kUnavailable, std::string(kModuleName) + " lacks its entry points");
  }
  int port = 0, err = 0;
  impl->handle = start(parsed->host.c_str(), parsed->port, &port, &err);
  if (!impl->handle) {
    if (err == EADDRINUSE) return fail(ErrorCode::kConflict, "address already in use");
    if (err == EACCES) return fail(ErrorCode::kPermissionDenied, "permission denied");
    return fail(ErrorCode::kIo, std::string("cannot listen: ") + ErrnoDescription(err));
  }
  impl->bound = ListenAddress{parsed->host, port};
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

void MetricsServer::SetText(std::string text) { impl_->set_text(impl_->handle, text.data(), text.size()); }

int MetricsServer::port() const { return impl_->bound.port; }

std::string MetricsServer::address() const { return impl_->bound.ToString(); }

}  // namespace gpuman::metrics
