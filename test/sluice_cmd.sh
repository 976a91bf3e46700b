#!/usr/bin/env bash
# The sluice command (tools/sluice.py, built as build/sluice): a real
# program's timeline and summary, the JSON it writes, --compare, --plot
# (or its clear refusal without matplotlib), and the failure paths: a
# program that is not found, a static and a setuid one (no LD_PRELOAD),
# a crash (signal passed on) and an exit status passed on.
set -u
SLUICE=${1:?path to build/sluice}
. "$(dirname "$0")/harness.sh"
expect() { # name wanted-status stderr-pattern command...
  local name=$1 want=$2 pat=$3; shift 3
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, wanted $want: $(tail -3 "$W/err")"; return 1; fi
  if [ -n "$pat" ] && ! grep -q -- "$pat" "$W/err"; then bad "$name: no '$pat' on stderr: $(tail -3 "$W/err")"; return 1; fi
  ok "$name"
}

cat >"$W/prog.py" <<'PY'
import time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
bufs = [bytearray(100000) for _ in range(2500)]   # about 250 MB in page runs
time.sleep(0.4)
peak = rss()
bufs.clear()
deadline = time.monotonic() + 30                  # a condition with a deadline, not a sleep
while rss() > peak / 2 and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.4)                                   # a sample and a publish after it
PY
if expect "run python3" 0 "peak RSS" "$SLUICE" run --json "$W/run.json" -- /usr/bin/python3 "$W/prog.py"; then
  /usr/bin/python3 - "$W/run.json" <<'PY' && ok "timeline json" || bad "timeline json"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["runs"]["sluice"]
s = r["samples"]
assert len(s) >= 5, len(s)
peak = max(x["rss_bytes"] for x in s)
assert peak >= 200 << 20, peak                       # the kernel saw the buffers
assert s[-1]["rss_bytes"] < peak / 2, s[-1]          # and saw them go back
mine = [x for x in s if "dirty_bytes" in x]          # sluice published while running
assert len(mine) >= 3, len(mine)
assert max(x["dirty_bytes"] + x["lazy_bytes"] for x in mine) > 0   # freed, kept for a while
assert mine[-1]["madvise_calls"] > mine[0]["madvise_calls"], mine    # then purged, as it ran
f = r["final"]
assert f["counters"]["alloc_medium"] >= 2500, f["counters"]["alloc_medium"]
assert "block_rss_bytes" in f["gauges"] and f["gauges"]["block_rss_bytes"] > 0   # read at exit
assert r["exit"] == {"status": 0, "signal": None}, r["exit"]
PY
fi
expect "summary line: madvise" 0 "madvise calls" "$SLUICE" run -- /usr/bin/python3 -c "x = [bytes(70000) for _ in range(100)]"
expect "not found" 127 "command not found" "$SLUICE" run -- "$W/no-such-program"
expect "exit status passed on" 3 "" "$SLUICE" run -- /usr/bin/python3 -c "import sys; sys.exit(3)"
expect "crash: signal passed on" 139 "killed by signal 11 (SIGSEGV)" \
  "$SLUICE" run -- /usr/bin/python3 -c "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
printf 'int main(void) { return 0; }\n' >"$W/s.c"
if cc -static -o "$W/static" "$W/s.c" 2>/dev/null; then
  expect "static binary refused" 2 "statically linked" "$SLUICE" run -- "$W/static"
else
  bad "cc -static failed (libc6-dev has libc.a)"
fi
cp /bin/true "$W/suid" && chmod u+s "$W/suid"
expect "setuid refused" 2 "setuid" "$SLUICE" run -- "$W/suid"
expect "compare glibc" 0 "allocator  *glibc" "$SLUICE" run --compare glibc -- /usr/bin/python3 -c "pass"
PYTHON=$(head -1 "$SLUICE" | sed 's/^#! *//')
if $PYTHON -c "import matplotlib" 2>/dev/null; then
  if expect "plot" 0 "" "$SLUICE" run --plot "$W/m.png" -- /usr/bin/python3 -c "x = [bytes(70000) for _ in range(300)]"; then
    head -c 8 "$W/m.png" | grep -q PNG && ok "plot is a PNG" || bad "plot is not a PNG"
  fi
else
  expect "plot without matplotlib refused" 2 "needs matplotlib" "$SLUICE" run --plot "$W/m.png" -- /bin/true
fi
finish sluice_cmd
