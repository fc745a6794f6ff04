// Xid classification: what an Xid number means and how serious it is, following DCGM's
// health watch (modules/health/DcgmHealthWatch.cpp, BuildXidMappings) and the Xids the
// Kubernetes device plugin treats as application-caused. See docs/health.md.
#pragma once

#include "model/health.h"

namespace gpuman::health {

struct XidClass {
  model::Severity severity = model::Severity::kWarning;
  const char* subsystem = "other";  // memory, pcie, nvlink, thermal, power, gsp, application, ...
  const char* description = "";     // short text; "" when gpuman has none for this Xid
  bool application = false;         // usually caused by the running program, not the GPU
};

/// Fatal (DCGM's "always fatal"): 48, 74, 79, 95, 119, 120, 140. Everything else is a
/// warning; unknown numbers are warnings with an empty description.
XidClass ClassifyXid(int xid);

}  // namespace gpuman::health
