#include "store/proc_liveness.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>

#include "base/unique_fd.h"

namespace gpuman::store {
namespace {

// Reads the whole (small) stat file with plain syscalls: this runs inside write
// transactions, once per leased process.
std::optional<std::string> ReadStat(int pid, const std::string& proc_root) {
  if (pid <= 0) return std::nullopt;
  std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[1024];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// "pid (comm) state ppid pgrp ... starttime ...": comm may hold spaces and ')', so the
// fields are counted from the last ')'. Field 3 (state) is the first after it.
std::optional<ProcStat> ParseStat(std::string_view text) {
  size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  ProcStat stat;
  int field = 2;  // the last field consumed
  size_t pos = 0;
  auto to_int = [](std::string_view token) -> std::optional<int64_t> {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
    return v;
  };
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    size_t end = rest.find_first_of(" \n", pos);
    if (end == std::string_view::npos) end = rest.size();
    if (pos == end) break;
    std::string_view token = rest.substr(pos, end - pos);
    ++field;
    if (field == 3) stat.state = token[0];
    if (field == 5) {
      auto v = to_int(token);
      if (!v) return std::nullopt;
      stat.pgrp = static_cast<int>(*v);
    }
    if (field == 22) {
      auto v = to_int(token);
      if (!v) return std::nullopt;
      stat.start_ticks = *v;
      return stat;
    }
    pos = end;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcStat> ReadProcStat(int pid, const std::string& proc_root) {
  auto text = ReadStat(pid, proc_root);
  if (!text) return std::nullopt;
  auto fields = ParseStat(*text);
  // A zombie has exited (and freed its GPU memory); only its parent has not reaped it.
  if (!fields || fields->state == 'Z' || fields->state == 'X') return std::nullopt;
  return fields;
}

std::optional<int64_t> ProcessStartTicks(int pid, const std::string& proc_root) {
  auto stat = ReadProcStat(pid, proc_root);
  if (!stat) return std::nullopt;
  return stat->start_ticks;
}

std::optional<model::LeaseProcess> CurrentLeaseProcess(int pid, const std::string& proc_root) {
  auto ticks = ProcessStartTicks(pid, proc_root);
  if (!ticks) return std::nullopt;
  return model::LeaseProcess{pid, *ticks};
}

bool IsProcessAlive(const model::LeaseProcess& process, const std::string& proc_root) {
  auto ticks = ProcessStartTicks(process.pid, proc_root);
  if (ticks) return *ticks == process.start_time_ticks;
  // /proc mounted with hidepid hides other users' processes: a pid we cannot see but the
  // kernel says exists (EPERM: it is someone else's) is alive as far as we can tell. Only
  // the real /proc, not a test's fake root, answers for kill().
  if (proc_root == "/proc" && process.pid > 0 && ::access((proc_root + "/self").c_str(), F_OK) == 0 &&
      ::access((proc_root + "/" + std::to_string(process.pid)).c_str(), F_OK) != 0 &&
      ::kill(process.pid, 0) != 0 && errno == EPERM) {
    return true;
  }
  return false;
}

LivenessCheck ProcLivenessCheck(std::string proc_root) {
  return [root = std::move(proc_root)](const model::LeaseProcess& p) {
    return IsProcessAlive(p, root);
  };
}

}  // namespace gpuman::store
