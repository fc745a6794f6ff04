#include "model/topology.h"

namespace gpuman::model {

const char* PcieLevelName(PcieLevel level) {
  switch (level) {
    case PcieLevel::kSelf: return "X";
    case PcieLevel::kSingleSwitch: return "PIX";
    case PcieLevel::kMultipleSwitch: return "PXB";
    case PcieLevel::kHostBridge: return "PHB";
    case PcieLevel::kNumaNode: return "NODE";
    case PcieLevel::kSystem: return "SYS";
    case PcieLevel::kUnknown: return "?";
  }
  return "?";
}

std::string Topology::CellName(size_t i, size_t j) const {
  if (i == j) return "X";
  if (i < nvlinks.size() && j < nvlinks[i].size() && nvlinks[i][j] > 0) {
    return "NV" + std::to_string(nvlinks[i][j]);
  }
  if (i < pcie.size() && j < pcie[i].size()) return PcieLevelName(pcie[i][j]);
  return "?";
}

}  // namespace gpuman::model
