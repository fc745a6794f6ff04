// PrettyJson writes what nlohmann's dump(2) writes, byte for byte, for every kind of
// value; where dump(2) throws (invalid UTF-8) it writes U+FFFD instead.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "render/json_text.h"
#include "render/status_fixtures.h"
#include "render/status_view.h"

namespace gpuman::render {
namespace {

using json = nlohmann::ordered_json;

TEST(PrettyJsonTest, SameTextAsDumpForEveryKindOfValue) {
  const std::vector<json> docs = {
      json(nullptr),
      json(true),
      json(false),
      json(0),
      json(-1),
      json(std::numeric_limits<int64_t>::min()),
      json(std::numeric_limits<int64_t>::max()),
      json(std::numeric_limits<uint64_t>::max()),
      json(0.1),
      json(300.0),
      json(-0.0),
      json(1e20),
      json(1e-7),
      json(123456.789),
      json(std::nan("")),
      json(std::numeric_limits<double>::infinity()),
      json(""),
      json("plain"),
      json("quote \" backslash \\ slash /"),
      json("\b\f\n\r\t\x01\x1f\x7f"),
      json(std::string("nul \0 inside", 12)),
      json("UTF-8: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
      json::object(),
      json::array(),
      json{{"empty_object", json::object()}, {"empty_array", json::array()}, {"nested", {{"a", {1, 2, {{"b", nullptr}}}}}}},
      json::array({json::array(), json::object(), json::array({json::array()})}),
      json{{"k\"ey\n", "v"}, {"z", 1}, {"a", 2}},  // ordered: insertion order kept
  };
  for (const json& doc : docs) EXPECT_EQ(PrettyJson(doc), doc.dump(2)) << doc.dump();
}

TEST(PrettyJsonTest, SameTextAsDumpForStatus) {
  StatusOptions opts;
  opts.simulated = true;
  opts.scenario = "busy-node";
  const json doc = StatusToJson(testing_fixtures::FourGpuMachine(), opts);
  EXPECT_EQ(PrettyJson(doc), doc.dump(2));
}

TEST(PrettyJsonTest, InvalidUtf8BecomesReplacementCharactersWhereDumpWouldThrow) {
  const json doc{{"command", "a\xff" "b\xc3(c\xed\xa0\x80" "d\xe2\x82"}};
  EXPECT_THROW((void)doc.dump(2), json::type_error);
  const std::string text = PrettyJson(doc);
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(text, "{\n  \"command\": \"a" + r + "b" + r + "(c" + r + r + r + "d" + r + r + "\"\n}");
  EXPECT_TRUE(json::accept(text)) << text;
}

}  // namespace
}  // namespace gpuman::render
