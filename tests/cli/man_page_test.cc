// Man pages generated from the CLI11 tree: each page lists exactly its command's options,
// every visible command has a page (in a fresh directory and in build/man/), and the tables
// copied from docs/cli.md still match it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/command_tree.h"
#include "cli/help_docs.h"
#include "render/man_page.h"
#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

std::vector<const CLI::App*> VisibleCommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
}

std::set<std::string> CliOptionNames(const CLI::App& cmd, bool positional) {
  std::set<std::string> names;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->nonpositional() == positional) continue;
    if (opt->get_group().empty()) continue;  // hidden (`submit --per-gpu`, only to refuse it): not documented
    if (positional) {
      names.insert(opt->get_name(true, false));
      continue;
    }
    for (const auto& s : opt->get_snames()) names.insert("-" + s);
    for (const auto& l : opt->get_lnames()) names.insert("--" + l);
  }
  return names;
}

// Every \fB...\fR / \fI...\fR word on the .TP tag lines of one section, unescaped.
std::multiset<std::string> SectionTags(const std::string& page, const std::string& section,
                                       const std::string& font) {
  std::multiset<std::string> tags;
  std::istringstream in(page);
  std::string line;
  bool inside = false, tag_next = false;
  while (std::getline(in, line)) {
    if (line.rfind(".SH ", 0) == 0) {
      inside = line == ".SH " + section;
      continue;
    }
    if (!inside) continue;
    if (line == ".TP") {
      tag_next = true;
      continue;
    }
    if (!tag_next) continue;
    tag_next = false;
    for (size_t at = line.find(font); at != std::string::npos; at = line.find(font, at)) {
      at += font.size();
      const size_t end = line.find("\\fR", at);
      std::string word = line.substr(at, end - at);
      for (size_t p; (p = word.find("\\-")) != std::string::npos;) word.replace(p, 2, "-");
      tags.insert(word);
    }
  }
  return tags;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ManPageTest, EachCommandPageListsExactlyItsOptions) {
  CommandTree tree;
  const render::ProgramDoc doc = DescribeCommandLine(tree.app());
  const auto commands = VisibleCommands(tree.app());
  ASSERT_EQ(doc.commands.size(), commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    SCOPED_TRACE(commands[i]->get_name());
    const std::string page = render::RenderCommandManPage(doc, doc.commands[i]);
    const auto tags = SectionTags(page, "OPTIONS", "\\fB");
    // As a multiset: an option listed twice is as wrong as one missing.
    const std::set<std::string> unique(tags.begin(), tags.end());
    EXPECT_EQ(unique.size(), tags.size());
    EXPECT_EQ(unique, CliOptionNames(*commands[i], false));
    const auto args = SectionTags(page, "ARGUMENTS", "\\fI");
    EXPECT_EQ(std::set<std::string>(args.begin(), args.end()), CliOptionNames(*commands[i], true));
  }
}

TEST(ManPageTest, RunPageNamesSelectionOptionsAndTheCommand) {
  CommandTree tree;
  const render::ProgramDoc doc = DescribeCommandLine(tree.app());
  auto run = std::find_if(doc.commands.begin(), doc.commands.end(), [](auto& c) { return c.name == "run"; });
  ASSERT_NE(run, doc.commands.end());
  const std::string page = render::RenderCommandManPage(doc, *run);
  EXPECT_NE(page.find(".TH GPUMAN-RUN 1"), std::string::npos);
  EXPECT_NE(page.find("\\fB\\-n\\fR, \\fB\\-\\-count\\fR \\fIINT\\fR"), std::string::npos) << page;
  EXPECT_NE(page.find("\\fB\\-\\-wait\\fR[=\\fITEXT\\fR]"), std::string::npos) << page;
  EXPECT_NE(page.find("[\\fB\\-\\-\\fR] \\fIcommand\\fR"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH \"EXIT STATUS\""), std::string::npos);
  EXPECT_NE(page.find("\\fBgpuman\\fR(1)"), std::string::npos);
}

TEST(ManPageTest, ProgramPageListsEveryCommandAndGlobalOption) {
  CommandTree tree;
  const render::ProgramDoc doc = DescribeCommandLine(tree.app());
  const std::string page = render::RenderProgramManPage(doc);
  std::set<std::string> want;
  for (const CLI::App* c : VisibleCommands(tree.app())) want.insert(c->get_name());
  const auto listed = SectionTags(page, "COMMANDS", "\\fB");
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), want);
  const auto globals = SectionTags(page, "OPTIONS", "\\fB");
  EXPECT_EQ(std::set<std::string>(globals.begin(), globals.end()), CliOptionNames(tree.app(), false));
  for (const std::string section : {"\"EXIT STATUS\"", "ENVIRONMENT", "FILES", "\"SEE ALSO\""}) {
    EXPECT_NE(page.find(".SH " + section + "\n"), std::string::npos) << section;
  }
}

TEST(ManPageTest, HiddenCommandsGetNoPage) {
  CommandTree tree;
  tree.app().add_subcommand("__internal", "not for people")->group("");
  const render::ProgramDoc doc = DescribeCommandLine(tree.app());
  for (const auto& c : doc.commands) EXPECT_NE(c.name, "__internal");
  EXPECT_FALSE(doc.commands.empty());
}

void ExpectAPagePerCommand(const std::string& dir) {
  CommandTree tree;
  EXPECT_TRUE(std::filesystem::exists(dir + "/gpuman.1")) << dir;
  for (const CLI::App* c : VisibleCommands(tree.app())) {
    const std::string path = dir + "/gpuman-" + c->get_name() + ".1";
    EXPECT_TRUE(std::filesystem::exists(path)) << "no page for '" << c->get_name() << "': " << path;
    for (const CLI::App* sub : VisibleCommands(*c)) {  // `slurm gres-conf`: gpuman-slurm-gres-conf.1
      const std::string sub_path = dir + "/gpuman-" + c->get_name() + "-" + sub->get_name() + ".1";
      EXPECT_TRUE(std::filesystem::exists(sub_path)) << "no page for '" << c->get_name() << " " << sub->get_name() << "'";
    }
  }
}

TEST(ManPageTest, SubcommandPagesListExactlyTheirOptions) {
  CommandTree tree;
  const render::ProgramDoc doc = DescribeCommandLine(tree.app());
  const auto commands = VisibleCommands(tree.app());
  int pages = 0;
  for (size_t i = 0; i < commands.size(); ++i) {
    const auto subs = VisibleCommands(*commands[i]);
    ASSERT_EQ(doc.commands[i].subcommands.size(), subs.size()) << commands[i]->get_name();
    const std::string parent_page = render::RenderCommandManPage(doc, doc.commands[i]);
    for (size_t j = 0; j < subs.size(); ++j) {
      SCOPED_TRACE(commands[i]->get_name() + " " + subs[j]->get_name());
      const render::CommandDoc& sub = doc.commands[i].subcommands[j];
      EXPECT_EQ(sub.parent, commands[i]->get_name());
      const std::string page = render::RenderCommandManPage(doc, sub);
      const auto tags = SectionTags(page, "OPTIONS", "\\fB");
      EXPECT_EQ(std::set<std::string>(tags.begin(), tags.end()), CliOptionNames(*subs[j], false));
      const auto listed = SectionTags(parent_page, "COMMANDS", "\\fB");
      EXPECT_EQ(listed.count(subs[j]->get_name()), 1u) << "the parent's page lists it";
      ++pages;
    }
  }
  EXPECT_GE(pages, 1) << "slurm gres-conf at least";
  auto slurm = std::find_if(doc.commands.begin(), doc.commands.end(), [](auto& c) { return c.name == "slurm"; });
  ASSERT_NE(slurm, doc.commands.end());
  auto gres = std::find_if(slurm->subcommands.begin(), slurm->subcommands.end(), [](auto& c) { return c.name == "gres-conf"; });
  ASSERT_NE(gres, slurm->subcommands.end());
  EXPECT_EQ(render::ManPageStem(*gres), "slurm-gres-conf");
  const std::string page = render::RenderCommandManPage(doc, *gres);
  EXPECT_NE(page.find(".TH GPUMAN-SLURM-GRES-CONF 1"), std::string::npos);
  EXPECT_NE(page.find(".SH SYNOPSIS\n\\fBgpuman\\fR \\fBslurm\\fR \\fBgres\\-conf\\fR [\\fIOPTIONS\\fR]\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("\\fBgpuman\\-slurm\\fR(1)"), std::string::npos) << "SEE ALSO the parent";
}

TEST(ManPageTest, WriteManPagesWritesAPagePerCommand) {
  gpuman::testing::TempDir tmp;
  CommandTree tree;
  const std::string dir = tmp.Join("man");
  ASSERT_TRUE(WriteManPages(tree.app(), dir).has_value());
  ExpectAPagePerCommand(dir);
  EXPECT_NE(ReadFile(dir + "/gpuman-status.1").find(".SH NAME\ngpuman\\-status \\- "), std::string::npos);
}

TEST(ManPageTest, BuildTreeHasAPagePerCommand) {
  // cmake/man.cmake generates them before this test binary is built.
  const auto build_dir = std::filesystem::path(GPUMAN_TEST_BINARY).parent_path();
  ExpectAPagePerCommand((build_dir / "man").string());
}

// The installed pages (cmake/man.cmake: `gpuman __man DIR PREFIX/share/doc/gpuman`) send
// readers to the installed documents, never to "docs/cli.md in the sources", and every
// document a page or a help text names is one that is installed (docs/*.md).
TEST(ManPageTest, PagesAndHelpNameInstalledDocumentsThatExist) {
  gpuman::testing::TempDir tmp;
  CommandTree tree;
  const std::string dir = tmp.Join("man");
  ASSERT_TRUE(WriteManPages(tree.app(), dir, "/usr/share/doc/gpuman").has_value());
  std::set<std::string> named;
  const std::regex installed_ref(R"(/usr/share/doc/gpuman/([A-Za-z0-9_]+\.md))");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string page = ReadFile(entry.path().string());
    EXPECT_NE(page.find("The full reference is \\fI/usr/share/doc/gpuman/cli.md\\fR.\n"), std::string::npos)
        << entry.path();
    EXPECT_EQ(page.find("docs/"), std::string::npos) << entry.path() << " still names the sources' docs/";
    EXPECT_EQ(page.find("gpuman sources"), std::string::npos) << entry.path();
    for (std::sregex_iterator m(page.begin(), page.end(), installed_ref), end; m != end; ++m) named.insert((*m)[1]);
  }
  // Help (`--help`, `help`) as printed by a gpuman whose documents are not found: docs/NAME.
  std::vector<std::string> commands = {""};
  for (const CLI::App* sub : VisibleCommands(tree.app())) commands.push_back(sub->get_name());
  const std::regex help_ref(R"(docs/([A-Za-z0-9_]+\.md))");
  for (const std::string& command : commands) {
    std::ostringstream out, err;
    ASSERT_EQ(RunHelp(tree.app(), command.empty() ? std::nullopt : std::optional<std::string>(command), out, err), 0)
        << err.str();
    const std::string help = out.str();
    for (std::sregex_iterator m(help.begin(), help.end(), help_ref), end; m != end; ++m) named.insert((*m)[1]);
  }
  EXPECT_TRUE(named.count("cli.md"));
  EXPECT_TRUE(named.count("slurm.md")) << "`slurm --help` names docs/slurm.md";
  for (const std::string& name : named) {
    EXPECT_TRUE(std::filesystem::exists(std::string(GPUMAN_TEST_DOCS_DIR) + "/" + name)) << name << " is named but not in docs/";
  }
}

TEST(ManPageTest, UnwritableDirectoryIsAnIoError) {
  gpuman::testing::TempDir tmp;
  std::ofstream(tmp.Join("file")) << "x";
  CommandTree tree;
  auto st = WriteManPages(tree.app(), tmp.Join("file") + "/man");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kIo);
}

// The rows of the markdown table under `## heading` in docs/cli.md: first cell, unquoted.
std::vector<std::string> DocsTableKeys(const std::string& heading) {
  std::istringstream in(ReadFile(std::string(GPUMAN_TEST_DOCS_DIR) + "/cli.md"));
  std::vector<std::string> keys;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == "## " + heading;
    if (!inside || line.rfind("| ", 0) != 0 || line.rfind("|---", 0) == 0) continue;
    std::string cell = line.substr(2, line.find(" |", 2) - 2);
    std::erase(cell, '`');
    keys.push_back(cell);
  }
  if (!keys.empty()) keys.erase(keys.begin());  // the header row
  return keys;
}

TEST(ManPageTest, ExitCodesMatchDocs) {
  std::vector<std::string> ours;
  for (const auto& row : ExitCodeTable()) ours.push_back(row.key);
  EXPECT_EQ(ours, DocsTableKeys("Exit codes"));
  EXPECT_EQ(ours.size(), 8u);
}

TEST(ManPageTest, EnvironmentMatchesDocs) {
  std::vector<std::string> ours;
  for (const auto& row : EnvironmentTable()) ours.push_back(row.key);
  std::vector<std::string> docs;
  for (const auto& key : DocsTableKeys("Environment")) {
    std::stringstream ss(key);  // "NO_COLOR, COLUMNS, TERM"
    for (std::string v; std::getline(ss >> std::ws, v, ',');) docs.push_back(v);
  }
  EXPECT_EQ(ours, docs);
}

TEST(HelpTest, UnknownCommandIsOneLineAndUsageExit) {
  CommandTree tree;
  std::ostringstream out, err;
  EXPECT_EQ(RunHelp(tree.app(), std::string("nope"), out, err), 2);
  EXPECT_EQ(err.str(), "gpuman: error: help: no command 'nope' (see gpuman --help)\n");
  EXPECT_EQ(out.str(), "");
}

TEST(HelpTest, CommandHelpIsTheCommandsUsage) {
  CommandTree tree;
  std::ostringstream out, err;
  EXPECT_EQ(RunHelp(tree.app(), std::string("leases"), out, err), 0);
  EXPECT_NE(out.str().find("Usage: gpuman leases"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("--json"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::cli
