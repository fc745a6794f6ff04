// A drained GPU: taken out of scheduling by an admin or by the daemon's health watch.
// Plain value shared by the daemon, the protocol and every view that shows GPUs. No I/O.
#pragma once

#include <cstdint>
#include <string>

namespace gpuman::model {

struct GpuDrain {
  std::string uuid;
  std::string reason;       // "drained by alice", "health: Xid 79 ...", or the admin's text
  uint32_t by_uid = 0;      // who drained it (0 for root and for the daemon's health watch)
  std::string by_user;      // their name, as the daemon resolved it ("root" for health drains)
  int64_t since_unix_ms = 0;
};

}  // namespace gpuman::model
