#include "health/doctor.h"

#include <gtest/gtest.h>

namespace gpuman::health {
namespace {

const std::vector<std::string> kCu124 = {"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"};

// "no kernel image is available": predicted from the compiled architectures alone.
TEST(DoctorTest, WhichArchitectureRunsOnAGpu) {
  EXPECT_EQ(ArchThatRuns(kCu124, "9.0"), "sm_90");
  EXPECT_EQ(ArchThatRuns(kCu124, "8.9"), "sm_86") << "binary compatible within a major version";
  EXPECT_EQ(ArchThatRuns(kCu124, "7.0"), "sm_70");
  EXPECT_EQ(ArchThatRuns(kCu124, "12.0"), std::nullopt) << "an RTX 50 on a wheel built up to sm_90";
  EXPECT_EQ(ArchThatRuns(kCu124, "10.0"), std::nullopt);
  EXPECT_EQ(ArchThatRuns({"sm_80", "compute_90"}, "12.0"), "compute_90 (PTX, compiled by the driver at first use)");
  EXPECT_EQ(ArchThatRuns({"sm_80", "compute_90"}, "8.6"), "sm_80");
  EXPECT_EQ(ArchThatRuns({"compute_90"}, "8.9"), std::nullopt) << "PTX runs only on its capability or later";
  EXPECT_EQ(ArchThatRuns({"sm_90a"}, "9.0"), "sm_90a");
  EXPECT_EQ(ArchThatRuns({"sm_90a"}, "10.0"), std::nullopt) << "architecture-specific";
  EXPECT_EQ(ArchThatRuns({"sm_100", "sm_120"}, "12.0"), "sm_120");
  EXPECT_EQ(ArchThatRuns({"sm_100"}, "12.0"), std::nullopt) << "another major";
  EXPECT_EQ(ArchThatRuns({"garbage"}, "9.0"), std::nullopt);
}

std::string Statuses(const std::vector<DoctorCheck>& checks) {
  std::string out;
  for (const auto& c : checks) out += c.name + "=" + c.status + " ";
  return out;
}

TEST(DoctorTest, TorchVerdicts) {
  TorchProbe cuda124;
  cuda124.importable = true;
  cuda124.version = "2.5.1+cu124";
  cuda124.cuda = "12.4";
  cuda124.available = true;
  cuda124.device_count = 2;
  cuda124.arch_list = kCu124;
  const std::vector<VisibleGpu> hopper = {{0, "H100", "9.0"}, {1, "H100", "9.0"}};
  EXPECT_EQ(Statuses(JudgeTorch(cuda124, hopper, "12.4", 2)), "torch_cuda=ok torch_arch=ok torch_arch=ok ");
  // Minor-version compatibility: a 12.4 build on a 12.2 driver runs.
  EXPECT_EQ(Statuses(JudgeTorch(cuda124, hopper, "12.2", 2)), "torch_cuda=ok torch_arch=ok torch_arch=ok ");
  // A 12.x build on an 11.x driver does not.
  auto old_driver = JudgeTorch(cuda124, hopper, "11.8", 2);
  ASSERT_FALSE(old_driver.empty());
  EXPECT_EQ(old_driver[0].status, "fail");
  EXPECT_NE(old_driver[0].message.find("supports CUDA 11.8 only"), std::string::npos) << old_driver[0].message;
  // An RTX 5090 (12.0) on a wheel built up to sm_90.
  auto blackwell = JudgeTorch(cuda124, {{0, "RTX 5090", "12.0"}}, "12.8", 2);
  EXPECT_EQ(Statuses(blackwell), "torch_cuda=ok torch_arch=fail ");
  EXPECT_NE(blackwell[1].message.find("no kernel image"), std::string::npos);
  EXPECT_NE(blackwell[1].fix.find("sm_120"), std::string::npos) << blackwell[1].fix;
  // A CPU-only build with GPUs visible; without any.
  TorchProbe cpu;
  cpu.importable = true;
  cpu.version = "1.13.1";
  EXPECT_EQ(Statuses(JudgeTorch(cpu, hopper, "12.4", 2)), "torch=fail ");
  EXPECT_EQ(Statuses(JudgeTorch(cpu, {}, "12.4", 0)), "torch=ok ");
  // CUDA build, driver fine, yet not available; and a count that differs from what is visible.
  TorchProbe hidden = cuda124;
  hidden.available = false;
  EXPECT_EQ(Statuses(JudgeTorch(hidden, hopper, "12.4", 2)), "torch_cuda=ok torch_available=fail torch_arch=ok torch_arch=ok ");
  EXPECT_EQ(Statuses(JudgeTorch(cuda124, hopper, "12.4", 4)), "torch_cuda=ok torch_arch=ok torch_arch=ok torch_devices=warn ");
}

// TensorFlow: the torch rules from its build info; JAX: GPUs it lists, or none.
TEST(DoctorTest, TensorflowAndJaxVerdicts) {
  const std::vector<VisibleGpu> hopper = {{0, "H100", "9.0"}, {1, "H100", "9.0"}};
  TensorflowProbe tf;
  tf.importable = true;
  tf.version = "2.16.1";
  tf.cuda_build = true;
  tf.cuda = "12.3";
  tf.arch_list = {"sm_70", "sm_80", "compute_90"};
  tf.device_count = 2;
  EXPECT_EQ(Statuses(JudgeTensorflow(tf, hopper, "12.4", 2)), "tf_cuda=ok tf_arch=ok tf_arch=ok ");
  EXPECT_EQ(Statuses(JudgeTensorflow(tf, hopper, "11.8", 2)), "tf_cuda=fail tf_arch=ok tf_arch=ok ");
  tf.device_count = 0;  // a CUDA build that lists no GPU (its CUDA libraries missing)
  EXPECT_EQ(Statuses(JudgeTensorflow(tf, hopper, "12.4", 2)), "tf_cuda=ok tf_available=fail tf_arch=ok tf_arch=ok ");
  tf.cuda_build = false;
  auto cpu = JudgeTensorflow(tf, hopper, "12.4", 2);
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0].status, "fail");
  EXPECT_NE(cpu[0].fix.find("tensorflow[and-cuda]"), std::string::npos) << cpu[0].fix;
  EXPECT_EQ(Statuses(JudgeTensorflow(tf, {}, "12.4", 0)), "tf=ok ");

  JaxProbe jax;
  jax.importable = true;
  jax.version = "0.4.30";
  jax.platform = "gpu";
  jax.device_count = 2;
  EXPECT_EQ(Statuses(JudgeJax(jax, hopper, 2)), "jax=ok ");
  EXPECT_EQ(Statuses(JudgeJax(jax, hopper, 1)), "jax=ok jax_devices=warn ");
  jax.platform = "cpu";
  jax.device_count = 0;
  auto none = JudgeJax(jax, hopper, 2);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].status, "fail");
  EXPECT_NE(none[0].message.find("lists only cpu devices"), std::string::npos) << none[0].message;
  EXPECT_EQ(Statuses(JudgeJax(jax, {}, 0)), "jax=ok ");
}

}  // namespace
}  // namespace gpuman::health
