// Small string helpers shared by every layer. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace gpuman {

/// Splits on `sep`, keeping empty fields ("a,,b" -> {"a","","b"}).
std::vector<std::string> Split(std::string_view text, char sep);
/// Joins with `sep` between items ({"a", "", "b"}, "," -> "a,,b").
std::string Join(const std::vector<std::string>& items, std::string_view sep);
/// Removes ASCII whitespace at both ends.
std::string_view Trim(std::string_view text);
/// Parses a whole decimal integer; nullopt on any junk, sign or overflow.
std::optional<int64_t> ParseInt(std::string_view text);
/// Parses a whole finite decimal number ("0.5", "-3", "1e3"); nullopt on junk, spaces,
/// "nan", "inf" and out-of-range values.
std::optional<double> ParseFiniteDouble(std::string_view text);
/// Makes control characters visible so that text from outside (the environment, a file)
/// cannot move the cursor or fake lines on a terminal: "\n", "\t", "\r", "\x1b", ...
/// for C0 controls and DEL, "\u009b" for UTF-8 encoded C1 controls. Everything else,
/// backslashes and other UTF-8 included, is kept as is.
std::string EscapeControl(std::string_view text);
/// Lower-cases ASCII letters.
std::string ToLower(std::string_view text);

/// Levenshtein distance (insertions, deletions, substitutions): how far a typed word is
/// from a known one, for "did you mean". Quadratic: for short words.
size_t EditDistance(std::string_view a, std::string_view b);

/// Numbers as a user would write them: sorted, runs as ranges: {0,1,2,5,7,8} -> "0-2,5,7-8".
std::string FormatIndexList(std::vector<int> indices);
/// `text` as one POSIX shell word: unchanged when it is not empty and holds only
/// characters no shell treats specially (letters, digits, `_-.,:/@%+=`), else in single
/// quotes with each ' written as '\''. For lines a shell evals (`select --format env`).
std::string ShellWord(std::string_view text);
/// The words of a command line typed as one argument (`submit --notify 'prog -x "a b"'`),
/// split the way a POSIX shell splits words and nothing more: blanks (space, tab,
/// newline) separate words; '...' keeps everything inside as is; "..." keeps everything
/// but a backslash before ", \, $ or `, which stands for that character; outside quotes a
/// backslash keeps the next character as is. Quotes join with what touches them (a"b"c is
/// one word abc); "" is an empty word. No variables, globs, ~ or ; are interpreted: they
/// are plain characters. Errors: kInvalidArgument "unterminated ' quote", "unterminated \"
/// quote", "a \\ at the end escapes nothing".
Result<std::vector<std::string>> SplitCommandLine(std::string_view text);

/// Slurm's %X patterns: each "%X" for which `value(X)` answers is replaced by the answer,
/// "%%" is one '%', and any other '%' (unknown letter, at the end) is kept as written.
std::string ExpandPercentPatterns(std::string_view pattern,
                                  const std::function<std::optional<std::string>(char)>& value);

/// ISO-8601 UTC with seconds, e.g. "2026-11-30T07:24:15Z".
std::string FormatIsoUtc(int64_t unix_seconds);

}  // namespace gpuman
