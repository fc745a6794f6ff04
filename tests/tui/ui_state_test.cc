#include "tui/ui_state.h"

#include <signal.h>

#include <gtest/gtest.h>

#include "tui_fixtures.h"

namespace gpuman::tui {
namespace {

using testing::Machine;

struct Keys {
  UiState ui;
  Identity me{1001, false};
  std::vector<ProcessRow> all = BuildProcessRows(Machine(), {}, {});
  std::vector<int> gpus{0, 1, 2, 3};
  std::vector<ProcessRow> rows;

  Keys() { Refresh(); }
  void Refresh() {
    rows = VisibleRows(all, ui, me);
    SyncSelection(ui, rows);
  }
  Command Press(int key) {
    KeyContext kc{rows, gpus, me, 2, testing::kNowMs};
    Command c = HandleKey(ui, key, kc);
    Refresh();
    return c;
  }
  uint32_t SelectedPid() const { return rows.at(ui.selected).pid; }
};

TEST(KillDecisionTest, OwnOthersRootAndHidden) {
  auto rows = BuildProcessRows(Machine(), {}, {});
  const ProcessRow& alice = rows[0];
  const ProcessRow& bob = rows[2];
  const ProcessRow& hidden = rows[3];
  EXPECT_EQ(DecideKill({1001, false}, alice).verdict, KillVerdict::kAllowed);
  KillDecision d = DecideKill({1001, false}, bob);
  EXPECT_EQ(d.verdict, KillVerdict::kDenied);
  EXPECT_NE(d.reason.find("belongs to bob"), std::string::npos) << d.reason;
  d = DecideKill({0, true}, bob);
  EXPECT_EQ(d.verdict, KillVerdict::kConfirm);
  EXPECT_EQ(d.reason, "pid 5000 belongs to bob");
  EXPECT_EQ(DecideKill({0, true}, hidden).verdict, KillVerdict::kDenied);
  EXPECT_EQ(DecideKill({1001, false}, hidden).verdict, KillVerdict::kDenied);
  ProcessRow root_own = alice;
  root_own.uid = 0;
  EXPECT_EQ(DecideKill({0, true}, root_own).verdict, KillVerdict::kAllowed);
  ProcessRow unknown_owner = alice;
  unknown_owner.uid.reset();
  EXPECT_EQ(DecideKill({1001, false}, unknown_owner).verdict, KillVerdict::kDenied);
}

TEST(KeysTest, MoveSortAndQuit) {
  Keys k;
  EXPECT_EQ(k.SelectedPid(), 4242u);  // largest memory first
  k.Press(key::kDown);
  EXPECT_EQ(k.SelectedPid(), 5000u);
  k.Press('j');
  EXPECT_EQ(k.SelectedPid(), 4243u);
  k.Press(key::kUp);
  EXPECT_EQ(k.SelectedPid(), 5000u);
  k.Press('s');  // -> sm; the selection stays on pid 5000
  EXPECT_EQ(k.ui.sort, SortKey::kSmUtil);
  EXPECT_EQ(k.SelectedPid(), 5000u);
  EXPECT_EQ(k.ui.selected, 2);
  k.Press(key::kF6);
  EXPECT_EQ(k.ui.sort, SortKey::kPid);
  k.Press(key::kHome);
  EXPECT_EQ(k.SelectedPid(), 777u);
  k.Press(key::kEnd);
  EXPECT_EQ(k.SelectedPid(), 5000u);
  k.Press('r');
  EXPECT_TRUE(k.ui.reverse);
  EXPECT_EQ(k.Press('q'), Command::kQuit);
}

TEST(KeysTest, OnlyMineAndGpuSelection) {
  Keys k;
  k.Press('u');
  EXPECT_EQ(k.rows.size(), 2u);
  k.Press('u');
  EXPECT_EQ(k.rows.size(), 4u);
  k.Press('2');
  EXPECT_EQ(k.ui.gpu_filter, 2);
  ASSERT_EQ(k.rows.size(), 1u);
  EXPECT_EQ(k.rows[0].pid, 5000u);
  k.Press('2');  // again: all
  EXPECT_FALSE(k.ui.gpu_filter.has_value());
  k.Press('7');
  EXPECT_FALSE(k.ui.gpu_filter.has_value());
  EXPECT_EQ(k.ui.message, "no GPU 7");
  k.Press(key::kTab);
  EXPECT_EQ(k.ui.gpu_filter, 0);
  k.Press('g');
  EXPECT_EQ(k.ui.gpu_filter, 1);
  k.Press(key::kBackTab);
  k.Press(key::kBackTab);
  EXPECT_FALSE(k.ui.gpu_filter.has_value());
  k.Press(key::kBackTab);
  EXPECT_EQ(k.ui.gpu_filter, 3);
  k.Press(key::kEscape);
  EXPECT_FALSE(k.ui.gpu_filter.has_value());
}

TEST(KeysTest, KillOwnProcessAsksForTheSignal) {
  Keys k;
  EXPECT_EQ(k.Press('K'), Command::kNone);
  EXPECT_EQ(k.ui.mode, Mode::kChooseSignal);
  EXPECT_EQ(k.ui.target.pid, 4242u);
  EXPECT_EQ(k.Press(key::kEnter), Command::kSignal);
  EXPECT_EQ(k.ui.signal, SIGTERM);
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
  k.Press(key::kF9);
  EXPECT_EQ(k.ui.mode, Mode::kChooseSignal);
  EXPECT_EQ(k.Press('9'), Command::kSignal);
  EXPECT_EQ(k.ui.signal, SIGKILL);
  k.Press('K');
  EXPECT_EQ(k.Press(key::kEscape), Command::kNone);  // cancelled
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
}

// Issue 26: vim and htop users press `k` to go up; it must never start a kill.
TEST(KeysTest, LowerKMovesUpAndNeverStartsAKill) {
  Keys k;
  k.Press('j');
  k.Press('j');
  EXPECT_EQ(k.SelectedPid(), 4243u);
  EXPECT_EQ(k.Press('k'), Command::kNone);
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
  EXPECT_EQ(k.SelectedPid(), 5000u);  // as Up does
  k.Press('k');
  EXPECT_EQ(k.SelectedPid(), 4242u);
  EXPECT_EQ(k.Press('k'), Command::kNone);  // at the top: stays, still no dialog
  EXPECT_EQ(k.ui.selected, 0);
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
  EXPECT_TRUE(k.ui.message.empty()) << k.ui.message;
  // Not even with nothing selectable ("no process selected" would mean a kill was tried).
  k.Press('3');
  k.Press('u');
  ASSERT_TRUE(k.rows.empty());
  EXPECT_EQ(k.Press('k'), Command::kNone);
  EXPECT_TRUE(k.ui.message.empty()) << k.ui.message;
}

TEST(KeysTest, KillOthersIsDeniedUnlessRootWhoMustConfirm) {
  Keys k;
  k.Press(key::kDown);  // bob's 5000
  EXPECT_EQ(k.Press('K'), Command::kNone);
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
  EXPECT_TRUE(k.ui.message_is_error);
  EXPECT_NE(k.ui.message.find("only root"), std::string::npos);

  k.me = {0, true};
  k.Press('K');
  EXPECT_EQ(k.ui.mode, Mode::kChooseSignal);
  EXPECT_EQ(k.Press('t'), Command::kNone);
  EXPECT_EQ(k.ui.mode, Mode::kConfirmKill);
  EXPECT_EQ(k.Press('n'), Command::kNone);  // no
  EXPECT_EQ(k.ui.message, "not signalled");
  k.Press(key::kF9);
  k.Press('9');
  EXPECT_EQ(k.Press('y'), Command::kSignal);
  EXPECT_EQ(k.ui.signal, SIGKILL);
  EXPECT_EQ(k.ui.target.pid, 5000u);
}

TEST(KeysTest, HelpOpensAndAnyKeyClosesIt) {
  Keys k;
  k.Press('?');
  EXPECT_EQ(k.ui.mode, Mode::kHelp);
  EXPECT_EQ(k.Press('x'), Command::kNone);
  EXPECT_EQ(k.ui.mode, Mode::kNormal);
  k.Press('h');
  EXPECT_EQ(k.Press('q'), Command::kQuit);
}

TEST(KeysTest, PageKeysAndEmptyTable) {
  Keys k;
  k.Press(key::kPageDown);  // page of 2
  EXPECT_EQ(k.ui.selected, 2);
  k.Press(key::kPageUp);
  EXPECT_EQ(k.ui.selected, 0);
  k.Press('3');
  k.Press('u');  // nothing of mine on GPU 3
  EXPECT_TRUE(k.rows.empty());
  k.Press(key::kDown);
  EXPECT_EQ(k.Press('K'), Command::kNone);
  EXPECT_EQ(k.ui.message, "no process selected");
}

}  // namespace
}  // namespace gpuman::tui
