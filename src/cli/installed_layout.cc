#include "cli/installed_layout.h"

#ifndef GPUMAN_DEFAULT_SCENARIO_DIR
#define GPUMAN_DEFAULT_SCENARIO_DIR ""
#endif

namespace gpuman::cli {

InstalledLayout ThisInstallation() {
  return InstalledLayout::ForExecutable(ReadExecutablePath(), GPUMAN_DEFAULT_SCENARIO_DIR);
}

}  // namespace gpuman::cli
