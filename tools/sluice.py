#!/usr/bin/env python3
"""sluice — run a program under the sluice allocator and watch its memory.

  sluice run [--interval MS] [--json FILE] [--plot FILE.png]
             [--compare glibc,jemalloc,tcmalloc,mimalloc] -- PROGRAM [ARGS...]
  sluice top [--once] [--interval S] [--file FILE] PID

The program runs with LD_PRELOAD=libsluice.so. Every interval (100 ms) this
command reads Rss, LazyFree and AnonHugePages from /proc/PID/smaps_rollup,
and sluice's own dirty, lazy, clean and in-teardown bytes, which the library
writes to a file while SLUICE_PUBLISH names one (the reclaimer's tick; the
final figures at exit). At the end it prints a summary to stderr; --json
writes every sample and the final statistics, --plot draws the timeline
(needs matplotlib), --compare runs the same command under other allocators
and overlays them. The program's exit status is passed on (128 + N for a
program killed by signal N). Installed by `make install`; `make` leaves a
copy in build/.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "@SL_LIB_REL@"))  # set by CMake
PEER_DIR = "/usr/lib/x86_64-linux-gnu"
PEERS = {
    "glibc": None,
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "mimalloc": "libmimalloc.so.2",
}


class Refused(Exception):
    """The program cannot be run as asked: (message, exit status)."""


def fail(msg, code):
    raise Refused(msg, code)


def resolve(program):
    path = program if "/" in program else shutil.which(program)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        fail(f"{program}: command not found", 127)
    return path


def check_preloadable(path):
    """LD_PRELOAD is ignored for setuid/setgid programs and has nothing to
    load into in a static one (an ELF file with no program interpreter)."""
    mode = os.stat(path).st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID):
        fail(f"{path} is setuid or setgid: the dynamic loader ignores LD_PRELOAD for it", 2)
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return  # a script: its interpreter is what gets the library
        if head[4] != 2 or head[5] != 1:
            return  # not 64-bit little-endian: let the loader say
        phoff = int.from_bytes(head[32:40], "little")
        phentsize = int.from_bytes(head[54:56], "little")
        phnum = int.from_bytes(head[56:58], "little")
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    types = [int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") for i in range(phnum)]
    if 3 not in types:  # PT_INTERP
        fail(f"{path} is statically linked: libsluice.so cannot be preloaded into it", 2)


def smaps_rollup(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "LazyFree", "AnonHugePages"):
                    out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return out or None


def read_published(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sample_of(t, kernel, pub):
    s = {"t": round(t, 4), "rss_bytes": kernel["Rss"], "lazyfree_bytes": kernel.get("LazyFree", 0),
         "anon_huge_bytes": kernel.get("AnonHugePages", 0)}
    if pub:
        g, c = pub["gauges"], pub["counters"]
        s.update(dirty_bytes=g["dirty_bytes"], lazy_bytes=g["lazy_bytes"], clean_bytes=g["clean_bytes"],
                 teardown_bytes=g["teardown_pending_bytes"] + g["teardown_inflight_bytes"],
                 madvise_calls=c["madv_free_calls"] + c["madv_dontneed_calls"])
    return s


def run_one(argv, lib, interval, publish_dir):
    """Run argv with lib preloaded (None: glibc); sample until it exits."""
    env = dict(os.environ)
    if lib:
        env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    pub_path = None
    if publish_dir:
        env["SLUICE_PUBLISH"] = os.path.join(publish_dir, "%p.json")
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C is the program's to handle
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, restore_signals=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        if publish_dir:
            pub_path = os.path.join(publish_dir, f"{proc.pid}.json")
        samples = []
        while proc.poll() is None:
            kernel = smaps_rollup(proc.pid)
            if kernel:
                samples.append(sample_of(time.monotonic() - t0, kernel, pub_path and read_published(pub_path)))
            try:
                proc.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                pass
        elapsed = time.monotonic() - t0
    finally:
        signal.signal(signal.SIGINT, old)
    final = read_published(pub_path) if pub_path else None
    rc = proc.returncode
    return {"samples": samples, "seconds": round(elapsed, 4), "final": final,
            "exit": {"status": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None}}


def mib(b):
    return f"{b / 1048576:.1f} MiB"


def summary(name, run, interval):
    rows = []
    s = run["samples"]
    rows.append(("allocator", name))
    rows.append(("wall time", f"{run['seconds']:.2f} s, {len(s)} samples"))
    if s:
        rows.append(("peak RSS", mib(max(x["rss_bytes"] for x in s))))
        rows.append(("final RSS", mib(s[-1]["rss_bytes"])))
        rows.append(("peak LazyFree", mib(max(x["lazyfree_bytes"] for x in s))))
    lazy_time = sum(interval for x in s if x.get("lazy_bytes", 0) > 0 or x["lazyfree_bytes"] > 0)
    rows.append(("time with lazily freed memory", f"{lazy_time:.2f} s"))
    f = run["final"]
    if f:
        c, g = f["counters"], f["gauges"]
        rows.append(("madvise calls", f"{c['madv_free_calls']} MADV_FREE, {c['madv_dontneed_calls']} MADV_DONTNEED"))
        rows.append(("extfrag events", str(c["extfrag"])))
        rss = g["block_rss_bytes"] + g["huge_rss_bytes"]
        thp = g["block_thp_bytes"] + g["huge_thp_bytes"]
        rows.append(("hugepage coverage at exit",
                     f"{100 * thp / rss:.0f}% of {mib(rss)} resident in sluice's memory" if rss else "nothing resident"))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)


def plot(path, runs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for name, run in runs.items():
        t = [x["t"] for x in run["samples"]]
        top.plot(t, [x["rss_bytes"] / 1048576 for x in run["samples"]], label=f"{name}: Rss")
        if name == "sluice":
            top.plot(t, [(x["rss_bytes"] - x["lazyfree_bytes"]) / 1048576 for x in run["samples"]], "--",
                     label="sluice: Rss - LazyFree")
    top.set_ylabel("MiB")
    top.set_title(title, fontsize=9)
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    s = [x for x in runs["sluice"]["samples"] if "dirty_bytes" in x]
    if s:
        t = [x["t"] for x in s]
        for key, label in (("dirty_bytes", "dirty (free, resident)"), ("lazy_bytes", "lazy (MADV_FREE)"),
                           ("clean_bytes", "clean"), ("teardown_bytes", "in teardown")):
            bottom.plot(t, [x[key] / 1048576 for x in s], label=label)
    bottom.set_ylabel("sluice's free memory, MiB")
    bottom.set_xlabel("seconds")
    bottom.legend(fontsize=8)
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def cmd_run(args):
    if not args.program:
        fail("run: no program given (sluice run [options] -- program args...)", 2)
    if not os.path.exists(LIB):
        fail(f"the library is missing: {LIB}", 2)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            fail("--plot needs matplotlib: pip install matplotlib (or apt-get install python3-matplotlib)", 2)
    peers = [p for p in (args.compare.split(",") if args.compare else []) if p]
    for p in peers:
        if p not in PEERS:
            fail(f"--compare: unknown allocator {p} (known: {', '.join(PEERS)})", 2)
    program = resolve(args.program[0])
    check_preloadable(program)
    argv = [program] + args.program[1:]
    interval = args.interval / 1000.0
    runs = {}
    with tempfile.TemporaryDirectory(prefix="sluice-run-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        runs["sluice"] = run_one(argv, LIB, interval, d)
    if runs["sluice"]["final"] is None:
        print(f"sluice: libsluice.so did not report from {program}: it was not loaded, "
              "or the program ended without running its exit handlers", file=sys.stderr)
    for p in peers:
        lib = PEERS[p] and os.path.join(PEER_DIR, PEERS[p])
        if lib and not os.path.exists(lib):
            print(f"sluice: --compare {p}: {lib} is not installed, skipped", file=sys.stderr)
            continue
        runs[p] = run_one(argv, lib, interval, None)
    print("sluice run: " + shlex.join(argv)[:200], file=sys.stderr)
    for name, run in runs.items():
        print(summary(name, run, interval), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": argv, "interval_ms": args.interval, "runs": runs}, f, indent=1)
    if args.plot:
        plot(args.plot, runs, shlex.join(argv)[:100])
    e = runs["sluice"]["exit"]
    if e["signal"]:
        name = signal.Signals(e["signal"]).name if e["signal"] in signal.Signals._value2member_map_ else "?"
        print(f"sluice: {args.program[0]} was killed by signal {e['signal']} ({name})", file=sys.stderr)
        return 128 + e["signal"]
    return e["status"]


def cmd_top(args):
    """sluice top PID: the object caches of a running program, like slabtop.

    Reads the statistics the program's libsluice publishes (SLUICE_PUBLISH,
    found in /proc/PID/environ with %p as PID, or --file): the "caches"
    rows, one per malloc size class used and per object cache, sorted by
    the memory of their slabs, refreshed every --interval seconds until the
    program ends (or ^C); --once prints one snapshot."""
    path = args.file
    if not path:
        try:
            with open(f"/proc/{args.pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError as e:
            fail(f"top: process {args.pid}: {e.strerror}", 1)
        pub = env.get(b"SLUICE_PUBLISH", b"").decode(errors="replace")
        if not pub:
            fail(f"top: process {args.pid} does not publish its statistics: run it with SLUICE_PUBLISH=FILE "
                 "(sluice run sets it) or give --file", 2)
        path = pub.replace("%p", str(args.pid))
        if not os.path.isabs(path):
            path = os.path.join(f"/proc/{args.pid}/cwd", path)
    cols = [("OBJS", 9), ("ACTIVE", 9), ("USE", 5), ("OBJ SIZE", 9), ("SLABS", 7), ("ACTIVE", 7), ("PAGES", 6),
            ("TYPE", 8), ("CACHE SIZE", 11), ("ALLOCS", 11), ("FREES", 11), ("REMOTE", 9), ("BULK", 9)]

    def kib(b):
        return f"{b / 1024:.0f}K" if b < 100 << 20 else f"{b / 1048576:.0f}M"

    def screen(d):
        rows = sorted(d.get("caches", []), key=lambda r: (-r["slabs_total"] * r["pages_per_slab"], r["name"]))
        mem = sum(r["slabs_total"] * r["pages_per_slab"] * 4096 for r in rows)
        used = sum(r["objects_active"] * r["object_size"] for r in rows)
        objs = sum(r["objects_total"] for r in rows)
        act = sum(r["objects_active"] for r in rows)
        lines = [f"sluice top: pid {args.pid}, {time.strftime('%H:%M:%S')}",
                 f" objects (active / total): {act} / {objs} ({100 * act / objs if objs else 0:.1f}%)",
                 f" slabs: {sum(r['slabs_active'] for r in rows)} / {sum(r['slabs_total'] for r in rows)},"
                 f" in caches {kib(mem)}, in active objects {kib(used)}, {len(rows)} caches", ""]
        lines.append("".join(f"{h:>{w}}" for h, w in cols) + "  NAME")
        for r in rows:
            use = 100 * r["objects_active"] / r["objects_total"] if r["objects_total"] else 0
            vals = [r["objects_total"], r["objects_active"], f"{use:.0f}%", r["object_size"], r["slabs_total"],
                    r["slabs_active"], r["pages_per_slab"], r["pageblock_type"],
                    kib(r["slabs_total"] * r["pages_per_slab"] * 4096), r["allocations"], r["frees"],
                    r["remote_frees"], r["bulk_frees"]]
            lines.append("".join(f"{v:>{w}}" for v, (_, w) in zip(vals, cols)) + "  " + r["name"])
        return "\n".join(lines)

    while True:
        d = read_published(path)
        alive = os.path.exists(f"/proc/{args.pid}")
        if d is None:
            if args.once or not alive:
                fail(f"top: nothing published at {path}"
                     + ("" if alive else f" (process {args.pid} is gone)"), 1)
        elif args.once:
            print(screen(d))
            return 0
        else:
            sys.stdout.write("\033[H\033[2J" + screen(d) + "\n")
            sys.stdout.flush()
        if not alive:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="sluice", description="run a program under sluice and watch its memory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a program under sluice, sample its memory, summarise")
    r.add_argument("--interval", type=int, default=100, metavar="MS", help="sampling interval (default 100 ms)")
    r.add_argument("--json", metavar="FILE", help="write every sample and the final statistics")
    r.add_argument("--plot", metavar="FILE.png", help="draw the timeline (needs matplotlib)")
    r.add_argument("--compare", metavar="A,B", help="also run under glibc, jemalloc, tcmalloc, mimalloc")
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- program args...")
    t = sub.add_parser("top", help="a running program's object caches, like slabtop")
    t.add_argument("pid", type=int, help="the process (it must publish: SLUICE_PUBLISH)")
    t.add_argument("--once", action="store_true", help="print one snapshot and exit")
    t.add_argument("--interval", type=float, default=1.0, metavar="S", help="refresh (default 1 s)")
    t.add_argument("--file", metavar="FILE", help="the published file (default: from the process's environment)")
    t.set_defaults(func=cmd_top)
    args = ap.parse_args(argv)
    if hasattr(args, "func"):
        try:
            return args.func(args)
        except Refused as e:
            print(f"sluice: {e.args[0]}", file=sys.stderr)
            return e.args[1]
    if args.program[:1] == ["--"]:
        args.program = args.program[1:]
    try:
        return cmd_run(args)
    except Refused as e:
        print(f"sluice: {e.args[0]}", file=sys.stderr)
        return e.args[1]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
