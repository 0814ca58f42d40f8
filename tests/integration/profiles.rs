//! Several forges in one server (a profiles file): calls routed by `forge`, by `repositories`
//! patterns and to the default; one tool list for all; and nothing of one forge ever sent to
//! another. Two recording fake forges, one Gitea and one Forgejo, with the same login under
//! different tokens, so that a call sent to the wrong forge, or with the wrong token, shows
//! in what they received.

use fake_forge::FakeForge;
use serde_json::{Value, json};

use crate::support::{Called, DEFAULT_TOOL_COUNT, Forge, Server, call_on, settings_of, write_profiles};

const WORK_TOKEN: &str = "tok-work-alice-5b1c";
const HOME_TOKEN: &str = "tok-home-alice-9d2e";

/// Two forges and a server serving both: `work` (Gitea, the default) and `home` (Forgejo,
/// `repositories = ["oss/*"]`), alice on each with that forge's token.
struct Two {
    work: FakeForge,
    home: FakeForge,
    server: Server,
    _dir: tempfile::TempDir,
}

/// The profiles file of `Two`, with `more` appended (another profile, say).
fn profiles(work: &str, home: &str, more: &str) -> String {
    format!(
        r#"default = "work"

[forges.work]
url = "{work}"
flavor = "gitea"
token_env = "WORK_TOKEN"

[forges.home]
url = "{home}"
flavor = "forgejo"
token_env = "HOME_TOKEN"
repositories = ["oss/*"]
{more}"#
    )
}

impl Two {
    async fn start(more: &str) -> Two {
        let work = Forge::gitea().only_users(&[(WORK_TOKEN, "alice")]).repo("alice", "demo").start().await;
        let home = Forge::forgejo()
            .only_users(&[(HOME_TOKEN, "alice")])
            .repo("alice", "demo")
            .repo("oss", "lib")
            .start()
            .await;
        let (dir, path) = write_profiles(&profiles(&work.base_url(), &home.base_url(), more));
        let env = [("GITEA_PROFILES", path.as_str()), ("WORK_TOKEN", WORK_TOKEN), ("HOME_TOKEN", HOME_TOKEN)];
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        let server = Server::of_settings(settings_of(&["serve"], &env)).await;
        Two { work, home, server, _dir: dir }
    }

    async fn call(&self, tool: &str, args: Value) -> Called {
        call_on(&self.server.client, tool, args).await.unwrap_or_else(|e| panic!("{tool}: {e}"))
    }
}

/// The requests `forge` received for tools (not the server's own `/version` and `/user`).
fn tool_requests(forge: &FakeForge) -> Vec<fake_forge::Recorded> {
    forge
        .requests()
        .into_iter()
        .filter(|r| r.raw_path != "/api/v1/version" && r.raw_path != "/api/v1/user")
        .collect()
}

/// Every request `forge` received carries `token` and no other credential.
fn only_with(forge: &FakeForge, token: &str, other: &str) {
    for r in forge.requests() {
        assert_eq!(r.header("authorization"), Some(format!("token {token}").as_str()), "{}", r.raw_path);
        let all = format!("{:?} {:?} {}", r.headers, r.raw_query, String::from_utf8_lossy(&r.body));
        assert!(!all.contains(other), "{} carries the other forge's token", r.raw_path);
    }
}

#[tokio::test]
async fn one_session_reads_and_writes_on_two_forges_by_name_by_pattern_and_by_default() {
    let two = Two::start("").await;
    // The default forge, unnamed.
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(got.json["forge"], "work");
    assert_eq!(got.json["identity"]["login"], "alice");
    // Named.
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "demo", "forge": "home"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(got.json["forge"], "home");
    // By pattern: oss/* is home's.
    let got = two.call("repoGet", json!({"owner": "oss", "repo": "lib"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(got.json["forge"], "home");
    // The call tool and the raw tool route alike.
    let called = json!({"operation_id": "repoGet", "arguments": {"owner": "oss", "repo": "lib"}});
    assert_eq!(two.call("gitea_call_operation", called).await.json["forge"], "home");
    let raw = json!({"method": "GET", "path": "/repos/alice/demo", "forge": "home"});
    assert_eq!(two.call("gitea_api_request", raw).await.json["forge"], "home");
    // A write to each, as that forge's own user.
    for (forge, owner, repo) in [("work", "alice", "demo"), ("home", "oss", "lib")] {
        let args =
            json!({"owner": owner, "repo": repo, "body": {"title": format!("on {forge}")}, "forge": forge});
        let got = two.call("issueCreateIssue", args).await;
        assert!(!got.is_error, "{}", got.text);
        assert_eq!(got.json["forge"], forge);
    }
    let paths = |f: &FakeForge| {
        tool_requests(f).iter().map(|r| format!("{} {}", r.method, r.raw_path)).collect::<Vec<_>>()
    };
    assert_eq!(paths(&two.work), ["GET /api/v1/repos/alice/demo", "POST /api/v1/repos/alice/demo/issues"]);
    assert_eq!(
        paths(&two.home),
        [
            "GET /api/v1/repos/alice/demo",
            "GET /api/v1/repos/oss/lib",
            "GET /api/v1/repos/oss/lib",
            "GET /api/v1/repos/alice/demo",
            "POST /api/v1/repos/oss/lib/issues"
        ]
    );
    only_with(&two.work, WORK_TOKEN, HOME_TOKEN);
    only_with(&two.home, HOME_TOKEN, WORK_TOKEN);
}

#[tokio::test]
async fn an_operation_only_forgejo_has_is_refused_on_the_gitea_forge_saying_where_it_exists() {
    let two = Two::start("").await;
    for (tool, args) in [
        ("orgGetQuota", json!({"org": "oss", "forge": "work"})),
        (
            "gitea_call_operation",
            json!({"operation_id": "orgGetQuota", "arguments": {"org": "oss"}, "forge": "work"}),
        ),
    ] {
        let got = two.call(tool, args).await;
        assert!(got.is_error, "{}", got.text);
        assert_eq!(got.kind(), "invalid_arguments");
        let message = got.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("orgGetQuota is not an operation of the forge work (Gitea"), "{message}");
        assert!(message.contains("it exists on home (Forgejo)"), "{message}");
    }
    assert!(tool_requests(&two.work).is_empty() && tool_requests(&two.home).is_empty());
    // On the forge that has it, it is sent there: named, or by the pattern its route matches.
    two.call("orgGetQuota", json!({"org": "oss", "forge": "home"})).await;
    assert_eq!(tool_requests(&two.home).last().unwrap().raw_path, "/api/v1/orgs/oss/quota");
    let called = json!({"operation_id": "orgGetQuota", "arguments": {"org": "oss"}});
    assert_eq!(two.call("gitea_call_operation", called).await.json["forge"], "home");
    assert_eq!(tool_requests(&two.home).len(), 2);
}

#[tokio::test]
async fn an_unknown_forge_and_two_matching_patterns_are_each_one_clear_error() {
    let two = Two::start(
        r#"
[forges.mirror]
url = "http://127.0.0.1:9/"
flavor = "gitea"
repositories = ["oss/lib"]
"#,
    )
    .await;
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "demo", "forge": "hom"})).await;
    assert_eq!(got.kind(), "invalid_arguments");
    assert_eq!(got.json["error"]["path"], "/forge");
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(
        message
            .contains("\"hom\" is not a forge of this server; its forges are work (default), home, mirror"),
        "{message}"
    );
    let got = two.call("repoGet", json!({"owner": "oss", "repo": "lib"})).await;
    assert_eq!(got.kind(), "invalid_arguments");
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("the forges home and mirror both match"), "{message}");
    assert!(tool_requests(&two.work).is_empty() && tool_requests(&two.home).is_empty());
}

#[tokio::test]
async fn a_forge_that_is_down_at_start_does_not_stop_the_others_and_its_calls_name_it() {
    // Port 9 (discard) refuses connections here; `auto` must ask it.
    let two = Two::start(
        r#"
[forges.down]
url = "http://127.0.0.1:9/"
"#,
    )
    .await;
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "demo", "forge": "down"})).await;
    assert_eq!(got.kind(), "connection_failed", "{}", got.text);
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("the forge down (http://127.0.0.1:9/) could not be served"), "{message}");
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "demo"})).await;
    assert!(!got.is_error, "{}", got.text);
}

#[tokio::test]
async fn one_tool_list_for_three_forges_takes_forge_and_costs_at_most_five_percent_more() {
    let three = Two::start(
        r#"
[forges.third]
url = "http://127.0.0.1:9/"
flavor = "gitea"
"#,
    )
    .await;
    let tools = three.server.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), DEFAULT_TOOL_COUNT);
    for t in &tools {
        assert_eq!(t.input_schema["properties"]["forge"], json!({"type": "string"}), "{}", t.name);
    }
    let info = three.server.client.peer_info().unwrap();
    let instructions = info.instructions.as_deref().unwrap();
    assert!(instructions.contains("work (Gitea"), "{instructions}");
    assert!(
        instructions.contains("home (Forgejo") && instructions.contains("repositories oss/*"),
        "{instructions}"
    );
    // Against one forge of the default's flavor.
    let one = crate::support::Harness::start(crate::support::Setup::gitea()).await;
    let bytes = |t: &[rmcp::model::Tool]| serde_json::to_vec(t).unwrap().len();
    let (many, single) = (bytes(&tools), bytes(&one.tools().await));
    let ratio = many as f64 / single as f64;
    eprintln!("tools/list: {single} B with one forge, {many} B with three ({ratio:.3}×)");
    assert!(ratio <= 1.05, "{many} B against {single} B: {ratio:.3}×");
}

/// Many calls at once, routed by name, by pattern and by default to two recording forges:
/// every request reaches the forge the call was for, with that forge's token alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_to_two_forges_never_carry_one_forge_s_credential_to_the_other() {
    let two = Two::start("").await;
    for i in 0..20 {
        two.work.seed_repo("alice", &format!("w{i}"));
        two.home.seed_repo("alice", &format!("w{i}"));
        two.home.seed_repo("oss", &format!("h{i}"));
    }
    let calls = (0..60).map(|i| {
        let (args, forge) = match i % 3 {
            0 => (json!({"owner": "alice", "repo": format!("w{}", i % 20)}), "work"),
            1 => (json!({"owner": "alice", "repo": format!("w{}", i % 20), "forge": "home"}), "home"),
            _ => (json!({"owner": "oss", "repo": format!("h{}", i % 20)}), "home"),
        };
        let two = &two;
        async move { (two.call("repoGet", args).await, forge) }
    });
    for (got, forge) in futures::future::join_all(calls).await {
        assert!(!got.is_error, "{}", got.text);
        assert_eq!(got.json["forge"], forge);
    }
    assert_eq!(tool_requests(&two.work).len(), 20);
    assert_eq!(tool_requests(&two.home).len(), 40);
    assert!(tool_requests(&two.work).iter().all(|r| !r.raw_path.contains("/oss/")));
    only_with(&two.work, WORK_TOKEN, HOME_TOKEN);
    only_with(&two.home, HOME_TOKEN, WORK_TOKEN);
}

/// A session that read a private repository on one forge and writes to another forge is
/// asked, even to a private repository of an owner of the same name there: it is another
/// owner. The question names both with their forges. On the forge it read from, the same
/// owner's private repository is kept, as with one forge.
#[tokio::test]
async fn a_private_read_on_one_forge_bounds_a_write_to_another_forge() {
    let two = Two::start("").await;
    two.home.seed_private_repo("alice", "secret");
    two.home.seed_private_repo("alice", "diary");
    two.work.seed_private_repo("alice", "notes");
    let got = two.call("repoGet", json!({"owner": "alice", "repo": "secret", "forge": "home"})).await;
    assert!(!got.is_error, "{}", got.text);
    let issue = |forge: &str, repo: &str| json!({"owner": "alice", "repo": repo, "body": {"title": "t"}, "forge": forge});
    let got = two.call("issueCreateIssue", issue("work", "notes")).await;
    assert_eq!(got.kind(), "not_confirmed", "{}", got.text);
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("work:alice/notes") && message.contains("home:alice/secret"), "{message}");
    assert!(tool_requests(&two.work).iter().all(|r| r.method == "GET"));
    let got = two.call("issueCreateIssue", issue("home", "diary")).await;
    assert!(!got.is_error, "the same owner's private repository on the same forge: {}", got.text);
}

/// Over HTTP each forge's credential comes from its own header (`Authorization` for the
/// default forge): many callers at once, each with tokens for one forge, the other or both,
/// or none (the forges' own credentials). Every request reaches the forge its call was for
/// with the caller's token for that forge; a call to a forge the request carries no token for
/// is refused, naming the forge and the header, and sends nothing anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_http_callers_of_two_forges_never_have_a_call_made_with_another_forge_s_credential() {
    const USERS: usize = 12;
    let token = |forge: char, i: usize| format!("tok-{forge}-{i:02}-7f3a");
    let mut a_users: Vec<(String, String)> =
        (0..USERS).map(|i| (token('a', i), format!("user{i:02}"))).collect();
    let mut b_users =
        a_users.iter().enumerate().map(|(i, (_, l))| (token('b', i), l.clone())).collect::<Vec<_>>();
    a_users.push(("tok-a-global-7f3a".into(), "svc-a".into()));
    b_users.push(("tok-b-global-7f3a".into(), "svc-b".into()));
    let pairs = |u: &[(String, String)]| {
        u.iter().map(|(t, l)| (t.as_str().to_owned(), l.clone())).collect::<Vec<_>>()
    };
    let a = Forge::gitea().options(|o| o.users = pairs(&a_users)).start().await;
    let b = Forge::forgejo().options(|o| o.users = pairs(&b_users)).start().await;
    for i in 0..USERS {
        for f in [&a, &b] {
            f.seed_repo(&format!("user{i:02}"), "r");
        }
        b.seed_repo("bee", &format!("r{i:02}"));
        a.seed_repo("bee", &format!("r{i:02}"));
    }
    let file = format!(
        "default = \"a\"\n[forges.a]\nurl = \"{}\"\nflavor = \"gitea\"\ntoken_env = \"A_TOKEN\"\n[forges.b]\nurl = \"{}\"\nflavor = \"forgejo\"\ntoken_env = \"B_TOKEN\"\nrepositories = [\"bee/*\"]\n",
        a.base_url(),
        b.base_url()
    );
    let (_dir, path) = write_profiles(&file);
    let env: Vec<(String, String)> = [
        ("GITEA_PROFILES", path.as_str()),
        ("A_TOKEN", "tok-a-global-7f3a"),
        ("B_TOKEN", "tok-b-global-7f3a"),
    ]
    .iter()
    .map(|(k, v)| ((*k).into(), (*v).into()))
    .collect();
    let settings = settings_of(&["serve", "--transport", "http", "--listen", "127.0.0.1:0"], &env);
    let server =
        crate::support::http::HttpServer::of_settings(settings, "http", "127.0.0.1:0").await.ready().await;
    let http = crate::support::http::http_client();
    let url = server.url("/mcp");

    // Who: user i sends tokens for a (Authorization), for b (its header), both, or neither.
    #[derive(Clone, Copy, Debug)]
    enum Carries {
        A,
        B,
        Both,
        Neither,
    }
    let carries = |i: usize| [Carries::Both, Carries::A, Carries::B, Carries::Neither][i % 4];
    // What: each call's forge, and how it gets there.
    let mut plan = Vec::new();
    for i in 0..USERS {
        let user = format!("user{i:02}");
        plan.push((i, 'a', json!({"owner": user, "repo": "r"})));
        plan.push((i, 'b', json!({"owner": user, "repo": "r", "forge": "b"})));
        plan.push((i, 'b', json!({"owner": "bee", "repo": format!("r{i:02}")})));
    }
    let calls = plan.iter().map(|(i, forge, args)| {
        let (http, url, carries) = (&http, &url, carries(*i));
        let mut req = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", crate::support::http::ACCEPT_BOTH)
            .header("mcp-protocol-version", crate::support::http::STATELESS_VERSION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", "repoGet");
        if matches!(carries, Carries::A | Carries::Both) {
            req = req.header("authorization", format!("token {}", token('a', *i)));
        }
        if matches!(carries, Carries::B | Carries::Both) {
            req = req.header("x-mcp-forge-authorization-b", format!("token {}", token('b', *i)));
        }
        let meta = json!({"io.modelcontextprotocol/protocolVersion": crate::support::http::STATELESS_VERSION,
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "repoGet", "arguments": args, "_meta": meta}});
        let req = req.body(body.to_string());
        async move {
            let reply: Value =
                serde_json::from_str(&req.send().await.unwrap().text().await.unwrap()).unwrap();
            let text = reply["result"]["content"][0]["text"].as_str().unwrap().to_owned();
            (
                *i,
                *forge,
                carries,
                reply["result"]["isError"] == json!(true),
                serde_json::from_str::<Value>(&text).unwrap(),
            )
        }
    });
    let results = futures::future::join_all(calls).await;
    let (mut to_a, mut to_b) = (0, 0);
    for (i, forge, carries, is_error, got) in results {
        let has = matches!(
            (forge, carries),
            (_, Carries::Neither | Carries::Both) | ('a', Carries::A) | ('b', Carries::B)
        );
        if has {
            assert!(!is_error, "user{i:02} to {forge} ({carries:?}): {got}");
            assert_eq!(got["forge"], forge.to_string());
            let login = if matches!(carries, Carries::Neither) {
                format!("svc-{forge}")
            } else {
                format!("user{i:02}")
            };
            assert_eq!(got["identity"]["login"], login, "user{i:02} to {forge} ({carries:?})");
            if forge == 'a' { to_a += 1 } else { to_b += 1 }
        } else {
            assert_eq!(got["error"]["kind"], "unauthorized", "user{i:02} to {forge} ({carries:?}): {got}");
            let message = got["error"]["message"].as_str().unwrap();
            assert!(message.contains(&format!("no credential for the forge {forge}")), "{message}");
            assert!(message.contains(&format!("X-MCP-Forge-Authorization-{forge}")), "{message}");
        }
    }
    // What each forge received: its own planned calls (and look-ups of who a token is), each
    // with a token of that forge, and no byte of the other forge's tokens.
    let a_tokens: Vec<&str> = a_users.iter().map(|(t, _)| t.as_str()).collect();
    let b_tokens: Vec<&str> = b_users.iter().map(|(t, _)| t.as_str()).collect();
    for (forge, received, own, other, planned) in
        [("a", &a, &a_tokens, &b_tokens, to_a), ("b", &b, &b_tokens, &a_tokens, to_b)]
    {
        let requests = received.requests();
        let calls: Vec<_> = requests.iter().filter(|r| r.raw_path.starts_with("/api/v1/repos/")).collect();
        assert_eq!(calls.len(), planned, "calls received by {forge}");
        for r in requests.iter().filter(|r| r.raw_path != "/api/v1/version") {
            let sent = r.header("authorization").and_then(|h| h.strip_prefix("token ")).unwrap_or_default();
            assert!(own.contains(&sent), "{forge} got {} with a token not its own", r.raw_path);
            let all = format!("{:?} {:?} {}", r.headers, r.raw_query, String::from_utf8_lossy(&r.body));
            assert!(
                !other.iter().any(|t| all.contains(t)),
                "{forge} got another forge's token at {}",
                r.raw_path
            );
        }
        // A call goes to the forge it is for: the repositories only the other routes to never come here.
        if forge == "a" {
            assert!(
                calls.iter().all(|r| !r.raw_path.starts_with("/api/v1/repos/bee/")),
                "b's calls reached a"
            );
        }
    }
}

/// A forge header that names no forge, comes twice, holds no usable token, holds a token this
/// server issued, or doubles `Authorization` for the default forge, is answered 400 with what
/// to fix (never 401: no client starts a sign-in because of it), and nothing is sent.
#[tokio::test]
async fn a_wrong_forge_header_is_a_clear_400_and_nothing_is_sent() {
    let work = Forge::gitea().only_users(&[(WORK_TOKEN, "alice")]).repo("alice", "demo").start().await;
    let home = Forge::forgejo().only_users(&[(HOME_TOKEN, "alice")]).start().await;
    let (_dir, path) = write_profiles(&profiles(&work.base_url(), &home.base_url(), ""));
    let env: Vec<(String, String)> =
        [("GITEA_PROFILES", path.as_str()), ("WORK_TOKEN", WORK_TOKEN), ("HOME_TOKEN", HOME_TOKEN)]
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
    let settings = settings_of(&["serve", "--transport", "http", "--listen", "127.0.0.1:0"], &env);
    let server =
        crate::support::http::HttpServer::of_settings(settings, "http", "127.0.0.1:0").await.ready().await;
    let before = (work.requests().len(), home.requests().len());
    let http = crate::support::http::http_client();
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[("x-mcp-forge-authorization-hom", "token x")],
            "names no forge of this server; its forges are work, home",
        ),
        (
            &[("x-mcp-forge-authorization-home", "token x"), ("x-mcp-forge-authorization-home", "token y")],
            "send the X-MCP-Forge-Authorization-home header once",
        ),
        (
            &[("x-mcp-forge-authorization-home", "x")],
            "must be \\\"token <token>\\\" or \\\"Bearer <token>\\\"",
        ),
        (&[("x-mcp-forge-authorization-home", "Bearer aegis-at.abc")], "carries a token this server issued"),
        (
            &[("authorization", "token t1"), ("x-mcp-forge-authorization-work", "token t2")],
            "two credentials for the forge work",
        ),
    ];
    for (headers, says) in cases {
        let mut req = http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", crate::support::http::ACCEPT_BOTH)
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 400, "{headers:?}: {body}");
        assert!(body.contains(says), "{headers:?}: {body}");
    }
    assert_eq!((work.requests().len(), home.requests().len()), before);
}

/// A resource URI names its forge (`gitea://{forge}/…`, as the templates say) and is read
/// there alone; one without a forge goes where a call would; a forge no profile has is an
/// error that names the forges, and reads nothing.
#[tokio::test]
async fn resources_are_read_on_the_forge_their_uri_names() {
    use rmcp::model::{ReadResourceRequestParams, ResourceContents};
    let two = Two::start("").await;
    two.work.seed_file("alice", "demo", "README.md", b"work's readme");
    two.home.seed_file("alice", "demo", "README.md", b"home's readme");
    let templates = two.server.client.list_all_resource_templates().await.unwrap();
    assert!(templates.iter().all(|t| t.uri_template.starts_with("gitea://{forge}/")), "{templates:?}");
    let read = async |uri: &str| {
        let r = two.server.client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap();
        let ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else { panic!("text") };
        serde_json::from_str::<Value>(text).unwrap()
    };
    let home = read("gitea://home/repos/alice/demo/contents/README.md").await;
    assert_eq!(
        (home["forge"].as_str(), home["data"].as_str()),
        (Some("home"), Some("home's readme")),
        "{home}"
    );
    let work = read("gitea://repos/alice/demo/contents/README.md").await;
    assert_eq!(
        (work["forge"].as_str(), work["data"].as_str()),
        (Some("work"), Some("work's readme")),
        "{work}"
    );
    let (w, h) = (tool_requests(&two.work).len(), tool_requests(&two.home).len());
    let unknown = two
        .server
        .client
        .read_resource(ReadResourceRequestParams::new("gitea://hom/repos/alice/demo/issues/1"))
        .await;
    let message = format!("{unknown:?}");
    assert!(message.contains("not a forge of this server"), "{message}");
    assert_eq!((tool_requests(&two.work).len(), tool_requests(&two.home).len()), (w, h));
}

/// A call to one forge whose arguments hold another forge's credential (its profile's token,
/// or the token the request carries for it) is refused before anything is sent: a migration
/// from the other forge with its token, a push mirror's password.
#[tokio::test]
async fn a_call_holding_another_forge_s_credential_is_refused_and_sends_nothing() {
    let two = Two::start("").await;
    let before = (two.work.requests().len(), two.home.requests().len());
    let migrate = json!({"body": {"clone_addr": format!("{}alice/demo.git", two.home.base_url()),
        "repo_name": "copy", "auth_token": HOME_TOKEN}});
    let got = two.call("repoMigrate", migrate).await;
    assert_eq!(got.kind(), "denied", "{}", got.text);
    let message = got.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("a credential of the forge home, and it goes to the forge work"), "{message}");
    assert!(!got.text.contains(HOME_TOKEN));
    let mirror = json!({"owner": "oss", "repo": "lib", "body": {"remote_address": "https://example.com/x.git",
        "remote_username": "alice", "remote_password": WORK_TOKEN, "interval": "8h"}});
    let got = two.call("repoAddPushMirror", mirror).await;
    assert_eq!(got.kind(), "denied", "{}", got.text);
    assert_eq!((two.work.requests().len(), two.home.requests().len()), before);
}

/// The discovery tools see every forge: search finds an operation only the Forgejo forge has
/// and says where each one is; its schema is shown from there, and asked of the Gitea forge
/// it says where it exists.
#[tokio::test]
async fn search_finds_operations_of_every_forge_and_says_where_each_is() {
    let two = Two::start("").await;
    let got = two.call("gitea_search_operations", json!({"query": "organization quota", "limit": 10})).await;
    assert!(!got.is_error, "{}", got.text);
    let results = got.json["results"].as_array().unwrap_or_else(|| panic!("{}", got.text));
    let quota =
        results.iter().find(|r| r["operation_id"] == "orgGetQuota").unwrap_or_else(|| panic!("{}", got.text));
    assert_eq!(quota["forges"], json!(["home"]));
    let shared = results.iter().find(|r| r["forges"].as_array().is_some_and(|f| f.len() == 2));
    assert!(shared.is_some(), "an operation both forges have: {}", got.text);
    let got =
        two.call("gitea_get_operation_schema", json!({"operation_id": "orgGetQuota", "forge": "home"})).await;
    assert!(!got.is_error, "{}", got.text);
    assert_eq!(got.json["forges"], json!(["home"]));
    let got = two.call("gitea_get_operation_schema", json!({"operation_id": "orgGetQuota"})).await;
    assert_eq!(got.kind(), "invalid_arguments");
    assert!(got.text.contains("it exists on home (Forgejo)"), "{}", got.text);
}

/// An error a forge answers says which forge answered.
#[tokio::test]
async fn a_forge_s_error_names_the_forge() {
    let two = Two::start("").await;
    let got = two.call("repoGet", json!({"owner": "nobody", "repo": "none", "forge": "home"})).await;
    assert_eq!(got.kind(), "not_found", "{}", got.text);
    assert!(
        got.json["error"]["message"].as_str().unwrap().starts_with("the forge home answered 404"),
        "{}",
        got.text
    );
}

/// A listed operation that some forges lack begins its description with the forges that have it.
#[tokio::test]
async fn a_listed_operation_some_forges_lack_says_where_it_is() {
    let three = Two::start(
        "\n[forges.third]\nurl = \"http://127.0.0.1:9/\"\nflavor = \"gitea\"\ntoolsets = [\"all\"]\n",
    )
    .await;
    let tools = three.server.client.list_all_tools().await.unwrap();
    let blocks = tools.iter().find(|t| t.name == "userListBlocks").expect("a Gitea-only operation is listed");
    let said = blocks.description.as_deref().unwrap_or_default();
    assert!(said.starts_with("Only on work, third. "), "{said}");
    let everywhere = tools.iter().find(|t| t.name == "repoGet").unwrap();
    assert!(!everywhere.description.as_deref().unwrap_or_default().starts_with("Only on"));
}
