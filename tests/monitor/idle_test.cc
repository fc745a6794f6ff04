#include "monitor/idle.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

namespace gpuman::monitor {
namespace {

constexpr int64_t kMin = 60 * 1000;
constexpr int64_t kT0 = 1'700'000'000'000;

model::DeviceSnapshot Gpu(int index, std::optional<int> util) {
  model::DeviceSnapshot d;
  d.index = index;
  d.uuid = "GPU-" + std::to_string(index);
  d.name = "Test GPU";
  d.gpu_utilization_percent = util;
  return d;
}

model::MachineSnapshot Snap(std::vector<std::optional<int>> utils) {
  model::MachineSnapshot s;
  for (size_t i = 0; i < utils.size(); ++i) s.gpus.push_back(Gpu(static_cast<int>(i), utils[i]));
  return s;
}

model::Lease Lease(int64_t id, std::vector<std::string> gpus, std::string kind = "run") {
  model::Lease l;
  l.id = id;
  l.gpu_uuids = std::move(gpus);
  l.user = "alice";
  l.uid = 1000;
  l.kind = std::move(kind);
  return l;
}

IdlePolicy Policy() {
  IdlePolicy p;
  p.threshold_percent = 5;
  p.idle_after_ms = 30 * kMin;
  p.notify_command = {"/bin/true"};
  p.release_after_ms = 120 * kMin;
  return p;
}

int Count(const std::vector<IdleAction>& actions, IdleAction::Kind kind) {
  int n = 0;
  for (const auto& a : actions) n += a.kind == kind ? 1 : 0;
  return n;
}

TEST(IdleWatchTest, FlaggedExactlyAfterIdleAfterAndNotifiedOnce) {
  IdleWatch watch(Policy(), "host1");
  std::vector<model::Lease> leases = {Lease(7, {"GPU-0"})};
  auto snap = Snap({0});
  int notifies = 0;
  for (int64_t t = kT0; t < kT0 + 30 * kMin; t += kMin) {
    notifies += Count(watch.Update(snap, leases, {}, t), IdleAction::kNotify);
    EXPECT_FALSE(watch.IdleSince(7)) << "at +" << (t - kT0) / kMin << " min";
  }
  auto actions = watch.Update(snap, leases, {}, kT0 + 30 * kMin);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, IdleAction::kNotify);
  EXPECT_EQ(actions[0].idle_since_unix_ms, kT0);
  EXPECT_EQ(actions[0].lease.id, 7);
  EXPECT_EQ(actions[0].lease.idle_since_unix_ms, kT0);
  EXPECT_EQ(actions[0].payload["action"], "notify");
  EXPECT_EQ(actions[0].payload["kind"], "idle");
  EXPECT_EQ(actions[0].payload["lease"]["id"], 7);
  EXPECT_EQ(actions[0].payload["lease"]["user"], "alice");
  EXPECT_EQ(actions[0].payload["idle_seconds"], 30 * 60);
  EXPECT_EQ(actions[0].payload["hostname"], "host1");
  EXPECT_EQ(notifies, 0);
  EXPECT_EQ(watch.IdleSince(7), kT0);
  for (int64_t t = kT0 + 31 * kMin; t < kT0 + 60 * kMin; t += kMin) {
    EXPECT_EQ(Count(watch.Update(snap, leases, {}, t), IdleAction::kNotify), 0);
  }
}

TEST(IdleWatchTest, BusySampleEndsTheEpisodeAndANewOneNotifiesAgain) {
  IdleWatch watch(Policy());
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"})};
  EXPECT_EQ(watch.Update(Snap({2}), leases, {}, kT0).size(), 0u);
  EXPECT_EQ(Count(watch.Update(Snap({2}), leases, {}, kT0 + 30 * kMin), IdleAction::kNotify), 1);
  // Exactly at the threshold counts as busy.
  EXPECT_EQ(watch.Update(Snap({5}), leases, {}, kT0 + 31 * kMin).size(), 0u);
  EXPECT_FALSE(watch.IdleSince(1));
  // A new episode starts at the next idle sample and is flagged 30 minutes after it.
  watch.Update(Snap({0}), leases, {}, kT0 + 32 * kMin);
  EXPECT_EQ(watch.Update(Snap({0}), leases, {}, kT0 + 61 * kMin).size(), 0u);
  auto actions = watch.Update(Snap({0}), leases, {}, kT0 + 62 * kMin);
  ASSERT_EQ(Count(actions, IdleAction::kNotify), 1);
  EXPECT_EQ(watch.IdleSince(1), kT0 + 32 * kMin);
}

TEST(IdleWatchTest, ReleasesOnlyInteractiveLeasesAndOnlyAfterReleaseAfter) {
  IdleWatch watch(Policy());
  model::Job job;
  job.id = 42;
  job.lease_id = 3;
  job.state = model::JobState::kRunning;
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"}, "run"), Lease(2, {"GPU-1"}, "select"),
                                      Lease(3, {"GPU-2"}, "job")};
  auto snap = Snap({0, 0, 0});
  std::vector<IdleAction> all;
  for (int64_t t = kT0; t < kT0 + 120 * kMin; t += kMin) {
    auto a = watch.Update(snap, leases, {job}, t);
    EXPECT_EQ(Count(a, IdleAction::kRelease), 0) << "at +" << (t - kT0) / kMin << " min";
    all.insert(all.end(), a.begin(), a.end());
  }
  EXPECT_EQ(Count(all, IdleAction::kNotify), 3);  // everyone is told, queue jobs too
  auto actions = watch.Update(snap, leases, {job}, kT0 + 120 * kMin);
  ASSERT_EQ(actions.size(), 2u);
  for (const auto& a : actions) {
    EXPECT_EQ(a.kind, IdleAction::kRelease);
    EXPECT_NE(a.lease.id, 3);
    EXPECT_EQ(a.payload["action"], "release");
  }
  // At most once per episode.
  EXPECT_EQ(watch.Update(snap, leases, {job}, kT0 + 121 * kMin).size(), 0u);
}

TEST(IdleWatchTest, NoReleaseWithoutReleaseAfterAndNoNotifyWithoutCommand) {
  IdlePolicy p = Policy();
  p.release_after_ms.reset();
  p.notify_command.clear();
  IdleWatch watch(p);
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"})};
  for (int64_t t = kT0; t <= kT0 + 24 * 60 * kMin; t += 10 * kMin) {
    EXPECT_EQ(watch.Update(Snap({0}), leases, {}, t).size(), 0u);
  }
  EXPECT_EQ(watch.IdleSince(1), kT0);  // still flagged for status
}

TEST(IdleWatchTest, MissingUtilizationIsNotIdle) {
  IdleWatch watch(Policy());
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"})};
  for (int64_t t = kT0; t <= kT0 + 60 * kMin; t += kMin) {
    EXPECT_EQ(watch.Update(Snap({std::nullopt}), leases, {}, t).size(), 0u);
  }
  EXPECT_FALSE(watch.IdleSince(1));
  // A GPU missing from the snapshot (lost) is not idle either, and a gap ends the episode.
  watch.Update(Snap({0}), leases, {}, kT0);
  watch.Update(model::MachineSnapshot{}, leases, {}, kT0 + 10 * kMin);
  watch.Update(Snap({0}), leases, {}, kT0 + 20 * kMin);
  EXPECT_EQ(watch.Update(Snap({0}), leases, {}, kT0 + 40 * kMin).size(), 0u);
  EXPECT_EQ(watch.Update(Snap({0}), leases, {}, kT0 + 50 * kMin).size(), 1u);
  EXPECT_EQ(watch.IdleSince(1), kT0 + 20 * kMin);
}

TEST(IdleWatchTest, MultiGpuLeaseIsIdleOnlyWhenAllGpusAre) {
  IdleWatch watch(Policy());
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0", "GPU-1"})};
  for (int64_t t = kT0; t <= kT0 + 60 * kMin; t += kMin) {
    EXPECT_EQ(watch.Update(Snap({0, 80}), leases, {}, t).size(), 0u);
  }
  EXPECT_FALSE(watch.IdleSince(1));
  watch.Update(Snap({0, 1}), leases, {}, kT0 + 61 * kMin);
  EXPECT_EQ(watch.Update(Snap({1, 0}), leases, {}, kT0 + 91 * kMin).size(), 1u);
}

TEST(IdleWatchTest, PerProcessSmPercentCountsWhenLargerThanDeviceUtilization) {
  auto snap = Snap({1});
  model::GpuProcess a, b;
  a.pid = 10;
  a.sm_util_percent = 4;
  b.pid = 11;
  b.sm_util_percent = 3;
  snap.gpus[0].processes = {a, b};
  EXPECT_EQ(GpuActivityPercent(snap.gpus[0]), 7.0);  // 4 + 3 > 1
  snap.gpus[0].gpu_utilization_percent = 50;
  EXPECT_EQ(GpuActivityPercent(snap.gpus[0]), 50.0);
  snap.gpus[0].gpu_utilization_percent.reset();
  EXPECT_EQ(GpuActivityPercent(snap.gpus[0]), 7.0);  // only SM % known
  snap.gpus[0].processes.clear();
  EXPECT_FALSE(GpuActivityPercent(snap.gpus[0]));

  IdleWatch watch(Policy());
  auto busy = Snap({1});
  busy.gpus[0].processes = {a, b};
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"})};
  watch.Update(busy, leases, {}, kT0);
  watch.Update(busy, leases, {}, kT0 + 40 * kMin);
  EXPECT_FALSE(watch.IdleSince(1));
}

TEST(IdleWatchTest, ForgetsLeasesThatDisappearAndAnnotatesCopies) {
  IdleWatch watch(Policy());
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"}), Lease(2, {"GPU-1"})};
  watch.Update(Snap({0, 90}), leases, {}, kT0);
  watch.Update(Snap({0, 90}), leases, {}, kT0 + 30 * kMin);

  std::vector<model::Lease> copies = leases;
  copies[1].idle_since_unix_ms = 5;  // stale value is cleared
  watch.Annotate(copies);
  EXPECT_EQ(copies[0].idle_since_unix_ms, kT0);
  EXPECT_FALSE(copies[1].idle_since_unix_ms);

  model::Job job, other;
  job.lease_id = 1;
  other.lease_id = 2;
  std::vector<model::Job> jobs = {job, other, model::Job{}};
  watch.Annotate(jobs);
  EXPECT_EQ(jobs[0].idle_since_unix_ms, kT0);
  EXPECT_FALSE(jobs[1].idle_since_unix_ms);
  EXPECT_FALSE(jobs[2].idle_since_unix_ms);

  // Lease 1 goes away; if id 1 came back it would start fresh.
  watch.Update(Snap({0, 90}), {leases[1]}, {}, kT0 + 31 * kMin);
  EXPECT_FALSE(watch.IdleSince(1));
  watch.Update(Snap({0, 90}), leases, {}, kT0 + 32 * kMin);
  EXPECT_FALSE(watch.IdleSince(1));
}

TEST(IdleWatchTest, DisabledDoesNothing) {
  IdlePolicy p = Policy();
  p.enabled = false;
  IdleWatch watch(p);
  std::vector<model::Lease> leases = {Lease(1, {"GPU-0"})};
  for (int64_t t = kT0; t <= kT0 + 300 * kMin; t += 30 * kMin) {
    EXPECT_EQ(watch.Update(Snap({0}), leases, {}, t).size(), 0u);
  }
  EXPECT_FALSE(watch.IdleSince(1));
}

TEST(IdleWatchTest, LeaseWithoutGpusIsNeverIdle) {
  IdleWatch watch(Policy());
  std::vector<model::Lease> leases = {Lease(1, {})};
  watch.Update(Snap({0}), leases, {}, kT0);
  watch.Update(Snap({0}), leases, {}, kT0 + 300 * kMin);
  EXPECT_FALSE(watch.IdleSince(1));
}

// ---- [idle] table ----

Result<IdlePolicy> ParseIdle(const std::string& text) {
  toml::table t = toml::parse(text);
  return ParseIdlePolicy(*t["idle"].as_table(), "test.toml");
}

TEST(ParseIdlePolicyTest, ReadsAllKeys) {
  auto p = ParseIdle(R"([idle]
threshold_percent = 10
after = "45m"
notify_command = ["/usr/local/bin/tell", "--idle"]
release_after = "4h"
)");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->enabled);
  EXPECT_EQ(p->threshold_percent, 10.0);
  EXPECT_EQ(p->idle_after_ms, 45 * kMin);
  EXPECT_EQ(p->notify_command, (std::vector<std::string>{"/usr/local/bin/tell", "--idle"}));
  EXPECT_EQ(p->release_after_ms, 240 * kMin);
}

TEST(ParseIdlePolicyTest, DefaultsWhenEmpty) {
  auto p = ParseIdle("[idle]\n");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->threshold_percent, 5.0);
  EXPECT_EQ(p->idle_after_ms, 30 * kMin);
  EXPECT_TRUE(p->notify_command.empty());
  EXPECT_FALSE(p->release_after_ms);
}

TEST(ParseIdlePolicyTest, RejectsBadValues) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[idle]\nthreshold = 5\n", "config test.toml: idle: unknown key 'threshold'"},
      {"[idle]\nthreshold_percent = 0\n", "idle.threshold_percent"},
      {"[idle]\nthreshold_percent = 101\n", "idle.threshold_percent"},
      {"[idle]\nthreshold_percent = \"5\"\n", "idle.threshold_percent"},
      {"[idle]\nafter = \"soon\"\n", "idle.after"},
      {"[idle]\nafter = 30\n", "idle.after: must be a duration"},
      {"[idle]\nafter = \"0s\"\n", "idle.after: must be longer than 0"},
      {"[idle]\nnotify_command = []\n", "idle.notify_command"},
      {"[idle]\nnotify_command = \"/bin/true\"\n", "idle.notify_command"},
      {"[idle]\nnotify_command = [1]\n", "idle.notify_command"},
      {"[idle]\nafter = \"2h\"\nrelease_after = \"1h\"\n", "idle.release_after: must not be shorter than idle.after"},
      {"[idle]\nenabled = 1\n", "idle.enabled"},
  };
  for (const auto& c : cases) {
    auto p = ParseIdle(c.text);
    ASSERT_FALSE(p) << c.text;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(p.error().message.find(c.expect), std::string::npos) << p.error().message;
  }
}

}  // namespace
}  // namespace gpuman::monitor
