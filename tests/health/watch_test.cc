#include "health/watch.h"

#include <gtest/gtest.h>

#include <optional>

#include "health/findings.h"

namespace gpuman::health {
namespace {

using model::Severity;

model::MachineSnapshot TwoGpus() {
  model::MachineSnapshot snap;
  for (int i = 0; i < 2; ++i) {
    model::DeviceSnapshot d;
    d.index = i;
    d.uuid = "GPU-" + std::to_string(i);
    d.pci_bus_id = i == 0 ? "00000000:07:00.0" : "00000000:0A:00.0";
    snap.gpus.push_back(d);
  }
  return snap;
}

model::XidEvent Xid(int xid, const std::string& uuid, int64_t at, const std::string& source = "nvml_event") {
  model::XidEvent ev;
  ev.xid = xid;
  ev.gpu_uuid = uuid;
  ev.at_unix_ms = at;
  ev.source = source;
  return ev;
}

// A copy, not a pointer: HealthWatch::Report() returns a temporary, which a pointer into
// it would outlive.
std::optional<model::Finding> Find(const model::HealthReport& r, const std::string& code,
                                   int gpu) {
  for (const auto& f : r.findings) {
    if (f.code == code && f.gpu_index == gpu) return f;
  }
  return std::nullopt;
}

TEST(SnapshotFindingsTest, SignalsAndSeverities) {
  auto snap = TwoGpus();
  snap.gpus[0].ecc_volatile_uncorrected = 3;
  snap.gpus[0].is_healthy = false;
  snap.gpus[0].ecc_aggregate_uncorrected = 5;
  snap.gpus[1].clock_event_reasons = 0x40 | 0x80;  // hw thermal + power brake
  auto f = SnapshotFindings(snap);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].code, "ecc_volatile_uncorrected");
  EXPECT_EQ(f[0].severity, Severity::kFatal);
  EXPECT_EQ(f[1].code, "ecc_aggregate_uncorrected");
  EXPECT_EQ(f[1].severity, Severity::kWarning);
  EXPECT_EQ(f[2].code, "throttle_thermal");
  EXPECT_EQ(f[3].code, "throttle_power");
}

TEST(SnapshotFindingsTest, LostGpuIsOneFatalFinding) {
  auto snap = TwoGpus();
  snap.gpus[1].is_healthy = false;
  snap.gpus[1].health_problems = {"nvmlDeviceGetMemoryInfo_v2: gpu is lost"};
  auto f = SnapshotFindings(snap);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].code, "gpu_lost");
  EXPECT_EQ(f[0].gpu_index, 1);
  EXPECT_EQ(f[0].gpu_uuid, "GPU-1");
}

TEST(HealthWatchTest, FatalXidDrainsAndQuietRecheckLifts) {
  HealthPolicy policy;
  policy.recheck_after_ms = 60000;
  HealthWatch watch(policy);
  auto snap = TwoGpus();
  EXPECT_TRUE(watch.Update(&snap, "", 1000).drain.empty());

  watch.AddXid(Xid(79, "GPU-1", 2000));
  auto ch = watch.Update(&snap, "", 2500);
  ASSERT_EQ(ch.drain.size(), 1u);
  EXPECT_EQ(ch.drain[0].first, "GPU-1");
  EXPECT_EQ(ch.drain[0].second.rfind("health: Xid 79", 0), 0u) << ch.drain[0].second;
  std::optional<model::Finding> f = Find(watch.Report(), "xid", 1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->severity, Severity::kFatal);
  EXPECT_TRUE(watch.Report().has_fatal());

  // Drained once, not again on every update; not lifted before the quiet time.
  ch = watch.Update(&snap, "", 30000);
  EXPECT_TRUE(ch.drain.empty());
  EXPECT_TRUE(ch.lift.empty());
  EXPECT_EQ(watch.quarantined().count("GPU-1"), 1u);

  ch = watch.Update(&snap, "", 2000 + 60000);
  ASSERT_EQ(ch.lift.size(), 1u);
  EXPECT_EQ(ch.lift[0], "GPU-1");
  EXPECT_TRUE(watch.quarantined().empty());
  f = Find(watch.Report(), "xid", 1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->severity, Severity::kWarning);  // cleared by the recheck, still reported
  EXPECT_NE(f->message.find("cleared"), std::string::npos);
  EXPECT_FALSE(watch.Report().has_fatal());

  // A new fatal Xid after the recheck drains again.
  watch.AddXid(Xid(48, "GPU-1", 70000));
  ch = watch.Update(&snap, "", 70001);
  ASSERT_EQ(ch.drain.size(), 1u);
}

TEST(HealthWatchTest, UnhealthySnapshotKeepsTheDrainUntilItRecovers) {
  HealthPolicy policy;
  policy.recheck_after_ms = 1000;
  HealthWatch watch(policy);
  auto bad = TwoGpus();
  bad.gpus[0].is_healthy = false;
  bad.gpus[0].remapped_rows_pending = true;
  ASSERT_EQ(watch.Update(&bad, "", 0).drain.size(), 1u);
  EXPECT_TRUE(watch.Update(&bad, "", 50000).lift.empty());  // still pending: no lift, however long
  auto good = TwoGpus();
  EXPECT_TRUE(watch.Update(&good, "", 50100).lift.empty());  // quiet time runs from the last bad sample
  EXPECT_EQ(watch.Update(&good, "", 51000).lift.size(), 1u);
}

// A GPU in MIG mode (h100-mig: 3g.40gb + 2x 2g.20gb) is judged as any GPU, with its nearly
// full memory no finding; one note says its MIG devices share its health.
TEST(HealthWatchTest, AGpuInMigModeIsJudgedAsAGpuAndNotedWithItsMigDevices) {
  HealthWatch watch(HealthPolicy{});
  auto snap = TwoGpus();
  auto& g = snap.gpus[0];
  g.mig_mode_current = true;
  g.memory_total_bytes = 80LL << 30;
  g.memory_used_bytes = 79LL << 30;
  g.memory_free_bytes = 1LL << 30;
  for (const char* p : {"3g.40gb", "2g.20gb", "2g.20gb"}) {
    model::MigDevice m;
    m.profile = p;
    g.mig_devices.push_back(m);
  }
  auto ch = watch.Update(&snap, "", 100);
  EXPECT_TRUE(ch.drain.empty());
  const model::HealthReport r = watch.Report();
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "GPU 0 is in MIG mode with 3 MIG devices (3g.40gb, 2x 2g.20gb): its findings and drains are theirs");
  watch.Update(&snap, "", 200);
  EXPECT_EQ(watch.Report().notes.size(), 1u) << "one note per GPU, not one per update";
}

TEST(HealthWatchTest, WarningXidNeverDrains) {
  HealthWatch watch(HealthPolicy{});
  auto snap = TwoGpus();
  watch.AddXid(Xid(13, "GPU-0", 100));
  auto ch = watch.Update(&snap, "", 200);
  EXPECT_TRUE(ch.drain.empty());
  std::optional<model::Finding> f = Find(watch.Report(), "xid", 0);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->severity, Severity::kWarning);
}

TEST(HealthWatchTest, KernelLogXidIsMatchedByBusIdAndDedupedAgainstTheEvent) {
  HealthWatch watch(HealthPolicy{});
  auto snap = TwoGpus();
  watch.AddXid(Xid(48, "GPU-1", 10000, "nvml_event"));
  model::XidEvent line;
  line.xid = 48;
  line.pci_bus_id = "00000000:0A:00.0";
  line.at_unix_ms = 12000;
  line.source = "kernel_log";
  watch.AddXid(line);  // unmatched yet: no uuid
  model::XidEvent other = line;
  other.xid = 79;
  other.pci_bus_id = "00000000:07:00.0";
  watch.AddXid(other);
  watch.Update(&snap, "", 13000);
  std::optional<model::Finding> f48 = Find(watch.Report(), "xid", 1);
  ASSERT_TRUE(f48.has_value());
  EXPECT_EQ(f48->xid, 48);
  std::optional<model::Finding> f79 = Find(watch.Report(), "xid", 0);
  ASSERT_TRUE(f79.has_value());
  EXPECT_EQ(f79->gpu_uuid, "GPU-0");
  EXPECT_EQ(f79->source, "kernel_log");
  EXPECT_EQ((watch.xid_totals().at({"GPU-0", 79})), 1);
  // The kernel line of the error the NVML event already reported counts once.
  EXPECT_EQ((watch.xid_totals().at({"GPU-1", 48})), 1);
  EXPECT_EQ(f48->count, 1);
}

TEST(HealthWatchTest, SameIdentityFromBothSourcesCountsOnce) {
  HealthWatch watch(HealthPolicy{});
  auto snap = TwoGpus();
  watch.AddXid(Xid(48, "GPU-1", 10000, "nvml_event"));
  watch.AddXid(Xid(48, "GPU-1", 12000, "kernel_log"));
  watch.AddXid(Xid(48, "GPU-1", 30000, "kernel_log"));  // 20 s later: a second error
  watch.Update(&snap, "", 31000);
  EXPECT_EQ((watch.xid_totals().at({"GPU-1", 48})), 2);
  std::optional<model::Finding> f = Find(watch.Report(), "xid", 1);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->count, 2);
}

TEST(HealthWatchTest, OldXidsLeaveTheWindowButTotalsStay) {
  HealthPolicy policy;
  policy.xid_window_ms = 1000;
  HealthWatch watch(policy);
  auto snap = TwoGpus();
  watch.AddXid(Xid(94, "GPU-0", 0));
  watch.Update(&snap, "", 500);
  EXPECT_TRUE(Find(watch.Report(), "xid", 0).has_value());
  watch.Update(&snap, "", 5000);
  EXPECT_FALSE(Find(watch.Report(), "xid", 0).has_value());
  EXPECT_EQ((watch.xid_totals().at({"GPU-0", 94})), 1);
}

TEST(HealthWatchTest, DriverFailureIsAFatalFindingWithoutDrains) {
  HealthWatch watch(HealthPolicy{});
  auto ch = watch.Update(nullptr, "nvmlDeviceGetCount_v2: driver not loaded", 100);
  EXPECT_TRUE(ch.drain.empty());
  ASSERT_EQ(watch.Report().findings.size(), 1u);
  EXPECT_EQ(watch.Report().findings[0].code, "driver");
  EXPECT_TRUE(watch.Report().has_fatal());
}

TEST(HealthWatchTest, RestoredQuarantineIsLiftedAfterAQuietRecheck) {
  HealthPolicy policy;
  policy.recheck_after_ms = 1000;
  HealthWatch watch(policy);
  watch.RestoreQuarantine("GPU-0", 100);
  auto snap = TwoGpus();
  EXPECT_TRUE(watch.Update(&snap, "", 500).lift.empty());
  auto ch = watch.Update(&snap, "", 1200);
  ASSERT_EQ(ch.lift.size(), 1u);
  EXPECT_EQ(ch.lift[0], "GPU-0");
}

TEST(HealthWatchTest, NoDrainWhenDisabled) {
  HealthPolicy policy;
  policy.drain_on_fatal = false;
  HealthWatch watch(policy);
  auto snap = TwoGpus();
  watch.AddXid(Xid(79, "GPU-0", 10));
  EXPECT_TRUE(watch.Update(&snap, "", 20).drain.empty());
  EXPECT_TRUE(watch.Report().has_fatal());
}

}  // namespace
}  // namespace gpuman::health
