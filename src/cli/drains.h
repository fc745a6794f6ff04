// The machine's drained GPUs, as every command that shows or picks GPUs needs them.
// Drains live in the daemon's state; without a daemon there are none. Main thread only.
#pragma once

#include <vector>

#include "base/result.h"
#include "cli/context.h"
#include "model/drain.h"

namespace gpuman::cli {

/// The drained GPUs from the daemon when one answers (uuid order), else an empty list
/// (also from a daemon too old to know the `drains` op).
/// Errors: kUnavailable when the daemon's connection breaks; errors from the daemon,
/// with "drains: " in front.
Result<std::vector<model::GpuDrain>> MachineDrains(Context& ctx);

}  // namespace gpuman::cli
