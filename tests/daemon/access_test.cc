// Access levels, and the allow/deny matrix in docs/protocol.md read back and compared with
// the command table, so the two cannot drift.
#include "daemon/access.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/strings.h"
#include "daemon/daemon.h"
#include "daemon/daemon_world.h"

namespace gpuman::daemon {
namespace {

using testing::PeerFor;

TEST(AccessTest, EachLevelForEachRole) {
  struct Case {
    Access who;
    std::array<bool, 4> allowed;  // owner, other user, admin group, root
  };
  const Case cases[] = {
      {Access::kAnyone, {true, true, true, true}},
      {Access::kJobUser, {true, true, true, true}},  // system mode
      {Access::kOwner, {true, false, true, true}},
      {Access::kAdmin, {false, false, true, true}},
      {Access::kRoot, {false, false, false, true}},
  };
  for (const Case& c : cases) {
    for (size_t i = 0; i < kRoles.size(); ++i) {
      EXPECT_EQ(Allows(c.who, kRoles[i]), c.allowed[i]) << static_cast<int>(c.who) << " " << RoleName(kRoles[i]);
      EXPECT_EQ(Permits(c.who, PeerFor(kRoles[i]), testing::kOwnerUid, DaemonIdentity{true, 0}), c.allowed[i]);
    }
  }
}

TEST(AccessTest, UserModeServesOnlyTheDaemonsUser) {
  const DaemonIdentity user_mode{false, 1001};
  EXPECT_TRUE(Permits(Access::kJobUser, Peer{1001, 1001, 0, "alice", false}, std::nullopt, user_mode));
  EXPECT_FALSE(Permits(Access::kJobUser, Peer{1002, 1002, 0, "bob", false}, std::nullopt, user_mode));
  EXPECT_FALSE(Permits(Access::kJobUser, Peer{0, 0, 0, "root", true}, std::nullopt, user_mode));
  EXPECT_TRUE(Permits(Access::kJobUser, Peer{0, 0, 0, "root", true}, std::nullopt, DaemonIdentity{false, 0}));
}

TEST(AccessTest, OwnerWithoutAnObjectIsAdminsOnly) {
  EXPECT_FALSE(Permits(Access::kOwner, PeerFor(Role::kOwner), std::nullopt, DaemonIdentity{true, 0}));
  EXPECT_TRUE(Permits(Access::kOwner, PeerFor(Role::kAdminGroup), std::nullopt, DaemonIdentity{true, 0}));
}

std::vector<AccessRule> TableRules() {
  std::vector<AccessRule> rules;
  for (const Daemon::Command& c : Daemon::Commands()) rules.push_back({protocol::OpName(c.op), c.who});
  return rules;
}

// The table under the heading "## Who may do what" in docs/protocol.md: the header row,
// the separator, then rows until the first line that is not a table row.
Result<std::vector<MatrixRow>> ReadDocMatrix(const std::string& path, std::vector<std::string>& header) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "cannot read " + path);
  auto cells_of = [](const std::string& line) {
    std::vector<std::string> cells;
    std::string_view inner(line);
    inner.remove_prefix(1);
    if (!inner.empty() && inner.back() == '|') inner.remove_suffix(1);
    for (const std::string& cell : Split(inner, '|')) {
      std::string text;
      for (char ch : cell) {
        if (ch != '`') text += ch;
      }
      cells.emplace_back(Trim(text));
    }
    return cells;
  };
  std::string line;
  bool in_section = false;
  int table_line = 0;
  std::vector<MatrixRow> rows;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Who may do what";
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("|", 0) != 0) {
      if (table_line > 0) break;  // the table ended
      continue;
    }
    ++table_line;
    auto cells = cells_of(line);
    if (table_line == 1) {
      header = cells;
    } else if (table_line > 2) {
      if (cells.size() != 5) return MakeError(ErrorCode::kInvalidArgument, "row with " + std::to_string(cells.size()) + " cells: " + line);
      rows.push_back(MatrixRow{cells[0], {cells[1], cells[2], cells[3], cells[4]}});
    }
  }
  if (rows.empty()) return MakeError(ErrorCode::kNotFound, path + ": no table under \"## Who may do what\"");
  return rows;
}

std::string Render(const std::vector<MatrixRow>& rows) {
  std::ostringstream out;
  for (const auto& r : rows) out << "| " << r.name << " | " << r.cells[0] << " | " << r.cells[1] << " | " << r.cells[2] << " | " << r.cells[3] << " |\n";
  return out.str();
}

TEST(AccessMatrixTest, DocsProtocolMdShowsTheCommandTable) {
  std::vector<std::string> header;
  auto doc = ReadDocMatrix(std::string(GPUMAN_TEST_DOCS_DIR) + "/protocol.md", header);
  ASSERT_TRUE(doc) << doc.error().message;
  std::vector<std::string> want_header = {"operation"};
  for (Role role : kRoles) want_header.push_back(RoleName(role));
  EXPECT_EQ(header, want_header);
  auto rules = TableRules();
  std::vector<MatrixRow> code = AccessMatrix(rules);
  EXPECT_EQ(*doc, code) << "docs/protocol.md and src/daemon/commands.cc disagree; the code's matrix is:\n" << Render(code);
}

TEST(AccessMatrixTest, MatrixHasEveryOperationAndFinerRule) {
  auto rules = TableRules();
  auto matrix = AccessMatrix(rules);
  ASSERT_EQ(matrix.size(), rules.size() + FinerRules().size());
  EXPECT_EQ(matrix[1].name, "submit");
  EXPECT_EQ(matrix[1].cells, (std::array<std::string, 4>{"yes*", "yes*", "yes*", "yes*"}));
  EXPECT_EQ(matrix[9].name, "drain");
  EXPECT_EQ(matrix[9].cells, (std::array<std::string, 4>{"no", "no", "yes", "yes"}));
  EXPECT_EQ(matrix.back().cells, (std::array<std::string, 4>{"no", "no", "no", "yes"}));
}

}  // namespace
}  // namespace gpuman::daemon
