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
  for (const std::string& raw : Split(list, ',')) {
    std::string item(Trim(raw));
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
