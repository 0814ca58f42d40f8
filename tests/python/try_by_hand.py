"""What a person does with `scripts/try` by hand, done by a program: start it as a terminal
would (its own process group, Ctrl-C not ignored), wait for the lines it prints, add the server
to Claude Code with the exact line it printed, check that `claude mcp list` shows it connected,
check that a request without the token it printed is refused, make one call with it through
the official SDK over HTTP (it must show in the server's log as it comes), then press Ctrl-C
and check that everything stopped and that nothing is left in the TMPDIR it was given
(Gitea's data, the run's token file).

    python tests/python/try_by_hand.py CLAUDE

CLAUDE is the pinned Claude Code (`.tools/claude/node_modules/.bin/claude`). The environment
is passed on to `scripts/try` (AEGIS_TRY_BINARY, AEGIS_TRY_GITEA). Exits 1 saying what went
wrong, with what `scripts/try` printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from mcp_driver_common import wait_until

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 300.0  # seconds for each wait: the forge's start and seeding on a busy machine


def fail(why: str, output: str) -> None:
    sys.exit(f"try by hand: {why}\n--- what scripts/try printed ---\n{output}")


def wait_for(what: str, condition, output) -> None:
    try:
        asyncio.run(wait_until(what, condition, LIMIT))
    except TimeoutError as e:
        fail(str(e), output())


async def one_call(url: str, headers: dict[str, str]) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=LIMIT) as http:
        async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=LIMIT) as c:
            result = await c.call_tool("repoGet", {"owner": "acme", "repo": "webapp"})
            if result.is_error:
                raise RuntimeError(f"repoGet failed: {result.content}")


def unauthenticated_status(url: str) -> int:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "someone-else", "version": "0"}}}
    request = urllib.request.Request(url, data=json.dumps(hello).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=LIMIT) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main() -> None:
    # Absolute: Claude runs in a folder of its own.
    claude = str(Path(sys.argv[1]).resolve())
    # Stopped from outside (the test run ending), it still stops what it started (`finally`).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("try by hand: stopped by SIGTERM"))
    log = tempfile.NamedTemporaryFile("w+", prefix="try-by-hand.", suffix=".log", delete=False)
    # Everything scripts/try and the forge keep goes in here, which must be empty at the end.
    scratch = Path(tempfile.mkdtemp(prefix="try-by-hand."))
    # A terminal's foreground job: a process group of its own, SIGINT at its default.
    try_ = subprocess.Popen(
        [str(ROOT / "scripts/try")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(scratch)},
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def output() -> str:
        return Path(log.name).read_text(encoding="utf-8", errors="replace")

    try:
        served = lambda: "each call as it comes" in output() or try_.poll() is not None
        wait_for("the lines that connect the clients", served, output)
        if try_.poll() is not None:
            fail(f"scripts/try ended with {try_.returncode} before it served", output())
        line = next((l.strip() for l in output().splitlines() if l.strip().startswith("Claude Code")), "")
        words = shlex.split(line.removeprefix("Claude Code").strip())
        if words[:3] != ["claude", "mcp", "add"]:
            fail(f"no `claude mcp add` line for Claude Code: {line!r}", output())
        name, url = words[words.index("http") + 1:words.index("http") + 3]
        header = words[words.index("--header") + 1] if "--header" in words else ""
        if not header.startswith("Authorization: Bearer "):
            fail(f"the Claude Code line carries no bearer token: {line!r}", output())
        with tempfile.TemporaryDirectory() as home:
            env = {
                "PATH": os.environ["PATH"],
                "HOME": home,
                "CLAUDE_CONFIG_DIR": f"{home}/config",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "MCP_TIMEOUT": "60000",
            }
            def run(args: list[str]) -> subprocess.CompletedProcess[str]:
                return subprocess.run([claude, *args], cwd=home, env=env, capture_output=True, text=True, timeout=LIMIT)

            added = run(words[1:])
            if added.returncode != 0:
                fail(f"{line} failed: {added.stdout}{added.stderr}", output())
            listed = run(["mcp", "list"])
            shown = [l for l in listed.stdout.splitlines() if l.startswith(f"{name}: ")]
            if len(shown) != 1 or not shown[0].endswith("- \u2714 Connected"):
                fail(f"claude mcp list does not show {name} connected:\n{listed.stdout}{listed.stderr}", output())
            print(f"try by hand: {shown[0]}")
        # Only for a client with the printed token: no one else on the machine acts as alice.
        status = unauthenticated_status(url)
        if status != 401:
            fail(f"a request without the printed token was answered {status}, not 401", output())
        key, _, value = header.partition(": ")
        asyncio.run(asyncio.wait_for(one_call(url, {key: value}), LIMIT))
        wait_for("the call in the server's log", lambda: "tools/call tool=repoGet" in output(), output)
        gitea = re.search(r"^Gitea:\s+(\S+)", output(), re.M)
        if not gitea:
            fail("no Gitea URL printed", output())
        os.killpg(try_.pid, signal.SIGINT)
        try:
            code = try_.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            fail("scripts/try did not end after Ctrl-C", output())
        if code != 0 or "try: Gitea stopped; its data is removed" not in output():
            fail(f"scripts/try ended with {code} after Ctrl-C", output())
        left = sorted(p.name for p in scratch.iterdir())
        if left:
            fail(f"left behind in TMPDIR after Ctrl-C: {left}", output())
        for served in (gitea.group(1), url):
            probe = subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "5", served])
            if probe.returncode != 7:  # 7: could not connect
                fail(f"{served} still answers after Ctrl-C", output())
        print("try by hand: connected, one call shown in the log; Ctrl-C stopped the server and Gitea")
    finally:
        # Ctrl-C first, so that its clean-up runs; a kill only if that does not end it.
        if try_.poll() is None:
            os.killpg(try_.pid, signal.SIGINT)
            try:
                try_.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(try_.pid, signal.SIGKILL)
        os.unlink(log.name)
        subprocess.run(["rm", "-rf", str(scratch)])


if __name__ == "__main__":
    main()
