// The `gpuman explain` views: a visibility::VisibilityReport rendered as the JSON
// contract of `gpuman explain --json` (docs/visibility.md) or as human text.
// Pure functions: no I/O, no environment; the caller passes terminal facts in.
// Safe to call from any thread.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "render/status_view.h"  // TerminalInfo
#include "visibility/resolver.h"

namespace gpuman::render {

/// schema_version 1: {"schema_version", "device_order", "order_is_estimate", "gpu_count",
/// "driver_error", "layers": [{"name","variable","value","effect"}], "entries": [...],
/// "visible": [{"cuda_index","index","uuid","name", ...}], "allowed_uuids",
/// "warnings": [{"code","message"}], "notes": [string]}. Unknown values are null; an unset variable's
/// "value" is null (an empty one is ""). Keys are emitted in this order.
nlohmann::ordered_json ExplainToJson(const visibility::VisibilityReport& report);

/// Human view: layers (outermost first, each with its effect), CUDA_VISIBLE_DEVICES
/// entries that were not simply visible, the cuda:N -> GPU table, warnings, then notes. Lines
/// joined with '\n', ending with '\n'; no line is wider than max(term.width, 80) display
/// columns (ANSI escapes, present only with use_color, not counted).
std::string RenderExplainText(const visibility::VisibilityReport& report,
                              const TerminalInfo& term);

}  // namespace gpuman::render
