// Completion scripts generated from the CLI11 tree name every command and, in each
// command's arm, exactly that command's options.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/command_tree.h"
#include "cli/help_docs.h"

namespace gpuman::cli {
namespace {

std::vector<const CLI::App*> VisibleCommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

std::set<std::string> CliOptionNames(const CLI::App& cmd) {
  std::set<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden (`submit --per-gpu`, only to refuse it): not offered
    for (const auto& s : opt->get_snames()) names.insert("-" + s);
    for (const auto& l : opt->get_lnames()) names.insert("--" + l);
  }
  return names;
}

std::set<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> words;
  for (std::string w; in >> w;) words.insert(w);
  return words;
}

// The words of the first `key'...'` after `from` in the script.
std::set<std::string> QuotedList(const std::string& script, const std::string& from, const std::string& key) {
  size_t at = script.find(from);
  if (at == std::string::npos) return {};
  at = script.find(key + "'", at);
  if (at == std::string::npos) return {};
  at += key.size() + 1;
  return Words(script.substr(at, script.find('\'', at) - at));
}

std::string Bash(const CLI::App& app) {
  std::ostringstream out;
  EXPECT_EQ(RunCompletion(app, "bash", out), 0);
  return out.str();
}

// The `compgen -W '...'` lists of a script fragment, in order.
std::vector<std::set<std::string>> CompgenLists(const std::string& text) {
  std::vector<std::set<std::string>> lists;
  const std::string key = "compgen -W '";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
    at += key.size();
    lists.push_back(Words(text.substr(at, text.find('\'', at) - at)));
  }
  return lists;
}

TEST(BashCompletionTest, NamesEveryCommand) {
  CommandTree tree;
  const std::string script = Bash(tree.app());
  std::set<std::string> want;
  for (const CLI::App* c : VisibleCommands(tree.app())) want.insert(c->get_name());
  // Before the command: the global options after '-', else the commands.
  const size_t block = script.find("if [[ -z $cmd ]]");
  ASSERT_NE(block, std::string::npos);
  const auto lists = CompgenLists(script.substr(block, script.find("return 0", block) - block));
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0], CliOptionNames(tree.app()));
  EXPECT_EQ(lists[1], want);
  EXPECT_NE(script.find("complete -F _gpuman gpuman"), std::string::npos);
}

TEST(BashCompletionTest, EachCommandArmHasExactlyItsOptions) {
  CommandTree tree;
  const std::string script = Bash(tree.app());
  for (const CLI::App* c : VisibleCommands(tree.app())) {
    SCOPED_TRACE(c->get_name());
    EXPECT_EQ(QuotedList(script, "\n    " + c->get_name() + ")\n", "opts="), CliOptionNames(*c));
  }
}

TEST(BashCompletionTest, SubcommandsAreCompletedThenTheirOptions) {
  CommandTree tree;
  const std::string script = Bash(tree.app());
  int subs = 0;
  for (const CLI::App* c : VisibleCommands(tree.app())) {
    const auto children = VisibleCommands(*c);
    if (children.empty()) continue;
    const size_t arm = script.find("\n    " + c->get_name() + ")\n");
    ASSERT_NE(arm, std::string::npos) << c->get_name();
    std::set<std::string> names;
    for (const CLI::App* sub : children) names.insert(sub->get_name());
    // Before a subcommand: its names as the positional choices.
    const size_t choices = script.find("choices=(", arm) + 9;
    EXPECT_EQ(Words(script.substr(choices, script.find(')', choices) - choices)), names) << c->get_name();
    for (const CLI::App* sub : children) {
      SCOPED_TRACE(c->get_name() + " " + sub->get_name());
      EXPECT_EQ(QuotedList(script.substr(arm), "\n          " + sub->get_name() + ")\n", "opts="), CliOptionNames(*sub));
      ++subs;
    }
  }
  EXPECT_GE(subs, 1) << "slurm gres-conf at least";
}

TEST(BashCompletionTest, ValuesHaveCandidates) {
  CommandTree tree;
  const std::string script = Bash(tree.app());
  EXPECT_NE(script.find("--simulate) _gpuman_value scenario"), std::string::npos);
  EXPECT_NE(script.find("-i|--gpus|--id) _gpuman_value gpu"), std::string::npos);
  EXPECT_NE(script.find("--exclude) _gpuman_value gpu"), std::string::npos);
  EXPECT_NE(script.find("--config) _gpuman_value file"), std::string::npos);
  EXPECT_NE(script.find("positional=command"), std::string::npos);  // run/submit after --
  EXPECT_NE(script.find("choices=(bash zsh)"), std::string::npos);
}

TEST(ZshCompletionTest, NamesEveryCommandAndOption) {
  CommandTree tree;
  std::ostringstream out;
  ASSERT_EQ(RunCompletion(tree.app(), "zsh", out), 0);
  const std::string script = out.str();
  EXPECT_EQ(script.rfind("#compdef gpuman\n", 0), 0u);
  for (const CLI::App* c : VisibleCommands(tree.app())) {
    const size_t arm = script.find("\n        " + c->get_name() + ")\n");
    ASSERT_NE(arm, std::string::npos) << c->get_name();
    const size_t end = script.find(";;", arm);
    for (const auto& name : CliOptionNames(*c)) {
      const std::string body = script.substr(arm, end - arm);
      EXPECT_TRUE(body.find(name + "[") != std::string::npos || body.find(name + "=-[") != std::string::npos ||
                  body.find("," + name + "}") != std::string::npos ||
                  body.find("{" + name + ",") != std::string::npos ||
                  body.find("," + name + ",") != std::string::npos)  // the middle of three names
          << c->get_name() << " " << name;
    }
  }
}

}  // namespace
}  // namespace gpuman::cli
