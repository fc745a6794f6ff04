// Reading the node side of Slurm (see node_facts.h and src/visibility/slurm_gpus.cc for
// the rule that uses it). Everything here is best effort: a file that cannot be read makes
// a fact unknown, and the visibility layer falls back and says so.
#include "slurm/node_facts.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/file.h"
#include "base/strings.h"
#include "slurm/gres_conf.h"

namespace gpuman::slurm {
namespace {

constexpr unsigned kNvidiaMajor = 195;

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::optional<std::string> Var(const visibility::Environment& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

}  // namespace

std::optional<int> MinorOfDeviceFile(const std::string& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == kNvidiaMajor) {
    return static_cast<int>(minor(st.st_rdev));
  }
  return MinorFromName(file);
}

namespace {

// "/slurm/uid_0/job_2/step_0" of the cgroup v1 line whose controllers include `controller`
// (v1).
std::optional<std::string> CgroupPath(const std::string& cgroup_file, const std::string& controller) {
  const auto text = ReadWholeFile(cgroup_file);
  if (!text) return std::nullopt;
  for (const std::string& line : Split(*text, '\n')) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    for (const std::string& c : Split(controllers, ',')) {
      if (c == controller) return line.substr(b + 1);
    }
  }
  return std::nullopt;
}

std::optional<bool> ConstrainedByConfig(const std::string& conf_dir, const std::string& slurm_conf,
                                        std::string& evidence) {
  const auto slurm = ReadWholeFile(slurm_conf);
  if (!slurm) return std::nullopt;
  const auto keys = ParseConfKeys(*slurm);
  const auto task = keys.find("taskplugin");
  const bool task_cgroup = task != keys.end() && task->second.find("task/cgroup") != std::string::npos;
  bool constrain = false;
  if (const auto cgroup = ReadWholeFile(conf_dir + "/cgroup.conf")) {
    const auto ckeys = ParseConfKeys(*cgroup);
    const auto it = ckeys.find("constraindevices");
    constrain = it != ckeys.end() && (it->second == "yes" || it->second == "Yes" || it->second == "YES");
  }
  evidence = slurm_conf + ": TaskPlugin=" + (task == keys.end() ? std::string("(default)") : task->second) +
             ", cgroup.conf ConstrainDevices=" + (constrain ? "yes" : "no");
  return task_cgroup && constrain;
}

}  // namespace

SlurmNodeVerdict DetectSlurmNode(SlurmNodeMode mode, const visibility::Environment& env, const std::string& hostname,
                                 const SlurmPaths& paths) {
  if (mode == SlurmNodeMode::kYes) return {true, "[slurm] node = yes"};
  if (mode == SlurmNodeMode::kNo) return {false, "[slurm] node = no"};
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(paths.proc, ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c); })) continue;
    if (const auto comm = ReadWholeFile(entry.path().string() + "/comm"); comm && Trim(*comm) == "slurmd") {
      return {true, "slurmd runs (pid " + pid + ")"};
    }
  }
  const std::string slurm_conf = Var(env, "SLURM_CONF").value_or(paths.default_conf_dir + "/slurm.conf");
  const auto text = ReadWholeFile(slurm_conf);
  if (!text) return {false, "no slurmd runs and " + slurm_conf + " cannot be read"};
  const std::string short_name = hostname.substr(0, hostname.find('.'));
  for (const std::string& name : ConfNodeNames(*text)) {
    if (name == hostname || name == short_name) return {true, slurm_conf + " declares NodeName " + name};
  }
  return {false, "no slurmd runs and " + slurm_conf + " declares no node " + short_name};
}

bool InSlurmJob(const visibility::Environment& env) {
  return Var(env, "SLURM_JOB_ID") || Var(env, "SLURM_STEP_GPUS") || Var(env, "SLURM_JOB_GPUS");
}

visibility::SlurmNode ReadSlurmNode(const visibility::Environment& env, const std::string& hostname,
                                    const SlurmPaths& paths) {
  visibility::SlurmNode node;
  const std::string slurm_conf = Var(env, "SLURM_CONF").value_or(paths.default_conf_dir + "/slurm.conf");
  const std::string conf_dir = Dirname(slurm_conf);
  node.gres_path = conf_dir + "/gres.conf";
  node.job_id = Var(env, "SLURM_JOB_ID");
  std::string node_name = Var(env, "SLURMD_NODENAME").value_or(hostname);
  if (const size_t dot = node_name.find('.'); dot != std::string::npos && !Var(env, "SLURMD_NODENAME")) {
    node_name.resize(dot);
  }
  if (const auto text = ReadWholeFile(node.gres_path)) {
    node.gres = ParseGresConf(*text, node_name);
    for (visibility::GresGpu& g : node.gres) g.minor = MinorOfDeviceFile(g.file);
    if (node.gres.empty()) node.gres_error = node.gres_path + " has no GPU File= line for node " + node_name;
  } else {
    node.gres_error = "cannot read " + node.gres_path;
  }
  // Slurm's own rule (gres_use_local_device_index): task/cgroup and ConstrainDevices=yes.
  // The cgroup itself cannot tell: Slurm denies devices in an allow-by-default cgroup v1,
  // whose devices.list then still reads "a *:* rwm", and cgroup v2 uses eBPF.
  std::string evidence;
  node.devices_constrained = ConstrainedByConfig(conf_dir, slurm_conf, evidence);
  if (const auto path = CgroupPath(paths.proc + "/self/cgroup", "devices");
      path && path->find("/job_") != std::string::npos) {
    evidence += "; in the job's devices cgroup " + *path;
  }
  node.constrained_evidence = evidence;
  return node;
}

std::optional<std::set<uint32_t>> JobPids(const std::string& job_id, const std::vector<uint32_t>& pids,
                                          const SlurmPaths& paths) {
  const std::string marker = "/job_" + job_id;
  const auto in_job = [&marker](const std::string& text) {
    for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
      const size_t end = at + marker.size();
      if (end == text.size() || text[end] == '/' || text[end] == '\n') return true;
    }
    return false;
  };
  const auto self = ReadWholeFile(paths.proc + "/self/cgroup");
  if (!self || !in_job(*self)) return std::nullopt;
  std::set<uint32_t> out;
  for (uint32_t pid : pids) {
    const auto text = ReadWholeFile(paths.proc + "/" + std::to_string(pid) + "/cgroup");
    if (text && in_job(*text)) out.insert(pid);
  }
  return out;
}

}  // namespace gpuman::slurm
