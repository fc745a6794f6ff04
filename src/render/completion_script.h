// Shell completion scripts (bash, zsh) from a ProgramDoc: commands, each command's options,
// and option values where candidates exist (scenario names, GPU indices, files, programs).
// Pure functions; the scripts ask the completed binary itself for dynamic candidates.
#pragma once

#include <string>

#include "render/command_doc.h"

namespace gpuman::render {

/// A bash script defining `_<name>` and `complete -F _<name> <name>`; needs no bash-completion.
std::string RenderBashCompletion(const ProgramDoc& program);

/// A zsh script for $fpath (`#compdef <name>`), using _arguments.
std::string RenderZshCompletion(const ProgramDoc& program);

}  // namespace gpuman::render
