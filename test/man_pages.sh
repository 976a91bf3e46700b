#!/usr/bin/env bash
# The man pages (tools/man.py): up to date with their sources, rendered by
# man -l without a groff warning, and complete: every SLUICE_ option, every
# statistic and every sl_ function in sluice(3); every option of the
# command in sluice(1).
set -u
BUILD=${1:?the build tree}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/harness.sh"

python3 "$ROOT/tools/man.py" "$W/fresh" "$BUILD/sluice"
for p in sluice.1 sluice.3; do
  cmp -s "$W/fresh/$p" "$BUILD/man/$p" && ok "$p is current" || bad "$p differs from a fresh tools/man.py run"
  warn=$(groff -man -Tutf8 -ww -z "$BUILD/man/$p" 2>&1)
  [ -z "$warn" ] && ok "$p: no groff warning" || bad "$p: $warn"
  MANWIDTH=100 man -l "$BUILD/man/$p" >"$W/$p.txt" 2>"$W/err" && [ -s "$W/$p.txt" ] && ok "$p renders" ||
    bad "$p: man -l: $(cat "$W/err")"
done
missing=""
for name in $(grep -o '"SLUICE_[A-Z_]*"' "$ROOT/src/options/options.h" | tr -d '"') \
            $(grep -o 'X([a-z_0-9]*, "' "$ROOT/src/stats/stats.h" "$ROOT/src/stats/stats.c" | sed 's/.*X(\([a-z_0-9]*\),.*/\1/') \
            $(grep -o 'SL_API [^(]*(' "$ROOT/include/sluice.h" | grep -o 'sl_[a-z_]*'); do
  grep -q -- "$name" "$W/sluice.3.txt" || missing="$missing $name"
done
[ -z "$missing" ] && ok "sluice(3) names every option, statistic and function" || bad "sluice(3) lacks:$missing"
missing=""
for opt in --interval --json --plot --compare; do
  grep -q -- "$opt" "$W/sluice.1.txt" || missing="$missing $opt"
done
[ -z "$missing" ] && ok "sluice(1) names every option" || bad "sluice(1) lacks:$missing"
# every function of the API finds a page once installed (man sl_cache_alloc)
keep_manifest "$BUILD"
cmake --install "$BUILD" --prefix "$W/prefix" >/dev/null 2>&1 || bad "cmake --install failed"
missing=""
for name in $(grep -o '\bsl_[a-z_0-9]*(' "$ROOT/include/sluice.h" | tr -d '(' | sort -u); do
  page=$(MANPATH="$W/prefix/share/man" man -w "$name" 2>/dev/null)
  [ -n "$page" ] && MANPATH="$W/prefix/share/man" MANWIDTH=100 man "$name" 2>/dev/null | grep -q "sl_cache_create" ||
    missing="$missing $name"
done
[ -z "$missing" ] && ok "man NAME finds sluice(3) for every function" || bad "no page for:$missing"
finish man_pages
