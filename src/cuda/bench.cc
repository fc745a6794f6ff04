#include "cuda/bench.h"

#include <algorithm>
#include <cmath>

#include "cuda/kernels.h"

namespace gpuman::cuda {
namespace {

constexpr double kTargetMs = 100;      // one timed launch, after calibration
constexpr unsigned kThreadsPerBlock = 256;
constexpr int kRepeats = 3;            // timed launches; the fastest counts
constexpr int kCopiesPerTiming = 20;   // a 256 MiB copy takes ~0.2 ms on HBM3: time 20 in a row

// One call, checked: "cuLaunchKernel: out of memory (code 2)".
Status Check(const CudaLibrary& lib, Sym sym, CUresult rc) {
  if (rc == CUDA_SUCCESS) return {};
  return MakeError(ErrorCode::kUnavailable, lib.Describe(lib.SymbolName(sym), rc));
}

// What a benchmark holds on its device, given back whatever happens.
class DeviceSession {
 public:
  DeviceSession(const CudaLibrary& lib, CUdevice device) : lib_(lib), device_(device) {}
  ~DeviceSession() {
    for (CUdeviceptr p : buffers_) lib_.Get<cuMemFree_fn>(Sym::kMemFree)(p);
    for (CUevent e : events_) lib_.Get<cuEventDestroy_fn>(Sym::kEventDestroy)(e);
    if (module_ != nullptr) lib_.Get<cuModuleUnload_fn>(Sym::kModuleUnload)(module_);
    if (retained_) {
      lib_.Get<cuCtxSetCurrent_fn>(Sym::kCtxSetCurrent)(nullptr);
      lib_.Get<cuDevicePrimaryCtxRelease_fn>(Sym::kDevicePrimaryCtxRelease)(device_);
    }
  }
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  Status Open() {
    CUcontext ctx = nullptr;
    if (auto st = Check(lib_, Sym::kDevicePrimaryCtxRetain,
                        lib_.Get<cuDevicePrimaryCtxRetain_fn>(Sym::kDevicePrimaryCtxRetain)(&ctx, device_));
        !st) {
      return st;
    }
    retained_ = true;
    if (auto st = Check(lib_, Sym::kCtxSetCurrent, lib_.Get<cuCtxSetCurrent_fn>(Sym::kCtxSetCurrent)(ctx)); !st) {
      return st;
    }
    if (auto st = Check(lib_, Sym::kModuleLoadData,
                        lib_.Get<cuModuleLoadData_fn>(Sym::kModuleLoadData)(&module_, kBenchPtx));
        !st) {
      return st;
    }
    for (CUevent* e : {&start_, &stop_}) {
      if (auto st = Check(lib_, Sym::kEventCreate, lib_.Get<cuEventCreate_fn>(Sym::kEventCreate)(e, CU_EVENT_DEFAULT));
          !st) {
        return st;
      }
      events_.push_back(*e);
    }
    return {};
  }

  Result<CUfunction> Function(const char* name) {
    CUfunction fn = nullptr;
    if (auto st = Check(lib_, Sym::kModuleGetFunction,
                        lib_.Get<cuModuleGetFunction_fn>(Sym::kModuleGetFunction)(&fn, module_, name));
        !st) {
      return st.error();
    }
    return fn;
  }

  /// Allocates `bytes`, halving down to `min_bytes` while the device is out of memory.
  Result<std::pair<CUdeviceptr, size_t>> Alloc(size_t bytes, size_t min_bytes) {
    for (;;) {
      CUdeviceptr p = 0;
      CUresult rc = lib_.Get<cuMemAlloc_fn>(Sym::kMemAlloc)(&p, bytes);
      if (rc == CUDA_SUCCESS) {
        buffers_.push_back(p);
        return std::make_pair(p, bytes);
      }
      if (rc != CUDA_ERROR_OUT_OF_MEMORY || bytes / 2 < min_bytes) {
        return Check(lib_, Sym::kMemAlloc, rc).error();
      }
      bytes /= 2;
    }
  }

  /// Launches `fn` `launches` times between the two events and returns the milliseconds
  /// between them.
  Result<double> TimedLaunch(CUfunction fn, unsigned grid, void** params, int launches = 1) {
    if (auto st = Check(lib_, Sym::kEventRecord, lib_.Get<cuEventRecord_fn>(Sym::kEventRecord)(start_, nullptr)); !st) {
      return st.error();
    }
    for (int i = 0; i < launches; ++i) {
      if (auto st = Check(lib_, Sym::kLaunchKernel,
                          lib_.Get<cuLaunchKernel_fn>(Sym::kLaunchKernel)(fn, grid, 1, 1, kThreadsPerBlock, 1, 1, 0,
                                                                          nullptr, params, nullptr));
          !st) {
        return st.error();
      }
    }
    if (auto st = Check(lib_, Sym::kEventRecord, lib_.Get<cuEventRecord_fn>(Sym::kEventRecord)(stop_, nullptr)); !st) {
      return st.error();
    }
    if (auto st = Check(lib_, Sym::kEventSynchronize, lib_.Get<cuEventSynchronize_fn>(Sym::kEventSynchronize)(stop_));
        !st) {
      return st.error();
    }
    float ms = 0;
    if (auto st = Check(lib_, Sym::kEventElapsedTime,
                        lib_.Get<cuEventElapsedTime_fn>(Sym::kEventElapsedTime)(&ms, start_, stop_));
        !st) {
      return st.error();
    }
    return static_cast<double>(ms);
  }

 private:
  const CudaLibrary& lib_;
  CUdevice device_;
  bool retained_ = false;
  CUmodule module_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  std::vector<CUevent> events_;
  std::vector<CUdeviceptr> buffers_;
};

// Runs `launch(work)` once with `work` units to calibrate, scales the work to about
// about kTargetMs (at most max_work) and returns units per millisecond of the fastest of
// kRepeats timed launches.
template <typename Launch>
Result<double> BestRate(double work, double max_work, Launch launch) {
  for (int round = 0; round < 3; ++round) {  // a tiny first launch is mostly launch overhead
    auto ms = launch(work);
    if (!ms) return ms.error();
    if (*ms >= kTargetMs / 2 || work >= max_work) break;
    work = std::floor(std::min(max_work, *ms > 0 ? work * kTargetMs / *ms : work * 64));
  }
  double best = 0;
  for (int i = 0; i < kRepeats; ++i) {
    auto ms = launch(work);
    if (!ms) return ms.error();
    if (*ms > 0) best = std::max(best, work / *ms);
  }
  if (best <= 0) return MakeError(ErrorCode::kUnavailable, "the device reported no elapsed time for the kernel");
  return best;
}

}  // namespace

Result<std::vector<CudaDevice>> ListDevices(const CudaLibrary& lib) {
  int count = 0;
  if (auto st = Check(lib, Sym::kDeviceGetCount, lib.Get<cuDeviceGetCount_fn>(Sym::kDeviceGetCount)(&count)); !st) {
    return st.error();
  }
  std::vector<CudaDevice> devices;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (auto st = Check(lib, Sym::kDeviceGet, lib.Get<cuDeviceGet_fn>(Sym::kDeviceGet)(&dev, i)); !st) {
      return st.error();
    }
    CUuuid uuid{};
    if (auto st = Check(lib, Sym::kDeviceGetUuid, lib.Get<cuDeviceGetUuid_fn>(Sym::kDeviceGetUuid)(&uuid, dev)); !st) {
      return st.error();
    }
    char name[256] = {};
    (void)lib.Get<cuDeviceGetName_fn>(Sym::kDeviceGetName)(name, sizeof name - 1, dev);
    devices.push_back({dev, FormatGpuUuid(uuid), name});
  }
  return devices;
}

std::optional<std::string> CudaDriverVersion(const CudaLibrary& lib) {
  int v = 0;
  if (lib.Get<cuDriverGetVersion_fn>(Sym::kDriverGetVersion)(&v) != CUDA_SUCCESS || v <= 0) return std::nullopt;
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

Result<Measurement> MeasureDevice(const CudaLibrary& lib, int ordinal) {
  CUdevice dev = 0;
  if (auto st = Check(lib, Sym::kDeviceGet, lib.Get<cuDeviceGet_fn>(Sym::kDeviceGet)(&dev, ordinal)); !st) {
    return st.error();
  }
  int sms = 0;
  if (auto st = Check(lib, Sym::kDeviceGetAttribute,
                      lib.Get<cuDeviceGetAttribute_fn>(Sym::kDeviceGetAttribute)(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
      !st) {
    return st.error();
  }
  sms = std::max(sms, 1);
  DeviceSession session(lib, dev);
  if (auto st = session.Open(); !st) return st.error();
  Measurement m;

  // FP32: 8 blocks of 256 threads per SM keep every scheduler busy.
  auto fma = session.Function(kFmaKernel);
  if (!fma) return fma.error();
  const unsigned fma_grid = static_cast<unsigned>(sms) * 8;
  const double threads = static_cast<double>(fma_grid) * kThreadsPerBlock;
  auto out = session.Alloc(static_cast<size_t>(threads) * sizeof(float), static_cast<size_t>(threads) * sizeof(float));
  if (!out) return out.error();
  CUdeviceptr out_ptr = out->first;
  auto iters_per_ms = BestRate(256, 1u << 30, [&](double work) -> Result<double> {
    unsigned iters = static_cast<unsigned>(work);
    void* params[] = {&out_ptr, &iters};
    return session.TimedLaunch(*fma, fma_grid, params);
  });
  if (!iters_per_ms) return iters_per_ms.error();
  m.fp32_tflops = *iters_per_ms * threads * kFmasPerRound * 2 * 1e3 / 1e12;

  // Bandwidth: two buffers far larger than any cache (256 MiB each, less if the GPU has
  // not that much free), copied whole by a grid-stride loop, kCopiesPerTiming times
  // between the events; a warm-up, then the best of kRepeats.
  auto copy = session.Function(kCopyKernel);
  if (!copy) return copy.error();
  auto src = session.Alloc(size_t{256} << 20, size_t{16} << 20);
  if (!src) return src.error();
  auto dst = session.Alloc(src->second, src->second);
  if (!dst) return dst.error();
  if (auto st = Check(lib, Sym::kMemsetD32,
                      lib.Get<cuMemsetD32_fn>(Sym::kMemsetD32)(src->first, 0x3f800000u, src->second / 4));
      !st) {
    return st.error();
  }
  CUdeviceptr s = src->first, d = dst->first;
  unsigned long long n = src->second / kCopyElementBytes;
  void* params[] = {&s, &d, &n};
  double best_ms = 0;
  for (int i = 0; i < kRepeats + 1; ++i) {  // the first warms up
    auto ms = session.TimedLaunch(*copy, static_cast<unsigned>(sms) * 8, params, kCopiesPerTiming);
    if (!ms) return ms.error();
    if (i > 0 && *ms > 0 && (best_ms == 0 || *ms < best_ms)) best_ms = *ms;
  }
  if (best_ms <= 0) return MakeError(ErrorCode::kUnavailable, "the device reported no elapsed time for the copy");
  m.memory_gbps = 2.0 * kCopiesPerTiming * static_cast<double>(src->second) / (best_ms * 1e-3) / 1e9;
  return m;
}

}  // namespace gpuman::cuda
