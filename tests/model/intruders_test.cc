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

}  // namespace
}  // namespace gpuman::model
