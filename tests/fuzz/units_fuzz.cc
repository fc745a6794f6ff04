// Fuzz target: human durations (base/duration.h) and byte sizes (policy/byte_size.h), the
// parsers behind --time-limit, --watch-style options, config durations and
// --min-free-memory. Properties: never crash; accepted values are in range; what
// FormatByteSize prints (up to TiB) parses back to no more than the value (it rounds down).
#include <cstring>
#include <limits>

#include "base/duration.h"
#include "fuzz_util.h"
#include "policy/byte_size.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuman;
  std::string_view text = fuzz::AsText(data, size);

  if (auto ms = ParseDurationMs(text)) {
    FUZZ_CHECK(*ms >= 0 && *ms <= int64_t{366} * 86400 * 1000);
    FUZZ_CHECK(!FormatDurationMs(*ms).empty());
  }
  if (auto bytes = policy::ParseByteSize(text)) {
    FUZZ_CHECK(*bytes >= 0);
    std::string shown = policy::FormatByteSize(*bytes);
    if (*bytes < (int64_t{1} << 50)) {  // up to TiB: the units ParseByteSize reads
      auto back = policy::ParseByteSize(shown);
      FUZZ_CHECK(back.has_value());
      FUZZ_CHECK(*back <= *bytes);
    }
  }
  // The formatters take any int64_t (negative and extreme values included).
  if (size >= 8) {
    int64_t v = 0;
    std::memcpy(&v, data, sizeof v);
    FUZZ_CHECK(!FormatDurationMs(v).empty());
    FUZZ_CHECK(!policy::FormatByteSize(v).empty());
  }
  return 0;
}
