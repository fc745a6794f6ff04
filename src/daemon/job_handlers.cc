// Handlers for the job queue: submit, queue, show, wait, cancel / hold / resume, logs.
// The command table has already resolved the job(s) a request names and checked that the
// caller may act on them; the finer rules (private fields, raising priority) are here.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "daemon/call.h"
#include "model/job_notify.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"
#include "protocol/model_json.h"
#include "sched/supervisor.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;
using protocol::WireCode;

namespace {
// A queue page's jobs take at most this much of the frame (the envelope takes the rest).
constexpr size_t kQueuePageBytes = protocol::kMaxMessageBytes - 4096;
// A job summary's name and reason are cut to this (64 KiB, 384 KiB as escaped JSON at
// worst), so that one job always fits in a page; `show` has them whole.
constexpr size_t kMaxSummaryTextBytes = 64 << 10;
}  // namespace

Reply Daemon::OnSubmit(const Call& call) {
  const int64_t id = call.id();
  const Peer& peer = call.peer;
  const auto& args = call.args<protocol::SubmitArgs>();
  // Lowering one's priority (Slurm's --nice) is anyone's; raising it is an admin's lever.
  if (args.priority > kDefaultPriority && !Permits(kRaisePriority, peer, std::nullopt, identity())) {
    return MakeErrorReply(id, Wire(WireCode::kPermissionDenied,
                                   "only root or the admin group may raise a job's priority above " +
                                       std::to_string(kDefaultPriority)));
  }
  if (auto ok = CheckSubmitFor(peer, args); !ok) return Fail(id, ok.error());
  if (args.cwd.empty() || args.cwd[0] != '/') {
    return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "args.cwd: must be an absolute path"));
  }
  // Bounded fields, for every client (a huge name would make every user's `queue` fail).
  if (auto over = model::CheckJobFields(args.name, args.argv, args.env, args.cwd, args.output.value_or(""))) {
    return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, *over));
  }
  if (args.notify) {
    if (auto bad = model::CheckNotify(*args.notify)) return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, *bad));
    if (args.notify->mail) {
      if (auto ok = CheckMailHook(options_.notify); !ok) return Fail(id, ok.error());
    }
  }
  for (int64_t dep : args.after) {
    auto job = jobs_->Get(dep);
    if (!job || !*job) return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "--after: no job " + std::to_string(dep)));
  }
  model::Job draft;
  draft.name = args.name.empty() ? std::filesystem::path(args.argv[0]).filename().string() : args.name;
  if (draft.name.size() > model::kMaxJobNameBytes) {  // a long program name: cut at a character
    size_t cut = model::kMaxJobNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(draft.name[cut]) & 0xC0) == 0x80) --cut;
    draft.name.resize(cut);
  }
  draft.uid = peer.uid;
  draft.gid = peer.gid;
  if (passwd* pw = getpwuid(peer.uid)) draft.gid = pw->pw_gid;
  draft.user = peer.user;
  draft.argv = args.argv;
  draft.env = args.env;
  draft.cwd = args.cwd;
  if (args.output) draft.output_path = (*args.output)[0] == '/' ? *args.output : args.cwd + "/" + *args.output;
  if (draft.output_path.size() > model::kMaxJobPathBytes) {
    return MakeErrorReply(id, Wire(WireCode::kInvalidArgument,
                                   "--output: " + std::to_string(draft.output_path.size()) + " bytes as an absolute path; the limit is " +
                                       std::to_string(model::kMaxJobPathBytes) + " bytes"));
  }
  draft.request = args.request;
  if (WantsMps(draft.request)) draft.request.mps = true;  // [share] mps = "on" for a one-GPU slice
  draft.priority = args.priority;
  draft.time_limit_ms = args.time_limit_ms ? args.time_limit_ms : std::optional<int64_t>(options_.scheduler.default_time_limit_ms);
  draft.requeue = args.requeue;
  draft.after = args.after;
  draft.notify = args.notify;
  draft.submitted_unix_ms = clock_.NowUnixMs();
  if (args.array) {
    auto spec = model::ParseArraySpec(*args.array);
    if (!spec) return Fail(id, spec.error());
    auto tasks = jobs_->SubmitArray(draft, spec->tasks, spec->limit);
    if (!tasks) return Fail(id, tasks.error());
    dirty_ = true;
    return MakeReply(id, protocol::SubmitResult{tasks->front().id, static_cast<int64_t>(tasks->size())});
  }
  auto job = jobs_->Submit(draft);
  if (!job) return Fail(id, job.error());
  dirty_ = true;
  return MakeReply(id, protocol::SubmitResult{job->id});
}

Reply Daemon::OnQueue(const Call& call) {
  const auto& args = call.args<protocol::QueueArgs>();
  const int64_t limit = std::min(args.limit.value_or(protocol::kMaxQueuePage), protocol::kMaxQueuePage);
  // One more than asked for: whether another page follows.
  auto jobs = jobs_->List(args.all, std::nullopt, args.after_id, limit + 1, store::JobFields::kSummary);
  if (!jobs) return Fail(call.id(), jobs.error());
  bool more = static_cast<int64_t>(jobs->size()) > limit;
  if (more) jobs->resize(static_cast<size_t>(limit));
  std::vector<model::Job> page;
  page.reserve(jobs->size());
  for (auto& j : *jobs) page.push_back(WithWaitInfo(std::move(j)));
  if (collector_) collector_->Annotate(page);
  // As many as fit in one frame: the page ends early (and says where to go on) rather
  // than outgrow it. A summary's text fields are cut so that one job always fits.
  protocol::QueueResult result;
  size_t bytes = 0;
  for (auto& j : page) {
    j.name = CutText(std::move(j.name), kMaxSummaryTextBytes);
    j.reason = CutText(std::move(j.reason), kMaxSummaryTextBytes);
    const size_t size = protocol::DumpJson(protocol::JobToJson(j, /*include_private=*/false)).size() + 1;
    if (!result.jobs.empty() && bytes + size > kQueuePageBytes) {
      more = true;
      break;
    }
    bytes += size;
    result.jobs.push_back(std::move(j));
  }
  if (more && !result.jobs.empty()) result.next = result.jobs.back().id;
  return MakeReply(call.id(), result);
}

Reply Daemon::OnShow(const Call& call) {
  const model::Job& job = *call.job;
  protocol::ShowResult result;
  result.job = WithWaitInfo(job);
  if (collector_) {
    std::vector<model::Job> one{result.job};
    collector_->Annotate(one);
    result.job = std::move(one[0]);
  }
  result.include_private = Permits(kSeePrivateFields, call.peer, job.uid, identity());
  if (call.names_array) {
    auto tasks = jobs_->ArrayTasks(job.id);
    if (!tasks) return Fail(call.id(), tasks.error());
    protocol::ArrayInfo info;
    info.id = job.id;
    info.limit = job.array_limit;
    info.tasks = static_cast<int64_t>(tasks->size());
    std::map<std::string, std::vector<int64_t>> by_state;
    for (const model::Job& task : *tasks) {
      by_state[model::JobStateName(task.state)].push_back(task.array_task.value_or(0));
    }
    for (const auto& [state, indices] : by_state) info.by_state[state] = model::FormatTaskRanges(indices);
    result.array = std::move(info);
  }
  return MakeReply(call.id(), result);
}

Reply Daemon::OnWait(const Call& call) {
  if (!call.names_array) return MakeReply(call.id(), protocol::WaitResult{call.job->state, call.job->exit_code});
  // A whole array: waiting until every task is final, then the first that did not succeed.
  // Asked of the store, not read task by task: a client polls this (10,000 tasks read per
  // poll kept the daemon at 27 % of a core for one waiting client).
  auto standing = jobs_->ArrayOutcome(call.job->id);
  if (!standing) return Fail(call.id(), standing.error());
  if (!*standing) return MakeReply(call.id(), protocol::WaitResult{call.job->state, call.job->exit_code});
  const auto& s = **standing;
  if (!model::IsFinal(s.state)) return MakeReply(call.id(), protocol::WaitResult{s.state, std::nullopt});
  return MakeReply(call.id(), protocol::WaitResult{s.state, s.exit_code, model::JobRef{call.job->id, s.task}});
}

namespace {

// The change cancel, hold or resume makes to a waiting job, as one request of
// JobStore::TransitionAll: a queued job held, a held one resumed, either cancelled. Nullopt
// when the command does not apply to the job as it stands (hold of a held job, anything of
// a running one): ChangeJob says why, or an array leaves the task as it is.
std::optional<store::JobStore::TransitionRequest> WaitingChange(protocol::Op op, const model::Job& job,
                                                                const std::string& by, int64_t now_ms) {
  store::JobStore::TransitionRequest r;
  r.id = job.id;
  r.from_expected = job.state;
  r.update.reason = "by " + by;
  if (op == protocol::Op::kHold && job.state == model::JobState::kQueued) {
    r.to = model::JobState::kHeld;
  } else if (op == protocol::Op::kResume && job.state == model::JobState::kHeld) {
    r.to = model::JobState::kQueued;
  } else if (op == protocol::Op::kCancel &&
             (job.state == model::JobState::kQueued || job.state == model::JobState::kHeld)) {
    r.to = model::JobState::kCancelled;
    r.update.ended_unix_ms = now_ms;
    r.update.reason = "cancelled by " + by;
  } else {
    return std::nullopt;
  }
  return r;
}

}  // namespace

// cancel, hold or resume one job that WaitingChange does not take: a running job cancelled,
// or the refusal of one the command does not apply to. `in_array`: the job is a task of an
// array the request named as a whole (the array path sends only its running tasks here),
// and a task that has already ended is left as it is: nullopt.
std::optional<Result<model::Job>> Daemon::ChangeJob(protocol::Op op, const model::Job& job, const Peer& peer,
                                                    bool in_array) {
  store::JobStore::Update update;
  update.reason = "by " + peer.user;
  const int64_t job_id = job.id;
  if (op == protocol::Op::kHold) {
    return jobs_->Transition(job_id, model::JobState::kQueued, model::JobState::kHeld, update);
  }
  if (op == protocol::Op::kResume) {
    return jobs_->Transition(job_id, model::JobState::kHeld, model::JobState::kQueued, update);
  }
  if (job.state == model::JobState::kRunning || job.state == model::JobState::kStarting) {
    // The supervisor ends the job and records "cancelled"; without one, the daemon does.
    if (Status ended = EndOrphanedJob(job, peer.user); !ended) return Result<model::Job>(ended.error());
    return Result<model::Job>(job);
  }
  if (in_array) return std::nullopt;
  return Result<model::Job>(MakeError(ErrorCode::kConflict, "job " + model::JobName(job) + " is already " +
                                                                 model::JobStateName(job.state)));
}

Reply Daemon::OnCancelHoldResume(const Call& call) {
  const protocol::Op op = call.request.op();
  protocol::IdsResult result;
  // Waiting jobs named one by one (`cancel --all` of a sweep names each of its 10,000 tasks)
  // change in one write transaction at the end, as an array's tasks do: one transaction
  // each took 7 s for 30,000. The others (running jobs, refusals) go through ChangeJob.
  std::vector<store::JobStore::TransitionRequest> singles;
  std::vector<size_t> single_outcome;  // where each of `singles` reports, in result.results
  for (const JobTarget& target : call.jobs) {
    protocol::IdOutcome outcome{target.ref, target.error};
    if (target.job && target.tasks.empty()) {
      if (auto r = WaitingChange(op, *target.job, call.peer.user, clock_.NowUnixMs())) {
        singles.push_back(std::move(*r));
        single_outcome.push_back(result.results.size());
      } else if (auto changed = ChangeJob(op, *target.job, call.peer, false); changed && !*changed) {
        outcome.error = protocol::ToWireError(changed->error());
      }
    } else if (target.job) {
      // A whole array: every task the command applies to, the waiting ones in one write
      // transaction (a sweep has 10,000); the first error, if any.
      int changed_tasks = 0;
      auto note = [&](const model::Job& task, const Result<model::Job>& changed) {
        if (changed) {
          ++changed_tasks;
        } else if (!outcome.error) {
          outcome.error = protocol::ToWireError(changed.error().WithContext("task " + model::JobName(task)));
        }
      };
      std::vector<store::JobStore::TransitionRequest> batch;
      std::vector<const model::Job*> batched;
      const int64_t now = clock_.NowUnixMs();
      for (const model::Job& task : target.tasks) {
        const bool waiting = task.state == model::JobState::kQueued || task.state == model::JobState::kHeld;
        if (!waiting) {
          if (op != protocol::Op::kCancel) continue;
          if (auto changed = ChangeJob(op, task, call.peer, true)) note(task, *changed);
          continue;
        }
        // A task the command does not apply to (hold of a held one) is left as it is.
        if (auto r = WaitingChange(op, task, call.peer.user, now)) {
          batch.push_back(std::move(*r));
          batched.push_back(&task);
        }
      }
      if (!batch.empty()) {
        auto results = jobs_->TransitionAll(batch);
        if (!results) {
          outcome.error = protocol::ToWireError(results.error());
        } else {
          for (size_t i = 0; i < results->size(); ++i) note(*batched[i], (*results)[i]);
        }
      }
      if (changed_tasks == 0 && !outcome.error) {
        const char* none = op == protocol::Op::kHold     ? "no task of the array is queued"
                           : op == protocol::Op::kResume ? "no task of the array is held"
                                                         : "every task of the array has ended";
        outcome.error = Wire(WireCode::kConflict, none);
      }
    }
    result.results.push_back(outcome);
  }
  if (!singles.empty()) {
    auto changed = jobs_->TransitionAll(singles);
    for (size_t i = 0; i < singles.size(); ++i) {
      auto& error = result.results[single_outcome[i]].error;
      if (!changed) {
        error = protocol::ToWireError(changed.error());
      } else if (!(*changed)[i]) {
        error = protocol::ToWireError((*changed)[i].error());
      }
    }
  }
  dirty_ = true;
  return MakeReply(call.id(), result);
}

// `gpuman update`: priority, time limit or name of queued and held jobs, as a same-state
// Transition (a compare-and-set on the state: a job that starts meanwhile is not changed).
// A whole array: its waiting tasks, in one write transaction.
Reply Daemon::OnUpdate(const Call& call) {
  const auto& args = call.args<protocol::UpdateArgs>();
  if (args.priority && *args.priority > kDefaultPriority && !Permits(kRaisePriority, call.peer, std::nullopt, identity())) {
    return MakeErrorReply(call.id(), Wire(WireCode::kPermissionDenied,
                                          "only root or the admin group may raise a job's priority above " +
                                              std::to_string(kDefaultPriority)));
  }
  if (args.name && args.name->size() > model::kMaxJobNameBytes) {
    return MakeErrorReply(call.id(), Wire(WireCode::kInvalidArgument,
                                          "--name: " + std::to_string(args.name->size()) + " bytes; the limit is " +
                                              std::to_string(model::kMaxJobNameBytes) + " bytes"));
  }
  auto waiting = [](const model::Job& j) {
    return j.state == model::JobState::kQueued || j.state == model::JobState::kHeld;
  };
  protocol::IdsResult result;
  for (const JobTarget& target : call.jobs) {
    protocol::IdOutcome outcome{target.ref, target.error};
    if (target.job) {
      const std::vector<model::Job> one{*target.job};
      const std::vector<model::Job>& jobs = target.tasks.empty() ? one : target.tasks;
      std::vector<store::JobStore::TransitionRequest> batch;
      for (const model::Job& j : jobs) {
        if (!waiting(j)) continue;
        store::JobStore::TransitionRequest r;
        r.id = j.id;
        r.from_expected = r.to = j.state;
        r.update.priority = args.priority;
        r.update.time_limit_ms = args.time_limit_ms;
        r.update.name = args.name;
        batch.push_back(std::move(r));
      }
      if (batch.empty()) {
        outcome.error = Wire(WireCode::kConflict, target.tasks.empty()
                                                      ? std::string("it is ") + model::JobStateName(target.job->state) +
                                                            ": only a queued or held job can be updated"
                                                      : "no task of the array is queued or held");
      } else if (auto results = jobs_->TransitionAll(batch); !results) {
        outcome.error = protocol::ToWireError(results.error());
      } else {
        for (const auto& r : *results) {
          if (!r && !outcome.error) outcome.error = protocol::ToWireError(r.error());
        }
      }
    }
    result.results.push_back(outcome);
  }
  dirty_ = true;
  return MakeReply(call.id(), result);
}

Reply Daemon::OnLogs(const Call& call) {
  const int64_t id = call.id();
  const model::Job& job = *call.job;
  const auto& args = call.args<protocol::LogsArgs>();
  if (call.names_array) {
    auto tasks = jobs_->ArrayTasks(job.id);
    if (!tasks) return Fail(id, tasks.error());
    return MakeErrorReply(id, Wire(WireCode::kInvalidArgument,
                                   "job " + std::to_string(job.id) + " is an array of " + std::to_string(tasks->size()) +
                                       " tasks: name one, as " + model::JobName(job)));
  }
  std::string path = job.output_path.empty() ? sched::DefaultLogPath(job) : job.output_path;
  protocol::LogsResult result;
  result.next_offset = args.offset;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    result.eof = model::IsFinal(job.state);
    return MakeReply(id, result);
  }
  struct stat st{};
  // Only a file the job's owner owns: the daemon is root and must not read others' files.
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != job.uid) {
    return MakeErrorReply(id, Wire(WireCode::kPermissionDenied, "log " + path + " is not owned by the job's user"));
  }
  std::string buf(static_cast<size_t>(protocol::kMaxLogChunkBytes), '\0');
  ssize_t n = pread(fd.get(), buf.data(), buf.size(), args.offset);
  if (n > 0) {
    buf.resize(static_cast<size_t>(n));
    result.data = std::move(buf);
    result.next_offset = args.offset + n;
  }
  result.eof = model::IsFinal(job.state) && result.next_offset >= st.st_size;
  return MakeReply(id, result);
}

}  // namespace gpuman::daemon
