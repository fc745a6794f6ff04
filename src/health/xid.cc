#include "health/xid.h"

namespace gpuman::health {
namespace {

struct Row {
  int xid;
  bool fatal;
  const char* subsystem;
  const char* description;
  bool application;
};

// clang-format off
constexpr Row kXids[] = {
  {13,  false, "application", "graphics engine exception", true},
  {31,  false, "memory",      "GPU memory page fault", true},
  {32,  false, "memory",      "invalid or corrupted push buffer stream", false},
  {38,  false, "pcie",        "driver firmware error", false},
  {39,  false, "pcie",        "PCIe error", false},
  {42,  false, "pcie",        "PCIe error", false},
  {43,  false, "application", "GPU stopped processing", true},
  {45,  false, "application", "preemptive cleanup after earlier errors", true},
  {48,  true,  "memory",      "double bit ECC error", false},
  {54,  false, "power",       "auxiliary power is not connected", false},
  {56,  false, "power",       "display engine error", false},
  {57,  false, "power",       "error programming video memory interface", false},
  {58,  false, "power",       "unstable video memory interface", false},
  {60,  false, "thermal",     "internal micro-controller error", false},
  {61,  false, "thermal",     "internal micro-controller breakpoint", false},
  {62,  false, "thermal",     "internal micro-controller halt", false},
  {63,  false, "memory",      "ECC page retirement or row remapping recorded", false},
  {64,  false, "memory",      "ECC page retirement or row remapping recording failed", false},
  {67,  false, "nvlink",      "NVLink error", false},
  {68,  false, "application", "video processor exception", true},
  {73,  false, "nvlink",      "NVLink error", false},
  {74,  true,  "nvlink",      "NVLink error", false},
  {78,  false, "power",       "vGPU start failed", false},
  {79,  true,  "pcie",        "GPU has fallen off the bus", false},
  {92,  false, "memory",      "high single-bit ECC error rate", false},
  {93,  false, "inforom",     "non-fatal violation of provisioned InfoROM", false},
  {94,  false, "memory",      "contained ECC error", false},
  {95,  true,  "memory",      "uncontained ECC error", false},
  {109, false, "application", "context switch timeout", true},
  {119, true,  "gsp",         "GSP RPC timeout", false},
  {120, true,  "gsp",         "GSP error", false},
  {121, false, "nvlink",      "C2C link corrected error", false},
  {137, false, "nvlink",      "NVLink error", false},
  {140, true,  "memory",      "unrecovered ECC error", false},
};
// clang-format on

}  // namespace

XidClass ClassifyXid(int xid) {
  for (const Row& row : kXids) {
    if (row.xid == xid) {
      return XidClass{row.fatal ? model::Severity::kFatal : model::Severity::kWarning, row.subsystem,
                      row.description, row.application};
    }
  }
  if (xid == 999) return XidClass{model::Severity::kWarning, "other", "unknown Xid error", false};
  return XidClass{};
}

}  // namespace gpuman::health
