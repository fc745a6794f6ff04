// The command table through Daemon::Handle, with a Peer per role: every operation, and
// the finer rules (private fields, raising priority, another user's process).
#include <unistd.h>

#include <gtest/gtest.h>

#include "visibility/child_env.h"

#include <functional>
#include <map>
#include <variant>

#include "daemon/daemon.h"
#include "daemon/daemon_world.h"

namespace gpuman::daemon {
namespace {

using protocol::Op;
using protocol::Reply;
using protocol::RequestArgs;
using protocol::WireCode;
using protocol::WireError;
using testing::PeerFor;
using testing::World;

constexpr int32_t kNoSuchPid = 0x3ffffff0;

// The verdict on a request: its error, or for cancel / hold / resume the first id's.
std::optional<WireError> Verdict(const Reply& reply, Op op) {
  if (reply.error) return reply.error;
  if (op == Op::kCancel || op == Op::kHold || op == Op::kResume || op == Op::kUpdate) {
    auto ids = protocol::ResultOf<protocol::IdsResult>(reply);
    if (!ids || ids->results.size() != 1) return WireError{WireCode::kInternal, "bad ids result"};
    return ids->results[0].error;
  }
  return std::nullopt;
}

struct OpCase {
  // The request, naming objects of the owner that `world` holds.
  std::function<RequestArgs(World& world)> make;
  // What a caller the table lets through gets: nullopt for success, else the handler's
  // own (non-permission) verdict on these arguments.
  std::optional<WireCode> when_allowed;
};

std::map<Op, OpCase> Cases() {
  std::map<Op, OpCase> cases;
  cases[Op::kHello] = {[](World&) -> RequestArgs { return protocol::HelloArgs{}; }, std::nullopt};
  cases[Op::kSubmit] = {[](World& w) -> RequestArgs {
                          protocol::SubmitArgs s;
                          s.argv = {"true"};
                          s.cwd = w.dir().path();
                          return s;
                        },
                        std::nullopt};
  cases[Op::kQueue] = {[](World&) -> RequestArgs { return protocol::QueueArgs{true}; }, std::nullopt};
  cases[Op::kShow] = {[](World& w) -> RequestArgs { return protocol::ShowArgs{w.SubmitJob()}; }, std::nullopt};
  cases[Op::kCancel] = {[](World& w) -> RequestArgs { return protocol::CancelArgs{{w.SubmitJob()}}; }, std::nullopt};
  cases[Op::kHold] = {[](World& w) -> RequestArgs { return protocol::HoldArgs{{w.SubmitJob()}}; }, std::nullopt};
  cases[Op::kResume] = {[](World& w) -> RequestArgs { return protocol::ResumeArgs{{w.HeldJob()}}; }, std::nullopt};
  cases[Op::kWait] = {[](World& w) -> RequestArgs { return protocol::WaitArgs{w.SubmitJob()}; }, std::nullopt};
  cases[Op::kLogs] = {[](World& w) -> RequestArgs { return protocol::LogsArgs{w.SubmitJob(), 0}; }, std::nullopt};
  cases[Op::kDrain] = {[](World&) -> RequestArgs { return protocol::DrainArgs{"0", "test"}; }, std::nullopt};
  cases[Op::kUndrain] = {[](World& w) -> RequestArgs {
                           EXPECT_TRUE(w.Call(PeerFor(Role::kRoot), protocol::DrainArgs{"1", "test"}).ok());
                           return protocol::UndrainArgs{"1", ""};
                         },
                         std::nullopt};
  cases[Op::kLeases] = {[](World&) -> RequestArgs { return protocol::LeasesArgs{}; }, std::nullopt};
  // A process that does not exist: past the table, the handler refuses it for everyone.
  cases[Op::kAcquire] = {[](World&) -> RequestArgs {
                           protocol::AcquireArgs a;
                           a.pid = kNoSuchPid;
                           return a;
                         },
                         WireCode::kInvalidArgument};
  cases[Op::kAddProcesses] = {[](World& w) -> RequestArgs {
                                return protocol::AddProcessesArgs{w.OwnerLease(), {{kNoSuchPid, 0}}};
                              },
                              WireCode::kInvalidArgument};
  cases[Op::kRelease] = {[](World& w) -> RequestArgs { return protocol::ReleaseArgs{w.OwnerLease()}; }, std::nullopt};
  cases[Op::kStatus] = {[](World&) -> RequestArgs { return protocol::StatusArgs{}; }, std::nullopt};
  cases[Op::kHealth] = {[](World&) -> RequestArgs { return protocol::HealthArgs{}; }, std::nullopt};
  cases[Op::kDrains] = {[](World&) -> RequestArgs { return protocol::DrainsArgs{}; }, std::nullopt};
  cases[Op::kSnapshot] = {[](World&) -> RequestArgs { return protocol::SnapshotArgs{}; }, std::nullopt};
  cases[Op::kPreview] = {[](World&) -> RequestArgs { return protocol::PreviewArgs{}; }, std::nullopt};
  cases[Op::kUpdate] = {[](World& w) -> RequestArgs {
                          protocol::UpdateArgs u;
                          u.ids = {w.SubmitJob()};
                          u.time_limit_ms = 60000;
                          return u;
                        },
                        std::nullopt};
  return cases;
}

TEST(CommandTableTest, HasOneRowPerOperationInOpOrder) {
  auto rows = Daemon::Commands();
  ASSERT_EQ(rows.size(), std::variant_size_v<RequestArgs>) << "every protocol::Op needs a row in commands.cc";
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].op), i) << protocol::OpName(rows[i].op);
    EXPECT_NE(rows[i].handler, nullptr);
    if (rows[i].who == Access::kOwner) {
      EXPECT_NE(rows[i].target, Target::kNone) << protocol::OpName(rows[i].op) << ": an owner row must name a job or lease";
    }
  }
}

// Every operation, called by every role, is allowed or refused as its row says.
TEST(CommandTableTest, EveryOperationForEveryRole) {
  const auto cases = Cases();
  for (const Daemon::Command& row : Daemon::Commands()) {
    const char* name = protocol::OpName(row.op);
    auto found = cases.find(row.op);
    ASSERT_NE(found, cases.end()) << "add a case for op " << name;
    for (Role role : kRoles) {
      SCOPED_TRACE(std::string(name) + " as " + RoleName(role));
      World world;
      RequestArgs args = found->second.make(world);
      ASSERT_EQ(static_cast<Op>(args.index()), row.op);
      Reply reply = world.Call(PeerFor(role), args);
      std::optional<WireError> verdict = Verdict(reply, row.op);
      if (Allows(row.who, role)) {
        if (found->second.when_allowed) {
          ASSERT_TRUE(verdict.has_value());
          EXPECT_EQ(verdict->code, *found->second.when_allowed) << verdict->message;
        } else {
          EXPECT_FALSE(verdict.has_value()) << verdict->message;
        }
      } else {
        ASSERT_TRUE(verdict.has_value()) << "allowed, but the table says no";
        EXPECT_EQ(verdict->code, WireCode::kPermissionDenied) << verdict->message;
        const bool names_owner = verdict->message.find(" belongs to ") != std::string::npos;
        const bool names_admins = verdict->message.find("only root or the admin group may ") != std::string::npos;
        EXPECT_TRUE(names_owner || names_admins) << verdict->message;
      }
    }
  }
}

TEST(CommandTableTest, TodaysRulesHold) {
  // The matrix as it was before the table existed (the 267-line switch), spelled out.
  const std::map<Op, std::string> expected = {
      {Op::kHello, "yyyy"},  {Op::kSubmit, "yyyy"}, {Op::kQueue, "yyyy"},   {Op::kShow, "yyyy"},
      {Op::kCancel, "ynyy"}, {Op::kHold, "ynyy"},   {Op::kResume, "ynyy"},  {Op::kWait, "yyyy"},
      {Op::kLogs, "ynyy"},   {Op::kDrain, "nnyy"},  {Op::kUndrain, "nnyy"}, {Op::kLeases, "yyyy"},
      {Op::kAcquire, "yyyy"}, {Op::kAddProcesses, "ynyy"}, {Op::kRelease, "ynyy"}, {Op::kStatus, "yyyy"},
      {Op::kHealth, "yyyy"},
      {Op::kDrains, "yyyy"},
      {Op::kSnapshot, "yyyy"},
      {Op::kPreview, "yyyy"},
      {Op::kUpdate, "ynyy"},
  };
  for (const Daemon::Command& row : Daemon::Commands()) {
    std::string got;
    for (Role role : kRoles) got += Allows(row.who, role) ? 'y' : 'n';
    auto it = expected.find(row.op);
    ASSERT_NE(it, expected.end()) << protocol::OpName(row.op);
    EXPECT_EQ(got, it->second) << protocol::OpName(row.op);
  }
}

TEST(CommandTableTest, ARefusedRequestChangesNothing) {
  World world;
  int64_t job = world.SubmitJob();
  for (Op op : {Op::kCancel, Op::kHold}) {
    RequestArgs args = op == Op::kCancel ? RequestArgs(protocol::CancelArgs{{job}}) : RequestArgs(protocol::HoldArgs{{job}});
    auto v = Verdict(world.Call(PeerFor(Role::kOtherUser), args), op);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->message, "job " + std::to_string(job) + " belongs to another user");
  }
  EXPECT_EQ(world.StateOf(job), "queued");
  auto drain = world.Call(PeerFor(Role::kOtherUser), protocol::DrainArgs{"0", ""});
  ASSERT_TRUE(drain.error.has_value());
  EXPECT_EQ(drain.error->message, "only root or the admin group may drain GPUs");
  auto undrain = world.Call(PeerFor(Role::kRoot), protocol::UndrainArgs{"0", ""});
  EXPECT_EQ(undrain.error ? undrain.error->code : WireCode::kInternal, WireCode::kNotFound) << "0 was never drained";
  int64_t lease = world.OwnerLease();
  auto release = world.Call(PeerFor(Role::kOtherUser), protocol::ReleaseArgs{lease});
  ASSERT_TRUE(release.error.has_value());
  EXPECT_EQ(release.error->message, "lease " + std::to_string(lease) + " belongs to alice");
  auto leases = world.Call(PeerFor(Role::kOtherUser), protocol::LeasesArgs{});
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(leases.result["leases"].size(), 1u);
}

TEST(CommandTableTest, CancelAnswersEachIdOnItsOwn) {
  World world;
  int64_t mine = world.SubmitJob();
  int64_t bobs = world.SubmitJob(PeerFor(Role::kOtherUser));
  auto reply = world.Call(PeerFor(Role::kOwner), protocol::CancelArgs{{mine, bobs, 999}});
  ASSERT_TRUE(reply.ok());
  auto ids = protocol::ResultOf<protocol::IdsResult>(reply);
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->results.size(), 3u);
  EXPECT_EQ(ids->results[0].id, mine);
  EXPECT_FALSE(ids->results[0].error.has_value());
  ASSERT_TRUE(ids->results[1].error.has_value());
  EXPECT_EQ(ids->results[1].error->code, WireCode::kPermissionDenied);
  ASSERT_TRUE(ids->results[2].error.has_value());
  EXPECT_EQ(ids->results[2].error->code, WireCode::kNotFound);
  EXPECT_EQ(ids->results[2].error->message, "no job 999");
  EXPECT_EQ(world.StateOf(mine), "cancelled");
  EXPECT_EQ(world.StateOf(bobs), "queued");
}

TEST(CommandTableTest, ManyWaitingJobsChangeTogetherAndEachRefusalKeepsItsPlace) {
  // `hold --all` / `cancel --all` name every job: the waiting ones change in one
  // transaction, and each outcome stays at its id's place, with its own refusal.
  World world;
  std::vector<int64_t> mine;
  for (int i = 0; i < 5; ++i) mine.push_back(world.SubmitJob());
  int64_t bobs = world.SubmitJob(PeerFor(Role::kOtherUser));
  auto held = world.Call(PeerFor(Role::kOwner), protocol::HoldArgs{{mine[1]}});
  ASSERT_TRUE(held.ok());
  auto reply = world.Call(PeerFor(Role::kOwner), protocol::HoldArgs{{mine[0], mine[1], bobs, mine[2], 999}});
  ASSERT_TRUE(reply.ok());
  auto ids = protocol::ResultOf<protocol::IdsResult>(reply);
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->results.size(), 5u);
  EXPECT_FALSE(ids->results[0].error.has_value());
  ASSERT_TRUE(ids->results[1].error.has_value());
  EXPECT_EQ(ids->results[1].error->code, WireCode::kConflict);
  EXPECT_EQ(ids->results[1].error->message, "job " + std::to_string(mine[1]) + " is held, not queued");
  ASSERT_TRUE(ids->results[2].error.has_value());
  EXPECT_EQ(ids->results[2].error->code, WireCode::kPermissionDenied);
  EXPECT_EQ(ids->results[2].id, bobs);
  EXPECT_FALSE(ids->results[3].error.has_value());
  EXPECT_EQ(ids->results[3].id, mine[2]);
  ASSERT_TRUE(ids->results[4].error.has_value());
  EXPECT_EQ(ids->results[4].error->code, WireCode::kNotFound);
  EXPECT_EQ(world.StateOf(mine[0]), "held");
  EXPECT_EQ(world.StateOf(mine[2]), "held");
  EXPECT_EQ(world.StateOf(mine[3]), "queued");
  EXPECT_EQ(world.StateOf(bobs), "queued");
  // Cancel: held and queued alike, one already cancelled refused with its own line.
  ASSERT_TRUE(world.Call(PeerFor(Role::kOwner), protocol::CancelArgs{{mine[4]}}).ok());
  reply = world.Call(PeerFor(Role::kOwner), protocol::CancelArgs{{mine[0], mine[3], mine[4]}});
  ids = protocol::ResultOf<protocol::IdsResult>(reply);
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->results.size(), 3u);
  EXPECT_FALSE(ids->results[0].error.has_value());
  EXPECT_FALSE(ids->results[1].error.has_value());
  ASSERT_TRUE(ids->results[2].error.has_value());
  EXPECT_EQ(ids->results[2].error->message, "job " + std::to_string(mine[4]) + " is already cancelled");
  EXPECT_EQ(world.StateOf(mine[0]), "cancelled");
  EXPECT_EQ(world.StateOf(mine[3]), "cancelled");
}

TEST(CommandTableTest, AMissingJobOrLeaseIsNotFoundForEveryone) {
  World world;
  for (Role role : kRoles) {
    for (RequestArgs args : {RequestArgs(protocol::ShowArgs{42}), RequestArgs(protocol::LogsArgs{42, 0}),
                             RequestArgs(protocol::WaitArgs{42}), RequestArgs(protocol::ReleaseArgs{42})}) {
      auto reply = world.Call(PeerFor(role), args);
      ASSERT_TRUE(reply.error.has_value());
      EXPECT_EQ(reply.error->code, WireCode::kNotFound) << RoleName(role) << ": " << reply.error->message;
    }
  }
}

TEST(FinerRulesTest, ShowSendsPrivateFieldsToOwnerAdminsAndRootOnly) {
  World world;
  int64_t job = world.SubmitJob();
  for (Role role : kRoles) {
    auto reply = world.Call(PeerFor(role), protocol::ShowArgs{job});
    ASSERT_TRUE(reply.ok()) << RoleName(role);
    EXPECT_EQ(reply.result["job"].contains("argv"), Allows(kSeePrivateFields, role)) << RoleName(role);
    EXPECT_EQ(reply.result["job"]["state"], "queued");
  }
  EXPECT_FALSE(Allows(kSeePrivateFields, Role::kOtherUser));
}

TEST(FinerRulesTest, OnlyAdminsRaisePriorityAboveTheDefault) {
  World world;
  auto submit = [&](Role role, int priority) {
    protocol::SubmitArgs s;
    s.argv = {"true"};
    s.cwd = world.dir().path();
    s.priority = priority;
    return world.Call(PeerFor(role), s);
  };
  for (Role role : {Role::kOwner, Role::kOtherUser}) {
    auto raised = submit(role, 10);
    ASSERT_TRUE(raised.error.has_value()) << RoleName(role);
    EXPECT_EQ(raised.error->code, WireCode::kPermissionDenied);
    EXPECT_EQ(raised.error->message, "only root or the admin group may raise a job's priority above 0");
    EXPECT_EQ(submit(role, 1).error.has_value(), true);
    // At or below the default is anyone's (Slurm's --nice).
    EXPECT_TRUE(submit(role, 0).ok());
    auto lowered = submit(role, -5);
    ASSERT_TRUE(lowered.ok());
    auto shown = world.Call(PeerFor(role), protocol::ShowArgs{lowered.result["id"].get<int64_t>()});
    EXPECT_EQ(shown.result["job"]["priority"], -5);
  }
  for (Role role : {Role::kAdminGroup, Role::kRoot}) {
    auto raised = submit(role, 10);
    ASSERT_TRUE(raised.ok()) << RoleName(role) << ": " << raised.error->message;
    auto shown = world.Call(PeerFor(role), protocol::ShowArgs{raised.result["id"].get<int64_t>()});
    EXPECT_EQ(shown.result["job"]["priority"], 10);
  }
  auto queue = world.Call(PeerFor(Role::kRoot), protocol::QueueArgs{true});
  EXPECT_EQ(queue.result["jobs"].size(), 6u) << "two refused per user, four accepted, two raised";
}

TEST(FinerRulesTest, OnlyRootNamesAnotherUsersProcess) {
  World world;
  auto me = store::CurrentLeaseProcess(getpid());
  ASSERT_TRUE(me.has_value());
  protocol::AcquireArgs a;
  a.pid = me->pid;
  a.start_time_ticks = me->start_time_ticks;
  a.command = "test";
  // This test process belongs to getuid(); pick callers who are someone else.
  Peer stranger{getuid() == 1001 ? 1002u : 1001u, 0, 0, "stranger", false};
  Peer admin{getuid() == 1003 ? 1004u : 1003u, 0, 0, "admin", true};
  for (const Peer& p : {stranger, admin}) {
    auto reply = world.Call(p, a);
    ASSERT_TRUE(reply.error.has_value()) << p.user;
    EXPECT_EQ(reply.error->code, WireCode::kPermissionDenied);
    EXPECT_EQ(reply.error->message, "process " + std::to_string(me->pid) + " is not yours");
  }
  auto as_root = world.Call(PeerFor(Role::kRoot), a);
  ASSERT_TRUE(as_root.ok()) << as_root.error->message;
  EXPECT_EQ(as_root.result["gpu_uuids"].size(), 1u);
  EXPECT_FALSE(Allows(kNameOthersProcess, Role::kAdminGroup));

  // add_processes: the lease's owner passes the table, but not with another's process.
  int64_t lease = world.OwnerLease();
  Peer owner = PeerFor(Role::kOwner);
  if (owner.uid != getuid()) {
    auto added = world.Call(owner, protocol::AddProcessesArgs{lease, {*me}});
    ASSERT_TRUE(added.error.has_value());
    EXPECT_EQ(added.error->message, "process " + std::to_string(me->pid) + " is not yours");
  }
  EXPECT_TRUE(world.Call(PeerFor(Role::kRoot), protocol::AddProcessesArgs{lease, {*me}}).ok());
}

// `describe` (the Python package's plain lease): the GPUs' indices and names and the
// child's environment come with the grant, from the builder `run` and `select` use.
TEST(AcquireDescribeTest, TheGrantCarriesTheGpusAndTheChildsEnvironment) {
  World world;
  auto me = store::CurrentLeaseProcess(getpid());
  ASSERT_TRUE(me.has_value());
  protocol::AcquireArgs a;
  a.pid = me->pid;
  a.start_time_ticks = me->start_time_ticks;
  a.kind = "select";
  a.request.count = 2;
  auto plain = world.Call(PeerFor(Role::kRoot), a);
  ASSERT_TRUE(plain.ok()) << plain.error->message;
  EXPECT_FALSE(plain.result.contains("env")) << "only when asked";
  ASSERT_TRUE(world.Call(PeerFor(Role::kRoot), protocol::ReleaseArgs{plain.result["lease_id"].get<int64_t>()}).ok());
  a.describe = true;
  auto described = world.Call(PeerFor(Role::kRoot), a);
  ASSERT_TRUE(described.ok()) << described.error->message;
  const auto& r = described.result;
  ASSERT_EQ(r["gpus"].size(), 2u);
  std::vector<std::string> uuids;
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(r["gpus"][k]["uuid"], r["gpu_uuids"][k]);
    EXPECT_GE(r["gpus"][k]["index"].get<int>(), 0);
    uuids.push_back(r["gpu_uuids"][k].get<std::string>());
  }
  visibility::ChildGpuEnvRequest expected;
  expected.uuids = uuids;
  expected.lease_id = r["lease_id"].get<int64_t>();
  if (r.contains("master_port")) expected.master_port = r["master_port"].get<int>();
  nlohmann::json env = nlohmann::json::object();
  for (const auto& var : visibility::ChildGpuEnv(expected)) env[var.name] = var.value;
  EXPECT_EQ(r["env"], env);
  EXPECT_EQ(r["env"]["CUDA_VISIBLE_DEVICES"], uuids[0] + "," + uuids[1]);
}

TEST(UserModeTest, SubmitOnlyForTheDaemonsOwnUser) {
  World world(/*system_mode=*/false);
  protocol::SubmitArgs s;
  s.argv = {"true"};
  s.cwd = world.dir().path();
  Peer self{getuid(), getgid(), 0, "self", getuid() == 0};
  EXPECT_TRUE(world.Call(self, s).ok());
  Peer other{getuid() + 1, getgid(), 0, "other", false};
  auto refused = world.Call(other, s);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->code, WireCode::kPermissionDenied);
  EXPECT_NE(refused.error->message.find("this daemon runs jobs of "), std::string::npos) << refused.error->message;
  // Even an admin's request is a job of someone else's.
  Peer admin{getuid() + 2, getgid(), 0, "admin", true};
  EXPECT_TRUE(world.Call(admin, s).error.has_value());
  // Everything else is as in system mode: the queue is anyone's to read.
  EXPECT_TRUE(world.Call(other, protocol::QueueArgs{}).ok());
}

}  // namespace
}  // namespace gpuman::daemon
