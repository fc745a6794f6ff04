// Tests for the stand-in libnvidia-ml.so.1 (src/sim/). The library is
// loaded with dlopen, as gpuman's loader does, and driven through its exported C ABI.
// dlopen of one path always yields the same instance, so every test starts from
// "not initialized", points $GPUMAN_FAKE_NVML_SCENARIO at its scenario before the first
// nvmlInit*, and the fixture shuts NVML down fully afterwards.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "nvml/nvml_abi.h"

namespace {

using json = nlohmann::json;

// Entry points whose types nvml_abi.h does not declare.
using InitWithFlagsFn = nvmlReturn_t (*)(unsigned int);
using HandleByStringFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using CallCountFn = unsigned long (*)(const char*);
using ResetCountsFn = void (*)(void);
using ProcessesV1Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using ProcessesV2Fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);

// One loaded variant of the library. Never closed: a test binary loads each variant once.
class Lib {
 public:
  static Lib& Full() {
    static Lib lib(GPUMAN_TEST_FAKE_NVML);
    return lib;
  }
  static Lib& Legacy() {
    static Lib lib(GPUMAN_TEST_FAKE_NVML_LEGACY);
    return lib;
  }

  void* Raw(const char* name) const { return dlsym(handle_, name); }

  template <typename Fn>
  Fn Get(const char* name) const {
    void* sym = Raw(name);
    EXPECT_NE(sym, nullptr) << name;
    return reinterpret_cast<Fn>(sym);
  }

  bool loaded() const { return handle_ != nullptr; }

 private:
  explicit Lib(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(handle_, nullptr) << dlerror();
  }
  void* handle_;
};

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(lib().loaded());
    char tmpl[] = "/tmp/fake_nvml_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    lib().Get<ResetCountsFn>("fake_nvml_reset_call_counts")();
  }

  void TearDown() override {
    auto shutdown = lib().Get<nvmlShutdown_fn>("nvmlShutdown");
    while (shutdown() == NVML_SUCCESS) {
    }
    unsetenv("GPUMAN_FAKE_NVML_SCENARIO");
    std::filesystem::remove_all(dir_);
  }

  virtual Lib& lib() { return Lib::Full(); }

  template <typename Fn>
  Fn F(const char* name) {
    return lib().Get<Fn>(name);
  }

  static void UseScenario(const std::string& path) {
    setenv("GPUMAN_FAKE_NVML_SCENARIO", path.c_str(), 1);
  }

  // Replaces the scenario file atomically (write + rename), as a test driver would.
  // Every gpuman snapshot starts by counting devices; the stand-in re-checks its file then.
  void StartSnapshot() {
    unsigned n = 0;
    F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2")(&n);
  }

  std::string WriteScenario(const json& scenario) {
    std::string path = dir_ + "/scenario.json";
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << scenario.dump(2);
    EXPECT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
    return path;
  }

  nvmlReturn_t Init() { return F<nvmlInit_fn>("nvmlInit_v2")(); }

  nvmlDevice_t Handle(unsigned index) {
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(F<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2")(index, &device),
              NVML_SUCCESS);
    return device;
  }

  unsigned long CallCount(const char* name) { return F<CallCountFn>("fake_nvml_call_count")(name); }

  std::string Uuid(nvmlDevice_t device) {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    EXPECT_EQ(F<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID")(device, buf, sizeof buf),
              NVML_SUCCESS);
    return buf;
  }

  std::string dir_;
};

// A small scenario: one busy GPU with every field, one bare GPU (fields absent).
json MinimalScenario() {
  return json::parse(R"({
    "description": "test",
    "driver": {"driver_version": "550.54.15", "nvml_version": "12.550.54.15",
               "cuda_driver_version": 12040},
    "some_future_key": {"ignored": true},
    "gpus": [
      {"uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA A100-SXM4-80GB",
       "serial": "1324020012345", "minor_number": 0,
       "pci": {"domain": 0, "bus": 7, "device": 0, "device_id": 8370, "subsystem_id": 5219},
       "memory": {"total": 85899345920, "reserved": 1073741824, "used": 10737418240},
       "utilization": {"gpu": 97, "memory": 60}, "temperature": 64,
       "power_usage_mw": 350000, "power_limit_mw": 400000, "fan": null,
       "clocks": {"sm": 1410, "sm_max": 1410, "mem": 1593, "mem_max": 1593},
       "pstate": 0, "compute_capability": [8, 0], "compute_mode": 3, "persistence_mode": 1,
       "mig_mode": {"current": 0, "pending": 1},
       "ecc": {"volatile_corrected": 1, "volatile_uncorrected": 2,
               "aggregate_corrected": 3, "aggregate_uncorrected": 4},
       "retired_pages_pending": 1,
       "remapped_rows": {"corrected": 5, "uncorrected": 6, "pending": 1, "failure": 0},
       "clock_event_reasons": 4, "cpu_affinity": "0-3,64", "numa_node": 1,
       "topology": {"pci_switch": "sw0", "host_bridge": "hb0"},
       "nvlinks": [{"link": 0, "peer": 1}, {"link": 5, "peer": 1}],
       "processes": [
         {"pid": 100, "used_memory": 1000, "type": "compute"},
         {"pid": 101, "used_memory": null, "type": "both", "gpu_instance_id": 1,
          "compute_instance_id": 0},
         {"pid": 102, "used_memory": 3000, "type": "graphics"}]},
      {"uuid": "GPU-66666666-7777-8888-9999-000000000000",
       "pci": {"domain": 1, "bus": 171, "device": 0, "device_id": 8240}}
    ]})");
}

TEST_F(FakeNvmlTest, CallsBeforeInitAreUninitialized) {
  UseScenario(WriteScenario(MinimalScenario()));
  unsigned count = 0;
  EXPECT_EQ(F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2")(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(F<nvmlShutdown_fn>("nvmlShutdown")(), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(F<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2")(0, &device),
            NVML_ERROR_UNINITIALIZED);
}

TEST_F(FakeNvmlTest, InitWithoutScenarioIsDriverNotLoaded) {
  unsetenv("GPUMAN_FAKE_NVML_SCENARIO");
  EXPECT_EQ(Init(), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(F<nvmlInit_fn>("nvmlInit")(), NVML_ERROR_DRIVER_NOT_LOADED);
}

TEST_F(FakeNvmlTest, MissingOrMalformedScenarioIsUnknownWithOneLine) {
  std::string missing = dir_ + "/nope.json";
  UseScenario(missing);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "fake-nvml: " + missing + ": No such file or directory\n");

  std::string bad = dir_ + "/bad.json";
  std::ofstream(bad) << R"({"gpus": [{"uuid": "GPU-x", "memory": {"total": "lots"}}]})";
  UseScenario(bad);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("fake-nvml: " + bad + ": gpus[0]: memory.total: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
}

TEST_F(FakeNvmlTest, InitIsReferenceCounted) {
  UseScenario(WriteScenario(MinimalScenario()));
  auto shutdown = F<nvmlShutdown_fn>("nvmlShutdown");
  auto count_fn = F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2");
  unsigned count = 0;
  ASSERT_EQ(Init(), NVML_SUCCESS);
  ASSERT_EQ(F<InitWithFlagsFn>("nvmlInitWithFlags")(0), NVML_SUCCESS);
  EXPECT_EQ(shutdown(), NVML_SUCCESS);
  EXPECT_EQ(count_fn(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(shutdown(), NVML_SUCCESS);
  EXPECT_EQ(count_fn(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(shutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(FakeNvmlTest, SystemQueries) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  EXPECT_EQ(F<nvmlSystemGetString_fn>("nvmlSystemGetDriverVersion")(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "550.54.15");
  EXPECT_EQ(F<nvmlSystemGetString_fn>("nvmlSystemGetNVMLVersion")(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "12.550.54.15");
  EXPECT_EQ(F<nvmlSystemGetString_fn>("nvmlSystemGetDriverVersion")(buf, 9),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(F<nvmlSystemGetString_fn>("nvmlSystemGetDriverVersion")(buf, 10), NVML_SUCCESS);
  int cuda = 0;
  EXPECT_EQ(F<nvmlSystemGetCudaDriverVersion_fn>("nvmlSystemGetCudaDriverVersion_v2")(&cuda),
            NVML_SUCCESS);
  EXPECT_EQ(cuda, 12040);
  auto text = F<nvmlErrorString_fn>("nvmlErrorString");
  EXPECT_STREQ(text(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(text(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
  EXPECT_STREQ(text(NVML_ERROR_NO_PERMISSION), "Insufficient Permissions");
  EXPECT_STREQ(text(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
  EXPECT_STREQ(text(12345), "Unknown Error");
}

TEST_F(FakeNvmlTest, MemoryV1CountsReservedAsUsedV2ReportsItApart) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlDevice_t gpu = Handle(0);
  constexpr unsigned long long kGiB = 1ULL << 30;

  nvmlMemory_t v1{};
  ASSERT_EQ(F<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo")(gpu, &v1), NVML_SUCCESS);
  EXPECT_EQ(v1.total, 80 * kGiB);
  EXPECT_EQ(v1.used, 11 * kGiB);
  EXPECT_EQ(v1.free, 69 * kGiB);

  auto v2_fn = F<nvmlDeviceGetMemoryInfo_v2_fn>("nvmlDeviceGetMemoryInfo_v2");
  nvmlMemory_v2_t v2{};
  v2.version = nvmlMemory_v2;
  ASSERT_EQ(v2_fn(gpu, &v2), NVML_SUCCESS);
  EXPECT_EQ(v2.total, 80 * kGiB);
  EXPECT_EQ(v2.reserved, 1 * kGiB);
  EXPECT_EQ(v2.used, 10 * kGiB);
  EXPECT_EQ(v2.free, 69 * kGiB);

  v2.version = 0x01000028;  // a v1 version word in a v2 struct
  EXPECT_EQ(v2_fn(gpu, &v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  v2.version = 0;
  EXPECT_EQ(v2_fn(gpu, &v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  EXPECT_EQ(v2_fn(gpu, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  // GPU 1 has no memory field.
  v2.version = nvmlMemory_v2;
  EXPECT_EQ(v2_fn(Handle(1), &v2), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(FakeNvmlTest, PciInfoAndHandleLookups) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlPciInfo_t pci{};
  ASSERT_EQ(F<nvmlDeviceGetPciInfo_fn>("nvmlDeviceGetPciInfo_v3")(Handle(1), &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000001:AB:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0001:AB:00.0");
  EXPECT_EQ(pci.domain, 1u);
  EXPECT_EQ(pci.bus, 0xABu);
  EXPECT_EQ(pci.pciDeviceId, 0x203010DEu);
  EXPECT_EQ(pci.pciSubSystemId, 0x000010DEu);

  auto by_bus = F<HandleByStringFn>("nvmlDeviceGetHandleByPciBusId_v2");
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(by_bus("0000:07:00.0", &device), NVML_SUCCESS);
  EXPECT_EQ(device, Handle(0));
  EXPECT_EQ(by_bus("00000001:ab:00.0", &device), NVML_SUCCESS);
  EXPECT_EQ(device, Handle(1));
  EXPECT_EQ(by_bus("07:00.0", &device), NVML_SUCCESS);
  EXPECT_EQ(device, Handle(0));
  EXPECT_EQ(by_bus("0000:08:00.0", &device), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_bus("garbage", &device), NVML_ERROR_INVALID_ARGUMENT);

  auto by_uuid = F<HandleByStringFn>("nvmlDeviceGetHandleByUUID");
  EXPECT_EQ(by_uuid("GPU-66666666-7777-8888-9999-000000000000", &device), NVML_SUCCESS);
  EXPECT_EQ(device, Handle(1));
  EXPECT_EQ(by_uuid("GPU-nope", &device), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_uuid(nullptr, &device), NVML_ERROR_INVALID_ARGUMENT);

  unsigned index = 99;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetIndex")(Handle(1), &index), NVML_SUCCESS);
  EXPECT_EQ(index, 1u);
}

TEST_F(FakeNvmlTest, InvalidArgumentsAndStringSizes) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  auto by_index = F<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex_v2");
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(by_index(2, &device), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(by_index(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);

  auto uuid = F<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID");
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  // "GPU-" + 36 characters + NUL = 41 bytes.
  EXPECT_EQ(uuid(Handle(0), buf, 40), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(uuid(Handle(0), buf, 41), NVML_SUCCESS);
  EXPECT_EQ(uuid(Handle(0), nullptr, 41), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(uuid(nullptr, buf, sizeof buf), NVML_ERROR_INVALID_ARGUMENT);
  int not_a_device = 0;
  EXPECT_EQ(uuid(reinterpret_cast<nvmlDevice_t>(&not_a_device), buf, sizeof buf),
            NVML_ERROR_INVALID_ARGUMENT);

  unsigned temp = 0;
  auto temperature = F<nvmlDeviceGetTemperature_fn>("nvmlDeviceGetTemperature");
  EXPECT_EQ(temperature(Handle(0), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  EXPECT_EQ(temp, 64u);
  EXPECT_EQ(temperature(Handle(0), 1, &temp), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(temperature(Handle(0), NVML_TEMPERATURE_GPU, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeNvmlTest, AbsentOrNullFieldsAreNotSupported) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  unsigned value = 0;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetFanSpeed")(Handle(0), &value),
            NVML_ERROR_NOT_SUPPORTED);  // "fan": null
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerUsage")(Handle(1), &value),
            NVML_ERROR_NOT_SUPPORTED);  // absent
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  EXPECT_EQ(F<nvmlDeviceGetString_fn>("nvmlDeviceGetName")(Handle(1), name, sizeof name),
            NVML_ERROR_NOT_SUPPORTED);
  unsigned long long ecc = 0;
  EXPECT_EQ(F<nvmlDeviceGetTotalEccErrors_fn>("nvmlDeviceGetTotalEccErrors")(
                Handle(1), NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc),
            NVML_ERROR_NOT_SUPPORTED);
  nvmlEnableState_t active;
  EXPECT_EQ(F<nvmlDeviceGetNvLinkState_fn>("nvmlDeviceGetNvLinkState")(Handle(1), 0, &active),
            NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(FakeNvmlTest, DeviceQueries) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlDevice_t gpu = Handle(0);
  unsigned value = 0;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerUsage")(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 350000u);
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetEnforcedPowerLimit")(gpu, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 400000u);
  nvmlUtilization_t util{};
  EXPECT_EQ(F<nvmlDeviceGetUtilizationRates_fn>("nvmlDeviceGetUtilizationRates")(gpu, &util),
            NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 97u);
  EXPECT_EQ(util.memory, 60u);
  auto clock = F<nvmlDeviceGetClock_fn>("nvmlDeviceGetMaxClockInfo");
  EXPECT_EQ(clock(gpu, NVML_CLOCK_GRAPHICS, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 1410u);
  EXPECT_EQ(clock(gpu, NVML_CLOCK_MEM, &value), NVML_SUCCESS);
  EXPECT_EQ(value, 1593u);
  EXPECT_EQ(clock(gpu, 7, &value), NVML_ERROR_INVALID_ARGUMENT);
  int major = 0, minor = 0;
  EXPECT_EQ(F<nvmlDeviceGetCudaComputeCapability_fn>("nvmlDeviceGetCudaComputeCapability")(
                gpu, &major, &minor),
            NVML_SUCCESS);
  EXPECT_EQ(major * 10 + minor, 80);
  nvmlComputeMode_t mode;
  EXPECT_EQ(F<nvmlDeviceGetComputeMode_fn>("nvmlDeviceGetComputeMode")(gpu, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
  unsigned current = 9, pending = 9;
  EXPECT_EQ(F<nvmlDeviceGetMigMode_fn>("nvmlDeviceGetMigMode")(gpu, &current, &pending),
            NVML_SUCCESS);
  EXPECT_EQ(current, 0u);
  EXPECT_EQ(pending, 1u);
  unsigned long long ecc = 0;
  auto ecc_fn = F<nvmlDeviceGetTotalEccErrors_fn>("nvmlDeviceGetTotalEccErrors");
  EXPECT_EQ(ecc_fn(gpu, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc), NVML_SUCCESS);
  EXPECT_EQ(ecc, 2u);
  EXPECT_EQ(ecc_fn(gpu, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &ecc), NVML_SUCCESS);
  EXPECT_EQ(ecc, 3u);
  unsigned corr, unc, is_pending, failure;
  EXPECT_EQ(F<nvmlDeviceGetRemappedRows_fn>("nvmlDeviceGetRemappedRows")(gpu, &corr, &unc,
                                                                         &is_pending, &failure),
            NVML_SUCCESS);
  EXPECT_EQ(unc, 6u);
  EXPECT_EQ(is_pending, 1u);
  unsigned long long reasons = 0;
  EXPECT_EQ(F<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetCurrentClocksEventReasons")(gpu, &reasons),
            NVML_SUCCESS);
  EXPECT_EQ(reasons, nvmlClocksEventReasonSwPowerCap);
  EXPECT_EQ(
      F<nvmlDeviceGetULongLong_fn>("nvmlDeviceGetCurrentClocksThrottleReasons")(gpu, &reasons),
      NVML_SUCCESS);
  EXPECT_EQ(reasons, nvmlClocksEventReasonSwPowerCap);
}

TEST_F(FakeNvmlTest, AffinityTopologyAndNvLink) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  unsigned long cpus[2] = {~0UL, ~0UL};
  ASSERT_EQ(F<nvmlDeviceGetCpuAffinity_fn>("nvmlDeviceGetCpuAffinity")(Handle(0), 2, cpus),
            NVML_SUCCESS);
  EXPECT_EQ(cpus[0], 0xFUL);
  EXPECT_EQ(cpus[1], 1UL);  // CPU 64
  unsigned long nodes[1] = {0};
  ASSERT_EQ(F<nvmlDeviceGetMemoryAffinity_fn>("nvmlDeviceGetMemoryAffinity")(
                Handle(0), 1, nodes, NVML_AFFINITY_SCOPE_NODE),
            NVML_SUCCESS);
  EXPECT_EQ(nodes[0], 2UL);  // NUMA node 1
  unsigned node = 0;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetNumaNodeId")(Handle(0), &node), NVML_SUCCESS);
  EXPECT_EQ(node, 1u);

  auto topo = F<nvmlDeviceGetTopologyCommonAncestor_fn>("nvmlDeviceGetTopologyCommonAncestor");
  nvmlGpuTopologyLevel_t level;
  EXPECT_EQ(topo(Handle(0), Handle(0), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_INTERNAL);
  EXPECT_EQ(topo(Handle(0), Handle(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);

  auto state = F<nvmlDeviceGetNvLinkState_fn>("nvmlDeviceGetNvLinkState");
  nvmlEnableState_t active;
  EXPECT_EQ(state(Handle(0), 5, &active), NVML_SUCCESS);
  EXPECT_EQ(active, NVML_FEATURE_ENABLED);
  EXPECT_EQ(state(Handle(0), 1, &active), NVML_SUCCESS);
  EXPECT_EQ(active, NVML_FEATURE_DISABLED);
  EXPECT_EQ(state(Handle(0), 18, &active), NVML_ERROR_INVALID_ARGUMENT);
  nvmlPciInfo_t peer{};
  EXPECT_EQ(F<nvmlDeviceGetNvLinkRemotePciInfo_fn>("nvmlDeviceGetNvLinkRemotePciInfo_v2")(Handle(0),
                                                                                          5, &peer),
            NVML_SUCCESS);
  EXPECT_STREQ(peer.busId, "00000001:AB:00.0");
}

// NVSwitch ends: nvmlDeviceGetNvLinkRemoteDeviceType says SWITCH, the remote PCI address
// is the switch's; a link to a GPU says GPU.
TEST_F(FakeNvmlTest, NvLinkRemoteDeviceTypeTellsSwitchesFromGpus) {
  json s = MinimalScenario();
  s["gpus"][0]["nvlinks"] = json::parse(R"([{"link": 0, "peer": 1}, {"link": 3, "switch": 2}])");
  UseScenario(WriteScenario(s));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  auto type = F<nvmlDeviceGetNvLinkRemoteDeviceType_fn>("nvmlDeviceGetNvLinkRemoteDeviceType");
  nvmlIntNvLinkDeviceType_t t = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
  EXPECT_EQ(type(Handle(0), 0, &t), NVML_SUCCESS);
  EXPECT_EQ(t, NVML_NVLINK_DEVICE_TYPE_GPU);
  EXPECT_EQ(type(Handle(0), 3, &t), NVML_SUCCESS);
  EXPECT_EQ(t, NVML_NVLINK_DEVICE_TYPE_SWITCH);
  EXPECT_EQ(type(Handle(0), 1, &t), NVML_ERROR_NOT_SUPPORTED);  // inactive
  EXPECT_EQ(type(Handle(0), 18, &t), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(type(Handle(0), 3, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlEnableState_t active = NVML_FEATURE_DISABLED;
  EXPECT_EQ(F<nvmlDeviceGetNvLinkState_fn>("nvmlDeviceGetNvLinkState")(Handle(0), 3, &active), NVML_SUCCESS);
  EXPECT_EQ(active, NVML_FEATURE_ENABLED);
  nvmlPciInfo_t end{};
  ASSERT_EQ(F<nvmlDeviceGetNvLinkRemotePciInfo_fn>("nvmlDeviceGetNvLinkRemotePciInfo_v2")(Handle(0), 3, &end),
            NVML_SUCCESS);
  EXPECT_STREQ(end.busId, "0000FFFF:02:00.0");
  EXPECT_EQ(F<nvmlDeviceGetNvLinkRemoteDeviceType_fn>("nvmlDeviceGetNvLinkRemoteDeviceType")(Handle(1), 0, &t),
            NVML_ERROR_NOT_SUPPORTED)
      << "GPU 1 has no nvlinks key: no NVLink";
}

TEST_F(FakeNvmlTest, NvLinkEndsAreAPeerOrASwitch) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json::parse(R"([{"link": 0, "peer": 1, "switch": 0}])"),
       "gpus[0]: nvlinks[0]: expected one of peer or switch\n"},
      {json::parse(R"([{"link": 0}])"), "gpus[0]: nvlinks[0]: expected one of peer or switch\n"},
      {json::parse(R"([{"link": 0, "switch": 16}])"), "gpus[0]: nvlinks: switch number >= 16\n"},
      {json::parse(R"([{"link": 4, "switch": 0}, {"link": 4, "peer": 1}])"), "gpus[0]: nvlinks: link 4 twice\n"},
  };
  for (const auto& [links, want] : cases) {
    json s = MinimalScenario();
    s["gpus"][0]["nvlinks"] = links;
    std::string path = WriteScenario(s);
    UseScenario(path);
    testing::internal::CaptureStderr();
    EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN) << want;
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "fake-nvml: " + path + ": " + want);
  }
}

TEST_F(FakeNvmlTest, RunningProcessesSizeProbeProtocol) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlDevice_t gpu = Handle(0);
  auto v2 = F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2");

  unsigned count = 0;
  EXPECT_EQ(v2(gpu, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);  // pid 100 (compute) and 101 (both)
  std::vector<nvmlProcessInfo_t> infos(4);
  count = 1;
  EXPECT_EQ(v2(gpu, &count, infos.data()), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  count = 4;
  ASSERT_EQ(v2(gpu, &count, infos.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(infos[0].pid, 100u);
  EXPECT_EQ(infos[0].usedGpuMemory, 1000u);
  EXPECT_EQ(infos[0].gpuInstanceId, NVML_VALUE_NOT_AVAILABLE_U32);
  EXPECT_EQ(infos[0].computeInstanceId, NVML_VALUE_NOT_AVAILABLE_U32);
  EXPECT_EQ(infos[1].pid, 101u);
  EXPECT_EQ(infos[1].usedGpuMemory, NVML_VALUE_NOT_AVAILABLE_ULL);
  EXPECT_EQ(infos[1].gpuInstanceId, 1u);
  EXPECT_EQ(infos[1].computeInstanceId, 0u);
  EXPECT_EQ(v2(gpu, nullptr, infos.data()), NVML_ERROR_INVALID_ARGUMENT);

  // v1: 16-byte entries, so the second pid sits at byte 16.
  auto v1 = F<ProcessesV1Fn>("nvmlDeviceGetGraphicsRunningProcesses");
  std::vector<nvmlProcessInfo_v1_t> v1_infos(4);
  count = 4;
  ASSERT_EQ(v1(gpu, &count, v1_infos.data()), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(v1_infos[0].pid, 101u);
  EXPECT_EQ(v1_infos[1].pid, 102u);
  EXPECT_EQ(v1_infos[1].usedGpuMemory, 3000u);

  // No processes: SUCCESS with count 0 even for a null buffer.
  count = 0;
  EXPECT_EQ(F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v3")(Handle(1), &count, nullptr),
            NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
}

TEST_F(FakeNvmlTest, InjectedErrors) {
  json s = MinimalScenario();
  s["errors"] = {{"nvmlDeviceGetPowerUsage", "NO_PERMISSION"}, {"nvmlSystemGetDriverVersion", 999}};
  s["gpus"][0]["errors"] = {
      {"nvmlDeviceGetMemoryInfo_v2", "GPU_IS_LOST"},
      {"nvmlDeviceGetComputeRunningProcesses_v2", {{"error", "INSUFFICIENT_SIZE"}, {"times", 1}}}};
  UseScenario(WriteScenario(s));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  unsigned power = 0;
  auto power_fn = F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerUsage");
  EXPECT_EQ(power_fn(Handle(0), &power), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(power_fn(Handle(1), &power), NVML_ERROR_NO_PERMISSION);  // top level: every GPU
  char buf[80];
  EXPECT_EQ(F<nvmlSystemGetString_fn>("nvmlSystemGetDriverVersion")(buf, sizeof buf),
            NVML_ERROR_UNKNOWN);

  nvmlMemory_v2_t mem{};
  mem.version = nvmlMemory_v2;
  auto mem_fn = F<nvmlDeviceGetMemoryInfo_v2_fn>("nvmlDeviceGetMemoryInfo_v2");
  EXPECT_EQ(mem_fn(Handle(0), &mem), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(mem_fn(Handle(1), &mem), NVML_ERROR_NOT_SUPPORTED);  // per GPU only
  nvmlMemory_t v1{};
  EXPECT_EQ(F<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo")(Handle(0), &v1), NVML_SUCCESS);

  // "times": 1 fails the first call only; the injected INSUFFICIENT_SIZE asks for more room.
  auto procs = F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2");
  std::vector<nvmlProcessInfo_t> infos(8);
  unsigned count = 8;
  EXPECT_EQ(procs(Handle(0), &count, infos.data()), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(procs(Handle(0), &count, infos.data()), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(procs(Handle(0), &count, infos.data()), NVML_SUCCESS);
  // Resetting the counts re-arms it.
  F<ResetCountsFn>("fake_nvml_reset_call_counts")();
  count = 8;
  EXPECT_EQ(procs(Handle(0), &count, infos.data()), NVML_ERROR_INSUFFICIENT_SIZE);
}

TEST_F(FakeNvmlTest, InjectedInitError) {
  json s = MinimalScenario();
  s["errors"] = {{"nvmlInit_v2", {{"error", "NVML_ERROR_DRIVER_NOT_LOADED"}, {"times", 1}}}};
  UseScenario(WriteScenario(s));
  EXPECT_EQ(Init(), NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(Init(), NVML_SUCCESS);  // a retry succeeds
}

TEST_F(FakeNvmlTest, BadErrorNameIsMalformed) {
  json s = MinimalScenario();
  s["gpus"][1]["errors"] = {{"nvmlDeviceGetName", "ON_FIRE"}};
  UseScenario(WriteScenario(s));
  testing::internal::CaptureStderr();
  EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("gpus[1]: errors.nvmlDeviceGetName"),
            std::string::npos);
}

// Integer fields take only whole numbers in their type's range: anything else is one
// error line naming the field's path and the value (never a wrapped or undefined value).
TEST_F(FakeNvmlTest, OutOfRangeOrFractionalIntegersAreMalformed) {
  struct Case {
    std::function<void(json&)> edit;
    std::string want;  // the error after "fake-nvml: PATH: "
  };
  const std::string u32 = " is not a whole number from 0 to 4294967295\n";
  const Case cases[] = {
      {[](json& s) { s["gpus"][0]["power_usage_mw"] = 1e50; },
       "gpus[0]: power_usage_mw: 1e+50" + u32},
      {[](json& s) { s["gpus"][0]["power_usage_mw"] = -1; }, "gpus[0]: power_usage_mw: -1" + u32},
      {[](json& s) { s["gpus"][0]["power_usage_mw"] = 4294967296; },
       "gpus[0]: power_usage_mw: 4294967296" + u32},
      {[](json& s) { s["gpus"][1]["pci"]["bus"] = 1.5; }, "gpus[1]: pci.bus: 1.5" + u32},
      {[](json& s) { s["gpus"][0]["processes"][2]["pid"] = -5; },
       "gpus[0]: processes[2].pid: -5" + u32},
      {[](json& s) { s["gpus"][0]["nvlinks"][1]["peer"] = 0.5; },
       "gpus[0]: nvlinks[1].peer: 0.5" + u32},
      {[](json& s) { s["gpus"][0]["memory"]["used"] = -1; },
       "gpus[0]: memory.used: -1 is not a whole number from 0 to 18446744073709551615\n"},
      {[](json& s) { s["gpus"][0]["compute_capability"] = {8, 1e10}; },
       "gpus[0]: compute_capability: [1]: 10000000000.0 is not a whole number from -2147483648 "
       "to 2147483647\n"},
      {[](json& s) { s["driver"]["cuda_driver_version"] = 2147483648; },
       "driver.cuda_driver_version: 2147483648 is not a whole number from -2147483648 to "
       "2147483647\n"},
      {[](json& s) { s["errors"] = {{"nvmlDeviceGetName", 1e300}}; },
       "errors.nvmlDeviceGetName: 1e+300 is not a whole number from -2147483648 to 2147483647\n"},
  };
  for (const Case& c : cases) {
    json s = MinimalScenario();
    c.edit(s);
    std::string path = WriteScenario(s);
    UseScenario(path);
    testing::internal::CaptureStderr();
    EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN) << c.want;
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "fake-nvml: " + path + ": " + c.want);
  }
}

TEST_F(FakeNvmlTest, IntegerFieldsAcceptTheirBoundaryValues) {
  json s = MinimalScenario();
  s["gpus"][0]["power_usage_mw"] = 4294967295u;  // UINT_MAX
  s["gpus"][0]["temperature"] = 0;
  s["gpus"][0]["power_limit_mw"] = 400000.0;  // a whole number written as floating point
  s["gpus"][0]["memory"] = {{"total", 18446744073709551615ull}, {"reserved", 0}, {"used", 1}};
  UseScenario(WriteScenario(s));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  unsigned value = 1;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetPowerUsage")(Handle(0), &value), NVML_SUCCESS);
  EXPECT_EQ(value, 4294967295u);
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetEnforcedPowerLimit")(Handle(0), &value),
            NVML_SUCCESS);
  EXPECT_EQ(value, 400000u);
  nvmlMemory_t mem{};
  EXPECT_EQ(F<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo")(Handle(0), &mem),
            NVML_SUCCESS);
  EXPECT_EQ(mem.total, 18446744073709551615ull);
  EXPECT_EQ(mem.used, 1u);
}

TEST_F(FakeNvmlTest, LostGpuStillHasAHandle) {
  json s = MinimalScenario();
  s["gpus"][0]["lost"] = true;
  UseScenario(WriteScenario(s));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlDevice_t gpu = Handle(0);  // succeeds
  char buf[96];
  EXPECT_EQ(F<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID")(gpu, buf, sizeof buf),
            NVML_ERROR_GPU_IS_LOST);
  unsigned count = 0;
  EXPECT_EQ(F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2")(gpu, &count, nullptr),
            NVML_ERROR_GPU_IS_LOST);
  nvmlDevice_t by_uuid = nullptr;
  EXPECT_EQ(F<HandleByStringFn>("nvmlDeviceGetHandleByUUID")(
                "GPU-11111111-2222-3333-4444-555555555555", &by_uuid),
            NVML_ERROR_GPU_IS_LOST);
  // The other GPU is unaffected.
  EXPECT_EQ(F<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID")(Handle(1), buf, sizeof buf),
            NVML_SUCCESS);
}

TEST_F(FakeNvmlTest, HotReloadKeepsHandles) {
  json s = MinimalScenario();
  s["gpus"][1]["utilization"] = {{"gpu", 0}, {"memory", 0}};
  UseScenario(WriteScenario(s));
  ASSERT_EQ(Init(), NVML_SUCCESS);
  nvmlDevice_t gpu1 = Handle(1);
  auto procs = F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2");
  auto util_fn = F<nvmlDeviceGetUtilizationRates_fn>("nvmlDeviceGetUtilizationRates");
  unsigned count = 0;
  ASSERT_EQ(procs(gpu1, &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);

  // A process appears and utilization jumps.
  s["gpus"][1]["utilization"] = {{"gpu", 100}, {"memory", 80}};
  s["gpus"][1]["processes"] = {{{"pid", 4242}, {"used_memory", 123456789}}};
  WriteScenario(s);
  StartSnapshot();
  count = 0;
  EXPECT_EQ(procs(gpu1, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);
  nvmlUtilization_t util{};
  EXPECT_EQ(util_fn(gpu1, &util), NVML_SUCCESS);
  EXPECT_EQ(util.gpu, 100u);

  // A broken rewrite keeps the previous state (and says so once on stderr).
  std::string path = dir_ + "/scenario.json";
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << "{ not json";
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
  testing::internal::CaptureStderr();
  StartSnapshot();
  EXPECT_EQ(util_fn(gpu1, &util), NVML_SUCCESS);
  StartSnapshot();
  EXPECT_EQ(util_fn(gpu1, &util), NVML_SUCCESS);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(util.gpu, 100u);

  // The GPU is lost; the handle taken before is still the one that reports it.
  s["gpus"][1]["lost"] = true;
  WriteScenario(s);
  StartSnapshot();
  EXPECT_EQ(util_fn(gpu1, &util), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(Handle(1), gpu1);
}

TEST_F(FakeNvmlTest, HotReloadSeesSameSizeRewriteInPlace) {
  json s = MinimalScenario();
  s["gpus"][0]["temperature"] = 40;
  std::string path = WriteScenario(s);
  UseScenario(path);
  ASSERT_EQ(Init(), NVML_SUCCESS);
  auto temperature = F<nvmlDeviceGetTemperature_fn>("nvmlDeviceGetTemperature");
  unsigned temp = 0;
  ASSERT_EQ(temperature(Handle(0), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  EXPECT_EQ(temp, 40u);
  // Same size, same inode: only the mtime tells. Set it explicitly so a coarse clock
  // cannot hide the change.
  s["gpus"][0]["temperature"] = 91;
  std::ofstream(path, std::ios::trunc) << s.dump(2);
  struct timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 123}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  StartSnapshot();
  ASSERT_EQ(temperature(Handle(0), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
  EXPECT_EQ(temp, 91u);
}

TEST_F(FakeNvmlTest, CountsCalls) {
  UseScenario(WriteScenario(MinimalScenario()));
  unsigned count = 0;
  auto count_fn = F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2");
  EXPECT_EQ(count_fn(&count), NVML_ERROR_UNINITIALIZED);  // failed calls count too
  ASSERT_EQ(Init(), NVML_SUCCESS);
  EXPECT_EQ(count_fn(&count), NVML_SUCCESS);
  EXPECT_EQ(CallCount("nvmlDeviceGetCount_v2"), 2u);
  EXPECT_EQ(CallCount("nvmlInit_v2"), 1u);
  EXPECT_EQ(CallCount("nvmlDeviceGetCount"), 0u);
  EXPECT_EQ(CallCount(nullptr), 0u);
  F<ResetCountsFn>("fake_nvml_reset_call_counts")();
  EXPECT_EQ(CallCount("nvmlDeviceGetCount_v2"), 0u);
}

// ---- the legacy variant -----------------------------------------------------------------

class FakeNvmlLegacyTest : public FakeNvmlTest {
 protected:
  Lib& lib() override { return Lib::Legacy(); }
};

TEST_F(FakeNvmlLegacyTest, LacksVersionedSymbols) {
  for (const char* name :
       {"nvmlInit_v2", "nvmlInitWithFlags", "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetNumaNodeId", "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetNvLinkRemotePciInfo_v2",
        "nvmlDeviceGetNvLinkRemoteDeviceType"}) {
    EXPECT_EQ(lib().Raw(name), nullptr) << name;
    EXPECT_NE(Lib::Full().Raw(name), nullptr) << name;
  }
  for (const char* name :
       {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses",
        "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPciInfo",
        "fake_nvml_call_count"}) {
    EXPECT_NE(lib().Raw(name), nullptr) << name;
  }
}

TEST_F(FakeNvmlLegacyTest, OldNamesWork) {
  UseScenario(WriteScenario(MinimalScenario()));
  ASSERT_EQ(F<nvmlInit_fn>("nvmlInit")(), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount")(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(F<nvmlDeviceGetHandleByIndex_fn>("nvmlDeviceGetHandleByIndex")(0, &gpu), NVML_SUCCESS);
  std::vector<nvmlProcessInfo_v1_t> infos(4);
  count = 4;
  ASSERT_EQ(F<ProcessesV1Fn>("nvmlDeviceGetComputeRunningProcesses")(gpu, &count, infos.data()),
            NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(infos[1].pid, 101u);
  // The two variants are separate instances: the full one is not initialized.
  unsigned full_count = 0;
  EXPECT_EQ(Lib::Full().Get<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2")(&full_count),
            NVML_ERROR_UNINITIALIZED);
}

// ---- shipped scenarios ------------------------------------------------------------------

std::vector<std::string> ShippedScenarios() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(GPUMAN_TEST_SCENARIO_DIR)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(FakeNvmlTest, ShippedScenariosAreAllThere) {
  EXPECT_EQ(ShippedScenarios(),
            (std::vector<std::string>{"a100-4.json", "a100-mig.json", "h100-8.json", "h100-mig.json",
                                      "lost-gpu.json", "no-driver.json", "workstation-mixed.json"}));
}

// MIG devices follow NVML's MIG API: slots 0 .. max-1 by index, NOT_FOUND for an empty
// slot, INVALID_ARGUMENT past the last; a MIG handle answers UUID, memory, instance ids and
// attributes, and leads back to its parent; a whole GPU handle is not a MIG handle.
TEST_F(FakeNvmlTest, MigDevicesFollowNvmlsMigApi) {
  UseScenario(std::string(GPUMAN_TEST_SCENARIO_DIR) + "/h100-mig.json");
  ASSERT_EQ(Init(), NVML_SUCCESS);
  using UIntFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
  unsigned max = 0;
  ASSERT_EQ(F<UIntFn>("nvmlDeviceGetMaxMigDeviceCount")(Handle(0), &max), NVML_SUCCESS);
  EXPECT_EQ(max, 7u);
  ASSERT_EQ(F<UIntFn>("nvmlDeviceGetMaxMigDeviceCount")(Handle(1), &max), NVML_SUCCESS);
  EXPECT_EQ(max, 0u);  // MIG mode off
  auto by_index = F<nvmlDeviceGetMigDeviceHandleByIndex_fn>("nvmlDeviceGetMigDeviceHandleByIndex");
  nvmlDevice_t mig = nullptr;
  EXPECT_EQ(by_index(Handle(0), 3, &mig), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_index(Handle(0), 7, &mig), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(by_index(Handle(0), 1, &mig), NVML_SUCCESS);
  ASSERT_NE(mig, nullptr);
  EXPECT_NE(mig, Handle(1));

  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  ASSERT_EQ(F<nvmlDeviceGetString_fn>("nvmlDeviceGetUUID")(mig, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_STREQ(uuid, "MIG-7a3e5c2b-14d6-5f80-b9c2-1d3e4f5a6b72");
  unsigned is_mig = 0, gi = 0, ci = 99;
  ASSERT_EQ(F<UIntFn>("nvmlDeviceIsMigDeviceHandle")(mig, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 1u);
  ASSERT_EQ(F<UIntFn>("nvmlDeviceIsMigDeviceHandle")(Handle(0), &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  ASSERT_EQ(F<UIntFn>("nvmlDeviceGetGpuInstanceId")(mig, &gi), NVML_SUCCESS);
  ASSERT_EQ(F<UIntFn>("nvmlDeviceGetComputeInstanceId")(mig, &ci), NVML_SUCCESS);
  EXPECT_EQ(gi, 3u);
  EXPECT_EQ(ci, 0u);
  EXPECT_EQ(F<UIntFn>("nvmlDeviceGetGpuInstanceId")(Handle(0), &gi), NVML_ERROR_NOT_SUPPORTED);

  nvmlDeviceAttributes_t attr{};
  ASSERT_EQ(F<nvmlDeviceGetAttributes_fn>("nvmlDeviceGetAttributes_v2")(mig, &attr), NVML_SUCCESS);
  EXPECT_EQ(attr.gpuInstanceSliceCount, 2u);
  EXPECT_EQ(attr.computeInstanceSliceCount, 2u);
  EXPECT_EQ(attr.memorySizeMB, 20096u);
  EXPECT_EQ(F<nvmlDeviceGetAttributes_fn>("nvmlDeviceGetAttributes_v2")(Handle(0), &attr), NVML_ERROR_NOT_SUPPORTED);
  nvmlMemory_t mem{};
  ASSERT_EQ(F<nvmlDeviceGetMemoryInfo_fn>("nvmlDeviceGetMemoryInfo")(mig, &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, 20096ull << 20);
  EXPECT_EQ(mem.used, 64ull << 20);

  nvmlDevice_t parent = nullptr;
  auto from_mig = F<nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  ASSERT_EQ(from_mig(mig, &parent), NVML_SUCCESS);
  EXPECT_EQ(parent, Handle(0));
  EXPECT_EQ(from_mig(Handle(0), &parent), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeNvmlTest, MigDevicesNeedMigModeOn) {
  json gpu = {{"uuid", "GPU-00000000-0000-0000-0000-000000000001"},
              {"mig_mode", {{"current", 0}}},
              {"mig_devices", json::array({{{"uuid", "MIG-1"}, {"gpu_instance_id", 1}, {"gpu_slices", 1}, {"memory_mib", 9728}}})}};
  UseScenario(WriteScenario(json{{"gpus", json::array({gpu})}}));
  EXPECT_EQ(Init(), NVML_ERROR_UNKNOWN);  // the scenario is refused
  gpu["mig_mode"]["current"] = 1;
  UseScenario(WriteScenario(json{{"gpus", json::array({gpu})}}));
  EXPECT_EQ(Init(), NVML_SUCCESS);
}

TEST_F(FakeNvmlTest, EveryShippedScenarioLoads) {
  const std::regex uuid_format("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  for (const std::string& name : ShippedScenarios()) {
    SCOPED_TRACE(name);
    std::string path = std::string(GPUMAN_TEST_SCENARIO_DIR) + "/" + name;
    json scenario = json::parse(std::ifstream(path));
    UseScenario(path);
    if (name == "no-driver.json") {
      EXPECT_EQ(Init(), NVML_ERROR_DRIVER_NOT_LOADED);
      EXPECT_EQ(F<nvmlInit_fn>("nvmlInit")(), NVML_ERROR_DRIVER_NOT_LOADED);
      EXPECT_EQ(F<InitWithFlagsFn>("nvmlInitWithFlags")(0), NVML_ERROR_DRIVER_NOT_LOADED);
      continue;
    }
    ASSERT_EQ(Init(), NVML_SUCCESS);
    unsigned count = 0;
    ASSERT_EQ(F<nvmlDeviceGetCount_fn>("nvmlDeviceGetCount_v2")(&count), NVML_SUCCESS);
    ASSERT_EQ(count, scenario["gpus"].size());
    for (unsigned i = 0; i < count; ++i) {
      const json& gpu = scenario["gpus"][i];
      EXPECT_TRUE(std::regex_match(gpu["uuid"].get<std::string>(), uuid_format)) << gpu["uuid"];
      if (gpu.value("lost", false)) continue;
      EXPECT_EQ(Uuid(Handle(i)), gpu["uuid"]);
      nvmlMemory_v2_t mem{};
      mem.version = nvmlMemory_v2;
      EXPECT_EQ(F<nvmlDeviceGetMemoryInfo_v2_fn>("nvmlDeviceGetMemoryInfo_v2")(Handle(i), &mem),
                NVML_SUCCESS);
    }
    // host_processes (read by gpuman --simulate) describes processes some GPU runs.
    std::set<std::string> gpu_pids;
    for (const json& gpu : scenario["gpus"]) {
      for (const json& proc : gpu.value("processes", json::array())) {
        gpu_pids.insert(std::to_string(proc["pid"].get<unsigned>()));
      }
    }
    const json host = scenario.value("host_processes", json::object());
    for (const auto& [pid, info] : host.items()) {
      EXPECT_TRUE(gpu_pids.count(pid)) << pid;
      EXPECT_TRUE(info.contains("user") && info.contains("uid") && info.contains("command")) << pid;
    }
    ASSERT_EQ(F<nvmlShutdown_fn>("nvmlShutdown")(), NVML_SUCCESS);
  }
}

// A link has two ends: in every shipped scenario GPU i lists as many links to GPU j as j
// lists to i, and a GPU's switch links are all it has or none of them (an NVSwitch box).
TEST_F(FakeNvmlTest, ShippedLinkMatricesAreSymmetric) {
  for (const std::string& name : ShippedScenarios()) {
    SCOPED_TRACE(name);
    json scenario = json::parse(std::ifstream(std::string(GPUMAN_TEST_SCENARIO_DIR) + "/" + name));
    const size_t n = scenario["gpus"].size();
    std::vector<std::vector<int>> links(n, std::vector<int>(n, 0));
    std::vector<int> switch_links(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (const json& l : scenario["gpus"][i].value("nvlinks", json::array())) {
        if (l.contains("switch")) {
          ++switch_links[i];
        } else {
          ++links[i].at(l["peer"].get<size_t>());
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(links[i][i], 0) << "GPU " << i << " linked to itself";
      for (size_t j = i + 1; j < n; ++j) EXPECT_EQ(links[i][j], links[j][i]) << "GPUs " << i << " and " << j;
      if (switch_links[i] > 0) {
        EXPECT_EQ(switch_links[i], switch_links[0]) << "GPU " << i << ": every GPU as many switch links";
      }
    }
  }
}

TEST_F(FakeNvmlTest, A100TopologyFollowsTheNvLinkPairs) {
  UseScenario(std::string(GPUMAN_TEST_SCENARIO_DIR) + "/a100-4.json");
  ASSERT_EQ(Init(), NVML_SUCCESS);
  auto topo = F<nvmlDeviceGetTopologyCommonAncestor_fn>("nvmlDeviceGetTopologyCommonAncestor");
  nvmlGpuTopologyLevel_t level;
  ASSERT_EQ(topo(Handle(0), Handle(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SINGLE);
  ASSERT_EQ(topo(Handle(2), Handle(0), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);
  nvmlPciInfo_t peer{}, gpu1{};
  ASSERT_EQ(F<nvmlDeviceGetNvLinkRemotePciInfo_fn>("nvmlDeviceGetNvLinkRemotePciInfo_v2")(
                Handle(0), 11, &peer),
            NVML_SUCCESS);
  ASSERT_EQ(F<nvmlDeviceGetPciInfo_fn>("nvmlDeviceGetPciInfo_v3")(Handle(1), &gpu1), NVML_SUCCESS);
  EXPECT_STREQ(peer.busId, gpu1.busId);
  // GPU 1 runs alice's two processes.
  unsigned count = 0;
  EXPECT_EQ(F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2")(Handle(1), &count, nullptr),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
}

TEST_F(FakeNvmlTest, WorkstationHasForeignPidsAndAGraphicsProcess) {
  std::string path = std::string(GPUMAN_TEST_SCENARIO_DIR) + "/workstation-mixed.json";
  json scenario = json::parse(std::ifstream(path));
  UseScenario(path);
  ASSERT_EQ(Init(), NVML_SUCCESS);
  std::vector<nvmlProcessInfo_t> infos(8);
  unsigned count = 8;
  ASSERT_EQ(
      F<ProcessesV2Fn>("nvmlDeviceGetGraphicsRunningProcesses_v2")(Handle(0), &count, infos.data()),
      NVML_SUCCESS);
  ASSERT_GE(count, 1u);
  EXPECT_EQ(
      scenario["host_processes"][std::to_string(infos[0].pid)]["command"].get<std::string>().find(
          "Xorg"),
      std::string("/usr/lib/xorg/").size());
  count = 8;
  ASSERT_EQ(
      F<ProcessesV2Fn>("nvmlDeviceGetComputeRunningProcesses_v2")(Handle(2), &count, infos.data()),
      NVML_SUCCESS);
  ASSERT_GE(count, 1u);
  for (unsigned i = 0; i < count; ++i) {
    EXPECT_FALSE(scenario["host_processes"].contains(std::to_string(infos[i].pid)));
  }
  unsigned fan = 0;
  EXPECT_EQ(F<nvmlDeviceGetUInt_fn>("nvmlDeviceGetFanSpeed")(Handle(1), &fan), NVML_SUCCESS);
}

}  // namespace
