// The device rule and the cgroup v2 program built from it: the program, run in a small
// interpreter of the instructions BuildDeviceProgram emits, decides every device class as
// DeviceAllowed does.
#include "confine/device_rule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

namespace gpuman::confine {
namespace {

// Runs `program` for one open: the registers of eBPF, the context bpf_cgroup_dev_ctx.
// Only what a device program needs: 32-bit loads from the context, 64-bit AND and MOV with
// an immediate, conditional jumps with an immediate, exit. Anything else fails the test.
int64_t RunProgram(const std::vector<bpf_insn>& program, uint32_t access_type, uint32_t major, uint32_t minor) {
  const bpf_cgroup_dev_ctx ctx{access_type, major, minor};
  uint64_t reg[11] = {};
  size_t pc = 0;
  for (int steps = 0; steps < 10000; ++steps) {
    if (pc >= program.size()) throw std::runtime_error("ran off the end of the program");
    const bpf_insn& i = program[pc++];
    switch (i.code) {
      case BPF_LDX | BPF_MEM | BPF_W: {
        if (i.src_reg != BPF_REG_1) throw std::runtime_error("load from a register other than the context");
        uint32_t v;
        if (i.off < 0 || static_cast<size_t>(i.off) + 4 > sizeof ctx) throw std::runtime_error("load outside the context");
        memcpy(&v, reinterpret_cast<const char*>(&ctx) + i.off, 4);
        reg[i.dst_reg] = v;
        break;
      }
      case BPF_ALU64 | BPF_AND | BPF_K: reg[i.dst_reg] &= static_cast<uint64_t>(static_cast<int64_t>(i.imm)); break;
      case BPF_ALU64 | BPF_MOV | BPF_K: reg[i.dst_reg] = static_cast<uint64_t>(static_cast<int64_t>(i.imm)); break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        if (reg[i.dst_reg] == static_cast<uint64_t>(static_cast<int64_t>(i.imm))) pc += i.off;
        break;
      case BPF_JMP | BPF_JNE | BPF_K:
        if (reg[i.dst_reg] != static_cast<uint64_t>(static_cast<int64_t>(i.imm))) pc += i.off;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        if (reg[i.dst_reg] >= static_cast<uint64_t>(static_cast<int64_t>(i.imm))) pc += i.off;
        break;
      case BPF_JMP | BPF_EXIT: return static_cast<int64_t>(reg[BPF_REG_0]);
      default: throw std::runtime_error("unexpected instruction code " + std::to_string(i.code));
    }
  }
  throw std::runtime_error("the program did not end");
}

uint32_t Access(DeviceType type, uint32_t access = BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE) {
  return (access << 16) | static_cast<uint32_t>(type);
}

TEST(DeviceRuleTest, OnlyTheGpuNodesOfOtherGpusAreRefused) {
  const DeviceRule rule{{1, 5}};
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 195, 1));
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 195, 5));
  EXPECT_FALSE(DeviceAllowed(rule, DeviceType::kChar, 195, 0));
  EXPECT_FALSE(DeviceAllowed(rule, DeviceType::kChar, 195, 7));
  EXPECT_FALSE(DeviceAllowed(rule, DeviceType::kChar, 195, 253));
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 195, 254)) << "nvidia-modeset";
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 195, 255)) << "nvidiactl";
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 1, 3)) << "/dev/null";
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kChar, 508, 0)) << "nvidia-uvm (a dynamic major)";
  EXPECT_TRUE(DeviceAllowed(rule, DeviceType::kBlock, 195, 0)) << "a block device that shares the number";
  EXPECT_FALSE(DeviceAllowed(DeviceRule{}, DeviceType::kChar, 195, 1)) << "no GPUs held: no GPU node";
}

TEST(DeviceRuleTest, TheDenyListNamesEveryGpuMinorNotHeld) {
  const auto denied = DeniedGpuMinors(DeviceRule{{1, 5}});
  EXPECT_EQ(denied.size(), 252u);
  EXPECT_EQ(denied.front(), 0u);
  EXPECT_EQ(denied.back(), 253u);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), 1u), 0);
  EXPECT_EQ(std::count(denied.begin(), denied.end(), 5u), 0);
  EXPECT_EQ(DeniedGpuMinors(DeviceRule{}).size(), 254u);
}

TEST(DeviceRuleTest, TheProgramDecidesEveryDeviceClassAsTheRule) {
  for (const DeviceRule& rule : {DeviceRule{}, DeviceRule{{0}}, DeviceRule{{1, 5}}, DeviceRule{{7, 3, 3, 253}},
                                 DeviceRule{{0, 1, 2, 3, 4, 5, 6, 7}}}) {
    const auto program = BuildDeviceProgram(rule);
    for (DeviceType type : {DeviceType::kChar, DeviceType::kBlock}) {
      for (uint32_t major : {0u, 1u, 194u, 195u, 196u, 508u, 0xffffu}) {
        for (uint32_t minor = 0; minor < 300; ++minor) {
          for (uint32_t access : {uint32_t{BPF_DEVCG_ACC_READ}, uint32_t{BPF_DEVCG_ACC_WRITE}, uint32_t{BPF_DEVCG_ACC_MKNOD},
                                  uint32_t{BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE | BPF_DEVCG_ACC_MKNOD}}) {
            ASSERT_EQ(RunProgram(program, Access(type, access), major, minor),
                      DeviceAllowed(rule, type, major, minor) ? 1 : 0)
                << "type " << static_cast<int>(type) << " " << major << ":" << minor << " access " << access;
          }
        }
      }
    }
  }
}

TEST(DeviceRuleTest, TheProgramIsSmallAndEndsInBothVerdicts) {
  const auto program = BuildDeviceProgram(DeviceRule{{0, 1, 2, 3, 4, 5, 6, 7}});
  EXPECT_LE(program.size(), 32u);
  EXPECT_EQ(program.back().code, BPF_JMP | BPF_EXIT);
  // A held minor above the GPU range adds no jump.
  EXPECT_EQ(BuildDeviceProgram(DeviceRule{{300}}).size(), BuildDeviceProgram(DeviceRule{}).size());
}

}  // namespace
}  // namespace gpuman::confine
