#!/bin/bash
# Instructions per malloc(64)+free pair under sluice and the peers, counted
# by callgrind as (I(2M pairs) - I(1M pairs)) / 1M (the loop's own few
# instructions included). A count, not a time: steady on a noisy machine.
#   bench/pair.sh        (after make; needs valgrind)
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
prog=$root/build/bench/bench_pair
lib=/usr/lib/x86_64-linux-gnu
count() { # LD_PRELOAD value, pairs
    LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$2" 2>&1 |
        sed -n 's/.*Collected : //p' | tr -d ,
}
printf "| allocator | instructions per pair |\n|---|---|\n"
for a in "sluice $root/build/libsluice.so" "glibc " "jemalloc $lib/libjemalloc.so.2" \
         "tcmalloc $lib/libtcmalloc_minimal.so.4" "mimalloc $lib/libmimalloc.so.2"; do
    set -- $a
    [ -n "$2" ] && [ ! -e "$2" ] && continue
    one=$(count "$2" 1000000)
    two=$(count "$2" 2000000)
    printf "| %s | %s |\n" "$1" "$(echo "scale=1; ($two - $one) / 1000000" | bc)"
done
