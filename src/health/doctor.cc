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

namespace {

// What differs between the frameworks' verdicts: names and the words of the fixes.
struct Framework {
  std::string prefix;      // check names: "torch", "torch_cuda", ...; "tf", "tf_cuda", ...
  std::string who;         // "torch 2.5.1+cu124"
  std::string cpu_fix;     // how to get a CUDA build
  std::string cuda_field;  // where the build says its CUDA: "torch.version.cuda is None"
  std::string available;   // the call that says whether it sees a GPU
  std::string product;     // in fixes: "PyTorch", "TensorFlow"
};

// A build's CUDA (`cuda`, nullopt: CPU-only) and compiled architectures against the
// driver and the visible GPUs, and what the framework sees against what is visible.
std::vector<DoctorCheck> JudgeBuild(const Framework& f, const std::optional<std::string>& cuda,
                                    const std::vector<std::string>& arch_list, bool available, int device_count,
                                    const std::vector<VisibleGpu>& gpus, const std::optional<std::string>& driver_cuda,
                                    int expected_visible) {
  std::vector<DoctorCheck> out;
  const std::string& who = f.who;
  if (!cuda) {
    if (gpus.empty()) {
      out.push_back({f.prefix, "ok", who + " (a CPU-only build); no GPU is visible", ""});
    } else {
      out.push_back({f.prefix, "fail",
                     who + " is a CPU-only build: it will not use the " + std::to_string(gpus.size()) + " visible GPU" +
                         (gpus.size() == 1 ? "" : "s") + " (" + f.cuda_field + ")",
                     f.cpu_fix + driver_cuda.value_or("version") + ")"});
    }
    return out;
  }
  const std::string build = who + " built for CUDA " + *cuda;
  // The driver must be of the build's CUDA major version or later (minor-version
  // compatibility covers a newer minor within the major).
  auto built = ParseCc(*cuda);
  auto driver = driver_cuda ? ParseCc(*driver_cuda) : std::nullopt;
  bool driver_ok = true;
  if (built && driver) {
    if (driver->first < built->first) {
      driver_ok = false;
      out.push_back({f.prefix + "_cuda", "fail",
                     build + ", but the driver supports CUDA " + *driver_cuda + " only: a CUDA " +
                         std::to_string(built->first) + " build needs a CUDA " + std::to_string(built->first) +
                         " driver",
                     "upgrade the NVIDIA driver to one for CUDA " + std::to_string(built->first) + ", or install a " +
                         f.product + " built for CUDA " + std::to_string(driver->first) + "." +
                         std::to_string(driver->second) + " or older"});
    } else {
      const bool newer_minor = driver->first == built->first && driver->second < built->second;
      out.push_back({f.prefix + "_cuda", "ok",
                     build + "; the driver supports CUDA " + *driver_cuda +
                         (newer_minor ? " (minor-version compatibility: runs, though PTX built by the newer CUDA "
                                        "cannot be compiled by this driver)"
                                      : ""),
                     ""});
    }
  }
  if (!available && !gpus.empty() && driver_ok) {
    out.push_back({f.prefix + "_available", "fail",
                   build + ", yet " + f.available + " with " + std::to_string(gpus.size()) + " GPU(s) visible",
                   "check that this user may open /dev/nvidia* (gpuman doctor's device check), and "
                   "CUDA_VISIBLE_DEVICES (gpuman explain)"});
  }
  // The compiled architectures against each visible GPU: "no kernel image" before it runs.
  for (const VisibleGpu& g : gpus) {
    if (arch_list.empty()) break;  // not reported (a build without CUDA, an old release)
    const auto runs = ArchThatRuns(arch_list, g.compute_capability);
    const std::string gpu = "GPU " + std::to_string(g.index) + " (" + g.name + ", compute " + g.compute_capability + ")";
    if (runs) {
      out.push_back({f.prefix + "_arch", "ok", gpu + ": runs " + who + "'s " + *runs, ""});
    } else {
      std::string list;
      for (const auto& a : arch_list) list += (list.empty() ? "" : " ") + a;
      auto cc = ParseCc(g.compute_capability);
      out.push_back({f.prefix + "_arch", "fail",
                     gpu + ": " + who + " has no kernel for it (built for " + list +
                         "): \"no kernel image is available for execution on the device\"",
                     "install a " + f.product + " built with " + (cc ? Sm(*cc) : g.compute_capability) +
                         " (a newer release, or one for a newer CUDA)"});
    }
  }
  if (available && expected_visible >= 0 && device_count != expected_visible) {
    out.push_back({f.prefix + "_devices", "warn",
                   f.prefix + " sees " + std::to_string(device_count) + " GPU(s); this environment makes " +
                       std::to_string(expected_visible) + " visible",
                   "gpuman explain"});
  }
  return out;
}

}  // namespace

std::vector<DoctorCheck> JudgeTorch(const TorchProbe& probe, const std::vector<VisibleGpu>& gpus,
                                    const std::optional<std::string>& driver_cuda, int expected_visible) {
  const Framework f{"torch", "torch " + probe.version,
                    "install a CUDA build of PyTorch (pytorch.org: pip install torch --index-url "
                    "https://download.pytorch.org/whl/cuXYZ, matching the driver's CUDA ",
                    "torch.version.cuda is None", "torch.cuda.is_available() is False", "PyTorch"};
  return JudgeBuild(f, probe.cuda, probe.arch_list, probe.available, probe.device_count, gpus, driver_cuda,
                    expected_visible);
}

std::vector<DoctorCheck> JudgeTensorflow(const TensorflowProbe& probe, const std::vector<VisibleGpu>& gpus,
                                         const std::optional<std::string>& driver_cuda, int expected_visible) {
  const Framework f{"tf", "tensorflow " + probe.version,
                    "install TensorFlow with its CUDA libraries (pip install 'tensorflow[and-cuda]'; the driver's "
                    "CUDA is ",
                    "tf.sysconfig.get_build_info() says is_cuda_build False",
                    "tf.config.list_physical_devices('GPU') is empty", "TensorFlow"};
  std::optional<std::string> cuda = probe.cuda_build ? probe.cuda.value_or("?") : std::optional<std::string>();
  return JudgeBuild(f, cuda, probe.arch_list, probe.device_count > 0, probe.device_count, gpus, driver_cuda,
                    expected_visible);
}

std::vector<DoctorCheck> JudgeJax(const JaxProbe& probe, const std::vector<VisibleGpu>& gpus, int expected_visible) {
  std::vector<DoctorCheck> out;
  const std::string who = "jax " + probe.version;
  if (probe.device_count == 0) {
    if (gpus.empty()) {
      out.push_back({"jax", "ok", who + ": no GPU is visible, and jax uses the CPU", ""});
    } else {
      const std::string why = !probe.error.empty() ? "jax.devices() failed: " + probe.error
                                                   : "jax.devices() lists only " + probe.platform.substr(0, 20) +
                                                         " devices (a jaxlib without its CUDA plugin, or a plugin "
                                                         "that failed to load)";
      out.push_back({"jax", "fail",
                     who + " will not use the " + std::to_string(gpus.size()) + " visible GPU" +
                         (gpus.size() == 1 ? "" : "s") + ": " + why,
                     "install JAX with its CUDA plugin for the driver's CUDA major version "
                     "(pip install -U 'jax[cuda12]')"});
    }
    return out;
  }
  out.push_back({"jax", "ok", who + " sees " + std::to_string(probe.device_count) + " GPU(s)", ""});
  if (expected_visible >= 0 && probe.device_count != expected_visible) {
    out.push_back({"jax_devices", "warn",
                   "jax sees " + std::to_string(probe.device_count) + " GPU(s); this environment makes " +
                       std::to_string(expected_visible) + " visible",
                   "gpuman explain"});
  }
  return out;
}

}  // namespace gpuman::health
