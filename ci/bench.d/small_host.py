#!/usr/bin/env python3
"""The server under a memory limit: what a small host or a container with --memory gets.

  small_host.py HUBDEX HUBDEX_BENCH STORE PORT LIMITS_MIB [--queries F]... [--seconds N]

For each limit (a number of MiB, or `none`), a child memory cgroup (v1) of this process's own
is made with memory.limit_in_bytes set; the store's pages (and the server's segment cache)
are evicted from the page cache first (posix_fadvise DONTNEED), so the server's reads are
charged to it; the server starts inside the cgroup, so its start counts too. Then one and
eight REST clients (`hubdex-bench load`, search with query embedding). Per limit: start
seconds, p50/p99, QPS, errors, major faults, the cgroup's peak, OOM kills. The cgroup is
removed afterwards. Where no memory cgroup can be made, says so and prints nothing else.
Prints one JSON object.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def memory_cgroup() -> Path | None:
    """This process's memory cgroup (v1) directory, if a child can be made in it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (d / "memory.limit_in_bytes").exists() and os.access(d, os.W_OK):
                return d
    return None


def evict(paths: list[Path]) -> int:
    """Drops the page cache of every file under paths; returns how many files."""
    n = 0
    for root in paths:
        for f in root.rglob("*") if root.is_dir() else [root]:
            if f.is_file():
                try:
                    fd = os.open(f, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
    return n


def stat_of(cg: Path) -> dict[str, int]:
    out = {}
    for line in (cg / "memory.stat").read_text().splitlines():
        k, v = line.split()
        out[k] = int(v)
    return out


def major_faults(st: dict[str, int]) -> int:
    """Major faults of the cgroup and its children (v1 names them total_*)."""
    return st.get("total_pgmajfault", st.get("pgmajfault", 0))


def oom_kills(cg: Path) -> int:
    for line in (cg / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def one_limit(args, parent: Path, limit: str, port: int) -> dict:
    cg = parent / f"hubdex-small-host-{os.getpid()}-{limit}"
    cg.mkdir()
    try:
        if limit != "none":
            (cg / "memory.limit_in_bytes").write_text(str(int(limit) * 1024 * 1024))
        cache = Path(args.store).parent / f"small-host-cache-{limit}"
        evicted = evict([Path(args.store), cache])
        log = open(Path(args.store).parent / f"small-host-{limit}.log", "wb")
        procs = str(cg / "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        t0 = time.monotonic()
        server = subprocess.Popen(
            [args.hubdex, "--store", args.store, "--cache", str(cache), "serve",
             "--http", f"127.0.0.1:{port}", "--poll-interval", "0"],
            stdout=log, stderr=log, preexec_fn=enter)
        row = {"limit_mib": limit, "files_evicted": evicted}
        while not healthy(port):
            if server.poll() is not None or time.monotonic() - t0 > 120:
                break
            time.sleep(0.05)
        if server.poll() is not None or not healthy(port):
            row.update(started=False, exit=server.poll(), oom_kills=oom_kills(cg),
                       peak_mib=int((cg / "memory.max_usage_in_bytes").read_text()) / 2**20)
            server.kill()
            server.wait()
            return row
        row["start_seconds"] = time.monotonic() - t0
        row["after_start_mib"] = int((cg / "memory.usage_in_bytes").read_text()) / 2**20
        majflt0 = major_faults(stat_of(cg))
        for clients in (1, 8):
            load = [args.bench, "load", "--port", str(port), "--clients", str(clients),
                    "--seconds", str(args.seconds)]
            for q in args.queries:
                load += ["--queries", q]
            out = subprocess.run(load, capture_output=True, text=True)
            if out.returncode != 0 or server.poll() is not None:
                row[f"clients_{clients}"] = {"failed": out.stderr.strip()[-300:], "server_exit": server.poll()}
                break
            r = json.loads(out.stdout)
            row[f"clients_{clients}"] = {
                "qps": r["qps"], "p50_ms": r["latency"]["p50_ms"], "p99_ms": r["latency"]["p99_ms"],
                "errors": r["errors"], "requests": r["requests"]}
        st = stat_of(cg)
        row["major_faults"] = major_faults(st) - majflt0
        row["peak_mib"] = int((cg / "memory.max_usage_in_bytes").read_text()) / 2**20
        row["oom_kills"] = oom_kills(cg)
        row["server_alive"] = server.poll() is None
        row["anon_mib"] = st.get("total_rss", st.get("rss", 0)) / 2**20
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        return row
    finally:
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("hubdex")
    ap.add_argument("bench")
    ap.add_argument("store")
    ap.add_argument("port", type=int)
    ap.add_argument("limits", help="comma-separated MiB, or none")
    ap.add_argument("--queries", action="append", default=[])
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    parent = memory_cgroup()
    if parent is None:
        print(json.dumps({"skipped": "no writable memory cgroup (v1) for this process: "
                          "the small-host section needs one (see /proc/self/cgroup)"}))
        return 0
    rows = []
    for i, limit in enumerate(args.limits.split(",")):
        rows.append(one_limit(args, parent, limit, args.port + i))
        print(f"small-host: {json.dumps(rows[-1])}", file=sys.stderr)
    print(json.dumps({"cgroup": str(parent), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
