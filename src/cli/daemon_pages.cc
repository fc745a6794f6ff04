#include "cli/daemon_pages.h"

#include <optional>
#include <string>
#include <type_traits>

#include "cli/daemon_client.h"
#include "protocol/messages.h"

namespace gpuman::cli {
namespace {

// Asks for pages until one says there is no next; each next must lie past the last, so a
// confused daemon cannot keep us in a loop. `Args` has after_id and limit, `Res` a `next`.
template <typename Res, typename Args, typename Take>
Status ReadPages(DaemonClient& c, Args args, bool resuming, const char* what, Take take) {
  while (true) {
    auto page = resuming ? c.CallResuming<Res>(args) : c.Call<Res>(args);
    if (!page) return page.error();
    const std::optional<int64_t> next = page->next;
    take(std::move(*page));
    if (!next) return {};
    const bool advances = [&] {
      if constexpr (std::is_same_v<decltype(args.after_id), int64_t>) return *next > args.after_id;
      else return !args.after_id || *next > *args.after_id;
    }();
    if (!advances) {
      return MakeError(ErrorCode::kInternal, std::string("the daemon's ") + what + " pages do not advance (next " +
                                                 std::to_string(*next) + ")");
    }
    args.after_id = *next;
  }
}

}  // namespace

Result<std::vector<model::Job>> FetchAllJobs(DaemonClient& daemon, bool all, bool resuming) {
  std::vector<model::Job> jobs;
  protocol::QueueArgs args{all, 0, protocol::kMaxQueuePage};
  Status read = ReadPages<protocol::QueueResult>(daemon, args, resuming, "queue", [&](protocol::QueueResult page) {
    for (auto& j : page.jobs) jobs.push_back(std::move(j));
  });
  if (!read) return read.error();
  return jobs;
}

Result<std::vector<model::Lease>> FetchAllLeases(DaemonClient& daemon, bool resuming) {
  std::vector<model::Lease> leases;
  protocol::LeasesArgs args{std::nullopt, protocol::kMaxLeasePage};
  Status read = ReadPages<protocol::LeasesResult>(daemon, args, resuming, "lease", [&](protocol::LeasesResult page) {
    for (auto& l : page.leases) leases.push_back(std::move(l));
  });
  if (!read) return read.error();
  return leases;
}

}  // namespace gpuman::cli
