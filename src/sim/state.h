// The stand-in NVML's process-wide state (init count, the loaded scenario, injected-error
// counters, call counts) and the fixed device handles. NVML is a C API with process-wide
// state, so there is exactly one State (TheState()); every field is guarded by its `mu`.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "sim/scenario.h"

// NVML keeps this opaque. Here a handle points at one of the fixed slots below, so
// handles stay valid across scenario reloads (and across init/shutdown, like NVML's).
struct nvmlDevice_st {
  unsigned int index;
};

namespace gpuman::sim {

inline constexpr const char* kScenarioEnv = "GPUMAN_FAKE_NVML_SCENARIO";

constexpr std::array<nvmlDevice_st, kMaxGpus> MakeSlots() {
  std::array<nvmlDevice_st, kMaxGpus> slots{};
  for (unsigned i = 0; i < kMaxGpus; ++i) slots[i].index = i;
  return slots;
}
// Read-only: callers treat handles as opaque and never write through them.
inline constexpr std::array<nvmlDevice_st, kMaxGpus> kSlots = MakeSlots();

inline nvmlDevice_t HandleOf(unsigned index) { return const_cast<nvmlDevice_st*>(&kSlots[index]); }

// MIG device handles: fixed slots too, kMaxMigDevices per GPU, index = kMaxGpus + GPU index
// * kMaxMigDevices + MIG slot (so no MIG handle is ever taken for a GPU handle).
constexpr std::array<nvmlDevice_st, kMaxGpus * kMaxMigDevices> MakeMigSlots() {
  std::array<nvmlDevice_st, kMaxGpus * kMaxMigDevices> slots{};
  for (unsigned i = 0; i < kMaxGpus * kMaxMigDevices; ++i) slots[i].index = kMaxGpus + i;
  return slots;
}
inline constexpr std::array<nvmlDevice_st, kMaxGpus * kMaxMigDevices> kMigSlots = MakeMigSlots();
inline nvmlDevice_t MigHandleOf(unsigned gpu, unsigned slot) {
  return const_cast<nvmlDevice_st*>(&kMigSlots[gpu * kMaxMigDevices + slot]);
}

// The MIG device behind a MIG handle (and its GPU in *parent), or nullptr when `device`
// is not a MIG handle of ours or the scenario has no MIG device in that slot now.
const MigDevice* LookupMigIn(const Scenario& scenario, nvmlDevice_t device, const Gpu** parent);

// The GPU behind a handle, or nullptr for a handle that is not one of ours or whose
// index the scenario does not have.
const Gpu* LookupIn(const Scenario& scenario, nvmlDevice_t device);

class State {
 public:
  std::mutex mu;
  int init_count = 0;
  std::string path;   // scenario file, read from the environment when init_count was 0
  FileId file_id;     // of `path` when last (re)loaded or tried
  Scenario scenario;  // valid while init_count > 0
  // Why the last first nvmlInit* could not load the scenario ("PATH: reason"; empty after a
  // good one), and whether the caller reads it (gpumanSimTakeInitErrors) instead of stderr.
  std::string init_error;
  bool caller_reports_init_errors = false;
  std::string host_processes_out;  // gpumanSimHostProcesses' returned text
  std::map<std::string, unsigned long, std::less<>> call_counts;

  // Starts an exported call: counts it and picks up a changed scenario file. The file is
  // stat()ed on every enumeration call (count, handle, system queries), with which every
  // snapshot starts, and otherwise at most every 5 ms: a full snapshot of 8 GPUs makes
  // hundreds of calls, and one stat each made the simulator slower than the code under test.
  // `count` false: the same call again (an event wait polling inside one call).
  void Begin(const char* function, bool count = true) {
    if (count) {
      ++call_counts[function];
      PayCallCost(function);
    }
    if (init_count == 0) return;
    std::string_view name(function);
    bool enumeration = name.find("GetCount") != std::string_view::npos ||
                       name.find("GetHandleBy") != std::string_view::npos ||
                       name.rfind("nvmlSystem", 0) == 0;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int64_t now_ms = static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
    if (enumeration || now_ms - last_check_ms_ >= 5) {
      last_check_ms_ = now_ms;
      ReloadIfChanged();
    }
  }

  // What a call costs on a real driver, when a bench asks for it (docs/scenarios.md, "What
  // a call costs"): $GPUMAN_FAKE_NVML_CALL_US per call, $GPUMAN_FAKE_NVML_INIT_US more for
  // an nvmlInit*. Read once; both unset (0) in tests. Paid with the lock held, as the
  // driver serialises a process's calls.
  void PayCallCost(std::string_view function) {
    static const long call_us = EnvMicros("GPUMAN_FAKE_NVML_CALL_US");
    static const long init_us = EnvMicros("GPUMAN_FAKE_NVML_INIT_US");
    long us = call_us + (function.rfind("nvmlInit", 0) == 0 ? init_us : 0);
    if (us <= 0) return;
    if (us < 1000) {
      // Spun, not slept: a sleep this short lasts its timer slack more (50 us by default,
      // three times a 25 us call), and a real call is CPU time in the driver anyway.
      timespec start{}, now{};
      clock_gettime(CLOCK_MONOTONIC, &start);
      do {
        clock_gettime(CLOCK_MONOTONIC, &now);
      } while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
      return;
    }
    timespec t{us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
  }
  static long EnvMicros(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::max(0L, std::strtol(v, nullptr, 10)) : 0L;
  }

  // First nvmlInit*: reads the environment and loads the scenario.
  nvmlReturn_t LoadForInit() {
    const char* env = std::getenv(kScenarioEnv);
    if (!env || !*env) return NVML_ERROR_DRIVER_NOT_LOADED;
    path = env;
    std::string error;
    std::optional<FileId> id = StatFile(path, &error);
    std::optional<Scenario> loaded;
    if (id) loaded = LoadScenario(path, &error);
    if (!loaded) {
      init_error = path + ": " + error;
      if (!caller_reports_init_errors) Complain(error);
      return NVML_ERROR_UNKNOWN;
    }
    init_error.clear();
    file_id = *id;
    scenario = std::move(*loaded);
    return NVML_SUCCESS;
  }

  const Gpu* Lookup(nvmlDevice_t device) const { return LookupIn(scenario, device); }

  // An injected error for `function`: the GPU's own rule first, then the top-level one.
  std::optional<nvmlReturn_t> Injected(std::string_view function, const Gpu* gpu) {
    if (gpu) {
      auto index = static_cast<long>(gpu - scenario.gpus.data());
      if (auto code = Fire(gpu->errors, function, index)) return code;
    }
    return Fire(scenario.errors, function, -1);
  }

  unsigned long TotalCalls() const {
    unsigned long total = 0;
    for (const auto& [name, count] : call_counts) total += count;
    return total;
  }

  void ResetCounts() {
    call_counts.clear();
    fired_.clear();
  }

 private:
  struct Firing {
    ErrorRule rule;
    long count = 0;
  };
  // How often each `times`-limited rule fired, by (GPU index or -1, function). A rule
  // that changes on reload starts again from zero; an unchanged one keeps its count.
  std::map<std::pair<long, std::string>, Firing, std::less<>> fired_;
  int64_t last_check_ms_ = 0;  // when the scenario file was last stat()ed

  std::optional<nvmlReturn_t> Fire(const ErrorRules& rules, std::string_view function, long scope) {
    auto rule = rules.find(function);
    if (rule == rules.end()) return std::nullopt;
    Firing& f = fired_[{scope, std::string(function)}];
    if (!(f.rule == rule->second)) f = Firing{rule->second, 0};
    if (f.rule.times >= 0 && f.count >= f.rule.times) return std::nullopt;
    ++f.count;
    return f.rule.code;
  }

  void ReloadIfChanged() {
    std::string error;
    std::optional<FileId> id = StatFile(path, &error);
    if (!id || *id == file_id) return;  // a vanished file keeps the last state
    file_id = *id;
    if (std::optional<Scenario> loaded = LoadScenario(path, &error)) {
      scenario = std::move(*loaded);
    } else {
      Complain(error + " (keeping the previous scenario)");
    }
  }

  void Complain(const std::string& reason) const {
    std::fprintf(stderr, "fake-nvml: %s: %s\n", path.c_str(), reason.c_str());
  }
};

// The one instance (never destroyed: other libraries' static destructors may still call
// nvmlShutdown).
State& TheState();

}  // namespace gpuman::sim
