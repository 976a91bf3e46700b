"""One fresh redis-server for a run, shared by bench/redis.py,
bench/redis_cpu.py and bench/redis_flush.py: a free port, the server
started under a preloaded allocator (None: the server as it is linked,
with Debian's libjemalloc) with no persistence, waited for until it
answers, and stopped at the end; and what the kernel says it holds.
"""
import contextlib
import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env():
    """Our environment without LD_PRELOAD and sluice's options."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") and k != "LD_PRELOAD"}


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True)


@contextlib.contextmanager
def server(lib, *args, env=None):
    """A redis-server on a free port with lib preloaded and args after the
    common ones, in env (default: clean_env()); yields (process, port) once
    it answers PING (or after 10 s), and stops it on the way out."""
    port = free_port()
    env = dict(clean_env() if env is None else env)
    env.pop("LD_PRELOAD", None)
    if lib:
        env["LD_PRELOAD"] = lib
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--daemonize", "no", *args], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if cli(port, "ping").returncode == 0:
                break
            time.sleep(0.1)
        yield srv, port
    finally:
        srv.terminate()
        srv.wait()


def rollup(pid):
    """/proc/PID/smaps_rollup's fields, in bytes."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1]) << 10
    return out
