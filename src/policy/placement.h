// Placement: given the GPUs that are eligible for a request, choose which `count` of
// them to hand out. Used by selection.cc; exposed separately so the rules (and their
// essay in placement.cc) stay in one file of their own. Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "model/device_snapshot.h"

namespace gpuman::policy {

/// Per GPU (position in snap.gpus) facts the placement needs.
struct PlacementGpu {
  bool is_eligible = false;  // may be handed out for this request
  bool is_free = false;      // healthy, ours to use, not leased, no foreign processes
  bool is_shared = false;    // eligible only because the request allows sharing
};

struct Placement {
  std::vector<int> positions;  // chosen positions in snap.gpus, ascending
  std::string description;     // "single GPU", "NVLink (NV12)", "same PCIe switch (PIX)", ...
};

/// Chooses `count` (>= 1) of the eligible GPUs; `gpus` has one entry per snap.gpus.
/// Requires at least `count` eligible GPUs (checked).
Placement Place(const model::MachineSnapshot& snap, const std::vector<PlacementGpu>& gpus,
                int count);

/// The description Place() gives for a set of positions.
std::string DescribePlacement(const model::MachineSnapshot& snap,
                              const std::vector<int>& positions);

}  // namespace gpuman::policy
