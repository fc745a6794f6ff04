#include "metrics/listen_address.h"

#include <arpa/inet.h>

#include "base/strings.h"

namespace gpuman::metrics {
namespace {

bool IsIp(int family, const std::string& host) {
  unsigned char buf[16];
  return inet_pton(family, host.c_str(), buf) == 1;
}

}  // namespace

std::string ListenAddress::ToString() const {
  return (is_ipv6() ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  auto fail = [&](const std::string& why) -> Error {
    return MakeError(ErrorCode::kInvalidArgument, "metrics address '" + std::string(text) + "': " + why);
  };
  if (text.empty()) return fail("empty (expected HOST:PORT, e.g. 127.0.0.1:9400)");

  std::string host;
  std::string_view port_text;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']' after the IPv6 address");
    host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return fail("missing ':PORT' after ']'");
    port_text = text.substr(close + 2);
    if (!IsIp(AF_INET6, host)) return fail("'" + host + "' is not an IPv6 address");
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      host = "127.0.0.1";
      port_text = text;
    } else {
      host = std::string(text.substr(0, colon));
      port_text = text.substr(colon + 1);
      if (host.find(':') != std::string::npos) {
        return fail("put an IPv6 address in brackets, e.g. [::1]:9400");
      }
      if (host.empty()) host = "0.0.0.0";
      else if (host == "localhost") host = "127.0.0.1";
      else if (!IsIp(AF_INET, host)) {
        return fail("'" + host + "' is not a numeric IP address (use e.g. 127.0.0.1, 0.0.0.0, [::1] or [::])");
      }
    }
  }
  if (port_text.empty()) return fail("missing port");
  std::optional<int64_t> port = ParseInt(port_text);
  if (!port || *port < 0 || *port > 65535) {
    return fail("port '" + std::string(port_text) + "' is not a number from 0 to 65535");
  }
  return ListenAddress{host, static_cast<int>(*port)};
}

}  // namespace gpuman::metrics
