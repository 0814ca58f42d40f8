#!/usr/bin/env python3
"""Drive an MCP server over stdio with the official Python SDK (`mcp` 2.3.0) and report as JSON.

Usage:
    mcp_stdio_client.py [--mode legacy|auto] --calls CALLS.json -- SERVER_COMMAND [ARGS...]

The server command is spawned with this process's whole environment (the SDK would otherwise
pass only a small safe subset, dropping e.g. GITEA_TOKEN). CALLS.json is a JSON list of
`{"tool": NAME, "arguments": {...}}`. The client connects, lists the tools, performs every call in
order and prints ONE JSON document on stdout: the report described in `mcp_driver_common.py`.
Exit status 0 when the document was printed, 2 on usage errors, 1 when connecting or listing
failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_driver_common import add_common_arguments, drive, elicitation_of, load_calls, report


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    if "--" not in argv:
        parser.error("the server command must follow `--`")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("empty server command after `--`")
    return args, command


async def run(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    calls = load_calls(args.calls)
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    elicit = elicitation_of(args)
    async with Client(
        server, mode=args.mode, read_timeout_seconds=args.timeout, elicitation_callback=elicit
    ) as client:
        return await drive(client, calls, check_typed=args.check_typed, elicitations=elicit)


def main() -> int:
    args, command = parse_args(sys.argv[1:])
    return report("mcp_stdio_client", run(args, command))


if __name__ == "__main__":
    sys.exit(main())
