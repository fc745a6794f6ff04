#include "devices/process_inspector.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "base/file.h"
#include "base/strings.h"

namespace gpuman::devices {
namespace {

std::string UserName(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* result = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr) {
    return result->pw_name;
  }
  return std::to_string(uid);
}

}  // namespace

ProcfsInspector::ProcfsInspector(std::string proc_root) : root_(std::move(proc_root)) {}

std::optional<ProcessDetails> ProcfsInspector::Inspect(uint32_t pid) {
  const std::string dir = root_ + "/" + std::to_string(pid);
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  ProcessDetails d;
  d.uid = st.st_uid;
  d.user = UserName(st.st_uid);

  auto stat_text = ReadWholeFile(dir + "/stat");
  std::string comm;
  if (stat_text) {
    // "pid (comm) state ppid ..." - comm may contain spaces and parentheses.
    size_t open = stat_text->find('(');
    size_t close = stat_text->rfind(')');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      comm = stat_text->substr(open + 1, close - open - 1);
      auto fields = Split(Trim(std::string_view(*stat_text).substr(close + 1)), ' ');
      // After ")" field 0 is state (field 3 of the whole line); starttime is field 22.
      if (fields.size() > 19) {
        auto ticks = ParseInt(fields[19]);
        if (!boot_time_read_) {
          boot_time_read_ = true;
          if (auto s = ReadWholeFile(root_ + "/stat")) {
            size_t pos = s->find("\nbtime ");
            if (pos != std::string::npos) {
              size_t end = s->find('\n', pos + 1);
              boot_time_unix_ = ParseInt(Trim(s->substr(pos + 7, end - pos - 7)));
            }
          }
        }
        long hz = sysconf(_SC_CLK_TCK);
        if (ticks && boot_time_unix_ && hz > 0) d.start_time_unix = *boot_time_unix_ + *ticks / hz;
      }
    }
  }
  auto cmdline = ReadWholeFile(dir + "/cmdline");
  if (cmdline && !cmdline->empty()) {
    while (!cmdline->empty() && cmdline->back() == '\0') cmdline->pop_back();
    for (char& c : *cmdline) {
      if (c == '\0') c = ' ';
    }
    d.command = *cmdline;
  } else {
    d.command = "[" + comm + "]";
  }
  return d;
}

std::optional<ProcessDetails> StaticProcessTable::Inspect(uint32_t pid) {
  if (load_) {
    table_ = load_();
    load_ = nullptr;
  }
  auto it = table_.find(pid);
  if (it != table_.end()) return it->second;
  return fallback_ ? fallback_->Inspect(pid) : std::nullopt;
}

void EnrichProcesses(model::MachineSnapshot& snap, ProcessInspector& inspector) {
  for (auto& gpu : snap.gpus) {
    for (auto& proc : gpu.processes) {
      auto details = inspector.Inspect(proc.pid);
      proc.is_visible = details.has_value();
      if (!details) continue;
      proc.uid = details->uid;
      proc.user = details->user;
      proc.command = details->command;
      proc.start_time_unix = details->start_time_unix;
    }
  }
}

}  // namespace gpuman::devices
