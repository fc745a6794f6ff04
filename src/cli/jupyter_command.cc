#include "cli/jupyter_command.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/installed_layout.h"
#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/strings.h"
#include "cli/exit_codes.h"

namespace gpuman::cli {
namespace {

bool ValidKernelName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

// Where Jupyter looks for kernelspecs: PREFIX/share/jupyter/kernels (--prefix), the system's
// /usr/local/share/jupyter/kernels (--system), else the user's data directory
// ($JUPYTER_DATA_DIR, $XDG_DATA_HOME/jupyter, ~/.local/share/jupyter), as jupyter_core finds it.
Result<std::string> KernelsDir(const JupyterArgs& args, const Context& ctx) {
  if (args.prefix) return *args.prefix + "/share/jupyter/kernels";
  if (args.system) return std::string("/usr/local/share/jupyter/kernels");
  if (auto d = ctx.env().Get("JUPYTER_DATA_DIR"); d && !d->empty()) return *d + "/kernels";
  if (auto d = ctx.env().Get("XDG_DATA_HOME"); d && !d->empty()) return *d + "/jupyter/kernels";
  if (auto h = ctx.env().Get("HOME"); h && !h->empty()) return *h + "/.local/share/jupyter/kernels";
  return MakeError(ErrorCode::kInvalidArgument, "HOME is not set: name where the kernel goes with --prefix or --system");
}

// `gpuman run`'s selection options as given, for the kernel's argv.
std::vector<std::string> SelectionFlags(const SelectionArgs& s) {
  std::vector<std::string> out = {"-n", std::to_string(s.count)};
  auto add = [&](const char* flag, const std::optional<std::string>& v) {
    if (v) out.insert(out.end(), {flag, *v});
  };
  add("--gpus", s.gpus);
  add("--min-free-memory", s.min_free_memory);
  if (s.max_utilization) out.insert(out.end(), {"--max-utilization", std::to_string(*s.max_utilization)});
  add("--model", s.model);
  add("--min-compute-capability", s.min_compute_capability);
  add("--require", s.require);
  if (!s.exclude.empty()) out.insert(out.end(), {"--exclude", Join(s.exclude, ",")});
  if (s.allow_shared) out.push_back("--allow-shared");
  add("--gpu-memory", s.gpu_memory);  // a notebook on a slice (docs/share.md)
  add("--prefer", s.prefer);
  return out;
}

// Whether `python` can import ipykernel (a child with nothing but stderr closed).
bool ImportsIpykernel(const std::string& python) {
  SpawnSpec spec;
  spec.argv = {python, "-c", "import ipykernel"};
  spec.program = python;
  spec.stdin_fd = SpawnFd::Null();
  spec.stdout_fd = SpawnFd::Null();
  spec.stderr_fd = SpawnFd::Null();
  spec.close_other_fds = true;
  auto child = Spawn(spec);
  if (!child) return false;
  int status = 0;
  while (waitpid(child->pid(), &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int RunJupyterInstallKernel(const JupyterArgs& args, Context& ctx) {
  if (!ValidKernelName(args.name)) {
    return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                              "--name '" + args.name + "': a kernel name is letters, digits, '.', '_' and '-' (at most 64)"));
  }
  // The programs, as absolute paths: Jupyter starts the kernel with its own PATH.
  const std::string self = ReadExecutablePath();
  if (self.empty()) return ctx.Fail(MakeError(ErrorCode::kIo, "cannot read this gpuman's own path (/proc/self/exe)"));
  const ProgramSearch python = SearchProgram(args.python, ctx.env().Get("PATH"));
  if (python.err != 0) {
    return ctx.Fail(PosixError("--python " + args.python, python.err).WithContext("the kernel's Python"));
  }
  std::error_code ec;
  const std::string python_path = std::filesystem::absolute(python.path, ec).lexically_normal().string();

  auto dir = KernelsDir(args, ctx);
  if (!dir) return ctx.Fail(dir.error());
  const std::string kernel_dir = *dir + "/" + args.name;

  nlohmann::ordered_json argv = nlohmann::ordered_json::array({self, "run", "-q"});
  for (const auto& f : SelectionFlags(args.selection)) argv.push_back(f);
  if (args.wait) argv.push_back(args.wait->empty() ? std::string("--wait") : "--wait=" + *args.wait);
  if (args.bind_numa) argv.push_back("--bind-numa");
  for (const char* a : {"--", "", "-m", "ipykernel_launcher", "-f", "{connection_file}"}) argv.push_back(a);
  argv[argv.size() - 5] = python_path;
  const int n = args.selection.count;
  const std::string gpus = std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
  nlohmann::ordered_json spec = {
      {"argv", argv},
      {"display_name", args.display_name.value_or("Python 3 (gpuman, " + gpus + ")")},
      {"language", "python"},
      {"interrupt_mode", "signal"},  // `run` forwards SIGINT to the kernel
      {"metadata", {{"gpuman", {{"gpus", n}, {"argv_note", "the kernel holds a gpuman lease while it runs"}}}}},
  };

  const bool existed = std::filesystem::exists(kernel_dir + "/kernel.json", ec);
  std::filesystem::create_directories(kernel_dir, ec);
  if (ec) return ctx.Fail(PosixError("create " + kernel_dir, ec.value()));
  const std::string path = kernel_dir + "/kernel.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << spec.dump(1) << "\n";
    out.close();
    if (!out) return ctx.Fail(PosixError("write " + tmp, errno));
  }
  chmod(tmp.c_str(), 0644);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ctx.Fail(PosixError("write " + path, errno));
  if (!ImportsIpykernel(python_path)) {
    ctx.err() << "gpuman: warning: " << python_path
              << " cannot import ipykernel: the kernel will not start until it can (Debian: apt install "
                 "python3-ipykernel; a venv or conda: pip install ipykernel there)\n";
  }
  ctx.out() << (existed ? "replaced" : "installed") << " kernel " << args.name << " in " << kernel_dir << ": it holds "
            << gpus << " of a gpuman lease while it runs\n";
  return kExitOk;
}

}  // namespace gpuman::cli
