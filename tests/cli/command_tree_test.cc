// The one-command trees main builds (CommandTree(name)) hold that command exactly as the
// whole tree does: same options, same help, same parse results. Main falls back to the
// whole tree for everything else, so a command missing from the table, or built there
// differently, would change what that command accepts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command_tree.h"

#include <algorithm>
#include <sstream>

namespace gpuman::cli {
namespace {

std::vector<std::string> CommandNames(CommandTree& tree) {
  std::vector<std::string> names;
  for (const CLI::App* sub : tree.app().get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// CLI11 lists an option's "Excludes:" in the order of the options' addresses, which
// differ from one build of the tree to the next: compare them as sets.
std::string SortedExcludes(const std::string& help) {
  std::istringstream in(help);
  std::string out, line;
  while (std::getline(in, line)) {
    if (size_t at = line.find("Excludes:"); at != std::string::npos) {
      std::istringstream words(line.substr(at + 9));
      std::vector<std::string> names;
      for (std::string w; words >> w;) names.push_back(w);
      std::sort(names.begin(), names.end());
      line = line.substr(0, at + 9);
      for (const auto& n : names) line += " " + n;
    }
    out += line + "\n";
  }
  return out;
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
    EXPECT_EQ(SortedExcludes(mine->help()), SortedExcludes(theirs->help()));
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
