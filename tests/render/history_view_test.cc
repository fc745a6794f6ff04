#include "render/history_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuman::render {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1714564800000;  // 2024-05-01T12:00:00Z

model::GpuSample Sample(int64_t t, int index, std::optional<double> util, std::string user = "") {
  model::GpuSample s;
  s.t_unix_ms = t;
  s.gpu_index = index;
  s.gpu_uuid = "GPU-" + std::to_string(index) + "a2b3c4d-0000-1111-2222-333344445555";
  s.utilization_percent = util;
  s.memory_utilization_percent = 12.5;
  s.memory_used_bytes = 40LL << 30;
  s.memory_total_bytes = 80LL << 30;
  s.temperature_c = 61.25;
  s.power_w = 250.1234;
  s.holder_kind = user.empty() ? model::HolderKind::kFree : model::HolderKind::kLease;
  s.user = std::move(user);
  return s;
}

TEST(HistoryViewTest, JsonFollowsTheDocumentedSchema) {
  HistoryView view;
  view.since_unix_ms = kT0;
  view.samples = {Sample(kT0, 0, 33.333333, "alice"), Sample(kT0, 1, std::nullopt)};
  view.samples[0].job_id = 42;
  view.samples[0].holder_kind = model::HolderKind::kJob;
  view.samples.push_back(Sample(kT0 + 60'000, 0, 10, "bob"));
  view.samples[2].holder_kind = model::HolderKind::kOutside;
  view.samples[2].holders = {{model::HolderKind::kOutside, "bob", 2.0 / 3},
                             {model::HolderKind::kOutside, "carol", 1.0 / 3}};
  auto doc = HistoryToJson(view);
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["since_unix_ms"], kT0);
  EXPECT_TRUE(doc["until_unix_ms"].is_null());
  EXPECT_TRUE(doc["step_ms"].is_null());
  ASSERT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][1]["index"], 1);
  ASSERT_EQ(doc["samples"].size(), 3u);
  const auto& s = doc["samples"][0];
  EXPECT_EQ(s["t_unix_ms"], kT0);
  EXPECT_EQ(s["time"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(s["gpu_index"], 0);
  EXPECT_EQ(s["utilization_percent"], 33.33);
  EXPECT_EQ(s["memory_used_bytes"], 40LL << 30);
  EXPECT_EQ(s["power_w"], 250.123);
  EXPECT_EQ(s["user"], "alice");
  EXPECT_EQ(s["job_id"], 42);
  EXPECT_EQ(s["holder_kind"], "job");
  EXPECT_EQ(s["holders"], nlohmann::json::parse(R"([{"user": "alice", "kind": "job", "share": 1.0}])"));
  EXPECT_TRUE(doc["samples"][1]["utilization_percent"].is_null());
  EXPECT_TRUE(doc["samples"][1]["job_id"].is_null());
  EXPECT_EQ(doc["samples"][1]["holder_kind"], "free");
  EXPECT_EQ(doc["samples"][1]["holders"][0]["kind"], "free");
  const auto& outside = doc["samples"][2];
  EXPECT_EQ(outside["user"], "bob");
  EXPECT_EQ(outside["holder_kind"], "outside");
  EXPECT_EQ(outside["holders"], nlohmann::json::parse(R"([{"user": "bob", "kind": "outside", "share": 0.6667},
                                                          {"user": "carol", "kind": "outside", "share": 0.3333}])"));
}

TEST(HistoryViewTest, CsvHasAHeaderAndQuotesOddFields) {
  auto shared = Sample(kT0, 2, 5, "bob");
  shared.holder_kind = model::HolderKind::kOutside;
  shared.holders = {{model::HolderKind::kOutside, "bob", 0.5}, {model::HolderKind::kOutside, "carol", 0.5}};
  auto csv = HistoryToCsv({Sample(kT0, 0, 50, "o'brien, \"jr\""), Sample(kT0, 1, std::nullopt), shared});
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = csv.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(csv.substr(at, nl - at));
  }
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0],
            "t_unix_ms,time,gpu_index,gpu_uuid,utilization_percent,memory_utilization_percent,"
            "memory_used_bytes,memory_total_bytes,temperature_c,power_w,user,job_id,holder_kind,holders");
  EXPECT_EQ(lines[1], "1714564800000,2024-05-01T12:00:00Z,0,GPU-0a2b3c4d-0000-1111-2222-333344445555,"
                      "50,12.5,42949672960,85899345920,61.25,250.123,\"o'brien, \"\"jr\"\"\",,lease,");
  EXPECT_EQ(lines[2], "1714564800000,2024-05-01T12:00:00Z,1,GPU-1a2b3c4d-0000-1111-2222-333344445555,"
                      ",12.5,42949672960,85899345920,61.25,250.123,,,free,");
  EXPECT_EQ(lines[3], "1714564800000,2024-05-01T12:00:00Z,2,GPU-2a2b3c4d-0000-1111-2222-333344445555,"
                      "5,12.5,42949672960,85899345920,61.25,250.123,bob,,outside,"
                      "outside:bob:0.5;outside:carol:0.5");
}

TEST(HistoryViewTest, SparklineMapsValuesToBlocks) {
  std::vector<SeriesPoint> points = {{0, 0.0}, {1000, 100.0}, {2000, std::nullopt}, {3000, 50.0}};
  EXPECT_EQ(Sparkline(points, 0, 3999, 4, 100), "\u2581\u2588 \u2585");
  EXPECT_EQ(Sparkline({}, 0, 1000, 3, 100), "   ");
  EXPECT_EQ(Sparkline(points, 0, 1000, 0, 100), "");
}

TEST(HistoryViewTest, TextSummarisesEachGpu) {
  HistoryView view;
  for (int i = 0; i < 60; ++i) {
    view.samples.push_back(Sample(kT0 + i * 1000, 0, i < 30 ? 0 : 100, i < 45 ? "alice" : ""));
    // GPU 1: carol outside gpuman for 30 s, with alice (outside too) for 12 of them.
    auto s = Sample(kT0 + i * 1000, 1, 10, i < 30 ? "carol" : "");
    if (i < 30) s.holder_kind = model::HolderKind::kOutside;
    if (i < 12) s.holders = {{model::HolderKind::kOutside, "carol", 0.5}, {model::HolderKind::kOutside, "alice", 0.5}};
    view.samples.push_back(s);
  }
  std::string text = RenderHistoryText(view, TerminalInfo{100, false});
  EXPECT_THAT(text, HasSubstr("History 2024-05-01T12:00:00Z .. 2024-05-01T12:00:59Z"));
  EXPECT_THAT(text, HasSubstr("GPU 0  GPU-0a2b3c4…  60 samples  util avg 50% max 100%"));
  EXPECT_THAT(text, HasSubstr("mem avg 40 GiB max 40 GiB of 80 GiB  61 C  250 W"));
  EXPECT_THAT(text, HasSubstr("held: alice 75% (free) 25%"));
  EXPECT_THAT(text, HasSubstr("held: (free) 50% carol (outside gpuman) 40% alice (outside gpuman) 10%"));
  EXPECT_THAT(text, HasSubstr("\u2581\u2581\u2588\u2588"));  // the util step from 0 to 100
  EXPECT_EQ(RenderHistoryText(HistoryView{}, TerminalInfo{}), "No samples in this window.\n");
}

}  // namespace
}  // namespace gpuman::render
