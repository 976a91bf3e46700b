#!/bin/bash
# Rewrite cmake/hot-text.ld (tools/hot_text.py) from callgrind profiles of
# mimalloc-bench's small programs and of test/lib_rss, run with the built
# library preloaded (bench.sh's arguments, a few smaller under callgrind;
# glibc-simple alone is 26 G instructions: ~30 min in all on a quiet
# machine). Run it when lib_rss finds more than one 64 KiB window of text
# resident, or after functions on the malloc and free paths were renamed.
#   bench/hot_text.sh [OUT_DIR]      (after make; needs valgrind)
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/build/libsluice.so
bench=${SLUICE_BENCH_MIMALLOC_BENCH:-/work/peers/mimalloc-bench/out/bench}
out=${1:-$(mktemp -d)}
mkdir -p "$out"
run() { # name, program and arguments (in the bench folder)
    local name=$1
    shift
    (cd "$bench" && env -i PATH=/usr/bin:/bin valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$out/cg.$name.out" env LD_PRELOAD="$lib" "$@" >/dev/null 2>"$out/$name.err")
}
run simple ./glibc-simple
run thread ./glibc-thread 2
run espresso ./espresso ../../bench/espresso/largest.espresso
run cfrac ./cfrac 17545186520507317056371138836327483792789528
run mleak ./mleak 5
run mstress ./mstress 2 50 5
run scratch ./cache-scratch 1 1000 1 20000 2
run larson ./larson 1 8 1000 5000 100 4141 2
env -i PATH=/usr/bin:/bin valgrind --tool=callgrind --callgrind-out-file="$out/cg.lib_rss.out" \
    "$root/build/test/lib_rss" >/dev/null 2>"$out/lib_rss.err"
python3 "$root/tools/hot_text.py" --so "$lib" "$out"/cg.*.out >"$root/cmake/hot-text.ld"
echo "cmake/hot-text.ld written from $out; rebuild and run lib_rss"
