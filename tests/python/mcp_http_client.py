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
call in order and prints ONE JSON document on stdout:

    {"transport": "http"|"sse", "mode": "legacy"|"auto",
     "protocol_version": "...", "server_name": "...", "tool_count": N,
     "tool_names_sample": [first 5 names],
     "calls": [{"tool": NAME, "is_error": bool, "text": TEXT, "content_items": n}
               | {"tool": NAME, "jsonrpc_error": {"code": c, "message": m}}]}

`text` is the text of the first text content item (null when there is none). A JSON-RPC error
answer to `tools/call` (e.g. -32602 for an unknown tool) is recorded, not raised. Exit status 0
when the document was printed, 2 on usage errors, 1 when connecting or listing failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=["http", "sse"], required=True, help="Streamable HTTP or legacy SSE")
    parser.add_argument("url", help="endpoint: .../mcp (http) or .../sse (sse)")
    parser.add_argument(
        "--header", action="append", default=[], metavar="'NAME: VALUE'", help="header on every request (repeatable)"
    )
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="SDK connect mode")
    parser.add_argument("--calls", required=True, help="JSON file: list of {tool, arguments}")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    args = parser.parse_args(argv)
    headers: dict[str, str] = {}
    for h in args.header:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            parser.error(f"--header must be 'Name: value', got {h!r}")
        headers[name.strip()] = value.strip()
    args.headers = headers
    return args


def call_record(tool: str, result: Any) -> dict[str, Any]:
    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
    return {
        "tool": tool,
        "is_error": bool(result.is_error),
        "text": texts[0] if texts else None,
        "content_items": len(result.content),
    }


async def transport(args: argparse.Namespace, stack: AsyncExitStack) -> Any:
    if args.transport == "http":
        # The SDK does not close a client it was handed; the exit stack does, after the session.
        http_client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=args.headers, timeout=httpx2.Timeout(args.timeout, read=300.0))
        )
        return streamable_http_client(args.url, http_client=http_client)
    return sse_client(args.url, headers=args.headers, timeout=args.timeout)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with open(args.calls, encoding="utf-8") as f:
        calls = json.load(f)
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            Client(await transport(args, stack), mode=args.mode, read_timeout_seconds=args.timeout)
        )
        info = client.server_info
        tools: list[Any] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        out: dict[str, Any] = {
            "transport": args.transport,
            "mode": args.mode,
            "protocol_version": client.protocol_version,
            "server_name": info.name if info is not None else None,
            "tool_count": len(tools),
            "tool_names_sample": [t.name for t in tools[:5]],
            "calls": [],
        }
        for call in calls:
            tool = call["tool"]
            try:
                result = await client.call_tool(tool, call.get("arguments") or {})
            except MCPError as e:
                out["calls"].append({"tool": tool, "jsonrpc_error": {"code": e.code, "message": e.message}})
                continue
            out["calls"].append(call_record(tool, result))
        return out


def main() -> int:
    args = parse_args(sys.argv[1:])
    try:
        out = asyncio.run(run(args))
    except BaseException as e:  # noqa: BLE001 - report anything (incl. ExceptionGroup) and fail
        if isinstance(e, KeyboardInterrupt):
            raise
        print(f"mcp_http_client: {type(e).__name__}: {e!r}", file=sys.stderr)
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                print(f"mcp_http_client:   {type(sub).__name__}: {sub!r}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
