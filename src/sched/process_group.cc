#include "sched/process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string_view>

namespace gpuman::sched {
namespace {

struct Stat {
  char state = '?';
  int pgrp = 0;
  int64_t start_ticks = 0;
};

std::optional<int64_t> ToInt(std::string_view token) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
  return v;
}

// "pid (comm) state ppid pgrp ... starttime ...": comm may hold spaces and ')', so the
// fields are counted from the last ')'. state is field 3, pgrp 5, starttime 22.
std::optional<Stat> ReadStat(int pid, const std::string& proc_root) {
  if (pid <= 0) return std::nullopt;
  std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[1024];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(text).substr(close + 1);
  Stat stat;
  int field = 2;
  size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = rest.find_first_of(" \n", pos);
    if (end == std::string_view::npos) end = rest.size();
    if (pos == end) break;
    std::string_view token = rest.substr(pos, end - pos);
    ++field;
    if (field == 3) stat.state = token[0];
    if (field == 5) {
      auto v = ToInt(token);
      if (!v) return std::nullopt;
      stat.pgrp = static_cast<int>(*v);
    }
    if (field == 22) {
      auto v = ToInt(token);
      if (!v) return std::nullopt;
      stat.start_ticks = *v;
      if (stat.state == 'Z' || stat.state == 'X') return std::nullopt;  // exited, not reaped
      return stat;
    }
    pos = end;
  }
  return std::nullopt;
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
