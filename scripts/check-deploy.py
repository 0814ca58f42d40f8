#!/usr/bin/env python3
"""The Python half of scripts/check-deploy (run with .venv/bin/python, which has PyYAML).

  consistency DIR          the manifests in DIR refer to each other correctly (names, labels,
                           ports, secret keys, the files settings name, the shared store),
                           and every pod meets the namespace's Pod Security Standard: what no
                           schema can see
  nginx-conf DIR OUT       write the session router's nginx.conf (from its ConfigMap) to OUT
  router CONF NGINX TMP    run that nginx.conf with nginx on loopback, with a stub DNS server
                           and stub replicas, and check how it routes

Every problem is printed as `check-deploy: ...` and makes the exit status 1.
"""

import http.client
import http.server
import json
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import yaml

NAMESPACE = "aegis"
PROBLEMS = []


def problem(text):
    PROBLEMS.append(text)
    print(f"check-deploy: {text}", file=sys.stderr)


def finish(what):
    if PROBLEMS:
        print(f"check-deploy: {what}: {len(PROBLEMS)} problem(s)", file=sys.stderr)
        sys.exit(1)
    print(f"check-deploy: {what}: ok")


# ---- consistency ----------------------------------------------------------------------------


def load(directory):
    """Every resource of every manifest in DIR, as (file name, resource)."""
    found = []
    for path in sorted(Path(directory).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


# The kinds whose pods the other manifests refer to.
WORKLOADS = ("Deployment", "StatefulSet")
# Settings that hold keys, each of which must be a key of its own.
KEY_FILES = ("MCP_OAUTH_KEY_FILE", "MCP_STATE_KEY_FILE", "AUDIT_KEY_FILE")


def consistency(directory):
    resources = load(directory)
    by_kind = {}
    for file, r in resources:
        by_kind.setdefault(r["kind"], {})[r["metadata"]["name"]] = (file, r)
        ns = r["metadata"].get("namespace")
        if r["kind"] == "Namespace":
            if r["metadata"]["name"] != NAMESPACE:
                problem(f"{file}: namespace {r['metadata']['name']!r}, expected {NAMESPACE!r}")
        elif ns != NAMESPACE:
            problem(f"{file}: {r['kind']} {r['metadata']['name']} is in namespace {ns!r}, expected {NAMESPACE!r}")

    def get(kind, name, where):
        hit = by_kind.get(kind, {}).get(name)
        if hit is None:
            problem(f"{where} names {kind} {name!r}, which no manifest defines")
            return None
        return hit[1]

    def selects(selector, labels):
        return bool(selector) and all(labels.get(k) == v for k, v in selector.items())

    def secret_keys(secret):
        return set(secret.get("stringData", {})) | set(secret.get("data", {}))

    workloads = {(kind, name): hit for kind in WORKLOADS for name, hit in by_kind.get(kind, {}).items()}

    def files_of(spec, container):
        """Every file the container sees from a Secret or ConfigMap volume: path -> (kind, name, key)."""
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        found = {}
        for m in container.get("volumeMounts", []):
            vol = volumes.get(m["name"], {})
            for kind, field, name_field in (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name")):
                if field not in vol:
                    continue
                source = vol[field][name_field]
                items = vol[field].get("items")
                if items is None:
                    # The whole Secret or ConfigMap: one file per key.
                    hit = by_kind.get(kind, {}).get(source)
                    keys = (secret_keys(hit[1]) if kind == "Secret" else set(hit[1].get("data", {}))) if hit else set()
                    items = [{"key": k, "path": k} for k in sorted(keys)]
                for item in items:
                    if m.get("subPath"):
                        if m["subPath"] == item["path"]:
                            found[m["mountPath"]] = (kind, source, item["key"])
                    else:
                        found[f"{m['mountPath'].rstrip('/')}/{item['path']}"] = (kind, source, item["key"])
        return found

    def security(where, spec):
        """The "restricted" Pod Security Standard the namespace enforces, and a read-only root
        file system, which every container here has."""
        pod_sc = spec.get("securityContext", {})
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(field):
                problem(f"{where}: {field} is set")
        for v in spec.get("volumes", []):
            if "hostPath" in v:
                problem(f"{where}: volume {v['name']} is a hostPath")
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c.get("securityContext", {})
            cw = f"{where} container {c['name']}"
            if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
                problem(f"{cw}: runAsNonRoot is not true")
            if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
                problem(f"{cw}: runs as user 0")
            if sc.get("allowPrivilegeEscalation") is not False:
                problem(f"{cw}: allowPrivilegeEscalation is not false")
            if sc.get("privileged"):
                problem(f"{cw}: privileged")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                problem(f"{cw}: capabilities do not drop ALL")
            if set(sc.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
                problem(f"{cw}: adds capabilities beyond NET_BIND_SERVICE")
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                problem(f"{cw}: seccompProfile is {seccomp!r}, not RuntimeDefault or Localhost")
            if sc.get("readOnlyRootFilesystem") is not True:
                problem(f"{cw}: readOnlyRootFilesystem is not true")
            for p in c.get("ports", []):
                if p.get("hostPort"):
                    problem(f"{cw}: port {p.get('name', p['containerPort'])} has a hostPort")

    key_items = {}
    for (kind, name), (file, d) in workloads.items():
        where = f"{file}: {kind} {name}"
        pod = d["spec"]["template"]
        labels = pod["metadata"].get("labels", {})
        if not selects(d["spec"]["selector"].get("matchLabels", {}), labels):
            problem(f"{where}: its selector does not match its pod labels")
        spec = pod["spec"]
        security(where, spec)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            ports = {p["name"] for p in c.get("ports", []) if "name" in p}
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                for action in ("httpGet", "tcpSocket"):
                    port = c.get(probe, {}).get(action, {}).get("port")
                    if isinstance(port, str) and port not in ports:
                        problem(f"{where}: {probe} uses port {port!r}, which the container does not name")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    secret = get("Secret", ref["name"], f"{where} env {e['name']}")
                    if secret is not None and ref["key"] not in secret_keys(secret):
                        problem(f"{where}: env {e['name']} reads key {ref['key']!r}, which Secret {ref['name']} lacks")
            mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
            for m in mounts:
                if m not in volumes:
                    problem(f"{where}: mounts volume {m!r}, which the pod does not define")
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            files = files_of(spec, c)
            # Every file a setting names (MCP_OAUTH_KEY_FILE, MCP_STATE_KEY_FILE,
            # MCP_STATE_PASSWORD_FILE, AUDIT_KEY_FILE, ...) is an item of a mounted volume.
            for var, path in sorted(env.items()):
                if var.endswith("_FILE") and path and path not in files:
                    problem(f"{where}: {var} {path} is not a mounted Secret or ConfigMap item ({sorted(files)})")
            seen = {}
            for var in KEY_FILES:
                item = files.get(env.get(var))
                if item is None:
                    continue
                if item in seen:
                    problem(f"{where}: {var} and {seen[item]} read the same key ({item[1]}/{item[2]}): the server refuses to start")
                seen[item] = var
            url = env.get("MCP_STATE_URL")
            if url:
                if not env.get("MCP_STATE_KEY_FILE"):
                    problem(f"{where}: MCP_STATE_URL without MCP_STATE_KEY_FILE: the server refuses to start")
                key_items[where] = (url, files.get(env.get("MCP_STATE_PASSWORD_FILE")))
        for v in volumes.values():
            if "secret" in v:
                secret = get("Secret", v["secret"]["secretName"], f"{where} volume {v['name']}")
                for item in v["secret"].get("items", []):
                    if secret is not None and item["key"] not in secret_keys(secret):
                        problem(f"{where}: volume {v['name']} reads key {item['key']!r}, which the Secret lacks")
            if "configMap" in v:
                cm = get("ConfigMap", v["configMap"]["name"], f"{where} volume {v['name']}")
                for item in v["configMap"].get("items", []):
                    if cm is not None and item["key"] not in cm.get("data", {}):
                        problem(f"{where}: volume {v['name']} reads key {item['key']!r}, which the ConfigMap lacks")
        subdomain = spec.get("subdomain")
        if subdomain:
            svc = get("Service", subdomain, f"{where} subdomain")
            if svc is not None:
                if svc["spec"].get("clusterIP") != "None":
                    problem(f"{where}: subdomain Service {subdomain} is not headless (clusterIP: None)")
                if not selects(svc["spec"].get("selector", {}), labels):
                    problem(f"{where}: subdomain Service {subdomain} does not select its pods")
        if kind == "StatefulSet":
            svc = get("Service", d["spec"].get("serviceName"), f"{where} serviceName")
            if svc is not None and not selects(svc["spec"].get("selector", {}), labels):
                problem(f"{where}: serviceName {d['spec']['serviceName']} does not select its pods")

    def pods_of(selector):
        return [
            (f"{kind} {n}", d)
            for (kind, n), (_, d) in workloads.items()
            if selects(selector, d["spec"]["template"]["metadata"].get("labels", {}))
        ]

    for name, (file, svc) in by_kind.get("Service", {}).items():
        where = f"{file}: Service {name}"
        targets = pods_of(svc["spec"].get("selector", {}))
        if not targets:
            problem(f"{where}: its selector matches no Deployment's or StatefulSet's pods")
        for p in svc["spec"]["ports"]:
            tp = p.get("targetPort", p["port"])
            for dname, d in targets:
                cports = [cp for c in d["spec"]["template"]["spec"]["containers"] for cp in c.get("ports", [])]
                if not any(cp.get("name") == tp or cp["containerPort"] == tp for cp in cports):
                    problem(f"{where}: targetPort {tp!r} is no port of {dname}")

    # MCP_STATE_URL names a Service here, on one of its ports, in front of one store that
    # requires the password the server presents.
    for where, (url, password_item) in key_items.items():
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("redis", "rediss"):
            problem(f"{where}: MCP_STATE_URL {url}: the scheme is not redis or rediss")
            continue
        if u.password is not None:
            problem(f"{where}: MCP_STATE_URL holds a password: the server refuses it (use MCP_STATE_PASSWORD_FILE)")
        if u.path not in ("", "/") and not u.path[1:].isdigit():
            problem(f"{where}: MCP_STATE_URL {url}: the path is not a database number")
        host = (u.hostname or "").rstrip(".")
        parts = host.split(".")
        suffixes = ([], [NAMESPACE], [NAMESPACE, "svc"], [NAMESPACE, "svc", "cluster", "local"])
        if parts[1:] not in suffixes:
            problem(f"{where}: MCP_STATE_URL host {host!r} is not a Service of namespace {NAMESPACE}")
            continue
        svc = get("Service", parts[0], f"{where} MCP_STATE_URL")
        if svc is None:
            continue
        port = u.port or 6379
        if not any(p["port"] == port for p in svc["spec"]["ports"]):
            problem(f"{where}: MCP_STATE_URL port {port} is no port of Service {parts[0]}")
        for dname, d in pods_of(svc["spec"].get("selector", {})):
            if d["spec"].get("replicas", 1) != 1:
                problem(f"{where}: the store {dname} runs {d['spec']['replicas']} replicas: they would be separate stores, each accepting a code once")
            store_items = {
                ("Secret", v["secret"]["secretName"], item["key"])
                for v in d["spec"]["template"]["spec"].get("volumes", [])
                if "secret" in v
                for item in v["secret"].get("items", [])
            }
            if password_item is not None and password_item not in store_items:
                problem(f"{where}: MCP_STATE_PASSWORD_FILE is {password_item[1]}/{password_item[2]}, which the store {dname} does not read")

    for name, (file, pdb) in by_kind.get("PodDisruptionBudget", {}).items():
        if not pods_of(pdb["spec"]["selector"].get("matchLabels", {})):
            problem(f"{file}: PodDisruptionBudget {name} selects no Deployment's or StatefulSet's pods")
    for name, (file, hpa) in by_kind.get("HorizontalPodAutoscaler", {}).items():
        ref = hpa["spec"]["scaleTargetRef"]
        get(ref["kind"], ref["name"], f"{file}: HorizontalPodAutoscaler {name}")
    for name, (file, ing) in by_kind.get("Ingress", {}).items():
        for rule in ing["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                svc = get("Service", backend["name"], f"{file}: Ingress {name}")
                if svc is not None:
                    port = backend["port"]
                    if not any(p.get("name") == port.get("name") or p["port"] == port.get("number") for p in svc["spec"]["ports"]):
                        problem(f"{file}: Ingress {name} uses port {port} of Service {backend['name']}, which it lacks")
    count = len(resources)
    finish(f"consistency of {count} resources in {directory}")


# ---- nginx.conf -----------------------------------------------------------------------------


def nginx_conf(directory, out):
    for file, r in load(directory):
        if r["kind"] == "ConfigMap" and "nginx.conf" in r.get("data", {}):
            Path(out).write_text(r["data"]["nginx.conf"])
            print(f"check-deploy: nginx.conf taken from ConfigMap {r['metadata']['name']} in {file}")
            return
    problem(f"no ConfigMap in {directory} holds an nginx.conf")
    finish("nginx.conf")


def replace_once(text, old, new):
    """Replace OLD, which must occur exactly once: a test of another configuration than the
    one shipped would prove nothing."""
    n = text.count(old)
    if n != 1:
        problem(f"nginx.conf: expected {old!r} once, found it {n} times")
        return text
    return text.replace(old, new)


# ---- router behaviour -----------------------------------------------------------------------

REPLICAS = "aegis-gitea-mcp-replicas.aegis.svc.cluster.local"
SERVICE = "aegis-gitea-mcp.aegis.svc.cluster.local"


class StubDns(socketserver.ThreadingMixIn, socketserver.UDPServer):
    """Answers A questions for the names in `table` (name -> IPv4), NXDOMAIN for the rest."""

    daemon_threads = True

    def __init__(self, table):
        self.table = table
        super().__init__(("127.0.0.1", 0), StubDnsHandler)


class StubDnsHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        (qid,) = struct.unpack("!H", data[:2])
        labels, i = [], 12
        while data[i]:
            labels.append(data[i + 1 : i + 1 + data[i]].decode("ascii", "replace"))
            i += 1 + data[i]
        question = data[12 : i + 5]
        qtype = struct.unpack("!H", data[i + 1 : i + 3])[0]
        ip = self.server.table.get(".".join(labels).lower())
        if ip is None:
            sock.sendto(struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question, self.client_address)
        elif qtype != 1:
            sock.sendto(struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question, self.client_address)
        else:
            answer = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(ip)
            sock.sendto(struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + answer, self.client_address)


class Replica(http.server.ThreadingHTTPServer):
    """A stand-in for one replica: answers with its name and what it was sent."""

    daemon_threads = True

    def __init__(self, name, address):
        self.name = name
        self.first_event_read = threading.Event()
        self.held_back = False
        super().__init__(address, ReplicaHandler)


class ReplicaHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/stream":
            # One event, then wait until the client has read it before the second: a proxy that
            # held the first back would keep the client waiting, and this replica notes it.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"data: one\n\n")
            self.wfile.flush()
            if not self.server.first_event_read.wait(5):
                # The client never saw the first event alone: the proxy held it back.
                self.server.held_back = True
            self.wfile.write(b"data: two\n\n")
            self.close_connection = True
            return
        status = 502 if self.path == "/replica-says-502" else 200
        body = json.dumps(
            {
                "replica": self.server.name,
                "path": self.path,
                "host": self.headers.get("Host"),
                "xff": self.headers.get("X-Forwarded-For"),
                "connection": self.headers.get("Connection"),
            }
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_in_background(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def router(conf_path, nginx, tmp):
    tmp = Path(tmp)
    # Replicas r1 and r2 on one port at two loopback addresses (the router adds one port to
    # every replica name), the Service on another; "gone" resolves but nothing listens there.
    r1 = Replica("r1", ("127.0.0.11", 0))
    port = r1.server_address[1]
    r2 = Replica("r2", ("127.0.0.12", port))
    service = Replica("service", ("127.0.0.20", 0))
    for s in (r1, r2, service):
        serve_in_background(s)
    dns = serve_in_background(
        StubDns(
            {
                f"r1.{REPLICAS}": "127.0.0.11",
                f"r2.{REPLICAS}": "127.0.0.12",
                f"gone.{REPLICAS}": "127.0.0.13",
                SERVICE: "127.0.0.20",
            }
        )
    )
    listen, health = free_port(), free_port()
    conf = Path(conf_path).read_text().replace("/tmp/", f"{tmp}/")
    conf = replace_once(conf, "resolver kube-dns.kube-system.svc.cluster.local ", f"resolver 127.0.0.1:{dns.server_address[1]} ")
    conf = replace_once(conf, f".{REPLICAS}:8080;", f".{REPLICAS}:{port};")
    conf = replace_once(conf, f"{SERVICE}:80;", f"{SERVICE}:{service.server_address[1]};")
    conf = replace_once(conf, "listen 8080;", f"listen 127.0.0.1:{listen};")
    conf = replace_once(conf, "listen 8081;", f"listen 127.0.0.1:{health};")
    conf = replace_once(conf, "access_log /dev/stdout aegis;", f"access_log {tmp}/access.log aegis;")
    if PROBLEMS:
        finish("session router")
    run_conf = tmp / "router-test.conf"
    run_conf.write_text(conf)
    log = open(tmp / "router-test.err", "w")
    proc = subprocess.Popen([nginx, "-e", "stderr", "-p", str(tmp), "-c", str(run_conf)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", health), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    problem(f"nginx did not start: {(tmp / 'router-test.err').read_text().strip()}")
                    finish("session router")
                time.sleep(0.05)
        router_cases(listen, health, r1)
        service.shutdown()
        service.server_close()
        # Nothing answers for the Service now.
        status, body, _ = request(listen, "POST", "/mcp", {})
        expect("no replica reachable at all", status == 502 and json_rpc_code(body) == -32603, status, body)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    finish("session router behaviour (nginx with a stub DNS server and stub replicas on loopback)")


def request(port, method, path, headers, body=b"{}"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Host": "mcp.example.com:8443", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read(), resp
    finally:
        conn.close()


def json_rpc_code(body):
    try:
        return json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def expect(what, ok, status, body):
    if ok:
        print(f"check-deploy:   ok  {what}")
    else:
        problem(f"session router: {what}: got {status} {body[:300]!r}")


def routed_to(status, body):
    try:
        return json.loads(body)["replica"] if status == 200 else None
    except ValueError:
        return None


def router_cases(listen, health, r1):
    hex32 = "0123456789abcdef0123456789abcdef"
    cases = [
        ("no session id goes to the Service", {}, "/mcp", "service"),
        ("Mcp-Session-Id r1.<hex> goes to r1", {"Mcp-Session-Id": f"r1.{hex32}"}, "/mcp", "r1"),
        ("Mcp-Session-Id r2.<hex> goes to r2", {"Mcp-Session-Id": f"r2.{hex32}"}, "/mcp", "r2"),
        ("sessionId=r2.<hex> goes to r2", {}, f"/message?sessionId=r2.{hex32}", "r2"),
        ("the header wins over the query", {"Mcp-Session-Id": f"r1.{hex32}"}, f"/message?sessionId=r2.{hex32}", "r1"),
        ("an id without a replica name goes to the Service", {"Mcp-Session-Id": hex32}, "/mcp", "service"),
        ("an id that is not a DNS label goes to the Service", {"Mcp-Session-Id": f"R1_x.{hex32}"}, "/mcp", "service"),
    ]
    for what, headers, path, want in cases:
        status, body, _ = request(listen, "POST", path, headers)
        expect(what, routed_to(status, body) == want, status, body)
    for what, headers, path in [
        ("a replica that is gone (refuses): 404 session not found", {"Mcp-Session-Id": f"gone.{hex32}"}, "/mcp"),
        ("a replica that does not resolve: 404 session not found", {"Mcp-Session-Id": f"r9.{hex32}"}, "/mcp"),
        ("only the first label is taken (a.b.evil.example)", {"Mcp-Session-Id": f"a.b.evil.example.{hex32}"}, "/mcp"),
        ("the same for sessionId", {}, f"/message?sessionId=gone.{hex32}"),
    ]:
        status, body, resp = request(listen, "POST", path, headers)
        ok = (
            status == 404
            and json_rpc_code(body) == -32001
            and resp.getheader("Content-Type", "").startswith("application/json")
        )
        expect(what, ok, status, body)
    status, body, _ = request(listen, "POST", "/replica-says-502", {"Mcp-Session-Id": f"r1.{hex32}"})
    expect("a replica's own 502 is passed through", status == 502 and routed_to(200, body) == "r1", status, body)
    status, body, _ = request(listen, "POST", "/mcp", {"Mcp-Session-Id": f"r1.{hex32}"})
    seen = json.loads(body) if status == 200 else {}
    expect(
        "Host passed through with its port, X-Forwarded-For added, no Connection header",
        seen.get("host") == "mcp.example.com:8443" and seen.get("xff") == "127.0.0.1" and seen.get("connection") is None,
        status,
        body,
    )
    status, body, _ = request(listen, "POST", "/mcp", {}, body=b"x" * (4 * 1024 * 1024))
    expect("a 4 MiB body passes", status == 200, status, body)
    status, body, _ = request(listen, "POST", "/mcp", {}, body=b"x" * (4 * 1024 * 1024 + 1))
    expect("a body over 4 MiB gets 413", status == 413, status, body)
    # Streaming: the second event is sent only after the client has read the first.
    conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=10)
    try:
        conn.request("GET", "/stream", headers={"Host": "mcp.example.com", "Mcp-Session-Id": f"r1.{hex32}"})
        resp = conn.getresponse()
        first = resp.readline() + resp.readline()
        r1.first_event_read.set()
        rest = resp.read()
        whole = first == b"data: one\n\n" and rest == b"data: two\n\n"
        expect("an event stream reaches the client event by event", whole and not r1.held_back, resp.status, first + rest)
    except (OSError, http.client.HTTPException) as e:
        r1.first_event_read.set()
        problem(f"session router: an event stream reaches the client event by event: {e}")
    finally:
        conn.close()
    status, body, _ = request(health, "GET", "/healthz", {}, body=None)
    expect("the router's own /healthz on its health port", status == 200 and body == b"ok\n", status, body)


def main(argv):
    if len(argv) == 3 and argv[1] == "consistency":
        consistency(argv[2])
    elif len(argv) == 4 and argv[1] == "nginx-conf":
        nginx_conf(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "router":
        router(argv[2], argv[3], argv[4])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
