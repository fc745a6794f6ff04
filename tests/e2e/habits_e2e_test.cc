// Habits users bring from nvidia-smi (issue 26): `gpuman list` prints what `nvidia-smi -L`
// prints, `-i/--id` names GPUs as `--gpus` does, and GPU lists take ranges (0-3).
#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

TEST(HabitsE2E, ListIdAndRanges) {
  TempDir dir;
  const std::string scenario = IdleScenario(dir, "a100-4");
  auto gpuman = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario});
    return RunGpuman(dir.Join("state"), std::move(args), {{"GPUMAN_LEASE_DIR", dir.Join("leases")}});
  };
  auto list = gpuman({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out,
            "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01)\n"
            "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f)\n"
            "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918)\n"
            "GPU 3: NVIDIA A100-SXM4-80GB (UUID: GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d)\n");
  auto range = gpuman({"select", "-n", "3", "-i", "1-3", "--format", "index"});
  EXPECT_EQ(range.exit_code, 0) << range.err;
  EXPECT_EQ(range.out, "1,2,3\n");
  auto id = gpuman({"select", "-n", "2", "--id", "0,2-2", "--format", "index"});
  EXPECT_EQ(id.exit_code, 0) << id.err;
  EXPECT_EQ(id.out, "0,2\n");
  auto ran = gpuman({"run", "-n", "2", "--exclude", "0-1", "--index", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "2,3\n");
  auto backwards = gpuman({"select", "-i", "3-1"});
  EXPECT_EQ(backwards.exit_code, 2);
  EXPECT_EQ(backwards.err, "gpuman: error: --gpus: GPU range '3-1' runs backwards (known indices: 0-3)\n");
}

}  // namespace
}  // namespace gpuman::e2e
