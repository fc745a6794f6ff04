// The roff writer: escaping and the shape of a page, from a hand-made ProgramDoc.
#include "render/man_page.h"

#include <gtest/gtest.h>

#include "render/completion_script.h"

namespace gpuman::render {
namespace {

TEST(RoffEscapeTest, Table) {
  struct Case {
    const char* in;
    const char* want;
  } cases[] = {
      {"plain", "plain"},
      {"--gpus", "\\-\\-gpus"},
      {"a\\b", "a\\eb"},
      {".starts with a dot", "\\&.starts with a dot"},
      {"'quoted", "\\&'quoted"},
      {"mid.dot 'ok'", "mid.dot 'ok'"},
      {"two\n.lines", "two\n\\&.lines"},
  };
  for (const auto& c : cases) EXPECT_EQ(RoffEscape(c.in), c.want) << c.in;
}

ProgramDoc Sample() {
  ProgramDoc p;
  p.name = "tool";
  p.version = "1.2";
  p.summary = "does things";
  p.description = {"First.", "Second."};
  OptionDoc help{{"-h", "--help"}, "", false, false, false, "Print help", "", ValueKind::kNone, {}};
  OptionDoc count{{"-n", "--count"}, "INT", false, false, false, "How many", "1", ValueKind::kText, {}};
  OptionDoc wait{{"--wait"}, "TEXT", true, false, false, "Wait (at most DURATION)", "", ValueKind::kText, {}};
  OptionDoc file{{"file"}, "TEXT", false, true, true, "Files", "", ValueKind::kFile, {}};
  p.global_options = {help};
  p.commands = {CommandDoc{"go", "Go somewhere", "", {help, count, wait}, {file}}};
  p.exit_codes = {{"0", "success"}, {"2", "bad input"}};
  p.environment = {{"TOOL_X", "x"}};
  p.files = {{"/etc/tool", "config"}};
  return p;
}

TEST(ManPageRenderTest, CommandPage) {
  const ProgramDoc p = Sample();
  EXPECT_EQ(ManPageFileName(p, "go"), "tool-go.1");
  EXPECT_EQ(ManPageFileName(p, ""), "tool.1");
  const std::string page = RenderCommandManPage(p, p.commands[0]);
  EXPECT_EQ(page.rfind(".TH TOOL-GO 1 \"\" \"tool 1.2\" \"User Commands\"\n", 0), 0u) << page;
  EXPECT_NE(page.find(".SH NAME\ntool\\-go \\- Go somewhere\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH SYNOPSIS\n\\fBtool\\fR \\fBgo\\fR [\\fIOPTIONS\\fR] \\fIfile\\fR\\|.\\|.\\|.\n"),
            std::string::npos) << page;
  EXPECT_NE(page.find(".TP\n\\fB\\-n\\fR, \\fB\\-\\-count\\fR \\fIINT\\fR\nHow many (default: 1).\n"),
            std::string::npos) << page;
  EXPECT_NE(page.find(".TP\n\\fB\\-\\-wait\\fR[=\\fITEXT\\fR]\nWait (at most DURATION).\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find(".SH \"EXIT STATUS\"\n.TP\n\\fB0\\fR\nsuccess.\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH \"SEE ALSO\"\n\\fBtool\\fR(1)\n"), std::string::npos) << page;
}

TEST(ManPageRenderTest, ProgramPage) {
  const ProgramDoc p = Sample();
  const std::string page = RenderProgramManPage(p);
  EXPECT_NE(page.find(".SH COMMANDS\n.TP\n\\fBgo\\fR\nGo somewhere.\n"), std::string::npos) << page;
  EXPECT_NE(page.find("First.\n.PP\nSecond.\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH ENVIRONMENT\n.TP\n\\fBTOOL_X\\fR\nx\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SH FILES\n.TP\n\\fI/etc/tool\\fR\nconfig\n"), std::string::npos) << page;
  EXPECT_NE(page.find("\\fBtool\\-go\\fR(1)"), std::string::npos) << page;
}

TEST(ManPageRenderTest, DocumentReferencesPointToTheDocDirectory) {
  ProgramDoc p = Sample();
  p.commands[0].options[1].description = "How many (docs/counting.md)";
  p.files = {{"/etc/tool", "config (docs/cli.md, Configuration)"}};
  // Where the documents are is unknown: the sources' docs/, said so.
  std::string page = RenderCommandManPage(p, p.commands[0]);
  EXPECT_NE(page.find(".PP\nThe full reference is docs/cli.md in the tool sources.\n"), std::string::npos) << page;
  EXPECT_NE(page.find("How many (docs/counting.md) (default: 1)."), std::string::npos) << page;

  p.doc_dir = "/usr/share/doc/my-tool";
  for (const std::string& page_now : {RenderCommandManPage(p, p.commands[0]), RenderProgramManPage(p)}) {
    EXPECT_NE(page_now.find("The full reference is \\fI/usr/share/doc/my\\-tool/cli.md\\fR.\n"), std::string::npos)
        << page_now;
    EXPECT_EQ(page_now.find("docs/"), std::string::npos) << page_now;
    EXPECT_EQ(page_now.find("sources"), std::string::npos) << page_now;
  }
  page = RenderCommandManPage(p, p.commands[0]);
  EXPECT_NE(page.find("How many (/usr/share/doc/my\\-tool/counting.md) (default: 1)."), std::string::npos) << page;
  const std::string program = RenderProgramManPage(p);
  EXPECT_NE(program.find(".TP\n\\fI/etc/tool\\fR\nconfig (/usr/share/doc/my\\-tool/cli.md, Configuration)\n"),
            std::string::npos) << program;
  EXPECT_NE(program.find(".TP\n\\fI/usr/share/doc/my\\-tool\\fR\ntool's documents (Markdown): cli.md"), std::string::npos)
      << program;
}

TEST(CompletionRenderTest, BashArms) {
  const std::string script = RenderBashCompletion(Sample());
  EXPECT_NE(script.find("    go)\n"), std::string::npos) << script;
  EXPECT_NE(script.find("opts='-h --help -n --count --wait'"), std::string::npos) << script;
  EXPECT_NE(script.find("-n|--count) _gpuman_value text; return 0 ;;"), std::string::npos) << script;
  // An optional value does not swallow the next word.
  EXPECT_EQ(script.find("--wait) _gpuman_value"), std::string::npos) << script;
  EXPECT_NE(script.find("positional=file"), std::string::npos) << script;
  EXPECT_NE(script.find("complete -F _tool tool\n"), std::string::npos) << script;
}

}  // namespace
}  // namespace gpuman::render
