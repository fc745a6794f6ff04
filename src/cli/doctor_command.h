// `gpuman doctor`: checks with verdicts, not dumps (issue 24; docs/doctor.md). One line per
// check, ok / warn / fail, with the cause and the fix; exit 6 when something fails.
#pragma once

#include <string>

#include "cli/context.h"

namespace gpuman::cli {

struct DoctorArgs {
  bool json = false;
  std::string python = "python3";  // whose frameworks are probed (a venv's, conda's)
  double timeout_s = 30;           // for each framework probe
  bool no_frameworks = false;
};

int RunDoctor(const DoctorArgs& args, Context& ctx);

}  // namespace gpuman::cli
