#!/usr/bin/env python3
"""A session client of the official Python SDK (`mcp`) losing its replica, and recovering.

Usage:
    replica_failover.py --transport http|sse URL --header "Authorization: token T"

Connects through URL (a load balancer in front of several replicas), calls `userGetCurrent`
and prints one JSON line `{"phase": "first", "session": ID, "login": L}`. Then it waits for a
line on standard input: meanwhile the test stops the replica that holds the session. It calls
again on the same session and prints `{"phase": "lost", "error": TEXT}` (or `"phase": "kept"`
when the call still succeeded), then opens a new session with the SDK, calls again and prints
`{"phase": "recovered", "session": ID, "login": L, "seconds": S}` (S: from the failed call to
the new session's answer). Exit status 0 when every line was printed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


def say(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


class Session:
    """One SDK session; `id` is the session id the server gave it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.id: str | None = None
        self.stack = AsyncExitStack()
        self.client: Client | None = None

    async def _seen(self, response: httpx2.Response) -> None:
        self.id = response.headers.get("mcp-session-id") or self.id

    async def open(self) -> Session:
        a = self.args
        if a.transport == "http":
            http = await self.stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=a.headers,
                    timeout=httpx2.Timeout(a.timeout, read=60.0),
                    event_hooks={"response": [self._seen]},
                )
            )
            transport = streamable_http_client(a.url, http_client=http)
        else:
            transport = sse_client(a.url, headers=a.headers, timeout=a.timeout, on_session_created=lambda sid: setattr(self, "id", sid))
        self.client = await self.stack.enter_async_context(
            Client(transport, mode="legacy", read_timeout_seconds=a.timeout)
        )
        return self

    async def whoami(self) -> str:
        assert self.client is not None
        result = await self.client.call_tool("userGetCurrent", {})
        text = next(item.text for item in result.content if getattr(item, "type", None) == "text")
        if result.is_error:
            raise RuntimeError(f"error result: {text[:300]}")
        return json.loads(text)["identity"]["login"]


async def first_session(args: argparse.Namespace, lost: asyncio.Event) -> None:
    """The session that loses its replica, entered and left in one task of its own (the SDK's
    cancel scopes must be left in the task that entered them). `lost` is set once its second
    call has been reported; leaving the session afterwards may fail, since its replica is
    gone, and nobody waits for that."""
    first = Session(args)
    await first.open()
    say({"phase": "first", "session": first.id, "login": await first.whoami()})
    await asyncio.to_thread(sys.stdin.readline)
    error = None
    with anyio.move_on_after(args.timeout) as scope:
        try:
            login = await first.whoami()
            say({"phase": "kept", "session": first.id, "login": login})
        except Exception as e:  # noqa: BLE001 - whatever the SDK raises is reported
            error = f"{type(e).__name__}: {e}"[:300]
    if scope.cancelled_caught:
        error = f"no answer within {args.timeout} s"
    if error is not None:
        say({"phase": "lost", "error": error})
    lost.set()
    await first.stack.aclose()


async def run(args: argparse.Namespace) -> None:
    lost = asyncio.Event()
    first = asyncio.create_task(first_session(args, lost))
    waiting = asyncio.create_task(lost.wait())
    await asyncio.wait({first, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if not lost.is_set():
        # The first session failed before its second call was reported: that is the failure.
        waiting.cancel()
        raise first.exception() or RuntimeError("the first session ended early")
    failed_at = time.monotonic()
    second = await Session(args).open()
    login = await second.whoami()
    say({"phase": "recovered", "session": second.id, "login": login,
         "seconds": round(time.monotonic() - failed_at, 3)})
    await second.stack.aclose()
    # The first session's end (its replica is gone) is not waited for beyond a moment.
    await asyncio.wait({first}, timeout=5)
    if not first.done():
        first.cancel()
    elif not first.cancelled():
        first.exception()  # taken, and let go: ending a session whose replica is gone may fail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=["http", "sse"], required=True)
    parser.add_argument("url")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args()
    args.headers = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep:
            parser.error(f"--header must be 'Name: value', got {h!r}")
        args.headers[name.strip()] = value.strip()
    try:
        asyncio.run(run(args))
    except Exception as e:  # noqa: BLE001
        print(f"replica_failover: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
