// The one acquire step (lease/acquire_step.h) through its two callers: the daemon's
// handler path (Daemon::Handle with an acquire or preview request) and the machine lease
// table's broker (MakeTableBroker). Each row gives both the same store (the daemon's
// state.db, seeded the same way), the same fake devices, rules and fake clock, and asserts
// that they answer alike: the GPUs granted, nested or not, or the refusal's kind and message.
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/lease_broker.h"
#include "daemon/daemon.h"
#include "devices/device_source.h"
#include "lease/acquire_step.h"
#include "lease/ports.h"
#include "protocol/envelope.h"
#include "protocol/error_codes.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "support/fake_clock.h"
#include "support/fake_launcher.h"
#include "support/temp_dir.h"

namespace gpuman {
namespace {

constexpr int kGpus = 4;
constexpr int64_t kStartMs = 1'700'000'000'000;

std::string Uuid(int i) { return "GPU-0000000" + std::to_string(i) + "-0000-0000-0000-000000000000"; }

using ::gpuman::testing::FakeClock;

// Four idle, healthy GPUs; counts its reads.
class FakeDevices final : public devices::DeviceSource {
 public:
  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions&) override {
    ++reads;
    model::MachineSnapshot snap;
    for (int i = 0; i < kGpus; ++i) {
      model::DeviceSnapshot g;
      g.index = i;
      g.uuid = Uuid(i);
      g.name = "Test GPU";
      g.memory_total_bytes = int64_t{80} << 30;
      g.memory_used_bytes = 0;
      g.memory_free_bytes = int64_t{80} << 30;
      g.gpu_utilization_percent = 0;
      g.compute_capability = "9.0";
      snap.gpus.push_back(g);
    }
    return snap;
  }
  int reads = 0;
};

// What a caller answered, in one shape for both.
struct Answer {
  std::vector<std::string> uuids;
  bool nested = false;
  int64_t lease_id = 0;
  std::optional<ErrorCode> refusal;
  std::string message;
};

std::string Describe(const Answer& a) {
  if (a.refusal) return "refused (" + std::to_string(static_cast<int>(*a.refusal)) + "): " + a.message;
  std::string s = a.nested ? "nested in " + std::to_string(a.lease_id) + ":" : "lease " + std::to_string(a.lease_id) + ":";
  for (const auto& u : a.uuids) s += " " + u.substr(0, 12);
  return s;
}

// The rules of one row, given to both authorities: the daemon as its config and drains,
// the table broker as MachineRules.
struct Rules {
  std::optional<int> cap;
  std::optional<int> drained;  // a GPU index
};

// One temporary store (a daemon's state.db) with a daemon on it, a table broker on the
// same file, and helpers to seed leases.
class World {
 public:
  explicit World(const Rules& rules) : rules_(rules) {
    daemon::DaemonOptions options;
    options.system_mode = true;
    options.state_dir = dir_.Join("state");
    options.socket_path = dir_.Join("gpuman.sock");
    options.scheduler.default_max_gpus_per_user = rules.cap;
    daemon_ = std::make_unique<daemon::Daemon>(options, devices_, clock_, launcher_);
    Status opened = daemon_->OpenState();
    EXPECT_TRUE(opened) << opened.error().message;
    auto store = store::LeaseStore::Open(options.state_dir + "/state.db");
    EXPECT_TRUE(store) << store.error().message;
    store_ = std::move(*store);
    policy::MachineRules machine;
    machine.default_max_gpus_per_user = rules.cap;
    if (rules.drained) {
      machine.drained[Uuid(*rules.drained)] = "fan noise";
      auto drained = Call(daemon::Peer{0, 0, 1, "root", true},
                          protocol::DrainArgs{std::to_string(*rules.drained), "fan noise"});
      EXPECT_TRUE(drained.ok()) << drained.error->message;
    }
    broker_ = cli::MakeTableBroker(
        *store_, [this]() -> Result<devices::DeviceSource*> { return &devices_; }, Me(), machine, dir_.path(),
        clock_);
  }

  static policy::Caller Me() { return policy::Caller{getuid(), "me", false}; }
  static daemon::Peer MePeer() { return daemon::Peer{getuid(), getgid(), getpid(), "me", false}; }
  static uint32_t BobUid() { return getuid() + 1; }

  /// A lease recorded straight in the store: of `uid`, on these GPUs, alive (held by this
  /// test process) or stale (held by a process that does not exist).
  int64_t Seed(uint32_t uid, const std::string& user, std::vector<int> gpus, bool alive = true) {
    model::Lease draft;
    draft.uid = uid;
    draft.user = user;
    draft.kind = "select";
    draft.command = "seeded";
    draft.created_unix_ms = kStartMs - 60'000;
    if (alive) {
      auto me = store::CurrentLeaseProcess(getpid());
      EXPECT_TRUE(me.has_value());
      draft.processes = {*me};
    } else {
      draft.processes = {{0x3ffffff0, 12345}};
    }
    std::vector<std::string> uuids;
    for (int i : gpus) uuids.push_back(Uuid(i));
    auto lease = store_->Acquire(
        draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return uuids; },
        [](const model::LeaseProcess& p) { return p.pid != 0x3ffffff0 && store::IsProcessAlive(p); });
    EXPECT_TRUE(lease) << lease.error().message;
    return lease ? lease->id : -1;
  }

  /// Every recorded lease (stale or not), to see what a call wrote.
  std::vector<model::Lease> Recorded() {
    auto all = store_->ListRecorded();
    EXPECT_TRUE(all);
    return all ? *all : std::vector<model::Lease>{};
  }
  std::optional<model::Lease> Get(int64_t id) {
    auto got = store_->Get(id);
    EXPECT_TRUE(got);
    return got ? *got : std::nullopt;
  }

  protocol::Reply Call(const daemon::Peer& peer, protocol::RequestArgs args) {
    return daemon_->Handle(peer, protocol::Request{++request_id_, std::move(args)});
  }

  // ---- the two callers

  Answer ThroughDaemon(const model::GpuRequest& req, std::optional<int64_t> within, bool preview) {
    std::vector<std::string> machine;
    for (int i = 0; i < kGpus; ++i) machine.push_back(Uuid(i));
    protocol::Reply reply;
    if (preview) {
      reply = Call(MePeer(), protocol::PreviewArgs{model::WithAllowedAsExclusions(req, machine), within});
    } else {
      protocol::AcquireArgs a;
      a.request = model::WithAllowedAsExclusions(req, machine);
      a.command = "python train.py";
      auto me = store::CurrentLeaseProcess(getpid());
      EXPECT_TRUE(me.has_value());
      a.pid = me->pid;
      a.start_time_ticks = me->start_time_ticks;
      a.within_lease_id = within;
      a.kind = "select";
      reply = Call(MePeer(), a);
    }
    Answer out;
    if (reply.error) {
      out.refusal = protocol::ToErrorCode(reply.error->code);
      out.message = reply.error->message;
      return out;
    }
    if (preview) {
      auto r = protocol::ResultOf<protocol::PreviewResult>(reply);
      EXPECT_TRUE(r) << r.error().message;
      out.uuids = r->gpu_uuids;
      out.nested = r->nested;
      out.lease_id = r->lease_id.value_or(0);
    } else {
      auto r = protocol::ResultOf<protocol::AcquireResult>(reply);
      EXPECT_TRUE(r) << r.error().message;
      out.uuids = r->gpu_uuids;
      out.nested = r->nested;
      out.lease_id = r->lease_id;
    }
    return out;
  }

  Answer ThroughTable(const model::GpuRequest& req, std::optional<int64_t> within, bool preview) {
    cli::LeaseAsk ask;
    ask.request = req;
    ask.within = within;
    ask.draft.kind = "select";
    ask.draft.command = "python train.py";
    auto me = store::CurrentLeaseProcess(getpid());
    EXPECT_TRUE(me.has_value());
    ask.draft.processes = {*me};
    auto got = preview ? broker_->Preview(ask) : broker_->TryAcquire(ask);
    Answer out;
    if (!got) {
      out.refusal = got.error().code;
      out.message = got.error().message;
      return out;
    }
    out.uuids = got->uuids;
    out.nested = got->nested;
    out.lease_id = got->lease_id;
    return out;
  }

  FakeClock& clock() { return clock_; }

 private:
  Rules rules_;
  testing::TempDir dir_;
  FakeDevices devices_;
  FakeClock clock_{kStartMs};
  ::gpuman::testing::FakeJobLauncher launcher_;  // no job starts here
  std::unique_ptr<daemon::Daemon> daemon_;
  std::unique_ptr<store::LeaseStore> store_;
  std::unique_ptr<cli::LeaseBroker> broker_;
  int64_t request_id_ = 0;
};

enum class Via { kDaemon, kTable };

std::optional<int64_t> Nothing(World&) { return std::nullopt; }

struct Row {
  const char* name;
  Rules rules;
  // Seeds the store; returns the lease to ask within (GPUMAN_LEASE_ID), if any.
  std::function<std::optional<int64_t>(World&)> given = Nothing;
  int count = 1;
  bool preview = false;
  // Expected: the GPU indices granted (empty for a refusal) ...
  std::vector<int> gpus;
  bool nested = false;
  // ... or the refusal, with a part of its message.
  std::optional<ErrorCode> refusal;
  std::string message_has;
};

// Each row names only what it sets; GCC 12 still warns about the members left out.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
std::vector<Row> Rows() {
  const uint32_t me = World::Me().uid;
  const uint32_t bob = World::BobUid();
  auto seed = [](uint32_t uid, const char* user, std::vector<int> gpus, bool alive = true) {
    return [=](World& w) -> std::optional<int64_t> { return w.Seed(uid, user, gpus, alive); };
  };
  auto seed_only = [](uint32_t uid, const char* user, std::vector<int> gpus, bool alive = true) {
    return [=](World& w) -> std::optional<int64_t> {
      w.Seed(uid, user, gpus, alive);
      return std::nullopt;
    };
  };
  using E = ErrorCode;
  return {
      {.name = "free GPUs", .count = 2, .gpus = {0, 1}},
      {.name = "all busy", .given = seed_only(bob, "bob", {0, 1, 2, 3}), .refusal = E::kBusy,
       .message_has = "need 1 GPU, 0 eligible"},
      {.name = "more than the machine", .count = 5, .refusal = E::kNotFound, .message_has = "this machine has 4 GPUs"},
      {.name = "cap per user: above it is never", .rules = {.cap = 2}, .count = 3, .refusal = E::kNotFound,
       .message_has = "may hold at most 2 GPUs (max_gpus_per_user)"},
      {.name = "cap per user: reached is busy", .rules = {.cap = 2}, .given = seed_only(me, "me", {0}), .count = 2,
       .refusal = E::kBusy, .message_has = "me holds 1 GPU of at most 2 GPUs (max_gpus_per_user); asked for 2 more"},
      {.name = "cap per user: within it", .rules = {.cap = 2}, .given = seed_only(me, "me", {0}), .gpus = {1}},
      {.name = "drained GPU is passed over", .rules = {.drained = 0}, .count = 3, .gpus = {1, 2, 3}},
      {.name = "drained GPU says why", .rules = {.drained = 0}, .count = 4, .refusal = E::kBusy,
       .message_has = "GPU 0 drained (fan noise)"},
      {.name = "nested within its GPUs", .given = seed(me, "me", {1, 2}), .gpus = {1}, .nested = true},
      {.name = "nested: all its GPUs", .given = seed(me, "me", {1, 2}), .count = 2, .gpus = {1, 2}, .nested = true},
      {.name = "nested beyond its GPUs", .given = seed(me, "me", {1, 2}), .count = 3, .refusal = E::kNotFound,
       .message_has = "which holds 2 GPUs"},
      {.name = "nested in a lease that ended", .given = [](World&) { return std::optional<int64_t>(99); },
       .refusal = E::kInvalidArgument, .message_has = "GPUMAN_LEASE_ID=99: no such lease (it ended?)"},
      {.name = "someone else's lease is respected", .given = seed_only(bob, "bob", {0, 1}), .count = 2,
       .gpus = {2, 3}},
      {.name = "someone else's lease says whose", .given = seed_only(bob, "bob", {0, 1, 2}), .count = 2,
       .refusal = E::kBusy, .message_has = "leased to bob"},
      {.name = "someone else's lease is not yours to join", .given = seed(bob, "bob", {0}),
       .refusal = E::kPermissionDenied, .message_has = "the lease belongs to bob, not to you"},
      {.name = "stale lease reclaimed", .given = seed_only(bob, "bob", {0, 1, 2, 3}, false), .count = 4,
       .gpus = {0, 1, 2, 3}},
      {.name = "preview of free GPUs", .count = 2, .preview = true, .gpus = {0, 1}},
      {.name = "preview when busy", .given = seed_only(bob, "bob", {0, 1, 2}), .count = 2, .preview = true,
       .refusal = E::kBusy, .message_has = "need 2 GPUs, 1 eligible"},
      {.name = "preview past a stale lease", .given = seed_only(bob, "bob", {0, 1}, false), .count = 4,
       .preview = true, .gpus = {0, 1, 2, 3}},
      {.name = "preview nested", .given = seed(me, "me", {2, 3}), .preview = true, .gpus = {2}, .nested = true},
  };
}
#pragma GCC diagnostic pop

// Runs `row` through one caller on its own, identically seeded store (so that lease ids,
// which refusals name, match), and checks what that caller wrote.
Answer RunRow(const Row& row, Via via) {
  World world(row.rules);
  const std::optional<int64_t> within = row.given(world);
  const std::vector<model::Lease> before = world.Recorded();
  world.clock().now = kStartMs + 5000;  // the lease's creation time comes from the clock seam
  model::GpuRequest req;
  req.count = row.count;
  Answer a = via == Via::kDaemon ? world.ThroughDaemon(req, within, row.preview)
                                 : world.ThroughTable(req, within, row.preview);
  const std::vector<model::Lease> after = world.Recorded();
  if (row.preview || a.refusal) {
    // A preview or a refusal takes nothing: no lease written, no process joined (a stale
    // lease is reclaimed by a write only).
    EXPECT_EQ(after.size(), before.size());
    for (size_t i = 0; i < std::min(before.size(), after.size()); ++i) {
      EXPECT_EQ(after[i].id, before[i].id);
      EXPECT_EQ(after[i].processes, before[i].processes);
      EXPECT_EQ(after[i].gpu_uuids, before[i].gpu_uuids);
    }
  } else if (a.nested) {
    EXPECT_EQ(after.size(), before.size()) << "a nested request takes no lease of its own";
  } else {
    auto lease = world.Get(a.lease_id);
    EXPECT_TRUE(lease.has_value());
    if (lease) {
      EXPECT_EQ(lease->created_unix_ms, kStartMs + 5000);
      EXPECT_EQ(lease->gpu_uuids, a.uuids);
      EXPECT_EQ(lease->uid, World::Me().uid);
      EXPECT_EQ(lease->user, "me");
      EXPECT_EQ(lease->kind, "select");
      EXPECT_EQ(lease->command, "python train.py");
    }
    for (const auto& l : after) {
      EXPECT_FALSE(l.processes.size() == 1 && l.processes[0].pid == 0x3ffffff0) << "the stale lease is reclaimed";
    }
  }
  return a;
}

TEST(AcquireStepTest, BothAuthoritiesAnswerAlike) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    const Answer by_daemon = RunRow(row, Via::kDaemon);
    const Answer table = RunRow(row, Via::kTable);
    // The two callers agree ...
    EXPECT_EQ(by_daemon.refusal, table.refusal) << Describe(by_daemon) << " vs " << Describe(table);
    EXPECT_EQ(by_daemon.message, table.message);
    EXPECT_EQ(by_daemon.uuids, table.uuids);
    EXPECT_EQ(by_daemon.nested, table.nested);
    EXPECT_EQ(by_daemon.lease_id, table.lease_id);
    // ... and give the row's answer.
    EXPECT_EQ(table.refusal, row.refusal) << Describe(table);
    if (row.refusal) {
      EXPECT_NE(table.message.find(row.message_has), std::string::npos) << table.message;
    }
    std::vector<std::string> want;
    for (int i : row.gpus) want.push_back(Uuid(i));
    EXPECT_EQ(table.uuids, want) << Describe(table);
    EXPECT_EQ(table.nested, row.nested);
  }
}

// A preview answers what the acquire that follows gets, from either authority.
TEST(AcquireStepTest, APreviewIsWhatTheAcquireGets) {
  for (Via via : {Via::kDaemon, Via::kTable}) {
    SCOPED_TRACE(via == Via::kDaemon ? "daemon" : "table");
    World world({});
    world.Seed(World::BobUid(), "bob", {1});
    model::GpuRequest req;
    req.count = 2;
    auto call = [&](bool preview) {
      return via == Via::kDaemon ? world.ThroughDaemon(req, std::nullopt, preview)
                                 : world.ThroughTable(req, std::nullopt, preview);
    };
    const Answer preview = call(true);
    const Answer acquired = call(false);
    ASSERT_FALSE(preview.refusal) << preview.message;
    ASSERT_FALSE(acquired.refusal) << acquired.message;
    EXPECT_EQ(preview.uuids, acquired.uuids);
    EXPECT_EQ(preview.lease_id, 0);
    EXPECT_GT(acquired.lease_id, 0);
  }
}

// Rendezvous ports: the lowest of the range that no live lease holds and nobody has bound.
TEST(AcquireStepTest, MasterPortsAreTheLowestFreeOnesOfTheRange) {
  auto with_port = [](int64_t id, std::optional<int> port) {
    model::Lease l;
    l.id = id;
    l.master_port = port;
    return l;
  };
  const policy::PortRange range{30000, 30003};
  const auto all_free = [](int) { return true; };
  EXPECT_EQ(lease::ChooseMasterPort(range, {}, all_free), 30000);
  EXPECT_EQ(lease::ChooseMasterPort(range, {with_port(1, 30000), with_port(2, std::nullopt), with_port(3, 30002)}, all_free),
            30001);
  // A port something listens on is skipped, as is one a lease holds.
  EXPECT_EQ(lease::ChooseMasterPort(range, {with_port(1, 30000)}, [](int p) { return p != 30001; }), 30002);
  EXPECT_EQ(lease::ChooseMasterPort(range, {with_port(1, 30000), with_port(2, 30001), with_port(3, 30002)},
                                    [](int p) { return p != 30003; }),
            std::nullopt);
  // The store records the port chosen under its lock, and the step returns it; a lease
  // joined from inside gets the enclosing one's.
  World world({});
  model::GpuRequest req;
  req.count = 1;
  const Answer first = world.ThroughTable(req, std::nullopt, false);
  ASSERT_FALSE(first.refusal) << first.message;
  auto stored = world.Get(first.lease_id);
  ASSERT_TRUE(stored);
  ASSERT_TRUE(stored->master_port);
  EXPECT_GE(*stored->master_port, 29500);
  EXPECT_LE(*stored->master_port, 29999);
  const Answer second = world.ThroughTable(req, std::nullopt, false);
  ASSERT_FALSE(second.refusal) << second.message;
  ASSERT_TRUE(world.Get(second.lease_id)->master_port);
  EXPECT_NE(*world.Get(second.lease_id)->master_port, *stored->master_port);
}

// The daemon chooses on its latest sample: what ended since is not in the way.
TEST(AcquireStepTest, ASampleLeavesOutProcessesThatEndedAndTheirMemory) {
  model::MachineSnapshot sample;
  model::DeviceSnapshot g;
  g.index = 0;
  g.uuid = "GPU-0";
  g.memory_total_bytes = 80;
  g.memory_used_bytes = 75;
  g.memory_free_bytes = 5;
  auto process = [](uint32_t pid, int64_t used, bool visible) {
    model::GpuProcess p;
    p.pid = pid;
    p.used_memory_bytes = used;
    p.is_visible = visible;
    return p;
  };
  g.processes = {process(10, 40, true), process(11, 20, true), process(12, 15, false)};
  sample.gpus = {g};
  const auto ended = [](uint32_t pid) { return pid == 10 || pid == 12; };
  const model::MachineSnapshot now = lease::WithoutEndedProcesses(sample, ended);
  ASSERT_EQ(now.gpus.size(), 1u);
  std::vector<uint32_t> left;
  for (const auto& p : now.gpus[0].processes) left.push_back(p.pid);
  // 10 ended; 12 is not in our PID namespace, so whether it ended cannot be told: it stays.
  EXPECT_EQ(left, (std::vector<uint32_t>{11, 12}));
  EXPECT_EQ(now.gpus[0].memory_used_bytes, 35);
  EXPECT_EQ(now.gpus[0].memory_free_bytes, 45);
  EXPECT_EQ(now.gpus[0].memory_total_bytes, 80);
  // Nothing ended: the sample as it was.
  const model::MachineSnapshot same = lease::WithoutEndedProcesses(sample, [](uint32_t) { return false; });
  EXPECT_EQ(same.gpus[0].processes.size(), 3u);
  EXPECT_EQ(same.gpus[0].memory_free_bytes, 5);
}

}  // namespace
}  // namespace gpuman
