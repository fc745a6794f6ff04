// Man pages (roff, man(7) macros) from a ProgramDoc: gpuman(1) with the command list, exit
// codes, environment and files, and gpuman-COMMAND(1) per command. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "render/command_doc.h"

namespace gpuman::render {

/// The page for the program itself: NAME, SYNOPSIS, DESCRIPTION, OPTIONS (the global ones),
/// COMMANDS, EXIT STATUS, ENVIRONMENT, FILES (with program.doc_dir, when known), SEE ALSO.
/// Both kinds of page name program.doc_dir/cli.md as the full reference and point every
/// docs/NAME of their texts there (or say docs/cli.md "in the sources" without a doc_dir).
std::string RenderProgramManPage(const ProgramDoc& program);

/// The page for one command: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, ARGUMENTS (when it has
/// positionals), COMMANDS (when it has subcommands, which get pages of their own), GLOBAL
/// OPTIONS (a pointer to the program page), EXIT STATUS, SEE ALSO.
std::string RenderCommandManPage(const ProgramDoc& program, const CommandDoc& command);

/// "gpuman.1" for the program (empty command name), "gpuman-run.1" for a command.
std::string ManPageFileName(const ProgramDoc& program, std::string_view command);

/// A command's part of its page name: "run", "slurm-gres-conf" (parent words joined by '-').
std::string ManPageStem(const CommandDoc& command);

/// Text made safe for a roff text line: backslashes, hyphens and a leading '.' or '\''.
std::string RoffEscape(std::string_view text);

}  // namespace gpuman::render
