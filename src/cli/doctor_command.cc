#include "cli/doctor_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pwd.h>
#include <sys/stat.h>
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
#include "cli/config.h"
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

// TensorFlow: tf.__version__, tf.sysconfig.get_build_info() and
// tf.config.list_physical_devices('GPU') only (docs/doctor.md). TF_CPP_MIN_LOG_LEVEL keeps
// its start-up chatter off (stderr is dropped anyway).
constexpr const char* kTensorflowProbe = R"PY(
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
out = {"importable": False}
try:
    import tensorflow as tf
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out)); sys.exit(0)
out["importable"] = True
out["version"] = str(getattr(tf, "__version__", "?"))
try:
    info = dict(tf.sysconfig.get_build_info())
except Exception:
    info = {}
out["cuda_build"] = bool(info.get("is_cuda_build", False))
out["cuda"] = info.get("cuda_version")
out["arch_list"] = [str(a) for a in (info.get("cuda_compute_capabilities") or [])]
try:
    out["device_count"] = len(tf.config.list_physical_devices("GPU"))
except Exception:
    out["device_count"] = 0
print(json.dumps(out))
)PY";

// JAX: jax.__version__ and jax.devices() only. Preallocation off: the probe must not take
// 75 % of a GPU someone else may be using.
constexpr const char* kJaxProbe = R"PY(
import json, os, sys
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
out = {"importable": False}
try:
    import jax
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out)); sys.exit(0)
out["importable"] = True
out["version"] = str(getattr(jax, "__version__", "?"))
try:
    devices = list(jax.devices())
    out["platform"] = str(getattr(devices[0], "platform", "?")) if devices else ""
    out["device_count"] = sum(1 for d in devices if str(getattr(d, "platform", "")) in ("gpu", "cuda", "rocm"))
except Exception as e:
    out["platform"] = ""
    out["device_count"] = 0
    out["devices_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
)PY";

// Runs each argv at once, stdout to a pipe each, all within `timeout_s` together: each
// one's stdout, or why not. A child that has not finished by then is killed with its
// process group.
std::vector<Result<std::string>> RunAllCaptured(const std::vector<std::vector<std::string>>& argvs, double timeout_s) {
  struct Running {
    std::optional<SpawnedProcess> child;
    UniqueFd out_fd;
    std::string out;
    bool open = false;
  };
  std::vector<Result<std::string>> results;
  std::vector<Running> running(argvs.size());
  for (size_t i = 0; i < argvs.size(); ++i) {
    results.emplace_back(std::string());
    auto pipe = MakePipe(O_CLOEXEC);
    if (!pipe) {
      results[i] = pipe.error();
      continue;
    }
    SpawnSpec spec;
    spec.argv = argvs[i];
    spec.stdin_fd = SpawnFd::Null();
    spec.stdout_fd = SpawnFd::Fd(pipe->write.get());
    spec.stderr_fd = SpawnFd::Null();
    spec.close_other_fds = true;
    spec.group = SpawnSpec::Group::kNewProcessGroup;
    SpawnFailure failure;
    auto child = Spawn(spec, &failure);
    if (!child) {
      results[i] = child.error();
      continue;
    }
    pipe->write.reset();
    if (Status ran = child->ExecOutcome(&failure); !ran) {
      waitpid(child->pid(), nullptr, 0);
      results[i] = failure.ToError();
      continue;
    }
    running[i].child.emplace(std::move(*child));
    running[i].out_fd = std::move(pipe->read);
    running[i].open = true;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < running.size(); ++i) {
      if (!running[i].open) continue;
      fds.push_back({running[i].out_fd.get(), POLLIN, 0});
      which.push_back(i);
    }
    if (fds.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    const int r = poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r <= 0) continue;  // EINTR, or a second passed
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Running& run = running[which[k]];
      char buf[4096];
      const ssize_t n = read(run.out_fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        run.open = false;
        continue;
      }
      run.out.append(buf, static_cast<size_t>(n));
    }
  }
  for (size_t i = 0; i < running.size(); ++i) {
    Running& run = running[i];
    if (!run.child) continue;
    if (run.open) kill(-run.child->pid(), SIGKILL);
    int status = 0;
    while (waitpid(run.child->pid(), &status, 0) < 0 && errno == EINTR) {
    }
    if (run.open) {
      results[i] = MakeError(ErrorCode::kBusy, "gave no answer within " + std::to_string(static_cast<int>(timeout_s)) + " s");
    } else {
      results[i] = std::move(run.out);
    }
  }
  return results;
}

// The last JSON object a probe printed; a discarded value when none.
nlohmann::json ProbeAnswer(const std::string& text) {
  const size_t last = text.find_last_of('{');
  return nlohmann::json::parse(last == std::string::npos ? std::string("{}") : text.substr(last), nullptr, false);
}

std::vector<std::string> Strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key) && j[key].is_array()) {
    for (const auto& a : j[key]) {
      if (a.is_string()) out.push_back(a.get<std::string>());
    }
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

std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string OwnerOf(uid_t uid) {
  if (passwd* pw = getpwuid(uid)) return pw->pw_name;
  return "uid " + std::to_string(uid);
}

// gpuman's own setup (docs/doctor.md): who may write the file the machine's rules come
// from, what a personal file tried to set, the machine lease table's owners and modes
// (without a daemon), the daemon's confinement (with one), and the systemd units. Reads
// only: nothing is created or changed.
std::vector<DoctorCheck> SetupChecks(Context& ctx) {
  std::vector<DoctorCheck> out;
  const Config& config = ctx.config();
  struct stat st {};
  if (config.machine_config_path.empty()) {
    out.push_back({"machine_config", "ok", std::string("no ") + kMachineConfigPath + ": the machine runs on the defaults", ""});
  } else if (::stat(config.machine_config_path.c_str(), &st) == 0) {
    const std::string& path = config.machine_config_path;
    if (st.st_uid != 0) {
      out.push_back({"machine_config", "fail",
                     path + " belongs to " + OwnerOf(st.st_uid) + ": whoever owns it sets the machine's rules (caps, "
                                                                   "drains, confinement)",
                     "sudo chown root:root " + path + " && sudo chmod 644 " + path});
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
      out.push_back({"machine_config", "fail",
                     path + " is mode " + Mode(st.st_mode) + ": " + ((st.st_mode & S_IWOTH) ? "every user" : "its group") +
                         " may rewrite the machine's rules",
                     "sudo chmod 644 " + path});
    } else {
      out.push_back({"machine_config", "ok", "the machine's rules come from " + path + " (root's, " + Mode(st.st_mode) + ")", ""});
    }
  }
  for (const std::string& w : config.warnings) {
    out.push_back({"personal_config", "warn", w, "keep only [client] and [submit] in " + config.personal_config_path});
  }
  if (DaemonClient* daemon = ctx.Daemon()) {
    auto status = daemon->Call<protocol::StatusResult>(protocol::StatusArgs{});
    if (status && status->status.contains("confinement")) {
      const auto& c = status->status["confinement"];
      const bool on = c.value("on", false);
      const bool system = status->status.value("system_mode", false);
      const std::string said = c.value("description", std::string());
      if (on) {
        out.push_back({"confinement", "ok", "the daemon confines each job and run to its GPUs: " + said, ""});
        if (!c.value("favordynmods", true)) {
          // A cost, not a fault (docs/enforce.md, "Cost"): said once, with the admin's fix.
          out.push_back({"confinement_start", "ok",
                         "a confined `run` waits while the kernel moves its command into its cgroup (about 3 ms, "
                         "up to 19 ms on a busy machine); cgroup2 mounted with favordynmods makes it 0.4 ms",
                         ""});
        }
      } else {
        out.push_back({"confinement", system ? "warn" : "ok",
                       "the daemon does not confine jobs and runs to their GPUs: " + said,
                       system ? "docs/enforce.md: [enforce] devices, and a kernel with cgroup v2 BPF or the v1 "
                                "devices controller"
                              : ""});
      }
    }
  } else {
    const std::string& dir = ctx.lease_dir();
    if (::lstat(dir.c_str(), &st) != 0) {
      out.push_back({"lease_table", "warn", "the machine lease table " + dir + " is not set up: " + PosixErrorText(errno),
                     "run any gpuman command once as root (sudo gpuman leases), or start the daemon"});
    } else if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
      const std::string why = !S_ISDIR(st.st_mode) ? "is not a directory"
                              : st.st_uid != 0     ? "belongs to " + OwnerOf(st.st_uid) + ", not root"
                                                   : "is mode " + Mode(st.st_mode) + ": others may replace the table";
      out.push_back({"lease_table", st.st_uid == getuid() && st.st_uid != 0 ? "warn" : "fail",
                     "the machine lease table " + dir + " " + why +
                         (st.st_uid == getuid() && st.st_uid != 0 ? " (yours: a private table, other users do not see "
                                                                    "your leases)"
                                                                  : ""),
                     "sudo chown root:root " + dir + " && sudo chmod 755 " + dir});
    } else {
      std::string bad;
      for (const char* suffix : {"", "-wal", "-shm"}) {
        const std::string path = dir + "/leases.db" + suffix;
        struct stat f {};
        if (::lstat(path.c_str(), &f) != 0) {
          bad = path + " is missing";
        } else if (!S_ISREG(f.st_mode) || f.st_uid != 0) {
          bad = path + (S_ISREG(f.st_mode) ? " belongs to " + OwnerOf(f.st_uid) : std::string(" is not a regular file"));
        } else if ((f.st_mode & 0666) != 0666) {
          bad = path + " is mode " + Mode(f.st_mode) + ": users cannot record their leases";
        }
        if (!bad.empty()) break;
      }
      if (bad.empty()) {
        out.push_back({"lease_table", "ok", "the machine lease table " + dir + " (root's, " + Mode(st.st_mode) +
                                                "; leases.db and its WAL files 0666)", ""});
      } else {
        out.push_back({"lease_table", "fail", "the machine lease table " + dir + ": " + bad,
                       "run any gpuman command once as root to repair it (sudo gpuman leases)"});
      }
    }
  }
  // The systemd units: installed, and the socket enabled (only where systemd runs).
  if (::stat("/run/systemd/system", &st) == 0) {
    std::string unit_dir;
    for (const char* d : {"/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system",
                          "/usr/local/lib/systemd/system"}) {
      if (::stat((std::string(d) + "/gpuman.socket").c_str(), &st) == 0) {
        unit_dir = d;
        break;
      }
    }
    if (unit_dir.empty()) {
      out.push_back({"units", "warn", "gpuman.socket is not installed where systemd reads units",
                     "docs/install.md: install the .deb, or cmake --install with --prefix /usr"});
    } else if (::stat("/etc/systemd/system/sockets.target.wants/gpuman.socket", &st) != 0) {
      out.push_back({"units", "warn", "gpuman.socket is installed in " + unit_dir + " but not enabled: no daemon after a reboot",
                     "sudo systemctl enable --now gpuman.socket"});
    } else {
      out.push_back({"units", "ok", "gpuman.socket is installed in " + unit_dir + " and enabled", ""});
    }
  }
  return out;
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
    // NVSwitch machines: each GPU's registration with the fabric Fabric Manager sets up.
    // Until it completes CUDA fails with "system not yet initialized".
    int fabric_ready = 0;
    for (const auto& g : snap->gpus) {
      if (!g.fabric_state) continue;
      const std::string gpu = "GPU " + std::to_string(g.index);
      if (*g.fabric_state == "completed") {
        ++fabric_ready;
      } else if (*g.fabric_state == "not_started") {
        checks.push_back({"fabric", "fail",
                          gpu + ": its NVSwitch fabric is not set up (Fabric Manager has not registered it): CUDA "
                                "fails with \"system not yet initialized\"",
                          "sudo systemctl enable --now nvidia-fabricmanager (its version must match the driver's)"});
      } else if (*g.fabric_state == "in_progress") {
        checks.push_back({"fabric", "warn", gpu + ": Fabric Manager is still setting up its NVSwitch fabric",
                          "wait a minute; if it stays, journalctl -u nvidia-fabricmanager"});
      } else if (*g.fabric_state == "failed") {
        checks.push_back({"fabric", "fail", gpu + ": its NVSwitch fabric registration failed",
                          "journalctl -u nvidia-fabricmanager; a driver and Fabric Manager of the same version"});
      }
    }
    if (fabric_ready > 0) {
      checks.push_back({"fabric", "ok", "the NVSwitch fabric is ready on " + std::to_string(fabric_ready) + " GPU(s)", ""});
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
        checks.push_back({"device_nodes", "fail", "cannot open " + bad + ": " + PosixErrorText(err), fix});
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
  for (auto& c : SetupChecks(ctx)) checks.push_back(std::move(c));
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
      checks.push_back({"python", "warn", args.python + ": " + PosixErrorText(python.err) + ": frameworks not checked",
                        "name the Python with --python PATH (a venv's or conda's)"});
    } else {
      // The three probes at once: the slowest import bounds the wait, not their sum.
      auto answers = RunAllCaptured({{python.path, "-c", kTorchProbe},
                                     {python.path, "-c", kTensorflowProbe},
                                     {python.path, "-c", kJaxProbe}},
                                    args.timeout_s);
      const std::optional<std::string> driver_cuda = snap ? snap->system.cuda_driver_version : std::nullopt;
      // A simulated machine has no GPUs a real framework could see: only the build is judged.
      const int expected = simulated ? -1 : expected_visible;
      const char* names[] = {"torch", "tensorflow", "jax"};
      const char* checks_of[] = {"torch", "tf", "jax"};
      for (size_t i = 0; i < answers.size(); ++i) {
        const std::string probe_of = std::string("the probe of ") + names[i] + " in " + python.path;
        if (!answers[i]) {
          checks.push_back({checks_of[i], "warn", probe_of + " " + answers[i].error().message, ""});
          continue;
        }
        const nlohmann::json j = ProbeAnswer(*answers[i]);
        if (j.is_discarded() || !j.is_object()) {
          checks.push_back({checks_of[i], "warn", probe_of + " printed no verdict", ""});
          continue;
        }
        if (!j.value("importable", false)) {
          checks.push_back({checks_of[i], "ok",
                            std::string(names[i]) + " is not installed for " + python.path + " (" +
                                j.value("error", std::string()) + ")",
                            ""});
          continue;
        }
        std::vector<DoctorCheck> judged;
        if (i == 0) {
          health::TorchProbe probe;
          probe.importable = true;
          probe.version = j.value("version", std::string("?"));
          if (j.contains("cuda") && j["cuda"].is_string()) probe.cuda = j["cuda"].get<std::string>();
          probe.available = j.value("available", false);
          probe.device_count = j.value("device_count", 0);
          probe.arch_list = Strings(j, "arch_list");
          judged = health::JudgeTorch(probe, visible, driver_cuda, expected);
        } else if (i == 1) {
          health::TensorflowProbe probe;
          probe.importable = true;
          probe.version = j.value("version", std::string("?"));
          probe.cuda_build = j.value("cuda_build", false);
          if (j.contains("cuda") && j["cuda"].is_string()) probe.cuda = j["cuda"].get<std::string>();
          probe.arch_list = Strings(j, "arch_list");
          probe.device_count = j.value("device_count", 0);
          judged = health::JudgeTensorflow(probe, visible, driver_cuda, expected);
        } else {
          health::JaxProbe probe;
          probe.importable = true;
          probe.version = j.value("version", std::string("?"));
          probe.platform = j.value("platform", std::string());
          probe.device_count = j.value("device_count", 0);
          probe.error = j.value("devices_error", std::string());
          judged = health::JudgeJax(probe, visible, expected);
        }
        checks.insert(checks.end(), judged.begin(), judged.end());
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
