// Every rule of shared/reference/cuda-visible-devices.md section 1, with its example,
// as a table: value -> the GPUs CUDA exposes (NVML indices, in CUDA ordinal order) and
// where the list was cut or emptied.
#include "visibility/cuda_visible_devices.h"

#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "visibility/device_order.h"
#include "visibility/fixtures.h"

namespace gpuman::visibility {
namespace {

using namespace testing_fixtures;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<int> Indices(const CudaVisibleDevices& cvd) {
  std::vector<int> out;
  for (const ResolvedDevice& d : cvd.devices) out.push_back(d.index ? d.index->value : -1);
  return out;
}

CudaVisibleDevices Parse(std::optional<std::string_view> value,
                         const std::vector<model::DeviceSnapshot>& gpus,
                         DeviceOrder order = DeviceOrder::kPciBusId) {
  return ParseCudaVisibleDevices(value, gpus, EnumerateCuda(gpus, order).order);
}

struct Case {
  const char* name;
  std::optional<std::string> value;
  int gpu_count;  // first N of FourA100()
  std::vector<int> expected;
  std::optional<int> truncated_at;
  std::optional<int> duplicate_at;
};

class CudaVisibleDevicesRuleTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaVisibleDevicesRuleTest, ExposesWhatCudaExposes) {
  const Case& c = GetParam();
  auto gpus = FourA100();
  gpus.resize(static_cast<size_t>(c.gpu_count));
  const CudaVisibleDevices cvd =
      Parse(c.value ? std::optional<std::string_view>(*c.value) : std::nullopt, gpus);
  EXPECT_THAT(Indices(cvd), ElementsAreArray(c.expected));
  EXPECT_EQ(cvd.truncated_at, c.truncated_at);
  EXPECT_EQ(cvd.duplicate_at, c.duplicate_at);
  EXPECT_EQ(cvd.is_set, c.value.has_value());
}

const std::string kU0 = kUuid0, kU1 = kUuid1, kU2 = kUuid2;

INSTANTIATE_TEST_SUITE_P(
    Reference, CudaVisibleDevicesRuleTest,
    ::testing::Values(
        // Rule 1: unset vs empty.
        Case{"unset_all_visible", std::nullopt, 4, {0, 1, 2, 3}, {}, {}},
        Case{"empty_none_visible", "", 4, {}, {}, {}},
        // Rule 2: list order is ordinal order.
        Case{"list_order", "2,1", 4, {2, 1}, {}, {}},
        // Rule 3: strtoul-like integers.
        Case{"trailing_junk", "1gpu2,2ampere", 4, {1, 2}, {}, {}},
        Case{"whitespace", " 1 , 2\t", 4, {1, 2}, {}, {}},
        Case{"plus_sign", "+3", 4, {3}, {}, {}},
        Case{"minus_zero", "-0,1", 4, {0, 1}, {}, {}},
        // Rule 4: the first invalid entry ends the list.
        Case{"negative_truncates", "0,2,-1,1", 4, {0, 2}, 2, {}},
        Case{"out_of_range", "1,5,0", 2, {1}, 1, {}},
        Case{"non_numeric_first", "abc,0", 4, {}, 0, {}},
        Case{"non_numeric_later", "0,x1", 4, {0}, 1, {}},
        Case{"minus_one_hides_all", "-1", 4, {}, 0, {}},
        Case{"empty_entry", "0,,1", 4, {0}, 1, {}},
        Case{"huge_number", "0,99999999999999999999999", 4, {0}, 1, {}},
        // Rule 5: a duplicate empties the set.
        Case{"duplicate_index", "0,1,2,1", 4, {}, {}, 3},
        Case{"duplicate_zero", "0,0", 4, {}, {}, 1},
        Case{"duplicate_after_truncation_ignored", "0,-1,0", 4, {0}, 1, {}},
        Case{"duplicate_uuid", kU0 + "," + kU0, 4, {}, {}, 1},
        Case{"duplicate_via_prefixes", "GPU-8932f93," + kU0, 4, {}, {}, 1},
        // Rule 6: UUIDs and prefixes (prefix includes "GPU-").
        Case{"full_uuids", kU2 + "," + kU0, 4, {2, 0}, {}, {}},
        Case{"unique_prefix", "GPU-3eb79704", 4, {2}, {}, {}},
        Case{"ambiguous_prefix", "GPU-8932f9", 4, {}, 0, {}},
        Case{"ambiguous_prefix_later", "GPU-3eb,GPU-8932f9,GPU-c0f", 4, {2}, 1, {}},
        Case{"unknown_prefix", "GPU-deadbeef", 4, {}, 0, {}},
        Case{"prefix_is_case_sensitive", "GPU-3EB79704", 4, {}, 0, {}},
        // Rule 7: one kind per list.
        Case{"kind_change_uuid_then_index", "GPU-3eb79704, 2", 4, {2}, 1, {}},
        Case{"kind_change_index_then_uuid", "1,GPU-3eb79704", 4, {1}, 1, {}},
        Case{"uuid_entries_not_trimmed", "GPU-3eb79704, GPU-c0ffee00", 4, {2}, 1, {}},
        Case{"leading_space_makes_integer_list", " GPU-3eb79704", 4, {}, 0, {}},
        Case{"mig_in_gpu_list", "GPU-3eb79704,MIG-GPU-c0ffee00/1/0", 4, {2}, 1, {}}),
    [](const ::testing::TestParamInfo<Case>& test_info) { return std::string(test_info.param.name); });

TEST(CudaVisibleDevicesTest, DiagnosticsSayWhatHappenedToEachEntry) {
  const auto cvd = Parse("0,2,-1,1", FourA100());
  ASSERT_EQ(cvd.entries.size(), 4u);
  EXPECT_EQ(cvd.entries[0].outcome, EntryOutcome::kVisible);
  EXPECT_EQ(cvd.entries[1].outcome, EntryOutcome::kVisible);
  EXPECT_EQ(cvd.entries[2].outcome, EntryOutcome::kInvalid);
  EXPECT_THAT(cvd.entries[2].reason, HasSubstr("negative"));
  EXPECT_EQ(cvd.entries[3].outcome, EntryOutcome::kIgnored);
  EXPECT_THAT(cvd.entries[3].reason, HasSubstr("entry 3"));
}

TEST(CudaVisibleDevicesTest, DuplicateCancelsEarlierEntries) {
  const auto cvd = Parse("0,1,2,1", FourA100());
  ASSERT_EQ(cvd.entries.size(), 4u);
  EXPECT_EQ(cvd.entries[0].outcome, EntryOutcome::kCancelled);
  EXPECT_EQ(cvd.entries[2].outcome, EntryOutcome::kCancelled);
  EXPECT_EQ(cvd.entries[3].outcome, EntryOutcome::kDuplicate);
  EXPECT_THAT(cvd.entries[3].reason, HasSubstr("entry 2"));
}

TEST(CudaVisibleDevicesTest, NotesExplainLenientReadings) {
  const auto cvd = Parse("1gpu2,+3", FourA100());
  EXPECT_THAT(cvd.entries[0].reason, HasSubstr("trailing \"gpu2\" ignored"));
  EXPECT_THAT(cvd.entries[1].reason, HasSubstr("+3 read as 3"));
}

TEST(CudaVisibleDevicesTest, ReasonsNameTheProblem) {
  struct R {
    const char* value;
    const char* reason;
  };
  for (const R& r : {R{"1,5", "out of range"}, R{"GPU-8932f9", "ambiguous UUID prefix"},
                     R{"GPU-deadbeef", "unknown UUID"}, R{"GPU-3eb79704, 2", "kind change"},
                     R{"0,GPU-3eb79704", "kind change"}, R{"zero", "not a number"},
                     R{"MIG-GPU-3eb79704/x/0", "malformed MIG"}}) {
    const auto cvd = Parse(r.value, FourA100());
    ASSERT_TRUE(cvd.truncated_at) << r.value;
    EXPECT_THAT(cvd.entries[static_cast<size_t>(*cvd.truncated_at)].reason, HasSubstr(r.reason))
        << r.value;
  }
}

// Rule 3 + section 2: integers index CUDA's enumeration order, not NVML's.
TEST(CudaVisibleDevicesTest, IntegersFollowCudaOrder) {
  EXPECT_THAT(Indices(Parse("0", Mixed(), DeviceOrder::kFastestFirst)), ElementsAre(1));
  EXPECT_THAT(Indices(Parse("0", Mixed(), DeviceOrder::kPciBusId)), ElementsAre(0));
  // UUIDs do not depend on the order.
  EXPECT_THAT(Indices(Parse(kUuid3090a, Mixed(), DeviceOrder::kFastestFirst)), ElementsAre(0));
}

// Rule 8: MIG forms; a single MIG device is visible.
TEST(CudaVisibleDevicesTest, MigDeviceUuidIsTakenUnchecked) {
  const auto cvd = Parse("MIG-4b6f8c2e-1111-5222-9333-444455556666", FourA100());
  ASSERT_EQ(cvd.devices.size(), 1u);
  EXPECT_FALSE(cvd.devices[0].index.has_value());
  EXPECT_TRUE(cvd.devices[0].is_mig);
  EXPECT_EQ(cvd.kind, EntryKind::kMigUuid);
}

TEST(CudaVisibleDevicesTest, MigGpuFormResolvesParentPrefix) {
  const auto cvd = Parse("MIG-GPU-3eb79704/13/0", FourA100());
  ASSERT_EQ(cvd.devices.size(), 1u);
  EXPECT_EQ(cvd.devices[0].index, PhysicalIndex{2});
}

TEST(CudaVisibleDevicesTest, OnlyTheFirstMigDeviceIsVisible) {
  const auto cvd = Parse("MIG-GPU-3eb79704/1/0,MIG-GPU-c0ffee00/2/0", FourA100());
  ASSERT_EQ(cvd.devices.size(), 1u);
  EXPECT_EQ(cvd.devices[0].index, PhysicalIndex{2});
  EXPECT_EQ(cvd.mig_hidden_count, 1);
  EXPECT_EQ(cvd.entries[1].outcome, EntryOutcome::kMigHidden);
}

TEST(CudaVisibleDevicesTest, MigUnknownParentEndsList) {
  const auto cvd = Parse("MIG-GPU-deadbeef/1/0", FourA100());
  EXPECT_THAT(cvd.devices, IsEmpty());
  EXPECT_EQ(cvd.truncated_at, 0);
}

TEST(CudaVisibleDevicesTest, MigDuplicateViaPrefixesEmptiesSet) {
  const auto cvd = Parse("MIG-GPU-3eb79704/1/0,MIG-GPU-3eb7/1/0", FourA100());
  EXPECT_THAT(cvd.devices, IsEmpty());
  EXPECT_EQ(cvd.duplicate_at, 1);
}

TEST(LexCudaVisibleDevicesTest, ReadsEntriesWithoutGpus) {
  const auto lexed = LexCudaVisibleDevices("0,+2,-1,GPU-x");
  ASSERT_EQ(lexed.size(), 4u);
  EXPECT_EQ(lexed[1].number, 2u);
  EXPECT_THAT(lexed[2].lexical_error, HasSubstr("negative"));
  EXPECT_THAT(lexed[3].lexical_error, HasSubstr("kind change"));
  EXPECT_TRUE(LexCudaVisibleDevices("").empty());
}

TEST(FormatCudaVisibleDevicesTest, JoinsWithoutSpaces) {
  EXPECT_EQ(FormatCudaVisibleDevices({kUuid0, kUuid2}), std::string(kUuid0) + "," + kUuid2);
  EXPECT_EQ(FormatCudaVisibleDevices({}), "");
}

TEST(FormatCudaVisibleDevicesTest, RoundTripsThroughTheParser) {
  const auto cvd = Parse(FormatCudaVisibleDevices({kUuid3, kUuid1}), FourA100());
  EXPECT_THAT(Indices(cvd), ElementsAre(3, 1));
}

}  // namespace
}  // namespace gpuman::visibility
