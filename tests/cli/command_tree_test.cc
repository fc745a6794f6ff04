// The one-command trees main builds (CommandTree(name)) hold that command exactly as the
// whole tree does: same options, same help, same parse results. Main falls back to the
// whole tree for everything else, so a command missing from the table, or built there
// differently, would change what that command accepts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command_tree.h"

namespace gpuman::cli {
namespace {

std::vector<std::string> CommandNames(CommandTree& tree) {
  std::vector<std::string> names;
  for (const CLI::App* sub : tree.app().get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

TEST(CommandTreeTest, EachCommandAloneIsTheWholeTreesCommand) {
  CommandTree whole;
  const std::vector<std::string> names = CommandNames(whole);
  ASSERT_GT(names.size(), 20u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    CommandTree one(name);
    ASSERT_TRUE(one.Has(name));
    const CLI::App* mine = one.app().get_subcommand(name);
    const CLI::App* theirs = whole.app().get_subcommand(name);
    EXPECT_EQ(mine->help(), theirs->help());
    EXPECT_EQ(mine->get_options().size(), theirs->get_options().size());
    // Only that command, or the queue commands, which are registered together.
    const std::vector<std::string> built = CommandNames(one);
    if (built.size() > 1) {
      EXPECT_TRUE(one.Has("daemon") && one.Has("submit") && one.Has("wait"));
      EXPECT_LT(built.size(), names.size() / 2);
    }
  }
}

TEST(CommandTreeTest, TheRootAloneHasTheGlobalOptionsAndNoCommand) {
  CommandTree whole;
  CommandTree root("");
  EXPECT_TRUE(CommandNames(root).empty());
  ASSERT_EQ(root.app().get_options().size(), whole.app().get_options().size());
  for (size_t i = 0; i < whole.app().get_options().size(); ++i) {
    EXPECT_EQ(root.app().get_options()[i]->get_name(), whole.app().get_options()[i]->get_name());
  }
}

TEST(CommandTreeTest, ANameThatIsNoCommandIsNotFound) {
  CommandTree tree("frobnicate");
  EXPECT_FALSE(tree.Has("frobnicate"));
  EXPECT_TRUE(tree.Has("daemon"));  // what it falls back to; main then uses the whole tree
}

}  // namespace
}  // namespace gpuman::cli
