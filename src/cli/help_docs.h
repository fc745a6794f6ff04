// `gpuman help`, `gpuman completion` and the hidden `gpuman __man DIR`: a walk over the CLI11
// tree into a render::ProgramDoc, which render/man_page.h and render/completion_script.h turn
// into text. Keeps man pages and completion from drifting from the real options. The walk
// and `help` need CLI11's types and live in cli/cli_options.cc; the rest here. One thread.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "base/result.h"
#include "render/command_doc.h"

namespace CLI {
class App;
}

namespace gpuman::cli {

/// The description of `app` and its visible subcommands (hidden ones, group "", are left
/// out), with the exit code, environment and files tables of docs/cli.md. (cli_options.cc)
render::ProgramDoc DescribeCommandLine(const CLI::App& app);

/// `gpuman help [COMMAND]`: prints exactly what `gpuman [COMMAND] --help` prints. An unknown
/// COMMAND gets one error line on `err` and kExitUsage. (cli_options.cc)
int RunHelp(const CLI::App& app, const std::optional<std::string>& command, std::ostream& out,
            std::ostream& err);

/// `gpuman completion SHELL` (bash or zsh; the parser has checked it).
int RunCompletion(const CLI::App& app, const std::string& shell, std::ostream& out);

/// Writes gpuman.1 and gpuman-COMMAND.1 for every visible command into `dir` (created),
/// naming `doc_dir` as where gpuman's documents are ("" for unknown: render/man_page.h).
/// Errors: kIo when the directory or a file cannot be written.
Status WriteManPages(const CLI::App& app, const std::string& dir, const std::string& doc_dir = "");

/// Exit codes as docs/cli.md lists them (tests compare the two).
const std::vector<render::TableRow>& ExitCodeTable();
/// Environment variables as docs/cli.md lists them.
const std::vector<render::TableRow>& EnvironmentTable();
/// Files, for the man pages.
const std::vector<render::TableRow>& FilesTable();

}  // namespace gpuman::cli
