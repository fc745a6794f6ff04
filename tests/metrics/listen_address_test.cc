// ParseListenAddress: the forms `gpuman daemon --metrics ADDRESS` accepts, and the errors.
#include "metrics/listen_address.h"

#include <gtest/gtest.h>

namespace gpuman::metrics {
namespace {

TEST(ParseListenAddress, AcceptedForms) {
  struct Case {
    const char* text;
    const char* host;
    int port;
    const char* canonical;
  };
  const Case kCases[] = {
      {"127.0.0.1:9400", "127.0.0.1", 9400, "127.0.0.1:9400"},
      {"0.0.0.0:9400", "0.0.0.0", 9400, "0.0.0.0:9400"},
      {":9400", "0.0.0.0", 9400, "0.0.0.0:9400"},
      {"[::1]:9400", "::1", 9400, "[::1]:9400"},
      {"[::]:80", "::", 80, "[::]:80"},
      {"localhost:9100", "127.0.0.1", 9100, "127.0.0.1:9100"},
      {"9400", "127.0.0.1", 9400, "127.0.0.1:9400"},
      {"127.0.0.1:0", "127.0.0.1", 0, "127.0.0.1:0"},
      {"10.1.2.3:65535", "10.1.2.3", 65535, "10.1.2.3:65535"},
  };
  for (const auto& c : kCases) {
    auto a = ParseListenAddress(c.text);
    ASSERT_TRUE(a.has_value()) << c.text << ": " << a.error().message;
    EXPECT_EQ(a->host, c.host) << c.text;
    EXPECT_EQ(a->port, c.port) << c.text;
    EXPECT_EQ(a->ToString(), c.canonical) << c.text;
  }
  EXPECT_EQ(ParseListenAddress(kDefaultMetricsAddress)->ToString(), "127.0.0.1:9400");
}

TEST(ParseListenAddress, Errors) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case kCases[] = {
      {"", "metrics address '': empty (expected HOST:PORT, e.g. 127.0.0.1:9400)"},
      {"127.0.0.1:", "metrics address '127.0.0.1:': missing port"},
      {"127.0.0.1:65536", "metrics address '127.0.0.1:65536': port '65536' is not a number from 0 to 65535"},
      {"127.0.0.1:-1", "metrics address '127.0.0.1:-1': port '-1' is not a number from 0 to 65535"},
      {"127.0.0.1:http", "metrics address '127.0.0.1:http': port 'http' is not a number from 0 to 65535"},
      {"::1:9400", "metrics address '::1:9400': put an IPv6 address in brackets, e.g. [::1]:9400"},
      {"[::1:9400", "metrics address '[::1:9400': missing ']' after the IPv6 address"},
      {"[::1]", "metrics address '[::1]': missing ':PORT' after ']'"},
      {"[1.2.3.4]:80", "metrics address '[1.2.3.4]:80': '1.2.3.4' is not an IPv6 address"},
      {"example.com:9400",
       "metrics address 'example.com:9400': 'example.com' is not a numeric IP address (use e.g. 127.0.0.1, "
       "0.0.0.0, [::1] or [::])"},
      {"300.1.1.1:9400",
       "metrics address '300.1.1.1:9400': '300.1.1.1' is not a numeric IP address (use e.g. 127.0.0.1, "
       "0.0.0.0, [::1] or [::])"},
  };
  for (const auto& c : kCases) {
    auto a = ParseListenAddress(c.text);
    ASSERT_FALSE(a.has_value()) << c.text;
    EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument) << c.text;
    EXPECT_EQ(a.error().message, c.message);
  }
}

}  // namespace
}  // namespace gpuman::metrics
