// CudaLibrary: owns one dlopen()ed libcuda.so.1 (the driver's CUDA library) and its
// resolved entry points; the only place that calls dlopen/dlsym for CUDA. Used by
// `gpuman bench` alone (cuda/bench.h). Not thread-safe; one per process.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "base/result.h"
#include "cuda/cuda_abi.h"

namespace gpuman::cuda {

enum class Sym : int {
  kInit, kDriverGetVersion, kGetErrorString,
  kDeviceGetCount, kDeviceGet, kDeviceGetName, kDeviceGetUuid, kDeviceGetAttribute,
  kDevicePrimaryCtxRetain, kDevicePrimaryCtxRelease, kCtxSetCurrent, kCtxSynchronize,
  kModuleLoadData, kModuleUnload, kModuleGetFunction,
  kMemAlloc, kMemFree, kMemsetD32, kLaunchKernel,
  kEventCreate, kEventRecord, kEventSynchronize, kEventElapsedTime, kEventDestroy,
  kCount,
};
inline constexpr size_t kSymCount = static_cast<size_t>(Sym::kCount);

class CudaLibrary {
 public:
  /// dlopen()s `path` (a soname such as "libcuda.so.1" or a file path) and resolves every
  /// entry point; cuInit is not called yet (Init), so that CUDA_VISIBLE_DEVICES can be set
  /// after the library is known to be there. Errors: kUnavailable "no CUDA driver library
  /// (PATH): dlerror" when it cannot be opened; kUnavailable naming the first missing
  /// entry point when it is not a CUDA driver library (or one older than CUDA 11.0).
  static Result<std::unique_ptr<CudaLibrary>> Load(const std::string& path);

  ~CudaLibrary();  // dlclose
  CudaLibrary(const CudaLibrary&) = delete;
  CudaLibrary& operator=(const CudaLibrary&) = delete;

  /// cuInit(0). Errors: kUnavailable "cuInit: <CUDA's text>".
  Status Init();

  template <typename Fn>
  Fn Get(Sym sym) const {
    return reinterpret_cast<Fn>(fns_[static_cast<size_t>(sym)]);
  }
  const char* SymbolName(Sym sym) const { return names_[static_cast<size_t>(sym)]; }

  /// "CALL: CUDA's text (code N)", for error messages.
  std::string Describe(const char* call, CUresult code) const;
  const std::string& path() const { return path_; }

 private:
  CudaLibrary() = default;
  std::string path_;
  void* handle_ = nullptr;
  std::array<void*, kSymCount> fns_{};
  std::array<const char*, kSymCount> names_{};
};

/// NVML's spelling of a CUDA UUID: "GPU-" and the 16 bytes as 8-4-4-4-12 lower-case hex.
std::string FormatGpuUuid(const CUuuid& uuid);

}  // namespace gpuman::cuda
