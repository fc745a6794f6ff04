#include "health/doctor.h"

#include <charconv>
#include <utility>

namespace gpuman::health {
namespace {

std::optional<std::pair<int, int>> ParseCc(std::string_view cc) {
  const size_t dot = cc.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  int major = 0, minor = 0;
  auto a = std::from_chars(cc.data(), cc.data() + dot, major);
  auto b = std::from_chars(cc.data() + dot + 1, cc.data() + cc.size(), minor);
  if (a.ec != std::errc() || b.ec != std::errc() || b.ptr != cc.data() + cc.size()) return std::nullopt;
  return std::pair{major, minor};
}

// "sm_86" -> {8, 6, false}; "sm_90a" -> {9, 0, true}; "sm_120" -> {12, 0}; "compute_90" too.
struct Target {
  int major = 0, minor = 0;
  bool specific = false;  // "a"/"f" suffix: that capability only
  bool ptx = false;
};
std::optional<Target> ParseTarget(std::string_view arch) {
  Target t;
  if (arch.rfind("sm_", 0) == 0) {
    arch.remove_prefix(3);
  } else if (arch.rfind("compute_", 0) == 0) {
    arch.remove_prefix(8);
    t.ptx = true;
  } else {
    return std::nullopt;
  }
  if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) {
    t.specific = true;
    arch.remove_suffix(1);
  }
  int n = 0;
  auto r = std::from_chars(arch.data(), arch.data() + arch.size(), n);
  if (r.ec != std::errc() || r.ptr != arch.data() + arch.size() || n < 10) return std::nullopt;
  t.major = n / 10;
  t.minor = n % 10;
  return t;
}

std::string Sm(const std::pair<int, int>& cc) { return "sm_" + std::to_string(cc.first) + std::to_string(cc.second); }

}  // namespace

std::optional<std::string> ArchThatRuns(const std::vector<std::string>& arch_list, const std::string& cc) {
  auto gpu = ParseCc(cc);
  if (!gpu) return std::nullopt;
  std::optional<std::string> ptx, cubin;
  std::pair<int, int> best_cubin{-1, -1}, best_ptx{-1, -1};
  for (const std::string& arch : arch_list) {
    auto t = ParseTarget(arch);
    if (!t) continue;
    const std::pair<int, int> target{t->major, t->minor};
    if (t->specific) {
      if (target == *gpu && !t->ptx) return arch;
      continue;
    }
    // The closest below the GPU: a cubin of its major, else the newest PTX it can compile.
    if (!t->ptx && t->major == gpu->first && t->minor <= gpu->second && target > best_cubin) {
      best_cubin = target;
      cubin = arch;
    }
    if (t->ptx && target <= *gpu && target > best_ptx) {
      best_ptx = target;
      ptx = arch + " (PTX, compiled by the driver at first use)";
    }
  }
  return cubin ? cubin : ptx;
}

std::vector<DoctorCheck> JudgeTorch(const TorchProbe& probe, const std::vector<VisibleGpu>& gpus,
                                    const std::optional<std::string>& driver_cuda, int expected_visible) {
  std::vector<DoctorCheck> out;
  const std::string who = "torch " + probe.version;
  if (!probe.cuda) {
    if (gpus.empty()) {
      out.push_back({"torch", "ok", who + " (a CPU-only build); no GPU is visible", ""});
    } else {
      out.push_back({"torch", "fail",
                     who + " is a CPU-only build: it will not use the " + std::to_string(gpus.size()) + " visible GPU" +
                         (gpus.size() == 1 ? "" : "s") + " (torch.version.cuda is None)",
                     "install a CUDA build of PyTorch (pytorch.org: pip install torch --index-url "
                     "https://download.pytorch.org/whl/cuXYZ, matching the driver's CUDA " +
                         driver_cuda.value_or("version") + ")"});
    }
    return out;
  }
  const std::string build = who + " built for CUDA " + *probe.cuda;
  // The driver must be of the build's CUDA major version or later (minor-version
  // compatibility covers a newer minor within the major).
  auto built = ParseCc(*probe.cuda);
  auto driver = driver_cuda ? ParseCc(*driver_cuda) : std::nullopt;
  bool driver_ok = true;
  if (built && driver) {
    if (driver->first < built->first) {
      driver_ok = false;
      out.push_back({"torch_cuda", "fail",
                     build + ", but the driver supports CUDA " + *driver_cuda + " only: a CUDA " +
                         std::to_string(built->first) + " build needs a CUDA " + std::to_string(built->first) +
                         " driver",
                     "upgrade the NVIDIA driver to one for CUDA " + std::to_string(built->first) +
                         ", or install a PyTorch built for CUDA " + std::to_string(driver->first) + "." +
                         std::to_string(driver->second) + " or older"});
    } else {
      const bool newer_minor = driver->first == built->first && driver->second < built->second;
      out.push_back({"torch_cuda", "ok",
                     build + "; the driver supports CUDA " + *driver_cuda +
                         (newer_minor ? " (minor-version compatibility: runs, though PTX built by the newer CUDA "
                                        "cannot be compiled by this driver)"
                                      : ""),
                     ""});
    }
  }
  if (!probe.available && !gpus.empty() && driver_ok) {
    out.push_back({"torch_available", "fail",
                   build + ", yet torch.cuda.is_available() is False with " + std::to_string(gpus.size()) +
                       " GPU(s) visible",
                   "check that this user may open /dev/nvidia* (gpuman doctor's device check), and "
                   "CUDA_VISIBLE_DEVICES (gpuman explain)"});
  }
  // The compiled architectures against each visible GPU: "no kernel image" before it runs.
  for (const VisibleGpu& g : gpus) {
    if (probe.arch_list.empty()) break;  // not reported (a build without CUDA, an old torch)
    const auto runs = ArchThatRuns(probe.arch_list, g.compute_capability);
    const std::string gpu = "GPU " + std::to_string(g.index) + " (" + g.name + ", compute " + g.compute_capability + ")";
    if (runs) {
      out.push_back({"torch_arch", "ok", gpu + ": runs " + who + "'s " + *runs, ""});
    } else {
      std::string list;
      for (const auto& a : probe.arch_list) list += (list.empty() ? "" : " ") + a;
      auto cc = ParseCc(g.compute_capability);
      out.push_back({"torch_arch", "fail",
                     gpu + ": " + who + " has no kernel for it (built for " + list +
                         "): \"no kernel image is available for execution on the device\"",
                     "install a PyTorch built with " + (cc ? Sm(*cc) : g.compute_capability) +
                         " (a newer release, or one for a newer CUDA)"});
    }
  }
  if (probe.available && expected_visible >= 0 && probe.device_count != expected_visible) {
    out.push_back({"torch_devices", "warn",
                   "torch sees " + std::to_string(probe.device_count) + " GPU(s); this environment makes " +
                       std::to_string(expected_visible) + " visible",
                   "gpuman explain"});
  }
  return out;
}

}  // namespace gpuman::health
