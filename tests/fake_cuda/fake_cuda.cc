// A stand-in libcuda.so.1 for the tests of `gpuman bench` (src/cuda/): the entry points
// gpuman's CUDA loader resolves, over the GPUs of the scenario the NVML stand-in serves
// ($GPUMAN_FAKE_NVML_SCENARIO: their UUIDs and names), narrowed by CUDA_VISIBLE_DEVICES as
// the real library does. It runs nothing: a launch of gpuman's kernels (src/cuda/kernels.h)
// advances the device's clock by the time the work would take at the figures the test
// sets, so results are exact:
//   GPUMAN_FAKE_CUDA_TFLOPS  FP32 TFLOPS per scenario GPU, by index: "20,80.5" (default 10)
//   GPUMAN_FAKE_CUDA_GBPS    memory GB/s per scenario GPU, by index (default 500)
//   GPUMAN_FAKE_CUDA_PTX_LOG a file the PTX text given to cuModuleLoadData is written to
//   GPUMAN_FAKE_CUDA_INIT    a CUresult for cuInit to return (e.g. 100: no device)
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/cuda_abi.h"
#include "cuda/kernels.h"

namespace {

struct Device {
  std::string uuid, name;
  double tflops = 10, gbps = 500;
  double clock_ms = 0;
};

struct Event {
  double t = 0;
};

struct State {
  bool loaded = false;
  std::vector<Device> devices;  // as CUDA sees them
  int current = -1;             // the device of the current context
  std::string ptx;
  unsigned long long next_ptr = 0x100000000ull;
};

State& S() {
  static State s;
  return s;
}

std::vector<double> Figures(const char* var) {
  std::vector<double> out;
  const char* v = std::getenv(var);
  if (v == nullptr) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atof(item.c_str()));
  return out;
}

bool ParseUuid(const std::string& text, CUuuid& out) {
  std::string hex;
  for (char c : text.starts_with("GPU-") ? text.substr(4) : text) {
    if (std::isxdigit(static_cast<unsigned char>(c))) hex += c;
  }
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) out.bytes[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

CUresult Load() {
  State& s = S();
  if (s.loaded) return CUDA_SUCCESS;
  const char* path = std::getenv("GPUMAN_FAKE_NVML_SCENARIO");
  if (path == nullptr) return CUDA_ERROR_NO_DEVICE;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("gpus")) return CUDA_ERROR_NO_DEVICE;
  const auto tflops = Figures("GPUMAN_FAKE_CUDA_TFLOPS");
  const auto gbps = Figures("GPUMAN_FAKE_CUDA_GBPS");
  std::vector<Device> all;
  for (size_t i = 0; i < j["gpus"].size(); ++i) {
    const auto& g = j["gpus"][i];
    Device d;
    d.uuid = g.value("uuid", "");
    d.name = g.value("name", "stand-in GPU");
    if (i < tflops.size()) d.tflops = tflops[i];
    if (i < gbps.size()) d.gbps = gbps[i];
    all.push_back(d);
  }
  // CUDA_VISIBLE_DEVICES: UUIDs or indices, in the order given; unset: all.
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (cvd == nullptr) {
    s.devices = all;
  } else {
    std::stringstream ss(cvd);
    std::string item;
    while (std::getline(ss, item, ',')) {
      for (size_t i = 0; i < all.size(); ++i) {
        if (all[i].uuid == item || std::to_string(i) == item) s.devices.push_back(all[i]);
      }
    }
  }
  s.loaded = true;
  return CUDA_SUCCESS;
}

Device* Current() {
  State& s = S();
  if (s.current < 0 || s.current >= static_cast<int>(s.devices.size())) return nullptr;
  return &s.devices[static_cast<size_t>(s.current)];
}

// Functions are the kernels' names, interned.
const char kFma[] = "gpuman_fma";
const char kCopy[] = "gpuman_copy";

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT CUresult cuInit(unsigned int) {
  if (const char* rc = std::getenv("GPUMAN_FAKE_CUDA_INIT"); rc != nullptr && *rc) return std::atoi(rc);
  return Load();
}
EXPORT CUresult cuDriverGetVersion(int* v) {
  *v = 12040;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorString(CUresult rc, const char** text) {
  switch (rc) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    default: *text = "unknown error"; break;
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int* n) {
  if (!S().loaded) return CUDA_ERROR_NOT_INITIALIZED;
  *n = static_cast<int>(S().devices.size());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (!S().loaded) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= static_cast<int>(S().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (d < 0 || d >= static_cast<int>(S().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", S().devices[static_cast<size_t>(d)].name.c_str());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) {
  if (d < 0 || d >= static_cast<int>(S().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  return ParseUuid(S().devices[static_cast<size_t>(d)].uuid, *uuid) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice d) { return cuDeviceGetUuid_v2(uuid, d); }
EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice d) {
  if (d < 0 || d >= static_cast<int>(S().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *value = attribute == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 100 : 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (d < 0 || d >= static_cast<int>(S().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(d) + 1);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }
EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  S().current = static_cast<int>(reinterpret_cast<uintptr_t>(ctx)) - 1;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (Current() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  S().ptx = static_cast<const char*>(image);
  if (const char* log = std::getenv("GPUMAN_FAKE_CUDA_PTX_LOG"); log != nullptr && *log) {
    std::ofstream(log) << S().ptx;
  }
  *module = reinterpret_cast<CUmodule>(&S());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
EXPORT CUresult cuModuleGetFunction(CUfunction* fn, CUmodule, const char* name) {
  const std::string entry = std::string(".entry ") + name + "(";
  if (S().ptx.find(entry) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
  if (std::strcmp(name, kFma) == 0) *fn = reinterpret_cast<CUfunction>(const_cast<char*>(kFma));
  else if (std::strcmp(name, kCopy) == 0) *fn = reinterpret_cast<CUfunction>(const_cast<char*>(kCopy));
  else return CUDA_ERROR_NOT_FOUND;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  *p = S().next_ptr;
  S().next_ptr += (bytes + 0xffff) & ~size_t{0xffff};
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr) { return CUDA_SUCCESS; }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t) { return CUDA_SUCCESS; }
EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned, CUstream, void** params, void**) {
  Device* d = Current();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const double threads = double(gx) * gy * gz * bx * by * bz;
  const char* name = reinterpret_cast<const char*>(fn);
  if (name == kFma) {
    const unsigned iters = *static_cast<unsigned*>(params[1]);
    d->clock_ms += threads * iters * gpuman::cuda::kFmasPerRound * 2 / (d->tflops * 1e9);
  } else if (name == kCopy) {
    const unsigned long long n = *static_cast<unsigned long long*>(params[2]);
    d->clock_ms += 2.0 * double(n) * gpuman::cuda::kCopyElementBytes / (d->gbps * 1e6);
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(new Event());
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream) {
  Device* d = Current();
  if (d == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  reinterpret_cast<Event*>(e)->t = d->clock_ms;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  *ms = static_cast<float>(reinterpret_cast<Event*>(end)->t - reinterpret_cast<Event*>(start)->t);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
