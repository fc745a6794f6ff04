// The part of the CUDA driver API that `gpuman bench` uses, declared here from NVIDIA's
// documentation of the driver API (cuda.h's types and signatures), so that gpuman builds
// without the CUDA toolkit and runs where libcuda.so.1 is absent (docs/design.md). Only
// the types and entry points src/cuda/ calls; every handle is opaque, every call returns
// a CUresult (0: CUDA_SUCCESS).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int CUresult;
typedef int CUdevice;                   // an ordinal among the devices CUDA sees
typedef unsigned long long CUdeviceptr; // 64-bit device address (the _v2 entry points)
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_NOT_FOUND = 500,
};

// CUdevice_attribute values used.
enum : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
};

// cuEventCreate flags.
enum : unsigned { CU_EVENT_DEFAULT = 0 };

typedef CUresult (*cuInit_fn)(unsigned int flags);
typedef CUresult (*cuDriverGetVersion_fn)(int* version);  // 12040 for CUDA 12.4
typedef CUresult (*cuGetErrorString_fn)(CUresult error, const char** text);
typedef CUresult (*cuDeviceGetCount_fn)(int* count);
typedef CUresult (*cuDeviceGet_fn)(CUdevice* device, int ordinal);
typedef CUresult (*cuDeviceGetName_fn)(char* name, int length, CUdevice device);
typedef CUresult (*cuDeviceGetUuid_fn)(CUuuid* uuid, CUdevice device);  // also _v2 (CUDA 11.4)
typedef CUresult (*cuDeviceGetAttribute_fn)(int* value, int attribute, CUdevice device);
typedef CUresult (*cuDevicePrimaryCtxRetain_fn)(CUcontext* ctx, CUdevice device);
typedef CUresult (*cuDevicePrimaryCtxRelease_fn)(CUdevice device);  // _v2 since CUDA 11.0
typedef CUresult (*cuCtxSetCurrent_fn)(CUcontext ctx);
typedef CUresult (*cuCtxSynchronize_fn)();
typedef CUresult (*cuModuleLoadData_fn)(CUmodule* module, const void* image);  // PTX text, NUL-ended
typedef CUresult (*cuModuleUnload_fn)(CUmodule module);
typedef CUresult (*cuModuleGetFunction_fn)(CUfunction* fn, CUmodule module, const char* name);
typedef CUresult (*cuMemAlloc_fn)(CUdeviceptr* ptr, size_t bytes);  // cuMemAlloc_v2
typedef CUresult (*cuMemFree_fn)(CUdeviceptr ptr);                  // cuMemFree_v2
typedef CUresult (*cuMemsetD32_fn)(CUdeviceptr ptr, unsigned int value, size_t count);  // cuMemsetD32_v2
typedef CUresult (*cuLaunchKernel_fn)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                      unsigned block_x, unsigned block_y, unsigned block_z,
                                      unsigned shared_bytes, CUstream stream, void** params, void** extra);
typedef CUresult (*cuEventCreate_fn)(CUevent* event, unsigned int flags);
typedef CUresult (*cuEventRecord_fn)(CUevent event, CUstream stream);
typedef CUresult (*cuEventSynchronize_fn)(CUevent event);
typedef CUresult (*cuEventElapsedTime_fn)(float* ms, CUevent start, CUevent end);
typedef CUresult (*cuEventDestroy_fn)(CUevent event);  // cuEventDestroy_v2

}  // extern "C"
