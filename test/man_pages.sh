#!/usr/bin/env bash
# The man pages (docs/man/, docs/man/README.md): every public name has a
# page, every page renders under man without a groff warning, the pages and
# the README's option table that tools/doc_tables.py writes from the tables
# are current, sluice(1) names every option of the command, and `make
# install` puts every page where `man NAME` finds it.
set -u
BUILD=${1:?the build tree}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAN=$ROOT/docs/man
. "$(dirname "$0")/harness.sh"

# the pages: docs/man/NAME.S written by hand, build/man/NAME.S from NAME.S.in
pages=$(cd "$MAN" && ls | grep -E '\.[1-8]$')
generated=$(cd "$MAN" && ls | grep -E '\.[1-8]\.in$' | sed 's/\.in$//')
path_of() { if [ -f "$MAN/$1" ]; then echo "$MAN/$1"; else echo "$BUILD/man/$1"; fi; }

# every SL_API name of include/sluice.h has a page of its own or an alias
missing=""
for name in $(grep -o 'SL_API [^(;]*[ *]sl_[a-z_0-9]*(' "$ROOT/include/sluice.h" | grep -o 'sl_[a-z_0-9]*($' | tr -d '('); do
  [ -f "$MAN/$name.3" ] || [ -f "$MAN/$name.3.in" ] || missing="$missing $name"
done
[ -z "$missing" ] && ok "every SL_API name of include/sluice.h has a man page" ||
  for name in $missing; do
    bad "no man page for $name: add docs/man/$name.3, a page of its own, or the one line '.so man3/PAGE.3' naming the page that documents it (and list $name in that page's NAME section)"
  done

# the generated pages are current, and so is the README's option table
CC=${CC:-cc} python3 "$ROOT/tools/doc_tables.py" man "$W/fresh" || bad "tools/doc_tables.py man failed"
for p in $generated; do
  cmp -s "$W/fresh/$p" "$BUILD/man/$p" && ok "$p is current" || bad "build/man/$p differs from a fresh tools/doc_tables.py run (rebuild)"
done
out=$(python3 "$ROOT/tools/doc_tables.py" readme 2>&1) && ok "README's option table is SL_OPTION_LIST's" || bad "$out"

# each page renders without a warning; an alias names a page that exists
# and lists the alias's name
for p in $pages $generated; do
  f=$(path_of "$p")
  target=$(sed -n 's/^\.so man[1-8]\/\(.*\)$/\1/p' "$f")
  if [ -n "$target" ]; then
    name=${p%.*}
    tf=$(path_of "$target")
    if [ ! -f "$tf" ]; then
      bad "$p is an alias of $target, which is not in docs/man"
    elif sed -n '/^\.SH NAME/,/^\.SH SYNOPSIS/p' "$tf" | grep -qw -- "$name"; then
      ok "$p: an alias of $target, whose NAME lists it"
    else
      bad "$p: an alias of $target, whose NAME section does not list $name"
    fi
    continue
  fi
  warn=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
  [ -z "$warn" ] && ok "$p: no groff warning" || bad "$p: $warn"
  MANWIDTH=100 man -l "$f" >"$W/$p.txt" 2>"$W/err" && [ -s "$W/$p.txt" ] && [ ! -s "$W/err" ] && ok "$p renders" ||
    bad "$p: man -l: $(cat "$W/err")"
done

# sluice(1) names every option of the command; sluice_options(7) every
# option; sl_stat(3) every statistic
missing=""
for opt in $("$BUILD/sluice" run --help | grep -o '^  --[a-z-]*'); do
  grep -q -- "$opt" "$W/sluice.1.txt" || missing="$missing $opt"
done
[ -z "$missing" ] && ok "sluice(1) names every option of sluice run --help" || bad "sluice(1) lacks:$missing"
missing=""
for name in $(grep -o '"SLUICE_[A-Z_]*"' "$ROOT/src/options/options.h" | tr -d '"'); do
  grep -q -- "$name" "$W/sluice_options.7.txt" || missing="$missing $name"
done
[ -z "$missing" ] && ok "sluice_options(7) names every option" || bad "sluice_options(7) lacks:$missing"
missing=""
for name in $(grep -o 'X([a-z_0-9]*, "' "$ROOT/src/stats/stats.h" | sed 's/X(\([a-z_0-9]*\),.*/\1/'); do
  grep -qw -- "$name" "$W/sl_stat.3.txt" || missing="$missing $name"
done
[ -z "$missing" ] && ok "sl_stat(3) names every statistic" || bad "sl_stat(3) lacks:$missing"

# installed, `man NAME` finds every public name, the command and the options
keep_manifest "$BUILD"
cmake --install "$BUILD" --prefix "$W/prefix" >/dev/null 2>&1 || bad "cmake --install failed"
missing=""
for name in sluice sluice_options $(grep -o 'SL_API [^(;]*[ *]sl_[a-z_0-9]*(' "$ROOT/include/sluice.h" | grep -o 'sl_[a-z_0-9]*($' | tr -d '('); do
  MANPATH="$W/prefix/share/man" MANWIDTH=200 man "$name" 2>/dev/null | grep -qw -- "$name" || missing="$missing $name"
done
[ -z "$missing" ] && ok "man NAME finds an installed page for every name" || bad "man finds no installed page for:$missing"
finish man_pages
