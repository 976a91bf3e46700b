#!/usr/bin/env bash
# redis-server (built against jemalloc: Debian's links libjemalloc) under
# LD_PRELOAD=libsluice.so reads sluice's figures through mallctl: after
# DEBUG POPULATE, INFO memory's allocator_resident is within 10% of the
# process's Rss (smaps_rollup), allocator_allocated is what redis counts
# it holds (used_memory) plus the little it does not, active lies between
# them; MEMORY STATS and MEMORY DOCTOR agree, MEMORY MALLOC-STATS is
# sluice's summary, and after FLUSHALL and MEMORY PURGE (arena.<n>.purge)
# the figures fall. The server is on a loopback port and is always killed,
# with a deadline. Exit 77 (skipped) without redis-server or redis-cli.
set -u
LIB=$(realpath "${1:?path to libsluice.so}")
for cmd in redis-server redis-cli; do
  if ! command -v "$cmd" >/dev/null 2>&1; then echo "skip: $cmd is not installed"; exit 77; fi
done
WORK=$(mktemp -d)
rpid=
stop() {
  if [ -n "$rpid" ] && kill -0 "$rpid" 2>/dev/null; then
    kill "$rpid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$rpid" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap stop EXIT
pass=0 fail=0
check() { # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then echo "ok   $what"; pass=$((pass + 1)); else echo "FAIL $what"; fail=$((fail + 1)); fi
}
# within A B PERCENT: |A - B| <= B * PERCENT / 100
within() { [ $(( ($1 > $2 ? $1 - $2 : $2 - $1) * 100 )) -le $(( $2 * $3 )) ]; }

port=$((20000 + RANDOM % 20000))
cd "$WORK" || exit 1
LD_PRELOAD=$LIB redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --enable-debug-command local >"$WORK/redis.log" 2>&1 &
rpid=$!
cli() { timeout 60 redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
if ! grep -q libsluice "/proc/$rpid/maps" 2>/dev/null; then
  echo "FAIL redis-server did not start with sluice: $(tail -3 "$WORK/redis.log")"; exit 1
fi
field() { grep "^$1:" "$WORK/info" | cut -d: -f2 | tr -d '\r'; }
rss() { awk '$1=="Rss:"{print $2 * 1024}' "/proc/$rpid/smaps_rollup"; }

cli debug populate 200000 key 512 >/dev/null
# INFO shows the allocator figures of the last cron run (hz 10): wait,
# with a deadline, for one after the load
settle() { # settle CONDITION: read INFO memory until it holds, 20 s at most
  for _ in $(seq 200); do
    cli info memory >"$WORK/info"
    eval "$1" && return 0
    sleep 0.1
  done
  return 1
}
check "INFO memory shows the load" settle '[ "$(field allocator_allocated)" -ge $(($(field used_memory) / 2)) ]'
kernel=$(rss)
used=$(field used_memory) allocated=$(field allocator_allocated) active=$(field allocator_active)
resident=$(field allocator_resident)
echo "loaded: used_memory $used, allocator_allocated $allocated, allocator_active $active," \
  "allocator_resident $resident, smaps Rss $kernel"
check "allocator_resident within 10% of Rss" within "$resident" "$kernel" 10
check "allocator_resident at most Rss" [ "$resident" -le "$kernel" ]
check "allocator_allocated at least used_memory, within 10% of it" \
  eval '[ "$allocated" -ge "$used" ] && within "$allocated" "$used" 10'
check "allocator_active between allocated and resident" \
  eval '[ "$active" -ge "$allocated" ] && [ "$active" -le "$resident" ]'
cli memory stats >"$WORK/stats"
check "MEMORY STATS allocator.resident" grep -qx "allocator.resident" "$WORK/stats"
cli memory doctor >"$WORK/doctor"
check "MEMORY DOCTOR finds no issue" grep -q "can't find any memory issue" "$WORK/doctor"
cli memory malloc-stats >"$WORK/mstats"
check "MEMORY MALLOC-STATS is sluice's summary" \
  eval 'grep -q "sluice statistics" "$WORK/mstats" && grep -q resident_bytes "$WORK/mstats"'
check "DEBUG MALLCTL stats.resident" eval '[ "$(cli debug mallctl stats.resident)" -gt 0 ]'

cli flushall >/dev/null
check "MEMORY PURGE" eval '[ "$(cli memory purge)" = OK ]'
check "allocated falls after FLUSHALL, resident after MEMORY PURGE" settle \
  '[ "$(field allocator_allocated)" -lt $((allocated / 10)) ] && [ "$(field allocator_resident)" -lt $((resident / 4)) ]'
allocated2=$(field allocator_allocated) resident2=$(field allocator_resident) kernel2=$(rss)
echo "flushed and purged: allocator_allocated $allocated2, allocator_resident $resident2, smaps Rss $kernel2"
check "resident at most Rss after the purge" [ "$resident2" -le "$kernel2" ]
cli shutdown nosave >/dev/null 2>&1
echo "redis_mallctl: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
