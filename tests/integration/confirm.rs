//! A person confirms what cannot be undone (`CONFIRM_IRREVERSIBLE`), through real clients:
//! the official Python SDK's elicitation callback over stdio, Streamable HTTP sessions,
//! stateless Streamable HTTP (protocol 2026-07-28's multi-round-trip answer) and legacy SSE;
//! a client without the capability, which must send `confirm`; and sealed request states
//! replayed for another target or after they expired. The recording fake forge says what was
//! sent: nothing, unless the person accepted.
// Tests read their own variables (PATH, AEGIS_E2E_*), not the server's settings.
#![allow(clippy::disallowed_methods)]

use std::time::Duration;

use fake_forge::{FakeForge, Recorded};
use serde_json::{Value, json};

use crate::support::http::{HttpServer, http_client, stateless_tools_call};
use crate::support::{ALICE_TOKEN, DriverRun, Forge, bin, python_driver};

const BOB_TOKEN: &str = "tok-bob-c0nf1rm5b0b";

const TIMEOUT: Duration = Duration::from_secs(60);

/// A forge knowing alice and bob, with alice's `demo` and `other`.
pub(crate) fn forge() -> Forge {
    Forge::gitea().user(BOB_TOKEN, "bob").repo("alice", "demo").repo("alice", "other")
}

/// What was sent that changes something (the server's own reads left out).
pub(crate) fn writes(forge: &FakeForge) -> Vec<Recorded> {
    forge.requests().into_iter().filter(|r| r.method != "GET").collect()
}

fn delete_demo() -> Value {
    json!([{"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo"}}])
}

/// The Python SDK over stdio against a server of `forge`, answering elicitations `elicit`.
async fn stdio(
    forge: &FakeForge,
    mode: &str,
    elicit: Option<&str>,
    calls: &Value,
    env: &[(&str, &str)],
) -> DriverRun {
    let (mut cmd, _dir) = python_driver("mcp_stdio_client.py", mode, calls);
    if let Some(answer) = elicit {
        cmd.args(["--elicit", answer]);
    }
    cmd.arg("--")
        .arg(bin())
        .args(["serve", "--url", &forge.base_url(), "--flavor", "gitea"])
        .env("GITEA_TOKEN", ALICE_TOKEN)
        .env_remove("CONFIRM_IRREVERSIBLE")
        .env_remove("CONFIRM_TIMEOUT")
        .envs(env.iter().copied());
    DriverRun::run(&mut cmd, TIMEOUT, &format!("the stdio driver ({mode}, {elicit:?})"), String::new).await
}

/// The Python SDK over HTTP (`http` or `sse`) against `server`, as alice.
async fn http(
    server: &HttpServer,
    transport: &str,
    mode: &str,
    elicit: Option<&str>,
    calls: &Value,
) -> DriverRun {
    let (mut cmd, _dir) = python_driver("mcp_http_client.py", mode, calls);
    if let Some(answer) = elicit {
        cmd.args(["--elicit", answer]);
    }
    cmd.args(["--transport", transport, &server.endpoint])
        .arg("--header")
        .arg(format!("Authorization: token {ALICE_TOKEN}"));
    let what = format!("the HTTP driver ({transport}, {mode}, {elicit:?})");
    DriverRun::run(&mut cmd, TIMEOUT, &what, || format!("--- server stderr ---\n{}", server.stderr())).await
}

/// The `nth` call's envelope, and whether it is an error.
fn result(run: &DriverRun, nth: usize) -> (bool, Value) {
    let c = &run.doc["calls"][nth];
    let text = c["text"].as_str().unwrap_or_else(|| panic!("call {nth} has no text: {}", run.context));
    (c["is_error"] == true, serde_json::from_str(text).unwrap())
}

/// The person accepted: the question named the repository and said it cannot be undone,
/// and the forge received the delete.
fn ran(run: &DriverRun, forge: &FakeForge) {
    let (failed, envelope) = result(run, 0);
    assert!(!failed, "{envelope}\n{}", run.context);
    assert_eq!(envelope["status"], 204, "{envelope}");
    asked_once(run);
    let sent = writes(forge);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!((sent[0].method.as_str(), sent[0].raw_path.as_str()), ("DELETE", "/api/v1/repos/alice/demo"));
}

/// The person did not accept: `not_confirmed` with `why`, and nothing was sent.
fn refused(run: &DriverRun, forge: &FakeForge, why: &str) {
    let (failed, envelope) = result(run, 0);
    assert!(failed, "{envelope}");
    assert_eq!(envelope["error"]["kind"], "not_confirmed", "{envelope}");
    assert_eq!(envelope["error"]["status"], Value::Null, "{envelope}");
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(message.contains(why), "{message}");
    assert!(writes(forge).is_empty(), "sent without a yes: {:?}", writes(forge));
}

/// One question, naming what is destroyed, as a form with one box.
fn asked_once(run: &DriverRun) {
    let asked =
        run.doc["elicitations"].as_array().unwrap_or_else(|| panic!("no elicitations: {}", run.context));
    assert_eq!(asked.len(), 1, "{asked:?}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.starts_with("Delete repository alice/demo"), "{message}");
    assert!(message.ends_with("? This cannot be undone."), "{message}");
    let schema = &asked[0]["requested_schema"];
    assert_eq!(schema["required"], json!(["confirm"]), "{schema}");
    assert_eq!(schema["properties"]["confirm"]["type"], "boolean", "{schema}");
}

#[tokio::test]
async fn over_stdio_the_person_is_asked_and_only_a_checked_yes_runs_the_call() {
    // Before 2026-07-28 (`legacy`) the server asks while the call waits; from it on (`auto`)
    // the call answers with the question and the SDK calls again with the answer.
    for mode in ["legacy", "auto"] {
        let f = forge().start().await;
        ran(&stdio(&f, mode, Some("accept"), &delete_demo(), &[]).await, &f);
        for (answer, why) in [
            ("decline", "the person declined"),
            ("uncheck", "the person declined"),
            ("cancel", "the person cancelled the question"),
        ] {
            let f = forge().start().await;
            let run = stdio(&f, mode, Some(answer), &delete_demo(), &[]).await;
            refused(&run, &f, why);
            asked_once(&run);
        }
    }
}

#[tokio::test]
async fn a_person_who_does_not_answer_in_time_stops_the_call() {
    let f = forge().start().await;
    let run = stdio(&f, "legacy", Some("ignore"), &delete_demo(), &[("CONFIRM_TIMEOUT", "1")]).await;
    refused(&run, &f, "did not answer within 1s (CONFIRM_TIMEOUT)");
}

/// Three deletes by a client that cannot ask the person (`elicit`: how it answers the question,
/// when it declared it could): without `confirm`, and with one that is not the target, each is
/// refused with the question, the exact target to send and `why` the agent must ask itself;
/// with the exact target the call runs, and only it reaches the forge.
async fn only_the_exact_target_confirms(elicit: Option<&str>, why: &str) -> DriverRun {
    let f = forge().start().await;
    let calls = json!([
        {"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo"}},
        {"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo", "confirm": "alice/other"}},
        {"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo", "confirm": "alice/demo"}},
    ]);
    let run = stdio(&f, "legacy", elicit, &calls, &[]).await;
    for nth in [0, 1] {
        let (failed, envelope) = result(&run, nth);
        assert!(failed && envelope["error"]["kind"] == "not_confirmed", "{envelope}");
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
        assert!(
            message.contains(
                r#"The question: "Delete repository alice/demo with its 0 open issues, 0 open pull requests and 0 releases? This cannot be undone.""#
            ),
            "{message}"
        );
        assert!(message.contains(r#""confirm": "alice/demo""#), "{message}");
    }
    assert!(
        result(&run, 1).1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"alice/other\", is not the exact target")
    );
    let (failed, envelope) = result(&run, 2);
    assert!(!failed, "{envelope}\n{}", run.context);
    assert_eq!(writes(&f).len(), 1, "only the confirmed call was sent: {:?}", writes(&f));
    run
}

#[tokio::test]
async fn a_client_that_cannot_ask_sends_the_exact_target_the_error_names() {
    only_the_exact_target_confirms(None, "declared no elicitation support").await;
}

#[tokio::test]
async fn a_client_that_answers_the_question_with_method_not_found_confirms_by_the_argument() {
    // It declared elicitation, yet has no way to show a form: it is asked each time, and its
    // answer makes it a client that cannot ask.
    let run = only_the_exact_target_confirms(
        Some("notfound"),
        r#"answered the server's question with "Method not found""#,
    )
    .await;
    assert_eq!(run.doc["elicitations"].as_array().map(Vec::len), Some(3), "each call tried to ask first");
    // A client that declines every question by itself is set to take the argument instead.
    let f = forge().start().await;
    let calls = json!([{"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo", "confirm": "alice/demo"}}]);
    let run = stdio(&f, "legacy", Some("decline"), &calls, &[("CONFIRM_IRREVERSIBLE", "argument")]).await;
    assert!(!result(&run, 0).0, "{}", run.context);
    assert_eq!(run.doc["elicitations"], json!([]));
    assert_eq!(writes(&f).len(), 1);
}

#[tokio::test]
async fn with_argument_mode_even_a_client_that_can_ask_sends_confirm_and_with_off_nobody_is_asked() {
    let f = forge().start().await;
    let run =
        stdio(&f, "legacy", Some("accept"), &delete_demo(), &[("CONFIRM_IRREVERSIBLE", "argument")]).await;
    refused(&run, &f, "CONFIRM_IRREVERSIBLE=argument");
    assert_eq!(run.doc["elicitations"], json!([]), "argument mode asks nobody");
    let f = forge().start().await;
    let run = stdio(&f, "legacy", Some("decline"), &delete_demo(), &[("CONFIRM_IRREVERSIBLE", "off")]).await;
    assert!(!result(&run, 0).0, "{}", run.context);
    assert_eq!(run.doc["elicitations"], json!([]));
    assert_eq!(writes(&f).len(), 1);
}

#[tokio::test]
async fn an_agent_that_can_ask_its_person_cannot_confirm_for_them() {
    // A `confirm` an injected instruction made the agent send is ignored: the person is asked.
    let f = forge().start().await;
    let calls = json!([{"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "demo", "confirm": "alice/demo"}}]);
    let run = stdio(&f, "legacy", Some("decline"), &calls, &[]).await;
    refused(&run, &f, "the person declined");
}

#[tokio::test]
async fn the_raw_and_call_tools_are_asked_for_the_operation_they_reach() {
    for call in [
        json!({"tool": "gitea_api_request", "arguments": {"method": "DELETE", "path": "/repos/alice/demo"}}),
        json!({"tool": "gitea_call_operation", "arguments": {"operation_id": "repoDelete", "arguments": {"owner": "alice", "repo": "demo"}}}),
    ] {
        let f = forge().start().await;
        let run = stdio(&f, "legacy", Some("decline"), &json!([call]), &[]).await;
        refused(&run, &f, "the person declined");
        asked_once(&run);
        let f = forge().start().await;
        ran(&stdio(&f, "legacy", Some("accept"), &json!([call]), &[]).await, &f);
    }
}

#[tokio::test]
async fn in_streamable_http_sessions_and_over_sse_the_person_is_asked() {
    for (transport, mode) in [("http", "legacy"), ("http", "auto"), ("sse", "legacy"), ("sse", "auto")] {
        let f = forge().start().await;
        let server = HttpServer::spawn(&f.base_url(), transport, &[]).await;
        ran(&http(&server, transport, mode, Some("accept"), &delete_demo()).await, &f);
        for (answer, why) in
            [("decline", "the person declined"), ("cancel", "the person cancelled the question")]
        {
            let f = forge().start().await;
            let server = HttpServer::spawn(&f.base_url(), transport, &[]).await;
            let run = http(&server, transport, mode, Some(answer), &delete_demo()).await;
            refused(&run, &f, why);
            asked_once(&run);
        }
    }
    // A person who does not answer: the call ends when CONFIRM_TIMEOUT has passed.
    for transport in ["http", "sse"] {
        let f = forge().start().await;
        let server = HttpServer::spawn(&f.base_url(), transport, &[("CONFIRM_TIMEOUT", "1")]).await;
        let run = http(&server, transport, "legacy", Some("ignore"), &delete_demo()).await;
        refused(&run, &f, "did not answer within 1s (CONFIRM_TIMEOUT)");
    }
}

#[tokio::test]
async fn over_stateless_http_the_question_comes_back_as_the_answer() {
    let f = forge().start().await;
    let server = HttpServer::spawn(&f.base_url(), "http", &[("MCP_STATELESS", "true")]).await;
    // 2026-07-28: the multi-round-trip answer, driven by the SDK.
    ran(&http(&server, "http", "auto", Some("accept"), &delete_demo()).await, &f);
    let f2 = forge().start().await;
    let server = HttpServer::spawn(&f2.base_url(), "http", &[("MCP_STATELESS", "true")]).await;
    let run = http(&server, "http", "auto", Some("decline"), &delete_demo()).await;
    refused(&run, &f2, "the person declined");
    // Before it, a stateless request cannot reach the client: `confirm` it is.
    let run = http(&server, "http", "legacy", Some("accept"), &delete_demo()).await;
    refused(&run, &f2, r#""confirm": "alice/demo""#);
    assert_eq!(run.doc["elicitations"], json!([]));
}

/// A stateless 2026-07-28 `tools/call` from a client with form elicitation.
pub(crate) async fn round(
    server: &HttpServer,
    args: Value,
    retry: Option<(&Value, Value)>,
    token: &str,
) -> Value {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
    let mut params = json!({"name": "repoDelete", "arguments": args, "_meta": meta});
    if let Some((state, answer)) = retry {
        params["requestState"] = state.clone();
        params["inputResponses"] = json!({"confirm": answer});
    }
    let auth = format!("token {token}");
    stateless_tools_call(&http_client(), &server.base, params, Some(&auth))
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.stderr()))
}

pub(crate) fn error_of(reply: &Value) -> (String, String) {
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{reply}"));
    let v: Value = serde_json::from_str(text).unwrap();
    (
        v["error"]["kind"].as_str().unwrap_or("").to_owned(),
        v["error"]["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn a_sealed_question_confirms_only_its_own_call_and_only_in_time() {
    let f = forge().start().await;
    // The person's answers come in time (the default CONFIRM_TIMEOUT, a minute) unless the
    // test lets the time pass, on a server of its own whose questions last a second.
    let server = HttpServer::spawn(&f.base_url(), "http", &[("MCP_STATELESS", "true")]).await;
    let demo = json!({"owner": "alice", "repo": "demo"});
    let first = round(&server, demo.clone(), None, ALICE_TOKEN).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let state = result["requestState"].clone();
    assert!(state.as_str().is_some_and(|s| s.starts_with("aegis-confirm.")), "{first}");
    let asked = &result["inputRequests"]["confirm"];
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert!(
        asked["params"]["message"].as_str().unwrap().starts_with("Delete repository alice/demo"),
        "{asked}"
    );
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    // The yes for alice/demo confirms no other repository, and no other caller's call.
    let other = json!({"owner": "alice", "repo": "other"});
    let (kind, message) = error_of(&round(&server, other, Some((&state, yes.clone())), ALICE_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    assert!(message.contains("given for another call"), "{message}");
    let (kind, _) = error_of(&round(&server, demo.clone(), Some((&state, yes.clone())), BOB_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    // A state altered by one character opens nowhere.
    let mut forged = state.as_str().unwrap().to_owned();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let (kind, _) =
        error_of(&round(&server, demo.clone(), Some((&json!(forged), yes.clone())), ALICE_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    assert!(writes(&f).is_empty(), "{:?}", writes(&f));
    // After CONFIRM_TIMEOUT the yes comes too late: a question of a server whose questions
    // last one second (counted in whole seconds, so that one second on it has passed).
    let brief =
        HttpServer::spawn(&f.base_url(), "http", &[("MCP_STATELESS", "true"), ("CONFIRM_TIMEOUT", "1")])
            .await;
    let asked = round(&brief, demo.clone(), None, ALICE_TOKEN).await;
    let late = asked["result"]["requestState"].clone();
    crate::support::let_time_pass(Duration::from_millis(1100), "the question's lifetime, one second, passes")
        .await;
    let (kind, message) =
        error_of(&round(&brief, demo.clone(), Some((&late, yes.clone())), ALICE_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    assert!(message.contains("has expired"), "{message}");
    assert!(writes(&f).is_empty(), "{:?}", writes(&f));
    drop(brief);
    // A fresh question answered in time runs the call, once: the same yes sent again within
    // CONFIRM_TIMEOUT confirms nothing (it would run the call a second time).
    let again = round(&server, demo.clone(), None, ALICE_TOKEN).await;
    let state = again["result"]["requestState"].clone();
    let done = round(&server, demo.clone(), Some((&state, yes.clone())), ALICE_TOKEN).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(writes(&f).len(), 1);
    f.seed_repo("alice", "demo");
    let (kind, message) =
        error_of(&round(&server, demo.clone(), Some((&state, yes.clone())), ALICE_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    assert!(message.contains("used already"), "{message}");
    assert_eq!(writes(&f).len(), 1, "the yes ran its call twice: {:?}", writes(&f));
    // A no leaves the question open: the person may still say yes to it.
    let again = round(&server, demo.clone(), None, ALICE_TOKEN).await;
    let state = again["result"]["requestState"].clone();
    let no = json!({"action": "decline"});
    let (kind, _) = error_of(&round(&server, demo.clone(), Some((&state, no)), ALICE_TOKEN).await);
    assert_eq!(kind, "not_confirmed");
    let done = round(&server, demo, Some((&state, yes)), ALICE_TOKEN).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(writes(&f).len(), 2);
}

/// The first round of a call that asks its person (protocol 2026-07-28) is a question, not a
/// refusal: its audit line and its metric say `input_required`; the retry that carries the
/// yes says `ok`, asked.
#[tokio::test]
async fn the_round_that_asks_the_person_is_recorded_as_input_required() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = (dir.path().join("audit.jsonl"), dir.path().join("audit.key"));
    std::fs::write(&key, "ab".repeat(32)).unwrap();
    let f = forge().start().await;
    let env = [
        ("MCP_STATELESS", "true"),
        ("AUDIT_LOG", log.to_str().unwrap()),
        ("AUDIT_KEY_FILE", key.to_str().unwrap()),
    ];
    let server = HttpServer::spawn(&f.base_url(), "http", &env).await;
    let demo = json!({"owner": "alice", "repo": "demo"});
    let first = round(&server, demo.clone(), None, ALICE_TOKEN).await;
    let state = first["result"]["requestState"].clone();
    let yes = json!({"action": "accept", "content": {"confirm": true}});
    let done = round(&server, demo, Some((&state, yes)), ALICE_TOKEN).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    let lines: Vec<Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let how: Vec<(Value, Value)> = lines
        .iter()
        .map(|l| (l["outcome"].clone(), l.get("confirmed").cloned().unwrap_or(Value::Null)))
        .collect();
    // The write's intent line comes before its outcome.
    assert_eq!(
        how,
        [
            (json!("input_required"), Value::Null),
            (json!("sending"), json!("asked")),
            (json!("ok"), json!("asked"))
        ],
        "{lines:#?}"
    );
    let metrics = reqwest::get(format!("{}/metrics", server.base)).await.unwrap().text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("aegis_calls_total{") && l.contains("outcome=\"input_required\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_audit_line_says_how_each_call_was_confirmed_and_nothing_the_person_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (log, key) = (dir.path().join("audit.jsonl"), dir.path().join("audit.key"));
    std::fs::write(&key, "ab".repeat(32)).unwrap();
    let env = [("AUDIT_LOG", log.to_str().unwrap()), ("AUDIT_KEY_FILE", key.to_str().unwrap())];
    let lines = |log: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let f = forge().start().await;
    stdio(&f, "legacy", Some("accept"), &delete_demo(), &env).await;
    let calls = json!([
        {"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "other"}},
        {"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "other", "confirm": "alice/other"}},
        {"tool": "repoGet", "arguments": {"owner": "alice", "repo": "demo"}},
    ]);
    stdio(&f, "legacy", None, &calls, &env).await;
    let off = [env[0], env[1], ("CONFIRM_IRREVERSIBLE", "off")];
    stdio(
        &f,
        "legacy",
        None,
        &json!([{"tool": "repoDelete", "arguments": {"owner": "alice", "repo": "gone"}}]),
        &off,
    )
    .await;
    // Outcome lines (a write's intent line, `sending`, comes before it with the same id).
    let all = lines(&log);
    let tools: Vec<Value> =
        all.iter().filter(|l| l["tool"].is_string() && l["outcome"] != "sending").cloned().collect();
    let sending = all.iter().filter(|l| l["outcome"] == "sending").count();
    assert_eq!(sending, 3, "the three deletes sent: {all:#?}");
    let how: Vec<(Value, Value, Value)> = tools
        .iter()
        .map(|l| {
            (l["operation"].clone(), l["outcome"].clone(), l.get("confirmed").cloned().unwrap_or(Value::Null))
        })
        .collect();
    assert_eq!(
        how,
        [
            (json!("repoDelete"), json!("ok"), json!("asked")),
            (json!("repoDelete"), json!("not_confirmed"), Value::Null),
            (json!("repoDelete"), json!("ok"), json!("argument")),
            // Deleted by the first call: a read is never asked for.
            (json!("repoGet"), json!("not_found"), Value::Null),
            // Sent unasked (the fake forge has no such repository).
            (json!("repoDelete"), json!("not_found"), json!("off")),
        ],
        "{tools:#?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("Yes, go ahead") && !text.contains("This cannot be undone"), "{text}");
}

#[tokio::test]
async fn a_secret_in_the_target_is_not_shown_to_the_person() {
    // An agent may paste anything into an argument; the question passes the call's guard.
    let f = forge().start().await;
    let calls =
        json!([{"tool": "repoDelete", "arguments": {"owner": "alice", "repo": format!("x{ALICE_TOKEN}")}}]);
    let run = stdio(&f, "legacy", Some("decline"), &calls, &[]).await;
    let asked = run.doc["elicitations"].to_string();
    assert!(asked.contains("Delete repository alice/x"), "{asked}");
    assert!(!asked.contains(ALICE_TOKEN), "the token was shown: {asked}");
    assert!(writes(&f).is_empty());
}

/// What cannot be undone is judged by effect, not by the DELETE method: the same write is
/// asked for with the arguments or the forge state that make it destroy, naming what is lost,
/// and sent unasked otherwise. A client without elicitation is told the question in the error.
mod by_effect {
    use super::*;
    use crate::support::{Harness, Setup};
    use fake_forge::{Script, ScriptedResponse};

    fn answer(path: &str, body: Value, total: Option<u64>) -> Script {
        let mut r = ScriptedResponse::json(200, &body);
        if let Some(t) = total {
            r = r.with_header("x-total-count", &t.to_string());
        }
        Script::always(Some("GET"), path, r)
    }

    /// The call held (nothing but reads sent), and the question in its error; then sent with
    /// the target the error names.
    async fn asked(h: &Harness, tool: &str, args: Value) -> String {
        let before = h.tool_requests().len();
        let c = h.call_raw(tool, args.clone()).await.unwrap();
        assert_eq!(c.kind(), "not_confirmed", "{tool}: {}", c.text);
        let sent: Vec<String> = h.tool_requests()[before..]
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| r.raw_path.clone())
            .collect();
        assert!(sent.is_empty(), "{tool}: sent before it was confirmed: {sent:?}");
        let message = c.json["error"]["message"].as_str().unwrap().to_owned();
        let c = h.call(tool, args).await;
        assert!(
            h.tool_requests().iter().any(|r| r.method != "GET"),
            "{tool}: not sent once confirmed: {}",
            c.text
        );
        message
    }

    /// The call sent at once, unasked.
    async fn unasked(h: &Harness, tool: &str, args: Value) {
        let before = h.tool_requests().iter().filter(|r| r.method != "GET").count();
        let c = h.call_raw(tool, args).await.unwrap();
        assert_ne!(c.kind(), "not_confirmed", "{tool}: {}", c.text);
        let after = h.tool_requests().iter().filter(|r| r.method != "GET").count();
        assert_eq!(after, before + 1, "{tool}: sent once, unasked: {}", c.text);
    }

    #[tokio::test]
    async fn a_branch_forced_back_is_asked_naming_the_commits_it_drops() {
        let h = Harness::start(Setup::gitea()).await;
        h.forge.seed_repo("alice", "demo");
        let compare = "/api/v1/repos/alice/demo/compare/0123abcd...feat/x";
        let dropped = json!({"total_commits": 3, "commits": [
            {"sha": "a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0"},
            {"sha": "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"},
            {"sha": "5a4b3c2d1e0f5a4b3c2d1e0f5a4b3c2d1e0f5a4b"}]});
        h.forge.script(answer(compare, dropped, None));
        let args = json!({"owner": "alice", "repo": "demo", "branch": "feat/x", "body": {"new_commit_id": "0123abcd", "force": true}});
        let question = asked(&h, "repoUpdateBranch", args.clone()).await;
        assert!(
            question.contains("Force branch feat/x of alice/demo to 0123abcd, dropping 3 commits only it has (a1b2c3d4e5, 9f8e7d6c5b and 5a4b3c2d1e)? This cannot be undone."),
            "{question}"
        );
        // The target names the commit: a yes to one move is not a yes to another.
        assert!(question.contains(r#""confirm": "alice/demo#branch/feat/x@0123abcd""#), "{question}");
        // Nothing dropped (a fast-forward, forced or not): sent unasked.
        h.forge.clear_scripts();
        h.forge.script(answer(compare, json!({"total_commits": 0, "commits": []}), None));
        unasked(&h, "repoUpdateBranch", args).await;
        let plain = json!({"owner": "alice", "repo": "demo", "branch": "feat/x", "body": {"new_commit_id": "0123abcd"}});
        unasked(&h, "repoUpdateBranch", plain).await;
        h.stop().await;
    }

    #[tokio::test]
    async fn a_secret_written_over_a_private_hook_sent_elsewhere_and_a_force_push_are_asked_and_new_ones_are_not()
     {
        let h = Harness::start(Setup::gitea()).await;
        h.forge.seed_repo("alice", "demo");
        let list = "/api/v1/repos/alice/demo/actions/secrets";
        h.forge.script(answer(list, json!([{"name": "DEPLOY_KEY"}, {"name": "OTHER"}]), Some(2)));
        let put = |name: &str| json!({"owner": "alice", "repo": "demo", "secretname": name, "body": {"data": "n3w-s3cret-value"}});
        let question = asked(&h, "updateRepoSecret", put("deploy_key")).await;
        assert!(
            question.contains("Replace the value of Actions secret deploy_key of alice/demo"),
            "{question}"
        );
        assert!(!question.contains("n3w-s3cret-value"), "the new value was shown: {question}");
        unasked(&h, "updateRepoSecret", put("NEW_ONE")).await;
        // A webhook of a private repository sent somewhere new is asked; its other settings
        // (its secret too, which neither forge lets an edit change) are not.
        h.forge.script(answer("/api/v1/repos/alice/demo", json!({"name": "demo", "private": true}), None));
        let hook = |body: Value| json!({"owner": "alice", "repo": "demo", "id": 1, "body": body});
        let question = asked(
            &h,
            "repoEditHook",
            hook(json!({"config": {"url": "https://ci.example/h", "content_type": "json"}})),
        )
        .await;
        assert!(
            question.contains(
                "Send the events of the private repository alice/demo to https://ci.example/h from now on"
            ),
            "{question}"
        );
        assert!(question.contains(r#""confirm": "alice/demo#hook/1""#), "{question}");
        unasked(&h, "repoEditHook", hook(json!({"active": false, "config": {"secret": "n3w-hook-secret"}})))
            .await;
        // A file written with a force push over a branch names the branch's last commit.
        h.forge.script(answer(
            "/api/v1/repos/alice/demo/branches/release",
            json!({"name": "release", "commit": {"id": "c0ffee0123c0ffee0123c0ffee0123c0ffee0123"}}),
            None,
        ));
        let write =
            |body: Value| json!({"owner": "alice", "repo": "demo", "filepath": "a.txt", "body": body});
        let question = asked(
            &h,
            "repoCreateFile",
            write(json!({"content": "aGk=", "new_branch": "release", "force_push": true})),
        )
        .await;
        assert!(question.contains("Force-push branch release of alice/demo with a new commit on the default branch, replacing what the branch holds now (its last commit c0ffee0123)?"), "{question}");
        unasked(&h, "repoCreateFile", write(json!({"content": "aGk=", "new_branch": "topic"}))).await;
        h.stop().await;
    }

    #[tokio::test]
    async fn a_collaborator_with_assignments_blocking_and_making_public_are_asked() {
        let h = Harness::start(Setup::gitea()).await;
        h.forge.seed_repo("alice", "demo");
        let issues = "/api/v1/repos/alice/demo/issues";
        h.forge.script(answer(issues, json!([{"number": 1}]), Some(3)));
        let remove = json!({"owner": "alice", "repo": "demo", "collaborator": "bob"});
        let question = asked(&h, "repoDeleteCollaborator", remove.clone()).await;
        assert!(
            question.contains("Remove collaborator bob from alice/demo")
                && question.contains("(they are assigned to 3 now)"),
            "{question}"
        );
        let asked_with = h.tool_requests().into_iter().find(|r| r.raw_path == issues).unwrap();
        let query = asked_with.raw_query.unwrap_or_default();
        assert!(query.contains("assigned_by=bob") && query.contains("state=all"), "{query}");
        h.forge.clear_scripts();
        h.forge.script(answer(issues, json!([]), Some(0)));
        unasked(&h, "repoDeleteCollaborator", remove).await;
        // Blocking a user always is.
        let question = asked(&h, "userBlockUser", json!({"username": "mallory"})).await;
        assert!(question.contains("Block mallory"), "{question}");
        // Made public: asked while it is private, not when it is public already.
        h.forge.script(answer("/api/v1/repos/alice/demo", json!({"name": "demo", "private": true}), None));
        let public = json!({"owner": "alice", "repo": "demo", "body": {"private": false}});
        let question = asked(&h, "repoEdit", public.clone()).await;
        assert!(
            question.contains("Make alice/demo public") && question.contains("(it is private now)"),
            "{question}"
        );
        h.forge.clear_scripts();
        h.forge.script(answer("/api/v1/repos/alice/demo", json!({"name": "demo", "private": false}), None));
        unasked(&h, "repoEdit", public).await;
        unasked(
            &h,
            "repoEdit",
            json!({"owner": "alice", "repo": "demo", "body": {"description": "d", "archived": true}}),
        )
        .await;
        h.stop().await;
    }
}
