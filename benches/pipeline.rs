//! End-to-end figures for docs/PERFORMANCE.md: catalog start-up, `tools/list` size, the
//! per-call overhead of the pipeline over a plain HTTP request to the same (fake) forge, and
//! one identity's latency beside another over its rate limit, and what a shared store adds
//! to a call with the limits on.
//!
//! Run with `cargo bench --bench pipeline` (or `-- guard`, `-- calls`… for some sections).
//! Plain `fn main`, no harness: every figure is printed with its label. Everything runs in one process on one tokio runtime, the fake
//! forge included, so "ours" and "direct" share the same machine load.
// Tests read their own variables (PATH, AEGIS_E2E_*, UPDATE_SNAPSHOTS), not the server's settings.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aegis_core::args::{plan as arg_plan, validate as arg_validate};
use aegis_core::catalog::{Catalog, Flavor, Target};
use aegis_core::decode::json::{Elided, Keep};
use aegis_core::decode::{body, pagination};
use aegis_core::envelope::{self, RequestInfo, Success};
use aegis_core::guard::{Guarded, Outcome};
use aegis_gitea_mcp::config::{Cli, Settings};
use aegis_gitea_mcp::identity::Caller;
use aegis_gitea_mcp::identity::{Identity, Mode};
use aegis_gitea_mcp::mcp::McpHandler;
use aegis_gitea_mcp::mcp::reply::to_rmcp;
use aegis_gitea_mcp::mcp::tool_list;
use aegis_gitea_mcp::server::Server;
use aegis_gitea_mcp::{audit, call};
use clap::Parser;
use fake_forge::{FakeForge, Flavor as FFlavor, Options};
use serde_json::{Map, Value, json};

const TOKEN: &str = "tok-alice-0123456789";
const BUILD_WARMUP: usize = 2;
const BUILD_RUNS: usize = 20;
const CALL_WARMUP: usize = 200;
const CALLS: usize = 2000;
const TASKS: usize = 16;
const CONCURRENT_CALLS: usize = 8000;

/// min / median / p99 of a set of samples.
struct Stats {
    min: Duration,
    median: Duration,
    p99: Duration,
}

fn stats(samples: &[Duration]) -> Stats {
    let mut s = samples.to_vec();
    s.sort_unstable();
    let n = s.len();
    Stats { min: s[0], median: s[n / 2], p99: s[((n * 99) / 100).min(n - 1)] }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    println!("aegis-gitea-mcp pipeline bench");
    println!(
        "  cores (available_parallelism): {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // `cargo bench --bench pipeline -- guard` runs only the sections whose name holds a word
    // (startup, tools, calls, guard, signin, limits, bytes, store).
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let run = |name: &str| only.is_empty() || only.iter().any(|w| name.contains(w.as_str()));
    if run("startup") {
        catalog_startup();
    }
    rt.block_on(async {
        if run("tools") {
            tools_list_sizes().await;
        }
        if run("calls") {
            per_call(false).await;
            per_call(true).await;
        }
    });
    if run("guard") {
        guard_throughput();
    }
    if run("signin") {
        sign_in_tokens();
    }
    if run("limits") {
        rt.block_on(limits_neighbour());
    }
    if run("bytes") {
        rt.block_on(everyday_bytes());
    }
    if run("store") {
        rt.block_on(store_cost());
    }
    if run("flow") {
        rt.block_on(flow_cost());
    }
}

// ---------------------------------------------------------------------------------------
// 9. The flow guard: what remembering a session's private reads, and judging its writes by
//    them, costs a call.

/// This process's CPU time so far: the time on a CPU of each of its threads, in ns
/// (`/proc/self/task/*/schedstat`; threads that ended are not counted — the runtime's stay).
/// The fake forge runs here too, the same for both settings.
fn cpu_now() -> Duration {
    let ns: u64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// A flow bench's session: its `FLOW_GUARD`, its server, and the three calls of a round.
type Session = (&'static str, Arc<Server>, [(&'static str, Map<String, Value>); 3]);

/// A private repository read and written by one session (`issueGetIssue`, then
/// `issueCreateComment` on it: a write into the source itself, never asked), and a public
/// one read, with `FLOW_GUARD=off` and `ask`: CPU and time per call, and the forge requests
/// per call once the visibilities are cached. The two servers take turns, a block each, so
/// that the machine's drift falls on both alike; the ratio is the median of the blocks'.
async fn flow_cost() {
    const BLOCKS: usize = 8;
    const ROUNDS: usize = 400;
    println!(
        "== 9. Flow guard: {BLOCKS} blocks each of {ROUNDS} rounds (a private read, a write into it, a public read), FLOW_GUARD=off and ask taking turns"
    );
    let forge = FakeForge::start(Options { flavor: FFlavor::Gitea, ..Options::default() }).await;
    forge.seed_repo("alice", "demo");
    forge.seed_issues("alice", "demo", 1);
    let mut sessions: Vec<Session> = Vec::new();
    for guard in ["off", "ask"] {
        let flags = ["--flow-guard", guard];
        let server =
            Arc::new(Server::start(settings_with("gitea", &forge.base_url(), &flags)).await.unwrap());
        let secret = format!("secret-{guard}");
        let made = obj(json!({"body": {"name": secret, "private": true}}));
        text_of(&server, "createCurrentUserRepo", made).await;
        forge.seed_issues("alice", &secret, 1);
        let read = obj(json!({"owner": "alice", "repo": secret, "index": 1}));
        let write = obj(json!({"owner": "alice", "repo": secret, "index": 1, "body": {"body": "noted"}}));
        let public = obj(json!({"owner": "alice", "repo": "demo", "index": 1}));
        sessions.push((
            guard,
            server,
            [("issueGetIssue", read), ("issueCreateComment", write), ("issueGetIssue", public)],
        ));
    }
    let round = async |(_, server, calls): &Session| {
        for (tool, args) in calls {
            text_of(server, tool, args.clone()).await;
        }
    };
    for s in &sessions {
        for _ in 0..CALL_WARMUP {
            round(s).await;
        }
    }
    let calls = (ROUNDS * 3) as f64;
    let (mut cpu, mut time, mut requests) = ([Vec::new(), Vec::new()], [0.0, 0.0], [0.0, 0.0]);
    for _ in 0..BLOCKS {
        for (i, s) in sessions.iter().enumerate() {
            forge.clear_requests();
            let (c, t) = (cpu_now(), Instant::now());
            for _ in 0..ROUNDS {
                round(s).await;
            }
            cpu[i].push((cpu_now() - c).as_secs_f64() * 1e6 / calls);
            time[i] += t.elapsed().as_secs_f64() * 1e6 / calls / BLOCKS as f64;
            requests[i] += forge.requests().len() as f64 / calls / BLOCKS as f64;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut ratios: Vec<f64> = cpu[1].iter().zip(&cpu[0]).map(|(a, o)| a / o).collect();
    for (i, (guard, _, _)) in sessions.iter().enumerate() {
        println!(
            "  FLOW_GUARD={guard:<4} CPU {:>6.1} us per call (median of blocks)   time {:>6.1} us per call   forge requests per call {:.3}",
            median(&mut cpu[i]),
            time[i],
            requests[i]
        );
    }
    println!(
        "  ask/off CPU per call, median of the blocks' ratios: {:.3}x (goal <= 1.05x)",
        median(&mut ratios)
    );
    println!();
    forge.shutdown();
}

// ---------------------------------------------------------------------------------------
// 8. The shared store: what the limits cost a call when a Redis judges them.

/// repoGet with the three limits on (far above what is asked, as in 3a+), counted by the
/// server alone and by a Redis started here on a free port (skipped without `redis-server`):
/// the time per call, sequential and concurrent, and the store's round trips per call
/// (admit, forge_admit and release in `/metrics`, over `aegis_calls_total`).
async fn store_cost() {
    println!("== 8. Shared store: repoGet with the limits on, without and with a Redis on loopback");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, pass, key) = (free(), dir.path().join("password"), dir.path().join("key"));
    std::fs::write(&pass, "bench-store-pass").unwrap();
    std::fs::write(&key, "3c".repeat(32)).unwrap();
    let started = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--requirepass", "bench-store-pass", "--maxmemory", "64mb", "--maxmemory-policy"])
        .args(["noeviction", "--loglevel", "warning", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn();
    let Ok(child) = started else {
        println!("  skipped: no redis-server (scripts/setup-test-env installs it)\n");
        return;
    };
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = (self.0.kill(), self.0.wait());
        }
    }
    let _redis = Killed(child);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let forge = FakeForge::start(Options { flavor: FFlavor::Gitea, ..Options::default() }).await;
    forge.seed_repo("alice", "demo");
    forge.set_recording(false);
    let (url, pass, key) =
        (format!("redis://127.0.0.1:{port}/"), pass.to_str().unwrap(), key.to_str().unwrap());
    let store = ["--state-url", &*url, "--state-password-file", pass, "--state-key-file", key];
    let limits = "--rate-limit-per-minute 60000000 --rate-limit-concurrent 64 --forge-max-concurrent 64";
    let args = obj(json!({"owner": "alice", "repo": "demo"}));
    let (cases, client) =
        (Arc::new(vec![Case { tool: "repoGet", args, url: String::new() }]), reqwest::Client::new());
    for (label, with_store) in [("limits, no store", false), ("limits, Redis store", true)] {
        let metrics = format!("127.0.0.1:{}", free());
        let mut flags: Vec<&str> = limits.split(' ').chain(["--metrics-listen", metrics.as_str()]).collect();
        flags.extend(if with_store { &store[..] } else { &[] });
        let server =
            Arc::new(Server::start(settings_with("gitea", &forge.base_url(), &flags)).await.unwrap());
        aegis_gitea_mcp::transport::metrics::serve_own(&server).await.expect("the metrics listener");
        // The store's round trips (the calls' share requests; a renewal every 5 s besides),
        // and the calls.
        let counts = async || {
            let text =
                client.get(format!("http://{metrics}/metrics")).send().await.unwrap().text().await.unwrap();
            let sum = |of: &[&str]| -> f64 {
                let lines = text.lines().filter(|l| of.iter().any(|p| l.starts_with(p)));
                lines.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
            };
            (sum(&["aegis_state_round_trips_total "]), sum(&["aegis_calls_total{"]))
        };
        for _ in 0..CALL_WARMUP {
            ours(&server, &cases[0]).await;
        }
        // Slots are given back in the background: a moment for that before counting.
        let settled = async || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            counts().await
        };
        let ((trips0, calls0), mut samples) = (counts().await, Vec::with_capacity(CALLS));
        for _ in 0..CALLS {
            let t = Instant::now();
            ours(&server, &cases[0]).await;
            samples.push(t.elapsed());
        }
        let (trips1, calls1) = settled().await;
        let took = run_concurrent(&server, &client, &cases, 0, true, CONCURRENT_CALLS).await;
        let ((trips2, calls2), s) = (settled().await, stats(&samples));
        println!(
            "  {label:<20} sequential median {:>6.1} us  p99 {:>6.1} us   {TASKS} tasks {:>6.0} calls/s   store round trips per call {:.2} sequential, {:.2} concurrent",
            us(s.median),
            us(s.p99),
            CONCURRENT_CALLS as f64 / took.as_secs_f64(),
            (trips1 - trips0) / (calls1 - calls0),
            (trips2 - trips1) / (calls2 - calls1)
        );
    }
    println!();
    forge.shutdown();
}

// ---------------------------------------------------------------------------------------
// 7. Bytes per everyday task, in the compact shape and the full one.

/// Ten everyday tasks as a real Gitea 1.27.3 answered them (recorded by the end-to-end test
/// `e2e_everyday_tasks_in_both_shapes` with `AEGIS_E2E_RECORD`): each call's arguments, the
/// path it reached, the forge's answer, and the facts the task needs.
const EVERYDAY: &str = include_str!("fixtures/everyday-tasks-gitea.json");

async fn everyday_bytes() {
    println!(
        "== 7. Bytes per everyday task: the forge's recorded answers replayed by the fake forge, each task in both shapes"
    );
    let doc: Value = serde_json::from_str(EVERYDAY).expect("the recording is JSON");
    let calls = doc["calls"].as_array().expect("calls");
    let forge = FakeForge::start(Options { flavor: FFlavor::Gitea, ..Options::default() }).await;
    forge.replay(&doc);
    let server = Server::start(settings("gitea", &forge.base_url())).await.expect("server starts");
    println!(
        "  recorded on {} ({})",
        doc["forge"].as_str().unwrap_or("?"),
        doc["repository"].as_str().unwrap_or("?")
    );
    println!("  {:<36} {:>9} {:>9} {:>7}  facts", "task", "full B", "compact B", "ratio");
    let (mut all_full, mut all_compact, mut missing) = (0, 0, 0);
    // What the compact results cost on the wire as `tools/call` results, to a client without
    // typed results and to one with them (the same JSON again as structuredContent).
    let (mut wire_untyped, mut wire_typed) = (0, 0);
    let mut tasks: Vec<&str> = calls.iter().filter_map(|c| c["task"].as_str()).collect();
    tasks.dedup();
    for task in tasks {
        let (mut full, mut compact, mut text) = (0, 0, String::new());
        for c in calls.iter().filter(|c| c["task"] == task) {
            let tool = c["tool"].as_str().expect("a tool");
            let args = c["args"].as_object().expect("arguments").clone();
            let shaped = c["data"].is_object() || c["data"].is_array();
            let mut full_args = args.clone();
            if shaped {
                full_args.insert("shape".into(), json!("full"));
            }
            let f = text_of(&server, tool, full_args).await;
            let guarded = guarded_of(&server, tool, args).await;
            let k = guarded.as_str().to_owned();
            for (typed, sum) in [(false, &mut wire_untyped), (true, &mut wire_typed)] {
                let result = to_rmcp(Outcome::Success(guarded.clone()), typed).expect("a result");
                *sum += serde_json::to_vec(&result).expect("a result serializes").len();
            }
            full += f.len();
            compact += k.len();
            text.push_str(&k);
        }
        let facts: Vec<&str> = calls
            .iter()
            .find(|c| c["task"] == task)
            .and_then(|c| c["facts"].as_array())
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let absent: Vec<&str> = facts.iter().copied().filter(|f| !text.contains(f)).collect();
        missing += absent.len();
        let said = if absent.is_empty() {
            format!("all {} present", facts.len())
        } else {
            format!("MISSING {absent:?}")
        };
        println!("  {task:<36} {full:>9} {compact:>9} {:>7.2}  {said}", compact as f64 / full as f64);
        (all_full, all_compact) = (all_full + full, all_compact + compact);
    }
    println!(
        "  {:<36} {all_full:>9} {all_compact:>9} {:>7.2}  (goal: at most 0.45)",
        "all ten",
        all_compact as f64 / all_full as f64
    );
    println!(
        "  the compact results as tools/call results: {wire_untyped} B without typed results, {wire_typed} B with structuredContent ({:.2}x)",
        wire_typed as f64 / wire_untyped as f64
    );
    assert_eq!(missing, 0, "a compact result lost a fact its task needs");
    println!();
}

/// A tool call's result text, as a client receives it.
async fn text_of(server: &Server, tool: &str, args: Map<String, Value>) -> String {
    guarded_of(server, tool, args).await.into_string()
}

async fn guarded_of(server: &Server, tool: &str, args: Map<String, Value>) -> Guarded {
    let mut trace = audit::Trace::default();
    let result = call::run(server, Caller::Global, &Default::default(), tool, Some(args), &mut trace).await;
    result.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

// ---------------------------------------------------------------------------------------
// 6. Limits: one identity far over its limit beside another making its calls.

/// The neighbour's token (the fake forge knows it as `bob`).
const BOB_TOKEN: &str = "tok-bob-5c0ffee5b0b";
/// Tasks of the neighbour, each calling in a loop.
const NEIGHBOUR_TASKS: usize = 8;
/// Calls of the measured identity per scenario.
const MEASURED_CALLS: usize = 500;
/// High enough for the measured identity's calls (warm-up and two scenarios fit its burst),
/// far below what the neighbour tries.
const PER_MINUTE: &str = "2000";

/// `repoGet alice/demo` as the owner of `token`: `Ok`, or the error kind.
async fn call_as(server: &Server, token: &str) -> Result<(), String> {
    let caller = Caller::Token(secrecy::SecretString::from(token.to_owned()));
    let args = obj(json!({"owner": "alice", "repo": "demo"}));
    let mut trace = audit::Trace::default();
    match call::run(server, caller, &Default::default(), "repoGet", Some(args), &mut trace).await {
        Ok(_) => Ok(()),
        Err(e) => Err(e.into_error().kind().map(|k| k.as_str().to_owned()).unwrap_or_default()),
    }
}

/// What the neighbour got while the measured identity made its calls.
#[derive(Default)]
struct Neighbour {
    admitted: u64,
    refused: u64,
    seconds: f64,
}

/// `MEASURED_CALLS` sequential calls as alice, with bob calling from `NEIGHBOUR_TASKS` tasks
/// meanwhile when `hammer`: alice's latencies, and what bob got.
async fn beside_neighbour(server: &Arc<Server>, hammer: bool) -> (Stats, Neighbour) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let (admitted, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = (0..if hammer { NEIGHBOUR_TASKS } else { 0 })
        .map(|_| {
            let (server, stop, admitted, refused) =
                (server.clone(), stop.clone(), admitted.clone(), refused.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match call_as(&server, BOB_TOKEN).await {
                        Ok(()) => admitted.fetch_add(1, Ordering::Relaxed),
                        Err(kind) if kind == "rate_limited" => refused.fetch_add(1, Ordering::Relaxed),
                        Err(kind) => panic!("the neighbour got {kind}"),
                    };
                    // A refusal awaits nothing; over a network each call would.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let mut samples = Vec::with_capacity(MEASURED_CALLS);
    for _ in 0..MEASURED_CALLS {
        let t = Instant::now();
        call_as(server, TOKEN).await.expect("the measured identity is never refused");
        samples.push(t.elapsed());
    }
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("neighbour task");
    }
    let neighbour = Neighbour {
        admitted: admitted.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        seconds,
    };
    (stats(&samples), neighbour)
}

async fn limits_neighbour() {
    println!(
        "== 6. Limits: alice's repoGet latency ({MEASURED_CALLS} sequential calls) beside bob calling from {NEIGHBOUR_TASKS} tasks"
    );
    let users = vec![(TOKEN.to_owned(), "alice".to_owned()), (BOB_TOKEN.to_owned(), "bob".to_owned())];
    let forge = FakeForge::start(Options { flavor: FFlavor::Gitea, users, ..Options::default() }).await;
    forge.seed_repo("alice", "demo");
    forge.set_recording(false);
    let limited = ["--rate-limit-per-minute", PER_MINUTE, "--rate-limit-concurrent", "4"];
    let with_limits = Arc::new(
        Server::start(settings_with("gitea", &forge.base_url(), &limited)).await.expect("server starts"),
    );
    let without = Arc::new(Server::start(settings("gitea", &forge.base_url())).await.expect("server starts"));
    for server in [&with_limits, &without] {
        for _ in 0..100 {
            call_as(server, TOKEN).await.expect("warm-up");
        }
    }
    // Bob uses up his burst first: from then on he is over his limit.
    let mut burst = 0;
    while call_as(&with_limits, BOB_TOKEN).await.is_ok() {
        burst += 1;
    }
    println!("  RATE_LIMIT_PER_MINUTE={PER_MINUTE} RATE_LIMIT_CONCURRENT=4; bob's burst: {burst} calls");
    let (alone, _) = beside_neighbour(&with_limits, false).await;
    let (limited, n_limited) = beside_neighbour(&with_limits, true).await;
    let (unlimited, n_unlimited) = beside_neighbour(&without, true).await;
    let row = |label: &str, s: &Stats, n: Option<&Neighbour>| {
        let bob = n.map_or(String::new(), |n| {
            format!(
                "   bob: {:.0} admitted/s, {:.0} refused/s",
                n.admitted as f64 / n.seconds,
                n.refused as f64 / n.seconds
            )
        });
        println!(
            "  {label:<34} alice p50 {:>7.1} us ({:.2}x)  p99 {:>7.1} us ({:.2}x){bob}",
            us(s.median),
            s.median.as_secs_f64() / alone.median.as_secs_f64(),
            us(s.p99),
            s.p99.as_secs_f64() / alone.p99.as_secs_f64(),
        );
    };
    row("alone (limits on)", &alone, None);
    row("bob over his limit (limits on)", &limited, Some(&n_limited));
    row("bob unlimited (no limits)", &unlimited, Some(&n_unlimited));
    println!();
    forge.shutdown();
}

// ---------------------------------------------------------------------------------------
// 5. Sign-in: what a request with a token this server issued costs over one with a forge token.

/// Sealing (at `/token`) and opening (every request) an access token shaped like the real
/// ones: a forge JWT of 300 characters, the client hash, scope, audience and expiry.
fn sign_in_tokens() {
    use aegis_gitea_mcp::oauth::seal::{Kind, Sealer};
    const RUNS: usize = 20_000;
    println!("== 5. Sign-in tokens: seal and open an access token ({RUNS} runs each after 1000 warm-ups)");
    let sealer = Sealer::new(&secrecy::SecretBox::new(Box::new([7u8; 32])));
    let payload = json!({
        "c": "Q2xpZW50SGFzaE9mMTZCeXRlcw",
        "sc": "read write",
        "res": "https://mcp.example.com/mcp",
        "f": format!("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.{}", "x".repeat(262)),
        "e": 4_102_444_800u64,
    });
    let token = sealer.seal(Kind::Access, &payload);
    for _ in 0..1000 {
        let _: Value = sealer.open(Kind::Access, &sealer.seal(Kind::Access, &payload)).unwrap();
    }
    let (mut sealing, mut opening) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for _ in 0..RUNS {
        let t = Instant::now();
        std::hint::black_box(sealer.seal(Kind::Access, &payload));
        sealing.push(t.elapsed());
        let t = Instant::now();
        let opened: Value = sealer.open(Kind::Access, std::hint::black_box(&token)).unwrap();
        std::hint::black_box(opened);
        opening.push(t.elapsed());
    }
    let (s, o) = (stats(&sealing), stats(&opening));
    println!("  access token {} B", token.len());
    println!("  seal  median {:>6.2} us  p99 {:>6.2} us", us(s.median), us(s.p99));
    println!(
        "  open  median {:>6.2} us  p99 {:>6.2} us   (added to every request that presents it)",
        us(o.median),
        us(o.p99)
    );
    println!();
}

// ---------------------------------------------------------------------------------------
// 4. Guard throughput on a 1 MB JSON result.

/// About 1 MB of issue-like objects; with `secrets`, every item carries credentials of
/// several kinds, a configured secret and a secret field.
fn one_megabyte(secrets: bool) -> Value {
    let mut items = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < 1_000_000 {
        let body = if secrets {
            format!(
                "deploy with ghp_0123456789abcdefghijklmnopqrstuvwxy{i:01} and AKIAIOSFODNN7EXAMPL{} then password=hunter2hunter2 and {GLOBAL} commit 0123456789abcdef0123456789abcdef01234567",
                i % 10
            )
        } else {
            format!(
                "Steps to reproduce #{i}: open the settings page, change the avatar, commit 0123456789abcdef0123456789abcdef01234567 and see the error in the log."
            )
        };
        let item = json!({
            "id": i, "number": i, "title": format!("Issue number {i} about the login page"),
            "body": body, "state": "open", "user": {"login": "alice", "id": 1, "avatar_url": "https://forge.example/avatars/1"},
            "labels": [{"name": "bug", "color": "ee0701"}], "config": if secrets { json!({"secret": "hmac-value-xyz-123"}) } else { json!({}) },
            "html_url": format!("https://forge.example/alice/demo/issues/{i}"), "created_at": "2026-11-30T05:00:00Z"
        });
        size += item.to_string().len();
        items.push(item);
        i += 1;
    }
    Value::Array(items)
}

const GLOBAL: &str = "Zq7GLOBALtok3n0xZq7GLOBALtok3n0x";

fn guard_throughput() {
    use aegis_core::guard::DetectionMode;
    use aegis_core::guard::{Bounds, Guard};
    println!("== 4. Guard throughput on a ~1 MB JSON result (median of 15 runs after 3 warm-ups)");
    println!(
        "       exact redaction (4 configured secrets + 1 of the call) -> pattern masking -> bounds -> result text"
    );
    for secrets in [false, true] {
        let data = one_megabyte(secrets);
        let bytes = data.to_string().len();
        for (mode_name, mode) in
            [("off", DetectionMode::Off), ("mask", DetectionMode::Mask), ("block", DetectionMode::Block)]
        {
            for (bounds_name, bounds) in [
                ("no cut", Bounds { max_items: usize::MAX, max_chars: usize::MAX }),
                ("defaults (100 items, 100000 chars)", Bounds { max_items: 100, max_chars: 100_000 }),
            ] {
                let guard = Guard::new(
                    vec![
                        GLOBAL.into(),
                        "extra-one-secret".into(),
                        "extra-two-secret".into(),
                        "oauth-client-secret".into(),
                    ],
                    mode,
                    bounds,
                )
                .for_call(vec!["tok-caller-abcdef0123".into()]);
                let mut samples = Vec::new();
                let mut outcome = "";
                for run in 0..18 {
                    let mut s = Success {
                        identity: Identity { login: Some("alice".into()), mode: Mode::Token, sudo: None },
                        forge: None,
                        request: RequestInfo { method: "GET", path: "/repos/alice/demo/issues".into() },
                        status: 200,
                        pagination: None,
                        untrusted_content: envelope::untrusted_notice(Flavor::Gitea),
                        shape: None,
                        data: data.clone(),
                        link: None,
                        truncated: None,
                        hidden_content: None,
                        filtered: None,
                        withheld: None,
                    };
                    let t = Instant::now();
                    let r = guard.success(std::hint::black_box(&mut s), false, &Elided::default());
                    let el = t.elapsed();
                    outcome = if r.is_err() {
                        "blocked"
                    } else if s.truncated.is_some() {
                        "cut"
                    } else {
                        "whole"
                    };
                    drop(std::hint::black_box(s));
                    if run >= 3 {
                        samples.push(el);
                    }
                }
                let med = stats(&samples).median;
                println!(
                    "  {:<11} mode {:<5} bounds {:<36} {:>8.2} ms  {:>7.1} MB/s  ({outcome})",
                    if secrets { "many secrets" } else { "no secrets" },
                    mode_name,
                    bounds_name,
                    ms(med),
                    bytes as f64 / 1e6 / med.as_secs_f64()
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// 1. Start-up: Catalog::build (spec parse + schemas + validators).

fn catalog_startup() {
    println!(
        "== 1. Start-up: Catalog::build (spec read, operations planned; a tool's schemas and validator wait for its first use), {BUILD_RUNS} runs after {BUILD_WARMUP} warm-ups"
    );
    println!("   + listed: and every tool's listed schema (what tools/list with TOOLSETS=all needs)");
    println!("   + all:    and every schema and validator (what the start built before they were lazy)");
    for flavor in [Flavor::Gitea, Flavor::Forgejo] {
        let build = || Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
        let listed = |c: &Catalog| {
            for t in c.all_tools() {
                std::hint::black_box(t.listed_schema());
            }
        };
        let all = |c: &Catalog| {
            for t in c.all_tools() {
                std::hint::black_box((t.listed_schema(), t.validator().is_ok()));
            }
        };
        for _ in 0..BUILD_WARMUP {
            std::hint::black_box(build());
        }
        let (mut alone, mut with_listed, mut with_all) = (Vec::new(), Vec::new(), Vec::new());
        let (mut tools, mut ops, mut spec_version) = (0, 0, String::new());
        for _ in 0..BUILD_RUNS {
            let t = Instant::now();
            let c = build();
            alone.push(t.elapsed());
            tools = c.all_tools().count();
            ops = c.operations().count();
            spec_version = c.spec_version.clone();
            drop(std::hint::black_box(c));
            let t = Instant::now();
            listed(&build());
            with_listed.push(t.elapsed());
            let t = Instant::now();
            all(&build());
            with_all.push(t.elapsed());
        }
        let (a, l, e) = (stats(&alone), stats(&with_listed), stats(&with_all));
        println!(
            "  {:<8} spec {:<22} spec bytes {:>8}  tools {:>4} ({} operations + {} built-in)",
            flavor.as_str(),
            spec_version,
            flavor.embedded_spec().len(),
            tools,
            ops,
            tools - ops,
        );
        println!(
            "           build median {:>6.1} ms  min {:>6.1} ms | + listed {:>6.1} / {:>6.1} ms | + all {:>6.1} / {:>6.1} ms",
            ms(a.median),
            ms(a.min),
            ms(l.median),
            ms(l.min),
            ms(e.median),
            ms(e.min)
        );
    }
    println!();
}

// ---------------------------------------------------------------------------------------
// 2. Size of the tools/list answer.

fn settings(flavor: &str, url: &str) -> Settings {
    settings_with(flavor, url, &[])
}

fn settings_with(flavor: &str, url: &str, more: &[&str]) -> Settings {
    let mut argv = vec!["aegis-gitea-mcp", "--flavor", flavor, "--url", url, "--token", TOKEN];
    argv.extend_from_slice(more);
    let cli = Cli::try_parse_from(argv).expect("cli parses");
    Settings::resolve(cli.common, &|_| None).expect("settings resolve")
}

/// The size goal for the default `tools/list`.
const DEFAULT_GOAL_BYTES: usize = 40_000;

async fn tools_list_sizes() {
    println!("== 2. Size of the tools/list answer (the result as sent, no pagination)");
    for (name, ff) in [("gitea", FFlavor::Gitea), ("forgejo", FFlavor::Forgejo)] {
        let forge = FakeForge::start(Options { flavor: ff, ..Options::default() }).await;
        for (label, more) in [
            ("default (TOOLSETS=core)", &[][..]),
            ("TOOLSETS=all", &["--toolsets", "all"][..]),
            ("--read-only", &["--read-only"][..]),
            ("--read-only TOOLSETS=all", &["--read-only", "--toolsets", "all"][..]),
        ] {
            let t = Instant::now();
            let server = Arc::new(
                Server::start(settings_with(name, &forge.base_url(), more)).await.expect("server starts"),
            );
            let start = t.elapsed();
            let handler = McpHandler::new(server.clone());
            let listed = tool_list::listed(
                &server.forges.primary().catalog,
                &server.forges.primary().policy,
                &Default::default(),
                false,
            )
            .len();
            // As a client before STRUCTURED_CONTENT_FROM sees it, and one given typed results.
            for (typed, who) in [(false, "untyped"), (true, "typed")] {
                let result_bytes = handler.tools_list_bytes(typed);
                let goal = match (label.starts_with("default"), result_bytes < DEFAULT_GOAL_BYTES) {
                    (true, true) => "  (goal < 40,000 B: met)",
                    (true, false) => "  (goal < 40,000 B: NOT met)",
                    (false, _) => "",
                };
                println!(
                    "  {name:<8} {label:<26} {who:<7} tools {listed:>4}  {result_bytes:>7} B = {:>6.1} KiB{goal}  Server::start {:.1} ms",
                    result_bytes as f64 / 1024.0,
                    ms(start),
                );
            }
        }
        // The discovery search: one query over every operation of the spec.
        let server = Arc::new(Server::start(settings(name, &forge.base_url())).await.expect("server starts"));
        for query in ["merge a pull request", "create a release", "list workflow runs"] {
            let samples: Vec<Duration> = (0..1000)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(server.forges.primary().catalog.search(query, 8, |_| true));
                    t.elapsed()
                })
                .collect();
            let s = stats(&samples);
            let top = server
                .forges
                .primary()
                .catalog
                .search(query, 1, |_| true)
                .first()
                .map(|t| t.name.clone())
                .unwrap_or_default();
            println!(
                "  {name:<8} search {query:<24} median {:>6.1} us  p99 {:>6.1} us  (best: {top})",
                s.median.as_secs_f64() * 1e6,
                s.p99.as_secs_f64() * 1e6
            );
        }
        forge.shutdown();
    }
    several_forges_list_size().await;
}

/// The default list of a server of three profiles (Gitea the default, Forgejo, Gitea) against
/// one Gitea forge's: every tool takes `forge`, and a Forgejo argument a Gitea tool lacks is
/// listed too (the goal: at most 1.05×).
async fn several_forges_list_size() {
    let gitea = FakeForge::start(Options { flavor: FFlavor::Gitea, ..Options::default() }).await;
    let forgejo = FakeForge::start(Options { flavor: FFlavor::Forgejo, ..Options::default() }).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("forges.toml");
    let profile = |name: &str, url: &str, flavor: &str| {
        format!("[forges.{name}]\nurl = \"{url}\"\nflavor = \"{flavor}\"\ntoken_env = \"BENCH_TOKEN\"\n")
    };
    let file = format!(
        "default = \"work\"\n{}{}{}",
        profile("work", &gitea.base_url(), "gitea"),
        profile("home", &forgejo.base_url(), "forgejo"),
        profile("third", &gitea.base_url(), "gitea")
    );
    std::fs::write(&path, file).expect("the profiles file is written");
    let cli = Cli::try_parse_from(["aegis-gitea-mcp", "--profiles", path.to_str().expect("a UTF-8 path")])
        .expect("cli parses");
    let lookup = |k: &str| (k == "BENCH_TOKEN").then(|| TOKEN.to_owned());
    let three = Arc::new(
        Server::start(Settings::resolve(cli.common, &lookup).expect("settings resolve"))
            .await
            .expect("server starts"),
    );
    let one = Arc::new(Server::start(settings("gitea", &gitea.base_url())).await.expect("server starts"));
    for (typed, who) in [(false, "untyped"), (true, "typed")] {
        let (many, single) = (
            McpHandler::new(three.clone()).tools_list_bytes(typed),
            McpHandler::new(one.clone()).tools_list_bytes(typed),
        );
        println!(
            "  three forges (Gitea default, Forgejo, Gitea) {who:<7} {many:>7} B against one Gitea {single:>7} B = {:.3}×  (goal ≤ 1.05×: {})",
            many as f64 / single as f64,
            if many as f64 <= single as f64 * 1.05 { "met" } else { "NOT met" }
        );
    }
    gitea.shutdown();
    forgejo.shutdown();
    println!();
}

// ---------------------------------------------------------------------------------------
// 3. Per-call overhead against a direct reqwest call to the same URL.

struct Case {
    tool: &'static str,
    args: Map<String, Value>,
    /// Full URL our call sent (taken from the fake's recording), used for the direct call.
    url: String,
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

async fn direct(client: &reqwest::Client, url: &str) -> usize {
    let resp = client
        .get(url)
        .header("Authorization", format!("token {TOKEN}"))
        .send()
        .await
        .expect("direct request");
    assert!(resp.status().is_success(), "direct status {}", resp.status());
    resp.bytes().await.expect("direct body").len()
}

/// One call as the handler makes it, audit line included when `AUDIT_LOG` is set.
async fn ours(server: &Server, case: &Case) -> usize {
    // The path of every MCP tool call: the audit trail and the metrics around `call::run`.
    let origin = audit::Origin { transport: "stdio", client: None };
    let result =
        call::recorded(server, origin, case.tool, Some(case.args.clone()), |args, mut trace| async move {
            let result =
                call::run(server, Caller::Global, &Default::default(), case.tool, args, &mut trace).await;
            (result, trace)
        })
        .await;
    result.expect("tool call succeeds").as_str().len()
}

/// The audit key of the bench's audit log: a file in the temporary directory, made once.
static AUDIT_KEY_FILE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let path = std::env::temp_dir().join(format!("aegis-bench-audit-{}.key", std::process::id()));
    std::fs::write(&path, "5e".repeat(32)).expect("the temporary directory is writable");
    path.to_str().expect("a UTF-8 temp path").to_owned()
});

/// Every guardrail on and configured: repository allowlists (read and write), the three rate
/// and concurrency limits far above what the bench asks, an audit log, content hygiene
/// (`mark`, the default) and metrics (always counted).
/// `AEGIS_BENCH_GUARDRAILS` (comma-separated `repos`, `limits`, `audit`; default all three)
/// picks a part, to see what each one costs.
fn guardrails(audit_log: &str) -> Vec<String> {
    let parts = std::env::var("AEGIS_BENCH_GUARDRAILS").unwrap_or_else(|_| "repos,limits,audit".into());
    let mut flags = vec!["--content-hygiene", "mark"];
    for part in parts.split(',').map(str::trim) {
        let more: Vec<&str> = match part {
            "repos" => {
                vec!["--allowed-repos", "alice/*,team/tools,bob/demo", "--write-allowed-repos", "alice/demo"]
            }
            "limits" => vec![
                "--rate-limit-per-minute",
                "60000000",
                "--rate-limit-concurrent",
                "64",
                "--forge-max-concurrent",
                "64",
            ],
            "audit" => vec!["--audit-log", audit_log, "--audit-key-file", AUDIT_KEY_FILE.as_str()],
            "" => vec![],
            other => panic!("AEGIS_BENCH_GUARDRAILS: unknown part {other}"),
        };
        flags.extend(more);
    }
    flags.iter().map(|s| (*s).to_owned()).collect()
}

/// Sections 3a–3c with the default settings; with `guarded`, section 3a again with every
/// guardrail on (`guardrails`).
async fn per_call(guarded: bool) {
    let forge = FakeForge::start(Options { flavor: FFlavor::Gitea, ..Options::default() }).await;
    forge.seed_repo("alice", "demo");
    forge.seed_issues("alice", "demo", 50);
    let audit_log = std::env::temp_dir().join(format!("aegis-bench-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit_log);
    let flags = if guarded { guardrails(audit_log.to_str().expect("a UTF-8 temp path")) } else { Vec::new() };
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Arc::new(
        Server::start(settings_with("gitea", &forge.base_url(), &flags)).await.expect("server starts"),
    );
    let client = reqwest::Client::new();

    let mut cases = vec![
        Case { tool: "repoGet", args: obj(json!({"owner": "alice", "repo": "demo"})), url: String::new() },
        Case {
            tool: "issueListIssues",
            args: obj(json!({"owner": "alice", "repo": "demo", "limit": 20})),
            url: String::new(),
        },
    ];
    // Resolve the global login once (cached afterwards), then record what each call sends so
    // the direct request hits exactly the same path and query.
    for case in &mut cases {
        ours(&server, case).await;
        forge.clear_requests();
        ours(&server, case).await;
        let reqs = forge.requests();
        assert_eq!(reqs.len(), 1, "one forge request per warm call");
        let r = &reqs[0];
        case.url = match &r.raw_query {
            Some(q) => format!("{}{}?{}", forge.base_url(), r.raw_path, q),
            None => format!("{}{}", forge.base_url(), r.raw_path),
        };
    }
    forge.set_recording(false);
    forge.clear_requests();

    if guarded {
        println!(
            "== 3a+. The same with every guardrail on: allowlists, limits, audit log, content hygiene, metrics"
        );
    } else {
        println!(
            "== 3a. Per-call latency, sequential: {CALLS} calls each after {CALL_WARMUP} warm-ups, ours and direct interleaved"
        );
    }
    println!("       ours   = call::run (validate, plan, HTTP, decode, redact, envelope)");
    println!("       direct = one shared reqwest::Client, GET same URL + Authorization, read full body");
    for case in &cases {
        for _ in 0..CALL_WARMUP {
            direct(&client, &case.url).await;
            ours(&server, case).await;
        }
        let mut d = Vec::with_capacity(CALLS);
        let mut o = Vec::with_capacity(CALLS);
        let (mut body_len, mut text_len) = (0, 0);
        for _ in 0..CALLS {
            let t = Instant::now();
            body_len = direct(&client, &case.url).await;
            d.push(t.elapsed());
            let t = Instant::now();
            text_len = ours(&server, case).await;
            o.push(t.elapsed());
        }
        let (sd, so) = (stats(&d), stats(&o));
        println!("  {} -> GET {}", case.tool, case.url.trim_start_matches(&forge.base_url()));
        println!("    forge body {body_len} B, result text {text_len} B");
        println!(
            "    direct  min {:>7.1} us  median {:>7.1} us  p99 {:>7.1} us",
            us(sd.min),
            us(sd.median),
            us(sd.p99)
        );
        println!(
            "    ours    min {:>7.1} us  median {:>7.1} us  p99 {:>7.1} us",
            us(so.min),
            us(so.median),
            us(so.p99)
        );
        println!(
            "    overhead median {:>+7.1} us  p99 {:>+7.1} us   ratio ours/direct median {:.2}x  p99 {:.2}x",
            us(so.median) - us(sd.median),
            us(so.p99) - us(sd.p99),
            so.median.as_secs_f64() / sd.median.as_secs_f64(),
            so.p99.as_secs_f64() / sd.p99.as_secs_f64()
        );
    }
    println!();
    if guarded {
        let lines = std::fs::read_to_string(&audit_log).map_or(0, |t| t.lines().count());
        println!("  (the audit log got {lines} lines)");
        println!("== 3d. What the guardrails add to one call, in isolation ({CALLS} runs each, median us)");
        for case in &cases {
            guardrail_stages(&server, case).await;
        }
        println!();
        let _ = std::fs::remove_file(&audit_log);
        let _ = std::fs::remove_file(AUDIT_KEY_FILE.as_str());
        forge.shutdown();
        return;
    }

    println!(
        "== 3b. Throughput, concurrent: {TASKS} tasks, {CONCURRENT_CALLS} calls in total (after a warm-up round)"
    );
    let cases = Arc::new(cases);
    for i in 0..cases.len() {
        // Warm the connection pools to TASKS connections.
        run_concurrent(&server, &client, &cases, i, false, TASKS * 20).await;
        run_concurrent(&server, &client, &cases, i, true, TASKS * 20).await;
        let td = run_concurrent(&server, &client, &cases, i, false, CONCURRENT_CALLS).await;
        let to = run_concurrent(&server, &client, &cases, i, true, CONCURRENT_CALLS).await;
        let (rd, ro) =
            (CONCURRENT_CALLS as f64 / td.as_secs_f64(), CONCURRENT_CALLS as f64 / to.as_secs_f64());
        println!(
            "  {:<16} direct {:>8.0} calls/s ({:.2} s)   ours {:>8.0} calls/s ({:.2} s)   ours/direct {:.2}",
            cases[i].tool,
            rd,
            td.as_secs_f64(),
            ro,
            to.as_secs_f64(),
            ro / rd
        );
    }
    println!();

    println!("== 3c. CPU stages of one call, in isolation ({CALLS} runs each, median us; no I/O)");
    for case in cases.iter() {
        stage_breakdown(&server, &client, case).await;
    }
    forge.shutdown();
}

async fn run_concurrent(
    server: &Arc<Server>,
    client: &reqwest::Client,
    cases: &Arc<Vec<Case>>,
    which: usize,
    use_ours: bool,
    total: usize,
) -> Duration {
    let per_task = total / TASKS;
    let t = Instant::now();
    let mut handles = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let (server, client, cases) = (server.clone(), client.clone(), cases.clone());
        handles.push(tokio::spawn(async move {
            let case = &cases[which];
            for _ in 0..per_task {
                if use_ours {
                    ours(&server, case).await;
                } else {
                    direct(&client, &case.url).await;
                }
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    t.elapsed()
}

/// The parts a guarded call adds, each alone: the policy with the repository allowlists
/// (route judged), the recording (audit line written, metrics counted) around a call that
/// answers at once, and the content-hygiene prefilter over the call's result text.
async fn guardrail_stages(server: &Server, case: &Case) {
    let narrowing = Default::default();
    let samples = |f: &mut dyn FnMut()| {
        let mut v = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 50 {
            let t = Instant::now();
            f();
            if i >= 50 {
                v.push(t.elapsed());
            }
        }
        us(stats(&v).median)
    };
    let view = server.forges.primary().discovery(&narrowing);
    let prepared = match aegis_core::admission::admit(view, case.tool, case.args.clone()).outcome {
        Ok(aegis_core::admission::Admitted::Send(call, _)) => call,
        other => panic!("{} is not admitted: {other:?}", case.tool),
    };
    let policy = samples(&mut || {
        assert!(server.forges.primary().policy.judge(&narrowing, std::hint::black_box(&prepared)).is_none());
    });
    let admission = samples(&mut || {
        let admitted = aegis_core::admission::admit(view, case.tool, std::hint::black_box(case.args.clone()));
        assert!(admitted.outcome.is_ok());
    });
    let mut recording_times = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 50 {
        let origin = audit::Origin { transport: "stdio", client: None };
        let t = Instant::now();
        let r = call::recorded(server, origin, case.tool, Some(case.args.clone()), |_, trace| async move {
            let e = aegis_core::error::CallError::local(aegis_core::error::ErrorKind::Denied, "bench");
            (Err(server.guard.error(e)), trace)
        })
        .await;
        if i >= 50 {
            recording_times.push(t.elapsed());
        }
        assert!(r.is_err());
    }
    let recording = us(stats(&recording_times).median);
    // A write pays one line more: the one that says it is about to be sent.
    let mut write_times = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 50 {
        let origin = audit::Origin { transport: "stdio", client: None };
        let t = Instant::now();
        let r =
            call::recorded(server, origin, case.tool, Some(case.args.clone()), |_, mut trace| async move {
                if let Some(log) = &server.audit {
                    log.before_write(&server.guard, &mut trace).expect("the intent line is written");
                }
                let e = aegis_core::error::CallError::local(aegis_core::error::ErrorKind::Denied, "bench");
                (Err(server.guard.error(e)), trace)
            })
            .await;
        if i >= 50 {
            write_times.push(t.elapsed());
        }
        assert!(r.is_err());
    }
    let write_lines = us(stats(&write_times).median);
    let mut trace = audit::Trace::default();
    let text = call::run(server, Caller::Global, &narrowing, case.tool, Some(case.args.clone()), &mut trace)
        .await
        .expect("tool call succeeds")
        .as_str()
        .to_owned();
    let hygiene = samples(&mut || {
        std::hint::black_box(aegis_core::guard::hygiene::may_hold(std::hint::black_box(&text)));
    });
    println!(
        "  {:<16} policy with allowlists {policy:>5.1} (admission, validation included, {admission:>5.1})   audit line + metrics {recording:>5.1} (a write's two lines {write_lines:>5.1})   hygiene prefilter ({} B) {hygiene:>5.1}   sum {:>5.1}",
        case.tool,
        text.len(),
        policy + recording + hygiene
    );
}

/// Time the CPU-only stages of `call::run` separately on the real forge body, to see which
/// one dominates the overhead.
async fn stage_breakdown(server: &Server, client: &reqwest::Client, case: &Case) {
    let tool = server.forges.primary().catalog.get(case.tool).expect("tool exists");
    let Target::Operation(op) = &tool.target else { unreachable!("spec tools only") };
    let resp = client.get(&case.url).header("Authorization", format!("token {TOKEN}")).send().await.unwrap();
    let header = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let content_type = header("content-type");
    let total = header("x-total-count");
    let link = header("link");
    let bytes = resp.bytes().await.unwrap().to_vec();
    let max_binary = server.settings.max_binary_bytes;

    let time = |f: &mut dyn FnMut()| {
        for _ in 0..50 {
            f();
        }
        let mut v = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            f();
            v.push(t.elapsed());
        }
        us(stats(&v).median)
    };
    let mut args = case.args.clone();
    let validate = time(&mut || {
        arg_validate::validate(tool, std::hint::black_box(&mut args)).unwrap();
    });
    let plan = time(&mut || {
        std::hint::black_box(arg_plan::for_operation(op, &case.args, max_binary).unwrap());
    });
    let the_plan = arg_plan::for_operation(op, &case.args, max_binary).unwrap();
    let keep = Keep {
        items: server.settings.max_tool_response_items,
        values: server.settings.max_tool_response_chars,
    };
    let decode = time(&mut || {
        std::hint::black_box(
            body::decode(the_plan.expect(), content_type.as_deref(), bytes.clone(), keep).0.into_data(),
        );
    });
    let data = body::decode(the_plan.expect(), content_type.as_deref(), bytes.clone(), keep).0.into_data();
    // Split of the decode stage: depth pre-scan, serde_json parse (kept alive), drop.
    let depth_scan = time(&mut || {
        std::hint::black_box(body::too_deep(std::hint::black_box(&bytes), body::MAX_JSON_DEPTH));
    });
    let mut kept: Vec<Value> = Vec::with_capacity(CALLS + 50);
    let parse_only = time(&mut || {
        kept.push(serde_json::from_slice::<Value>(std::hint::black_box(&bytes)).unwrap());
    });
    let drop_only = {
        let mut v = Vec::with_capacity(CALLS);
        for value in kept.drain(..).take(CALLS) {
            let t = Instant::now();
            drop(std::hint::black_box(value));
            v.push(t.elapsed());
        }
        us(stats(&v).median)
    };
    let paginate = time(&mut || {
        std::hint::black_box(
            the_plan.page().map(|r| pagination::paginate(r, total.as_deref(), link.as_deref(), &data)),
        );
    });
    let redactor = server.guard.redactor().clone();
    let mut scratch = data.clone();
    let redact = time(&mut || {
        redactor.redact_value(std::hint::black_box(&mut scratch));
    });
    let success = Success {
        identity: Identity { login: Some("alice".into()), mode: Mode::Token, sudo: None },
        forge: None,
        request: RequestInfo { method: the_plan.method().as_str(), path: the_plan.path().to_owned() },
        status: 200,
        pagination: the_plan
            .page()
            .map(|r| pagination::paginate(r, total.as_deref(), link.as_deref(), &data)),
        untrusted_content: envelope::untrusted_notice(server.forges.primary().catalog.flavor),
        shape: None,
        data: data.clone(),
        link: None,
        truncated: None,
        hidden_content: None,
        filtered: None,
        withheld: None,
    };
    let serialize = time(&mut || {
        std::hint::black_box(success.to_text());
    });
    let copy_body = time(&mut || {
        std::hint::black_box(bytes.clone());
    });
    let sum = validate + plan + decode + paginate + redact + serialize;
    println!(
        "  {:<16} validate {:>6.1}  plan {:>5.1}  decode(JSON parse) {:>6.1}  paginate {:>4.1}  redact {:>6.1}  envelope(serialize) {:>6.1}  = {:>6.1} us   (body {} B; body copy alone {:.1} us)",
        case.tool,
        validate,
        plan,
        decode,
        paginate,
        redact,
        serialize,
        sum,
        bytes.len(),
        copy_body
    );
    println!(
        "  {:<16} decode split: depth pre-scan {:.1} us, serde_json::from_slice::<Value> {:.1} us ({:.0} MB/s), dropping the Value {:.1} us",
        "",
        depth_scan,
        parse_only,
        bytes.len() as f64 / parse_only,
        drop_only
    );
}
