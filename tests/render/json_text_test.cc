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

std::vector<json> EveryKindOfValue() {
  return {
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
}

// Drives a JsonWriter through a document, value by value, as a caller with its own data
// would.
void Replay(JsonWriter& w, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      w.BeginObject();
      for (const auto& [key, member] : v.items()) {
        w.Key(key);
        Replay(w, member);
      }
      w.EndObject();
      return;
    case json::value_t::array:
      w.BeginArray();
      for (const json& element : v) Replay(w, element);
      w.EndArray();
      return;
    case json::value_t::string: w.String(v.get_ref<const std::string&>()); return;
    case json::value_t::boolean: w.Bool(v.get<bool>()); return;
    case json::value_t::number_integer: w.Int(v.get<int64_t>()); return;
    case json::value_t::number_unsigned: w.UInt(v.get<uint64_t>()); return;
    case json::value_t::number_float: w.Double(v.get<double>()); return;
    default: w.Null(); return;
  }
}

std::string Written(const json& doc, JsonWriter::Style style) {
  std::string out;
  JsonWriter w(out, style);
  Replay(w, doc);
  return out;
}

TEST(PrettyJsonTest, SameTextAsDumpForEveryKindOfValue) {
  for (const json& doc : EveryKindOfValue()) EXPECT_EQ(PrettyJson(doc), doc.dump(2)) << doc.dump();
}

TEST(JsonWriterTest, PrettyIsDumpTwoAndCompactIsDumpForEveryKindOfValue) {
  for (const json& doc : EveryKindOfValue()) {
    EXPECT_EQ(Written(doc, JsonWriter::Style::kPretty), doc.dump(2)) << doc.dump();
    EXPECT_EQ(Written(doc, JsonWriter::Style::kCompact), doc.dump()) << doc.dump();
  }
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharactersInBothStyles) {
  const json doc{{"command", "a\xff" "b"}};
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(Written(doc, JsonWriter::Style::kCompact), "{\"command\":\"a" + r + "b\"}");
  EXPECT_EQ(Written(doc, JsonWriter::Style::kPretty), "{\n  \"command\": \"a" + r + "b\"\n}");
}

// status --json is written without a document in between; it is the text the document
// would have printed, in both styles.
TEST(JsonWriterTest, StatusTextIsTheDocumentsDump) {
  StatusOptions opts;
  opts.simulated = true;
  opts.scenario = "busy-node";
  opts.leases = std::vector<model::Lease>{};
  const json doc = StatusToJson(testing_fixtures::FourGpuMachine(), opts);
  EXPECT_EQ(StatusJsonText(testing_fixtures::FourGpuMachine(), opts, JsonWriter::Style::kPretty), doc.dump(2));
  EXPECT_EQ(StatusJsonText(testing_fixtures::FourGpuMachine(), opts, JsonWriter::Style::kCompact), doc.dump());
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
