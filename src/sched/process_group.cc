#include "sched/process_group.h"

#include "store/proc_liveness.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>

namespace gpuman::sched {
namespace {

std::optional<store::ProcStat> ReadStat(int pid, const std::string& proc_root) {
  return store::ReadProcStat(pid, proc_root);
}

std::optional<int64_t> ToInt(std::string_view token) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int> ProcessGroupOf(int pid, const std::string& proc_root) {
  auto stat = ReadStat(pid, proc_root);
  if (!stat) return std::nullopt;
  return stat->pgrp;
}

std::vector<model::LeaseProcess> ProcessesInGroup(int pgid, const std::string& proc_root) {
  std::vector<model::LeaseProcess> out;
  if (pgid <= 1) return out;
  DIR* dir = opendir(proc_root.c_str());
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    auto pid = ToInt(entry->d_name);
    if (!pid || *pid <= 0) continue;
    auto stat = ReadStat(static_cast<int>(*pid), proc_root);
    if (stat && stat->pgrp == pgid) out.push_back({static_cast<int32_t>(*pid), stat->start_ticks});
  }
  closedir(dir);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace gpuman::sched
