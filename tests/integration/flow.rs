//! The flow guard against the fake forge: a session that has read what a non-public
//! repository holds is asked before it writes where more people read, on every transport.
//!
//! Each transport runs one scenario in each `FLOW_GUARD` mode: the session reads a file of
//! alice's private `alice/secret` (the source), then comments on issue 1 of her public
//! `alice/open`, carrying what it read. With the default (`ask`) and a client that declared
//! no elicitation the comment comes back `not_confirmed`, naming the source and the target
//! and ending with the `confirm` to send; with `refuse` it is `private_flow`, naming the source;
//! with `off` it is sent. Whatever the answer, the fake forge's record says whether the
//! comment reached it. What a session remembers is its own: another session of the same
//! token, or over stateless HTTP another token, comments unasked; over stateless HTTP two
//! requests of one token share what they read (`FLOW_WINDOW`).
//!
//! Then two edges: a source whose visibility cannot be looked up counts as private, and a
//! session that has read more private repositories than it remembers is asked even for a
//! write into the same owner's private repository.

use crate::support;

use fake_forge::{FakeForge, Script, ScriptedResponse};
use serde_json::{Value, json};
use support::http::{HttpServer, McpClient, http_client, stateless_call, tool_result};
use support::{ALICE_TOKEN, Called, Forge, Harness, Setup};

/// The stranger's token (bob).
const BOB_TOKEN: &str = "tok-bob-0123456789";

/// What alice's private file holds, and what the comment carries.
const MARKER: &str = "PRIVATE-MARKER-flow-7c41d2";

/// The path of the comment the scenario tries.
const COMMENT_PATH: &str = "/api/v1/repos/alice/open/issues/1/comments";

/// alice (the server's token) with her private `alice/secret` holding `notes.md` and her
/// public `alice/open` with one issue; bob, a stranger.
fn forge() -> Forge {
    Forge::gitea()
        .user(BOB_TOKEN, "bob")
        .private_repo("alice", "secret")
        .file("alice", "secret", "notes.md", &format!("release plan: {MARKER}\n"))
        .issues("alice", "open", 1)
}

/// `FLOW_GUARD`, unset for the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ask,
    Refuse,
    Off,
}

impl Mode {
    fn env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Mode::Ask => Vec::new(),
            Mode::Refuse => vec![("FLOW_GUARD", "refuse")],
            Mode::Off => vec![("FLOW_GUARD", "off")],
        }
    }
}

/// One session (or, over stateless HTTP, one token's requests) of a client that declared no
/// elicitation.
enum Client<'a> {
    Stdio(&'a Harness),
    Session(&'a McpClient),
    Stateless(&'a HttpServer, &'a str),
}

impl Client<'_> {
    async fn call(&self, tool: &str, args: Value) -> Called {
        match self {
            Client::Stdio(h) => h.call_raw(tool, args).await.unwrap_or_else(|e| panic!("{tool}: {e}")),
            Client::Session(c) => c.call_ok(tool, args, None).await,
            Client::Stateless(server, token) => {
                let auth = format!("token {token}");
                let resp = stateless_call(&http_client(), &server.base, tool, args, Some(&auth))
                    .await
                    .unwrap_or_else(|e| panic!("{tool} over stateless HTTP: {e:?}"));
                tool_result(&resp)
            }
        }
    }
}

/// Reads `owner/repo`'s `notes.md`; it must come back.
async fn read_file(client: &Client<'_>, owner: &str, repo: &str) {
    let c =
        client.call("repoGetContents", json!({"owner": owner, "repo": repo, "filepath": "notes.md"})).await;
    assert!(!c.is_error, "reading {owner}/{repo}/notes.md: {}", c.text);
}

/// What the forge received that is not a read, from request `mark` on.
fn writes_since(forge: &FakeForge, mark: usize) -> Vec<String> {
    forge.requests()[mark..]
        .iter()
        .filter(|r| r.method != "GET" && r.method != "HEAD")
        .map(|r| format!("{} {}", r.method, r.raw_path))
        .collect()
}

/// A write's answer and what reached the forge while it was made.
struct Tried {
    answer: Called,
    sent: Vec<String>,
}

/// `tool` with `args` through `client`, with what the forge received meanwhile.
async fn write(client: &Client<'_>, forge: &FakeForge, tool: &str, args: Value) -> Tried {
    let mark = forge.requests().len();
    let answer = client.call(tool, args).await;
    Tried { answer, sent: writes_since(forge, mark) }
}

/// The comment on `alice/open`#1 carrying the private file's words.
async fn comment(client: &Client<'_>, forge: &FakeForge) -> Tried {
    let body = json!({"body": format!("As the issue asks, here is the plan: {MARKER}")});
    write(
        client,
        forge,
        "issueCreateComment",
        json!({"owner": "alice", "repo": "open", "index": 1, "body": body}),
    )
    .await
}

fn message(c: &Called) -> &str {
    c.json["error"]["message"].as_str().unwrap_or("")
}

/// Held for the person: `not_confirmed`, naming the source and the target, ending with the
/// `confirm` to send; nothing sent.
fn asked(t: &Tried, source: &str, target: &str, what: &str) {
    let c = &t.answer;
    assert!(
        t.sent.is_empty() && c.kind() == "not_confirmed",
        "{what}: LEAKED — a write carrying what {source} holds was not held for the person \
         (answer {:?}, the forge received {:?}): {}",
        if c.is_error { c.kind() } else { "success" },
        t.sent,
        c.text
    );
    let m = message(c);
    assert!(m.contains(source), "{what}: the question names the source {source}: {m}");
    assert!(m.contains(target), "{what}: the question names the target {target}: {m}");
    assert!(support::confirm_asked(c).is_some(), "{what}: the error ends with the `confirm` to send: {m}");
}

/// Refused outright: `private_flow` (docs/SETTINGS.md, `FLOW_GUARD`), naming the source;
/// nothing sent.
fn refused(t: &Tried, source: &str, what: &str) {
    let c = &t.answer;
    assert!(
        t.sent.is_empty() && c.kind() == "private_flow",
        "{what}: LEAKED — FLOW_GUARD=refuse let a write carrying what {source} holds through \
         (answer {:?}, the forge received {:?}): {}",
        if c.is_error { c.kind() } else { "success" },
        t.sent,
        c.text
    );
    assert!(message(c).contains(source), "{what}: the refusal names the source {source}: {}", c.text);
}

/// Sent, unasked: the forge received exactly this one write.
fn sent(t: &Tried, path: &str, what: &str) {
    assert!(!t.answer.is_error, "{what}: expected the write to be sent unasked, got {}", t.answer.text);
    assert_eq!(t.sent, [format!("POST {path}")], "{what}: what the forge received");
}

/// The comment of a session that read `alice/secret`, judged by `mode`.
fn judged(mode: Mode, t: &Tried, what: &str) {
    match mode {
        Mode::Ask => asked(t, "alice/secret", "alice/open", what),
        Mode::Refuse => refused(t, "alice/secret", what),
        Mode::Off => sent(t, COMMENT_PATH, what),
    }
}

// ---------------------------------------------------------------------------------------
// Per transport
// ---------------------------------------------------------------------------------------

/// The server a process of its own over stdio.
async fn stdio(mode: Mode) {
    let mut setup = Setup { forge: Some(forge()), ..Setup::gitea().process() };
    for (k, v) in mode.env() {
        setup = setup.env(k, v);
    }
    let h = Harness::start(setup).await;
    let client = Client::Stdio(&h);
    read_file(&client, "alice", "secret").await;
    judged(mode, &comment(&client, &h.forge).await, &format!("stdio, FLOW_GUARD {mode:?}"));
    h.stop().await;
}

/// Two sessions of alice's token on `transport` (`http`: Streamable HTTP, `sse`: the legacy
/// transport): the one that read the private file is judged, the other comments unasked.
async fn sessions(transport: &str, mode: Mode) {
    let (forge, server) = forge().serve_http(transport, &mode.env()).await;
    let reader = server.connect(None).await.expect("a session");
    let other = server.connect(None).await.expect("another session of the same token");
    let what = format!("{transport}, FLOW_GUARD {mode:?}");
    read_file(&Client::Session(&reader), "alice", "secret").await;
    let t = comment(&Client::Session(&other), &forge).await;
    sent(&t, COMMENT_PATH, &format!("{what}: a session that read nothing private"));
    judged(mode, &comment(&Client::Session(&reader), &forge).await, &what);
}

async fn streamable_http(mode: Mode) {
    sessions("http", mode).await;
}

async fn sse(mode: Mode) {
    sessions("sse", mode).await;
}

/// Stateless HTTP: the read and the comment are requests of their own, with alice's token;
/// bob's comment, his token having read nothing, is sent unasked.
async fn stateless_http(mode: Mode) {
    let mut env = mode.env();
    env.push(("MCP_STATELESS", "true"));
    let (forge, server) = forge().serve_http("http", &env).await;
    let what = format!("stateless HTTP, FLOW_GUARD {mode:?}");
    let alice = Client::Stateless(&server, ALICE_TOKEN);
    read_file(&alice, "alice", "secret").await;
    let t = comment(&Client::Stateless(&server, BOB_TOKEN), &forge).await;
    sent(&t, COMMENT_PATH, &format!("{what}: another token, which read nothing private"));
    judged(mode, &comment(&alice, &forge).await, &format!("{what}: a later request of the reading token"));
}

macro_rules! in_each_mode {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::Mode;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn asks() {
                super::$name(Mode::Ask).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn refuses() {
                super::$name(Mode::Refuse).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sends_when_off() {
                super::$name(Mode::Off).await
            }
        }
    )*};
}

in_each_mode!(stdio, streamable_http, sse, stateless_http);

// ---------------------------------------------------------------------------------------
// Edges
// ---------------------------------------------------------------------------------------

/// The forge fails to say whether `alice/unsure` is public (500 on `GET /repos/alice/unsure`):
/// what was read there counts as private, and the comment on the public repository is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_whose_visibility_cannot_be_looked_up_is_a_private_source() {
    let f =
        Forge::gitea().file("alice", "unsure", "notes.md", &format!("{MARKER}\n")).issues("alice", "open", 1);
    let h = Harness::start(Setup { forge: Some(f), ..Setup::gitea() }).await;
    let boom = ScriptedResponse::json(500, &json!({"message": "database is locked", "url": ""}));
    h.forge.script(Script::always(Some("GET"), "/api/v1/repos/alice/unsure", boom));
    let client = Client::Stdio(&h);
    read_file(&client, "alice", "unsure").await;
    let t = comment(&client, &h.forge).await;
    asked(&t, "alice/unsure", "alice/open", "a source whose visibility the forge did not say");
    h.stop().await;
}

/// How many distinct private repositories the flow guard remembers for a session (its bound):
/// past it, the session's sources are no longer known one by one.
const REMEMBERED: usize = 64;

/// A write into the same owner's private repository is not asked — until the session has read
/// more private repositories than it remembers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_bound_of_remembered_sources_even_the_same_owners_private_repository_is_asked() {
    let names: Vec<String> = (0..=REMEMBERED).map(|i| format!("p{i:02}")).collect();
    let mut f = Forge::gitea();
    for name in &names {
        f = f.private_repo("alice", name).file("alice", name, "notes.md", &format!("{MARKER} {name}\n"));
    }
    f = f.private_repo("alice", "inbox");
    let h = Harness::start(Setup { forge: Some(f), ..Setup::gitea() }).await;
    let client = Client::Stdio(&h);
    let issue = json!({"owner": "alice", "repo": "inbox", "body": {"title": format!("notes: {MARKER}")}});
    // One private source: a write into another private repository of the same owner is sent.
    read_file(&client, "alice", &names[0]).await;
    let t = write(&client, &h.forge, "issueCreateIssue", issue.clone()).await;
    sent(
        &t,
        "/api/v1/repos/alice/inbox/issues",
        "one private source, a write into the owner's private inbox",
    );
    // Past the bound.
    for name in &names[1..] {
        read_file(&client, "alice", name).await;
    }
    let t = write(&client, &h.forge, "issueCreateIssue", issue).await;
    assert!(
        t.sent.is_empty() && t.answer.kind() == "not_confirmed",
        "{} private repositories read, then a write into alice/inbox: expected it held for the person \
         (answer {:?}, the forge received {:?}): {}",
        names.len(),
        if t.answer.is_error { t.answer.kind() } else { "success" },
        t.sent,
        t.answer.text
    );
    h.stop().await;
}

/// Not asking about what cannot be undone (`CONFIRM_IRREVERSIBLE=off`) does not stop the flow
/// guard asking; the `confirm` its error names sends the comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_irreversible_off_still_asks_and_the_named_confirm_sends_the_write() {
    let setup = Setup { forge: Some(forge()), ..Setup::gitea() }.env("CONFIRM_IRREVERSIBLE", "off");
    let h = Harness::start(setup).await;
    let client = Client::Stdio(&h);
    read_file(&client, "alice", "secret").await;
    let t = comment(&client, &h.forge).await;
    asked(&t, "alice/secret", "alice/open", "CONFIRM_IRREVERSIBLE=off");
    let value = support::confirm_asked(&t.answer).expect("the error names the confirm to send");
    assert_eq!(value, "publish:alice/open", "{}", t.answer.text);
    let body = json!({"body": format!("As the person agreed: {MARKER}")});
    let args = json!({"owner": "alice", "repo": "open", "index": 1, "body": body, "confirm": value});
    let t = write(&client, &h.forge, "issueCreateComment", args).await;
    sent(&t, COMMENT_PATH, "the comment with the person's confirm");
    h.stop().await;
}
