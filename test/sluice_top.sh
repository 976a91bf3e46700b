#!/usr/bin/env bash
# sluice top PID (tools/sluice.py): the object caches of a running program
# that publishes its statistics, from the published file's "caches" rows:
# one snapshot (--once), sorted by the memory of the caches; the live view
# until the program ends; and the refusals (no such process, a process
# that does not publish).
set -u
SLUICE=${1:?path to build/sluice}
LIB=${2:?path to libsluice.so}
. "$(dirname "$0")/harness.sh"

# a program with many 600-byte objects and a few 3000-byte ones (malloc's:
# python's own allocator keeps those up to 512 bytes), alive
# until $W/stop appears
cat >"$W/prog.py" <<'PY'
import os, sys, time
small = [bytearray(600) for _ in range(30000)]
big = [bytearray(3000) for _ in range(40)]
open(sys.argv[1] + "/ready", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1] + "/stop") and time.monotonic() < deadline:
    time.sleep(0.02)
PY
SLUICE_PUBLISH="$W/%p.json" LD_PRELOAD="$LIB" /usr/bin/python3 "$W/prog.py" "$W" &
pid=$!
wait_for() { # file: there within 30 s
  for _ in $(seq 1500); do [ -e "$1" ] && return 0; sleep 0.02; done
  return 1
}
wait_for "$W/ready" || bad "the program did not start"
# a publication after the objects were made (the reclaimer's tick)
rm -f "$W/$pid.json"
wait_for "$W/$pid.json" || bad "nothing published"
if "$SLUICE" top --once "$pid" >"$W/top" 2>"$W/err"; then
  ok "top --once"
  head -1 "$W/top" | grep -q "^sluice top: pid $pid" && ok "header names the pid" || bad "header: $(head -1 "$W/top")"
  grep -q "OBJS *ACTIVE *USE *OBJ SIZE" "$W/top" && ok "column heads" || bad "no column heads"
  # the 600-byte buffers (601 bytes: class 640) hold the most memory: first row
  first=$(awk '/OBJS/ {getline; print $NF; exit}' "$W/top")
  [ "$first" = "malloc-640" ] && ok "sorted by memory: malloc-640 first" || bad "first row $first: $(cat "$W/top")"
  awk '$NF == "malloc-640" && $2 >= 30000 {found = 1} END {exit !found}' "$W/top" &&
    ok "malloc-640 holds the 30000 objects" || bad "malloc-640's row: $(grep malloc-640 "$W/top")"
  grep -q " malloc-3072$" "$W/top" && ok "the 3000-byte objects' class listed" || bad "no malloc-3072"
else
  bad "top --once failed: $(cat "$W/err")"
fi
# the live view: refreshed until the program ends, then it exits by itself
"$SLUICE" top --interval 0.1 "$pid" >"$W/live" 2>"$W/err" &
top=$!
for _ in $(seq 1500); do [ "$(grep -c 'sluice top: pid' "$W/live" 2>/dev/null)" -ge 2 ] 2>/dev/null && break; sleep 0.02; done
touch "$W/stop"
wait "$pid"
if wait "$top"; then ok "live view exits when the program ends"; else bad "live view: $(cat "$W/err")"; fi
n=$(grep -c 'sluice top: pid' "$W/live")
[ "$n" -ge 2 ] && ok "live view refreshed ($n screens)" || bad "live view: $n screens"
grep -q $'\033\[H' "$W/live" && ok "live view redraws the screen" || bad "no redraw"
# refusals
"$SLUICE" top --once 999999999 >/dev/null 2>"$W/err"
[ $? -eq 1 ] && grep -q "process 999999999" "$W/err" && ok "no such process" || bad "no such process: $(cat "$W/err")"
sleep 30 &
quiet=$!
"$SLUICE" top --once "$quiet" >/dev/null 2>"$W/err"
[ $? -eq 2 ] && grep -q "does not publish" "$W/err" && ok "a process that does not publish" ||
  bad "not publishing: $(cat "$W/err")"
kill "$quiet"
finish sluice_top
