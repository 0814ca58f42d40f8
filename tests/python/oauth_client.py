#!/usr/bin/env python3
"""Sign in with the forge, without a person: drive an MCP server over Streamable HTTP with the
official Python SDK's OAuth client (`mcp.client.auth.OAuthClientProvider`, `mcp` 2.3.0), then call
tools and report as JSON lines.

Usage:
    oauth_client.py --url http://HOST:PORT/mcp --login NAME --password PASSWORD
                    [--scope "read:repository read:user"] [--call NAME=JSON]...
                    [--client-metadata-url https://.../client.json] [--mode legacy|auto]
                    [--timeout SECONDS] [--force-refresh] [--trace]

The SDK does the OAuth work: on the server's 401 it discovers the protected-resource metadata and
the authorization server's metadata, registers a client (dynamic client registration, or a client
ID metadata document URL when `--client-metadata-url` is given and the server advertises
`client_id_metadata_document_supported`), and builds the authorize URL with PKCE S256. Its
redirect handler here is `forge_browser.ForgeBrowser`: it follows the authorize URL itself (each
30x one step: the MCP server's /authorize, the forge's /login/oauth/authorize, the forge's login
page, its consent page, the MCP server's /oauth/callback), signs in with `--login`/`--password`
and grants, until a redirect to the client's redirect_uri appears: `http://127.0.0.1:PORT/callback`
on a free port nobody serves; its `code` and `state` (and `iss`) are taken from that Location
header and returned by the callback handler. The SDK then exchanges the code at the token endpoint
and retries the MCP request with the access token. Tokens live in memory only.

`--scope`: the scope the authorization request asks for. Without it the SDK chooses (the
`scope` of the server's WWW-Authenticate challenge, else the resource metadata's
`scopes_supported`, else the authorization server's, else none); the SDK replaces the client
metadata's own `scope` with that choice, so `--scope` is applied by pinning the choice (a scope
named by a later insufficient_scope challenge is added to it).

Output on stdout, one JSON object per line:
    {"authorization": {"steps": [...], "signed_in": b, "consent_shown": b, "authorize_params": {...}}}
        one per walk through the authorize URL (step URLs without their query strings);
    {"connected": {"protocol_version": ..., "server_name": ..., "tool_count": n}}
    {"tool": NAME, "is_error": b, "text": TEXT, "content_items": n}   one per --call, in order
        (or {"tool": NAME, "jsonrpc_error": {"code": c, "message": m}});
    {"token_storage": {"token_type": ..., "expires_in": ..., "scope": ..., "has_access_token": b,
        "has_refresh_token": b, "client_id_kind": "metadata-document"|"registered"|null,
        "token_endpoint_auth_method": ..., "has_client_secret": b, "tokens_stored": n}}
`--force-refresh` makes the SDK treat its access token as expired after connecting, so that the
first call goes through the token endpoint's refresh_token grant (tokens_stored then counts 2).
Token, code and secret values are never printed. `--trace` writes every HTTP request the SDK
makes (method, URL without query, status, form field names, MCP-Protocol-Version) to stderr.

Exit status: 0 when every line was printed (a tool result with isError is still a result), 1 when
connecting or signing in failed (the reason on stderr), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
import time
import traceback
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import mcp.client.auth.oauth2 as sdk_oauth2
from forge_browser import ForgeBrowser, ForgeBrowserError
from mcp import Client, MCPError
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import union_scopes
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp_driver_common import call_record

# Authorize-URL parameters whose values may be printed (the rest: only their names).
SHOWN_AUTHORIZE_PARAMS = ("response_type", "redirect_uri", "scope", "resource", "code_challenge_method", "prompt")


class InMemoryTokenStorage:
    """The SDK's TokenStorage protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.stores = 0  # how many times tokens were stored (the first exchange, then each refresh or re-authorization)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.stores += 1

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def free_port() -> int:
    """A loopback port that was free a moment ago; nothing will listen on it (the redirect is read
    from the Location header, never followed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    name, sep, raw = text.partition("=")
    if not name:
        raise ValueError(f"--call must be NAME or NAME=JSON, got {text!r}")
    if not sep or not raw.strip():
        return name, {}
    args = json.loads(raw)
    if not isinstance(args, dict):
        raise ValueError(f"--call {name}: the arguments must be a JSON object, got {raw!r}")
    return name, args


class Walker:
    """The redirect and callback handlers: the first walks the authorize URL with the headless
    browser, the second hands over what the walk ended with."""

    def __init__(self, browser: ForgeBrowser, redirect_uri: str) -> None:
        self.browser = browser
        self.redirect_uri = redirect_uri
        self.result: AuthorizationCodeResult | None = None
        self.walks = 0

    async def redirect_handler(self, authorization_url: str) -> None:
        self.walks += 1
        self.result = None
        params = dict(parse_qsl(urlsplit(authorization_url).query))
        shown = {k: params[k] for k in SHOWN_AUTHORIZE_PARAMS if k in params}
        shown["names"] = sorted(params)
        res = await self.browser.authorize(authorization_url, self.redirect_uri)
        emit(
            {
                "authorization": {
                    "endpoint": f"{urlsplit(authorization_url).scheme}://{urlsplit(authorization_url).netloc}"
                    f"{urlsplit(authorization_url).path}",
                    "authorize_params": shown,
                    "steps": res.steps,
                    "signed_in": res.signed_in,
                    "consent_shown": res.consent_shown,
                    "callback_params": sorted(k for k, _ in parse_qsl(urlsplit(res.location).query)),
                    "error": res.error,
                    "error_description": res.error_description,
                }
            }
        )
        if res.error is not None:
            raise OAuthFlowError(
                f"the authorization ended with error={res.error!r} ({res.error_description or 'no description'})"
            )
        if not res.code:
            raise OAuthFlowError("the redirect to the client's redirect_uri carried no code")
        self.result = AuthorizationCodeResult(code=res.code, state=res.state, iss=res.iss)

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise OAuthFlowError("no authorization response (the redirect handler did not finish)")
        result, self.result = self.result, None
        return result


def pin_scope(scope: str) -> None:
    """Make the SDK's scope choice `scope` (plus whatever a challenge adds)."""
    chosen = sdk_oauth2.get_client_metadata_scopes

    def pinned(www_authenticate_scope, prm, asm=None, grant_types=None):  # noqa: ANN001 - mirrors the SDK
        return union_scopes(scope, www_authenticate_scope) if www_authenticate_scope else scope

    pinned.__wrapped__ = chosen  # type: ignore[attr-defined]
    sdk_oauth2.get_client_metadata_scopes = pinned


def trace_hooks() -> dict[str, list]:
    async def on_response(response: httpx2.Response) -> None:
        req = response.request
        fields = None
        ctype = req.headers.get("content-type", "")
        if req.method == "POST" and "x-www-form-urlencoded" in ctype:
            fields = sorted(k for k, _ in parse_qsl(req.content.decode(errors="replace")))
        elif req.method == "POST" and "json" in ctype:
            try:
                body = json.loads(req.content or b"null")
                fields = body.get("method") if isinstance(body, dict) and "jsonrpc" in body else sorted(body)
            except (ValueError, AttributeError, TypeError):
                fields = None
        u = req.url
        line = {
            "http": f"{req.method} {u.scheme}://{u.netloc.decode()}{u.path}",
            "status": response.status_code,
            "mcp_protocol_version": req.headers.get("mcp-protocol-version"),
            "authorization": req.headers.get("authorization", "").split(" ")[0] or None,
            "body": fields,
        }
        if response.status_code in (401, 403):
            line["www_authenticate"] = response.headers.get("www-authenticate")
        print("trace: " + json.dumps(line), file=sys.stderr, flush=True)

    return {"response": [on_response]}


def storage_report(storage: InMemoryTokenStorage, client_metadata_url: str | None) -> dict[str, Any]:
    t, c = storage.tokens, storage.client_info
    kind = None
    if c is not None:
        kind = "metadata-document" if client_metadata_url and c.client_id == client_metadata_url else "registered"
    return {
        "token_type": t.token_type if t else None,
        "expires_in": t.expires_in if t else None,
        "scope": t.scope if t else None,
        "has_access_token": bool(t and t.access_token),
        "has_refresh_token": bool(t and t.refresh_token),
        "client_id_kind": kind,
        "token_endpoint_auth_method": c.token_endpoint_auth_method if c else None,
        "has_client_secret": bool(c and c.client_secret),
        "tokens_stored": storage.stores,
    }


async def run(args: argparse.Namespace) -> None:
    redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
    storage = InMemoryTokenStorage()
    browser = ForgeBrowser(args.login, args.password, max_steps=args.max_steps, timeout=args.timeout)
    walker = Walker(browser, redirect_uri)
    if args.scope is not None:
        pin_scope(args.scope)
    metadata = OAuthClientMetadata(
        client_name="aegis oauth_client.py",
        redirect_uris=[redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=args.scope,
    )
    provider = OAuthClientProvider(
        server_url=args.url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=walker.redirect_handler,
        callback_handler=walker.callback_handler,
        client_metadata_url=args.client_metadata_url,
    )
    async with AsyncExitStack() as stack:
        http_client = await stack.enter_async_context(
            httpx2.AsyncClient(
                auth=provider,
                timeout=httpx2.Timeout(args.timeout, read=300.0),
                event_hooks=trace_hooks() if args.trace else None,
            )
        )
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(args.url, http_client=http_client),
                mode=args.mode,
                read_timeout_seconds=args.timeout,
            )
        )
        info = client.server_info
        tools = await client.list_tools()
        emit(
            {
                "connected": {
                    "protocol_version": client.protocol_version,
                    "server_name": info.name if info is not None else None,
                    "tool_count": len(tools.tools),
                    "authorizations": walker.walks,
                }
            }
        )
        if args.force_refresh:
            # The SDK refreshes when it holds a refresh token and the access token has expired by
            # its own clock: make it so, and the next request goes through the refresh_token grant.
            provider.context.token_expiry_time = time.time() - 1
        for name, arguments in args.calls:
            try:
                result = await client.call_tool(name, arguments)
            except MCPError as e:
                emit({"tool": name, "jsonrpc_error": {"code": e.code, "message": e.message}})
                continue
            emit(call_record(name, result))
        emit({"token_storage": storage_report(storage, args.client_metadata_url)})


def describe(e: BaseException) -> list[str]:
    """The failure and, for exception groups (the SDK's task groups), each member, flattened."""
    if isinstance(e, BaseExceptionGroup):
        out: list[str] = []
        for sub in e.exceptions:
            out.extend(describe(sub))
        return out
    text = f"{type(e).__name__}: {e}"
    if not isinstance(e, ForgeBrowserError) and e.__traceback__ is not None:
        # Where it was raised: an error without a message (a reset connection) says little else.
        frames = traceback.extract_tb(e.__traceback__)
        text += " at " + " <- ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in frames[-3:][::-1])
    cause = e.__cause__ or e.__context__
    if cause is not None and not isinstance(e, ForgeBrowserError) and str(cause) != str(e):
        text += f" (caused by {type(cause).__name__}: {cause})"
    return [text]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parser.add_argument("--login", required=True, help="the forge user to sign in as")
    parser.add_argument("--password", required=True, help="that user's password")
    parser.add_argument("--scope", help="the scope to ask for (default: the SDK's choice)")
    parser.add_argument(
        "--call", action="append", default=[], metavar="NAME=JSON", help="a tool call (repeatable, in order)"
    )
    parser.add_argument("--client-metadata-url", help="an https client ID metadata document URL (CIMD)")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="SDK connect mode")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--max-steps", type=int, default=20, help="most requests in one authorize walk")
    parser.add_argument(
        "--force-refresh",
        action="store_true",
        help="after connecting, treat the access token as expired (the first --call then refreshes it)",
    )
    parser.add_argument("--trace", action="store_true", help="each HTTP request the SDK makes, on stderr")
    args = parser.parse_args()
    try:
        args.calls = [parse_call(c) for c in args.call]
    except ValueError as e:  # json.JSONDecodeError included
        parser.error(f"--call: {e}")
    # The SDK logs its own OAuth failures with a traceback (and other notes) through `logging`;
    # the failure is reported once, below. With --trace its log goes to stderr.
    if args.trace:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="sdk: %(name)s: %(message)s")
    else:
        logging.getLogger("mcp").addHandler(logging.NullHandler())
        logging.getLogger("mcp").propagate = False
    if args.client_metadata_url is not None and not sdk_oauth2.is_valid_client_metadata_url(args.client_metadata_url):
        parser.error("--client-metadata-url must be an https URL with a path (the SDK refuses anything else)")
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - report anything (incl. ExceptionGroup) and fail
        for line in describe(e):
            print(f"oauth_client: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
