// Which device nodes a confined job may open (docs/enforce.md): the rule, and the cgroup v2
// device program that applies it. The rule is one function, DeviceAllowed; the program
// BuildDeviceProgram emits is checked against it for every device class
// (tests/confine/device_rule_test.cc runs the program in a small interpreter), and cgroup
// v1's deny list (DeniedGpuMinors) is made from it too.
//
// NVIDIA's character devices share major 195 (the driver's NV_MAJOR_DEVICE_NUMBER):
//   /dev/nvidia0 .. /dev/nvidiaN   minor = the GPU's minor number (NVML's
//                                  nvmlDeviceGetMinorNumber), 0 .. 253
//   /dev/nvidia-modeset            minor 254
//   /dev/nvidiactl                 minor 255
// /dev/nvidia-uvm, nvidia-uvm-tools and nvidia-caps/* have majors the kernel assigns at
// load time; CUDA needs them and they name no single GPU, so they stay open. A confined
// process may open every device but the GPU nodes of GPUs it does not hold.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <vector>

namespace gpuman::confine {

inline constexpr uint32_t kNvidiaMajor = 195;
inline constexpr uint32_t kNvidiaModesetMinor = 254;
inline constexpr uint32_t kNvidiaCtlMinor = 255;
/// GPU nodes are minors below this (254 and 255 are the control nodes above).
inline constexpr uint32_t kFirstControlMinor = 254;

enum class DeviceType : uint32_t { kBlock = BPF_DEVCG_DEV_BLOCK, kChar = BPF_DEVCG_DEV_CHAR };

/// The GPUs a confined process holds, by minor number.
struct DeviceRule {
  std::vector<uint32_t> gpu_minors;
};

/// Whether the rule lets a process open (any access) the device `type` major:minor.
bool DeviceAllowed(const DeviceRule& rule, DeviceType type, uint32_t major, uint32_t minor);

/// The GPU minors (0..253) a process under `rule` may not open, ascending: cgroup v1's
/// devices.deny lines ("c 195:M rwm").
std::vector<uint32_t> DeniedGpuMinors(const DeviceRule& rule);

/// The BPF_PROG_TYPE_CGROUP_DEVICE program for `rule`: returns 1 (allow) or 0 (deny, the
/// open fails with EPERM) for the bpf_cgroup_dev_ctx it is given.
std::vector<bpf_insn> BuildDeviceProgram(const DeviceRule& rule);

}  // namespace gpuman::confine
