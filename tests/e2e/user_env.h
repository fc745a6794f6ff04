// The environment a throwaway test user (e2e/users.h) runs gpuman with: CleanEnv plus
// what a login would give, as an explicit map. Header-only test support.
#pragma once

#include <pwd.h>

#include <map>
#include <string>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {

/// CleanEnv(state_dir) without its unset entries, plus PATH, HOME (a directory the user
/// may write) and USER. No XDG_RUNTIME_DIR and no GPUMAN_SOCKET: the user's client looks
/// for its daemon at the default paths.
inline std::map<std::string, std::string> UserEnv(const passwd& user, const std::string& home,
                                                  const std::string& state_dir) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : CleanEnv(state_dir)) {
    if (!v.empty()) env[k] = v;
  }
  env["PATH"] = "/usr/bin:/bin";
  env["HOME"] = home;
  env["USER"] = user.pw_name;
  return env;
}

}  // namespace gpuman::e2e
