// The installed layout of this gpuman, computed once at start-up (Main) and handed to the
// Context; see base/installed_layout.h. Main thread.
#pragma once

#include "base/installed_layout.h"

namespace gpuman::cli {

/// The layout around this process's binary (/proc/self/exe), with the source tree's
/// scenarios/ as the build tree's last scenario folder. The only reader of the compiled-in
/// GPUMAN_DEFAULT_SCENARIO_DIR.
InstalledLayout ThisInstallation();

}  // namespace gpuman::cli
