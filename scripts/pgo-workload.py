#!/usr/bin/env python3
"""The work a profile-guided release build is trained on (scripts/build-release).

Runs the instrumented server against the fake forge the way its users do, so that the profile
says which code is hot (laid out together, optimised for speed) and which is never run (laid
out apart, optimised for size):

- stdio: start-up, `initialize`, `tools/list`, then a round of everyday calls (listing and
  reading issues, a repository, comments, creating an issue, the discovery tools) and of
  calls that fail (a wrong argument, an unknown repository, an unknown tool), many times;
- Streamable HTTP with sessions, 8 clients at once, and stateless, 8 clients at once;
- on Linux, stdio again with the forge behind TLS (a certificate made here, trusted through
  SSL_CERT_FILE), as forges are reached in real use.

Every call must end as expected (a result, or an error result where one is meant): a workload
that silently failed would train the build on its error paths. Only the Python standard
library is used, so that the release build needs nothing installed beyond a Rust toolchain.

Usage: scripts/pgo-workload.py SERVER FAKE_FORGE (LLVM_PROFILE_FILE says where profiles go)
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse

TOKEN = "tok-alice-0123456789"
REPO = {"owner": "alice", "repo": "demo"}
ROUNDS = 40  # rounds of CALLS over stdio
HTTP_CLIENTS = 8
HTTP_ROUNDS = 10  # rounds of CALLS per HTTP client

# (tool, arguments, whether the result is an error)
CALLS = [
    ("issueListIssues", {**REPO, "limit": 1}, False),
    ("issueListIssues", {**REPO, "state": "all", "limit": 5, "page": 1}, False),
    ("repoGet", REPO, False),
    ("issueGetIssue", {**REPO, "index": 1}, False),
    ("issueGetComments", {**REPO, "index": 1}, False),
    ("issueCreateIssue", {**REPO, "body": {"title": "Trained", "body": "A *workload* issue."}}, False),
    ("gitea_search_operations", {"query": "list pull requests"}, False),
    ("gitea_get_operation_schema", {"operation_id": "issueListIssues"}, False),
    ("gitea_call_operation", {"operation_id": "repoGet", "arguments": REPO}, False),
    ("issueGetIssue", {**REPO, "index": "first"}, True),
    ("repoGet", {"owner": "alice", "repo": "missing"}, True),
]


# The whole workload takes about 2 s; a server or forge that stops answering ends it here
# rather than holding the build until CI's own limit.
LIMIT_S = 300
STARTED: list[subprocess.Popen] = []


def fail(why: str) -> None:
    sys.exit(f"pgo-workload: {why}")


def start(argv: list[str], **kw) -> subprocess.Popen:
    """A process of the workload, ended by the watchdog if the workload outlives LIMIT_S."""
    p = subprocess.Popen(argv, text=True, **kw)
    STARTED.append(p)
    return p


def give_up() -> None:
    for p in STARTED:
        p.kill()
    print(f"pgo-workload: not done after {LIMIT_S} s: a server or the forge stopped answering", file=sys.stderr)
    os._exit(1)


def check(answer: dict, tool: str, error: bool) -> None:
    if "result" not in answer:
        fail(f"{tool}: no result: {json.dumps(answer)[:300]}")
    if bool(answer["result"].get("isError")) != error:
        fail(f"{tool}: isError is not {error}: {json.dumps(answer)[:300]}")


def call(i: int, tool: str, args: dict, meta: dict | None = None) -> dict:
    params = {"name": tool, "arguments": args}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}


INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pgo-workload", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def environment(forge: str, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "SYSTEMROOT", "LLVM_PROFILE_FILE")}
    return {**keep, "GITEA_URL": forge, "GITEA_TOKEN": TOKEN, "LOG_LEVEL": "error", **extra}


def stdio(server: str, env: dict[str, str], rounds: int) -> int:
    """One stdio session: the handshake, the tool list, `rounds` rounds of CALLS, an unknown
    tool; the server ends when its input does (and writes its profile)."""
    p = start([server, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert p.stdin and p.stdout

    def ask(message: dict) -> dict | None:
        p.stdin.write(json.dumps(message) + "\n")
        p.stdin.flush()
        if "id" not in message:
            return None
        line = p.stdout.readline()
        if not line:
            fail("the stdio server ended early")
        return json.loads(line)

    ask(INITIALIZE)
    ask(INITIALIZED)
    if len(ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]) < 10:
        fail("tools/list listed too few tools")
    n = 2
    for _ in range(rounds):
        for tool, args, error in CALLS:
            check(ask(call(n, tool, args)), tool, error)
            n += 1
    if "error" not in ask(call(n, "noSuchTool", {})):
        fail("an unknown tool was not refused")
    p.stdin.close()
    if p.wait(timeout=30) != 0:
        fail(f"the stdio server exited with {p.returncode}")
    return n


class Http:
    """One client's kept-alive connection to the server's /mcp."""

    def __init__(self, url: str, headers: dict[str, str]):
        u = urllib.parse.urlsplit(url)
        self.path = u.path
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}

    def post(self, message: dict, headers: dict[str, str] | None = None) -> tuple[http.client.HTTPResponse, dict | None]:
        self.conn.request("POST", self.path, json.dumps(message), {**self.headers, **(headers or {})})
        r = self.conn.getresponse()
        body = r.read().decode()
        if r.status >= 300:
            fail(f"HTTP {r.status} to {message.get('method')}: {body[:300]}")
        if not body:
            return r, None
        if r.getheader("Content-Type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
            body = next(d for d in data if d.startswith("{") and '"id"' in d)
        return r, json.loads(body)


def http_client(url: str, stateless: bool, errors: list[str]) -> None:
    try:
        if stateless:
            version = "2026-07-28"
            meta = {"io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientCapabilities": {}}
            c = Http(url, {"MCP-Protocol-Version": version})
            c.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
                   {"Mcp-Method": "tools/list"})
            for _ in range(HTTP_ROUNDS):
                for tool, args, error in CALLS:
                    _, answer = c.post(call(2, tool, args, meta), {"Mcp-Method": "tools/call", "Mcp-Name": tool})
                    check(answer, tool, error)
        else:
            c = Http(url, {})
            r, _ = c.post(INITIALIZE)
            c.headers["Mcp-Session-Id"] = r.getheader("Mcp-Session-Id")
            c.headers["MCP-Protocol-Version"] = "2025-06-18"
            c.post(INITIALIZED)
            c.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            for _ in range(HTTP_ROUNDS):
                for tool, args, error in CALLS:
                    check(c.post(call(2, tool, args))[1], tool, error)
            c.conn.request("DELETE", c.path, headers=c.headers)
            c.conn.getresponse().read()
    except SystemExit as e:
        errors.append(str(e))
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        errors.append(f"{type(e).__name__}: {e}")


def over_http(server: str, env: dict[str, str], stateless: bool) -> None:
    """The server over Streamable HTTP, HTTP_CLIENTS clients at once; stopped as a service
    manager stops it (SIGTERM), which lets it write its profile."""
    env = {**env, "MCP_STATELESS": "true" if stateless else "false"}
    p = start([server, "serve", "--transport", "http", "--listen", "127.0.0.1:0"],
              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert p.stderr
    url = None
    for line in p.stderr:
        if line.startswith("listening on "):
            url = line.split()[2]
            break
    if not url:
        fail("the HTTP server did not say where it listens")
    threading.Thread(target=lambda: p.stderr.read(), daemon=True).start()
    errors: list[str] = []
    clients = [threading.Thread(target=http_client, args=(url, stateless, errors)) for _ in range(HTTP_CLIENTS)]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    p.send_signal(signal.SIGTERM)
    if p.wait(timeout=30) != 0:
        fail(f"the HTTP server exited with {p.returncode}")
    if errors:
        fail(errors[0])


def tls_front(forge: str, cert: str, key: str) -> str:
    """A TLS listener in front of the forge, relaying bytes both ways; its https URL."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream = urllib.parse.urlsplit(forge)
    listener = socket.create_server(("127.0.0.1", 0))

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        while True:
            raw, _ = listener.accept()
            try:
                tls = context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()
                continue
            back = socket.create_connection((upstream.hostname, upstream.port))
            threading.Thread(target=pipe, args=(tls, back), daemon=True).start()
            threading.Thread(target=pipe, args=(back, tls), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"https://127.0.0.1:{listener.getsockname()[1]}{upstream.path}"


def main() -> None:
    if len(sys.argv) != 3:
        fail("usage: pgo-workload.py SERVER FAKE_FORGE")
    server, fake = sys.argv[1:]
    watchdog = threading.Timer(LIMIT_S, give_up)
    watchdog.daemon = True
    watchdog.start()
    forge_p = start([fake, "--flavor", "gitea", "--no-record", "--seed-repo", "alice/demo",
                     "--seed-issues", "5", "--user", f"{TOKEN}=alice"], stdout=subprocess.PIPE)
    try:
        assert forge_p.stdout
        forge = forge_p.stdout.readline().strip()
        if not forge.startswith("http://"):
            fail("the fake forge did not say its URL")
        calls = stdio(server, environment(forge), ROUNDS)
        print(f"pgo-workload: stdio: {calls} requests")
        if os.name == "posix":
            for stateless in (False, True):
                over_http(server, environment(forge), stateless)
                print(f"pgo-workload: HTTP {'stateless' if stateless else 'sessions'}: "
                      f"{HTTP_CLIENTS} clients x {HTTP_ROUNDS * len(CALLS) + 1} requests")
        else:
            print("pgo-workload: HTTP: skipped (the server is stopped by a signal it cannot get here)")
        if sys.platform.startswith("linux") and shutil.which("openssl"):
            with tempfile.TemporaryDirectory() as d:
                ca, cert, key = (os.path.join(d, f) for f in ("ca.pem", "cert.pem", "key.pem"))
                ext = os.path.join(d, "ext")
                with open(ext, "w") as f:
                    f.write("subjectAltName=IP:127.0.0.1\n")
                ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
                for argv in (
                    ["req", "-x509", *ec, "-days", "1", "-subj", "/CN=workload CA", "-keyout", ca + ".key", "-out", ca],
                    ["req", "-new", *ec, "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert + ".csr"],
                    ["x509", "-req", "-in", cert + ".csr", "-CA", ca, "-CAkey", ca + ".key", "-CAcreateserial",
                     "-days", "1", "-extfile", ext, "-out", cert],
                ):
                    subprocess.run(["openssl", *argv], check=True, capture_output=True)
                calls = stdio(server, environment(tls_front(forge, cert, key), SSL_CERT_FILE=ca), ROUNDS // 4)
                print(f"pgo-workload: stdio, the forge over TLS: {calls} requests")
        else:
            print("pgo-workload: TLS: skipped (the certificate is trusted through SSL_CERT_FILE, on Linux)")
    finally:
        forge_p.terminate()
        forge_p.wait()


if __name__ == "__main__":
    main()
