// The daemon's command table: every operation with who may call it, what it names and its
// handler (MPD's AllCommands.cxx, ninja's kTools), and Daemon::Handle, which checks a
// request against its row once, before any handler runs. The handlers themselves live by
// family in info_, job_, gpu_ and lease_handlers.cc. docs/protocol.md shows the table as
// an allow/deny matrix; tests/daemon/access_test.cc keeps the two equal.
#include <unistd.h>

#include <type_traits>
#include <variant>

#include "daemon/call.h"
#include "store/sqlite.h"

namespace gpuman::daemon {
namespace {

using protocol::MakeErrorReply;
using protocol::Reply;
using protocol::WireCode;
using protocol::WireError;

// The ids a request names: "ids", "lease_id" or "id" of its args (a lease id as a plain ref).
std::vector<model::JobRef> TargetIds(const protocol::RequestArgs& args) {
  return std::visit(
      [](const auto& a) -> std::vector<model::JobRef> {
        if constexpr (requires { a.ids; }) {
          return a.ids;
        } else if constexpr (requires { a.lease_id; }) {
          return {model::JobRef{a.lease_id, std::nullopt}};
        } else if constexpr (requires { a.id; }) {
          return {a.id};
        } else {
          return {};
        }
      },
      args);
}

WireError JobDenied(const model::JobRef& ref) {
  return WireError{WireCode::kPermissionDenied, "job " + model::FormatJobRef(ref) + " belongs to another user"};
}

}  // namespace

std::span<const Daemon::Command> Daemon::Commands() {
  using protocol::Op;
  // In the order of protocol::Op. `action` completes "only root or the admin group may ...".
  static const Command kTable[] = {
      {Op::kHello, Access::kAnyone, Target::kNone, "say hello", &Daemon::OnHello},
      {Op::kSubmit, Access::kJobUser, Target::kNone, "submit jobs", &Daemon::OnSubmit},
      {Op::kQueue, Access::kAnyone, Target::kNone, "list the queue", &Daemon::OnQueue},
      {Op::kShow, Access::kAnyone, Target::kJob, "show jobs", &Daemon::OnShow},  // private fields: kSeePrivateFields
      {Op::kCancel, Access::kOwner, Target::kJobs, "cancel jobs", &Daemon::OnCancelHoldResume},
      {Op::kHold, Access::kOwner, Target::kJobs, "hold jobs", &Daemon::OnCancelHoldResume},
      {Op::kResume, Access::kOwner, Target::kJobs, "resume jobs", &Daemon::OnCancelHoldResume},
      {Op::kWait, Access::kAnyone, Target::kJob, "wait for jobs", &Daemon::OnWait},
      {Op::kLogs, Access::kOwner, Target::kJob, "read logs", &Daemon::OnLogs},
      {Op::kDrain, Access::kAdmin, Target::kNone, "drain GPUs", &Daemon::OnDrainUndrain},
      {Op::kUndrain, Access::kAdmin, Target::kNone, "undrain GPUs", &Daemon::OnDrainUndrain},
      {Op::kLeases, Access::kAnyone, Target::kNone, "list leases", &Daemon::OnLeases},
      {Op::kAcquire, Access::kAnyone, Target::kNone, "acquire GPUs", &Daemon::OnAcquire},  // processes: kNameOthersProcess
      {Op::kAddProcesses, Access::kOwner, Target::kLease, "add processes", &Daemon::OnAddProcesses},
      {Op::kRelease, Access::kOwner, Target::kLease, "release leases", &Daemon::OnRelease},
      {Op::kStatus, Access::kAnyone, Target::kNone, "ask for status", &Daemon::OnStatus},
      {Op::kHealth, Access::kAnyone, Target::kNone, "ask for health", &Daemon::OnHealth},
      {Op::kDrains, Access::kAnyone, Target::kNone, "list drained GPUs", &Daemon::OnDrains},
      // others' processes: only what the caller's /proc shows it (proc_visibility.h)
      {Op::kSnapshot, Access::kAnyone, Target::kNone, "read the device snapshot", &Daemon::OnSnapshot},
      {Op::kPreview, Access::kAnyone, Target::kNone, "preview an acquire", &Daemon::OnPreview},
      {Op::kUpdate, Access::kOwner, Target::kJobs, "update jobs", &Daemon::OnUpdate},  // priority: kRaisePriority
  };
  return kTable;
}

Reply Daemon::Handle(const Peer& peer, const protocol::Request& request) {
  const Command* row = nullptr;
  for (const Command& c : Commands()) {
    if (c.op == request.op()) {
      row = &c;
      break;
    }
  }
  if (!row) return MakeErrorReply(request.id, WireError{WireCode::kUnknownOp, "unknown op"});
  heap_used_since_trim_ = true;
  last_request_ms_ = clock_.NowUnixMs();
  Call call{peer, request, std::nullopt, false, {}, std::nullopt};
  if (auto refused = Resolve(*row, call)) return std::move(*refused);
  // New work while the state cannot be written (a full disk) would be lost or half-done.
  if (request.op() == protocol::Op::kSubmit || request.op() == protocol::Op::kAcquire) {
    if (auto full = RefusingNewWork()) return Fail(call.id(), *full);
  }
  Reply reply = (this->*(row->handler))(call);
  if (reply.error && reply.error->code == WireCode::kIo && store::IsDiskFullMessage(reply.error->message)) {
    NoteStoreError(MakeError(ErrorCode::kIo, reply.error->message));
  }
  return reply;
}

std::optional<Reply> Daemon::Resolve(const Command& row, Call& call) {
  const int64_t id = call.id();
  const DaemonIdentity self = identity();
  const std::vector<model::JobRef> ids = TargetIds(call.request.args);
  // kJob and kLease rows always name one id (an args struct with `id` or `lease_id`).
  GPUMAN_CHECK(row.target == Target::kNone || row.target == Target::kJobs || ids.size() == 1);
  // The job a reference names: a task ("12_7"), or a job by id, which for an array's id
  // is the array's first task, with every task in `tasks` when given.
  // Several jobs (cancel, hold, resume, update: `cancel --all` of a sweep names 10,000) are
  // read as summaries: what their handlers need, without argv and env.
  const store::JobFields fields = row.target == Target::kJobs ? store::JobFields::kSummary : store::JobFields::kAll;
  auto get_job = [&](const model::JobRef& ref, std::vector<model::Job>* tasks) -> Result<model::Job> {
    const std::string name = model::FormatJobRef(ref);
    if (ref.task) {
      auto task = jobs_->GetTask(ref.id, *ref.task, fields);
      if (!task) return task.error();
      if (*task) return **task;
      auto job = jobs_->Get(ref.id);
      if (job && *job && !(*job)->array_id) {
        return MakeError(ErrorCode::kNotFound, "job " + std::to_string(ref.id) + " is not an array (name it as " +
                                                   std::to_string(ref.id) + ")");
      }
      return MakeError(ErrorCode::kNotFound, "no job " + name);
    }
    auto job = jobs_->Get(ref.id, fields);
    if (!job) return job.error();
    if (!*job) return MakeError(ErrorCode::kNotFound, "no job " + name);
    if (tasks && model::IsArrayHead(**job)) {
      auto all = jobs_->ArrayTasks(ref.id);
      if (!all) return all.error();
      *tasks = std::move(*all);
    }
    return **job;
  };

  switch (row.target) {
    case Target::kNone: {
      if (Permits(row.who, call.peer, std::nullopt, self)) return std::nullopt;
      switch (row.who) {
        case Access::kJobUser:
          return MakeErrorReply(id, WireError{WireCode::kPermissionDenied,
                                              "this daemon runs jobs of " + UserName(self.uid) + " only"});
        case Access::kRoot:
          return MakeErrorReply(id, WireError{WireCode::kPermissionDenied, std::string("only root may ") + row.action});
        default:
          return MakeErrorReply(id, WireError{WireCode::kPermissionDenied,
                                              std::string("only root or the admin group may ") + row.action});
      }
    }
    case Target::kJob: {
      // The tasks of an array are read by the handler that needs them (`wait` polls
      // without reading them).
      auto job = get_job(ids.front(), nullptr);
      if (!job) return Fail(id, job.error());
      call.names_array = !ids.front().task && model::IsArrayHead(*job);
      if (!Permits(row.who, call.peer, job->uid, self)) return MakeErrorReply(id, JobDenied(ids.front()));
      call.job = std::move(*job);
      return std::nullopt;
    }
    case Target::kJobs: {
      // Each id on its own: the request as a whole succeeds, with one outcome per id.
      for (const model::JobRef& ref : ids) {
        JobTarget target{ref, std::nullopt, {}, std::nullopt};
        auto job = get_job(ref, &target.tasks);
        if (!job) {
          target.error = protocol::ToWireError(job.error());
        } else if (!Permits(row.who, call.peer, job->uid, self)) {
          target.error = JobDenied(ref);
          target.tasks.clear();
        } else {
          target.job = std::move(*job);
        }
        call.jobs.push_back(std::move(target));
      }
      return std::nullopt;
    }
    case Target::kLease: {
      const int64_t lease_id = ids.front().id;
      auto lease = leases_->Get(lease_id);
      if (!lease) return Fail(id, lease.error());
      if (!*lease) return MakeErrorReply(id, WireError{WireCode::kNotFound, "no lease " + std::to_string(lease_id)});
      // Every lease row is kOwner: the one "is this lease yours" rule (policy/lease_rules.h).
      GPUMAN_CHECK(row.who == Access::kOwner);
      if (auto mine = policy::CheckYourLease(**lease, CallerOf(call.peer), policy::LeaseAct::kManage); !mine) {
        return Fail(id, mine.error());
      }
      call.lease = std::move(**lease);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace gpuman::daemon
