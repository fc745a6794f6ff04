#!/usr/bin/env bash
# The real binary: `help` is `--help`, the bash completion script parses and completes,
# and the generated man pages render without warnings. Needs GPUMAN_BIN and
# GPUMAN_BUILD_DIR (CTest sets them); exit 77 = skipped.
set -euo pipefail

bin=${GPUMAN_BIN:?}
build=${GPUMAN_BUILD_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# help COMMAND == COMMAND --help, help == --help, for every command in the list.
"$bin" help >"$tmp/a"
"$bin" --help >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || fail "gpuman help differs from gpuman --help"
"$bin" help run >"$tmp/a"
"$bin" run --help >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || fail "gpuman help run differs from gpuman run --help"
grep -q '^Usage: gpuman run' "$tmp/a" || fail "gpuman help run: no usage line"

# An unknown command: one error line, exit 2.
set +e
"$bin" help frobnicate >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[[ $rc == 2 ]] || fail "help frobnicate: exit $rc, want 2"
[[ $(cat "$tmp/err") == "gpuman: error: help: no command 'frobnicate' (see gpuman --help)" ]] ||
  fail "help frobnicate: stderr: $(cat "$tmp/err")"
[[ ! -s $tmp/out ]] || fail "help frobnicate wrote to stdout"

# Bash completion: parses, registers, completes.
"$bin" completion bash >"$tmp/gpuman.bash"
bash -n "$tmp/gpuman.bash" || fail "completion bash: syntax error"
cmp -s "$tmp/gpuman.bash" "$build/completion/gpuman" || fail "build/completion/gpuman is stale"
if command -v zsh >/dev/null; then
  "$bin" completion zsh | zsh -n || fail "completion zsh: syntax error"
fi
cat >"$tmp/drive.bash" <<'DRIVE'
source "$1"
complete -p gpuman | grep -q -- '-F _gpuman gpuman' || { echo "not registered"; exit 1; }
bin=$2
# comp WORD... : the candidates for the last word, one per line
comp() {
  COMP_WORDS=("$bin" "$@"); COMP_CWORD=$#
  COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _gpuman "$bin" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  printf '%s\n' "${COMPREPLY[@]}"
}
[[ $(comp ru) == run ]] || { echo "ru -> $(comp ru)"; exit 1; }
[[ $(comp --simulate a100- | tr '\n' ' ') == 'a100-4 a100-mig ' ]] || { echo "--simulate a100- -> $(comp --simulate a100-)"; exit 1; }
[[ $(comp --simulate a100-4 run --gpus '' | tr '\n' ' ') == '0 1 2 3 ' ]] ||
  { echo "--gpus -> $(comp --simulate a100-4 run --gpus '')"; exit 1; }
comp run --allow | grep -qx -- --allow-shared || { echo "run --allow -> $(comp run --allow)"; exit 1; }
comp logs - | grep -qx -- --follow || { echo "logs - -> $(comp logs -)"; exit 1; }
[[ $(comp completion z) == zsh ]] || { echo "completion z -> $(comp completion z)"; exit 1; }
comp run -- ba | grep -qx bash || { echo "run -- ba -> $(comp run -- ba)"; exit 1; }
comp slurm '' | grep -qx gres-conf || { echo "slurm '' -> $(comp slurm '')"; exit 1; }
[[ $(comp slurm gres-conf --ch) == --check ]] || { echo "slurm gres-conf --ch -> $(comp slurm gres-conf --ch)"; exit 1; }
[[ -z $(comp slurm gres-conf --ver) ]] || { echo "slurm gres-conf --ver -> $(comp slurm gres-conf --ver)"; exit 1; }
DRIVE
out=$(bash --norc --noprofile "$tmp/drive.bash" "$tmp/gpuman.bash" "$bin" 2>&1) || fail "completion: $out"

# Man pages: one per command, rendering without warnings.
command -v man >/dev/null && command -v groff >/dev/null || { echo "SKIP: man/groff not installed"; exit 77; }
[[ -f $build/man/gpuman-run.1 ]] || fail "no $build/man/gpuman-run.1 (target gpuman_man)"
for cmd in $("$bin" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }'); do
  [[ -f $build/man/gpuman-$cmd.1 ]] || fail "no man page for $cmd"
done
for sub in $("$bin" slurm --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF { print $1 }'); do
  [[ -f $build/man/gpuman-slurm-$sub.1 ]] || fail "no man page for slurm $sub"
done
[[ -f $build/man/gpuman-slurm-gres-conf.1 ]] || fail "no man page for slurm gres-conf"
for page in "$build"/man/*.1; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [[ -z $warnings ]] || fail "$page: $warnings"
done
warnings=$(MANWIDTH=80 man -l "$build/man/gpuman-run.1" 2>&1 >"$tmp/run.txt")
[[ -z $warnings ]] || fail "man -l gpuman-run.1: $warnings"
grep -Eq 'gpuman-run +- +Lease GPUs' "$tmp/run.txt" || fail "man -l gpuman-run.1: no NAME line"
grep -q -- '--min-free-memory' "$tmp/run.txt" || fail "man -l gpuman-run.1: option missing"
echo PASS
