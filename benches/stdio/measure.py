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
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


@contextlib.contextmanager
def serving_http(s: Server):
    """The server over Streamable HTTP on a free port, once it listens: its process and URL."""
    port = free_port()
    p = subprocess.Popen(
        [s.path, *s.kind.http_args(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=environment(s.kind),
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
        yield p, f"http://127.0.0.1:{port}/mcp"
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


async def http_sessions(s: Server, sessions: int, calls: int) -> None:
    """`sessions` Streamable HTTP sessions of the official client (legacy mode: a session
    each), each making `calls` calls in a row, all at once; and the server's peak memory."""
    from mcp.client.streamable_http import streamable_http_client

    k = s.kind
    with serving_http(s) as (p, url):

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


def post(url: str, body: dict, headers: dict[str, str]) -> http.client.HTTPResponse:
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("POST", u.path, json.dumps(body), {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers,
    })
    r = conn.getresponse()
    r.read()
    conn.close()
    if r.status not in (200, 202):
        sys.exit(f"{url} answered {r.status} to {body['method']}")
    return r


def open_session(url: str) -> str:
    """A session opened as a client does: `initialize`, then `notifications/initialized`."""
    r = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wrk", "version": "0"},
    }}, {})
    sid = r.getheader("Mcp-Session-Id")
    if not sid:
        sys.exit(f"{url}: initialize opened no session")
    post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"})
    return sid


def stateless(k: Kind) -> bool:
    return k.env.get("MCP_STATELESS") == "true"


WRK_THREADS = 2


def wrk(script: str, url: str, clients: int, secs: float, env: dict[str, str]) -> dict[str, float]:
    """One wrk run; its calls/s, p50 and p99 (ms) and good and bad answers."""
    out = subprocess.run(
        ["wrk", f"-t{WRK_THREADS}", f"-c{clients}", f"-d{secs:g}s", "--latency", "-s", script, url],
        capture_output=True, text=True, env={**os.environ, **env, "WRK_THREADS": str(WRK_THREADS)},
        cwd=ROOT, check=True,
    ).stdout
    fig = {}
    for line in out.splitlines():
        w = line.split()
        if line.startswith("Requests/sec:"):
            fig["calls_per_s"] = float(w[1])
        elif line.startswith(("LATENCY", "RESULTS")):
            for kv in w[1:]:
                key, value = kv.split("=")
                fig[key] = float(value)
    return fig


def http_load(s: Server, clients: int, secs: float) -> None:
    """`clients` connections calling the issue-list tool as fast as the server answers, for
    `secs` seconds (wrk): in a session each (`clients` sessions) or, for a server run with
    MCP_STATELESS=true, stateless. Throughput, median and p99, the server's CPU per call and
    its peak resident memory after the run (the server is started for this run alone)."""
    k = s.kind
    with serving_http(s) as (p, url):
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": k.tool, "arguments": k.tool_args}}
        env = {"MCP_TOOL": k.tool}
        if stateless(k):
            call["params"]["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        else:
            env["MCP_SESSIONS"] = ",".join(open_session(url) for _ in range(clients))
        env["MCP_BODY"] = json.dumps(call)
        script = "benches/http/tools_call.lua"
        wrk(script, url, clients, 2, env)  # warm-up: connections, caches, the allocator's pools
        before = cpu_ms(p.pid)
        fig = wrk(script, url, clients, secs, env)
        used = cpu_ms(p.pid) - before
        if fig.get("bad", 1) or not fig.get("ok"):
            sys.exit(f"{s.label}: {fig.get('bad')} of the calls under load failed")
        s.record("load_calls_per_s", fig["calls_per_s"])
        s.record("load_p50_ms", fig["p50_us"] / 1000)
        s.record("load_p99_ms", fig["p99_us"] / 1000)
        s.record("load_cpu_ms", used / fig["ok"])
        s.record("load_peak_rss_mib", memory_mib(p.pid, "VmHWM"))
        s.record("load_threads", threads(p.pid))


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
    ("load_calls_per_s", "under load (wrk): calls/s", "{:,.0f}"),
    ("load_p50_ms", "under load: median, ms", "{:.2f}"),
    ("load_p99_ms", "under load: p99, ms", "{:.2f}"),
    ("load_cpu_ms", "under load: server CPU per call, ms", "{:.3f}"),
    ("load_peak_rss_mib", "peak resident memory after the load, MiB", "{:.1f}"),
    ("load_threads", "threads after the load", "{:.0f}"),
]


def report(servers: list[Server], floors: dict[str, list[float]], runs: int, load: tuple[str, str], against: str | None) -> None:
    """Medians, and each server's ratio to `against` (default: the first server to each other)."""
    base = next((s for s in servers if s.label == against), servers[0])
    others = [s for s in servers if s is not base]
    if against:
        head = ["figure", *(s.label for s in servers)] + [f"{s.label} / {base.label}" for s in others]
    else:
        head = ["figure", *(s.label for s in servers)] + [f"{base.label} / {s.label}" for s in others]
    print(f"\nmedians of {runs} interleaved runs; machine load (1/5/15 min) before: {load[0]}, after: {load[1]}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, title, fmt in ROWS:
        if not all(key in s.figures for s in servers):
            continue
        med = {s.label: statistics.median(s.figures[key]) for s in servers}
        b = med[base.label]
        if against:
            ratios = [f"{med[s.label] / b:.2f}×" if b else "—" for s in others]
        else:
            ratios = [f"{b / med[s.label]:.2f}×" if med[s.label] else "—" for s in others]
        print("| " + " | ".join([title, *(fmt.format(med[s.label]) for s in servers), *ratios]) + " |")
    if floors.get("call"):
        f = statistics.median(floors["call"])
        print(f"| direct GET of the same page (floor), median ms | {f:.3f} |")
        for s in servers:
            if "call_median_ms" in s.figures:
                m = statistics.median(s.figures["call_median_ms"])
                print(f"| {s.label}: call latency over the floor, ms | {m - f:.3f} |")
    for key, title in (("load_calls_per_s", "calls/s"), ("load_p50_ms", "median, ms"), ("load_p99_ms", "p99, ms")):
        if floors.get(key):
            print(f"| the same GET under the same load (floor): {title} | {statistics.median(floors[key]):,.2f} |")


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
    p.add_argument("--load", type=int, default=0, metavar="CLIENTS",
                   help="also CLIENTS connections under wrk over Streamable HTTP (a fresh server each run)")
    p.add_argument("--load-secs", type=float, default=20, help="seconds of each --load run")
    p.add_argument("--only-load", action="store_true", help="skip the stdio figures")
    p.add_argument("--against", help="LABEL: print every other server's figures as ratios to this one's")
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
    if a.load and not shutil.which("wrk"):
        sys.exit("--load needs wrk")
    floors: dict[str, list[float]] = {}
    for run in range(a.runs):
        for s in servers:
            if not a.only_load:
                start_up(s)
                asyncio.run(calls(s, a.calls, a.concurrent))
                if a.http:
                    asyncio.run(http_sessions(s, 8, max(a.calls // 4, 10)))
            if a.load:
                http_load(s, a.load, a.load_secs)
        if not a.only_load:
            floors.setdefault("call", []).append(floor_ms(a.forge, a.token, a.calls))
        if a.load:
            fig = wrk("benches/http/forge_get.lua", f"{a.forge}/api/v1/repos/{OWNER}/{REPO}/issues?limit=1",
                      a.load, a.load_secs, {"MCP_TOKEN": a.token})
            floors.setdefault("load_calls_per_s", []).append(fig["calls_per_s"])
            floors.setdefault("load_p50_ms", []).append(fig["p50_us"] / 1000)
            floors.setdefault("load_p99_ms", []).append(fig["p99_us"] / 1000)
        print(f"run {run + 1}/{a.runs} done", file=sys.stderr)
    if a.syscalls:
        for s in servers:
            asyncio.run(traced_calls(s, 200))
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    report(servers, floors, a.runs, (load_before, load_after), a.against)


if __name__ == "__main__":
    main()
