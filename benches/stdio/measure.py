"""Stdio measurements of MCP servers side by side, against the same fake forge.

What a person notices first about a stdio server (every MCP client starts its own, per window
or chat): how long until `tools/list` is answered, the CPU that took, the memory it keeps; then
what a call costs: latency against a direct GET of the same forge (the floor), the server's CPU
per call, throughput of 8 concurrent calls in one session. Runs are interleaved (run 1 of every
server, then run 2, ...) so that a change in the machine's load touches all of them alike, and
each figure is the median over the runs.

Start-up is timed with a bare JSON-RPC client (spawn, `initialize`, `tools/list`, last byte
read), so the figure is the server's and not a client library's. Calls go through the official
Python SDK, as users' clients do. CPU is read from the scheduler (`/proc/PID/task/*/schedstat`,
nanoseconds, every thread), memory from `/proc/PID/status`.

Usage: python benches/stdio/measure.py --forge URL --token TOKEN --server NAME=KIND:PATH ...
(scripts/bench-stdio starts the fake forge and passes these). KIND says how the server is run
and which of its tools lists a repository's issues: `aegis` or `forgejo-mcp`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

OWNER, REPO = "alice", "demo"


@dataclass
class Kind:
    """How to run one kind of server over stdio against a forge, and its issue-list tool."""

    args: list[str]
    env: dict[str, str]
    tool: str
    tool_args: dict
    # Streamable HTTP: the arguments that serve on a port, given the port.
    http_args: object = None


def kind(name: str, forge: str, token: str, extra_env: dict[str, str]) -> Kind:
    issues = {"owner": OWNER, "repo": REPO, "limit": 1}
    if name == "aegis":
        env = {"GITEA_URL": forge, "GITEA_TOKEN": token}
        http = lambda port: ["serve", "--transport", "http", "--listen", f"127.0.0.1:{port}"]
        return Kind(["serve"], {**env, **extra_env}, "issueListIssues", issues, http)
    if name == "forgejo-mcp":
        # goern/forgejo-mcp: `--url`, token from FORGEJO_ACCESS_TOKEN; asks /api/v1/version at start.
        http = lambda port: ["--url", forge, "-t", "http", "-http-port", str(port)]
        return Kind(["--url", forge], {"FORGEJO_ACCESS_TOKEN": token, **extra_env}, "list_repo_issues", issues, http)
    sys.exit(f"unknown server kind {name!r} (aegis, forgejo-mcp)")


@dataclass
class Server:
    label: str
    path: str
    kind: Kind
    figures: dict[str, list[float]] = field(default_factory=dict)

    def record(self, key: str, value: float) -> None:
        self.figures.setdefault(key, []).append(value)


def cpu_ms(pid: int) -> float:
    """CPU time of every live thread of `pid`, from the scheduler's own count."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            pass  # the thread ended between the listing and the read
    return total / 1e6


def memory_mib(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def environment(k: Kind) -> dict[str, str]:
    keep = {n: os.environ[n] for n in ("PATH", "HOME", "LANG") if n in os.environ}
    return {**keep, **k.env}


def start_up(s: Server) -> None:
    """Spawn, `initialize`, `notifications/initialized`, `tools/list`; time to the answer's last byte."""
    begun = time.perf_counter()
    p = subprocess.Popen(
        [s.path, *s.kind.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=environment(s.kind),
    )
    assert p.stdin and p.stdout

    def send(message: dict) -> None:
        p.stdin.write((json.dumps(message) + "\n").encode())
        p.stdin.flush()

    def answer(id_: int) -> dict:
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{s.label}: the server closed stdout before answering request {id_}")
            message = json.loads(line)
            if message.get("id") == id_:
                return message

    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = answer(2)
        elapsed = (time.perf_counter() - begun) * 1000
        s.record("start_ms", elapsed)
        s.record("start_cpu_ms", cpu_ms(p.pid))
        s.record("rss_after_list_mib", memory_mib(p.pid, "VmRSS"))
        # Private memory: what each further copy of the server costs (the binary's pages are shared).
        s.record("anon_after_list_mib", memory_mib(p.pid, "RssAnon"))
        s.record("threads_after_list", threads(p.pid))
        s.record("tools", len(listed["result"]["tools"]))
        s.record("tools_list_bytes", len(json.dumps(listed["result"], separators=(",", ":"))))
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def child_pid(before: set[int]) -> int:
    """The server the SDK spawned: our one new child process."""
    for _ in range(200):
        new = children() - before
        if new:
            return new.pop()
        time.sleep(0.01)
    sys.exit("could not find the server process the SDK started")


def children() -> set[int]:
    me = os.getpid()
    out: set[int] = set()
    for tid in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{tid}/children") as f:
            out |= {int(c) for c in f.read().split()}
    return out


async def calls(s: Server, sequential: int, concurrent: int) -> None:
    k = s.kind
    before = children()
    async with Client(transport(s), mode="legacy") as c:
        pid = child_pid(before)
        await c.list_tools()

        async def one() -> None:
            r = await c.call_tool(k.tool, k.tool_args)
            if r.is_error:
                sys.exit(f"{s.label}: {k.tool} failed: {r.content}")

        for _ in range(20):
            await one()
        latencies = []
        cpu_before = cpu_ms(pid)
        for _ in range(sequential):
            t = time.perf_counter()
            await one()
            latencies.append((time.perf_counter() - t) * 1000)
        s.record("call_cpu_ms", (cpu_ms(pid) - cpu_before) / sequential)
        s.record("call_median_ms", statistics.median(latencies))
        s.record("call_p90_ms", statistics.quantiles(latencies, n=10)[-1])

        async def worker(n: int) -> None:
            for _ in range(n):
                await one()

        t = time.perf_counter()
        await asyncio.gather(*(worker(concurrent // 8) for _ in range(8)))
        s.record("concurrent8_calls_per_s", (concurrent // 8) * 8 / (time.perf_counter() - t))
        s.record("peak_rss_stdio_mib", memory_mib(pid, "VmHWM"))


async def traced_calls(s: Server, n: int) -> None:
    """System calls per call, counted by strace on the running server (a separate session:
    tracing slows the server, so no timing is taken here)."""
    k = s.kind
    before = children()
    async with Client(transport(s), mode="legacy") as c:
        pid = child_pid(before)
        await c.list_tools()
        for _ in range(10):
            await c.call_tool(k.tool, k.tool_args)
        with tempfile.NamedTemporaryFile(mode="r", suffix=".strace") as out:
            tracer = subprocess.Popen(
                ["strace", "-f", "-c", "-o", out.name, "-p", str(pid)], stderr=subprocess.DEVNULL
            )
            await asyncio.sleep(0.5)  # strace attaches to every thread
            for _ in range(n):
                await c.call_tool(k.tool, k.tool_args)
            tracer.terminate()
            tracer.wait(timeout=10)
            total, futex = parse_strace(out.read())
        s.record("call_syscalls", total / n)
        s.record("call_futex", futex / n)


def parse_strace(text: str) -> tuple[int, int]:
    total = futex = 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit():
            name = parts[-1]
            count = int(parts[3])
            if name == "total":
                total = count
            elif name == "futex":
                futex = count
    return total, futex


# Where the servers' logs go: nowhere (they are not what is measured). One handle for the run.
DEVNULL = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


def transport(s: Server):
    """The SDK's stdio transport, with the server's log discarded."""
    params = StdioServerParameters(command=s.path, args=s.kind.args, env=environment(s.kind))
    return stdio_client(params, errlog=DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def http_sessions(s: Server, sessions: int, calls: int) -> None:
    """`sessions` Streamable HTTP sessions of the official client (legacy mode: a session
    each), each making `calls` calls in a row, all at once; and the server's peak memory."""
    from mcp.client.streamable_http import streamable_http_client

    k = s.kind
    port = free_port()
    p = subprocess.Popen(
        [s.path, *k.http_args(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=environment(k),
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.025)
        else:
            sys.exit(f"{s.label}: nothing listened on port {port} within 5 s")
        url = f"http://127.0.0.1:{port}/mcp"

        async def run(c: Client, n: int) -> None:
            for _ in range(n):
                r = await c.call_tool(k.tool, k.tool_args)
                if r.is_error:
                    sys.exit(f"{s.label}: {k.tool} failed over HTTP: {r.content}")

        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(Client(streamable_http_client(url), mode="legacy"))
                for _ in range(sessions)
            ]
            await asyncio.gather(*(run(c, 5) for c in clients))  # warm-up
            t = time.perf_counter()
            await asyncio.gather(*(run(c, calls) for c in clients))
            s.record("http8_calls_per_s", sessions * calls / (time.perf_counter() - t))
        s.record("peak_rss_http_mib", memory_mib(p.pid, "VmHWM"))
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def floor_ms(forge: str, token: str, n: int) -> float:
    """A direct GET of the same page the tools ask for, on one kept-alive connection."""
    u = urllib.parse.urlsplit(forge)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    path = f"/api/v1/repos/{OWNER}/{REPO}/issues?limit=1"
    headers = {"Authorization": f"token {token}", "Accept": "application/json"}
    out = []
    for i in range(n + 20):
        t = time.perf_counter()
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"the forge answered {r.status} to {path}")
        if i >= 20:
            out.append((time.perf_counter() - t) * 1000)
    conn.close()
    return statistics.median(out)


ROWS = [
    ("tools", "tools listed", "{:.0f}"),
    ("tools_list_bytes", "tools/list result, bytes", "{:,.0f}"),
    ("start_ms", "cold start → tools/list answered, ms", "{:.1f}"),
    ("start_cpu_ms", "server CPU until then, ms", "{:.1f}"),
    ("rss_after_list_mib", "resident memory after tools/list, MiB", "{:.1f}"),
    ("anon_after_list_mib", "of which private (RssAnon), MiB", "{:.1f}"),
    ("threads_after_list", "threads after tools/list", "{:.0f}"),
    ("call_median_ms", "list issues (limit 1), median ms", "{:.3f}"),
    ("call_p90_ms", "list issues (limit 1), p90 ms", "{:.3f}"),
    ("call_cpu_ms", "server CPU per call, ms", "{:.3f}"),
    ("call_syscalls", "system calls per call", "{:.1f}"),
    ("call_futex", "of which futex", "{:.1f}"),
    ("concurrent8_calls_per_s", "8 concurrent calls, one session, calls/s", "{:,.0f}"),
    ("peak_rss_stdio_mib", "peak resident memory (stdio), MiB", "{:.1f}"),
    ("http8_calls_per_s", "8 Streamable HTTP sessions (Python SDK), calls/s", "{:,.0f}"),
    ("peak_rss_http_mib", "peak resident memory after them (HTTP), MiB", "{:.1f}"),
]


def report(servers: list[Server], floor: list[float], runs: int, load: tuple[str, str]) -> None:
    first = servers[0]
    head = ["figure", *(s.label for s in servers)] + [f"{first.label} / {s.label}" for s in servers[1:]]
    print(f"\nmedians of {runs} interleaved runs; machine load (1/5/15 min) before: {load[0]}, after: {load[1]}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, title, fmt in ROWS:
        if not all(key in s.figures for s in servers):
            continue
        med = [statistics.median(s.figures[key]) for s in servers]
        cells = [fmt.format(m) for m in med] + [f"{med[0] / m:.2f}×" if m else "—" for m in med[1:]]
        print("| " + " | ".join([title, *cells]) + " |")
    f = statistics.median(floor)
    print(f"| direct GET of the same page (floor), median ms | {f:.3f} |")
    for s in servers:
        m = statistics.median(s.figures["call_median_ms"])
        print(f"| {s.label}: call latency over the floor, ms | {m - f:.3f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--forge", required=True, help="the fake forge's URL")
    p.add_argument("--token", required=True)
    p.add_argument("--server", action="append", required=True, help="LABEL=KIND:PATH (first: the one compared)")
    p.add_argument("--env", action="append", default=[], help="LABEL:NAME=VALUE, extra environment for one server")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--calls", type=int, default=300, help="sequential calls per run")
    p.add_argument("--concurrent", type=int, default=800, help="calls per run in the 8-way phase")
    p.add_argument("--syscalls", action="store_true", help="also count system calls per call with strace")
    p.add_argument("--http", action="store_true", help="also 8 Streamable HTTP sessions of the Python SDK")
    a = p.parse_args()
    extra: dict[str, dict[str, str]] = {}
    for e in a.env:
        label, assignment = e.split(":", 1)
        name, value = assignment.split("=", 1)
        extra.setdefault(label, {})[name] = value
    servers = []
    for spec in a.server:
        label, rest = spec.split("=", 1)
        kind_name, path = rest.split(":", 1)
        if not os.access(path, os.X_OK):
            sys.exit(f"{label}: {path} is not an executable file")
        servers.append(Server(label, path, kind(kind_name, a.forge, a.token, extra.get(label, {}))))
    if a.syscalls and not shutil.which("strace"):
        sys.exit("--syscalls needs strace")
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    floor = []
    for run in range(a.runs):
        for s in servers:
            start_up(s)
            asyncio.run(calls(s, a.calls, a.concurrent))
            if a.http:
                asyncio.run(http_sessions(s, 8, max(a.calls // 4, 10)))
        floor.append(floor_ms(a.forge, a.token, a.calls))
        print(f"run {run + 1}/{a.runs} done", file=sys.stderr)
    if a.syscalls:
        for s in servers:
            asyncio.run(traced_calls(s, 200))
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    report(servers, floor, a.runs, (load_before, load_after))


if __name__ == "__main__":
    main()
