// `gpuman slurm healthcheck`, `gpuman slurm prolog`, `gpuman slurm epilog`: the node-side
// hooks a Slurm admin wires into slurm.conf (HealthCheckProgram, Prolog, Epilog;
// docs/slurm.md). They judge the node's GPUs with gpuman's health findings and process
// view, and drain or resume the node through scontrol (slurm/node_control.h). Each work
// within a deadline (NVML and scontrol can hang on a broken node). Main thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cli/context.h"

namespace gpuman::cli {

struct SlurmHookArgs {
  std::optional<std::string> node;  // --node: default $SLURMD_NODENAME, else the short host name
  bool local = false;               // healthcheck --local: do not ask the daemon
  std::string grace = "10s";        // epilog --grace
  std::string idle_memory = "256MiB";  // prolog/epilog --idle-memory
};

/// The exit code when `subcommand` is one of them; nullopt otherwise.
std::optional<int> RunSlurmHooks(std::string_view subcommand, const SlurmHookArgs& args, Context& ctx);

// Deadlines (docs/slurm.md): NVML work (snapshot and health findings) gets this long, each
// scontrol call kScontrolTimeoutMs; a healthcheck makes at most two calls, so it ends within
// 40 s, inside Slurm's 60 s limit for a HealthCheckProgram.
inline constexpr int64_t kNvmlDeadlineMs = 20000;
inline constexpr int64_t kScontrolTimeoutMs = 10000;

}  // namespace gpuman::cli
