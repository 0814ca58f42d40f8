#!/usr/bin/env python3
"""Drive an MCP server over stdio with the official Python SDK (`mcp` 2.3.0) and report as JSON.

Usage:
    mcp_stdio_client.py [--mode legacy|auto] --calls CALLS.json -- SERVER_COMMAND [ARGS...]

The server command is spawned with this process's whole environment (the SDK would otherwise
pass only a small safe subset, dropping e.g. GITEA_TOKEN). CALLS.json is a JSON list of
`{"tool": NAME, "arguments": {...}}`. The client connects, lists the tools, performs every call in
order and prints ONE JSON document on stdout:

    {"protocol_version": "...", "server_name": "...", "tool_count": N,
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
import os
import sys
from typing import Any

from mcp import Client, MCPError, StdioServerParameters


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="SDK connect mode")
    parser.add_argument("--calls", required=True, help="JSON file: list of {tool, arguments}")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    if "--" not in argv:
        parser.error("the server command must follow `--`")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("empty server command after `--`")
    return args, command


def call_record(tool: str, result: Any) -> dict[str, Any]:
    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
    return {
        "tool": tool,
        "is_error": bool(result.is_error),
        "text": texts[0] if texts else None,
        "content_items": len(result.content),
    }


async def run(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    with open(args.calls, encoding="utf-8") as f:
        calls = json.load(f)
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(server, mode=args.mode, read_timeout_seconds=args.timeout) as client:
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
    args, command = parse_args(sys.argv[1:])
    try:
        out = asyncio.run(run(args, command))
    except BaseException as e:  # noqa: BLE001 - report anything (incl. ExceptionGroup) and fail
        if isinstance(e, KeyboardInterrupt):
            raise
        print(f"mcp_stdio_client: {type(e).__name__}: {e!r}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
