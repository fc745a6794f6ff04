// `gpuman jupyter install-kernel`: a Jupyter kernelspec whose kernel runs under a gpuman
// lease for its whole life (docs/python.md, "Jupyter"): its argv is `gpuman run -q
// [selection] -- PYTHON -m ipykernel_launcher -f {connection_file}`, so the notebook gets
// its GPUs when the kernel starts and gives them back when it shuts down or dies.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"
#include "cli/selection_options.h"

namespace gpuman::cli {

struct JupyterArgs {
  SelectionArgs selection;
  std::optional<std::string> wait;          // --wait[=DURATION] for the kernel's start
  std::string name;                         // the kernelspec's name: [A-Za-z0-9._-]+
  std::optional<std::string> display_name;  // what the notebook's kernel menu shows
  std::string python = "python3";           // found on PATH now; recorded as an absolute path
  bool system = false;                      // /usr/local/share/jupyter/kernels (root)
  std::optional<std::string> prefix;        // PREFIX/share/jupyter/kernels (a venv, conda)
  bool bind_numa = false;
};

int RunJupyterInstallKernel(const JupyterArgs& args, Context& ctx);

}  // namespace gpuman::cli
