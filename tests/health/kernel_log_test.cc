#include "health/kernel_log.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"

namespace gpuman::health {
namespace {

TEST(ParseXidLineTest, DriverLineWithPidAndName) {
  auto ev = ParseXidLine("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->xid, 79);
  EXPECT_EQ(ev->pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(ev->source, "kernel_log");
  EXPECT_NE(ev->text.find("fallen off the bus"), std::string::npos);
}

TEST(ParseXidLineTest, DmesgPrefixAndOldFormat) {
  auto ev = ParseXidLine("[ 1234.567890] NVRM: Xid (PCI:0001:07:00): 48, An uncorrectable double bit error");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->xid, 48);
  EXPECT_EQ(ev->pci_bus_id, "00000001:07:00.0");
}

TEST(ParseXidLineTest, IgnoresOtherLines) {
  EXPECT_FALSE(ParseXidLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15"));
  EXPECT_FALSE(ParseXidLine("usb 1-1: new high-speed USB device"));
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00): not-a-number"));
  EXPECT_FALSE(ParseXidLine("NVRM: Xid (PCI:0000:3b:00) 79 no colon"));
  EXPECT_FALSE(ParseXidLine(""));
}

TEST(ParseXidLineTest, UnparseableAddressKeepsTheXidWithoutAGpu) {
  auto ev = ParseXidLine("NVRM: Xid (PCI:zz:3b:00): 79, x");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->xid, 79);
  EXPECT_FALSE(ev->pci_bus_id);
}

TEST(ParseKernelLogTextLineTest, DmesgSecondsSinceBootOrNow) {
  constexpr int64_t kBoot = 1000000, kNow = 5000000;
  auto ev = ParseKernelLogTextLine("[   12.500000] NVRM: Xid (PCI:0000:3b:00): 79, x", kBoot, kNow);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->at_unix_ms, kBoot + 12500);
  // Out of int64_t's range as milliseconds, not a number, negative: the time it was read.
  for (const char* stamp : {"[1e300]", "[nan]", "[inf]", "[-5]", "[]"}) {
    ev = ParseKernelLogTextLine(std::string(stamp) + " NVRM: Xid (PCI:0000:3b:00): 79, x", kBoot, kNow);
    ASSERT_TRUE(ev) << stamp;
    EXPECT_EQ(ev->at_unix_ms, kNow) << stamp;
  }
}

TEST(ParseKmsgRecordTest, MicrosecondsSinceBoot) {
  auto ev = ParseKmsgRecord("4,12,7000000,-;NVRM: Xid (PCI:0000:3b:00): 48, DBE\n SUBSYSTEM=pci\n", 1000, 9);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->xid, 48);
  EXPECT_EQ(ev->at_unix_ms, 1000 + 7000);
  EXPECT_EQ(ev->text, "NVRM: Xid (PCI:0000:3b:00): 48, DBE");
  ev = ParseKmsgRecord("4,12,-1,-;NVRM: Xid (PCI:0000:3b:00): 48, DBE", 1000, 9);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->at_unix_ms, 9);
  EXPECT_FALSE(ParseKmsgRecord("no semicolon NVRM: Xid (PCI:0000:3b:00): 48", 1000, 9));
}

TEST(NormalizeBusIdTest, Forms) {
  EXPECT_EQ(NormalizeBusId("0000:3b:00"), "00000000:3B:00.0");
  EXPECT_EQ(NormalizeBusId("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(NormalizeBusId("00000000:3B:00.0"), "00000000:3B:00.0");
  EXPECT_FALSE(NormalizeBusId("3b:00.0"));
  EXPECT_FALSE(NormalizeBusId("0000:3b:00:1"));
}

TEST(KernelLogReaderTest, TextFileReadsOnlyWhatIsAppended) {
  testing::TempDir dir;
  std::string path = dir.Join("dmesg.txt");
  {
    std::ofstream out(path);
    out << "[   10.000000] NVRM: Xid (PCI:0000:07:00): 79, pid=1, GPU has fallen off the bus.\n"
        << "[   11.000000] eth0: link up\n";
  }
  auto reader = KernelLogReader::Open(path, /*boot_unix_ms=*/1000000);
  ASSERT_TRUE(reader) << reader.error().message;
  auto first = (*reader)->Read(/*now=*/5000000);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].xid, 79);
  EXPECT_EQ((*first)[0].at_unix_ms, 1000000 + 10000);  // boot + 10 s

  auto none = (*reader)->Read(5000000);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());

  {
    std::ofstream out(path, std::ios::app);
    out << "NVRM: Xid (PCI:0000:08:00): 119, GSP timeout\nNVRM: Xid (PCI:0000:08:00): 12";  // unfinished line
  }
  auto more = (*reader)->Read(6000000);
  ASSERT_TRUE(more);
  ASSERT_EQ(more->size(), 1u);
  EXPECT_EQ((*more)[0].xid, 119);
  EXPECT_EQ((*more)[0].at_unix_ms, 6000000);  // no timestamp: now
  {
    std::ofstream out(path, std::ios::app);
    out << "0, finished\n";
  }
  auto rest = (*reader)->Read(7000000);
  ASSERT_TRUE(rest);
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].xid, 120);
}

TEST(KernelLogReaderTest, MissingFileIsNotFound) {
  auto reader = KernelLogReader::Open("/nonexistent/kmsg", 0);
  ASSERT_FALSE(reader);
  EXPECT_EQ(reader.error().code, ErrorCode::kNotFound);
  EXPECT_NE(reader.error().message.find("/nonexistent/kmsg"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::health
