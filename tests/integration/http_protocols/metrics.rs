//! `/metrics`: after a known set of calls, a scrape read by the Prometheus project's own
//! Python parser (`tests/python/scrape_metrics.py`) counts exactly those calls, forge answers,
//! guard actions, identity lookups and open sessions, and no label carries a login, a token
//! or an argument. `METRICS_LISTEN` moves the endpoint to an address of its own (the only
//! way to get metrics over stdio), or turns it off.

use std::time::Duration;

use fake_forge::{Script, ScriptedResponse};
use serde_json::{Value, json};

use super::support::http::{HttpServer, McpClient, SseClient, free_port, http_client, tool_result};
use super::support::{ALICE_TOKEN, Forge, Harness, Setup, python, repo_root, run_with_timeout};

/// A value the server redacts (`EXTRA_SECRETS`), answered by the forge.
const SECRET: &str = "xsecret-metrics-7Yq2Lp";
/// A token the forge does not know.
const UNKNOWN_TOKEN: &str = "tok-nobody-5Jd8Qw3e";

/// The scrape of `url` as the Python parser read it: `{"status", "content_type", "families"}`.
async fn scrape(url: &str) -> Value {
    let script = repo_root().join("tests/python/scrape_metrics.py");
    let mut cmd = std::process::Command::new(python());
    cmd.arg(&script).arg(url);
    let run = run_with_timeout(&mut cmd, Duration::from_secs(60)).await;
    let context = format!("--- stdout ---\n{}\n--- stderr ---\n{}", run.stdout, run.stderr);
    assert!(run.status.is_some_and(|s| s.success()), "the scrape failed\n{context}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e})\n{context}"))
}

/// The value of the sample `sample` of family `family` whose labels are exactly `labels`.
fn value(doc: &Value, family: &str, sample: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    doc["families"][family]["samples"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == sample && s["labels"].as_object() == Some(&want))
        .and_then(|s| s["value"].as_f64())
}

/// Every sample of family `family` named `sample`, as (labels, value).
fn samples(doc: &Value, family: &str, sample: &str) -> Vec<(Value, f64)> {
    doc["families"][family]["samples"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|s| s["name"] == sample)
                .map(|s| (s["labels"].clone(), s["value"].as_f64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_counts_exactly_the_calls_made() {
    let forge = Forge::gitea().repo("alice", "demo").start().await;
    forge.script(Script::always(
        Some("GET"),
        "/api/v1/repos/o/leaky",
        ScriptedResponse::json(200, &json!({"name": "leaky", "description": format!("see {SECRET}")})),
    ));
    let issues: Vec<Value> = (1..=150).map(|i| json!({"number": i, "title": format!("issue {i}")})).collect();
    forge.script(Script::always(
        Some("GET"),
        "/api/v1/repos/o/r/issues*",
        ScriptedResponse::json(200, &json!(issues)),
    ));
    forge.script(Script::always(Some("GET"), "/api/v1/repos/o/busy", ScriptedResponse::status(429)));
    // No global token: every call runs as the token of its request (the identity cache).
    let server = HttpServer::in_process(
        &forge.base_url(),
        "http",
        &[("DISABLED_TOOLS", "repoDelete"), ("EXTRA_SECRETS", SECRET)],
    )
    .await;
    let alice = format!("token {ALICE_TOKEN}");
    let auth = Some(alice.as_str());
    // One session (its opening asks the forge who alice is: a miss), then every call that
    // passes admission a hit (a call with wrong arguments or a disabled tool asks nobody).
    let client = McpClient::connect(&server, auth).await.unwrap();
    let demo = json!({"owner": "alice", "repo": "demo"});
    for _ in 0..3 {
        assert!(!client.call_ok("repoGet", demo.clone(), auth).await.is_error);
    }
    for _ in 0..2 {
        let c = client.call_ok("repoGet", json!({"owner": "alice", "repo": "missing"}), auth).await;
        assert_eq!(c.kind(), "not_found", "{}", c.text);
    }
    let c = client.call_ok("repoGet", json!({"owner": "alice"}), auth).await;
    assert_eq!(c.kind(), "invalid_arguments", "{}", c.text);
    let c = client.call_ok("repoDelete", demo.clone(), auth).await;
    assert_eq!(c.kind(), "denied", "{}", c.text);
    let c = client.call_ok("repoGet", json!({"owner": "o", "repo": "leaky"}), auth).await;
    assert!(!c.is_error && c.text.contains("[REDACTED]") && !c.text.contains(SECRET), "{}", c.text);
    let c = client.call_ok("issueListIssues", json!({"owner": "o", "repo": "r"}), auth).await;
    assert!(!c.is_error && c.json.get("truncated").is_some(), "{}", c.text);
    let c = client.call_ok("repoGet", json!({"owner": "o", "repo": "busy"}), auth).await;
    assert_eq!(c.kind(), "rate_limited", "{}", c.text);
    // A resource read of an issue the forge does not have.
    let resp = client
        .request("resources/read", json!({"uri": "gitea://repos/alice/demo/issues/7"}), auth)
        .await
        .unwrap();
    assert!(resp.get("error").is_some(), "{resp}");
    // A tool name of the client's own making (here a token) is counted as `unknown`.
    let resp = client.call(UNKNOWN_TOKEN, json!({"x": SECRET}), auth).await.unwrap();
    assert!(resp.get("error").is_some(), "{resp}");
    // A token the forge refuses opens no session: a failed lookup.
    let refused = format!("token {UNKNOWN_TOKEN}");
    assert_eq!(McpClient::connect(&server, Some(&refused)).await.err().map(|e| e.0), Some(401));

    let doc = scrape(&server.url("/metrics")).await;
    assert_eq!(doc["status"], 200, "{doc}");
    assert!(doc["content_type"].as_str().unwrap().starts_with("text/plain; version=0.0.4"), "{doc}");
    let calls = |tool: &str, outcome: &str| {
        value(&doc, "aegis_calls", "aegis_calls_total", &[("tool", tool), ("outcome", outcome)])
    };
    let mut want_calls = vec![
        (("repoGet", "ok"), 4.0),
        (("repoGet", "not_found"), 2.0),
        (("repoGet", "invalid_arguments"), 1.0),
        (("repoGet", "rate_limited"), 1.0),
        (("repoDelete", "denied"), 1.0),
        (("issueListIssues", "ok"), 1.0),
        (("unknown", "unknown_tool"), 1.0),
    ];
    for ((tool, outcome), n) in &want_calls {
        assert_eq!(calls(tool, outcome), Some(*n), "{tool} {outcome}: {doc}");
    }
    // Nothing else was counted.
    let mut got: Vec<(Value, f64)> = samples(&doc, "aegis_calls", "aegis_calls_total");
    got.sort_by_key(|(l, _)| l.to_string());
    want_calls.sort_by_key(|((t, o), _)| json!({"tool": t, "outcome": o}).to_string());
    assert_eq!(got.len(), want_calls.len(), "{got:?}");
    let histogram_count = |family: &str| value(&doc, family, &format!("{family}_count"), &[]);
    assert_eq!(histogram_count("aegis_call_duration_seconds"), Some(11.0));
    // Forge requests: the readiness probe at start, alice's login once, the eight calls that
    // reached the forge, the resource read, and the refused token's lookup.
    assert_eq!(histogram_count("aegis_forge_request_duration_seconds"), Some(12.0));
    let forge_status = |status: &str| {
        value(&doc, "aegis_forge_responses", "aegis_forge_responses_total", &[("status", status)])
    };
    assert_eq!(forge_status("200"), Some(7.0), "{doc}");
    assert_eq!(forge_status("404"), Some(3.0));
    assert_eq!(forge_status("429"), Some(1.0));
    assert_eq!(forge_status("401"), Some(1.0));
    assert_eq!(samples(&doc, "aegis_forge_responses", "aegis_forge_responses_total").len(), 4, "{doc}");
    let guard =
        |action: &str| value(&doc, "aegis_guard_actions", "aegis_guard_actions_total", &[("action", action)]);
    assert_eq!(guard("redaction"), Some(1.0), "{doc}");
    assert_eq!(guard("truncation"), Some(1.0), "{doc}");
    assert_eq!(guard("mask"), Some(0.0), "{doc}");
    assert_eq!(guard("block"), Some(0.0), "{doc}");
    assert_eq!(guard("hidden_content"), Some(0.0), "{doc}");
    let cache = |result: &str| {
        value(&doc, "aegis_identity_cache", "aegis_identity_cache_total", &[("result", result)])
    };
    assert_eq!(cache("miss"), Some(1.0), "{doc}");
    assert_eq!(cache("hit"), Some(9.0), "{doc}");
    assert_eq!(cache("failure"), Some(1.0), "{doc}");
    assert_eq!(cache("refused"), Some(1.0), "the refused token is remembered: {doc}");
    assert_eq!(cache("lookups_full"), Some(0.0), "{doc}");
    assert_eq!(value(&doc, "aegis_sessions_open", "aegis_sessions_open", &[]), Some(1.0));
    assert_eq!(value(&doc, "aegis_streams_open", "aegis_streams_open", &[]), Some(0.0));
    assert!(samples(&doc, "aegis_rate_limited", "aegis_rate_limited_total").is_empty(), "{doc}");
    let reads = samples(&doc, "aegis_resource_reads", "aegis_resource_reads_total");
    assert_eq!(reads, vec![(json!({"outcome": "not_found"}), 1.0)], "{doc}");
    // No label value holds a login, a token or an argument value.
    for family in doc["families"].as_object().unwrap().values() {
        for s in family["samples"].as_array().unwrap() {
            for v in s["labels"].as_object().unwrap().values() {
                let v = v.as_str().unwrap();
                for secret in [ALICE_TOKEN, UNKNOWN_TOKEN, SECRET, "alice", "demo", "leaky", "busy"] {
                    assert!(!v.contains(secret), "{secret} in a label: {s}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_listen_serves_metrics_only_on_its_own_address() {
    let forge = Forge::gitea().start().await;
    let own = format!("127.0.0.1:{}", free_port());
    let server = HttpServer::spawn(
        &forge.base_url(),
        "sse",
        &[("GITEA_TOKEN", ALICE_TOKEN), ("METRICS_LISTEN", own.as_str())],
    )
    .await;
    let url = format!("http://{own}/metrics");
    assert!(server.stderr().contains(&format!("metrics on {url}")), "{}", server.stderr());
    let http = http_client();
    assert_eq!(http.get(server.url("/metrics")).send().await.unwrap().status(), 404);
    assert_eq!(http.post(&url).send().await.unwrap().status(), 405);
    assert_eq!(http.get(format!("http://{own}/sse")).send().await.unwrap().status(), 404);
    // A legacy SSE stream is open while the scrape runs.
    let stream = SseClient::connect(&server.base, None).await;
    let c = tool_result(
        &stream.try_call("repoListBranches", json!({"owner": "o", "repo": "r"}), None).await.unwrap(),
    );
    assert_eq!(c.kind(), "not_found", "{}", c.text);
    let doc = scrape(&url).await;
    assert_eq!(value(&doc, "aegis_streams_open", "aegis_streams_open", &[]), Some(1.0), "{doc}");
    assert_eq!(value(&doc, "aegis_sessions_open", "aegis_sessions_open", &[]), Some(0.0), "{doc}");
    let calls = value(
        &doc,
        "aegis_calls",
        "aegis_calls_total",
        &[("tool", "repoListBranches"), ("outcome", "not_found")],
    );
    assert_eq!(calls, Some(1.0), "{doc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_listen_off_serves_no_metrics() {
    let (_forge, server) = Forge::gitea().serve_http("http", &[("METRICS_LISTEN", "off")]).await;
    let http = http_client();
    assert_eq!(http.get(server.url("/metrics")).send().await.unwrap().status(), 404);
    assert_eq!(http.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_metrics_are_served_only_on_an_address_of_their_own() {
    let own = format!("127.0.0.1:{}", free_port());
    let h = Harness::start(Setup::gitea().env("METRICS_LISTEN", &own)).await;
    h.forge.seed_repo("alice", "demo");
    assert!(!h.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await.is_error);
    let doc = scrape(&format!("http://{own}/metrics")).await;
    let calls = value(&doc, "aegis_calls", "aegis_calls_total", &[("tool", "repoGet"), ("outcome", "ok")]);
    assert_eq!(calls, Some(1.0), "{doc}");
}

/// Refusals of each limit are counted by the limit's name, and the refused calls by their
/// outcome; nothing names who was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_refusals_are_counted_by_limit() {
    let own = format!("127.0.0.1:{}", free_port());
    let h =
        Harness::start(Setup::gitea().env("METRICS_LISTEN", &own).env("RATE_LIMIT_PER_MINUTE", "2")).await;
    h.forge.seed_repo("alice", "demo");
    let repo = json!({"owner": "alice", "repo": "demo"});
    for _ in 0..2 {
        assert!(!h.call("repoGet", repo.clone()).await.is_error);
    }
    for _ in 0..3 {
        assert_eq!(h.call("repoGet", repo.clone()).await.kind(), "rate_limited");
    }
    let doc = scrape(&format!("http://{own}/metrics")).await;
    let refused = samples(&doc, "aegis_rate_limited", "aegis_rate_limited_total");
    assert_eq!(refused, [(json!({"limit": "per_minute"}), 3.0)], "{doc}");
    let calls = |outcome| {
        value(&doc, "aegis_calls", "aegis_calls_total", &[("tool", "repoGet"), ("outcome", outcome)])
    };
    assert_eq!((calls("ok"), calls("rate_limited")), (Some(2.0), Some(3.0)), "{doc}");
    assert!(!doc.to_string().contains("alice"), "no label names the caller: {doc}");
}

/// `/metrics` answers the same `Host` and `Origin` rules as `/mcp` — a page that rebinds its
/// name to a loopback server cannot read it — on the MCP listener and on its own; with
/// `METRICS_BEARER_TOKEN` a scrape must present the token, which never shows in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_refuse_foreign_hosts_and_origins_and_want_the_scrape_token() {
    const SCRAPE_TOKEN: &str = "scrape-token-4Rf8Kq1z";
    let forge = Forge::gitea().start().await;
    let own = format!("127.0.0.1:{}", free_port());
    let http = http_client();
    for (listen, token) in [(None, None), (Some(own.as_str()), Some(SCRAPE_TOKEN))] {
        let mut env = vec![("GITEA_TOKEN", ALICE_TOKEN), ("LOG_LEVEL", "trace")];
        env.extend(listen.map(|l| ("METRICS_LISTEN", l)));
        env.extend(token.map(|t| ("METRICS_BEARER_TOKEN", t)));
        let mut server = HttpServer::spawn(&forge.base_url(), "http", &env).await;
        let url = match listen {
            Some(l) => format!("http://{l}/metrics"),
            None => server.url("/metrics"),
        };
        let get = |host: Option<&str>, origin: Option<&str>, auth: Option<String>| {
            let mut req = http.get(&url);
            if let Some(h) = host {
                req = req.header("host", h);
            }
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            req.send()
        };
        let bearer = token.map(|t| format!("Bearer {t}"));
        for (host, origin) in [(Some("evil.example"), None), (None, Some("http://evil.example"))] {
            let status = get(host, origin, bearer.clone()).await.unwrap().status();
            assert_eq!(status, 403, "{listen:?} host {host:?} origin {origin:?}");
        }
        let ok = get(Some("localhost"), Some("http://localhost"), bearer.clone()).await.unwrap();
        assert_eq!(ok.status(), 200, "{listen:?}");
        let text = ok.text().await.unwrap();
        assert!(text.contains("# TYPE aegis_call_duration_seconds histogram"), "the metrics: {text}");
        if token.is_some() {
            for wrong in [None, Some("Bearer wrong".to_owned()), Some(format!("token {SCRAPE_TOKEN}x"))] {
                let r = get(None, None, wrong.clone()).await.unwrap();
                assert_eq!(r.status(), 401, "{wrong:?}");
                assert!(r.headers().get("www-authenticate").is_some());
            }
        }
        assert!(!server.stop_and_log().await.contains(SCRAPE_TOKEN), "the scrape token is in the log");
    }
}
