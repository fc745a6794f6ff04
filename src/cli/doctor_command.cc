#include "cli/doctor_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/installed_layout.h"
#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/unique_fd.h"
#include "cli/daemon_client.h"
#include "cli/daemon_sample.h"
#include "cli/exit_codes.h"
#include "cli/acquire.h"
#include "devices/device_source.h"
#include "health/doctor.h"
#include "visibility/resolver.h"

namespace gpuman::cli {
namespace {

using health::DoctorCheck;

// What the framework probe prints: one JSON line, built only from the calls docs/doctor.md
// names (torch.__version__, torch.version.cuda, torch.cuda.is_available/device_count/
// get_arch_list).
constexpr const char* kTorchProbe = R"PY(
import json, sys
out = {"importable": False}
try:
    import torch
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out)); sys.exit(0)
out["importable"] = True
out["version"] = str(getattr(torch, "__version__", "?"))
out["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
try:
    out["available"] = bool(torch.cuda.is_available())
except Exception:
    out["available"] = False
try:
    out["device_count"] = int(torch.cuda.device_count()) if out["available"] else 0
except Exception:
    out["device_count"] = 0
try:
    out["arch_list"] = [str(a) for a in torch.cuda.get_arch_list()]
except Exception:
    out["arch_list"] = []
print(json.dumps(out))
)PY";

// Runs `argv` with stdout to a pipe, at most `timeout_s`; its stdout, or why not.
Result<std::string> RunCaptured(const std::vector<std::string>& argv, double timeout_s) {
  auto pipe = MakePipe(O_CLOEXEC);
  if (!pipe) return pipe.error();
  SpawnSpec spec;
  spec.argv = argv;
  spec.stdin_fd = SpawnFd::Null();
  spec.stdout_fd = SpawnFd::Fd(pipe->write.get());
  spec.stderr_fd = SpawnFd::Null();
  spec.close_other_fds = true;
  spec.group = SpawnSpec::Group::kNewProcessGroup;
  SpawnFailure failure;
  auto child = Spawn(spec, &failure);
  if (!child) return child.error();
  pipe->write.reset();
  if (Status ran = child->ExecOutcome(&failure); !ran) {
    waitpid(child->pid(), nullptr, 0);
    return failure.ToError();
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe->read.get(), POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = read(pipe->read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) kill(-child->pid(), SIGKILL);
  int status = 0;
  while (waitpid(child->pid(), &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return MakeError(ErrorCode::kBusy, "gave no answer within " + std::to_string(static_cast<int>(timeout_s)) + " s");
  }
  return out;
}

std::string DriverFix(const std::string& error) {
  if (error.find("version mismatch") != std::string::npos || error.find("VERSION_MISMATCH") != std::string::npos) {
    return "the driver was upgraded without a reboot: reboot, or unload and reload the nvidia kernel modules";
  }
  if (error.find("not yet initialized") != std::string::npos) {
    return "on an NVSwitch machine, start Fabric Manager (systemctl start nvidia-fabricmanager)";
  }
  return "install the NVIDIA driver (nvidia-smi should list the GPUs), or name the library with --nvml-library";
}

void Print(Context& ctx, const std::vector<DoctorCheck>& checks) {
  for (const DoctorCheck& c : checks) {
    const std::string tag = c.status == "ok" ? "ok  " : c.status;
    ctx.out() << tag << "  " << c.name << ": " << c.message << "\n";
    if (!c.fix.empty()) ctx.out() << "      fix: " << c.fix << "\n";
  }
}

}  // namespace

int RunDoctor(const DoctorArgs& args, Context& ctx) {
  std::vector<DoctorCheck> checks;
  // The driver and the GPUs (from the daemon's sample where one serves).
  auto source = ctx.Devices();
  Result<model::MachineSnapshot> snap = source ? (*source)->Snapshot() : Result<model::MachineSnapshot>(source.error());
  // Simulated here (--simulate), or the daemon's sample is of a simulated machine.
  const bool simulated = ctx.is_simulated() || (ctx.daemon_sample() && !ctx.daemon_sample()->scenario().empty());
  if (!snap) {
    checks.push_back({"driver", "fail", snap.error().message, DriverFix(snap.error().message)});
  } else {
    std::string what = "driver " + snap->system.driver_version.value_or("?");
    if (snap->system.cuda_driver_version) what += " (CUDA " + *snap->system.cuda_driver_version + ")";
    what += ", " + std::to_string(snap->gpus.size()) + " GPU" + (snap->gpus.size() == 1 ? "" : "s");
    if (simulated) what += " (simulated)";
    checks.push_back({"driver", "ok", what, ""});
    for (const auto& g : snap->gpus) {
      if (g.is_healthy) continue;
      std::string problems;
      for (const auto& p : g.health_problems) problems += (problems.empty() ? "" : "; ") + p;
      checks.push_back({"gpu_health", "warn", "GPU " + std::to_string(g.index) + ": " + problems,
                        "gpuman health; an admin drains it with gpuman drain " + std::to_string(g.index)});
    }
    // Device nodes this user must open (CUDA opens /dev/nvidiactl and each GPU's node).
    if (simulated) {
      checks.push_back({"device_nodes", "ok", "a simulated machine: /dev/nvidia* not checked", ""});
    } else {
      std::vector<std::string> nodes = {"/dev/nvidiactl"};
      for (const auto& g : snap->gpus) {
        if (g.minor_number) nodes.push_back("/dev/nvidia" + std::to_string(*g.minor_number));
      }
      std::string bad;
      int err = 0;
      for (const auto& node : nodes) {
        UniqueFd fd(open(node.c_str(), O_RDWR | O_CLOEXEC));
        if (!fd) {
          bad = node;
          err = errno;
          break;
        }
      }
      if (bad.empty()) {
        checks.push_back({"device_nodes", "ok", "this user opens /dev/nvidiactl and the " + std::to_string(nodes.size() - 1) + " GPUs' nodes", ""});
      } else {
        const std::string fix = err == ENOENT   ? "load the driver's nodes: nvidia-modprobe, or nvidia-smi as root"
                                : err == EPERM  ? "a device cgroup forbids it (a container, a confined job): run through gpuman run, or ask for the GPU"
                                : err == EACCES ? "the node's mode or group keeps this user out (the driver's NVreg_DeviceFileMode/GID)"
                                                : "";
        checks.push_back({"device_nodes", "fail", "cannot open " + bad + ": " + std::strerror(err), fix});
      }
    }
  }
  // gpuman's own setup: the daemon.
  if (ctx.Daemon() != nullptr) {
    checks.push_back({"daemon", "ok", "the daemon at " + ctx.DaemonSocketPath() + " answers: it is the lease authority", ""});
  } else {
    checks.push_back({"daemon", "warn",
                      "no daemon serves: leases go through the machine lease table in " + ctx.lease_dir() +
                          ", with no queue, health watch or confinement",
                      PointDocReferencesAt("systemctl enable --now gpuman.socket (docs/cli.md, \"The daemon\")",
                                           ctx.layout().FindDocDir())});
  }
  // What CUDA will see here: the explain warnings.
  std::vector<health::VisibleGpu> visible;
  int expected_visible = -1;
  if (snap) {
    visibility::ResolveOptions options;
    options.current_uid = getuid();
    if (auto live = LiveLeases(ctx)) options.leases = std::move(*live);
    const visibility::VisibilityReport report = visibility::Resolve(ctx.env().vars, snap->gpus, options);
    for (const auto& w : report.warnings) checks.push_back({"visibility", "warn", w.message, "gpuman explain"});
    if (report.warnings.empty()) {
      checks.push_back({"visibility", "ok",
                        "CUDA will see " + std::to_string(report.visible.size()) + " GPU(s) here, as gpuman expects", ""});
    }
    expected_visible = static_cast<int>(report.visible.size());
    for (const auto& v : report.visible) {
      if (!v.index || !v.compute_capability) continue;
      visible.push_back({v.index->value, v.name.value_or("?"), *v.compute_capability});
    }
  }
  // The frameworks of the chosen Python, each in a child with a time-out.
  if (!args.no_frameworks) {
    const ProgramSearch python = SearchProgram(args.python, ctx.env().Get("PATH"));
    if (python.err != 0) {
      checks.push_back({"python", "warn", args.python + ": " + std::strerror(python.err) + ": frameworks not checked",
                        "name the Python with --python PATH (a venv's or conda's)"});
    } else {
      auto probe_out = RunCaptured({python.path, "-c", kTorchProbe}, args.timeout_s);
      if (!probe_out) {
        checks.push_back({"torch", "warn", "the probe of torch in " + python.path + " " + probe_out.error().message, ""});
      } else {
        const std::string text = *probe_out;
        const size_t last = text.find_last_of('{');
        auto j = nlohmann::json::parse(last == std::string::npos ? std::string("{}") : text.substr(last), nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
          checks.push_back({"torch", "warn", "the probe of torch in " + python.path + " printed no verdict", ""});
        } else if (!j.value("importable", false)) {
          checks.push_back({"torch", "ok", "not installed for " + python.path + " (" + j.value("error", std::string()) + ")", ""});
        } else {
          health::TorchProbe probe;
          probe.importable = true;
          probe.version = j.value("version", std::string("?"));
          if (j.contains("cuda") && j["cuda"].is_string()) probe.cuda = j["cuda"].get<std::string>();
          probe.available = j.value("available", false);
          probe.device_count = j.value("device_count", 0);
          if (j.contains("arch_list") && j["arch_list"].is_array()) {
            for (const auto& a : j["arch_list"]) {
              if (a.is_string()) probe.arch_list.push_back(a.get<std::string>());
            }
          }
          // A simulated machine has no GPUs a real framework could see: only the build is judged.
          const auto judged = health::JudgeTorch(probe, visible, snap ? snap->system.cuda_driver_version : std::nullopt,
                                                 simulated ? -1 : expected_visible);
          checks.insert(checks.end(), judged.begin(), judged.end());
        }
      }
    }
  }

  bool failed = false;
  for (const auto& c : checks) failed = failed || c.status == "fail";
  if (args.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& c : checks) {
      list.push_back({{"name", c.name}, {"status", c.status}, {"message", c.message}, {"fix", c.fix}});
    }
    ctx.out() << nlohmann::ordered_json{{"schema_version", 1}, {"simulated", simulated}, {"checks", list}}.dump(2)
              << "\n";
  } else {
    Print(ctx, checks);
  }
  return failed ? kExitUnhealthy : kExitOk;
}

}  // namespace gpuman::cli
