// Text form of a health report (`gpuman health`). The JSON form is
// protocol::HealthReportToJson, shared with the daemon's `health` reply.
#pragma once

#include <string>

#include "model/health.h"
#include "render/status_view.h"

namespace gpuman::render {

/// One summary line, then one line per finding (fatal first), then quarantined GPUs and
/// notes. `gpu_count` is how many GPUs were checked (for "all 4 GPUs healthy").
std::string RenderHealthText(const model::HealthReport& report, int gpu_count, const TerminalInfo& term);

}  // namespace gpuman::render
