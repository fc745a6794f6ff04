// The gpuman command line: argument parsing, wiring of real implementations, dispatch.
// Called once from main(); not thread-safe (it installs signal handlers).
#pragma once

namespace gpuman::cli {

/// Runs gpuman with the process's argv and environment; returns the exit code.
int Main(int argc, char** argv);

}  // namespace gpuman::cli
