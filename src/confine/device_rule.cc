#include "confine/device_rule.h"

#include <algorithm>
#include <cstddef>

namespace gpuman::confine {
namespace {

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

bool Holds(const DeviceRule& rule, uint32_t minor) {
  return std::find(rule.gpu_minors.begin(), rule.gpu_minors.end(), minor) != rule.gpu_minors.end();
}

}  // namespace

bool DeviceAllowed(const DeviceRule& rule, DeviceType type, uint32_t major, uint32_t minor) {
  if (type != DeviceType::kChar || major != kNvidiaMajor) return true;
  if (minor >= kFirstControlMinor) return true;  // nvidia-modeset, nvidiactl
  return Holds(rule, minor);
}

std::vector<uint32_t> DeniedGpuMinors(const DeviceRule& rule) {
  std::vector<uint32_t> denied;
  for (uint32_t m = 0; m < kFirstControlMinor; ++m) {
    if (!DeviceAllowed(rule, DeviceType::kChar, kNvidiaMajor, m)) denied.push_back(m);
  }
  return denied;
}

std::vector<bpf_insn> BuildDeviceProgram(const DeviceRule& rule) {
  // r1 = struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }
  //   r2 = access_type & 0xffff (the device type); r3 = major; r4 = minor
  //   if r2 != CHAR goto allow; if r3 != 195 goto allow; if r4 >= 254 goto allow
  //   if r4 == m goto allow (each held minor)
  //   r0 = 0; exit            (deny)
  //   allow: r0 = 1; exit
  std::vector<bpf_insn> p;
  std::vector<size_t> to_allow;  // jumps whose offset is filled in once `allow` is known
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1,
                   offsetof(bpf_cgroup_dev_ctx, access_type), 0));
  p.push_back(Insn(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, major), 0));
  p.push_back(Insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, offsetof(bpf_cgroup_dev_ctx, minor), 0));
  auto jump_to_allow = [&](uint8_t op, uint8_t reg, int32_t imm) {
    to_allow.push_back(p.size());
    p.push_back(Insn(BPF_JMP | op | BPF_K, reg, 0, 0, imm));
  };
  jump_to_allow(BPF_JNE, BPF_REG_2, BPF_DEVCG_DEV_CHAR);
  jump_to_allow(BPF_JNE, BPF_REG_3, static_cast<int32_t>(kNvidiaMajor));
  jump_to_allow(BPF_JGE, BPF_REG_4, static_cast<int32_t>(kFirstControlMinor));
  std::vector<uint32_t> held = rule.gpu_minors;
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  for (uint32_t m : held) {
    if (m < kFirstControlMinor) jump_to_allow(BPF_JEQ, BPF_REG_4, static_cast<int32_t>(m));
  }
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0));
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  const size_t allow = p.size();
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1));
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  for (size_t at : to_allow) p[at].off = static_cast<int16_t>(allow - (at + 1));
  return p;
}

}  // namespace gpuman::confine
