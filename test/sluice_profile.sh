#!/usr/bin/env bash
# sluice run --profile and --flame: the heap profiles of the run (the one
# at exit and the numbered new highs), the summary's top sites at the peak
# and at the end (prof_sites malloc: keep_big holds ~3/4 of the live
# bytes; prof_sites cache: big_cache ~4/5), the flame graph (an SVG that
# names the sites), and a --profile folder refused before the program runs.
set -u
SLUICE=${1:?path to build/sluice}
PROG=${2:?path to build/test/prof_sites}
. "$(dirname "$0")/harness.sh"

if "$SLUICE" run --profile "$W/prof" --flame "$W/flame.svg" -- "$PROG" malloc >/dev/null 2>"$W/err"; then
  cat "$W/err" | sed -n '/^heap profiles/,$p'
  ls "$W/prof" | grep -q '^heap\.[0-9]*\.prof$' && ok "the profile at exit" || bad "no heap.PID.prof: $(ls "$W/prof")"
  ls "$W/prof" | grep -q '^heap\.[0-9]*\.prof\.[0-9]*$' && ok "the new highs" || bad "no heap.PID.prof.N: $(ls "$W/prof")"
  # the peak is the last new high written (an eighth above the one before),
  # which can fall while keep_small is still filling: keep_big's true share
  # there is 75-84%, and each figure is a sampled estimate (about 5% each)
  for when in "at the peak:90" "at the end:85"; do
    high=${when#*:} when=${when%:*}
    line=$(grep -A1 "live memory $when" "$W/err" | tail -1)
    share=$(echo "$line" | awk '{print $3}' | tr -d %)
    if echo "$line" | grep -q "keep_big" && [ "$share" -ge 65 ] && [ "$share" -le "$high" ]; then
      ok "$when: keep_big first, $share%"
    else
      bad "$when: $line"
    fi
  done
  python3 -c "import xml.etree.ElementTree as E, sys; E.parse(sys.argv[1])" "$W/flame.svg" && ok "the flame graph parses" ||
    bad "flame.svg is not XML"
  grep -q "keep_big" "$W/flame.svg" && grep -q "keep_small" "$W/flame.svg" && ok "the flame graph names the sites" ||
    bad "flame.svg lacks keep_big or keep_small"
else
  bad "sluice run --profile exited $?: $(cat "$W/err")"
fi

if "$SLUICE" run --flame "$W/cache.svg" -- "$PROG" cache >/dev/null 2>"$W/err"; then
  line=$(grep -A1 "live memory at the end" "$W/err" | tail -1)
  echo "$line" | grep -q "cache:big_cache" && ok "caches: big_cache first" || bad "caches: $line"
  grep -q "heap profiles: 1 process; sampled" "$W/err" && ok "--flame alone: no folder named" || bad "$(grep 'heap profiles' "$W/err")"
  [ -s "$W/cache.svg" ] && ok "--flame alone draws" || bad "no cache.svg"
else
  bad "sluice run --flame exited $?: $(cat "$W/err")"
fi

touch "$W/file"
"$SLUICE" run --profile "$W/file/sub" -- "$PROG" leak >/dev/null 2>"$W/err"
st=$?
[ $st -eq 2 ] && grep -q "^sluice: --profile" "$W/err" && ok "--profile under a file: refused ($(cat "$W/err"))" ||
  bad "--profile under a file: exit $st, $(cat "$W/err")"
finish sluice_profile
