//! The figures of docs/RELIABILITY.md: the server (release binary, a child process) under the
//! attacks it must hold against, measured from outside — its CPU time and resident memory
//! from `/proc`, latencies as a client sees them.
//!
//! Run with `cargo bench --bench attack`. Plain `fn main`; the fake forge runs in this
//! process. Everything is on loopback; the attacking connections come from 127.0.0.2 and up
//! (one machine, many peers).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Options, Script, ScriptBody, ScriptedResponse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};

const TOKEN: &str = "tok-alice-0123456789";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    println!(
        "aegis-gitea-mcp attack bench ({} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // `cargo bench --bench attack -- streams` runs only the sections whose name holds a word.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let run = |name: &str| only.is_empty() || only.iter().any(|w| name.contains(w.as_str()));
    rt.block_on(async {
        if run("tokens") {
            tokens().await;
        }
        if run("json") {
            json_memory().await;
        }
        if run("streams") {
            unread_streams(60, 70).await;
            unread_streams(1000, 20).await;
        }
        if run("healthz") {
            healthz_under_attack(2000).await;
        }
    });
}

/// The server binary on `--transport http|sse`, killed on drop.
struct Served {
    child: tokio::process::Child,
    addr: SocketAddr,
}

impl Served {
    async fn start(forge: &FakeForge, transport: &str, env: &[(&str, &str)]) -> Served {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aegis-gitea-mcp"))
            .args(["serve", "--transport", transport, "--listen", "127.0.0.1:0", "--flavor", "gitea"])
            .args(["--url", &forge.base_url()])
            .env_clear()
            .env("GITEA_TOKEN", TOKEN)
            .env("LOG_LEVEL", "error")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next_line().await.unwrap().expect("a `listening on` line");
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest.split('/').next().unwrap().parse().unwrap();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Served { child, addr }
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// CPU time the process has used (user + system).
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<u64> =
        stat[stat.rfind(')').unwrap() + 2..].split(' ').map(|x| x.parse().unwrap_or(0)).collect();
    Duration::from_millis((f[11] + f[12]) * 10)
}

/// Resident memory now and at its peak, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().pool_max_idle_per_host(64).build().unwrap()
}

async fn stateless_call(http: &reqwest::Client, url: &str, auth: &str) -> u16 {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}, "_meta": meta}});
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "repoGet")
        .header("authorization", auth)
        .body(body.to_string())
        .send()
        .await;
    match r {
        Ok(r) => {
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            status
        }
        Err(_) => 0,
    }
}

/// Attack 1: server CPU per request for a token of one repeated character (the worst case for the
/// redaction automata), refused by the forge, at each size.
async fn tokens() {
    println!("\n## 1. CPU per request, refused tokens of one repeated character (50 requests each)");
    let forge = FakeForge::start(Options::default()).await;
    forge.seed_repo("alice", "demo");
    let s = Served::start(&forge, "http", &[]).await;
    let http = client();
    let url = s.url("/mcp");
    for size in [40usize, 1024, 8192, 65_536, 1 << 20] {
        let n = 50;
        let before = cpu(s.pid());
        let started = Instant::now();
        let mut statuses = std::collections::BTreeMap::new();
        for i in 0..n {
            let token = format!("{}{:02}", "A".repeat(size.saturating_sub(2)), i);
            *statuses.entry(stateless_call(&http, &url, &format!("token {token}")).await).or_insert(0) += 1;
        }
        let took = started.elapsed();
        let used = cpu(s.pid()) - before;
        println!(
            "  token {:>8} B: server CPU {:>7.2} ms/request, wall {:>7.2} ms/request, answers {statuses:?}",
            size,
            used.as_secs_f64() * 1e3 / n as f64,
            took.as_secs_f64() * 1e3 / n as f64
        );
    }
}

/// Attack 2: peak memory of one call per MB of forge JSON, over stdio, for three shapes.
async fn json_memory() {
    println!("\n## 2. Peak memory per MB of forge JSON (one call over stdio)");
    for (shape, mib) in
        [("numbers", 1usize), ("numbers", 4), ("numbers", 14), ("objects", 14), ("nested lists", 14)]
    {
        let body = match shape {
            "numbers" => {
                let n = mib << 19;
                let mut b = String::with_capacity(2 * n + 2);
                b.push('[');
                for i in 0..n {
                    b.push_str(if i + 1 < n { "1," } else { "1" });
                }
                b.push(']');
                b
            }
            "objects" => {
                let n = (mib << 20) / 14;
                let members: Vec<String> = (0..n).map(|i| format!("\"k{i:07}\":0")).collect();
                format!("{{{}}}", members.join(","))
            }
            _ => {
                let n = (mib << 20) / 32;
                format!("[{}]", vec!["[[],[],[],[],[],[],[],[],[],[]]"; n].join(","))
            }
        };
        let size = body.len() as f64 / (1 << 20) as f64;
        let forge = FakeForge::start(Options::default()).await;
        forge.script(Script::always(
            None,
            "/api/v1/repos/o/r/issues",
            ScriptedResponse::status(200)
                .with_header("content-type", "application/json")
                .with_body(ScriptBody::Bytes(body.into_bytes())),
        ));
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_aegis-gitea-mcp"))
            .args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
            .env_clear()
            .env("GITEA_TOKEN", TOKEN)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
        stdin.write_all(format!("{init}\n").as_bytes()).await.unwrap();
        out.next_line().await.unwrap();
        stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.unwrap();
        let pid = child.id().unwrap();
        let (_, before) = memory(pid);
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "issueListIssues", "arguments": {"owner": "o", "repo": "r"}}});
        stdin.write_all(format!("{call}\n").as_bytes()).await.unwrap();
        let answer = out.next_line().await.unwrap().unwrap();
        let (_, peak) = memory(pid);
        println!(
            "  {shape:<13} {size:>5.1} MiB body: peak +{:>6.1} MiB = {:>4.2} × the body (answer {} B, before {:.1} MiB)",
            peak - before,
            (peak - before) / size,
            answer.len(),
            before
        );
    }
}

/// A legacy SSE stream opened on a raw socket and never read after its `endpoint` event.
async fn unread_stream(addr: SocketAddr) -> Option<(TcpStream, String)> {
    let mut c = TcpStream::connect(addr).await.ok()?;
    c.write_all(format!("GET /sse HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&seen);
        if let Some(at) = text.find("/message?sessionId=") {
            if let Some(end) = text[at..].find(['\r', '\n']) {
                return Some((c, text[at..at + end].to_owned()));
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> u16 {
    let r = http.post(url).header("content-type", "application/json").body(body.to_string()).send().await;
    match r {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

/// Attack 3: memory with `streams` legacy SSE streams that are never read, each sent `answers`
/// results of about 90 KB.
async fn unread_streams(streams: usize, answers: usize) {
    println!("\n## 3. {streams} unread SSE streams, {answers} answers of ~90 KB posted to each");
    let forge = FakeForge::start(Options::default()).await;
    forge.set_recording(false);
    let issues: Vec<Value> =
        (0..300).map(|i| json!({"id": i, "title": format!("issue {i}"), "body": "b".repeat(260)})).collect();
    forge.script(Script::always(
        None,
        "/api/v1/repos/o/r",
        ScriptedResponse::json(200, &json!({"items": issues})),
    ));
    let max = (streams + 10).to_string();
    let env = [
        ("MCP_MAX_SSE_STREAMS", max.as_str()),
        ("MCP_MAX_SESSIONS_PER_IDENTITY", max.as_str()),
        ("MCP_MAX_CONNECTIONS", "4096"),
        ("MCP_MAX_CONNECTIONS_PER_PEER", "4096"),
        ("MCP_REQUEST_TIMEOUT", "10"),
        ("MCP_STREAM_STALL_TIMEOUT", "15"),
        ("MAX_TOOL_RESPONSE_ITEMS", "300"),
    ];
    let s = Served::start(&forge, "sse", &env).await;
    let (rss0, _) = memory(s.pid());
    let http = client();
    let mut held = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..streams {
        if let Some((socket, path)) = unread_stream(s.addr).await {
            held.push(socket);
            urls.push(s.url(&path));
        }
    }
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "unread", "version": "0"}}});
    for url in &urls {
        post(&http, url, &init).await;
        post(&http, url, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    }
    let (rss_open, _) = memory(s.pid());
    let started = Instant::now();
    // 64 posts at a time: what the streams buffer, not what calls in progress hold, dominates.
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::new();
    for url in &urls {
        for id in 1..=answers {
            let (http, url, sem) = (http.clone(), url.clone(), semaphore.clone());
            tasks.push(tokio::spawn(async move {
                let _p = sem.acquire().await.unwrap();
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "repoGet", "arguments": {"owner": "o", "repo": "r"}}});
                post(&http, &url, &call).await
            }));
        }
    }
    let mut statuses = std::collections::BTreeMap::new();
    for t in tasks {
        *statuses.entry(t.await.unwrap()).or_insert(0usize) += 1;
    }
    let (rss_after, peak) = memory(s.pid());
    println!(
        "  {} streams open: RSS {rss0:.1} → {rss_open:.1} MiB; after posting ({:.1} s; answers {statuses:?}): RSS {rss_after:.1} MiB, peak {peak:.1} MiB = {:.0} KiB per stream over the idle server",
        urls.len(),
        started.elapsed().as_secs_f64(),
        (peak - rss0) * 1024.0 / urls.len().max(1) as f64
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (rss_end, _) = memory(s.pid());
    let ping = json!({"jsonrpc": "2.0", "id": 999, "method": "ping"});
    let alive = urls.iter().take(20).map(|u| post(&http, u, &ping));
    let alive: Vec<u16> = futures::future::join_all(alive).await;
    println!(
        "  after the stall timeout (15 s): RSS {rss_end:.1} MiB; a post to the first 20 sessions answers {:?}",
        alive.iter().fold(std::collections::BTreeMap::new(), |mut m, s| {
            *m.entry(*s).or_insert(0) += 1;
            m
        })
    );
    drop(held);
}

async fn connect_from(addr: SocketAddr, from: Ipv4Addr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((from, 0))).ok()?;
    socket.connect(addr).await.ok()
}

async fn healthz_latencies(addr: SocketAddr, n: usize) -> (Vec<Duration>, usize) {
    let mut times = Vec::new();
    let mut failed = 0;
    for _ in 0..n {
        let started = Instant::now();
        let ok = async {
            let mut c = connect_from(addr, Ipv4Addr::LOCALHOST).await?;
            c.write_all(
                format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .ok()?;
            let mut buf = Vec::new();
            c.read_to_end(&mut buf).await.ok()?;
            buf.starts_with(b"HTTP/1.1 200").then_some(())
        };
        match tokio::time::timeout(Duration::from_secs(10), ok).await {
            Ok(Some(())) => times.push(started.elapsed()),
            _ => failed += 1,
        }
    }
    times.sort_unstable();
    (times, failed)
}

fn summary(times: &[Duration]) -> String {
    if times.is_empty() {
        return "no answer".into();
    }
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)].as_secs_f64() * 1e3;
    format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", at(0.5), at(0.99), at(1.0))
}

/// Attack 4: `/healthz` while `hostile` connections hold partial headers or endless bodies, under a
/// 1,024-descriptor limit (default settings otherwise).
async fn healthz_under_attack(hostile: usize) {
    println!(
        "\n## 4. /healthz latency (200 fresh connections) with {hostile} hostile connections held, ulimit -n 1024"
    );
    let forge = FakeForge::start(Options::default()).await;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.args(["-c", "ulimit -n 1024 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_aegis-gitea-mcp"))
        .args([
            "serve",
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--flavor",
            "gitea",
            "--url",
            &forge.base_url(),
        ])
        .env_clear()
        .env("GITEA_TOKEN", TOKEN)
        .env("LOG_LEVEL", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr: SocketAddr = loop {
        let line = lines.next_line().await.unwrap().unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let (quiet, failed) = healthz_latencies(addr, 200).await;
    println!("  quiet:        {} ({failed} failed)", summary(&quiet));
    let slow_heads = hostile * 9 / 10;
    let mut held = Vec::new();
    for i in 0..hostile {
        let (from, slow) = if i < slow_heads {
            (Ipv4Addr::new(127, 0, 0, 2 + (i % 8) as u8), true)
        } else {
            (Ipv4Addr::new(127, 0, 0, 20 + (i % 4) as u8), false)
        };
        let Some(mut c) = connect_from(addr, from).await else { continue };
        let head = if slow {
            format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ")
        } else {
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\":\r\n"
            )
        };
        if c.write_all(head.as_bytes()).await.is_ok() {
            held.push(c);
        }
    }
    let (attacked, failed) = healthz_latencies(addr, 200).await;
    let (rss, peak) = memory(child.id().unwrap());
    println!(
        "  under attack: {} ({failed} failed); {} hostile connections opened; server RSS {rss:.1} MiB, peak {peak:.1} MiB",
        summary(&attacked),
        held.len()
    );
    drop(held);
}
