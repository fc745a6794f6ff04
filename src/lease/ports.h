// Rendezvous ports: each lease gets a MASTER_PORT of its own from the machine's range
// (`[launch] ports`, default 29500-29999), so that two `torchrun`s on one machine never
// both take 29500 (docs/python.md, "Rendezvous"). The port is chosen under the lease
// table's write lock: the lowest one that no live lease of the table (or of the table the
// authority respects) holds and that nothing on the machine has bound now.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "model/lease.h"
#include "policy/lease_rules.h"
#include "store/lease_store.h"

namespace gpuman::lease {

/// The lowest port of `range` that no lease of `live` holds and `is_free` accepts;
/// nullopt when none is.
std::optional<int> ChooseMasterPort(const policy::PortRange& range, const std::vector<model::Lease>& live,
                                    const std::function<bool(int port)>& is_free);

/// Whether a TCP listener could bind `port` on every IPv4 address now (SO_REUSEADDR, as
/// PyTorch's TCPStore sets it: a port in TIME_WAIT is free, one listened on is not).
bool TcpPortIsFree(int port);

/// The store's port chooser for an authority with `range` (nullopt: none) that also
/// respects the leases of `foreign` (the daemon: the machine table's).
store::ChoosePort MasterPortChooser(const std::optional<policy::PortRange>& range, std::vector<model::Lease> foreign);

}  // namespace gpuman::lease
