//! Rate and concurrency limits (README, "Limits"): a call over a limit of its identity, or
//! over the forge's overall limit, is refused as `rate_limited` with a `retry_after_seconds`
//! before anything is sent for it — shown at the fake forge — and one identity at its limit
//! leaves every other one alone. The forge's own 429 and `Retry-After` come through the same.

use std::time::Duration;

use fake_forge::{Gate, Script, ScriptedResponse};
use rmcp::model::ReadResourceRequestParams;
use serde_json::{Value, json};

use super::support::http::{McpClient, stateless_call, tool_result};
use super::support::{Called, Harness, Setup};
use super::{BOB_TOKEN, CAROL_TOKEN, forge, token, tool_requests};

fn repo() -> Value {
    json!({"owner": "alice", "repo": "demo"})
}

/// A `rate_limited` refusal of this server (the forge was not asked: status `null`), naming
/// `setting`; its `retry_after_seconds`.
fn assert_refused_by(c: &Called, setting: &str) -> u64 {
    assert!(c.is_error, "expected a refusal, got {}", c.text);
    let e = &c.json["error"];
    assert_eq!(e["kind"], "rate_limited", "{}", c.text);
    assert_eq!(e["status"], Value::Null, "{}", c.text);
    let wait =
        e["retry_after_seconds"].as_u64().unwrap_or_else(|| panic!("no retry_after_seconds: {}", c.text));
    assert!(wait >= 1, "{}", c.text);
    let message = e["message"].as_str().unwrap();
    assert!(message.contains(setting), "{message}");
    assert!(message.contains(&format!("retry after {wait} s")), "{message}");
    wait
}

/// Waits until the forge has received `n` requests for `alice/demo` (a slow answer is on its way).
async fn until_forge_has(h: &Harness, n: usize) {
    let what = format!("the forge received {n} requests");
    super::support::wait_for(&what, super::support::WAIT_LIMIT, async || h.tool_requests().len() >= n).await
}

#[tokio::test]
async fn over_the_rate_limit_a_call_is_refused_before_anything_is_sent_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let h = Harness::start(Setup::gitea().env("RATE_LIMIT_PER_MINUTE", "3").audit(&audit)).await;
    h.forge.seed_repo("alice", "demo");
    h.forge.seed_issues("alice", "demo", 1);
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let c = h.call("repoGet", repo()).await;
        assert!(!c.is_error, "{}", c.text);
    }
    h.forge.clear_requests();
    // 3 a minute: the bucket refills one call every 20 s, counted from the first call.
    let c = h.call("repoGet", repo()).await;
    let wait = assert_refused_by(&c, "RATE_LIMIT_PER_MINUTE");
    let since = started.elapsed().as_secs();
    assert!(
        (20u64.saturating_sub(since + 1)..=20).contains(&wait),
        "{} s after the first: {}",
        since,
        c.text
    );
    // Every path that reaches the forge counts: the call tool, the raw tool, a resource read.
    let c = h.call("gitea_call_operation", json!({"operation_id": "repoGet", "arguments": repo()})).await;
    assert_refused_by(&c, "RATE_LIMIT_PER_MINUTE");
    let c = h.call("gitea_api_request", json!({"method": "GET", "path": "/repos/alice/demo"})).await;
    assert_refused_by(&c, "RATE_LIMIT_PER_MINUTE");
    let read =
        h.client.read_resource(ReadResourceRequestParams::new("gitea://repos/alice/demo/issues/1")).await;
    match read {
        Err(rmcp::ServiceError::McpError(d)) => {
            let data = d.data.unwrap_or_default();
            assert_eq!(data["kind"], "rate_limited", "{data}");
            assert!(data["retry_after_seconds"].as_u64().is_some_and(|s| s >= 1), "{data}");
            assert!(d.message.contains("RATE_LIMIT_PER_MINUTE"), "{}", d.message);
        }
        other => panic!("a resource read over the limit must be refused: {other:?}"),
    }
    assert!(h.forge.requests().is_empty(), "refused calls reached the forge: {:?}", h.forge.requests());
    // The discovery tools never reach the forge and do not count.
    let c = h.call("gitea_search_operations", json!({"query": "get a repository"})).await;
    assert!(!c.is_error, "{}", c.text);
    // Each refusal has its audit line, with the identity and nothing sent.
    let lines: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let refused: Vec<&Value> = lines.iter().filter(|l| l["outcome"] == "rate_limited").collect();
    assert_eq!(refused.len(), 4, "{lines:#?}");
    for l in refused {
        assert_eq!(l["identity"]["login"], "alice", "{l}");
        assert_eq!(l["method"], Value::Null, "{l}");
        assert_eq!(l["status"], Value::Null, "{l}");
    }
    h.stop().await;
}

/// With `setting` at 1, a second call while a first one runs (its answer held by the forge
/// until then) is refused naming it, with a retry after 1 s and nothing sent; once the first
/// has returned, calls go through again.
async fn second_call_refused_while_a_slow_one_runs(setting: &str) {
    let h = Harness::start(Setup::gitea().env(setting, "1")).await;
    h.forge.seed_repo("alice", "demo");
    let held = Gate::new();
    h.forge.script(Script::once(
        Some("GET"),
        "/api/v1/repos/alice/demo",
        ScriptedResponse::json(200, &json!({"name": "demo"})).held_until(&held),
    ));
    let slow = h.call("repoGet", repo());
    let second = async {
        until_forge_has(&h, 1).await;
        let second = h.call("repoGet", repo()).await;
        held.open();
        second
    };
    let both = tokio::time::timeout(super::support::WAIT_LIMIT, async { tokio::join!(slow, second) });
    let (slow, second) = both.await.expect("the second call was answered while the first was held");
    assert!(!slow.is_error, "{}", slow.text);
    assert_eq!(assert_refused_by(&second, setting), 1);
    assert_eq!(h.tool_requests().len(), 1, "the refused call was not sent");
    // The first call has returned: its place is free again.
    let c = h.call("repoGet", repo()).await;
    assert!(!c.is_error, "{}", c.text);
    h.stop().await;
}

#[tokio::test]
async fn a_call_over_the_concurrency_limit_is_refused_while_the_first_still_runs() {
    second_call_refused_while_a_slow_one_runs("RATE_LIMIT_CONCURRENT").await;
}

/// The forge's overall limit waits a little for a slot (200 ms), then refuses.
#[tokio::test]
async fn with_every_forge_slot_taken_a_call_is_refused_after_a_short_wait() {
    second_call_refused_while_a_slow_one_runs("FORGE_MAX_CONCURRENT").await;
}

#[tokio::test]
async fn the_forges_429_passes_its_retry_after_on() {
    let h = Harness::start(Setup::gitea()).await;
    h.forge.seed_repo("alice", "demo");
    for (header, want) in [("42", 42..=42), ("Fri, 31 Dec 9999 23:59:59 GMT", 86_400..=86_400)] {
        h.forge.script(Script::once(
            Some("GET"),
            "/api/v1/repos/alice/demo",
            ScriptedResponse::json(429, &json!({"message": "rate limit exceeded"}))
                .with_header("Retry-After", header),
        ));
        let c = h.call("repoGet", repo()).await;
        assert!(c.is_error, "{}", c.text);
        let e = &c.json["error"];
        assert_eq!(
            (e["kind"].as_str(), e["status"].as_u64()),
            (Some("rate_limited"), Some(429)),
            "{}",
            c.text
        );
        let wait = e["retry_after_seconds"].as_u64().unwrap_or_else(|| panic!("{}", c.text));
        assert!(want.contains(&wait), "{header}: {}", c.text);
        assert!(c.text.contains(&format!("wait {wait} s")), "{}", c.text);
    }
    // Without the header: the kind, no guessed wait.
    h.forge.script(Script::once(Some("GET"), "/api/v1/repos/alice/demo", ScriptedResponse::status(429)));
    let c = h.call("repoGet", repo()).await;
    assert_eq!(c.kind(), "rate_limited", "{}", c.text);
    assert!(c.json["error"].get("retry_after_seconds").is_none(), "{}", c.text);
    h.stop().await;
}

on_both_transports!(one_identity_at_its_limit_does_not_stop_another);

/// `RATE_LIMIT_PER_MINUTE=3`: bob uses his three and is refused, without a request reaching the
/// forge; carol (her own token) and the server's own identity (no header) still get theirs.
async fn one_identity_at_its_limit_does_not_stop_another(t: &str) {
    let (forge, server) = forge().serve_http(t, &[("RATE_LIMIT_PER_MINUTE", "3")]).await;
    let (bob, carol) = (token(BOB_TOKEN), token(CAROL_TOKEN));
    let bob_client = server.connect(Some(&bob)).await.unwrap();
    let carol_client = server.connect(Some(&carol)).await.unwrap();
    let global_client = server.connect(None).await.unwrap();
    for _ in 0..3 {
        let c = bob_client.call_ok("repoGet", repo(), Some(&bob)).await;
        assert!(!c.is_error, "{}", c.text);
    }
    forge.clear_requests();
    for _ in 0..3 {
        let c = bob_client.call_ok("repoGet", repo(), Some(&bob)).await;
        assert_refused_by(&c, "RATE_LIMIT_PER_MINUTE");
    }
    assert!(tool_requests(&forge.requests()).is_empty(), "bob's refused calls reached the forge");
    for (client, auth, login) in
        [(&carol_client, Some(carol.as_str()), "carol"), (&global_client, None, "alice")]
    {
        for _ in 0..3 {
            let c = client.call_ok("repoGet", repo(), auth).await;
            assert!(!c.is_error, "{login}: {}", c.text);
            assert_eq!(c.json["identity"]["login"], login);
        }
    }
    // Another token of bob's login would share his limit: it is the login that counts.
    let c = bob_client.call_ok("repoGet", repo(), Some(&bob)).await;
    assert_refused_by(&c, "RATE_LIMIT_PER_MINUTE");
}

/// A bounded load: bob hammers (8 tasks at once, far above his 20 calls a minute and 4 at
/// once) while carol makes her calls one after another. Bob is refused, and only with
/// `rate_limited`; carol gets only successes. (Her latency with and without such a neighbour
/// is measured by `cargo bench --bench pipeline -- limits`, not asserted here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hammering_identity_is_refused_while_another_gets_every_call() {
    let env = [("RATE_LIMIT_PER_MINUTE", "20"), ("RATE_LIMIT_CONCURRENT", "4"), ("LOG_LEVEL", "warn")];
    let (forge, server) = forge().serve_http("http", &env).await;
    let (bob, carol) = (token(BOB_TOKEN), token(CAROL_TOKEN));
    let bob_client = std::sync::Arc::new(McpClient::connect(&server, Some(&bob)).await.unwrap());
    let carol_client = McpClient::connect(&server, Some(&carol)).await.unwrap();
    let hammer: Vec<_> = (0..8)
        .map(|_| {
            let (c, bob) = (bob_client.clone(), bob.clone());
            tokio::spawn(async move {
                let mut kinds = Vec::new();
                for _ in 0..25 {
                    let r = c.call_ok("repoGet", repo(), Some(&bob)).await;
                    kinds.push(if r.is_error { r.kind().to_owned() } else { "ok".to_owned() });
                }
                kinds
            })
        })
        .collect();
    let mut carols = Vec::new();
    for _ in 0..15 {
        carols.push(carol_client.call_ok("repoGet", repo(), Some(&carol)).await);
    }
    let mut bobs = Vec::new();
    for h in hammer {
        bobs.extend(h.await.unwrap());
    }
    for c in &carols {
        assert!(!c.is_error, "carol must not feel bob's limit: {}", c.text);
        assert_eq!(c.json["identity"]["login"], "carol");
    }
    let ok = bobs.iter().filter(|k| *k == "ok").count();
    let refused = bobs.iter().filter(|k| *k == "rate_limited").count();
    assert_eq!(ok + refused, bobs.len(), "bob gets successes or rate_limited, nothing else: {bobs:?}");
    // At most 20 at once plus one every 3 s while the test runs (how many of the 20 he gets
    // depends on how fast his tasks spin against his limit of 4 at once).
    assert!((1..=40).contains(&ok), "{ok} of bob's 200 calls went through");
    assert!(refused >= 160, "{refused}");
    let sent_for_bob = forge
        .requests()
        .iter()
        .filter(|r| r.raw_path == "/api/v1/repos/alice/demo")
        .filter(|r| r.header("authorization") == Some(bob.as_str()))
        .count();
    assert_eq!(sent_for_bob, ok, "only bob's admitted calls reached the forge");
}

/// Tokens nobody has established cannot take what established identities need: while 48
/// clients flood the server with new garbage tokens, each of which the forge is slow to refuse,
/// the operator's calls (`MCP_BEARER_TOKEN`) and an established caller's all go through under
/// `FORGE_MAX_CONCURRENT=4`, and the forge is asked about only a bounded number of the
/// garbage tokens (the address's budget of new tokens); a refused token asked again is
/// answered without asking the forge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tokens_in_numbers_never_take_what_established_identities_need() {
    let env = [
        ("MCP_BEARER_TOKEN", super::SHARED_SECRET),
        ("FORGE_MAX_CONCURRENT", "4"),
        ("RATE_LIMIT_CONCURRENT", "1"),
    ];
    let (forge, server) = forge().serve_http("http", &env).await;
    let http = super::support::http::http_client();
    let operator = format!("Bearer {}", super::SHARED_SECRET);
    let bob = token(BOB_TOKEN);
    for auth in [&operator, &bob] {
        let r = stateless_call(&http, &server.base, "repoGet", repo(), Some(auth)).await.unwrap();
        assert!(!tool_result(&r).is_error, "{r}");
    }
    // From now on the forge takes 300 ms to refuse a token (bob's login is cached).
    forge.script(Script::always(
        Some("GET"),
        "/api/v1/user",
        ScriptedResponse::json(401, &json!({"message": "user does not exist [uid: 0, name: ]"}))
            .with_delay(Duration::from_millis(300)),
    ));
    // A token the forge refused is refused again at once, without asking it.
    let once = "token refused-once";
    let first = stateless_call(&http, &server.base, "repoGet", repo(), Some(once)).await.unwrap();
    assert_eq!(tool_result(&first).kind(), "unauthorized", "{first}");
    forge.clear_requests();
    let again = stateless_call(&http, &server.base, "repoGet", repo(), Some(once)).await.unwrap();
    assert_eq!(tool_result(&again).kind(), "unauthorized", "a refused token is refused again: {again}");
    assert!(forge.requests().is_empty(), "the forge was asked again: {:?}", forge.requests());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut flood = Vec::new();
    for n in 0..48 {
        let (http, base, stop) = (http.clone(), server.base.clone(), stop.clone());
        flood.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let junk = format!("token junk-{n}-{i}");
                let _ = stateless_call(&http, &base, "repoGet", repo(), Some(&junk)).await;
                i += 1;
            }
        }));
    }
    let junk_asked = || {
        forge.requests().iter().any(|r| {
            r.raw_path == "/api/v1/user" && r.header("authorization").is_some_and(|a| a.contains("junk-"))
        })
    };
    super::support::wait_for("the flood reached the forge", super::support::WAIT_LIMIT, async || {
        junk_asked()
    })
    .await;
    let mut ok = 0;
    for _ in 0..10 {
        for auth in [&operator, &bob] {
            let r = stateless_call(&http, &server.base, "repoGet", repo(), Some(auth)).await.unwrap();
            let c = tool_result(&r);
            assert!(!c.is_error, "{}", c.text);
            ok += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in flood {
        f.await.unwrap();
    }
    assert_eq!(ok, 20);
    let asked: Vec<_> = forge
        .requests()
        .into_iter()
        .filter(|r| {
            r.raw_path == "/api/v1/user" && r.header("authorization").is_some_and(|a| a.contains("junk-"))
        })
        .collect();
    assert!(
        !asked.is_empty() && asked.len() <= 64,
        "the forge was asked about {} new tokens from one address (budget 60 a minute)",
        asked.len()
    );
}
