// ExplainWithoutDriver(): the explain report when no snapshot exists (driver not loaded,
// NVML missing). Everything that can be decided from the text alone is still reported:
// the layers, CUDA_DEVICE_ORDER's value, and CUDA_VISIBLE_DEVICES's lexical problems
// (negative or non-numeric entries, kind changes, repeated integers). Ranges, UUIDs and
// prefixes need the GPUs and stay unchecked.
#include <set>

#include "base/strings.h"
#include "visibility/allocation.h"
#include "visibility/resolver.h"
#include "visibility/resolver_text.h"

namespace gpuman::visibility {

VisibilityReport ExplainWithoutDriver(const Environment& env, std::string driver_error) {
  VisibilityReport report;
  report.has_driver = false;
  report.warnings.push_back(
      Warning{WarningCode::kNoDriver,
              "no GPU information (" + driver_error + "): only the environment is explained"});
  report.driver_error = std::move(driver_error);
  bool hides_all = false;

  if (const auto value = GetVar(env, "NVIDIA_VISIBLE_DEVICES")) {
    const std::string_view v = Trim(*value);
    std::string effect = "lists host GPUs " + std::string(v) + " (not checked: no driver)";
    if (v.empty() || v == "void") effect = "void/empty: plain runc, the container toolkit restricts nothing";
    if (v == "all") effect = "all: every host GPU is injected into the container";
    if (v == "none") {
      effect = "none: driver libraries only, no GPU";
      hides_all = true;
    }
    report.layers.push_back(Layer{"container", "NVIDIA_VISIBLE_DEVICES", std::string(*value), effect});
  }
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const auto value = GetVar(env, name);
    if (!value || Trim(*value).empty()) continue;
    report.layers.push_back(Layer{"slurm", name, std::string(*value),
                                  "allocation: GPUs " + std::string(*value) +
                                      " (not checked: no driver)"});
    break;
  }

  const auto order_value = GetVar(env, "CUDA_DEVICE_ORDER");
  const DeviceOrderSetting order = ParseDeviceOrder(order_value);
  report.device_order = order.order;
  report.layers.push_back(Layer{"device_order", "CUDA_DEVICE_ORDER",
                                order_value ? std::optional<std::string>(*order_value)
                                            : std::nullopt,
                                detail::OrderEffect(order, CudaEnumeration{}, {})});
  if (!order.is_recognized) {
    report.warnings.push_back(
        Warning{WarningCode::kUnknownDeviceOrder,
                "CUDA_DEVICE_ORDER=\"" + std::string(*order_value) +
                    "\" is not PCI_BUS_ID or FASTEST_FIRST; CUDA uses FASTEST_FIRST"});
  }

  const auto cvd_value = GetVar(env, "CUDA_VISIBLE_DEVICES");
  Layer cvd_layer{"visible_devices", "CUDA_VISIBLE_DEVICES",
                  cvd_value ? std::optional<std::string>(*cvd_value) : std::nullopt, ""};
  if (!cvd_value) {
    cvd_layer.effect = "unset: CUDA would see every GPU the driver reports";
  } else if (cvd_value->empty()) {
    cvd_layer.effect = "empty: CUDA sees no GPU (unset would mean all)";
    hides_all = true;
  } else {
    const std::vector<LexedEntry> lexed = LexCudaVisibleDevices(*cvd_value);
    std::set<uint64_t> seen;
    int usable = 0;
    bool ended = false;
    for (const LexedEntry& lex : lexed) {
      EntryDiagnostic diag{lex.position, lex.text, EntryOutcome::kVisible, "", std::nullopt};
      if (ended) {
        diag.outcome = EntryOutcome::kIgnored;
        diag.reason = "after the end of the list";
      } else if (!lex.lexical_error.empty()) {
        diag.outcome = EntryOutcome::kInvalid;
        diag.reason = lex.lexical_error;
        ended = true;
        report.warnings.push_back(Warning{
            WarningCode::kInvalidEntry,
            "CUDA_VISIBLE_DEVICES is cut at entry " + std::to_string(lex.position + 1) +
                " \"" + lex.text + "\" (" + lex.lexical_error + "): CUDA ignores it and what follows"});
      } else if (lex.number && !seen.insert(*lex.number).second) {
        diag.outcome = EntryOutcome::kDuplicate;
        diag.reason = "repeats an earlier index: a duplicate empties the whole set";
        for (EntryDiagnostic& earlier : report.entries) {
          if (earlier.outcome == EntryOutcome::kVisible) earlier.outcome = EntryOutcome::kCancelled;
        }
        usable = 0;
        ended = true;
        hides_all = true;
        report.warnings.push_back(Warning{
            WarningCode::kDuplicateEntry,
            "CUDA_VISIBLE_DEVICES entry " + std::to_string(lex.position + 1) + " \"" + lex.text +
                "\" repeats an earlier index: a duplicate makes CUDA expose no GPU at all"});
      } else {
        diag.reason = "not checked against GPUs: no driver";
        ++usable;
      }
      report.entries.push_back(std::move(diag));
    }
    if (usable == 0) hides_all = true;
    cvd_layer.effect = std::to_string(usable) + " of " + std::to_string(lexed.size()) +
                       " entries readable as " + EntryKindName(lexed.front().kind) +
                       " (not checked against GPUs: no driver)";
  }
  report.layers.push_back(std::move(cvd_layer));
  if (hides_all) {
    report.warnings.push_back(
        Warning{WarningCode::kNothingVisible, "CUDA will see no GPU whatever the driver reports"});
  }
  return report;
}

}  // namespace gpuman::visibility
