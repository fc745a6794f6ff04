// `gpuman bench`: measures each GPU's FP32 throughput and memory bandwidth through the
// CUDA driver API (src/cuda/), under a lease on the GPUs it measures, prints them beside
// the computed peak and stores them for `--prefer fastest` (cli/bench_store.h;
// docs/cli.md, docs/selection.md).
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"

namespace gpuman::cli {

struct BenchArgs {
  std::optional<std::string> gpus;  // indices/UUIDs; default every GPU of the machine
  bool json = false;
};

int RunBench(const BenchArgs& args, Context& ctx);

}  // namespace gpuman::cli
