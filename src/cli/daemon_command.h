// `gpuman daemon`: builds the daemon from the config and the command line and serves
// until SIGTERM or SIGINT (cli/daemon_command.cc). Main thread only.
#pragma once

#include "cli/context.h"
#include "cli/queue_commands.h"

namespace gpuman::cli {

/// Runs the daemon in the foreground. Returns its exit code; kExitUsage for a config
/// mistake (an admin group that does not exist, a scenario the stand-in cannot load).
int RunDaemon(const QueueArgs& args, Context& ctx);

}  // namespace gpuman::cli
