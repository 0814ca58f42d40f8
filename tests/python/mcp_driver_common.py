"""What the MCP SDK drivers (`mcp_stdio_client.py`, `mcp_http_client.py`) share.

Both drivers connect a `mcp.Client`, list every tool and resource template, perform the calls of
a CALLS.json file in order and print ONE JSON document on stdout:

    {...driver-specific keys..., "protocol_version": "...", "server_name": "...", "tool_count": N,
     "tool_names_sample": [first 5 names], "tools_with_output_schema": N,
     "resource_templates": [uri templates],
     "calls": [{"tool": NAME, "is_error": bool, "text": TEXT, "content_items": n, "structured": bool
                [, "channels_equal": bool][, "typed_errors": [..] | null]}
               | {"resource": URI, "text": TEXT, "mime_type": M, "contents": n}
               | {"tool" or "resource": ..., "jsonrpc_error": {"code": c, "message": m}}]}

With `--elicit ANSWER` the client declares elicitation support and answers every
elicitation the server sends with ANSWER: `accept` (the form with each boolean member true),
`uncheck` (accepted with each boolean false), `decline`, `cancel`, or `ignore` (answers too late:
the callback sleeps `IGNORE_SECONDS`, longer than the tests' CONFIRM_TIMEOUT, then declines; a
callback that never returned would leave the SDK's readers busy when the client closes), or
`notfound` (answers with the JSON-RPC error -32601 "Method not found", as clients do that declare
the capability but have no way to show a form). The report then has
`"elicitations": [{"message": ..., "requested_schema": {...}}]`, one per question, in order.
Without `--elicit` the client declares no elicitation support.

A call is `{"tool": NAME, "arguments": {...}}` (`tools/call`) or `{"resource": URI}`
(`resources/read`). `text` is the text of the first text content item (null when there is
none). A JSON-RPC error answer (e.g. -32602 for an unknown tool, -32002 for a missing
resource) is recorded, not raised.

The drivers are run as `python tests/python/<driver>.py`, so this directory is on `sys.path`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema
from mcp import Client, MCPError


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """`--mode`, `--calls` and `--timeout`, which every driver takes."""
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="SDK connect mode")
    parser.add_argument("--calls", required=True, help="JSON file: list of {tool, arguments}")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument(
        "--check-typed", action="store_true", help="check each operation's result against its typed output schema"
    )
    parser.add_argument(
        "--elicit",
        choices=["accept", "uncheck", "decline", "cancel", "ignore", "notfound"],
        help="declare elicitation support and answer every elicitation so",
    )


IGNORE_SECONDS = 4.0


class Elicitations:
    """The elicitation callback answering `answer`, and what it was asked."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []
        self.running = 0  # callbacks not yet returned (a late answer on its way)

    async def __call__(self, context: Any, params: Any) -> Any:
        from mcp import types

        schema = getattr(params, "requested_schema", None)
        schema = schema if isinstance(schema, dict) else (schema.model_dump(by_alias=True) if schema else None)
        self.asked.append({"message": params.message, "requested_schema": schema})
        if self.answer == "ignore":
            self.running += 1
            try:
                await asyncio.sleep(IGNORE_SECONDS)
            finally:
                self.running -= 1
            return types.ElicitResult(action="decline")
        if self.answer == "notfound":
            return types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
        if self.answer in ("decline", "cancel"):
            return types.ElicitResult(action=self.answer)
        props = (schema or {}).get("properties", {})
        content = {name: self.answer == "accept" for name, p in props.items() if p.get("type") == "boolean"}
        return types.ElicitResult(action="accept", content=content)


async def wait_until(what: str, condition: Callable[[], bool], limit: float = 60.0) -> None:
    """Until `condition()` holds, asked every 20 ms; fails saying `what` did not happen within
    `limit` seconds (a bound on the waiting, for a machine busy with other work)."""
    deadline = asyncio.get_running_loop().time() + limit
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"waited {limit} s for this, which did not happen: {what}")
        await asyncio.sleep(0.02)


def elicitation_of(args: argparse.Namespace) -> Elicitations | None:
    """The callback `--elicit` asks for, if any."""
    return Elicitations(args.elicit) if args.elicit else None


def load_calls(path: str) -> list[dict[str, Any]]:
    """The list of `{"tool": NAME, "arguments": {...}}` / `{"resource": URI}` in the CALLS.json file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def call_record(tool: str, result: Any) -> dict[str, Any]:
    """What a result was. The SDK has already checked `structuredContent` against the tool's
    listed `outputSchema` (it raises otherwise); `channels_equal` says whether the text item
    holds the same JSON."""
    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
    structured = result.structured_content
    record = {
        "tool": tool,
        "is_error": bool(result.is_error),
        "text": texts[0] if texts else None,
        "content_items": len(result.content),
        "structured": structured is not None,
    }
    if structured is not None:
        record["channels_equal"] = bool(texts) and json.loads(texts[0]) == structured
    return record


async def typed_errors(client: Client, tool: str, arguments: dict[str, Any], structured: Any) -> list[str] | None:
    """The ways `structured` (a success of `tool`) breaks the output schema the server's schema
    tool gives for its operation in the shape it has, checked by this SDK's own validator
    (`jsonschema`); None when the tool is no operation."""
    operation = arguments.get("operation_id") if tool == "gitea_call_operation" else tool
    if not operation or operation.startswith("gitea_"):
        return None
    shape = "compact" if "shape" in structured else "full"
    answer = await client.call_tool("gitea_get_operation_schema", {"operation_id": operation, "output": shape})
    schema = answer.structured_content["output_schema"]
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{e.message} at {e.json_path}" for e in list(validator.iter_errors(structured))[:3]]


async def drive(
    client: Client,
    calls: list[dict[str, Any]],
    head: dict[str, Any] | None = None,
    check_typed: bool = False,
    elicitations: Elicitations | None = None,
) -> dict[str, Any]:
    """Lists every tool (following cursors), performs `calls` in order; the report document,
    starting with the keys of `head`. With `check_typed`, each success of an operation is also
    checked against its typed output schema (`typed_errors`)."""
    info = client.server_info
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    templates = await client.list_resource_templates()
    out: dict[str, Any] = dict(head or {})
    out.update(
        {
            "protocol_version": client.protocol_version,
            "server_name": info.name if info is not None else None,
            "server_version": info.version if info is not None else None,
            "tool_count": len(tools),
            "tool_names_sample": [t.name for t in tools[:5]],
            "tool_names": [t.name for t in tools],
            "tools_with_output_schema": sum(1 for t in tools if t.output_schema is not None),
            "resource_templates": [t.uri_template for t in templates.resource_templates],
            "calls": [],
        }
    )
    for call in calls:
        if "resource" in call:
            out["calls"].append(await read_record(client, call["resource"]))
            continue
        tool = call["tool"]
        try:
            result = await client.call_tool(tool, call.get("arguments") or {})
        except MCPError as e:
            out["calls"].append({"tool": tool, "jsonrpc_error": {"code": e.code, "message": e.message}})
            continue
        record = call_record(tool, result)
        if check_typed and record["structured"] and not record["is_error"]:
            record["typed_errors"] = await typed_errors(
                client, tool, call.get("arguments") or {}, result.structured_content
            )
        out["calls"].append(record)
    if elicitations is not None:
        # A late answer is let go before the client closes (the SDK's readers fail otherwise):
        # the callback has returned it, and a ping sent after it is answered after it was
        # sent (the SDK sends a client's messages in order).
        await wait_until("the late answers were given", lambda: not elicitations.running)
        if elicitations.answer == "ignore":
            await client.send_ping()
        out["elicitations"] = elicitations.asked
    return out


async def read_record(client: Client, uri: str) -> dict[str, Any]:
    """One `resources/read`: the first content's text and media type, or the JSON-RPC error."""
    try:
        result = await client.read_resource(uri)
    except MCPError as e:
        return {"resource": uri, "jsonrpc_error": {"code": e.code, "message": e.message}}
    first = result.contents[0] if result.contents else None
    return {
        "resource": uri,
        "text": getattr(first, "text", None),
        "mime_type": getattr(first, "mime_type", None),
        "contents": len(result.contents),
    }


def report(name: str, run: Awaitable[dict[str, Any]]) -> int:
    """Runs `run` and prints its document as JSON on stdout: exit status 0. On any failure
    (connecting, listing, an ExceptionGroup from the SDK's task groups) the error, and each
    exception of a group, go to stderr prefixed with `name`: exit status 1."""
    try:
        out = asyncio.run(run)
    except BaseException as e:  # noqa: BLE001 - report anything (incl. ExceptionGroup) and fail
        if isinstance(e, KeyboardInterrupt):
            raise
        print(f"{name}: {type(e).__name__}: {e!r}", file=sys.stderr)
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                print(f"{name}:   {type(sub).__name__}: {sub!r}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0
