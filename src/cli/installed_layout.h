// The installed layout of this gpuman, computed once at start-up (Main) and handed to the
// Context; see base/installed_layout.h. Main thread.
#pragma once

#include "base/installed_layout.h"

namespace gpuman::cli {

/// The layout around this process's binary (/proc/self/exe), with <exe_dir>/scenarios (the
/// build tree's link to the source tree's scenarios/) as the last scenario folder. No path
/// is compiled in.
InstalledLayout ThisInstallation();

}  // namespace gpuman::cli
