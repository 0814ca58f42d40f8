#!/usr/bin/env python3
"""Drive an MCP server over Streamable HTTP or legacy SSE with the official Python SDK (`mcp` 2.3.0) and report as JSON.

Usage:
    mcp_http_client.py --transport http|sse URL [--header "Name: value"]... [--mode legacy|auto]
                       --calls CALLS.json

URL is the Streamable HTTP endpoint (`http://HOST:PORT/mcp`) or the legacy SSE endpoint
(`http://HOST:PORT/sse`). Every `--header` is sent on every HTTP request the SDK makes (for
Streamable HTTP: each POST, the standalone GET stream and the closing DELETE; for SSE: the GET
stream and each message POST), e.g. `--header "Authorization: Bearer TOKEN"`. CALLS.json is a JSON
list of `{"tool": NAME, "arguments": {...}}`. The client connects, lists the tools, performs every
call in order and prints ONE JSON document on stdout: the report described in
`mcp_driver_common.py`, starting with `"transport": "http"|"sse"` and `"mode": "legacy"|"auto"`.
Exit status 0 when the document was printed, 2 on usage errors, 1 when connecting or listing
failed.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_driver_common import add_common_arguments, drive, elicitation_of, load_calls, report


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=["http", "sse"], required=True, help="Streamable HTTP or legacy SSE")
    parser.add_argument("url", help="endpoint: .../mcp (http) or .../sse (sse)")
    parser.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="header on every request (repeatable)"
    )
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    headers: dict[str, str] = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            parser.error(f"--header must be 'Name: value', got {h!r}")
        headers[name.strip()] = value.strip()
    args.headers = headers
    return args


async def transport(args: argparse.Namespace, stack: AsyncExitStack) -> Any:
    if args.transport == "http":
        # The SDK does not close a client it was handed; the exit stack does, after the session.
        http_client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=args.headers, timeout=httpx2.Timeout(args.timeout, read=300.0))
        )
        return streamable_http_client(args.url, http_client=http_client)
    return sse_client(args.url, headers=args.headers, timeout=args.timeout)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    calls = load_calls(args.calls)
    elicit = elicitation_of(args)
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            Client(
                await transport(args, stack),
                mode=args.mode,
                read_timeout_seconds=args.timeout,
                elicitation_callback=elicit,
            )
        )
        head = {"transport": args.transport, "mode": args.mode}
        return await drive(client, calls, head, args.check_typed, elicit)


def main() -> int:
    args = parse_args(sys.argv[1:])
    return report("mcp_http_client", run(args))


if __name__ == "__main__":
    sys.exit(main())
