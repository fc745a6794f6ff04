// The CUDA driver library loader.
//
// Like the NVML loader (nvml/library.cc), gpuman never links against libcuda: it is
// dlopen()ed by `gpuman bench` only, at run time, so that every other command runs where
// no driver is installed, and a test can point it at the project's stand-in
// (tests/fake_cuda/, $GPUMAN_CUDA_LIBRARY) through the very same code.
//
// Symbol versions. CUDA 3.2 moved device pointers to 64 bits and exported the new entry
// points with a _v2 suffix beside the old 32-bit ones, which stay exported for old
// binaries: cuMemAlloc, cuMemFree and cuMemsetD32 must be called by their _v2 names, or a
// pointer is cut to 32 bits. CUDA 4.0 did the same for cuEventDestroy (_v2), CUDA 11.0 for
// cuDevicePrimaryCtxRelease (_v2), and CUDA 11.4 added cuDeviceGetUuid_v2 (which, unlike
// v1, gives a MIG device's own UUID; the same for a whole GPU). Each row lists the names
// newest first; the oldest driver this works with is therefore one with CUDA 11.0 (R450).
#include "cuda/library.h"

#include <dlfcn.h>

#include <cstdio>

namespace gpuman::cuda {
namespace {

struct SymbolSpec {
  Sym sym;
  std::array<const char*, 2> names;  // newest first; nullptr when there is one
};

// clang-format off
constexpr SymbolSpec kSymbols[] = {
  {Sym::kInit, {"cuInit", nullptr}},
  {Sym::kDriverGetVersion, {"cuDriverGetVersion", nullptr}},
  {Sym::kGetErrorString, {"cuGetErrorString", nullptr}},
  {Sym::kDeviceGetCount, {"cuDeviceGetCount", nullptr}},
  {Sym::kDeviceGet, {"cuDeviceGet", nullptr}},
  {Sym::kDeviceGetName, {"cuDeviceGetName", nullptr}},
  {Sym::kDeviceGetUuid, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}},
  {Sym::kDeviceGetAttribute, {"cuDeviceGetAttribute", nullptr}},
  {Sym::kDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain", nullptr}},
  {Sym::kDevicePrimaryCtxRelease, {"cuDevicePrimaryCtxRelease_v2", nullptr}},
  {Sym::kCtxSetCurrent, {"cuCtxSetCurrent", nullptr}},
  {Sym::kCtxSynchronize, {"cuCtxSynchronize", nullptr}},
  {Sym::kModuleLoadData, {"cuModuleLoadData", nullptr}},
  {Sym::kModuleUnload, {"cuModuleUnload", nullptr}},
  {Sym::kModuleGetFunction, {"cuModuleGetFunction", nullptr}},
  {Sym::kMemAlloc, {"cuMemAlloc_v2", nullptr}},
  {Sym::kMemFree, {"cuMemFree_v2", nullptr}},
  {Sym::kMemsetD32, {"cuMemsetD32_v2", nullptr}},
  {Sym::kLaunchKernel, {"cuLaunchKernel", nullptr}},
  {Sym::kEventCreate, {"cuEventCreate", nullptr}},
  {Sym::kEventRecord, {"cuEventRecord", nullptr}},
  {Sym::kEventSynchronize, {"cuEventSynchronize", nullptr}},
  {Sym::kEventElapsedTime, {"cuEventElapsedTime", nullptr}},
  {Sym::kEventDestroy, {"cuEventDestroy_v2", nullptr}},
};
// clang-format on
static_assert(std::size(kSymbols) == kSymCount, "every Sym has a row in kSymbols");

}  // namespace

Result<std::unique_ptr<CudaLibrary>> CudaLibrary::Load(const std::string& path) {
  std::unique_ptr<CudaLibrary> lib(new CudaLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return MakeError(ErrorCode::kUnavailable,
                     "no CUDA driver library (" + path + "): " + (why ? why : "cannot load it"));
  }
  for (const SymbolSpec& spec : kSymbols) {
    const size_t i = static_cast<size_t>(spec.sym);
    for (const char* name : spec.names) {
      if (name == nullptr) break;
      if (void* fn = dlsym(lib->handle_, name)) {
        lib->fns_[i] = fn;
        lib->names_[i] = name;
        break;
      }
    }
    if (lib->fns_[i] == nullptr) {
      return MakeError(ErrorCode::kUnavailable, "CUDA driver library " + path + " does not export " +
                                                    spec.names[0] + " (a driver with CUDA 11.0 or later is needed)");
    }
  }
  return lib;
}

CudaLibrary::~CudaLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status CudaLibrary::Init() {
  if (CUresult rc = Get<cuInit_fn>(Sym::kInit)(0); rc != CUDA_SUCCESS) {
    return MakeError(ErrorCode::kUnavailable, Describe("cuInit", rc));
  }
  return {};
}

std::string CudaLibrary::Describe(const char* call, CUresult code) const {
  const char* text = nullptr;
  if (Get<cuGetErrorString_fn>(Sym::kGetErrorString)(code, &text) != CUDA_SUCCESS || text == nullptr) {
    text = "unknown error";
  }
  return std::string(call) + ": " + text + " (code " + std::to_string(code) + ")";
}

std::string FormatGpuUuid(const CUuuid& uuid) {
  char out[64];
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(out, sizeof out,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

}  // namespace gpuman::cuda
