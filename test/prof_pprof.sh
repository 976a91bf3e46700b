#!/bin/bash
# The heap profile, read by `go tool pprof`, and the leak report
# (src/prof). Usage: prof_pprof.sh PROF_SITES_PROGRAM
#   malloc: inuse_space 75% +-10 keep_big, 25% +-10 keep_small; churn on
#           top of alloc_space; the midway sl_ctl("prof.dump") and the
#           SLUICE_PROF_GDUMP files read too
#   cache:  the samples name their caches, big_cache on top of inuse_space
#   tiny:   small mallocs' estimates (bytes, objects) within 10% of the truth
#   leak:   the exact report (SLUICE_PROF_SAMPLE=1): each site's bytes and
#           objects, its function, the cache's name; also in checked mode
# The pprof parts are skipped, with a line, where go is not installed.
set -u
prog=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
GO=$(command -v go || echo /usr/local/go/bin/go)

# ---- the leak report (no go needed) ----
for env in "SLUICE_LEAKS=1" "SLUICE_CHECK=1"; do
    env $env SLUICE_PROF_SAMPLE=1 "$prog" leak 2> "$dir/leaks" || fail "leak run ($env) exited $?"
    echo "== leak report ($env)"; head -40 "$dir/leaks"
    grep -q "every allocation was recorded (SLUICE_PROF_SAMPLE=1): the figures are exact" "$dir/leaks" ||
        fail "no exactness line"
    grep -q "leak report: 310320 bytes in 18 objects still allocated at exit, from 3 sites" "$dir/leaks" ||
        fail "wrong totals"
    grep -A2 "^sluice: leak #1: 300000 bytes in 3 objects" "$dir/leaks" | grep -q leak_calloc ||
        fail "biggest site is not leak_calloc's 300000 bytes"
    grep -A2 "^sluice: leak #2: 10000 bytes in 10 objects" "$dir/leaks" | grep -q leak_malloc ||
        fail "second site is not leak_malloc's 10000 bytes"
    grep -A3 "^sluice: leak #3: 320 bytes in 5 objects (5 samples) of object cache 'leaky_cache'" "$dir/leaks" |
        grep -q leak_cache || fail "third site is not leak_cache's 5 objects of leaky_cache"
done
# a buffer grown by realloc, every growth sampled: one site, its last size,
# and growths in place (a sampled growth must not move a block that can grow)
SLUICE_LEAKS=1 SLUICE_PROF_SAMPLE=1 "$prog" grow > "$dir/grow" 2> "$dir/leaks" || fail "grow run exited $?"
cat "$dir/grow"; head -8 "$dir/leaks"
grep -q "leak report: 1000000 bytes in 1 objects still allocated at exit, from 1 site$" "$dir/leaks" ||
    fail "the grown buffer's leak is not its last size at one site"
grep -A2 "^sluice: leak #1: 1000000 bytes in 1 objects" "$dir/leaks" | grep -q leak_grow || fail "the site is not leak_grow"
[ "$(sed -n 's/^in place: //p' "$dir/grow")" -gt 0 ] || fail "no sampled growth stayed in place"
SLUICE_LEAKS=1 "$prog" leak 2> "$dir/leaks" || fail "sampled leak run exited $?"
if grep -q "leak report" "$dir/leaks"; then
    grep -q "sampled, one sample per 524288 bytes allocated on average: the figures are estimates" "$dir/leaks" ||
        fail "a sampled report without its sampling line"
fi

if ! "$GO" version > /dev/null 2>&1; then
    echo "go not found: the pprof checks are skipped"
    exit 0
fi
top() { # profile, sample index: pprof's -top table
    "$GO" tool pprof -top -sample_index="$2" "$1" 2> "$dir/pprof.err" || { cat "$dir/pprof.err"; fail "pprof refused $1"; }
}
share() { # table, function: its flat%, as a whole number
    awk -v f="$2" '$NF == f { sub("%", "", $2); print int($2 + 0.5); exit }' <<< "$1"
}

# ---- malloc family ----
SLUICE_PROF="$dir/heap.%p" SLUICE_PROF_GDUMP=1 "$prog" malloc "$dir/mid.prof" || fail "malloc run exited $?"
prof=$dir/$(ls "$dir" | grep -E '^heap\.[0-9]+$')
[ -f "$prof" ] || fail "no profile written at exit"
inuse=$(top "$prof" inuse_space); echo "$inuse"
big=$(share "$inuse" keep_big); small=$(share "$inuse" keep_small)
[ -n "$big" ] && [ "$big" -ge 65 ] && [ "$big" -le 85 ] || fail "keep_big holds ${big:-no}% of inuse_space, not 75+-10"
[ -n "$small" ] && [ "$small" -ge 15 ] && [ "$small" -le 35 ] || fail "keep_small holds ${small:-no}% of inuse_space, not 25+-10"
[ -z "$(share "$inuse" churn)" ] || [ "$(share "$inuse" churn)" -le 1 ] || fail "churn holds inuse_space"
alloc=$(top "$prof" alloc_space); echo "$alloc"
first=$(awk '/flat%/ { getline; print $NF; exit }' <<< "$alloc")
[ "$first" = churn ] || fail "churn is not on top of alloc_space (but $first)"
mid=$(top "$dir/mid.prof" inuse_space)
[ "$(awk '/flat%/ { getline; print $NF; exit }' <<< "$mid")" = keep_big ] || fail "the midway dump does not show keep_big"
[ -z "$(share "$mid" keep_small)" ] || fail "the midway dump shows keep_small, which came after it"
ngdump=$(ls "$dir" | grep -cE '^heap\.[0-9]+\.[0-9]+$')
[ "$ngdump" -ge 5 ] && [ "$ngdump" -le 60 ] || fail "$ngdump SLUICE_PROF_GDUMP files, not 5 to 60"
last=$dir/$(ls "$dir" | grep -E '^heap\.[0-9]+\.[0-9]+$' | sort -t. -k3 -n | tail -1)
top "$last" inuse_space > /dev/null

# ---- object caches ----
SLUICE_PROF="$dir/cache.prof" "$prog" cache || fail "cache run exited $?"
inuse=$(top "$dir/cache.prof" inuse_space); echo "$inuse"
first=$(awk '/flat%/ { getline; print $NF; exit }' <<< "$inuse")
[ "$first" = cache:big_cache ] || fail "big_cache is not on top of inuse_space (but $first)"
[ -n "$(share "$inuse" cache:small_cache)" ] || fail "no small_cache in inuse_space"
[ -z "$(share "$inuse" cache:churn_cache)" ] || [ "$(share "$inuse" cache:churn_cache)" -le 1 ] ||
    fail "churn_cache holds inuse_space"
[ "$(awk '/flat%/ { getline; print $NF; exit }' <<< "$(top "$dir/cache.prof" alloc_space)")" = cache:churn_cache ] ||
    fail "churn_cache is not on top of alloc_space"
"$GO" tool pprof -tags "$dir/cache.prof" 2>/dev/null | grep -q big_cache || fail "no cache label"
# ---- small mallocs: their classes' countdowns, weighed back to the totals ----
# (a 4 KiB mean: ~2,600 samples, a standard error near 2%; within 10%)
SLUICE_PROF="$dir/tiny.prof" SLUICE_PROF_SAMPLE=4096 "$prog" tiny || fail "tiny run exited $?"
total() { # profile, sample index: the table's total, a plain number
    "$GO" tool pprof -top -unit=B -sample_index="$2" "$1" 2> /dev/null | sed -n 's/.* of \([0-9]*\)B total$/\1/p'
}
near() { # what, got, want: within 10%
    [ -n "$2" ] && awk -v g="$2" -v w="$3" 'BEGIN { exit !(g >= 0.9 * w && g <= 1.1 * w) }' ||
        fail "$1: ${2:-nothing} estimated, not $3 +-10%"
    echo "$1: $2 estimated of $3"
}
near "tiny inuse_space" "$(total "$dir/tiny.prof" inuse_space)" 10560000
near "tiny inuse_objects" "$(total "$dir/tiny.prof" inuse_objects)" 190000
near "tiny alloc_objects" "$(total "$dir/tiny.prof" alloc_objects)" 1190000
inuse=$("$GO" tool pprof -top -sample_index=inuse_objects "$dir/tiny.prof" 2> /dev/null)
[ -n "$(share "$inuse" keep_tiny)" ] && [ "$(share "$inuse" keep_tiny)" -ge 99 ] || fail "keep_tiny does not hold the objects"
echo "prof_pprof: all passed"
