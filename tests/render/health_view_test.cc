#include "render/health_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "render/format.h"

namespace gpuman::render {
namespace {

model::Finding Xid79() {
  model::Finding f;
  f.code = "xid";
  f.xid = 79;
  f.severity = model::Severity::kFatal;
  f.gpu_index = 3;
  f.gpu_uuid = "GPU-3";
  f.message = "Xid 79: GPU has fallen off the bus";
  f.count = 2;
  f.last_seen_unix_ms = 1796025600000;
  f.source = "kernel_log";
  return f;
}

TEST(RenderHealthTextTest, HealthySaysSoWithTheSources) {
  model::HealthReport r;
  r.xid_sources = {"nvml events", "kernel log /dev/kmsg"};
  std::string text = RenderHealthText(r, 8, TerminalInfo{});
  EXPECT_EQ(text, "healthy: all 8 GPUs passed (Xids from: nvml events, kernel log /dev/kmsg)\n");
}

TEST(RenderHealthTextTest, FindingsWrapWithinTheWidthAndLoseNothing) {
  model::HealthReport r;
  r.findings = {Xid79()};
  r.quarantined = {"GPU-3"};
  r.notes = {"kernel log /dev/kmsg: permission denied"};
  std::string text = RenderHealthText(r, 8, TerminalInfo{80, false});
  EXPECT_NE(text.find("UNHEALTHY: 1 fatal, 0 warnings on 8 GPUs"), std::string::npos) << text;
  EXPECT_NE(text.find("xid 79"), std::string::npos) << text;
  EXPECT_NE(text.find("(x2)"), std::string::npos) << text;
  EXPECT_NE(text.find("2026-11-30T"), std::string::npos) << text;  // the last-seen time is not cut off
  EXPECT_NE(text.find("drained by the health watch: GPU-3"), std::string::npos) << text;
  EXPECT_NE(text.find("note: kernel log /dev/kmsg: permission denied"), std::string::npos) << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(DisplayWidth(line), 80) << line;
}

TEST(RenderHealthTextTest, DrainsAreNotesThatSayWhoWhyAndSince) {
  model::HealthReport r;
  r.findings = {Xid79()};
  r.quarantined = {"GPU-3"};
  std::vector<HealthDrain> drains = {
      {{"GPU-3", "health: Xid 79", 0, "root", 1796025600000}, 3},
      {{"GPU-1", "fan noise", 1000, "alice", 1796025600000}, std::nullopt},
  };
  std::string text = RenderHealthText(r, 8, TerminalInfo{80, false}, drains);
  EXPECT_NE(text.find("\nnote: GPU 3 is drained: health: Xid 79 (by root since 2026-11-30T08:00:00Z)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nnote: GPU GPU-1 is drained: fan noise (by alice since 2026-11-30T08:00:00Z)\n"),
            std::string::npos)
      << text;
  // The note covers the quarantined GPU: no second line about it.
  EXPECT_EQ(text.find("drained by the health watch"), std::string::npos) << text;
  // A drain alone is no finding: the headline stays healthy.
  std::string healthy = RenderHealthText(model::HealthReport{}, 8, TerminalInfo{80, false}, {drains[1]});
  EXPECT_EQ(healthy.rfind("healthy: all 8 GPUs passed", 0), 0u) << healthy;
  EXPECT_NE(healthy.find("note: GPU GPU-1 is drained: fan noise"), std::string::npos) << healthy;
}

TEST(RenderHealthTextTest, WarningsOnlyHeadline) {
  model::HealthReport r;
  model::Finding f;
  f.code = "throttle_thermal";
  f.gpu_index = 1;
  f.message = "clocks throttled: hardware thermal slowdown";
  r.findings = {f};
  std::string text = RenderHealthText(r, 2, TerminalInfo{});
  EXPECT_EQ(text.rfind("warnings: 0 fatal, 1 warning on 2 GPUs", 0), 0u) << text;
}

}  // namespace
}  // namespace gpuman::render
