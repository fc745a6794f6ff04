#include "devices/gpu_ids.h"

#include <algorithm>
#include <string>

#include "base/strings.h"

namespace gpuman::devices {

Result<std::vector<size_t>> ResolveGpuIds(std::string_view list,
                                          const std::vector<model::DeviceSnapshot>& gpus) {
  auto known = [&] {
    if (gpus.empty()) return std::string("this machine has no GPUs");
    return "known indices: 0-" + std::to_string(gpus.size() - 1);
  };
  std::vector<size_t> out;
  if (Trim(list).empty()) return MakeError(ErrorCode::kInvalidArgument, "empty GPU list");
  // Ranges of indices, as gpuman prints them and nvidia-smi users type them: "0-3". A UUID
  // prefix never looks like one (its first group is 8 hex digits before any '-').
  std::vector<std::string> items;
  for (const std::string& raw : Split(list, ',')) {
    std::string item(Trim(raw));
    const size_t dash = item.find('-');
    if (dash != std::string::npos && dash >= 1 && dash <= 3 && item.size() - dash - 1 >= 1 && item.size() - dash - 1 <= 3 &&
        item.find_first_not_of("0123456789-") == std::string::npos && item.find('-', dash + 1) == std::string::npos) {
      const auto first = ParseInt(item.substr(0, dash));
      const auto last = ParseInt(item.substr(dash + 1));
      if (!first || !last || *first > *last) {
        return MakeError(ErrorCode::kInvalidArgument, "GPU range '" + item + "' runs backwards (" + known() + ")");
      }
      for (int64_t i = *first; i <= *last; ++i) items.push_back(std::to_string(i));
      continue;
    }
    items.push_back(item);
  }
  for (const std::string& item : items) {
    if (item.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "empty item in GPU list '" + std::string(list) + "'");
    }
    std::optional<size_t> found;
    if (auto index = ParseInt(item)) {
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (gpus[i].index == *index) found = i;
      }
      if (!found) {
        return MakeError(ErrorCode::kInvalidArgument, "unknown GPU index " + item + " (" + known() + ")");
      }
    } else {
      std::string want = ToLower(item);
      if (want.rfind("gpu-", 0) != 0) want = "gpu-" + want;
      bool hex = want.find_first_not_of("0123456789abcdef-", 4) == std::string::npos;
      if (want.size() < 8 || !hex) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "GPU id '" + item + "' is neither an index nor a UUID (prefix of at least 4 hex digits)");
      }
      int matches = 0;
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (!gpus[i].uuid) continue;
        std::string uuid = ToLower(*gpus[i].uuid);
        if (uuid == want) {
          found = i;
          matches = 1;
          break;
        }
        if (uuid.rfind(want, 0) == 0) {
          found = i;
          ++matches;
        }
      }
      if (matches == 0) {
        return MakeError(ErrorCode::kInvalidArgument, "unknown GPU UUID '" + item + "'");
      }
      if (matches > 1) {
        return MakeError(ErrorCode::kInvalidArgument, "GPU UUID prefix '" + item + "' is ambiguous");
      }
    }
    if (std::find(out.begin(), out.end(), *found) == out.end()) out.push_back(*found);
  }
  return out;
}

}  // namespace gpuman::devices
