#include "tui/host_process.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace gpuman::tui {

std::optional<HostProcessStat> ReadHostProcessStat(const std::string& proc_root, uint32_t pid, int64_t page_bytes) {
  const std::string dir = proc_root + "/" + std::to_string(pid);
  std::ifstream stat_file(dir + "/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // The command (field 2) may hold spaces and parentheses: the fields start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string f; rest >> f && fields.size() < 20;) fields.push_back(f);
  if (fields.size() < 20) return std::nullopt;
  HostProcessStat s;
  std::ifstream statm(dir + "/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return std::nullopt;
  try {
    s.cpu_ticks = std::stoll(fields[11]) + std::stoll(fields[12]);  // fields 14 and 15
    s.start_ticks = std::stoll(fields[19]);                          // field 22
  } catch (...) {  // std::stoll on a malformed file
    return std::nullopt;
  }
  s.rss_bytes = resident_pages * page_bytes;
  return s;
}

std::optional<double> CpuPercent(const HostProcessStat* before, const HostProcessStat& now, int64_t ms,
                                 int64_t ticks_per_s) {
  if (!before || before->start_ticks != now.start_ticks || ms <= 0 || ticks_per_s <= 0) return std::nullopt;
  const int64_t ticks = std::max<int64_t>(0, now.cpu_ticks - before->cpu_ticks);
  return 100.0 * static_cast<double>(ticks) * 1000.0 / static_cast<double>(ticks_per_s) / static_cast<double>(ms);
}

}  // namespace gpuman::tui
