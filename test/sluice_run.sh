#!/usr/bin/env bash
# sluice run watches the whole program and never loses its summary: a
# shell-wrapped sqlite3, a Python parent whose child holds the memory, a
# fork child and programs it cannot watch (each process in the JSON and
# the summary); 20 runs in a row, each summary complete (the exit figures
# once raced the reclaimer's tick); SIGTERM and SIGINT passed on (summary,
# JSON, no program left running, no folder left in /dev/shm), a second
# signal that stops at once; output paths refused before the program
# starts; the plot's Python, or the list of those tried; --compare's
# progress line on a terminal.
set -u
SLUICE=${1:?path to build/sluice}
. "$(dirname "$0")/harness.sh"
PY=/usr/bin/python3  # run as $PY "$SLUICE" after the first: a version manager's python3 shim costs 0.3 s a run

# about 70 MiB in sqlite3's heap (:memory:), in well under a second
cat >"$W/big.sql" <<'SQL'
CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 60000)
INSERT INTO t SELECT x, randomblob(1000) FROM c;
SELECT count(*) FROM t;
SQL

# check JSON-FILE PYTHON-ASSERTIONS: r is the sluice run, procs its processes by first command word
check() {
  $PY - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d["runs"]["sluice"]
procs = {}
for p in r["processes"]:
    procs.setdefault(p["commands"][-1].split()[0].rsplit("/", 1)[-1] if p["commands"] else "?", []).append(p)
peak = max((x["rss_bytes"] for x in r["samples"]), default=0)
MiB = 1 << 20
exec(sys.argv[2])
PY
}

# --- the whole program ---------------------------------------------------------
if "$SLUICE" run --json "$W/sh.json" -- sh -c "sqlite3 :memory: < '$W/big.sql'" >/dev/null 2>"$W/err"; then
  check "$W/sh.json" '
# sqlite3 counted, not only the shell (2 MiB): its peak is some 70 MiB,
# but the samples (two or three in a run this short) may fall after its
# frees, and at exit its free pages are held to the dirty cap
assert peak >= 20 * MiB, peak
q = procs["sqlite3"][0]
assert q["peak_rss_bytes"] >= 50 * MiB and q["reported"] and q["final"], q
assert q["final"]["gauges"]["block_rss_bytes"] >= 20 * MiB, q["final"]["gauges"]
assert "sh" in procs and procs["sh"][0]["ppid"] is not None, list(procs)
assert r["final"]["counters"]["alloc_small"] >= q["final"]["counters"]["alloc_small"]
' && ok "shell-wrapped sqlite3: peak RSS $(grep -o 'peak RSS  *[0-9.]* MiB' "$W/err" | head -1 | grep -o '[0-9.]* MiB')" || bad "shell-wrapped sqlite3: $(cat "$W/err")"
  grep -q "process [0-9]*  *sqlite3 :memory:.*: peak RSS [0-9]" "$W/err" && ok "summary lists sqlite3" || bad "summary: $(cat "$W/err")"
else
  bad "shell-wrapped sqlite3 failed: $(tail -3 "$W/err")"
fi

cat >"$W/parent.py" <<'PY'
import subprocess, sys
subprocess.run([sys.executable, "-c", "import time; x = b'\\x01' * (200 << 20); time.sleep(0.5)"], check=True)
PY
if $PY "$SLUICE" run --json "$W/py.json" -- $PY "$W/parent.py" 2>"$W/err"; then
  check "$W/py.json" '
assert peak >= 150 * MiB, peak
kids = [p for p in r["processes"] if p["peak_rss_bytes"] >= 150 * MiB]
assert len(kids) == 1 and kids[0]["reported"] and kids[0]["final"] and not kids[0]["not_watched"], r["processes"]
assert len(r["processes"]) == 2, r["processes"]
assert any(x["processes"] == 2 for x in r["samples"])
' && ok "python parent, child holds 200 MiB" || bad "python parent and child: $(cat "$W/err")"
else
  bad "python parent failed: $(tail -3 "$W/err")"
fi

# a fork child (no exec) writes its own file at once, its inherited counters named
cat >"$W/fork.py" <<'PY'
import os, sys
keep = [bytes(70000) for _ in range(200)]          # the parent's counters, inherited
pid = os.fork()
if pid == 0:
    x = b"\x01" * (100 << 20)
    sys.exit(0)                                    # exit handlers run: exit figures
os.waitpid(pid, 0)
PY
if $PY "$SLUICE" run --json "$W/fork.json" -- $PY "$W/fork.py" 2>"$W/err"; then
  check "$W/fork.json" '
assert len(r["processes"]) == 2, r["processes"]
child = [p for p in r["processes"] if p["ppid"] == r["processes"][0]["pid"]][0]
assert child["reported"] and child["final"], child
assert child["inherited"].get("alloc_medium", 0) >= 200, child["inherited"]
own = r["final"]["counters"]["alloc_medium"]
assert own < 350, own                             # the inherited ones are not counted twice
' && ok "fork child: own file, inherited counters apart" || bad "fork child: $(cat "$W/err")"
else
  bad "fork child failed: $(tail -3 "$W/err")"
fi

# processes it cannot watch are named, with the reason
printf '#include <unistd.h>\nint main(void) { usleep(300000); return 0; }\n' >"$W/s.c"
if cc -static -o "$W/static" "$W/s.c" 2>/dev/null; then
  $PY "$SLUICE" run -- sh -c "'$W/static'; env -u LD_PRELOAD $PY -c 'import time; time.sleep(0.3)'" 2>"$W/err"
  grep -q "static) was not watched: never reported: it is statically linked" "$W/err" && ok "static child named" || bad "static child: $(cat "$W/err")"
  grep -q "was not watched: after it executed python3, which never reported: libsluice.so was not loaded" "$W/err" && ok "unpreloaded child named" \
    || bad "child without LD_PRELOAD: $(cat "$W/err")"
else
  bad "cc -static failed (libc6-dev has libc.a)"
fi

# --- 20 runs, 20 complete summaries ----------------------------------------------
# complete: every figure there. What stays resident at exit is not asked for
# a size: frees before exit are held to the dirty cap, and on a loaded
# machine a run read 20.5 MiB where others read 50 and more; 0 would be
# a figure taken after the teardown.
complete=0
for i in $(seq 20); do
  $PY "$SLUICE" run -- sqlite3 :memory: ".read $W/big.sql" >/dev/null 2>"$W/err$i"
  if grep -Eq "hugepage coverage at exit +[0-9]+% of [1-9][0-9]*\.[0-9] MiB resident" "$W/err$i" &&
     grep -Eq "peak RSS +([5-9][0-9]|[1-9][0-9][0-9])\.[0-9] MiB" "$W/err$i" &&
     grep -q "1 wrote their exit figures" "$W/err$i" && grep -q "process [0-9]* .*sqlite3.*, exit 0$" "$W/err$i"; then
    complete=$((complete + 1))
  else
    echo "run $i:"; cat "$W/err$i"
  fi
done
[ "$complete" -eq 20 ] && ok "20 runs, 20 complete summaries" || bad "$complete of 20 summaries complete"

# --- signals -------------------------------------------------------------------------
# The child says where it is (pids, the run's folder) once it holds its memory.
cat >"$W/hold.py" <<'PY'
import os, subprocess, sys, time
marker = sys.argv[1]
if len(sys.argv) > 2:                                # the child
    x = b"\x01" * (60 << 20)
    with open(marker + ".tmp", "w") as f:
        f.write(f"{os.getppid()} {os.getpid()} {os.environ['SLUICE_PUBLISH']}")
    os.rename(marker + ".tmp", marker)
    time.sleep(60)
subprocess.Popen([sys.executable, __file__, marker, "child"])
time.sleep(60)
PY
signal_case() { # SIGNAL expected-exit
  local sig=$1 want=$2 m="$W/marker.$1"
  $PY "$SLUICE" run --json "$W/$sig.json" -- $PY "$W/hold.py" "$m" 2>"$W/err.$sig" &
  local sp=$!
  for _ in $(seq 200); do [ -e "$m" ] && break; sleep 0.05; done
  [ -e "$m" ] || { bad "$sig: the program never started"; kill -9 $sp; return; }
  read -r parent child pub <"$m"
  kill -"$sig" $sp
  wait $sp
  local rc=$?
  local folder=${pub%/publish/*}
  [ "$rc" -eq "$want" ] && ok "$sig: exit $rc" || bad "$sig: exit $rc, wanted $want: $(cat "$W/err.$sig")"
  grep -q "stopped by  *SIG$sig, passed on to the program" "$W/err.$sig" && grep -q "peak RSS" "$W/err.$sig" &&
    ok "$sig: summary" || bad "$sig: summary: $(cat "$W/err.$sig")"
  check "$W/$sig.json" "
assert r['signal'] == 'SIG$sig' and len(r['processes']) == 2, r['processes']
assert peak >= 60 * MiB, peak
" && ok "$sig: json" || bad "$sig: json"
  if kill -0 "$parent" 2>/dev/null || kill -0 "$child" 2>/dev/null; then bad "$sig: the program still runs: $(ps -o pid=,ppid=,stat=,args= -p "$parent,$child")"; else
    ok "$sig: nothing left running"; fi
  case "$folder" in /dev/shm/sluice-run-*|/tmp/sluice-run-*) ;; *) bad "$sig: odd folder $folder";; esac
  [ ! -e "$folder" ] && ok "$sig: folder removed" || bad "$sig: $folder left behind"
}
signal_case TERM 143
signal_case INT 130

# a program that ignores both: the second signal stops at once, killing it
cat >"$W/stubborn.sh" <<'SH'
trap '' TERM INT
echo "$$ $SLUICE_PUBLISH" >"$1.tmp"; mv "$1.tmp" "$1"
while :; do sleep 0.1; done
SH
$PY "$SLUICE" run --json "$W/stub.json" -- sh "$W/stubborn.sh" "$W/m.stub" 2>"$W/err.stub" &
sp=$!
for _ in $(seq 200); do [ -e "$W/m.stub" ] && break; sleep 0.05; done
read -r shpid pub <"$W/m.stub"
kill -TERM $sp
sleep 0.3
kill -TERM $sp
wait $sp
rc=$?
[ "$rc" -eq 143 ] && grep -q "stopped by a second SIGTERM" "$W/err.stub" && ok "second signal stops at once" ||
  bad "second signal: exit $rc: $(cat "$W/err.stub")"
! kill -0 "$shpid" 2>/dev/null && [ ! -e "${pub%/publish/*}" ] && [ ! -e "$W/stub.json" ] &&
  ok "second signal: program killed, folder removed, nothing written" || bad "second signal left something behind"

# --- output paths, plot, progress -------------------------------------------------------
expect_refused() { # name pattern sluice-args...
  local name=$1 pat=$2; shift 2
  rm -f "$W/ran"
  $PY "$SLUICE" run "$@" -- touch "$W/ran" 2>"$W/err"
  local rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "$pat" "$W/err" && [ ! -e "$W/ran" ]; then ok "$name"; else
    bad "$name: exit $rc, ran: $([ -e "$W/ran" ] && echo yes || echo no): $(cat "$W/err")"; fi
}
expect_refused "--json in a missing folder" "--json $W/no/x.json: cannot write it" --json "$W/no/x.json"
expect_refused "--plot onto a folder" "--plot $W: is a directory" --plot "$W"
mkdir -p "$W/bin"
printf '#!/bin/sh\nexit 1\n' >"$W/bin/python3" && chmod +x "$W/bin/python3"
if $PY -c "import matplotlib" 2>/dev/null; then
  PATH="$W/bin:/usr/bin:/bin" $PY "$SLUICE" run --plot "$W/p.png" -- true 2>"$W/err" &&
    head -c 8 "$W/p.png" | grep -q PNG && ok "plot with /usr/bin/python3" || bad "plot: $(cat "$W/err")"
else
  PATH="$W/bin:/usr/bin:/bin" $PY "$SLUICE" run --plot "$W/p.png" -- touch "$W/ran" 2>"$W/err"
  grep -q "none of these Pythons has it: $PY, $W/bin/python3" "$W/err" && [ ! -e "$W/ran" ] &&
    ok "plot: the Pythons tried, named" || bad "plot refusal: $(cat "$W/err")"
fi
# a terminal gets one progress line per run of --compare
$PY - "$SLUICE" >"$W/tty" 2>&1 <<'PY'
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.Popen([sys.executable, sys.argv[1], "run", "--compare", "glibc", "--", sys.executable, "-c", "import time; time.sleep(0.3)"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
p.wait()
sys.stdout.write(out.decode(errors="replace"))
PY
grep -aq "run 1/2 (sluice): [0-9.]* s" "$W/tty" && grep -aq "run 2/2 (glibc): [0-9.]* s" "$W/tty" &&
  ok "--compare progress on a terminal" || bad "--compare progress: $(cat -v "$W/tty" | head -5)"
$PY "$SLUICE" run --compare glibc -- true 2>"$W/err"
! grep -q "run 1/2" "$W/err" && ok "no progress line off a terminal" || bad "progress off a terminal"
finish sluice_run
