// `gpuman history` and `gpuman report --html` against a history db written here through
// the store's public API (synthetic samples ending now), and the report rendered by
// headless Chromium: the screenshot must show the charts, not a blank or broken page.
#include <sys/stat.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "e2e/e2e_util.h"
#include "store/history_store.h"

namespace gpuman::e2e {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSecond = 1000, kMinute = 60 * kSecond;
const std::string kGpu0 = "GPU-0aaa1111-2222-3333-4444-555566667777";
const std::string kGpu1 = "GPU-1bbb1111-2222-3333-4444-555566667777";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// GPU 0: utilization a slow wave between 10 and 90 %, held by alice. GPU 1: 25 %, free for
// the first quarter hour, used outside gpuman by carol for the second (with dave for its
// last 5 minutes), then held by "<script>x</script>" (a name that must be escaped).
model::GpuSample Sample(int64_t t, int index, int64_t i) {
  model::GpuSample s;
  s.t_unix_ms = t;
  s.gpu_index = index;
  s.gpu_uuid = index == 0 ? kGpu0 : kGpu1;
  s.utilization_percent = index == 0 ? 50 + 40 * std::sin(static_cast<double>(i) / 300.0) : 25.0;
  s.memory_used_bytes = (index == 0 ? 60LL : 20LL) << 30;
  s.memory_total_bytes = 80LL << 30;
  s.temperature_c = 60;
  s.power_w = 200;
  s.user = index == 0 ? "alice" : (i < 900 ? "" : i < 1800 ? "carol" : "<script>x</script>");
  s.holder_kind = index == 0 ? model::HolderKind::kJob
                  : i < 900  ? model::HolderKind::kFree
                  : i < 1800 ? model::HolderKind::kOutside
                             : model::HolderKind::kLease;
  if (index == 1 && i >= 1500 && i < 1800) {
    s.holders = {{model::HolderKind::kOutside, "carol", 0.5}, {model::HolderKind::kOutside, "dave", 0.5}};
  }
  if (index == 0) s.job_id = 17;
  return s;
}

class ReportE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.Join("state/history.db");
    auto store = store::HistoryStore::Open(db_, false);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    // One hour of 1 s samples ending now (the CLI's window is relative to its clock).
    end_ = NowMs() / kSecond * kSecond;
    for (int64_t i = 0; i < 3600; ++i) {
      const int64_t t = end_ - (3599 - i) * kSecond;
      ASSERT_TRUE((*store)->Record({Sample(t, 0, i), Sample(t, 1, i)}).has_value());
    }
    ASSERT_TRUE((*store)->RecordJobWait({17, "alice", end_ - 50 * kMinute, end_ - 45 * kMinute, 1}));
    ASSERT_TRUE((*store)->RecordJobWait({18, "<script>x</script>", end_ - 40 * kMinute,
                                         end_ - 30 * kMinute, 1}));
  }

  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    return RunGpuman(dir_.Join("cli-state"), std::move(args), env);
  }

  testing::TempDir dir_;
  std::string db_;
  int64_t end_ = 0;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(ReportE2eTest, HistoryCsvHasOneRowPerSample) {
  auto r = Gpuman({"history", "--db", db_, "--csv", "--since", "10m", "--gpu", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "t_unix_ms,time,gpu_index,gpu_uuid,utilization_percent,memory_utilization_percent,"
            "memory_used_bytes,memory_total_bytes,temperature_c,power_w,user,job_id,holder_kind,holders");
  // 600 samples in the last ten minutes, give or take the seconds since SetUp.
  EXPECT_GE(lines.size() - 1, 560u);
  EXPECT_LE(lines.size() - 1, 601u);
  for (size_t i = 1; i < lines.size(); ++i) {
    ASSERT_THAT(lines[i], HasSubstr("," + kGpu1 + ",25,,21474836480,85899345920,60,200,"));
  }
  // The user name is a CSV field as is (it has no comma or quote).
  EXPECT_THAT(lines.back(), HasSubstr(",<script>x</script>,"));

  // The same GPU by UUID prefix.
  auto by_uuid = Gpuman({"history", "--db", db_, "--csv", "--since", "10m", "--gpu", "GPU-1bbb"});
  ASSERT_EQ(by_uuid.exit_code, 0) << by_uuid.err;
  // "--since 10m" is relative to each command's own now: a second may pass in between.
  const auto n = static_cast<int64_t>(Lines(by_uuid.out).size());
  EXPECT_LE(std::abs(n - static_cast<int64_t>(lines.size())), 1) << n << " vs " << lines.size();
}

TEST_F(ReportE2eTest, HistoryJsonWithSteps) {
  auto r = Gpuman({"history", "--db", db_, "--json", "--since", "5m", "--step", "1m"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["step_ms"], kMinute);
  ASSERT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][0]["uuid"], kGpu0);
  // 4 to 6 minutes of two GPUs: 5 or 6, or 4 when the command's clock has passed into a
  // new minute since SetUp's last sample (the window then starts just past a minute, and
  // the new minute has no samples yet; seen once in CI on a loaded machine).
  ASSERT_GE(doc["samples"].size(), 8u);
  ASSERT_LE(doc["samples"].size(), 14u);
  for (const auto& s : doc["samples"]) {
    EXPECT_EQ(s["t_unix_ms"].get<int64_t>() % kMinute, 0);
    if (s["gpu_index"] == 1) {
      EXPECT_EQ(s["utilization_percent"], 25.0);
      EXPECT_EQ(s["user"], "<script>x</script>");
      EXPECT_TRUE(s["job_id"].is_null());
    } else {
      EXPECT_EQ(s["user"], "alice");
      EXPECT_EQ(s["job_id"], 17);
      EXPECT_GE(s["utilization_percent"].get<double>(), 10.0);
      EXPECT_LE(s["utilization_percent"].get<double>(), 90.0);
    }
  }
}

TEST_F(ReportE2eTest, HistoryTextAndDbLookup) {
  // No --db: found in the per-user daemon's state dir.
  const std::string xdg = dir_.Join("xdg");
  std::filesystem::create_directories(xdg + "/gpuman/daemon");
  std::filesystem::copy_file(db_, xdg + "/gpuman/daemon/history.db");
  for (const char* suffix : {"-wal", "-shm"}) {
    if (std::filesystem::exists(db_ + suffix)) {
      std::filesystem::copy_file(db_ + suffix, xdg + "/gpuman/daemon/history.db" + suffix);
    }
  }
  auto r = Gpuman({"history"}, {{"XDG_STATE_HOME", xdg}, {"COLUMNS", "100"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU 0  GPU-0aaa111"));
  EXPECT_THAT(r.out, HasSubstr("GPU 1  GPU-1bbb111"));
  EXPECT_THAT(r.out, HasSubstr("util avg 25% max 25%"));
  EXPECT_THAT(r.out, HasSubstr("held: alice 100%"));
  EXPECT_THAT(r.out, HasSubstr(" <script>x</script> 50%"));
  EXPECT_THAT(r.out, HasSubstr(" (free) 25%"));
  // carol: 10 minutes alone and half of 5 with dave, outside gpuman; so is dave.
  EXPECT_THAT(r.out, HasSubstr(" carol (outside gpuman) 21%"));
  EXPECT_THAT(r.out, HasSubstr(" dave (outside gpuman) 4%"));

  // $GPUMAN_HISTORY_DB beats the lookup.
  auto env = Gpuman({"history", "--csv", "--since", "1m"}, {{"GPUMAN_HISTORY_DB", db_}});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_GE(Lines(env.out).size(), 100u);

  // Unknown GPU: a usage error naming it.
  auto unknown = Gpuman({"history", "--db", db_, "--gpu", "7"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown GPU index 7"));
}

TEST_F(ReportE2eTest, NoHistoryIsAClearError) {
  auto r = Gpuman({"history", "--db", dir_.Join("nothing/history.db")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no history yet: the gpuman daemon records it; start it with `gpuman daemon`"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("nothing")));  // never created

  auto report = Gpuman({"report", "--html", dir_.Join("r.html"), "--db", dir_.Join("none.db")});
  EXPECT_EQ(report.exit_code, 1);
  EXPECT_THAT(report.err, HasSubstr("no history yet"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("r.html")));

  auto bad = Gpuman({"history", "--db", db_, "--since", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--since"));
}

// ---- A small PNG reader (8-bit RGB or RGBA, non-interlaced: what Chromium writes).

struct Image {
  uint32_t width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // rows of width * channels bytes
};

uint32_t BigEndian(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(s[at + 3])};
}

std::optional<Image> DecodePng(const std::string& file, std::string* why) {
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    *why = "not a PNG";
    return std::nullopt;
  }
  Image img;
  std::string idat;
  int depth = 0, color = 0, interlace = 0;
  for (size_t at = 8; at + 8 <= file.size();) {
    const uint32_t length = BigEndian(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (at + 12 + length > file.size()) break;
    const std::string data = file.substr(at + 8, length);
    if (type == "IHDR") {
      img.width = BigEndian(data, 0);
      img.height = BigEndian(data, 4);
      depth = static_cast<uint8_t>(data[8]);
      color = static_cast<uint8_t>(data[9]);
      interlace = static_cast<uint8_t>(data[12]);
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + length;
  }
  if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
    *why = "unsupported PNG format (depth " + std::to_string(depth) + ", colour type " +
           std::to_string(color) + ")";
    return std::nullopt;
  }
  img.channels = color == 6 ? 4 : 3;
  const size_t stride = size_t{img.width} * img.channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      raw_size != raw.size()) {
    *why = "cannot inflate the image data";
    return std::nullopt;
  }
  img.pixels.assign(stride * img.height, 0);
  const int bpp = img.channels;
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &img.pixels[y * stride];
    const uint8_t* up = y ? &img.pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? out[x - bpp] : 0;
      const int b = up ? up[x] : 0;
      const int c = (up && x >= static_cast<size_t>(bpp)) ? up[x - bpp] : 0;
      int predictor = 0;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default:
          *why = "bad filter type " + std::to_string(filter);
          return std::nullopt;
      }
      out[x] = static_cast<uint8_t>(in[x] + predictor);
    }
  }
  return img;
}

int HexByte(std::string_view hex, size_t at) { return std::stoi(std::string(hex.substr(at, 2)), nullptr, 16); }

TEST_F(ReportE2eTest, ReportRendersInHeadlessChromium) {
  const std::string html = dir_.Join("out/report.html");
  std::filesystem::create_directories(dir_.Join("out"));
  auto r = Gpuman({"report", "--html", html, "--since", "1h", "--db", db_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = Slurp(html);
  EXPECT_THAT(page, HasSubstr("<svg"));
  EXPECT_THAT(page, HasSubstr("&lt;script&gt;x&lt;/script&gt;"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("<script>")));
  EXPECT_THAT(page, HasSubstr(kGpu0));
  EXPECT_THAT(page, HasSubstr("2 jobs started"));
  EXPECT_THAT(page, HasSubstr("GPU-hours in total"));
  // GPU-hours: carol 12.5 min and dave 2.5 min outside gpuman, 15 min free, of 2 h.
  EXPECT_THAT(page, HasSubstr(">carol (outside gpuman)</text>"));
  EXPECT_THAT(page, HasSubstr("0.21 h (10.4 %)"));
  EXPECT_THAT(page, HasSubstr(">dave (outside gpuman)</text>"));
  EXPECT_THAT(page, HasSubstr("0.04 h (2.1 %)"));
  EXPECT_THAT(page, HasSubstr(">(free)</text>"));
  EXPECT_THAT(page, HasSubstr("0.25 h (12.5 %)"));

  std::string chromium;
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(candidate, X_OK) == 0) {
      chromium = candidate;
      break;
    }
  }
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";

  const std::string shot = dir_.Join("out/shot.png");
  const std::string home = dir_.Join("chromium-home");
  std::filesystem::create_directories(home);
  auto run = testing::Run({"/usr/bin/timeout", "120", chromium, "--headless", "--no-sandbox",
                           "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2000",
                           "--screenshot=" + shot, "file://" + html},
                          {{"HOME", home}, {"XDG_CONFIG_HOME", home + "/.config"},
                           {"XDG_CACHE_HOME", home + "/.cache"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(std::filesystem::exists(shot)) << run.err;

  std::string why;
  auto img = DecodePng(Slurp(shot), &why);
  ASSERT_TRUE(img.has_value()) << why;
  EXPECT_EQ(img->width, 1280u);
  EXPECT_EQ(img->height, 2000u);

  // Not blank: a fair share of the page is not background (white), and the series colours
  // of the utilization and memory lines appear.
  auto near = [&](const uint8_t* p, std::string_view hex) {
    return std::abs(p[0] - HexByte(hex, 1)) <= 24 && std::abs(p[1] - HexByte(hex, 3)) <= 24 &&
           std::abs(p[2] - HexByte(hex, 5)) <= 24;
  };
  size_t inked = 0, util = 0, mem = 0;
  const size_t count = size_t{img->width} * img->height;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = &img->pixels[i * img->channels];
    if (p[0] < 245 || p[1] < 245 || p[2] < 245) ++inked;
    if (near(p, "#1f77b4")) ++util;
    if (near(p, "#ff7f0e")) ++mem;
  }
  EXPECT_GT(inked, count / 50) << "the page looks blank";
  EXPECT_LT(inked, count * 9 / 10) << "the page is one colour";
  EXPECT_GT(util, 500u) << "no utilization line";
  EXPECT_GT(mem, 500u) << "no memory line";
}

}  // namespace
}  // namespace gpuman::e2e
