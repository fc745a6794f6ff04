// Findings from what one snapshot says (the judge of model/health_judge.h, GPU by GPU)
// and from Xid events. Pure.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"

namespace gpuman::health {

/// Findings of every GPU in `snap`, GPU by GPU, as model::JudgeGpuHealth gives them
/// (model/health_judge.h: the codes, severities and wording).
std::vector<model::Finding> SnapshotFindings(const model::MachineSnapshot& snap);

/// A driver-wide fatal finding ("driver") for a snapshot that could not be taken at all.
model::Finding DriverFinding(const std::string& error_message, int64_t now_unix_ms);

/// Matches an Xid event to a GPU of `snap` by UUID, index or PCI bus id; fills the
/// missing identity fields. Returns false when no GPU matches.
bool MatchXidToGpu(const model::MachineSnapshot& snap, model::XidEvent& ev);

/// One finding per (GPU, Xid) over `events`, with count, first and last time and the
/// severity from ClassifyXid. `cleared_before` (by GPU UUID): Xids at or before that time
/// were followed by a passing recheck and are reported as warnings ("cleared").
std::vector<model::Finding> XidFindings(const std::vector<model::XidEvent>& events,
                                        const std::map<std::string, int64_t>& cleared_before = {});

/// Sorted for display: fatal first, then by GPU index, then code.
void SortFindings(std::vector<model::Finding>& findings);

}  // namespace gpuman::health
