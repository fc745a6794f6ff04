// The floor for `gpuman status --json`: the least a program can do to print the same
// facts - dlopen NVML, make the same per-device calls, printf JSON by hand, no libraries,
// no error translation, no /proc. bench/status_bench compares gpuman against it.
// Usage: status_floor LIBRARY [lazy]   (the scenario comes from GPUMAN_FAKE_NVML_SCENARIO)
// The floor of issue 13 binds the library's symbols at load (RTLD_NOW); with `lazy` it
// binds them on first call (RTLD_LAZY), as gpuman does: status_bench reports both.
#include <dlfcn.h>

#include <cstdio>
#include <string_view>
#include <initializer_list>

#include "nvml/nvml_abi.h"

#define LOAD(var, type, name) auto var = reinterpret_cast<type>(dlsym(h, name))

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const bool lazy = argc > 2 && std::string_view(argv[2]) == "lazy";
  void* h = dlopen(argv[1], (lazy ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL);
  if (!h) return 3;
  LOAD(init, nvmlInit_fn, "nvmlInit_v2");
  LOAD(shutdown, nvmlShutdown_fn, "nvmlShutdown");
  LOAD(driver, nvmlSystemGetString_fn, "nvmlSystemGetDriverVersion");
  LOAD(nvmlver, nvmlSystemGetString_fn, "nvmlSystemGetNVMLVersion");
  LOAD(cudaver, nvmlSystemGetCudaDriverVersion_fn, "nvmlSystemGetCudaDriverVersion_v2");
  LOAD(count_fn, nvmlDeviceGetCount_fn, "nvmlDeviceGetCount_v2");
  LOAD(handle_fn, nvmlDeviceGetHandleByIndex_fn, "nvmlDeviceGetHandleByIndex_v2");
  LOAD(uuid_fn, nvmlDeviceGetString_fn, "nvmlDeviceGetUUID");
  LOAD(name_fn, nvmlDeviceGetString_fn, "nvmlDeviceGetName");
  LOAD(serial_fn, nvmlDeviceGetString_fn, "nvmlDeviceGetSerial");
  LOAD(pci_fn, nvmlDeviceGetPciInfo_fn, "nvmlDeviceGetPciInfo_v3");
  LOAD(mem_fn, nvmlDeviceGetMemoryInfo_v2_fn, "nvmlDeviceGetMemoryInfo_v2");
  LOAD(util_fn, nvmlDeviceGetUtilizationRates_fn, "nvmlDeviceGetUtilizationRates");
  LOAD(temp_fn, nvmlDeviceGetTemperature_fn, "nvmlDeviceGetTemperature");
  LOAD(power_fn, nvmlDeviceGetUInt_fn, "nvmlDeviceGetPowerUsage");
  LOAD(limit_fn, nvmlDeviceGetUInt_fn, "nvmlDeviceGetEnforcedPowerLimit");
  LOAD(fan_fn, nvmlDeviceGetUInt_fn, "nvmlDeviceGetFanSpeed");
  LOAD(clock_fn, nvmlDeviceGetClock_fn, "nvmlDeviceGetClockInfo");
  LOAD(maxclock_fn, nvmlDeviceGetClock_fn, "nvmlDeviceGetMaxClockInfo");
  LOAD(pstate_fn, nvmlDeviceGetPerformanceState_fn, "nvmlDeviceGetPerformanceState");
  LOAD(cc_fn, nvmlDeviceGetCudaComputeCapability_fn, "nvmlDeviceGetCudaComputeCapability");
  LOAD(mode_fn, nvmlDeviceGetComputeMode_fn, "nvmlDeviceGetComputeMode");
  LOAD(persist_fn, nvmlDeviceGetEnableState_fn, "nvmlDeviceGetPersistenceMode");
  LOAD(mig_fn, nvmlDeviceGetMigMode_fn, "nvmlDeviceGetMigMode");
  LOAD(ecc_fn, nvmlDeviceGetTotalEccErrors_fn, "nvmlDeviceGetTotalEccErrors");
  LOAD(retired_fn, nvmlDeviceGetEnableState_fn, "nvmlDeviceGetRetiredPagesPendingStatus");
  LOAD(remap_fn, nvmlDeviceGetRemappedRows_fn, "nvmlDeviceGetRemappedRows");
  LOAD(reasons_fn, nvmlDeviceGetULongLong_fn, "nvmlDeviceGetCurrentClocksEventReasons");
  LOAD(cpu_fn, nvmlDeviceGetCpuAffinity_fn, "nvmlDeviceGetCpuAffinity");
  LOAD(numa_fn, nvmlDeviceGetUInt_fn, "nvmlDeviceGetNumaNodeId");
  LOAD(compute_fn, nvmlDeviceGetRunningProcesses_fn, "nvmlDeviceGetComputeRunningProcesses_v3");
  LOAD(graphics_fn, nvmlDeviceGetRunningProcesses_fn, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  if (!init || init() != NVML_SUCCESS) return 3;

  char text[96];
  driver(text, sizeof text);
  std::printf("{\"schema_version\":1,\"driver_version\":\"%s\"", text);
  nvmlver(text, sizeof text);
  int cuda = 0;
  cudaver(&cuda);
  std::printf(",\"nvml_version\":\"%s\",\"cuda_driver_version\":\"%d.%d\",\"gpus\":[", text, cuda / 1000,
              (cuda % 1000) / 10);
  unsigned count = 0;
  count_fn(&count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    handle_fn(i, &d);
    char uuid[96] = "", name[96] = "", serial[32] = "";
    uuid_fn(d, uuid, sizeof uuid);
    name_fn(d, name, sizeof name);
    serial_fn(d, serial, sizeof serial);
    nvmlPciInfo_t pci{};
    pci_fn(d, &pci);
    nvmlMemory_v2_t mem{};
    mem.version = nvmlMemory_v2;
    mem_fn(d, &mem);
    nvmlUtilization_t util{};
    util_fn(d, &util);
    unsigned temp = 0, power = 0, limit = 0, fan = 0, sm = 0, smmax = 0, memclk = 0, memmax = 0, numa = 0;
    temp_fn(d, NVML_TEMPERATURE_GPU, &temp);
    power_fn(d, &power);
    limit_fn(d, &limit);
    fan_fn(d, &fan);
    clock_fn(d, NVML_CLOCK_SM, &sm);
    maxclock_fn(d, NVML_CLOCK_SM, &smmax);
    clock_fn(d, NVML_CLOCK_MEM, &memclk);
    maxclock_fn(d, NVML_CLOCK_MEM, &memmax);
    nvmlPstates_t ps = 0;
    pstate_fn(d, &ps);
    int major = 0, minor = 0;
    cc_fn(d, &major, &minor);
    nvmlComputeMode_t mode = 0;
    mode_fn(d, &mode);
    nvmlEnableState_t persist = 0, retired = 0;
    persist_fn(d, &persist);
    unsigned mig_cur = 0, mig_pend = 0;
    mig_fn(d, &mig_cur, &mig_pend);
    unsigned long long corr = 0, unc = 0, reasons = 0;
    ecc_fn(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &corr);
    ecc_fn(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &unc);
    unsigned long long agg_corr = 0, agg_unc = 0;
    ecc_fn(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &agg_corr);
    ecc_fn(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &agg_unc);
    retired_fn(d, &retired);
    unsigned rc = 0, ru = 0, rp = 0, rf = 0;
    remap_fn(d, &rc, &ru, &rp, &rf);
    reasons_fn(d, &reasons);
    unsigned long cpus[64] = {};
    cpu_fn(d, 64, cpus);
    numa_fn(d, &numa);
    std::printf(
        "%s{\"index\":%u,\"uuid\":\"%s\",\"name\":\"%s\",\"serial\":\"%s\",\"pci_bus_id\":\"%s\","
        "\"memory\":{\"total_bytes\":%llu,\"used_bytes\":%llu,\"free_bytes\":%llu,\"reserved_bytes\":%llu},"
        "\"utilization\":{\"gpu_percent\":%u,\"memory_percent\":%u},\"temperature_c\":%u,"
        "\"power_usage_w\":%.3f,\"power_limit_w\":%.3f,\"fan_percent\":%u,"
        "\"clocks\":{\"sm_mhz\":%u,\"sm_max_mhz\":%u,\"memory_mhz\":%u,\"memory_max_mhz\":%u},"
        "\"performance_state\":\"P%d\",\"compute_capability\":\"%d.%d\",\"compute_mode\":%d,"
        "\"persistence_mode\":%s,\"mig_mode\":{\"current\":%s,\"pending\":%s},"
        "\"ecc\":{\"volatile_corrected\":%llu,\"volatile_uncorrected\":%llu,"
        "\"aggregate_corrected\":%llu,\"aggregate_uncorrected\":%llu},"
        "\"retired_pages_pending\":%s,\"remapped_rows\":{\"pending\":%s,\"failure\":%s},"
        "\"clock_event_reasons\":%llu,\"cpu_affinity_word0\":%lu,\"numa_node\":%u,\"processes\":[",
        i ? "," : "", i, uuid, name, serial, pci.busId, mem.total, mem.used, mem.free, mem.reserved, util.gpu,
        util.memory, temp, power / 1000.0, limit / 1000.0, fan, sm, smmax, memclk, memmax, ps, major, minor, mode,
        persist ? "true" : "false", mig_cur ? "true" : "false", mig_pend ? "true" : "false", corr, unc, agg_corr, agg_unc,
        retired ? "true" : "false", rp ? "true" : "false", rf ? "true" : "false", reasons, cpus[0], numa);
    bool first = true;
    for (auto fn : {compute_fn, graphics_fn}) {
      unsigned n = 0;
      fn(d, &n, nullptr);
      if (n == 0) continue;
      nvmlProcessInfo_t procs[256];
      n = 256;
      if (fn(d, &n, procs) != NVML_SUCCESS) continue;
      for (unsigned p = 0; p < n; ++p) {
        std::printf("%s{\"pid\":%u,\"used_memory_bytes\":%llu,\"type\":\"%s\"}", first ? "" : ",", procs[p].pid,
                    procs[p].usedGpuMemory, fn == compute_fn ? "compute" : "graphics");
        first = false;
      }
    }
    std::printf("]}");
  }
  std::printf("]}\n");
  shutdown();
  return 0;
}
