#include "cli/drains.h"

#include "cli/daemon_client.h"

namespace gpuman::cli {

Result<std::vector<model::GpuDrain>> MachineDrains(Context& ctx) {
  // TODO(core): ask the daemon (protocol op "drains"); until then no drains are known.
  (void)ctx;
  return std::vector<model::GpuDrain>{};
}

}  // namespace gpuman::cli
