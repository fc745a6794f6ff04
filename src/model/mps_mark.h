// How `status`, `top` and `leases` mark an MPS lease (docs/share.md "MPS"). No I/O.
#pragma once

#include <optional>
#include <string>

#include "model/lease.h"

namespace gpuman::model {

/// "MPS", or with --gpu-share "MPS 25%" (the CUDA_MPS_ACTIVE_THREAD_PERCENTAGE of its
/// processes); "" for a lease without MPS.
inline std::string MpsMark(bool mps, std::optional<int> gpu_share_percent) {
  if (!mps) return "";
  return gpu_share_percent ? "MPS " + std::to_string(*gpu_share_percent) + "%" : "MPS";
}
inline std::string MpsMark(const Lease& lease) { return MpsMark(lease.mps, lease.gpu_share_percent); }

}  // namespace gpuman::model
