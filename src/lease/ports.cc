#include "lease/ports.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <set>
#include <utility>

#include "base/unique_fd.h"

namespace gpuman::lease {

std::optional<int> ChooseMasterPort(const policy::PortRange& range, const std::vector<model::Lease>& live,
                                    const std::function<bool(int port)>& is_free) {
  std::set<int> held;
  for (const auto& l : live) {
    if (l.master_port) held.insert(*l.master_port);
  }
  for (int port = range.first; port <= range.last; ++port) {
    if (!held.count(port) && is_free(port)) return port;
  }
  return std::nullopt;
}

bool TcpPortIsFree(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return true;  // no IPv4 here: nothing can hold it either
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  return bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

store::ChoosePort MasterPortChooser(const std::optional<policy::PortRange>& range, std::vector<model::Lease> foreign) {
  if (!range) return {};
  return [range = *range, foreign = std::move(foreign)](const std::vector<model::Lease>& live) {
    std::vector<model::Lease> all = live;
    all.insert(all.end(), foreign.begin(), foreign.end());
    return ChooseMasterPort(range, all, TcpPortIsFree);
  };
}

}  // namespace gpuman::lease
