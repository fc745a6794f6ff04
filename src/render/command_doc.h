// A plain description of a command line (program, commands, options, tables) that the man
// page and shell completion renderers turn into text. Filled by cli/help_docs.cc from the
// CLI11 tree, so the renderers never see CLI11. Value types only; any thread.
#pragma once

#include <string>
#include <vector>

namespace gpuman::render {

/// What an option's value (or a positional) is, so completion can offer candidates.
enum class ValueKind {
  kNone,      // a flag: takes no value
  kText,      // free text: nothing to offer
  kFile,      // a path
  kScenario,  // a `--simulate` scenario name (`gpuman scenarios`)
  kGpu,       // a GPU index (from `gpuman status --json`)
  kCommand,   // a program to run, then its arguments
  kChoice,    // one of `choices`
};

struct OptionDoc {
  std::vector<std::string> names;  // "-n", "--count"; a positional has its one name
  std::string value_name;          // "INT", "TEXT"; empty for flags
  bool value_optional = false;     // `--wait[=TEXT]`
  bool repeatable = false;         // takes several values
  bool required = false;
  std::string description;
  std::string default_value;       // empty when none is declared
  ValueKind kind = ValueKind::kText;
  std::vector<std::string> choices;  // for kChoice
};

struct CommandDoc {
  std::string name;         // "run"
  std::string summary;      // one line, from the command's description
  std::string footer;       // further text, may be empty
  std::vector<OptionDoc> options;      // in registration order, `-h,--help` included
  std::vector<OptionDoc> positionals;  // in order
  /// The commands above this one, space-separated: "slurm" for `gpuman slurm gres-conf`,
  /// "" for a top-level command.
  std::string parent;
  /// Visible subcommands in registration order (`slurm` has `gres-conf`, ...); a command
  /// with subcommands is run through one of them.
  std::vector<CommandDoc> subcommands;
};

struct TableRow {
  std::string key;      // "2", "GPUMAN_CONFIG", "/etc/gpuman/config.toml"
  std::string meaning;
};

struct ProgramDoc {
  std::string name;         // "gpuman"
  std::string version;      // "0.1.0"
  std::string summary;      // one line for NAME
  std::vector<std::string> description;  // paragraphs for gpuman(1)
  std::vector<OptionDoc> global_options;
  std::vector<CommandDoc> commands;      // visible ones only, in registration order
  std::vector<TableRow> exit_codes;
  std::vector<TableRow> environment;
  std::vector<TableRow> files;
  /// Where gpuman's documents are ("/usr/share/doc/gpuman"): the pages' references to
  /// docs/NAME point there. "" (unknown): they stay docs/NAME, "in the gpuman sources".
  std::string doc_dir;
};

}  // namespace gpuman::render
