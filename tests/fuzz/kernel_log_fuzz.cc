// Fuzz target: the kernel-log Xid parser (health/kernel_log.h, health/xid.h): each input
// line as a text-log line (dmesg "[ 12.3] ..." or plain) and as a /dev/kmsg record,
// every bus id it names through NormalizeBusId, every Xid through ClassifyXid.
// Properties: never crash; an event's Xid is in 1..100000; a bus id, when present, is
// in NVML's 16-character form and normalises to itself.
#include "fuzz_util.h"
#include "health/kernel_log.h"
#include "health/xid.h"

namespace {

void CheckEvent(const gpuman::model::XidEvent& ev) {
  FUZZ_CHECK(ev.xid >= 1 && ev.xid <= 100000);
  if (ev.pci_bus_id) {
    FUZZ_CHECK(ev.pci_bus_id->size() == 16);
    auto again = gpuman::health::NormalizeBusId(*ev.pci_bus_id);
    FUZZ_CHECK(again && *again == *ev.pci_bus_id);
  }
  auto cls = gpuman::health::ClassifyXid(ev.xid);
  FUZZ_CHECK(cls.subsystem != nullptr && cls.description != nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuman;
  constexpr int64_t kBoot = 1700000000000, kNow = 1700000500000;
  std::string_view text = fuzz::AsText(data, size);
  // A kmsg record is one read(): the whole input, continuation lines included.
  if (auto ev = health::ParseKmsgRecord(text, kBoot, kNow)) CheckEvent(*ev);
  for (std::string_view line : fuzz::SplitAll(text, '\n')) {
    if (auto ev = health::ParseKernelLogTextLine(line, kBoot, kNow)) CheckEvent(*ev);
    if (auto ev = health::ParseXidLine(line)) CheckEvent(*ev);
    if (auto bus = health::NormalizeBusId(line)) FUZZ_CHECK(bus->size() == 16);
  }
  return 0;
}
