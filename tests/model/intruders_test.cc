// The intruder rule (issue 23): a process on a GPU leased to someone else.
#include "model/intruders.h"

#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

DeviceSnapshot Gpu(const std::string& uuid) {
  DeviceSnapshot d;
  d.uuid = uuid;
  return d;
}

GpuProcess Proc(std::optional<uint32_t> uid) {
  GpuProcess p;
  p.pid = 4242;
  p.uid = uid;
  p.is_visible = uid.has_value();
  return p;
}

Lease LeaseOf(int64_t id, uint32_t uid, std::vector<std::string> uuids) {
  Lease l;
  l.id = id;
  l.uid = uid;
  l.user = "u" + std::to_string(uid);
  l.gpu_uuids = std::move(uuids);
  return l;
}

TEST(IntrudersTest, AnotherUsersProcessOnALeasedGpuIntrudes) {
  const std::vector<Lease> leases = {LeaseOf(3, 1000, {"GPU-a", "GPU-b"}), LeaseOf(4, 1001, {"GPU-c"})};
  const Lease* on = IntrudedLease(Gpu("GPU-b"), Proc(1001), leases);
  ASSERT_NE(on, nullptr);
  EXPECT_EQ(on->id, 3);
  EXPECT_EQ(IntrudedLease(Gpu("GPU-b"), Proc(1000), leases), nullptr) << "the holder's own";
  EXPECT_EQ(IntrudedLease(Gpu("GPU-c"), Proc(1001), leases), nullptr) << "the holder's own";
  ASSERT_NE(IntrudedLease(Gpu("GPU-c"), Proc(0), leases), nullptr) << "root's is reported too";
  EXPECT_EQ(IntrudedLease(Gpu("GPU-c"), Proc(0), leases)->id, 4);
  ASSERT_NE(IntrudedLease(Gpu("GPU-a"), Proc(std::nullopt), leases), nullptr) << "an owner we cannot see";
  EXPECT_EQ(IntrudedLease(Gpu("GPU-z"), Proc(1001), leases), nullptr) << "a free GPU";
  EXPECT_EQ(IntrudedLease(Gpu("GPU-a"), Proc(1001), {}), nullptr) << "no leases";
  DeviceSnapshot nameless;
  EXPECT_EQ(IntrudedLease(nameless, Proc(1001), leases), nullptr) << "a GPU without a UUID names no lease";
}

TEST(IntrudersTest, OnAGpuSharedBySlicesEveryHoldersProcessIsTheirs) {
  Lease a = LeaseOf(3, 1000, {"GPU-a"});
  Lease b = LeaseOf(4, 1001, {"GPU-a"});
  a.gpu_memory_bytes = b.gpu_memory_bytes = int64_t{20} << 30;
  const std::vector<Lease> leases = {a, b};
  EXPECT_EQ(IntrudedLease(Gpu("GPU-a"), Proc(1000), leases), nullptr);
  EXPECT_EQ(IntrudedLease(Gpu("GPU-a"), Proc(1001), leases), nullptr) << "the second slice's holder";
  const Lease* on = IntrudedLease(Gpu("GPU-a"), Proc(1002), leases);
  ASSERT_NE(on, nullptr);
  EXPECT_EQ(on->id, 3);
}

TEST(SliceOverrunsTest, AHoldersProcessesAreSummedAgainstTheirSlices) {
  DeviceSnapshot gpu = Gpu("GPU-a");
  auto proc = [](uint32_t pid, uint32_t uid, int64_t gib) {
    GpuProcess p;
    p.pid = pid;
    p.uid = uid;
    p.is_visible = true;
    p.used_memory_bytes = gib << 30;
    return p;
  };
  gpu.processes = {proc(1, 1000, 12), proc(2, 1000, 10), proc(3, 1001, 5), proc(4, 1002, 50)};
  Lease a = LeaseOf(3, 1000, {"GPU-a"});
  Lease b = LeaseOf(4, 1001, {"GPU-a"});
  Lease whole = LeaseOf(5, 1002, {"GPU-b"});
  a.gpu_memory_bytes = int64_t{20} << 30;
  b.gpu_memory_bytes = int64_t{20} << 30;
  auto over = SliceOverruns(gpu, {a, b, whole});
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].lease_id, 3);
  EXPECT_EQ(over[0].used_bytes, int64_t{22} << 30);
  EXPECT_EQ(over[0].declared_bytes, int64_t{20} << 30);
  // Two slices of one holder on a GPU are one budget: 22 of 40 GiB is within it.
  Lease a2 = LeaseOf(6, 1000, {"GPU-a"});
  a2.gpu_memory_bytes = int64_t{20} << 30;
  EXPECT_TRUE(SliceOverruns(gpu, {a, a2, b}).empty());
  // Whole-GPU leases have no budget to overrun.
  EXPECT_TRUE(SliceOverruns(gpu, {LeaseOf(7, 1000, {"GPU-a"})}).empty());
}

}  // namespace
}  // namespace gpuman::model
