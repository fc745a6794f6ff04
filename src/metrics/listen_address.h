// Where the metrics endpoint listens: parsing and validating "HOST:PORT" strings from the
// command line and the config file. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace gpuman::metrics {

/// The address `gpuman daemon --metrics` uses when none is given (and the config default).
inline constexpr const char* kDefaultMetricsAddress = "127.0.0.1:9400";

struct ListenAddress {
  std::string host;  // numeric, without brackets: "127.0.0.1", "0.0.0.0", "::1", "::"
  int port = 0;      // 0: let the kernel pick a free port
  bool is_ipv6() const { return host.find(':') != std::string::npos; }
  /// "127.0.0.1:9400" or "[::1]:9400".
  std::string ToString() const;
};

/// Accepted forms:
///   "127.0.0.1:9400"  an IPv4 address and a port
///   "[::1]:9400"      an IPv6 address in brackets ("[::]" is every interface, v4 and v6)
///   "0.0.0.0:9400"    every IPv4 interface
///   ":9400"           every IPv4 interface (Go's and dcgm-exporter's spelling)
///   "localhost:9400"  127.0.0.1
///   "9400"            127.0.0.1 (a bare port stays on loopback)
/// Port 0 lets the kernel pick. Other host names are refused: resolving names at daemon
/// start would make where user names get exposed depend on DNS.
/// Errors: kInvalidArgument, "metrics address 'x': <why>".
Result<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace gpuman::metrics
