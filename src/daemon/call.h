// What the daemon's handlers share (internal to src/daemon/): Daemon::Call, the resolved
// request a handler gets from the command table, and small helpers. Event-loop thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/daemon.h"
#include "model/job.h"
#include "model/lease.h"
#include "base/utf8.h"
#include "protocol/envelope.h"

namespace gpuman::daemon {

/// One job a Target::kJobs request names: the job when the caller may act on it, else why not.
struct JobTarget {
  model::JobRef ref;
  std::optional<model::Job> job;  // for a whole array, its first task
  std::vector<model::Job> tasks;  // a whole array: every task (summaries), in task order
  std::optional<protocol::WireError> error;
};

struct Daemon::Call {
  const Peer& peer;
  const protocol::Request& request;
  std::optional<model::Job> job;      // Target::kJob (for a whole array, its first task)
  bool names_array = false;           // Target::kJob: the id named the whole array `job` is the first task of
  std::vector<JobTarget> jobs;        // Target::kJobs, in the order of the request's ids
  std::optional<model::Lease> lease;  // Target::kLease

  int64_t id() const { return request.id; }
  template <typename Args>
  const Args& args() const {
    return std::get<Args>(request.args);
  }
};

using model::kMaxLeaseCommandBytes;  // CutText: base/utf8.h
/// The user name of `uid`, or the uid as a string when it has none.
std::string UserName(uint32_t uid);
/// A process a client names must be its own (per the kernel; only root may name another
/// user's, kNameOthersProcess), alive with that start time. nullopt when it is.
std::optional<protocol::WireError> CheckOwnProcess(const Peer& peer, const model::LeaseProcess& p,
                                                   const DaemonIdentity& self);
/// Whether `pid` still runs and (when known) has that start time, so a recycled pid is not it.
bool IsSameLiveProcess(std::optional<int32_t> pid, std::optional<int64_t> ticks);

inline protocol::WireError Wire(protocol::WireCode code, std::string message) {
  return protocol::WireError{code, std::move(message)};
}
inline protocol::Reply Fail(int64_t id, const Error& e) {
  return protocol::MakeErrorReply(id, protocol::ToWireError(e));
}

}  // namespace gpuman::daemon
