#include "render/completion_script.h"

#include <cctype>
#include <string_view>

namespace gpuman::render {
namespace {

std::string Join(const std::vector<std::string>& items, std::string_view sep = " ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(sep)) + item;
  return out;
}

std::vector<std::string> OptionNames(const std::vector<OptionDoc>& options) {
  std::vector<std::string> names;
  for (const auto& opt : options) names.insert(names.end(), opt.names.begin(), opt.names.end());
  return names;
}

// Shell function names are [A-Za-z0-9_]; command names may carry '-'.
std::string Ident(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

const char* KindWord(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNone: return "none";
    case ValueKind::kText: return "text";
    case ValueKind::kFile: return "file";
    case ValueKind::kScenario: return "scenario";
    case ValueKind::kGpu: return "gpu";
    case ValueKind::kCommand: return "command";
    case ValueKind::kChoice: return "choice";
  }
  return "text";
}

// `case "$prev" in` arms for the options that need a value after them. Options whose value
// is optional are left out: the next word may as well be another option.
std::string ValueArms(const std::vector<OptionDoc>& options, const std::string& indent) {
  std::string out;
  for (const auto& opt : options) {
    if (opt.kind == ValueKind::kNone || opt.value_optional || opt.names.empty()) continue;
    out += indent + Join(opt.names, "|") + ") _" + "gpuman_value " + KindWord(opt.kind);
    if (opt.kind == ValueKind::kChoice) out += " " + Join(opt.choices);
    out += "; return 0 ;;\n";
  }
  return out;
}

// zsh _arguments specs are ':'-separated and '[...]'-delimited; quote for '...'.
std::string ZshText(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else if (c == '[' || c == ']' || c == ':' || c == '\\') out += std::string("\\") + c;
    else out += c;
  }
  return out;
}

std::string ZshAction(const OptionDoc& opt) {
  switch (opt.kind) {
    case ValueKind::kFile: return "_files";
    case ValueKind::kScenario: return "_gpuman_scenarios";
    case ValueKind::kGpu: return "_gpuman_gpus";
    case ValueKind::kCommand: return "_command_names -e";
    case ValueKind::kChoice: return "(" + Join(opt.choices) + ")";
    default: return " ";
  }
}

std::string ZshOptionSpecs(const std::vector<OptionDoc>& options, const std::string& indent) {
  std::string out;
  for (const auto& opt : options) {
    const std::string desc = "[" + ZshText(opt.description) + "]";
    std::string value;
    if (opt.kind != ValueKind::kNone) {
      value = (opt.value_optional ? "::" : ":") + ZshText(opt.value_name.empty() ? "value" : opt.value_name) +
              ":" + ZshAction(opt);
    }
    const std::string rep = opt.repeatable ? "*" : "";
    const std::string tail = std::string(opt.value_optional ? "=-" : "") + desc + value;
    if (opt.names.size() == 1) {
      out += indent + "'" + rep + opt.names[0] + tail + "' \\\n";
    } else {
      const std::string exclusion = rep.empty() ? "(" + Join(opt.names) + ")" : rep;
      out += indent + "'" + exclusion + "'{" + Join(opt.names, ",") + "}'" + tail + "' \\\n";
    }
  }
  return out;
}

// The `_arguments` call completing one command's options and positionals; for a command
// with subcommands, their names, then the chosen one's (`$line[1]` after `*::`).
std::string ZshCommandArm(const std::string& program, const CommandDoc& cmd, const std::string& indent) {
  std::string out;
  if (!cmd.subcommands.empty()) {
    out += indent + "_arguments -C \\\n" + ZshOptionSpecs(cmd.options, indent + "  ") + indent +
           "  '1: :->subcommand' \\\n" + indent + "  '*:: :->subargs' && ret=0\n";
    out += indent + "case $state in\n";
    out += indent + "  subcommand)\n";
    out += indent + "    local -a subcommands\n";
    out += indent + "    subcommands=(";
    for (const auto& sub : cmd.subcommands) out += " '" + sub.name + ":" + ZshText(sub.summary) + "'";
    out += " )\n";
    out += indent + "    _describe -t commands '" + cmd.name + " command' subcommands && ret=0 ;;\n";
    out += indent + "  subargs)\n";
    out += indent + "    curcontext=${curcontext%:*:*}:" + program + "-" + cmd.name + "-$line[1]:\n";
    out += indent + "    case $line[1] in\n";
    for (const auto& sub : cmd.subcommands) {
      out += indent + "      " + sub.name + ")\n" + ZshCommandArm(program, sub, indent + "        ") + indent + "        ;;\n";
    }
    out += indent + "    esac ;;\n";
    out += indent + "esac\n";
    return out;
  }
  out += indent + "_arguments \\\n" + ZshOptionSpecs(cmd.options, indent + "  ");
  for (size_t i = 0; i < cmd.positionals.size(); ++i) {
    const OptionDoc& pos = cmd.positionals[i];
    const std::string name = ZshText(pos.names.empty() ? std::string("arg") : pos.names.front());
    if (pos.kind == ValueKind::kCommand) {
      out += indent + "  '(-)*::" + name + ":_normal' \\\n";
    } else {
      out += indent + "  '" + std::string(pos.repeatable ? "*" : "") + ":" + name + ":" + ZshAction(pos) + "' \\\n";
    }
  }
  out += indent + "  && ret=0\n";
  return out;
}

// The body of a command's `case $cmd` arm: what `$prev` needs, the options, the first
// positional. A command with subcommands completes their names first, then (once `$sub`
// is one of them) that subcommand's arm.
std::string BashArm(const CommandDoc& cmd, const std::string& indent) {
  std::string out;
  out += indent + "case $prev in\n" + ValueArms(cmd.options, indent + "  ") + indent + "esac\n";
  out += indent + "opts='" + Join(OptionNames(cmd.options)) + "'\n";
  if (!cmd.positionals.empty()) {
    const OptionDoc& pos = cmd.positionals.front();
    out += indent + "positional=" + std::string(KindWord(pos.kind)) + "\n";
    if (pos.kind == ValueKind::kChoice) out += indent + "choices=(" + Join(pos.choices) + ")\n";
  }
  return out;
}

std::string BashCommandArm(const CommandDoc& cmd, const std::string& indent) {
  if (cmd.subcommands.empty()) return BashArm(cmd, indent);
  std::vector<std::string> names;
  for (const auto& sub : cmd.subcommands) names.push_back(sub.name);
  std::string out;
  out += indent + "if [[ -z $sub ]]; then\n";
  out += BashArm(cmd, indent + "  ");
  out += indent + "  positional=choice\n";
  out += indent + "  choices=(" + Join(names) + ")\n";
  out += indent + "else\n";
  out += indent + "  case $sub in\n";
  for (const auto& sub : cmd.subcommands) {
    out += indent + "    " + sub.name + ")\n" + BashArm(sub, indent + "      ") + indent + "      ;;\n";
  }
  out += indent + "    *) return 0 ;;\n";
  out += indent + "  esac\n";
  out += indent + "fi\n";
  return out;
}

}  // namespace

std::string RenderBashCompletion(const ProgramDoc& program) {
  std::vector<std::string> commands;
  for (const auto& cmd : program.commands) commands.push_back(cmd.name);
  const std::string fn = "_" + Ident(program.name);

  std::string out;
  out += "# bash completion for " + program.name + "\n";
  out += "# Generated by `" + program.name + " completion bash` from its command definitions; do not edit.\n";
  out += "# Use: source <(" + program.name + " completion bash), or install as\n";
  out += "# /usr/share/bash-completion/completions/" + program.name + ".\n\n";

  // Candidates for one value; $cur, $bin and $globals come from the caller (dynamic scope).
  out += "_gpuman_value() {\n"
         "  local kind=$1; shift\n"
         "  case $kind in\n"
         "    file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
         "    scenario) COMPREPLY=($(compgen -W \"$(\"$bin\" scenarios 2>/dev/null)\" -- \"$cur\")) ;;\n"
         "    gpu) COMPREPLY=($(compgen -W \"$(\"$bin\" \"${globals[@]}\" status --json 2>/dev/null |\n"
         "           sed -n 's/^ *\"index\": *\\([0-9][0-9]*\\).*/\\1/p')\" -- \"$cur\")) ;;\n"
         "    command) COMPREPLY=($(compgen -c -- \"$cur\")) ;;\n"
         "    choice) COMPREPLY=($(compgen -W \"$*\" -- \"$cur\")) ;;\n"
         "    *) COMPREPLY=() ;;\n"
         "  esac\n"
         "}\n\n";

  // Global options that take a value: skipped over when looking for the command, and passed
  // on to the binary for dynamic candidates (so `--simulate X` lists X's GPUs).
  std::vector<std::string> global_valued;
  for (const auto& opt : program.global_options) {
    if (opt.kind != ValueKind::kNone && !opt.value_optional) {
      global_valued.insert(global_valued.end(), opt.names.begin(), opt.names.end());
    }
  }

  out += fn + "() {\n";
  out += "  local cur=${COMP_WORDS[COMP_CWORD]} prev='' bin=${COMP_WORDS[0]} cmd='' sub='' word i dashdash=0\n";
  out += "  local -a globals=()\n";
  out += "  (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}\n";
  out += "  for (( i = 1; i < COMP_CWORD; i++ )); do\n";
  out += "    word=${COMP_WORDS[i]}\n";
  out += "    case $word in\n";
  if (!global_valued.empty()) {
    out += "      " + Join(global_valued, "|") + ") globals+=(\"$word\" \"${COMP_WORDS[i+1]}\"); (( i++ )) ;;\n";
  }
  out += "      --) [[ -n $cmd ]] && { dashdash=$i; break; } ;;\n";
  out += "      -*) ;;\n";
  out += "      *) if [[ -n $cmd ]]; then [[ -z $sub ]] && sub=$word; else cmd=$word; fi ;;\n";
  out += "    esac\n";
  out += "  done\n";
  out += "  COMPREPLY=()\n";
  // After `--`: the program to run, then its arguments.
  out += "  if (( dashdash > 0 )); then\n";
  out += "    if (( COMP_CWORD == dashdash + 1 )); then _gpuman_value command; else _gpuman_value file; fi\n";
  out += "    return 0\n";
  out += "  fi\n";
  out += "  case $prev in\n" + ValueArms(program.global_options, "    ") + "  esac\n";
  out += "  if [[ -z $cmd ]]; then\n";
  out += "    if [[ $cur == -* ]]; then\n";
  out += "      COMPREPLY=($(compgen -W '" + Join(OptionNames(program.global_options)) + "' -- \"$cur\"))\n";
  out += "    else\n";
  out += "      COMPREPLY=($(compgen -W '" + Join(commands) + "' -- \"$cur\"))\n";
  out += "    fi\n";
  out += "    return 0\n";
  out += "  fi\n";
  out += "  local opts='' positional=none\n";
  out += "  local -a choices=()\n";
  out += "  case $cmd in\n";
  for (const auto& cmd : program.commands) {
    out += "    " + cmd.name + ")\n" + BashCommandArm(cmd, "      ") + "      ;;\n";
  }
  out += "    *) return 0 ;;\n";
  out += "  esac\n";
  out += "  if [[ $cur == -* ]]; then\n";
  out += "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n";
  out += "  else\n";
  out += "    _gpuman_value \"$positional\" \"${choices[@]}\"\n";
  out += "  fi\n";
  out += "  return 0\n";
  out += "}\n\n";
  out += "complete -F " + fn + " " + program.name + "\n";
  return out;
}

std::string RenderZshCompletion(const ProgramDoc& program) {
  std::string out;
  out += "#compdef " + program.name + "\n";
  out += "# zsh completion for " + program.name + "\n";
  out += "# Generated by `" + program.name + " completion zsh` from its command definitions; do not edit.\n";
  out += "# Use: " + program.name + " completion zsh > ~/.zfunc/_" + program.name +
         " (with ~/.zfunc in $fpath), or: source <(" + program.name + " completion zsh)\n\n";
  out += "_gpuman_scenarios() {\n"
         "  local -a names; names=(${(f)\"$(${words[1]} scenarios 2>/dev/null)\"})\n"
         "  compadd -a names\n"
         "}\n"
         "_gpuman_gpus() {\n"
         "  local -a ids\n"
         "  ids=(${(f)\"$(${words[1]} status --json 2>/dev/null | sed -n 's/^ *\"index\": *\\([0-9][0-9]*\\).*/\\1/p')\"})\n"
         "  compadd -a ids\n"
         "}\n\n";
  const std::string fn = "_" + Ident(program.name);
  out += fn + "() {\n";
  out += "  local curcontext=$curcontext state line ret=1\n";
  out += "  local -a commands\n";
  out += "  commands=(\n";
  for (const auto& cmd : program.commands) {
    out += "    '" + cmd.name + ":" + ZshText(cmd.summary) + "'\n";
  }
  out += "  )\n";
  out += "  _arguments -C \\\n" + ZshOptionSpecs(program.global_options, "    ") +
         "    '1: :->command' \\\n    '*:: :->args' && ret=0\n";
  out += "  case $state in\n";
  out += "    command) _describe -t commands command commands && ret=0 ;;\n";
  out += "    args)\n";
  out += "      curcontext=${curcontext%:*:*}:" + program.name + "-$line[1]:\n";
  out += "      case $line[1] in\n";
  for (const auto& cmd : program.commands) {
    out += "        " + cmd.name + ")\n" + ZshCommandArm(program.name, cmd, "          ") + "          ;;\n";
  }
  out += "      esac ;;\n";
  out += "  esac\n";
  out += "  return ret\n";
  out += "}\n\n";
  out += "if [[ $funcstack[1] == " + fn + " ]]; then\n";
  out += "  " + fn + " \"$@\"\n";
  out += "else\n";
  out += "  compdef " + fn + " " + program.name + "\n";
  out += "fi\n";
  return out;
}

}  // namespace gpuman::render
