//! Three replicas behind HAProxy sharing a real Redis (`MCP_STATE_URL`): what one replica
//! counts or remembers holds for all of them — a code or refresh token replayed on another
//! replica, or raced on all three at once, goes through once; the rate and concurrency limits
//! and `FORGE_MAX_CONCURRENT` hold for their sum — and the store's faults (killed, restarted
//! empty, hung) do what docs/DEPLOYMENT.md says: single use refuses, the limits follow
//! `MCP_STATE_FAIL`, nothing waits on the store for long, nothing is accepted twice.

use std::time::{Duration, Instant};

use fake_forge::{FakeForge, Gate, Script, ScriptedResponse};
use serde_json::{Value, json};

use super::super::oauth::{CLIENT_REDIRECT, SignIn, VERIFIER, assert_no_sign_in_secret, param};
use super::super::support::forge::numbered_login;
use super::super::support::http::{HttpServer, free_port, http_client, stateless_call, tool_result};
use super::super::support::redis::Redis;
use super::super::support::{Forge, WAIT_LIMIT, wait_for, wait_until};
use super::super::token;
use super::{Cluster, bounded};

/// `POST /token` with `form` at one replica (`base`), not through the balancer.
async fn token_at(base: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    super::super::oauth::token_at(base, body.into_bytes()).await
}

fn code_form<'a>(client: &'a str, code: &'a str) -> [(&'static str, &'a str); 5] {
    [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("client_id", client),
        ("redirect_uri", CLIENT_REDIRECT),
        ("code_verifier", VERIFIER),
    ]
}

fn refresh_form<'a>(client: &'a str, refresh: &'a str) -> [(&'static str, &'a str); 3] {
    [("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", client)]
}

/// The same form at each of `bases` at once: every answer.
async fn raced(bases: &[String], form: &[(&str, &str)]) -> Vec<(u16, Value)> {
    futures::future::join_all(bases.iter().map(|b| token_at(b, form))).await
}

/// `attempt` again until it answers something else than 503 (a replica reconnecting to the
/// store: a 503 uses nothing up).
async fn until_not_503<F, Fut>(attempt: F) -> (u16, Value)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (u16, Value)>,
{
    wait_until("an answer other than 503", WAIT_LIMIT, async || {
        let (status, body) = attempt().await;
        (status != 503).then_some((status, body))
    })
    .await
}

/// A replica's counter `name{labels}` (0 when absent).
async fn counter(r: &HttpServer, name: &str, labels: &str) -> f64 {
    let text = http_client().get(r.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let head = format!("{name}{labels} ");
    text.lines().find_map(|l| l.strip_prefix(head.as_str())).map_or(0.0, |v| v.parse().unwrap())
}

fn env_of<'a>(redis: &'a [(&'static str, String)], extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<(&str, &str)> = redis.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend_from_slice(extra);
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_and_refresh_tokens_are_used_once_across_replicas_even_raced_and_through_store_faults() {
    bounded(async {
        let mut redis = Redis::start().await;
        let lb_port = free_port();
        let public = format!("http://127.0.0.1:{lb_port}");
        let (forge, dir, key_path) = SignIn::prepare(&public, Duration::from_secs(3600)).await;
        let store_env = redis.env();
        let mut settings = SignIn::settings(&public, &key_path).to_vec();
        settings.extend(env_of(&store_env, &[]));
        let cluster = Cluster::start(&forge.base_url(), "http", &settings, lb_port).await;
        let direct: Vec<String> = (0..3).map(|i| cluster.replica(i).base.clone()).collect();
        let fourth = SignIn::server(
            &forge,
            &public,
            &key_path,
            free_port(),
            &env_of(&store_env, &[("MCP_REPLICA_ID", "r4")]),
        )
        .await;
        let s =
            SignIn { forge, server: fourth, public: public.clone(), _dir: dir, key_path: key_path.clone() };
        let forge_token_requests = || s.token_requests().len();
        let client = s.register().await;
        let new_code = || async {
            let back = s.authorize(&client, &[("scope", "read write")]).await;
            param(&back, "code")
        };

        // A code exchanged on r1 and replayed on r2 and r3: refused by this server (the forge
        // is not asked again), not merely by the forge.
        let code = new_code().await;
        let before = forge_token_requests();
        let (status, tokens) = token_at(&direct[0], &code_form(&client, &code)).await;
        assert_eq!(status, 200, "{tokens}\n{}", cluster.logs());
        for base in &direct[1..] {
            let (status, e) = token_at(base, &code_form(&client, &code)).await;
            assert_eq!((status, e["error"].as_str()), (400, Some("invalid_grant")), "{base}: {e}");
            assert!(e["error_description"].as_str().unwrap().contains("already been used"), "{e}");
        }
        assert_eq!(forge_token_requests(), before + 1, "a replay reached the forge");

        // The refresh token: rotated on r2, the old one replayed on r3 and r1 is refused.
        let old = tokens["refresh_token"].as_str().unwrap().to_owned();
        let (status, rotated) = token_at(&direct[1], &refresh_form(&client, &old)).await;
        assert_eq!(status, 200, "{rotated}");
        for base in [&direct[2], &direct[0]] {
            let (status, e) = token_at(base, &refresh_form(&client, &old)).await;
            assert_eq!(status, 400, "{base}: {e}");
            assert!(e["error_description"].as_str().unwrap().contains("already been used"), "{e}");
        }

        // Raced on all three replicas at once, each code and each refresh token goes through
        // exactly once, and the forge hears of it once.
        // (A new sign-in of the same person and application retires the forge's earlier grant,
        // so each round refreshes the grant its code just made.)
        let mut refresh = String::new();
        for round in 0..5 {
            let code = new_code().await;
            let before = forge_token_requests();
            let answers = raced(&direct, &code_form(&client, &code)).await;
            let won: Vec<&(u16, Value)> = answers.iter().filter(|(s, _)| *s == 200).collect();
            assert_eq!(won.len(), 1, "round {round}: {answers:?}");
            assert!(answers.iter().all(|(s, _)| *s == 200 || *s == 400), "{answers:?}");
            assert_eq!(forge_token_requests(), before + 1, "round {round}");
            refresh = won[0].1["refresh_token"].as_str().unwrap().to_owned();

            let answers = raced(&direct, &refresh_form(&client, &refresh)).await;
            let won: Vec<&(u16, Value)> = answers.iter().filter(|(s, _)| *s == 200).collect();
            assert_eq!(won.len(), 1, "round {round}: {answers:?}");
            refresh = won[0].1["refresh_token"].as_str().unwrap().to_owned();
        }
        // Every key in the store is namespaced, hashed and expiring, but the one that names its
        // memory; no id, code or login is in it.
        let keys = redis.keys().await;
        assert!(!keys.is_empty());
        for k in &keys {
            assert!(k.starts_with("aegis:v1:"), "{k}");
            let ttl = redis.cli(&["PTTL", k]).await;
            let ttl: i64 = ttl.trim().parse().unwrap();
            assert!(ttl > 0 || k.starts_with("aegis:v1:memory:"), "{k} has no expiry ({ttl})");
            assert!(ttl <= (30 * 24 * 3600 + 300) * 1000, "{k}: {ttl}");
        }
        assert_eq!(keys.iter().filter(|k| k.starts_with("aegis:v1:memory:")).count(), 1, "{keys:?}");

        // The store hung (out of reach): a code is refused with 503, quickly, and is not used
        // up: once the store answers again, the same code goes through.
        let code = new_code().await;
        redis.stop();
        let started = Instant::now();
        let (status, e) = token_at(&direct[0], &code_form(&client, &code)).await;
        let waited = started.elapsed();
        assert_eq!((status, e["error"].as_str()), (503, Some("temporarily_unavailable")), "{e}");
        assert!(e["error_description"].as_str().unwrap().contains("MCP_STATE_URL"), "{e}");
        println!("a hung store cost the token endpoint {waited:?}");
        // Refused for the store's own time limit, not after waiting on it.
        let timed_out = counter(cluster.replica(0), "aegis_state_requests_total", r#"{op="once",result="timeout"}"#)
            .await
            + counter(cluster.replica(0), "aegis_state_requests_total", r#"{op="once",result="skipped"}"#).await;
        assert!(timed_out >= 1.0, "{}", cluster.logs());
        redis.resume();
        // At once (a 503 uses nothing up): the use whose answer the hung store lost is taken
        // back before the retry is judged.
        let (status, tokens) = until_not_503(|| async { token_at(&direct[0], &code_form(&client, &code)).await }).await;
        assert_eq!(status, 200, "the code was used up by a refusal: {tokens}\n{}", cluster.logs());
        let taken_back = counter(cluster.replica(0), "aegis_state_requests_total", r#"{op="forget",result="ok"}"#);
        assert!(taken_back.await >= 1.0, "{}", cluster.logs());
        let r2 = tokens["refresh_token"].as_str().unwrap().to_owned();

        // Killed mid-load and restarted empty: a client refreshing in a loop, each refresh
        // token raced on all three replicas, has none accepted twice; while the store is
        // down every refresh is refused, and what was issued before it came back is refused
        // after (it cannot know what was used). The client then signs in again, at once,
        // and goes on refreshing: what is issued after the restart works right away. Each
        // step waits for what the last one did, not for a time (a loaded machine is slow).
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let (stop, restarted) = (AtomicBool::new(false), AtomicBool::new(false));
        let (wins_before, wins_after, sign_ins_after) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let current = std::sync::Mutex::new(r2.clone());
        let load = async {
            let mut wins = Vec::new();
            while !stop.load(SeqCst) {
                let presented = current.lock().unwrap().clone();
                let answers = raced(&direct, &refresh_form(&client, &presented)).await;
                let won: Vec<&(u16, Value)> = answers.iter().filter(|(s, _)| *s == 200).collect();
                wins.push(won.len());
                let after = restarted.load(SeqCst);
                if let Some((_, t)) = won.first() {
                    *current.lock().unwrap() = t["refresh_token"].as_str().unwrap().to_owned();
                    (if after { &wins_after } else { &wins_before }).fetch_add(1, SeqCst);
                    continue;
                }
                let reset = answers.iter().any(|(s, e)| {
                    *s == 400 && e["error_description"].as_str().is_some_and(|d| d.contains("reset"))
                });
                if after && reset {
                    // Signed in again: the code goes through (once this replica reaches the
                    // store again: a 503 uses nothing up). A sign-in started while the replica
                    // could not yet ask the store which memory it has is refused at its
                    // callback as possibly older than the restart, and started again, as the
                    // page tells the person; how soon the replica reaches the store again
                    // depends on the machine, so the test waits for it.
                    let signed_in = async || match s.try_authorize(&client, &[("scope", "read write")]).await {
                        Ok(back) => Some(param(&back, "code")),
                        Err((400, page)) if page.contains("before the shared store (MCP_STATE_URL) was reset") => None,
                        Err((status, page)) => panic!("a sign-in after the restart: {status}: {page}"),
                    };
                    let code = wait_until("a sign-in after the restart", WAIT_LIMIT, signed_in).await;
                    let (status, tokens) =
                        until_not_503(|| async { token_at(&direct[0], &code_form(&client, &code)).await }).await;
                    assert_eq!(status, 200, "a sign-in right after the restart: {tokens}\n{}", cluster.logs());
                    *current.lock().unwrap() = tokens["refresh_token"].as_str().unwrap().to_owned();
                    sign_ins_after.fetch_add(1, SeqCst);
                } else {
                    // Nothing won (the store is down): the next round.
                    tokio::task::yield_now().await;
                }
            }
            wins
        };
        let faults = async {
            wait_for("two refreshes before the kill", WAIT_LIMIT, async || wins_before.load(SeqCst) >= 2).await;
            redis.kill().await;
            let killed_with = current.lock().unwrap().clone();
            for base in &direct {
                for presented in [&r2, &refresh] {
                    let (status, e) = token_at(base, &refresh_form(&client, presented)).await;
                    assert_ne!(status, 200, "accepted with the store down: {e}");
                }
            }
            redis.restart().await;
            restarted.store(true, SeqCst);
            wait_for("two refreshes after the restart", WAIT_LIMIT, async || wins_after.load(SeqCst) >= 2).await;
            stop.store(true, SeqCst);
            killed_with
        };
        let (wins, killed_with) = futures::join!(load, faults);
        println!(
            "refreshes raced through the store's kill and restart: {} rounds, {wins:?}; signed in again {} times",
            wins.len(),
            sign_ins_after.load(SeqCst)
        );
        assert!(wins.iter().all(|&n| n <= 1), "a refresh token accepted twice: {wins:?}");
        for base in &direct {
            for presented in [&r2, &killed_with] {
                // Until the replica has reconnected (a 503 uses nothing up).
                let (status, e) =
                    until_not_503(|| async { token_at(base, &refresh_form(&client, presented)).await }).await;
                assert_eq!(status, 400, "{base}: {e}");
                let words = e["error_description"].as_str().unwrap();
                assert!(words.contains("reset") || words.contains("already been used"), "{e}");
            }
        }
        // A new sign-in works, and is used once again.
        let code = new_code().await;
        let answers = raced(&direct, &code_form(&client, &code)).await;
        assert_eq!(answers.iter().filter(|(s, _)| *s == 200).count(), 1, "{answers:?}\n{}", cluster.logs());
        assert_eq!(answers.iter().filter(|(s, _)| *s == 400).count(), 2, "{answers:?}");

        // The store's password and key, and the sign-in's secrets, are in no log.
        let mut secrets: Vec<&str> = Redis::secrets().to_vec();
        secrets.push(&r2);
        for r in cluster.replicas.iter().flatten() {
            assert_no_sign_in_secret(&r.stderr(), &secrets);
        }
    })
    .await;
}

/// A forge with `n` users (`userNN`, token `tok-user-NN`), each with a repository `r` whose
/// `GET` takes `delay`.
async fn slow_forge(n: usize, delay: Duration) -> FakeForge {
    let forge =
        (0..n).fold(Forge::gitea().numbered_users(n), |f, w| f.repo(&numbered_login(w), "r")).start().await;
    for w in 0..n {
        let owner = numbered_login(w);
        forge.script(Script::always(
            Some("GET"),
            &format!("/api/v1/repos/{owner}/r"),
            ScriptedResponse::json(200, &json!({"name": "r"})).with_delay(delay),
        ));
    }
    forge
}

/// `repoGet` of `userNN/r` as `userNN` through `base`: the result.
async fn call_as(base: &str, n: usize) -> super::super::support::Called {
    let args = json!({"owner": format!("user{n:02}"), "repo": "r"});
    let auth = token(&format!("tok-user-{n:02}"));
    let r = stateless_call(&http_client(), base, "repoGet", args, Some(&auth)).await.unwrap();
    tool_result(&r)
}

fn refused_by(c: &super::super::support::Called, setting: &str) -> bool {
    c.is_error
        && c.json["error"]["kind"] == "rate_limited"
        && c.json["error"]["message"].as_str().is_some_and(|m| m.contains(setting))
}

/// Calls of `users` (by number) at once through `base`, each answered by the forge only once
/// those refused have been: the calls admitted are still running when the others are judged,
/// however slow the machine. The results, in order.
async fn at_once(forge: &FakeForge, base: &str, users: &[usize]) -> Vec<super::super::support::Called> {
    let held = Gate::new();
    for n in users.iter().collect::<std::collections::BTreeSet<_>>() {
        forge.script(Script::always(
            Some("GET"),
            &format!("/api/v1/repos/user{n:02}/r"),
            ScriptedResponse::json(200, &json!({"name": "r"})).held_until(&held),
        ));
    }
    let before = forge.requests().len();
    let calls: Vec<_> = users.iter().map(|&n| tokio::spawn(call_as_owned(base.to_owned(), n))).collect();
    // Every call has been judged: refused ones have their answer, admitted ones reached the forge.
    wait_for("every call was judged", WAIT_LIMIT, async || {
        let sent = forge.requests()[before..].iter().filter(|r| r.raw_path.ends_with("/r")).count();
        calls.iter().filter(|c| c.is_finished()).count() + sent >= users.len()
    })
    .await;
    held.open();
    let mut done = Vec::new();
    for c in calls {
        done.push(c.await.unwrap());
    }
    done
}

async fn call_as_owned(base: String, n: usize) -> super::super::support::Called {
    call_as(&base, n).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_hold_for_the_sum_of_the_replicas_over_tls_and_fall_back_to_each_replica_when_the_store_is_gone()
 {
    bounded(async {
        let mut redis = Redis::start_tls().await;
        let forge = slow_forge(16, Duration::ZERO).await;
        let store_env = redis.env();
        let env = env_of(
            &store_env,
            // The calls' own forge slots are counted: the flow guard's look-ups are not theirs.
            &[
                ("RATE_LIMIT_PER_MINUTE", "6"),
                ("RATE_LIMIT_CONCURRENT", "2"),
                ("FORGE_MAX_CONCURRENT", "3"),
                ("FLOW_GUARD", "off"),
            ],
        );
        let cluster = Cluster::start(&forge.base_url(), "http", &env, free_port()).await;
        let lb = cluster.lb().to_owned();

        // 6 a minute for one identity, 30 calls spread over three replicas: 6 go through (and
        // one more for every 10 s the calls took, which a bucket refills).
        let mut ok = 0;
        let started = Instant::now();
        for _ in 0..30 {
            let c = call_as(&lb, 0).await;
            if c.is_error {
                assert!(refused_by(&c, "RATE_LIMIT_PER_MINUTE"), "{}", c.text);
            } else {
                ok += 1;
            }
        }
        let refilled = (started.elapsed().as_secs() / 10) as usize;
        let per_replica = cluster.calls_per_replica().await;
        println!("rate: {ok} of 30 calls through, per replica {per_replica:?}");
        assert!((6..=6 + refilled).contains(&ok), "{ok}, per replica {per_replica:?}\n{}", cluster.logs());
        assert!(per_replica.iter().all(|&n| n >= 5), "the balancer spread the calls: {per_replica:?}");

        // 2 at once for one identity: of 9 calls at once, 2 go through.
        let done = at_once(&forge, &lb, &[1; 9]).await;
        let ok = done.iter().filter(|c| !c.is_error).count();
        assert!(
            done.iter().all(|c| !c.is_error || refused_by(c, "RATE_LIMIT_CONCURRENT")),
            "{:?}",
            done[0].text
        );
        assert_eq!(ok, 2, "{}", cluster.logs());

        // 3 at the forge at once for everybody: of 9 calls of 9 identities, 3 are sent.
        let before = forge.requests().iter().filter(|r| r.raw_path.ends_with("/r")).count();
        let done = at_once(&forge, &lb, &(3..12).collect::<Vec<_>>()).await;
        let ok = done.iter().filter(|c| !c.is_error).count();
        assert!(
            done.iter().all(|c| !c.is_error || refused_by(c, "FORGE_MAX_CONCURRENT")),
            "{:?}",
            done[0].text
        );
        let sent = forge.requests().iter().filter(|r| r.raw_path.ends_with("/r")).count() - before;
        assert_eq!((ok, sent), (3, 3), "{}", cluster.logs());
        // The slots came back when the calls ended: a call goes through at once.
        assert!(!call_as(&lb, 2).await.is_error);

        // The store killed (MCP_STATE_FAIL=open): calls go on, each replica judging by its own
        // limits, and each says so in its metrics (judged without waiting on the store: its
        // requests failed at once, or were skipped).
        redis.kill().await;
        for _ in 0..3 {
            let c = call_as(&lb, 0).await;
            assert!(!c.is_error || refused_by(&c, "RATE_LIMIT_PER_MINUTE"), "{}", c.text);
        }
        for n in 2..5 {
            let c = call_as(&cluster.replica(0).base, n).await;
            assert!(!c.is_error, "{}", c.text);
        }
        let fell_back =
            counter(cluster.replica(0), "aegis_state_fallback_total", r#"{limit="caller",decision="local"}"#)
                .await;
        assert!(fell_back >= 1.0, "{fell_back}");
        let fell_back = counter(
            cluster.replica(0),
            "aegis_state_fallback_total",
            r#"{limit="forge_concurrent",decision="local"}"#,
        )
        .await;
        assert!(fell_back >= 1.0, "{fell_back}");
        assert!(cluster.replica(0).stderr().contains("could not be used"), "{}", cluster.replica(0).stderr());
        // Back, empty: the store judges again (a fresh bucket for a fresh identity), once each
        // replica has reconnected.
        redis.restart().await;
        for r in cluster.replicas.iter().flatten() {
            wait_for(&format!("{} reconnected", r.base), WAIT_LIMIT, async || {
                call_as(&r.base, 0).await.json["error"].is_null()
                    && counter(r, "aegis_state_up", "").await == 1.0
            })
            .await;
        }
        // A round trip slower than its bound (this machine is shared with other tests) makes a
        // replica judge on its own, as MCP_STATE_FAIL=open says: such a try is not judged by
        // the store, so it is tried again with another identity.
        let fell_back = async || {
            let mut n = 0.0;
            for r in cluster.replicas.iter().flatten() {
                for limit in ["caller", "forge_concurrent"] {
                    let labels = format!(r#"{{limit="{limit}",decision="local"}}"#);
                    n += counter(r, "aegis_state_fallback_total", &labels).await;
                }
            }
            n
        };
        let mut judged = false;
        for who in 11..16 {
            let before = fell_back().await;
            let calls = at_once(&forge, &lb, &[who; 9]).await;
            if fell_back().await > before {
                continue;
            }
            let ok = calls.iter().filter(|c| !c.is_error).count();
            let refusals: Vec<&str> = calls.iter().filter(|c| c.is_error).map(|c| c.text.as_str()).collect();
            assert_eq!(ok, 2, "refused: {refusals:#?}\n{}", cluster.logs());
            judged = true;
            break;
        }
        assert!(judged, "the store never judged: {}", cluster.logs());
        for r in cluster.replicas.iter().flatten() {
            assert_no_sign_in_secret(&r.stderr(), &Redis::secrets());
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_known_everywhere_and_a_killed_replicas_forge_slots_come_back_on_their_own() {
    bounded(async {
        let redis = Redis::start().await;
        let forge = slow_forge(4, Duration::from_secs(60)).await;
        // user03 is fast: its call shows when a slot is free.
        forge.script(Script::always(
            Some("GET"),
            "/api/v1/repos/user03/r",
            ScriptedResponse::json(200, &json!({"name": "r"})),
        ));
        let store_env = redis.env();
        let env = env_of(&store_env, &[("FORGE_MAX_CONCURRENT", "2")]);
        let mut cluster = Cluster::start(&forge.base_url(), "http", &env, free_port()).await;
        // A token the forge refused on one replica is refused by the others without asking it
        // again (the store remembers the refusal, by a keyed hash, for 30 s).
        let lookups = || forge.requests().iter().filter(|r| r.raw_path == "/api/v1/user").count();
        let before = lookups();
        for i in 0..3 {
            let args = json!({"owner": "user00", "repo": "r"});
            let auth = token(super::super::REFUSED_TOKEN);
            let r =
                stateless_call(&http_client(), &cluster.replica(i).base, "repoGet", args, Some(&auth)).await;
            let c = tool_result(&r.unwrap());
            assert_eq!(
                (c.json["error"]["kind"].as_str(), c.json["error"]["status"].as_u64()),
                (Some("unauthorized"), Some(401)),
                "{}",
                c.text
            );
        }
        assert_eq!(lookups(), before + 1, "the forge was asked again about a token it refused");
        let r1 = cluster.replica(0).base.clone();
        // Two calls that will not end hold both slots on r1.
        let held: Vec<_> = (0..2)
            .map(|n| {
                tokio::spawn({
                    let r1 = r1.clone();
                    async move {
                        stateless_call(
                            &http_client(),
                            &r1,
                            "repoGet",
                            json!({"owner": format!("user{n:02}"), "repo": "r"}),
                            Some(&token(&format!("tok-user-{n:02}"))),
                        )
                        .await
                    }
                })
            })
            .collect();
        wait_for("the slow calls reached the forge", WAIT_LIMIT, async || {
            forge.requests().iter().filter(|r| r.raw_path.ends_with("/r")).count() >= 2
        })
        .await;
        let r2 = cluster.replica(1).base.clone();
        assert!(refused_by(&call_as(&r2, 2).await, "FORGE_MAX_CONCURRENT"), "r2 sees r1's slots taken");
        cluster.kill(0).await;
        for h in held {
            h.abort();
        }
        // Nobody gives the slots back: they expire (15 s), and r2 gets one.
        let killed = Instant::now();
        wait_for("r1's slots came back", WAIT_LIMIT, async || {
            let c = call_as(&r2, 3).await;
            assert!(!c.is_error || refused_by(&c, "FORGE_MAX_CONCURRENT"), "{}", c.text);
            !c.is_error
        })
        .await;
        println!("a killed replica's forge slots came back after {:?}", killed.elapsed());
        assert!(killed.elapsed() > Duration::from_secs(5), "the slots were given back by nobody yet");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_failing_closed_a_hung_store_refuses_calls_quickly_and_they_resume() {
    bounded(async {
        let redis = Redis::start().await;
        let forge = slow_forge(1, Duration::ZERO).await;
        let store_env = redis.env();
        // A store that may evict keys is named at start (it could forget a used code).
        assert_eq!(redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).await.trim(), "OK");
        let env = env_of(&store_env, &[("RATE_LIMIT_PER_MINUTE", "600"), ("MCP_STATE_FAIL", "closed")]);
        let server = HttpServer::spawn_listening(
            &forge.base_url(),
            "http",
            &env,
            &format!("127.0.0.1:{}", free_port()),
        )
        .await;
        server.log_lines("maxmemory-policy is not noeviction", 1).await;
        assert!(!call_as(&server.base, 0).await.is_error);
        redis.stop();
        let mut slowest = Duration::ZERO;
        for _ in 0..5 {
            let t = Instant::now();
            let c = call_as(&server.base, 0).await;
            slowest = slowest.max(t.elapsed());
            assert!(refused_by(&c, "MCP_STATE_FAIL=closed"), "{}", c.text);
            assert_eq!(c.json["error"]["retry_after_seconds"], 1, "{}", c.text);
        }
        println!("a hung store (fail closed): the slowest refusal took {slowest:?}");
        // Refused at the store's own time limit (timeout), then without asking it (skipped):
        // no call waits on a hung store (below).
        let refused =
            counter(&server, "aegis_state_fallback_total", r#"{limit="caller",decision="refused"}"#).await;
        assert!(refused >= 5.0, "{refused}");
        assert!(
            counter(&server, "aegis_state_requests_total", r#"{op="admit",result="timeout"}"#).await >= 1.0
        );
        assert!(
            counter(&server, "aegis_state_requests_total", r#"{op="admit",result="skipped"}"#).await >= 1.0
        );
        redis.resume();
        // Past the skip after failures, calls go through again.
        wait_for("calls went through again", WAIT_LIMIT, async || !call_as(&server.base, 0).await.is_error)
            .await;
        assert!(counter(&server, "aegis_state_up", "").await == 1.0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_fault_leaks_no_forge_slot_and_a_store_that_refused_the_connection_is_used_again() {
    bounded(async {
        let redis = Redis::start().await;
        let forge = slow_forge(1, Duration::ZERO).await;
        let store_env = redis.env();
        // The call's own forge slot is counted: the flow guard's look-ups are not its.
        let env = env_of(&store_env, &[("FORGE_MAX_CONCURRENT", "1"), ("FLOW_GUARD", "off")]);
        let listen = format!("127.0.0.1:{}", free_port());
        let server = HttpServer::spawn_listening(&forge.base_url(), "http", &env, &listen).await;
        let slots_in_store =
            || async { redis.keys().await.into_iter().filter(|k| k.ends_with(":run")).count() };
        assert!(!call_as(&server.base, 0).await.is_error);
        // Hung while a request asks for the forge's one slot: the request goes on (open), and
        // the slot the script takes once the store runs again is given back, not leaked for
        // the lease's 15 s.
        redis.stop();
        let c = call_as(&server.base, 0).await;
        assert!(!c.is_error, "{}", c.text);
        redis.resume();
        // Given back, well before the lease (15 s) would have ended it.
        wait_for("the slot was given back", Duration::from_secs(10), async || slots_in_store().await == 0)
            .await;
        for _ in 0..3 {
            let c = call_as(&server.base, 0).await;
            assert!(!c.is_error, "{}", c.text);
        }
        const SLOT_OK: &str = r#"{op="forge_admit",result="ok"}"#;
        let before = counter(&server, "aegis_state_requests_total", SLOT_OK).await;
        assert!(!call_as(&server.base, 0).await.is_error);
        assert_eq!(
            counter(&server, "aegis_state_requests_total", SLOT_OK).await,
            before + 1.0,
            "the store counted the call's slot"
        );

        // The store refuses the server's connection (its password changed, the connections
        // dropped): calls go on by this replica's own count; once it accepts the password
        // again, the server uses it again without a restart.
        let other = "store-pass-changed-1";
        assert_eq!(redis.cli(&["CONFIG", "SET", "requirepass", other]).await.trim(), "OK");
        redis.cli_as(other, &["CLIENT", "KILL", "TYPE", "normal"]).await;
        // Longer than the connection manager's own retries (about 5 s), after which it would
        // keep the refusal for good.
        let refused_since = Instant::now();
        wait_for("8 s of calls with the connection refused", WAIT_LIMIT, async || {
            let c = call_as(&server.base, 0).await;
            assert!(!c.is_error, "{}", c.text);
            refused_since.elapsed() >= Duration::from_secs(8)
        })
        .await;
        assert!(
            counter(&server, "aegis_state_requests_total", r#"{op="forge_admit",result="error"}"#).await
                >= 1.0
        );
        assert_eq!(
            redis.cli_as(other, &["CONFIG", "SET", "requirepass", Redis::password()]).await.trim(),
            "OK"
        );
        let back = Instant::now();
        let before = counter(&server, "aegis_state_requests_total", SLOT_OK).await;
        wait_for("the server used the store again", WAIT_LIMIT, async || {
            assert!(!call_as(&server.base, 0).await.is_error);
            counter(&server, "aegis_state_requests_total", SLOT_OK).await > before
        })
        .await;
        println!(
            "a store that refused the connection was used again {:?} after it accepted it",
            back.elapsed()
        );
    })
    .await;
}

/// A person's yes (protocol 2026-07-28, stateless replicas sharing the store) runs its call
/// once on all replicas together: sent again to another replica within CONFIRM_TIMEOUT, it
/// confirms nothing, and the forge sees one delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yes_runs_its_call_once_on_every_replica() {
    use crate::confirm::{error_of, forge, round, writes};
    bounded(async {
        let redis = Redis::start().await;
        let f = forge().start().await;
        let store_env = redis.env();
        let env = env_of(&store_env, &[("MCP_STATELESS", "true")]);
        let (r1, r2) = (
            HttpServer::spawn(&f.base_url(), "http", &env).await,
            HttpServer::spawn(&f.base_url(), "http", &env).await,
        );
        let demo = json!({"owner": "alice", "repo": "demo"});
        let token = crate::support::ALICE_TOKEN;
        let first = round(&r1, demo.clone(), None, token).await;
        let state = first["result"]["requestState"].clone();
        let yes = json!({"action": "accept", "content": {"confirm": true}});
        let done = round(&r1, demo.clone(), Some((&state, yes.clone())), token).await;
        assert_eq!(done["result"]["isError"], false, "{done}");
        f.seed_repo("alice", "demo");
        for r in [&r2, &r1] {
            let (kind, message) = error_of(&round(r, demo.clone(), Some((&state, yes.clone())), token).await);
            assert_eq!(kind, "not_confirmed", "{message}");
            assert!(message.contains("used already"), "{message}");
        }
        assert_eq!(writes(&f).len(), 1, "{:?}", writes(&f));
    })
    .await;
}

/// One identity's stateless requests through `base`: `tool` with `args`.
async fn alice_at(base: &str, tool: &str, args: Value) -> super::super::support::Called {
    let r =
        stateless_call(&http_client(), base, tool, args, Some(&token(super::super::support::ALICE_TOKEN)))
            .await
            .unwrap();
    tool_result(&r)
}

/// The flow guard over stateless HTTP: a private read on one replica bounds a write on
/// another (the store holds what the identity read, as keyed hashes); another identity is not
/// bound by it; a store that cannot answer counts as having read from anyone (asked), and
/// once it answers again a write into the reader's own private repository is not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_read_on_one_replica_bounds_a_write_on_another() {
    bounded(async {
        let redis = Redis::start().await;
        let bob = "tok-bob-b0b0b0b0b0";
        let forge = Forge::gitea().user(bob, "bob").issues("alice", "site", 1).start().await;
        let store_env = redis.env();
        let cluster = Cluster::start(&forge.base_url(), "http", &env_of(&store_env, &[]), free_port()).await;
        let (r0, r1, r2) = (
            cluster.replica(0).base.clone(),
            cluster.replica(1).base.clone(),
            cluster.replica(2).base.clone(),
        );
        let made =
            alice_at(&r0, "createCurrentUserRepo", json!({"body": {"name": "secret", "private": true}}))
                .await;
        assert!(!made.is_error, "{}", made.text);
        forge.seed_issues("alice", "secret", 1);
        let read =
            alice_at(&r0, "issueGetIssue", json!({"owner": "alice", "repo": "secret", "index": 1})).await;
        assert!(!read.is_error, "{}", read.text);

        let posts = || forge.requests().into_iter().filter(|r| r.method == "POST").count();
        let before = posts();
        let comment = json!({"owner": "alice", "repo": "site", "index": 1, "body": {"body": "the secret"}});
        let c = alice_at(&r1, "issueCreateComment", comment.clone()).await;
        assert_eq!(c.kind(), "not_confirmed", "{}", c.text);
        assert!(
            c.text.contains("read through another replica") && c.text.contains("alice/site"),
            "{}",
            c.text
        );
        assert_eq!(posts(), before, "nothing was sent");
        // Bob read nothing private: his comment on the same issue is not asked.
        let r = stateless_call(&http_client(), &r1, "issueCreateComment", comment.clone(), Some(&token(bob)))
            .await;
        let c = tool_result(&r.unwrap());
        assert!(!c.is_error, "{}", c.text);

        // A store that cannot answer: even a write into alice's own private repository is asked.
        let own = json!({"owner": "alice", "repo": "secret", "index": 1, "body": {"body": "a note"}});
        redis.stop();
        let c = alice_at(&r2, "issueCreateComment", own.clone()).await;
        redis.resume();
        assert_eq!(c.kind(), "not_confirmed", "{}", c.text);
        // Answering again, the store says she read only her own: not asked.
        let c = wait_until("the store answers again", WAIT_LIMIT, async || {
            let c = alice_at(&r2, "issueCreateComment", own.clone()).await;
            (!c.is_error).then_some(c)
        })
        .await;
        assert_eq!(c.json["status"], 201, "{}", c.text);
    })
    .await;
}
