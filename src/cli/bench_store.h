// Where `gpuman bench` keeps what it measured, and reading it back for `--prefer fastest`
// (docs/selection.md, "Measured figures"). One JSON file per scope:
//   root:      /var/lib/gpuman/bench.json (0644): every user's `--prefer fastest` reads it;
//   any other: $XDG_CACHE_HOME/gpuman/bench.json (else ~/.cache/gpuman/bench.json): only
//              that user's own selections read it, beside the machine's file.
// $GPUMAN_BENCH_FILE replaces both (tests, private setups). The figures only rank GPUs a
// request may have anyway; no rule of the machine reads them. Main thread only.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/config.h"

namespace gpuman::cli {

struct BenchRecord {
  std::string uuid;
  std::string name;
  double fp32_tflops = 0;
  double memory_gbps = 0;
  int64_t measured_unix_ms = 0;
  std::string driver_version;  // NVML's ("550.54.15"), "" when unknown
  std::string cuda_version;    // the CUDA driver API's ("12.4"), "" when unknown
};

struct BenchPaths {
  std::string write;                 // where this caller's `gpuman bench` stores
  std::vector<std::string> read;     // what this caller's `--prefer fastest` reads, in order
};

inline constexpr const char* kMachineBenchFile = "/var/lib/gpuman/bench.json";

BenchPaths BenchFilePaths(const Environment& env, uid_t uid);

/// The records of `path` by UUID; a missing file has none. Errors: kIo "bench file PATH:
/// reason" for a file that cannot be read or is not gpuman's format.
Result<std::map<std::string, BenchRecord>> ReadBenchFile(const std::string& path);

/// Replaces `path` (atomically: a temporary file renamed over it), creating its directory
/// (0711 for the machine's, 0700 otherwise); the file is 0644. Errors: kIo with the path.
Status WriteBenchFile(const std::string& path, const std::map<std::string, BenchRecord>& records);

/// FP32 TFLOPS by UUID from every file in `paths.read`, the newest measurement of each GPU
/// winning. A file that cannot be read adds a line to `warnings` and nothing else.
std::map<std::string, double> MeasuredFp32(const BenchPaths& paths, std::vector<std::string>& warnings);

}  // namespace gpuman::cli
