#!/usr/bin/env python3
"""sluice — run a program under the sluice allocator and watch its memory.

  sluice run [--interval MS] [--json FILE] [--plot FILE.png]
             [--profile DIR] [--flame FILE.svg]
             [--compare glibc,jemalloc,tcmalloc,mimalloc] -- PROGRAM [ARGS...]
  sluice top [--once] [--interval S] [--file FILE] PID

The program runs with LD_PRELOAD=libsluice.so, which every process it
starts inherits. Every interval (100 ms) this command finds each process of
the program (children, grandchildren, and processes orphaned on the way: it
adopts them as a child subreaper), reads Rss, Pss, LazyFree and
AnonHugePages from each one's /proc/PID/smaps_rollup, and sluice's own
figures (in use, dirty, lazy, clean, in teardown), which each process
writes to its own file in the run's folder (SLUICE_PUBLISH: at load, in a
fork child, on every reclaimer tick and at exit). The timeline is their sum.
At the end it prints a summary to stderr, with one line per process and a
warning for each process it could not watch (a static or setuid program,
or one that never loaded the library); --json writes every sample, every
process and the final statistics, --plot draws the timeline (with the first
Python found that has matplotlib), --compare runs the same command under
other allocators and overlays them.

--profile DIR samples the program's allocations (SLUICE_PROF, one sample
per 512 KiB allocated on average) and writes each process's heap profiles
there: heap.PID.prof of what was live at its exit and heap.PID.prof.N at
each new high of its live bytes (SLUICE_PROF_GDUMP), the last of them its
peak; `go tool pprof` reads them. The summary then lists the sites that
held the most live memory at the peak and at the end, all processes
merged. --flame FILE.svg draws the live bytes at the peak as a flame graph
(with --profile's files, or a temporary folder's).

SIGINT and SIGTERM sent to this command go to every process of the program
(a terminal's ^C reaches them itself); it then waits up to 5 s for the
program to end (then kills it) and writes its summary, JSON and plot. A
second signal kills the program and stops at once. The program's exit
status is passed on (128 + N for a program killed by signal N). Installed
by `make install`; `make` leaves a copy in build/.
"""
import argparse
import ctypes
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
PLOT = os.path.normpath(os.path.join(HERE, "@SL_PLOT_REL@"))  # tools/sluice_plot.py
PROF_FILES = "heap.%p.prof"  # in --profile's folder; the numbered ones beside them
PEER_DIR = "/usr/lib/x86_64-linux-gnu"
PEERS = {
    "glibc": None,
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "mimalloc": "libmimalloc.so.2",
}
GRACE_S = 5.0          # after a forwarded signal, the program's time to end before SIGKILL
SIGNALS = (signal.SIGINT, signal.SIGTERM)
WAKE = SIGNALS + (signal.SIGCHLD,)  # blocked here, waited for: a child's end ends a wait early
SI_KERNEL = 0x80       # siginfo si_code of a signal the kernel sent (a terminal's ^C)
PR_SET_CHILD_SUBREAPER = 36
EVENTS = {"extfrag": ("extfrag",), "boost": ("boost_events",), "teardown": ("teardown_ranges", "teardown_sync")}


class Refused(Exception):
    """The program cannot be run as asked: (message, exit status)."""


class Stopped(Exception):
    """A second signal: the program was killed; stop at once (signal number)."""


def fail(msg, code):
    raise Refused(msg, code)


# ---- before the program starts ------------------------------------------------

def resolve(program):
    path = program if "/" in program else shutil.which(program)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        fail(f"{program}: command not found", 127)
    return path


def unwatchable(path):
    """Why LD_PRELOAD cannot reach the program at path, or None: the loader
    ignores it for setuid/setgid programs, and a static one (an ELF file with
    no program interpreter) has no loader."""
    try:
        mode = os.stat(path).st_mode
        if mode & (stat.S_ISUID | stat.S_ISGID):
            return "setuid or setgid: the dynamic loader ignores LD_PRELOAD for it"
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None  # a script (its interpreter gets the library), or not 64-bit little-endian
            phoff = int.from_bytes(head[32:40], "little")
            phentsize = int.from_bytes(head[54:56], "little")
            phnum = int.from_bytes(head[56:58], "little")
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return None
    types = [int.from_bytes(table[i * phentsize:i * phentsize + 4], "little") for i in range(phnum)]
    return None if 3 in types else "statically linked: libsluice.so cannot be preloaded into it"  # PT_INTERP


def check_writable(path, option):
    """Create the output file if it is not there (and remove it again): the
    one test that root, read-only file systems and full folders all answer."""
    if os.path.isdir(path):
        fail(f"{option} {path}: is a directory", 2)
    existed = os.path.exists(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    except OSError as e:
        fail(f"{option} {path}: cannot write it: {e.strerror}", 2)
    if not existed:
        os.unlink(path)


def find_plot_python():
    """The first Python with matplotlib: this one, /usr/bin/python3, then
    each python3 and python on PATH. (interpreter or None, those tried)."""
    tried, seen = [], set()
    cands = [sys.executable, "/usr/bin/python3"]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cands += [os.path.join(d or ".", n) for n in ("python3", "python")]
    for c in cands:
        if not c or not os.path.isfile(c) or not os.access(c, os.X_OK):
            continue
        key = os.path.realpath(c) if os.path.basename(os.path.realpath(c)).startswith("python") else c
        if key in seen:
            continue
        seen.add(key)
        tried.append(c)
        try:
            ok = subprocess.run([c, "-c", "import matplotlib"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return c, tried
    return None, tried


# ---- the processes of the program -------------------------------------------

def children(pid):
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def read_text(path, limit=4096):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return None


def smaps_rollup(pid):
    out = {}
    text = read_text(f"/proc/{pid}/smaps_rollup", 1 << 14) or ""
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss", "LazyFree", "AnonHugePages"):
            try:
                out[key] = int(rest.split()[0]) * 1024
            except (ValueError, IndexError):
                pass
    return out if "Rss" in out else None  # a zombie, or gone


def proc_state(pid):
    """(state letter, parent pid), or (None, None) for a process gone."""
    text = read_text(f"/proc/{pid}/stat")
    try:
        fields = text.rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (AttributeError, IndexError, ValueError):
        return None, None


def high_water(pid):
    """The process's peak RSS as the kernel kept it (VmHWM), between samples too."""
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def read_published(path):
    try:
        with open(path) as f:
            d = json.load(f)
        return d if isinstance(d, dict) and "stats" in d else None
    except (OSError, ValueError):
        return None


def own_counters(pub):
    """A published process's counters less those it inherited at fork."""
    inh = pub.get("inherited", {})
    return {k: v - inh.get(k, 0) for k, v in pub["stats"]["counters"].items()}


class Process:
    def __init__(self, pid, t):
        self.pid, self.ppid, self.first_t, self.last_t = pid, None, t, t
        self.commands, self.comm, self.comm_ns, self.reason = [], None, 0, None
        self.peak_rss, self.alive, self.exit = 0, True, None
        self.pub, self.pub_key, self.carried = None, None, {}
        self.ever_published = False

    def look(self):
        """Who it is now; again after an exec (its name changes)."""
        comm = (read_text(f"/proc/{self.pid}/comm") or "").strip()
        if not comm or comm == self.comm:
            return
        self.comm, self.comm_ns = comm, time.monotonic_ns()
        cmd = (read_text(f"/proc/{self.pid}/cmdline") or "").rstrip("\0").split("\0")
        self.commands.append(" ".join(cmd)[:120] if cmd != [""] else comm)
        try:
            self.reason = unwatchable(os.readlink(f"/proc/{self.pid}/exe"))
        except OSError:
            pass
        self.ppid = proc_state(self.pid)[1] or self.ppid

    def take(self, pub):
        """A newly read published object: counters that went down belong to
        an image that has since executed another: carried over."""
        if self.pub and any(v < own_counters(self.pub).get(k, 0) for k, v in own_counters(pub).items()):
            for k, v in own_counters(self.pub).items():
                self.carried[k] = self.carried.get(k, 0) + v
        self.pub, self.ever_published = pub, True
        self.peak_rss = max(self.peak_rss, pub.get("peak_rss_bytes", 0))
        if self.ppid is None:
            self.ppid = pub.get("ppid")
        if not self.commands and pub.get("comm"):
            self.commands.append(pub["comm"])

    def counters(self):
        own = own_counters(self.pub) if self.pub else {}
        return {k: own.get(k, 0) + self.carried.get(k, 0) for k in set(own) | set(self.carried)}

    def report(self):
        final = self.pub["stats"] if self.pub and self.pub.get("final") else None
        return {"pid": self.pid, "ppid": self.ppid, "commands": self.commands,
                "first_seen": round(self.first_t, 4), "last_seen": round(self.last_t, 4),
                "peak_rss_bytes": self.peak_rss, "reported": self.ever_published,
                "not_watched": self.not_watched(), "running_at_end": self.alive,
                "exit": self.exit, "inherited": self.pub.get("inherited", {}) if self.pub else {},
                "final": final}

    def not_watched(self):
        """Why sluice's figures of this process are missing, or None: it
        never reported, or the last program seen running in it was loaded
        after the one that wrote the file (since_ns), and never wrote its own."""
        why = (f"it is {self.reason}" if self.reason
               else "libsluice.so was not loaded (LD_PRELOAD removed from its environment?)")
        if not self.pub:
            return f"never reported: {why}"
        if self.comm is None or self.pub.get("comm") == self.comm or self.pub.get("since_ns", 0) > self.comm_ns:
            return None
        return f"after it executed {self.comm}, which never reported: {why}"


class Watch:
    """One run's processes and samples. The tree is walked from the top
    process; processes orphaned on the way are this command's children (a
    subreaper), reaped here."""

    def __init__(self, top, publish_dir, t0, foreign):
        self.top, self.dir, self.t0, self.foreign = top, publish_dir, t0, foreign
        self.procs, self.samples, self.events, self.last_events = {}, [], [], None

    def tree(self):
        self.reap()
        mine = [p for p in children(os.getpid()) if p not in self.foreign]
        seen, todo = [], [self.top.pid] + [p for p in mine if p != self.top.pid]
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.append(p)
                todo += children(p)
        return seen

    def reap(self):
        """Every orphan adopted that has ended (the top process is Popen's)."""
        for pid in children(os.getpid()):
            if pid == self.top.pid:
                continue
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if got and pid not in self.foreign:
                self.procs.setdefault(pid, Process(pid, time.monotonic() - self.t0)).exit = exit_of(status)

    def live(self):
        """The program's processes still running: not zombies, except those
        adopted here and not yet reapable (a leader whose threads are still
        ending), which are waited for like the running ones."""
        out = []
        for pid in self.tree():
            state, ppid = proc_state(pid)
            if state not in ("Z", "X", None) or (state == "Z" and ppid == os.getpid()):
                out.append(pid)
        return out

    def settle(self):
        """Before the end: every adopted orphan that has ended is reaped, so
        that none is left to init as a zombie of the program (2 s at most)."""
        end = time.monotonic() + 2
        while True:
            self.reap()
            if not any(proc_state(p)[0] == "Z" for p in children(os.getpid()) if p != self.top.pid) \
                    or time.monotonic() > end:
                return
            time.sleep(0.005)

    def tick(self):
        t = time.monotonic() - self.t0
        kernel = {}
        for pid in self.tree():
            p = self.procs.get(pid) or self.procs.setdefault(pid, Process(pid, t))
            p.look()
            k = smaps_rollup(pid)
            if k:
                kernel[pid], p.last_t, p.alive = k, t, True
                p.peak_rss = max(p.peak_rss, k["Rss"], high_water(pid))
        for p in self.procs.values():
            p.alive = p.pid in kernel
        self.read_files(t)
        if kernel:
            self.samples.append(self.sample(t, kernel))

    def read_files(self, t):
        if not self.dir:
            return
        for name in os.listdir(self.dir):
            pid = name[:-5]
            if not name.endswith(".json") or not pid.isdigit():
                continue
            try:
                st = os.stat(os.path.join(self.dir, name))
            except OSError:
                continue
            p = self.procs.get(int(pid)) or self.procs.setdefault(int(pid), Process(int(pid), t))
            if p.pub_key != (st.st_mtime_ns, st.st_size, st.st_ino):
                pub = read_published(os.path.join(self.dir, name))
                if pub:
                    p.take(pub)
                    p.pub_key = (st.st_mtime_ns, st.st_size, st.st_ino)

    def sample(self, t, kernel):
        s = {"t": round(t, 4), "processes": len(kernel)}
        for key, field in (("rss_bytes", "Rss"), ("pss_bytes", "Pss"), ("lazyfree_bytes", "LazyFree"),
                           ("anon_huge_bytes", "AnonHugePages")):
            s[key] = sum(k.get(field, 0) for k in kernel.values())
        s["rss_by_pid"] = {str(pid): k["Rss"] for pid, k in kernel.items()}
        pubs = [self.procs[pid].pub for pid in kernel if self.procs[pid].pub]
        if pubs:
            g = [p["stats"]["gauges"] for p in pubs]
            s.update(in_use_bytes=sum(x["active_bytes"] + x["huge_live_bytes"] + x["block_header_bytes"]
                                      + x["meta_bytes"] for x in g),
                     dirty_bytes=sum(x["dirty_bytes"] for x in g), lazy_bytes=sum(x["lazy_bytes"] for x in g),
                     clean_bytes=sum(x["clean_bytes"] for x in g),
                     teardown_bytes=sum(x["teardown_pending_bytes"] + x["teardown_inflight_bytes"] for x in g))
            c = self.total_counters()
            s["madvise_calls"] = c.get("madv_free_calls", 0) + c.get("madv_dontneed_calls", 0)
            counts = {kind: sum(c.get(n, 0) for n in names) for kind, names in EVENTS.items()}
            for kind, n in counts.items():
                if self.last_events and n > self.last_events[kind]:
                    self.events.append({"t": s["t"], "kind": kind, "count": n - self.last_events[kind]})
            self.last_events = counts
        return s

    def total_counters(self):
        total = {}
        for p in self.procs.values():
            for k, v in p.counters().items():
                total[k] = total.get(k, 0) + v
        return total

    def final(self):
        """The final figures of every process that wrote them, added up."""
        done = [p for p in self.procs.values() if p.pub and p.pub.get("final")]
        if not done:
            return None
        out = {"counters": {}, "gauges": {}}
        for p in done:
            for part, values in (("counters", p.counters()), ("gauges", p.pub["stats"]["gauges"])):
                for k, v in values.items():
                    out[part][k] = max(out[part].get(k, 0), v) if "max" in k else out[part].get(k, 0) + v
        return out


def exit_of(status):
    if os.WIFSIGNALED(status):
        return {"status": None, "signal": os.WTERMSIG(status)}
    return {"status": os.WEXITSTATUS(status), "signal": None}


def set_subreaper():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # orphans then go to init, and are found only while their parent lives


# ---- one run -----------------------------------------------------------------

def signal_all(watch, sig):
    for pid in watch.live():
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def run_one(argv, lib, interval, publish_dir, progress, foreign, prof_dir=None):
    """Run argv with lib preloaded (None: glibc); sample until it exits;
    prof_dir: the folder of its heap profiles (sluice only). The caller has
    blocked SIGINT and SIGTERM: they are waited for here."""
    env = dict(os.environ)
    env.pop("SLUICE_PUBLISH", None)
    if prof_dir:
        env["SLUICE_PROF"] = os.path.join(prof_dir, PROF_FILES)
        env["SLUICE_PROF_GDUMP"] = "1"
    if lib:
        env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if publish_dir:
        env["SLUICE_PUBLISH"] = os.path.join(publish_dir, "%p.json")
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, restore_signals=True, preexec_fn=program_signals)
    watch = Watch(proc, publish_dir, t0, foreign)
    got, deadline, killed = None, None, False
    while True:
        watch.tick()
        if progress:
            progress(time.monotonic() - t0)
        if proc.poll() is not None and (got is None or not watch.live()):
            break
        if deadline and time.monotonic() > deadline and not killed:
            signal_all(watch, signal.SIGKILL)
            killed = True
        info = wait_signal(proc, time.monotonic() + interval)
        if info is None:
            continue
        if got is not None:  # the second: stop at once, leaving nothing running
            signal_all(watch, signal.SIGKILL)
            finish_off(watch, proc)
            raise Stopped(info.si_signo)
        got, deadline = info.si_signo, time.monotonic() + GRACE_S
        watch.tick()  # the program as the signal found it
        if info.si_code != SI_KERNEL:  # a terminal's ^C reached the program itself
            signal_all(watch, info.si_signo)
    elapsed = time.monotonic() - t0
    watch.tick()
    watch.read_files(elapsed)
    watch.settle()
    watch.procs.setdefault(proc.pid, Process(proc.pid, 0)).exit = exit_of_returncode(proc.returncode)
    foreign.update(watch.procs)
    summed = max((x["rss_bytes"] for x in watch.samples), default=0)
    largest = max((p.peak_rss for p in watch.procs.values()), default=0)
    return {"samples": watch.samples, "events": watch.events, "seconds": round(elapsed, 4),
            "peak_rss_bytes": max(summed, largest),
            "processes": [p.report() for p in sorted(watch.procs.values(), key=lambda p: p.first_t)],
            "final": watch.final(), "exit": exit_of_returncode(proc.returncode),
            "signal": signal.Signals(got).name if got else None, "killed_after_grace": killed}, got


def wait_signal(proc, until):
    """SIGINT or SIGTERM (siginfo) if one comes before `until`; None at
    `until`, or as soon as the top process has ended."""
    while True:
        info = signal.sigtimedwait(WAKE, max(0.0, until - time.monotonic()))
        if info is None or info.si_signo in SIGNALS:
            return info
        if proc.poll() is not None:
            return None


def program_signals():
    """In the program: SIGINT and SIGTERM as in a foreground job (this
    command may have been started with them ignored, as a background job
    of a script is), and not blocked."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WAKE)


def exit_of_returncode(rc):
    return {"status": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None}


def finish_off(watch, proc):
    """After SIGKILL: reap the top process and every orphan adopted."""
    proc.wait()
    end = time.monotonic() + 2
    while watch.live() and time.monotonic() < end:
        time.sleep(0.01)
    watch.settle()


# ---- the summary --------------------------------------------------------------

def mib(b):
    return f"{b / 1048576:.1f} MiB"


def signame(n):
    return signal.Signals(n).name if n in signal.Signals._value2member_map_ else f"signal {n}"


def process_line(p, watched):
    what = p["commands"][-1] if p["commands"] else "?"
    if len(p["commands"]) > 1:
        what += f" (after {len(p['commands']) - 1} exec)"
    out = f"{what[:70]}: peak RSS {mib(p['peak_rss_bytes'])}"
    e = p["exit"]
    if e:
        out += f", exit {e['status']}" if e["signal"] is None else f", killed by {signame(e['signal'])}"
    if p["running_at_end"]:
        out += ", still running at the end"
    if watched:
        if p["not_watched"]:
            out += ", NOT WATCHED"
        elif p["final"] is None:
            out += ", no exit figures (it ended by _exit or a signal)"
    return out


def summary(name, run, interval, watched):
    rows = []
    s = run["samples"]
    procs = run["processes"]
    rows.append(("allocator", name))
    rows.append(("wall time", f"{run['seconds']:.2f} s, {len(s)} samples"))
    if run["signal"]:
        rows.append(("stopped by", run["signal"] + (f" (killed after {GRACE_S:.0f} s)" if run["killed_after_grace"]
                                                    else ", passed on to the program")))
    if watched:
        n_watch = sum(1 for p in procs if not p["not_watched"])
        n_final = sum(1 for p in procs if p["final"])
        rows.append(("processes", f"{len(procs)}, {n_watch} watched, {n_final} wrote their exit figures"))
    else:
        rows.append(("processes", str(len(procs))))
    how = "of all processes together"
    if s and run["peak_rss_bytes"] > max(x["rss_bytes"] for x in s):
        how = "one process's high-water mark, above every sample's sum"
    rows.append(("peak RSS", f"{mib(run['peak_rss_bytes'])} ({how})"))
    if s:
        rows.append(("peak PSS", f"{mib(max(x['pss_bytes'] for x in s))} (shared pages counted once)"))
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
        rows.append(("hugepage coverage at exit", f"{100 * thp / rss:.0f}% of {mib(rss)} resident in sluice's memory"
                     if rss else "nothing resident"))
    elif watched:
        rows.append(("hugepage coverage at exit", "unknown: no process wrote its exit figures"))
    for p in procs:
        rows.append((f"process {p['pid']}", process_line(p, watched)))
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{w}}  {v}" for k, v in rows)


def warnings(run):
    for p in run["processes"]:
        if p["not_watched"]:
            what = p["commands"][-1] if p["commands"] else "?"
            yield f"sluice: process {p['pid']} ({what[:60]}) was not watched: {p['not_watched']}"


# ---- the heap profiles (tools/sluice_prof.py, beside the plot script) ----------

def profile_files(prof_dir):
    """{pid: (the profile at exit or None, the last new high's or None)}."""
    found = {}
    for f in os.listdir(prof_dir):
        parts = f.split(".")  # heap, PID, prof[, N]
        if len(parts) not in (3, 4) or parts[0] != "heap" or parts[2] != "prof" or not parts[1].isdigit():
            continue
        if len(parts) == 4 and not parts[3].isdigit():
            continue
        end, high = found.get(int(parts[1]), (None, None))
        path = os.path.join(prof_dir, f)
        if len(parts) == 3:
            end = path
        elif high is None or int(parts[3]) > int(high.rsplit(".", 1)[1]):
            high = path
        found[int(parts[1])] = (end, high)
    return found


def profile_report(prof_dir, flame, argv, kept=True):
    """The summary's lines on the heap profiles; draws --flame. kept: the
    folder is --profile's (else a temporary one, not named)."""
    sys.path.insert(0, os.path.dirname(PLOT))
    import sluice_prof
    found = profile_files(prof_dir)
    if not found:
        yield "sluice: no heap profile was written (no process loaded the library, or none ended)"
        return
    ends, peaks = [], []
    for pid, (end, high) in sorted(found.items()):
        try:
            if end:
                ends.append(sluice_prof.Profile(end))
            if high or end:
                peaks.append(sluice_prof.Profile(high or end))
        except (OSError, ValueError, IndexError) as e:
            yield f"sluice: a heap profile of process {pid} could not be read: {e}"
    names = sluice_prof.name_frames(ends + peaks)
    n = f"{len(found)} process" + ("es" if len(found) > 1 else "")
    yield (f"heap profiles: {prof_dir + ', ' if kept else ''}{n}; sampled, one sample per 512 KiB allocated on"
           " average" + ("; `go tool pprof` reads them" if kept else ""))
    for what, profs in (("at the peak (each process's last new high)", peaks), ("at the end", ends)):
        top, total = sluice_prof.top_sites(profs, names, "inuse_space")
        yield f"  live memory {what}: {mib(total)}"
        for v, share, where in top:
            yield f"    {mib(v):>12} {100 * share:4.0f}%  {where[:150]}"
    if flame:
        title = f"live bytes at the peak: {shlex.join(argv)[:120]}"
        total = sluice_prof.flame_svg(peaks, names, "inuse_space", flame, title)
        yield f"  flame graph of the live bytes at the peak ({mib(total)}): {flame}"


# ---- the plot (tools/sluice_plot.py, run by a Python that has matplotlib) --------

def plot(python, json_path, png):
    """Draw with the Python found before the run; a signal meanwhile stops it."""
    p = subprocess.Popen([python, PLOT, json_path, png], stdin=subprocess.DEVNULL,
                         preexec_fn=program_signals)
    while p.poll() is None:
        info = wait_signal(p, time.monotonic() + 1)
        if info:
            p.kill()
            p.wait()
            raise Stopped(info.si_signo)
    if p.returncode:
        print(f"sluice: --plot: {python} could not draw {png} (exit {p.returncode})", file=sys.stderr)


# ---- the command ----------------------------------------------------------------

def cmd_run(args):
    if not args.program:
        fail("run: no program given (sluice run [options] -- program args...)", 2)
    if not os.path.exists(LIB):
        fail(f"the library is missing: {LIB}", 2)
    if args.interval < 1:
        fail(f"--interval {args.interval}: at least 1 ms", 2)
    peers = [p for p in (args.compare.split(",") if args.compare else []) if p]
    for p in peers:
        if p not in PEERS:
            fail(f"--compare: unknown allocator {p} (known: {', '.join(PEERS)})", 2)
    program = resolve(args.program[0])
    reason = unwatchable(program)
    if reason:
        fail(f"{program} is {reason}", 2)
    for path, option in ((args.json, "--json"), (args.plot, "--plot"), (args.flame, "--flame")):
        if path:
            check_writable(path, option)
    if args.profile:
        try:
            os.makedirs(args.profile, exist_ok=True)
        except OSError as e:
            fail(f"--profile {args.profile}: {e.strerror}", 2)
        if not os.access(args.profile, os.W_OK | os.X_OK):
            fail(f"--profile {args.profile}: not a folder this user can write", 2)
    python = None
    if args.plot:
        if not os.path.exists(PLOT):
            fail(f"--plot: the script that draws is missing: {PLOT}", 2)
        python, tried = find_plot_python()
        if not python:
            fail("--plot needs matplotlib, and none of these Pythons has it: " + ", ".join(tried)
                 + " (pip install matplotlib, or apt-get install python3-matplotlib)", 2)
    argv = [program] + args.program[1:]
    interval = args.interval / 1000.0
    plan = [("sluice", LIB)]
    for p in peers:
        lib = PEERS[p] and os.path.join(PEER_DIR, PEERS[p])
        if lib and not os.path.exists(lib):
            print(f"sluice: --compare {p}: {lib} is not installed, skipped", file=sys.stderr)
            continue
        plan.append((p, lib))
    set_subreaper()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, WAKE)
    folder = tempfile.mkdtemp(prefix="sluice-run-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        return run_all(args, argv, plan, interval, folder, python)
    except Stopped as e:
        print(f"\nsluice: stopped by a second {signame(e.args[0])}: the program was killed, nothing written",
              file=sys.stderr)
        return 128 + e.args[0]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        while signal.sigtimedwait(WAKE, 0):
            pass  # handled: not delivered again when unblocked
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def run_all(args, argv, plan, interval, folder, python):
    runs, foreign, got = {}, set(), None
    prof_dir = args.profile or (os.path.join(folder, "prof") if args.flame else None)
    if prof_dir and not args.profile:
        os.mkdir(prof_dir)
    tty = len(plan) > 1 and sys.stderr.isatty()
    for i, (name, lib) in enumerate(plan):
        def progress(elapsed, i=i, name=name):
            print(f"\r\033[Ksluice: run {i + 1}/{len(plan)} ({name}): {elapsed:.1f} s", end="", file=sys.stderr,
                  flush=True)
        publish = os.path.join(folder, "publish") if name == "sluice" else None
        if publish:
            os.mkdir(publish)
        try:
            runs[name], got = run_one(argv, lib, interval, publish, tty and progress, foreign,
                                      prof_dir if name == "sluice" else None)
        finally:
            if tty:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
        if got:
            break  # a signal ends the comparison too
    print("sluice run: " + shlex.join(argv)[:200], file=sys.stderr)
    for name, run in runs.items():
        print(summary(name, run, interval, name == "sluice"), file=sys.stderr)
    for line in warnings(runs["sluice"]):
        print(line, file=sys.stderr)
    if prof_dir:
        for line in profile_report(prof_dir, args.flame, argv, kept=bool(args.profile)):
            print(line, file=sys.stderr)
    data = {"command": argv, "interval_ms": args.interval, "runs": runs}
    json_path = args.json or os.path.join(folder, "run.json")
    if args.json or args.plot:
        with open(json_path, "w") as f:
            json.dump(data, f, indent=1)
    if args.plot:
        if signal.sigtimedwait(SIGNALS, 0):
            raise Stopped(signal.SIGINT)
        plot(python, json_path, args.plot)
    e = runs["sluice"]["exit"]
    if e["signal"]:
        print(f"sluice: {args.program[0]} was killed by signal {e['signal']} ({signame(e['signal'])})",
              file=sys.stderr)
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
        d = d.get("stats", d)  # the published object: {"pid":..., "stats": sl_stats_json's}
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
    r.add_argument("--json", metavar="FILE", help="write every sample, every process and the final statistics")
    r.add_argument("--plot", metavar="FILE.png",
                   help="draw the timeline (with the first Python found that has matplotlib)")
    r.add_argument("--compare", metavar="A,B", help="also run under glibc, jemalloc, tcmalloc, mimalloc")
    r.add_argument("--profile", metavar="DIR",
                   help="write sampled heap profiles (pprof's format) there; list the top sites at the peak and end")
    r.add_argument("--flame", metavar="FILE.svg", help="draw a flame graph of the live bytes at the peak")
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
