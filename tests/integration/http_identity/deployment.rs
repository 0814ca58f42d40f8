//! Three replicas behind a real load balancer — HAProxy from Debian's packages, configured by
//! `deploy/haproxy/haproxy.cfg`, the file operators use — all on loopback in front of the fake
//! forge. Through it: the 560-call test on stateless Streamable HTTP, on sessions and on
//! legacy SSE; the Python SDK; sign-in with tokens issued by one replica used on another; and
//! the faults: a replica killed (SIGKILL) mid-run, one drained (SIGTERM), one restarted with
//! the same key. Each test is bounded by `LIMIT`; what each fault cost is printed, for
//! docs/PERFORMANCE.md.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Gate, Script, ScriptedResponse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[path = "deployment/shared_store.rs"]
mod shared_store;

use super::oauth::{SignIn, assert_no_sign_in_secret, bearer, browser};
use super::support::forge::numbered_login;
use super::support::http::{
    HttpServer, StreamableClient, await_listening, free_port, http_client, is_readiness_probe, not_probes,
    stateless_call, tool_result,
};
use super::support::{ALICE_TOKEN, Forge, WAIT_LIMIT, python, repo_root, wait_for};
use super::{BOB_TOKEN, Isolation, token};

/// The longest any test here may take.
const LIMIT: Duration = Duration::from_secs(240);
/// The replicas' names: `MCP_REPLICA_ID` and the server names of the HAProxy file.
const NAMES: [&str; 3] = ["r1", "r2", "r3"];

async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(LIMIT, test).await.expect("the deployment test did not finish in time");
}

fn haproxy() -> PathBuf {
    ["/usr/sbin/haproxy", "/usr/local/sbin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("haproxy is not installed: run scripts/setup-test-env (it installs Debian's haproxy)")
}

/// HAProxy running `deploy/haproxy/haproxy.cfg` in the foreground, plus a file of the test's
/// own that opens its stats socket (to see which replicas it counts as up); killed on drop.
struct Balancer {
    /// Killed when dropped (`kill_on_drop`).
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`.
    base: String,
    log: tempfile::NamedTempFile,
    dir: tempfile::TempDir,
}

impl Balancer {
    async fn start(port: u16, replicas: &[String]) -> Balancer {
        let log = tempfile::NamedTempFile::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("stats.cfg");
        let socket = dir.path().join("stats.sock");
        std::fs::write(
            &stats,
            format!("global\n    stats socket {} mode 600 level operator\n", socket.display()),
        )
        .unwrap();
        let mut cmd = tokio::process::Command::new(haproxy());
        cmd.arg("-db")
            .arg("-f")
            .arg(repo_root().join("deploy/haproxy/haproxy.cfg"))
            .arg("-f")
            .arg(&stats)
            .env("AEGIS_LB_LISTEN", format!("127.0.0.1:{port}"))
            .env("AEGIS_R1", &replicas[0])
            .env("AEGIS_R2", &replicas[1])
            .env("AEGIS_R3", &replicas[2])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.reopen().unwrap()))
            .stderr(Stdio::from(log.reopen().unwrap()))
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start haproxy");
        let read_log = || std::fs::read_to_string(log.path()).unwrap_or_default();
        await_listening(&mut child, port, "haproxy", read_log).await;
        Balancer { _child: child, base: format!("http://127.0.0.1:{port}"), log, dir }
    }

    /// Each replica's state as HAProxy sees it (`UP`, `DOWN`, …), in the order r1, r2, r3.
    fn states(&self) -> Vec<String> {
        use std::io::{Read, Write};
        let Ok(mut sock) = std::os::unix::net::UnixStream::connect(self.dir.path().join("stats.sock")) else {
            return vec![String::new(); NAMES.len()];
        };
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        sock.write_all(b"show stat\n").unwrap();
        let mut csv = String::new();
        let _ = sock.read_to_string(&mut csv);
        let status = |name: &str| {
            csv.lines()
                .map(|l| l.split(',').collect::<Vec<_>>())
                .find(|f| f.len() > 17 && f[0] == "replicas" && f[1] == name)
                .map_or(String::new(), |f| f[17].to_owned())
        };
        NAMES.iter().map(|n| status(n)).collect()
    }

    /// Until HAProxy counts replica `i` as `state` (`UP`, `DOWN`), within `limit`.
    async fn wait_for(&self, i: usize, state: &str, limit: Duration) {
        let what = format!("HAProxy saw {} {state} (its log: {})", NAMES[i], self.log());
        wait_for(&what, limit, async || self.states()[i].starts_with(state)).await
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

/// Three replicas (`r1`…`r3`, each on a port of its own) and the balancer in front of them.
struct Cluster {
    forge_url: String,
    transport: &'static str,
    env: Vec<(String, String)>,
    addrs: Vec<String>,
    replicas: Vec<Option<HttpServer>>,
    lb: Balancer,
}

impl Cluster {
    /// The replicas with `env` (plus their name and room for the balancer's connections),
    /// then the balancer on `lb_port` (from [`free_port`]; a public URL may name it).
    async fn start(forge_url: &str, transport: &'static str, env: &[(&str, &str)], lb_port: u16) -> Cluster {
        let addrs: Vec<String> = NAMES.iter().map(|_| format!("127.0.0.1:{}", free_port())).collect();
        let mut c = Cluster {
            forge_url: forge_url.to_owned(),
            transport,
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            addrs: addrs.clone(),
            replicas: Vec::new(),
            lb: Balancer::start(lb_port, &addrs).await,
        };
        for i in 0..NAMES.len() {
            let r = c.spawn(i).await;
            c.replicas.push(Some(r));
        }
        c.wait_until_ready().await;
        c
    }

    async fn spawn(&self, i: usize) -> HttpServer {
        let mut env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.push(("MCP_REPLICA_ID", NAMES[i]));
        if !self.env.iter().any(|(k, _)| k == "MCP_MAX_CONNECTIONS_PER_PEER") {
            env.push(("MCP_MAX_CONNECTIONS_PER_PEER", "1024"));
        }
        HttpServer::spawn_listening(&self.forge_url, self.transport, &env, &self.addrs[i]).await
    }

    /// Until each replica answers `/readyz` with 200, and the balancer has seen it.
    async fn wait_until_ready(&self) {
        for r in self.replicas.iter().flatten() {
            wait_ready(r).await;
        }
        for (i, r) in self.replicas.iter().enumerate() {
            if r.is_some() {
                self.lb.wait_for(i, "UP", WAIT_LIMIT).await;
            }
        }
    }

    fn lb(&self) -> &str {
        &self.lb.base
    }

    fn endpoint(&self) -> String {
        format!("{}{}", self.lb(), if self.transport == "sse" { "/sse" } else { "/mcp" })
    }

    fn replica(&self, i: usize) -> &HttpServer {
        self.replicas[i].as_ref().expect("a running replica")
    }

    /// Replica `i` by the name its session ids start with.
    fn index_of(session: &str) -> usize {
        let name = session.split('.').next().unwrap();
        NAMES.iter().position(|n| *n == name).unwrap_or_else(|| panic!("session {session} names no replica"))
    }

    fn signal(&self, i: usize, signal: &str) {
        crate::support::signal(self.replica(i).pid().expect("a running replica"), signal);
    }

    /// SIGKILL replica `i` and wait until it is gone.
    async fn kill(&mut self, i: usize) {
        self.signal(i, "KILL");
        let mut r = self.replicas[i].take().unwrap();
        r.wait().await;
    }

    /// Start replica `i` again, on its address.
    async fn restart(&mut self, i: usize) {
        assert!(self.replicas[i].is_none());
        let r = self.spawn(i).await;
        self.replicas[i] = Some(r);
        self.wait_until_ready().await;
    }

    /// `tools/call`s each replica has run (its `/metrics`).
    async fn calls_per_replica(&self) -> Vec<u64> {
        let http = http_client();
        let mut out = Vec::new();
        for r in &self.replicas {
            let Some(r) = r else {
                out.push(0);
                continue;
            };
            let text = http.get(r.url("/metrics")).send().await.unwrap().text().await.unwrap();
            let calls: f64 = text
                .lines()
                .filter(|l| l.starts_with("aegis_calls_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            out.push(calls as u64);
        }
        out
    }

    /// Every replica's log and the balancer's, for a failure message.
    fn logs(&self) -> String {
        let mut out = format!("--- haproxy ---\n{}", self.lb.log());
        for (i, r) in self.replicas.iter().enumerate() {
            if let Some(r) = r {
                out.push_str(&format!("\n--- {} ---\n{}", NAMES[i], r.stderr()));
            }
        }
        out
    }
}

/// Until `r` answers `/readyz` with 200 (`ready`).
async fn wait_ready(r: &HttpServer) {
    let http = http_client();
    wait_for(&format!("{} became ready", r.base), WAIT_LIMIT, async || {
        match http.get(r.url("/readyz")).send().await {
            Ok(a) if a.status() == 200 => a.text().await.unwrap() == "ready",
            _ => false,
        }
    })
    .await
}

/// The 560-call test through the balancer, and the calls spread over every replica.
async fn isolation_through_the_balancer(transport: &'static str, extra: &[(&str, &str)]) {
    let isolation = Isolation::start().await;
    let mut env: Vec<(&str, &str)> = Isolation::ENV.to_vec();
    env.extend_from_slice(extra);
    let cluster = Cluster::start(&isolation.forge.base_url(), transport, &env, free_port()).await;
    if extra.contains(&("MCP_STATELESS", "true")) {
        // Sessionless: `initialize` gets no session id, so nothing ties a client to a replica.
        let c = StreamableClient::connect(cluster.lb(), None).await.unwrap();
        assert_eq!(c.session_id(), None, "a stateless server hands out no session");
    }
    isolation.run(transport, cluster.lb(), &|| cluster.logs()).await;
    let spread = cluster.calls_per_replica().await;
    eprintln!("[{transport} {extra:?}] calls per replica: {spread:?}");
    assert!(spread.iter().all(|&n| n > 0), "a replica served no call: {spread:?}");
    assert_eq!(spread.iter().sum::<u64>(), 560, "{spread:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_replicas_run_560_calls_of_50_tokens_each_as_its_caller() {
    bounded(isolation_through_the_balancer("http", &[("MCP_STATELESS", "true")])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_replicas_run_560_calls_of_50_tokens_each_as_its_caller() {
    bounded(isolation_through_the_balancer("http", &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_replicas_run_560_calls_of_50_tokens_each_as_its_caller() {
    bounded(isolation_through_the_balancer("sse", &[])).await;
}

/// A forge knowing alice (the global token) and bob, with `alice/demo`.
async fn small_forge() -> FakeForge {
    Forge::gitea().user(BOB_TOKEN, "bob").repo("alice", "demo").start().await
}

/// The Python SDK driver through the balancer as bob: every call ran as bob.
async fn sdk_flow(cluster: &Cluster, mode: &str) {
    let calls = json!([
        {"tool": "userGetCurrent", "arguments": {}},
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "userGetCurrent", "arguments": {}},
    ]);
    let (mut cmd, _dir) = super::support::python_driver("mcp_http_client.py", mode, &calls);
    cmd.args(["--transport", cluster.transport, &cluster.endpoint()])
        .arg("--header")
        .arg(format!("Authorization: {}", token(BOB_TOKEN)));
    let what = format!("the Python SDK ({}, {mode}) through the balancer", cluster.transport);
    let run =
        super::support::DriverRun::run(&mut cmd, Duration::from_secs(60), &what, || cluster.logs()).await;
    assert_eq!(run.doc["tool_count"], super::support::DEFAULT_TOOL_COUNT, "{}", run.doc);
    for i in 0..3 {
        let r = run.result(i, false);
        assert_eq!(r["identity"]["login"], "bob", "{r}\n{}", run.context);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_works_through_the_balancer_on_every_transport() {
    bounded(async {
        let forge = small_forge().await;
        let env = [("GITEA_TOKEN", ALICE_TOKEN)];
        for (transport, extra, modes) in [
            ("http", None, &["legacy", "auto"][..]),
            ("http", Some(("MCP_STATELESS", "true")), &["legacy", "auto"][..]),
            ("sse", None, &["legacy"][..]),
        ] {
            let mut all = env.to_vec();
            all.extend(extra);
            let cluster = Cluster::start(&forge.base_url(), transport, &all, free_port()).await;
            for mode in modes {
                sdk_flow(&cluster, mode).await;
            }
        }
        // Every request but the replicas' readiness probes was bob's: the global token never
        // stood in for him.
        let bob = token(BOB_TOKEN);
        assert!(
            not_probes(&forge).iter().all(|r| r.header("authorization") == Some(bob.as_str())),
            "a request without bob's token reached the forge"
        );
    })
    .await;
}

/// Sign-in through the balancer (every step may land on another replica), then the tokens of
/// one replica on each of the others, a replica restarted with the same key, and the SDK's
/// own sign-in through the balancer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_issued_by_one_replica_work_on_every_other_and_after_a_restart() {
    bounded(async {
        let lb_port = free_port();
        let public = format!("http://127.0.0.1:{lb_port}");
        let (forge, dir, key_path) = SignIn::prepare(&public, Duration::from_secs(3600)).await;
        let settings = SignIn::settings(&public, &key_path);
        let mut cluster = Cluster::start(&forge.base_url(), "http", &settings, lb_port).await;
        let direct: Vec<String> = (0..3).map(|i| cluster.replica(i).base.clone()).collect();
        // `SignIn` speaks to `public` (the balancer); its own server is a fourth replica with
        // the same key, outside the balancer, to show that one too accepts what the others issued.
        let fourth =
            SignIn::server(&forge, &public, &key_path, free_port(), &[("MCP_REPLICA_ID", "r4")]).await;
        let s =
            SignIn { forge, server: fourth, public: public.clone(), _dir: dir, key_path: key_path.clone() };

        // The whole sign-in, several times, through the balancer: registration, consent,
        // the forge's callback and the code exchange land on whichever replica it picks.
        let mut access = Vec::new();
        for _ in 0..3 {
            let (_, tokens) = s.sign_in("read write").await;
            access.push(tokens["access_token"].as_str().unwrap().to_owned());
        }
        // Each token works on every replica directly, and on the one outside the balancer.
        for t in &access {
            for base in direct.iter().chain([&s.server.base]) {
                let r = stateless_call(&browser(), base, "userGetCurrent", json!({}), Some(&bearer(t))).await;
                let c = tool_result(&r.unwrap_or_else(|e| panic!("{base}: {e:?}\n{}", cluster.logs())));
                assert_eq!(
                    c.json["identity"],
                    json!({"login": "bob", "mode": "oauth", "sudo": null}),
                    "{base}"
                );
            }
        }
        // A replica restarted with the same key accepts the tokens it (or another) issued.
        cluster.kill(1).await;
        cluster.restart(1).await;
        let r =
            stateless_call(&browser(), &direct[1], "userGetCurrent", json!({}), Some(&bearer(&access[0])))
                .await
                .unwrap();
        assert_eq!(tool_result(&r).json["identity"]["login"], "bob");

        // The Python SDK's own sign-in (discovery from the 401, registration, PKCE, refresh),
        // through the balancer.
        let mut cmd = super::support::oauth_client(&cluster.endpoint(), &["userGetCurrent={}"]);
        let run = super::support::run_with_timeout(&mut cmd, Duration::from_secs(60)).await;
        let report = || format!("{}\n{}\n{}", run.stdout, run.stderr, cluster.logs());
        assert!(
            run.status.is_some_and(|s| s.success()),
            "oauth_client.py through the balancer failed:\n{}",
            report()
        );
        let results: Vec<Value> = run
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l.get("tool").is_some())
            .collect();
        assert_eq!(results.len(), 1, "{}", report());
        let envelope: Value = serde_json::from_str(results[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            envelope["identity"],
            json!({"login": "bob", "mode": "oauth", "sudo": null}),
            "{}",
            report()
        );
        // No replica wrote a secret of the sign-ins it served (at LOG_LEVEL=trace).
        let secrets: Vec<&str> = access.iter().map(String::as_str).collect();
        s.assert_no_secret_in_log(&secrets);
        for r in cluster.replicas.iter().flatten() {
            assert_no_sign_in_secret(&r.stderr(), &secrets);
        }
    })
    .await;
}

/// What one caller's loop of calls saw.
#[derive(Default)]
struct Tally {
    ok: usize,
    /// Each failed call: when it was sent and when it failed (since `t0`), and what it got.
    failed: Vec<(Duration, Duration, String)>,
}

/// `workers` callers (`userNN` with their own tokens, stateless 2026-07-28 posts) calling
/// `repoGet` on their own repository through the balancer until `stop`, counting each success
/// in `served` as it comes; each success must name its caller. Returns each worker's tally,
/// with times since `t0`.
async fn callers(
    base: String,
    workers: usize,
    stop: Arc<AtomicBool>,
    t0: Instant,
    served: Arc<AtomicUsize>,
) -> Vec<Tally> {
    let http = http_client();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (http, base, stop, served) = (http.clone(), base.clone(), stop.clone(), served.clone());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                let (login, tok) = (format!("user{w:02}"), format!("tok-user-{w:02}"));
                while !stop.load(Ordering::SeqCst) {
                    let sent = t0.elapsed();
                    let args = json!({"owner": login, "repo": "r"});
                    let r = stateless_call(&http, &base, "repoGet", args, Some(&token(&tok))).await;
                    let failure = match r {
                        Ok(resp) if resp.get("result").is_some() => {
                            let c = tool_result(&resp);
                            assert_eq!(c.json["identity"]["login"], login.as_str(), "{}", c.text);
                            c.is_error.then(|| c.text.chars().take(200).collect())
                        }
                        Ok(other) => Some(other.to_string()),
                        Err(e) => Some(format!("{e:?}")),
                    };
                    match failure {
                        Some(what) => tally.failed.push((sent, t0.elapsed(), what)),
                        None => {
                            tally.ok += 1;
                            served.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                tally
            })
        })
        .collect();
    futures::future::join_all(tasks).await.into_iter().map(|t| t.unwrap()).collect()
}

/// A forge with `workers` users, each with a repository `r`.
async fn worker_forge(workers: usize) -> FakeForge {
    (0..workers)
        .fold(Forge::gitea().numbered_users(workers), |f, w| f.repo(&numbered_login(w), "r"))
        .start()
        .await
}

/// Every request the forge saw for a caller's repository carried that caller's token.
fn assert_no_cross_talk(forge: &FakeForge) {
    for r in forge.requests() {
        if let Some(owner) = r.path_param("owner") {
            let n = owner.trim_start_matches("user");
            assert_eq!(
                r.header("authorization"),
                Some(token(&format!("tok-user-{n}")).as_str()),
                "{}",
                r.raw_path
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_run_costs_stateless_clients_at_most_their_calls_in_flight() {
    bounded(async {
        const WORKERS: usize = 16;
        let forge = worker_forge(WORKERS).await;
        // Slow enough that calls are in flight on every replica when one is killed.
        forge.script(Script::always(
            Some("GET"),
            "/api/v1/repos/*",
            ScriptedResponse::json(200, &json!({"name": "r", "full_name": "x/r"})).with_delay(Duration::from_millis(30)),
        ));
        let mut cluster =
            Cluster::start(&forge.base_url(), "http", &[("MCP_STATELESS", "true")], free_port()).await;
        let (stop, served) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let t0 = Instant::now();
        let run = tokio::spawn(callers(cluster.lb().to_owned(), WORKERS, stop.clone(), t0, served.clone()));
        wait_for("every replica served calls", WAIT_LIMIT, async || {
            cluster.calls_per_replica().await.iter().all(|&n| n >= 10)
        })
        .await;
        let killed_at = t0.elapsed();
        cluster.kill(1).await;
        cluster.lb.wait_for(1, "DOWN", WAIT_LIMIT).await;
        let down_at = t0.elapsed();
        // After the kill the others serve everything.
        let before = served.load(Ordering::SeqCst);
        wait_for("the other replicas served a hundred calls more", WAIT_LIMIT, async || {
            served.load(Ordering::SeqCst) >= before + 100
        })
        .await;
        stop.store(true, Ordering::SeqCst);
        let tallies = run.await.unwrap();
        let ok: usize = tallies.iter().map(|t| t.ok).sum();
        let failed: Vec<&(Duration, Duration, String)> = tallies.iter().flat_map(|t| &t.failed).collect();
        eprintln!(
            "[SIGKILL, stateless] {ok} calls succeeded, {} failed (at most {WORKERS} in flight); HAProxy saw the replica down {:?} after the kill",
            failed.len(),
            down_at.saturating_sub(killed_at),
        );
        for f in &failed {
            eprintln!("  sent at {:?}, failed at {:?}: {}", f.0, f.1, f.2);
        }
        assert!(failed.len() <= WORKERS, "more calls failed than were in flight:\n{}", cluster.logs());
        // A call failed only if it was on its way to the replica killed: it failed after the
        // kill, and had been sent before HAProxy took the replica out; none hung.
        assert!(failed.iter().all(|f| f.1 >= killed_at), "a call failed before the kill: {failed:?}");
        assert!(failed.iter().all(|f| f.0 <= down_at), "a call sent after the replica was out failed: {failed:?}");
        assert!(!failed.iter().any(|f| f.2.contains("timed out")), "a call hung: {failed:?}");
        assert_no_cross_talk(&forge);
    })
    .await;
}

/// A Python SDK session client through the balancer loses its replica (SIGKILL): its next
/// request is answered 404 and the SDK opens a new session on another replica.
async fn session_client_recovers(transport: &'static str) {
    let forge = small_forge().await;
    let mut cluster =
        Cluster::start(&forge.base_url(), transport, &[("GITEA_TOKEN", ALICE_TOKEN)], free_port()).await;
    let mut child = tokio::process::Command::new(python())
        .current_dir(repo_root())
        .arg("tests/python/replica_failover.py")
        .args(["--transport", transport, &cluster.endpoint()])
        .arg("--header")
        .arg(format!("Authorization: {}", token(BOB_TOKEN)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let mut errors = Some(errors);
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
        let line = line.expect("the SDK client answered in time").unwrap().unwrap_or_default();
        match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => {
                let said = match errors.take() {
                    Some(e) => tokio::time::timeout(Duration::from_secs(5), e).await.map(|t| t.unwrap()),
                    None => Ok(String::new()),
                };
                panic!("not a report line: {line:?}; the client's stderr:\n{said:?}")
            }
        }
    };
    let first = next().await;
    assert_eq!(first["login"], "bob", "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    let holder = Cluster::index_of(&session);
    // The id the SDK holds is refused 404 by the replicas that do not hold it.
    let other = (holder + 1) % 3;
    let stale = ping_session(&cluster.replica(other).base, transport, &session).await;
    assert_eq!(stale, 404, "another replica must not know {session}");

    let killed = Instant::now();
    cluster.kill(holder).await;
    child.stdin.as_mut().unwrap().write_all(b"go\n").await.unwrap();
    let lost = next().await;
    assert_eq!(lost["phase"], "lost", "the call on a killed replica's session cannot succeed: {lost}");
    if transport == "http" {
        // The 404 of the replica the balancer sent it to, not a time-out.
        assert!(lost["error"].as_str().unwrap().contains("unknown or closed session"), "{lost}");
    }
    let recovered = next().await;
    let recovery = killed.elapsed();
    assert_eq!(recovered["phase"], "recovered", "{recovered}");
    assert_eq!(recovered["login"], "bob", "{recovered}");
    let new_session = recovered["session"].as_str().unwrap();
    assert_ne!(Cluster::index_of(new_session), holder, "a new session on a live replica");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
    assert!(status.success());
    eprintln!(
        "[SIGKILL, {transport} session] the SDK's next call failed ({}), a new session on {} answered {:.0} ms after the kill (the SDK measured {} s from its failed call)",
        lost["error"],
        new_session.split('.').next().unwrap(),
        recovery.as_secs_f64() * 1000.0,
        recovered["seconds"]
    );
    // Through the balancer, a request naming the dead replica's session is answered 404 too.
    assert_eq!(ping_session(cluster.lb(), transport, &session).await, 404);
    let bob = token(BOB_TOKEN);
    assert!(
        not_probes(&forge).iter().all(|r| r.header("authorization") == Some(bob.as_str())),
        "only bob's token reached the forge"
    );
}

/// The status of a `ping` in `session` (bob's), posted to `base` as its transport wants.
async fn ping_session(base: &str, transport: &str, session: &str) -> u16 {
    let ping = browser()
        .post(match transport {
            "sse" => format!("{base}/message?sessionId={session}"),
            _ => format!("{base}/mcp"),
        })
        .header("authorization", token(BOB_TOKEN))
        .header("mcp-session-id", session)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    ping.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_client_whose_replica_is_killed_gets_404_and_a_new_session_through_the_sdk() {
    bounded(session_client_recovers("http")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_client_whose_replica_is_killed_opens_a_new_stream_through_the_sdk() {
    bounded(session_client_recovers("sse")).await;
}

/// SIGTERM: the replica says it is not ready and keeps accepting for `MCP_SHUTDOWN_DELAY`,
/// while HAProxy takes it out of the rotation; then (here at a second signal, which ends the
/// delay) it stops accepting, lets its calls in flight finish (calls started before the signal
/// and during the delay, all answered only once it has stopped accepting), and exits. The
/// balancer's clients never notice. (`shutdown.rs` has the delay ending by itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_replica_finishes_its_calls_and_the_balancer_loses_none() {
    bounded(async {
        const WORKERS: usize = 8;
        let forge = worker_forge(WORKERS).await;
        forge.seed_repo("user00", "slow");
        let held = Gate::new();
        forge.script(Script::always(
            Some("GET"),
            "/api/v1/repos/user00/slow",
            ScriptedResponse::json(200, &json!({"name": "slow"})).held_until(&held),
        ));
        // A delay longer than any test: the steps below take what the machine needs.
        let env = [("MCP_STATELESS", "true"), ("MCP_SHUTDOWN_DELAY", "600")];
        let mut cluster = Cluster::start(&forge.base_url(), "http", &env, free_port()).await;
        let (stop, served) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let t0 = Instant::now();
        let run = tokio::spawn(callers(cluster.lb().to_owned(), WORKERS, stop.clone(), t0, served));
        let http = http_client();
        let r0 = cluster.replica(0).base.clone();
        let slow_calls = |n: usize| -> Vec<_> {
            (0..n)
                .map(|_| {
                    let (http, r0) = (http.clone(), r0.clone());
                    tokio::spawn(async move {
                        let args = json!({"owner": "user00", "repo": "slow"});
                        stateless_call(&http, &r0, "repoGet", args, Some(&token("tok-user-00"))).await
                    })
                })
                .collect()
        };
        // Until the forge has been asked for the slow repository `n` times in all.
        let reached = async |n: usize| {
            wait_for(&format!("{n} slow calls reached the forge"), WAIT_LIMIT, async || {
                forge.requests().iter().filter(|r| r.raw_path == "/api/v1/repos/user00/slow").count() >= n
            })
            .await
        };
        // Slow calls in flight on the replica about to drain.
        let mut slow = slow_calls(4);
        reached(4).await;
        let signalled = Instant::now();
        cluster.signal(0, "TERM");
        wait_for("the draining replica says it is not ready", WAIT_LIMIT, async || {
            let ready = http.get(format!("{r0}/readyz")).send().await.unwrap();
            ready.status() == 503 && ready.text().await.unwrap().contains("shutting down")
        })
        .await;
        // During the delay the replica still accepts (two more slow calls, directly), and
        // HAProxy takes it out.
        slow.extend(slow_calls(2));
        reached(6).await;
        cluster.lb.wait_for(0, "DOWN", WAIT_LIMIT).await;
        let out = signalled.elapsed();
        // The delay ends: no new requests, and the replica waits for its six calls.
        cluster.signal(0, "TERM");
        cluster.replica(0).log_lines("no new requests", 1).await;
        let mut r = cluster.replicas[0].take().unwrap();
        assert!(r.running(), "it exited before its calls were answered:\n{}", r.stderr());
        held.open();
        for s in slow {
            let c = tool_result(&s.await.unwrap().expect("a call accepted before the drain finishes"));
            assert!(!c.is_error, "{}", c.text);
            assert_eq!(c.json["data"]["name"], "slow");
        }
        let status = tokio::time::timeout(WAIT_LIMIT, r.wait()).await.expect("the replica exits");
        let exited = signalled.elapsed();
        assert!(status.success(), "{status}:\n{}", r.stderr());
        stop.store(true, Ordering::SeqCst);
        let tallies = run.await.unwrap();
        let ok: usize = tallies.iter().map(|t| t.ok).sum();
        let failed: Vec<_> = tallies.iter().flat_map(|t| &t.failed).collect();
        eprintln!(
            "[SIGTERM, stateless] {ok} calls through the balancer, {} failed; HAProxy took the replica out {out:.2?} after the signal; it finished its 6 slow calls (4 from before the signal, 2 from the delay) and exited {exited:.2?} after it",
            failed.len()
        );
        assert!(failed.is_empty(), "calls failed during the drain: {failed:?}\n{}", cluster.logs());
        assert_no_cross_talk(&forge);
    })
    .await;
}

/// `/readyz`: 503 with the reason until the forge has answered, 200 after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_forge() {
    bounded(async {
        // A forge address held by a listener that never answers, so that no other test takes
        // the port meanwhile.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap();
        let server =
            HttpServer::spawn_before_ready(&format!("http://{addr}"), "http", &[("GITEA_TIMEOUT", "1")])
                .await;
        let http = http_client();
        let r = http.get(server.url("/readyz")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 503);
        assert!(r.text().await.unwrap().contains("has not answered yet"));
        assert_eq!(http.get(server.url("/healthz")).send().await.unwrap().status().as_u16(), 200);
        // The forge comes up on that address: the replica turns ready on its own.
        drop(silent);
        let forge = Forge::gitea().start_on(addr).await.unwrap();
        wait_ready(&server).await;
        assert!(forge.requests().iter().any(is_readiness_probe));
    })
    .await;
}
