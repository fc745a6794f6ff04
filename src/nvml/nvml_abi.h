// Our own declarations of the parts of the NVML C ABI that gpuman uses.
// Written from NVIDIA's NVML API Reference and the aggregated header in NVIDIA/DCGM
// (sdk/nvidia/nvml/dcgm_nvml.h); no NVIDIA header is needed at build time.
// Shared by the loader (src/nvml/library.cc) and the stand-in library (src/sim/),
// so the two can never disagree about a layout. Sizes are for LP64 Linux and are
// checked with static_assert below. Plain C types only: this is an ABI edge.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// nvmlReturn_t (since NVML 1; codes added over time, numbers are stable).
typedef int nvmlReturn_t;
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_ENABLED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999,
};

// Opaque device handle (NVML 1).
typedef struct nvmlDevice_st* nvmlDevice_t;

// Buffer sizes (NVML header constants).
enum : unsigned {
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,  // R470+; older constant was 80
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_SERIAL_BUFFER_SIZE = 30,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16,
  NVML_NVLINK_MAX_LINKS = 18,
};

// Value used for "not available" in 64-bit fields such as usedGpuMemory.
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL
// gpuInstanceId/computeInstanceId when the process is not on a MIG instance.
#define NVML_VALUE_NOT_AVAILABLE_U32 0xFFFFFFFFu

// nvmlPciInfo_t: same struct for nvmlDeviceGetPciInfo, _v2 and _v3 (68 bytes).
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  // "%04X:%02X:%02X.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;     // high 16 bits device id, low 16 bits vendor id (0x10DE)
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "%08X:%02X:%02X.0"
} nvmlPciInfo_t;

// nvmlMemory_t (v1): used = reserved + allocated.
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// nvmlMemory_v2_t (R510+): used = allocated only; reserved separate. Versioned struct.
typedef struct nvmlMemory_v2_st {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
// NVML_STRUCT_VERSION(Memory, 2) == sizeof(nvmlMemory_v2_t) | (2 << 24) == 0x02000028 on LP64.
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

// nvmlUtilization_t (NVML 1).
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlProcessInfo_v1_t: entries of the unsuffixed *RunningProcesses (16 bytes).
typedef struct nvmlProcessInfo_v1_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

// nvmlProcessInfo_t (= v2): entries of *_v2 and (except 535.43-535.86) *_v3 (24 bytes).
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

// Enums passed by value (all are C ints on the ABI).
typedef int nvmlTemperatureSensors_t;  // NVML_TEMPERATURE_GPU = 0
enum : int { NVML_TEMPERATURE_GPU = 0 };
typedef int nvmlClockType_t;
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
typedef int nvmlPstates_t;  // 0..15, 32 = unknown
enum : int { NVML_PSTATE_UNKNOWN = 32 };
typedef int nvmlComputeMode_t;
enum : int {
  NVML_COMPUTEMODE_DEFAULT = 0,
  NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,  // deprecated
  NVML_COMPUTEMODE_PROHIBITED = 2,
  NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};
typedef int nvmlEnableState_t;
enum : int { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
typedef int nvmlMemoryErrorType_t;
enum : int { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
typedef int nvmlEccCounterType_t;
enum : int { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
typedef int nvmlAffinityScope_t;
enum : int { NVML_AFFINITY_SCOPE_NODE = 0, NVML_AFFINITY_SCOPE_SOCKET = 1 };
// nvmlIntNvLinkDeviceType_t: what is at the far end of an NVLink
// (nvmlDeviceGetNvLinkRemoteDeviceType).
typedef int nvmlIntNvLinkDeviceType_t;
enum : int {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
};
typedef int nvmlGpuTopologyLevel_t;
enum : int {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};

// Clock event (throttle) reason bits.
enum : unsigned long long {
  nvmlClocksEventReasonGpuIdle = 0x1ULL,
  nvmlClocksEventReasonApplicationsClocksSetting = 0x2ULL,
  nvmlClocksEventReasonSwPowerCap = 0x4ULL,
  nvmlClocksThrottleReasonHwSlowdown = 0x8ULL,
  nvmlClocksEventReasonSyncBoost = 0x10ULL,
  nvmlClocksEventReasonSwThermalSlowdown = 0x20ULL,
  nvmlClocksThrottleReasonHwThermalSlowdown = 0x40ULL,
  nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80ULL,
  nvmlClocksEventReasonDisplayClockSetting = 0x100ULL,
};

// Events (Linux only). nvmlEventSet_t is opaque; operations on one set are not thread
// safe, so one thread owns each set (nvml/nvml_event_source.cc).
typedef struct nvmlEventSet_st* nvmlEventSet_t;
enum : unsigned long long {
  nvmlEventTypeSingleBitEccError = 0x1ULL,
  nvmlEventTypeDoubleBitEccError = 0x2ULL,
  nvmlEventTypePState = 0x4ULL,
  nvmlEventTypeXidCriticalError = 0x8ULL,
  nvmlEventTypeClock = 0x10ULL,
};
// nvmlEventData_t as filled by nvmlEventSetWait_v2 (32 bytes). The older nvmlEventSetWait
// fills only the first three members; gpuman pre-sets the instance ids to 0xFFFFFFFF.
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid; 999 = unknown Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

// One per-process utilization sample (nvmlDeviceGetProcessUtilization, 32 bytes).
typedef struct nvmlProcessUtilizationSample_st {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp in microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

// MIG (Multi-Instance GPU, A100/H100 and newer, Linux). A MIG device handle stands for one
// compute instance; NVML accepts it in place of a GPU handle for some queries (UUID,
// memory info, attributes). nvmlDeviceGetMigDeviceHandleByIndex takes indices 0 ..
// nvmlDeviceGetMaxMigDeviceCount() - 1 and answers NVML_ERROR_NOT_FOUND for an index with
// no MIG device behind it (NVML API Reference, "Multi Instance GPU Management").
enum : unsigned { NVML_DEVICE_MIG_DISABLE = 0, NVML_DEVICE_MIG_ENABLE = 1 };

// nvmlDeviceAttributes_t as filled by nvmlDeviceGetAttributes_v2 (40 bytes; the first
// version, unsuffixed and deprecated since CUDA 11.1, lacked the slice counts and memory,
// so gpuman resolves only _v2). Supported on MIG device handles only.
typedef struct nvmlDeviceAttributes_st {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;  // MiB
} nvmlDeviceAttributes_t;

// Function pointer types, one per entry point we resolve. Names follow NVML.
typedef nvmlReturn_t (*nvmlInit_fn)(void);                     // nvmlInit_v2 / nvmlInit
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlSystemGetString_fn)(char*, unsigned int);  // Driver/NVML version
typedef nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_fn)(int*);
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);  // UUID/Name/Serial
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                                    unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetUInt_fn)(nvmlDevice_t, unsigned int*);  // power, fan, limits, numa
typedef nvmlReturn_t (*nvmlDeviceGetClock_fn)(nvmlDevice_t, nvmlClockType_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetPerformanceState_fn)(nvmlDevice_t, nvmlPstates_t*);
typedef nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability_fn)(nvmlDevice_t, int*, int*);
typedef nvmlReturn_t (*nvmlDeviceGetComputeMode_fn)(nvmlDevice_t, nvmlComputeMode_t*);
typedef nvmlReturn_t (*nvmlDeviceGetEnableState_fn)(nvmlDevice_t, nvmlEnableState_t*);  // persistence, retired pending
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
// nvmlDeviceGetGpuFabricInfo (R530+; NVSwitch systems): a GPU's registration with the NVLink
// fabric that Fabric Manager sets up. Layout of NVML's nvmlGpuFabricInfo_t (the first,
// unversioned struct): the cluster UUID, the status of the registration (an nvmlReturn_t),
// the clique id, and the state.
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2
#define NVML_GPU_FABRIC_STATE_COMPLETED 3
typedef struct {
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
} nvmlGpuFabricInfo_t;
typedef nvmlReturn_t (*nvmlDeviceGetGpuFabricInfo_fn)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
// nvmlDeviceSetMemoryLimits_v1 (newer drivers; root; not for MIG handles): the most memory
// the processes of one cgroup may allocate on the device. nameSpace is the cgroup's full
// sysfs path; soft 0 and hard ULLONG_MAX clear the limits (removing the cgroup does too).
typedef struct {
  const char* nameSpace;
  unsigned long long softLimit;
  unsigned long long hardLimit;
} nvmlSetMemoryLimits_v1_t;
typedef nvmlReturn_t (*nvmlDeviceSetMemoryLimits_v1_fn)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t*);
// nvmlDeviceGetNumGpuCores(device, unsigned int* numCores) and
// nvmlDeviceGetMemoryBusWidth(device, unsigned int* busWidth): the uint shape
// (nvmlDeviceGetUInt_fn) above.
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                       nvmlEccCounterType_t, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int*, unsigned int*,
                                                     unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetULongLong_fn)(nvmlDevice_t, unsigned long long*);  // clock events
typedef nvmlReturn_t (*nvmlDeviceGetCpuAffinity_fn)(nvmlDevice_t, unsigned int, unsigned long*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryAffinity_fn)(nvmlDevice_t, unsigned int, unsigned long*,
                                                       nvmlAffinityScope_t);
// *RunningProcesses: entry type depends on the symbol version (see library.cc).
typedef nvmlReturn_t (*nvmlDeviceGetRunningProcesses_fn)(nvmlDevice_t, unsigned int*, void*);
typedef nvmlReturn_t (*nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t, nvmlDevice_t,
                                                               nvmlGpuTopologyLevel_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemotePciInfo_fn)(nvmlDevice_t, unsigned int,
                                                            nvmlPciInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetNvLinkRemoteDeviceType_fn)(nvmlDevice_t, unsigned int,
                                                               nvmlIntNvLinkDeviceType_t*);

typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn)(nvmlDevice_t, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetAttributes_fn)(nvmlDevice_t, nvmlDeviceAttributes_t*);
// nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceIsMigDeviceHandle, nvmlDeviceGetGpuInstanceId
// and nvmlDeviceGetComputeInstanceId have the (nvmlDevice_t, unsigned int*) shape of
// nvmlDeviceGetUInt_fn.

typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t*);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlEventSetWait_fn)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                                           unsigned int*, unsigned long long);

}  // extern "C"

static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version word");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "v1 process entry is 16 bytes");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "v2/v3 process entry is 24 bytes");
static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
static_assert(offsetof(nvmlEventData_t, eventData) == 16, "nvmlEventData_t layout");
static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t layout");
static_assert(offsetof(nvmlDeviceAttributes_t, memorySizeMB) == 32, "nvmlDeviceAttributes_t layout");
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t layout");
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16, "sample layout");
