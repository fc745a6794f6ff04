// Fuzz target: the config file (cli/config.h ParseConfig: TOML through toml++, then
// gpuman's checks of every table). The fuzz build compiles toml++ header-only with its
// assertions on (CMakeLists.txt, GPUMAN_FUZZ), so input that drives toml++ into a failed
// assertion or an "unreachable" branch aborts here even when the packaged library,
// built without assertions, would silently go on.
// Properties: never crash, never throw; an error is one line starting "config ".
#include "cli/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = gpuman::cli::ParseConfig(std::string(gpuman::fuzz::AsText(data, size)), "fuzz.toml");
  if (!config) {
    const std::string& message = config.error().message;
    FUZZ_CHECK(message.rfind("config ", 0) == 0);
  } else {
    FUZZ_CHECK(config->daemon.sample_interval_ms >= 100);
    for (const auto& [user, cap] : config->daemon.user_max_gpus) FUZZ_CHECK(cap >= 0);
    if (config->daemon.max_gpus_per_user) FUZZ_CHECK(*config->daemon.max_gpus_per_user >= 0);
  }
  return 0;
}
