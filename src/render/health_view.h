// Text form of a health report (`gpuman health`). The JSON form is
// protocol::HealthReportToJson, shared with the daemon's `health` reply.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/drain.h"
#include "model/health.h"
#include "render/status_view.h"

namespace gpuman::render {

/// A drained GPU as `gpuman health` reports it: the drain and the GPU's index when known.
struct HealthDrain {
  model::GpuDrain drain;
  std::optional<int> gpu_index;
};

/// "GPU 2 is drained: health: Xid 79 (by root since 2026-12-01T09:00:00Z)"; without an
/// index the UUID names the GPU. A drain is a note, never a finding: it changes no exit code.
std::string DrainNote(const HealthDrain& drain);

/// One summary line, then one line per finding (fatal first), then quarantined GPUs that
/// no drain note covers, one "note: GPU n is drained: ..." line per drain, and the notes.
/// `gpu_count` is how many GPUs were checked (for "all 4 GPUs healthy").
std::string RenderHealthText(const model::HealthReport& report, int gpu_count, const TerminalInfo& term,
                             const std::vector<HealthDrain>& drains = {});

}  // namespace gpuman::render
