#include "render/report_html.h"

#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuman::render {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1714564800000;  // 2024-05-01T12:00:00Z

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

ReportData Sample() {
  ReportData d;
  d.generated_unix_ms = kT0 + 3600'000;
  d.since_unix_ms = kT0;
  d.until_unix_ms = kT0 + 3600'000;
  d.step_ms = 60'000;
  d.host = "node<7>";
  for (int m = 0; m < 60; ++m) {
    for (int g = 0; g < 2; ++g) {
      model::GpuSample s;
      s.t_unix_ms = kT0 + m * 60'000;
      s.gpu_index = g;
      s.gpu_uuid = "GPU-" + std::to_string(g) + "0000000-aaaa";
      s.utilization_percent = g == 0 ? 87.5 : 0;
      s.memory_used_bytes = 20LL << 30;
      s.memory_total_bytes = 80LL << 30;
      s.temperature_c = 70;
      s.power_w = 300;
      s.user = g == 0 ? "<script>alert(1)</script>" : "";
      s.holder_kind = g == 0 ? model::HolderKind::kJob : model::HolderKind::kFree;
      if (g == 1 && m < 15) {  // GPU 1: dave outside gpuman for a quarter of the hour
        s.user = "dave";
        s.holder_kind = model::HolderKind::kOutside;
      }
      d.samples.push_back(s);
    }
  }
  d.gpu_hours_by_user = {{{"<script>alert(1)</script>"}, 1.0}, {{}, 0.75}, {{"bob"}, 0.5}, {{"dave", true}, 0.25}};
  d.waits = {{1, "bob", kT0, kT0 + 30'000, 1}, {2, "eve&co", kT0, kT0 + 7200'000, 2}};
  return d;
}

TEST(ReportHtmlTest, IsAWellFormedSelfContainedPage) {
  std::string html = RenderReportHtml(Sample());
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_EQ(Count(html, "<svg"), 4);  // two GPU charts, GPU-hours, waits
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_EQ(Count(html, "<table"), Count(html, "</table>"));
  EXPECT_EQ(Count(html, "<tr>"), Count(html, "</tr>"));
  EXPECT_EQ(Count(html, "<div"), Count(html, "</div>"));
  EXPECT_THAT(html, HasSubstr("</html>"));
  // Nothing is fetched and nothing runs.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http:")));
  EXPECT_THAT(html, Not(HasSubstr("https:")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
}

TEST(ReportHtmlTest, EscapesUserControlledStrings) {
  std::string html = RenderReportHtml(Sample());
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("GPU usage report: node&lt;7&gt;"));
  EXPECT_THAT(html, HasSubstr("eve&amp;co"));
  EXPECT_THAT(html, Not(HasSubstr("node<7>")));
  EXPECT_EQ(HtmlEscape("a&b<c>\"d'"), "a&amp;b&lt;c&gt;&quot;d&#39;");
}

TEST(ReportHtmlTest, ShowsTheNumbers) {
  std::string html = RenderReportHtml(Sample());
  EXPECT_THAT(html, HasSubstr("2024-05-01T12:00:00Z to 2024-05-01T13:00:00Z"));
  EXPECT_THAT(html, HasSubstr("Generated 2024-05-01T13:00:00Z"));
  EXPECT_THAT(html, HasSubstr("<td>87.5 %</td>"));  // util avg of GPU 0
  EXPECT_THAT(html, HasSubstr("<td>80 GiB</td>"));
  EXPECT_THAT(html, HasSubstr("2.50 GPU-hours in total"));
  EXPECT_THAT(html, HasSubstr("1.00 h (40.0 %)"));
  EXPECT_THAT(html, HasSubstr(">(free)</text>"));
  // Users outside gpuman are named as such, in their own colour, apart from gpuman users.
  EXPECT_THAT(html, HasSubstr(">dave (outside gpuman)</text>"));
  EXPECT_THAT(html, HasSubstr("fill=\"" + std::string(kOutsideColor) + "\""));
  EXPECT_THAT(html, HasSubstr("0.25 h (10.0 %)"));
  // Summary: GPU 1 was used outside gpuman for 25 % of the time, held through gpuman never.
  EXPECT_THAT(html, HasSubstr("<td>0.0 %</td><td>25.0 %</td></tr>"));
  EXPECT_THAT(html, HasSubstr("<td>100.0 %</td><td>0.0 %</td></tr>"));
  EXPECT_THAT(html, HasSubstr("2 jobs started"));
  EXPECT_THAT(html, HasSubstr("longest 2h"));
  EXPECT_THAT(html, HasSubstr(std::string(kUtilizationColor)));
  EXPECT_THAT(html, HasSubstr(std::string(kMemoryColor)));
  EXPECT_THAT(html, HasSubstr(std::string(kGpuHoursColor)));
  EXPECT_THAT(html, HasSubstr(std::string(kWaitColor)));
  // GPU 0 at 87.5 %: its line sits at 12.5 % of the plot height below the top (12 + 20).
  EXPECT_THAT(html, HasSubstr("M44.0,32.0 L52.4,32.0"));
}

TEST(ReportHtmlTest, BreaksLinesAcrossGaps) {
  ReportData d = Sample();
  std::erase_if(d.samples, [](const model::GpuSample& s) {
    return s.gpu_index != 0 || (s.t_unix_ms >= kT0 + 10 * 60'000 && s.t_unix_ms < kT0 + 20 * 60'000);
  });
  std::string html = RenderReportHtml(d);
  std::smatch m;
  std::regex line_path("<path d=\"([^\"]*)\" fill=\"none\" stroke=\"#1f77b4\"");
  ASSERT_TRUE(std::regex_search(html, m, line_path));
  EXPECT_EQ(Count(m[1].str(), "M"), 2);
}

TEST(ReportHtmlTest, EmptyDataSaysSo) {
  ReportData d;
  d.generated_unix_ms = kT0;
  d.since_unix_ms = kT0 - 3600'000;
  d.until_unix_ms = kT0;
  std::string html = RenderReportHtml(d);
  EXPECT_THAT(html, HasSubstr("No samples in this range."));
  EXPECT_THAT(html, HasSubstr("No GPU time in this range."));
  EXPECT_THAT(html, HasSubstr("No queued job started in this range."));
  EXPECT_EQ(Count(html, "<svg"), 0);
  EXPECT_THAT(html, HasSubstr("</html>"));
}

}  // namespace
}  // namespace gpuman::render
