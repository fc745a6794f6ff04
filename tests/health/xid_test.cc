#include "health/xid.h"

#include <gtest/gtest.h>

namespace gpuman::health {
namespace {

using model::Severity;

TEST(ClassifyXidTest, DcgmFatalSet) {
  for (int xid : {48, 74, 79, 95, 119, 120, 140}) {
    EXPECT_EQ(ClassifyXid(xid).severity, Severity::kFatal) << "Xid " << xid;
  }
}

TEST(ClassifyXidTest, ContainedEccIsAWarning) {
  EXPECT_EQ(ClassifyXid(94).severity, Severity::kWarning);
  EXPECT_STREQ(ClassifyXid(94).subsystem, "memory");
}

TEST(ClassifyXidTest, ApplicationXidsAreWarningsMarkedAsSuch) {
  for (int xid : {13, 31, 43, 45, 68, 109}) {
    XidClass c = ClassifyXid(xid);
    EXPECT_EQ(c.severity, Severity::kWarning) << xid;
    EXPECT_TRUE(c.application) << xid;
  }
  EXPECT_FALSE(ClassifyXid(79).application);
}

TEST(ClassifyXidTest, SubsystemsFollowDcgm) {
  EXPECT_STREQ(ClassifyXid(79).subsystem, "pcie");
  EXPECT_STREQ(ClassifyXid(61).subsystem, "thermal");
  EXPECT_STREQ(ClassifyXid(57).subsystem, "power");
  EXPECT_STREQ(ClassifyXid(74).subsystem, "nvlink");
  EXPECT_STREQ(ClassifyXid(119).subsystem, "gsp");
}

TEST(ClassifyXidTest, UnknownNumbersAreWarningsWithoutDescription) {
  XidClass c = ClassifyXid(4242);
  EXPECT_EQ(c.severity, Severity::kWarning);
  EXPECT_STREQ(c.description, "");
  EXPECT_STREQ(ClassifyXid(999).description, "unknown Xid error");
}

}  // namespace
}  // namespace gpuman::health
