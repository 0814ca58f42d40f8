//! The store replicas share (`MCP_STATE_URL`: Redis, or a Valkey that speaks its protocol):
//! what must be counted or remembered once for all of them — codes and refresh tokens used
//! once, the rate and concurrency limits per identity, the forge's concurrency — is decided
//! here, atomically, by short server-side scripts on the store's own clock (so replicas'
//! clocks do not matter).
//!
//! The store is trusted to keep what it is given, not to see it: every key is a keyed hash
//! (`MCP_STATE_KEY_FILE`) of an id or a login, and no value is a secret. Every key is under
//! the namespace and expires, but the one that says when the store's memory began.
//!
//! Every round trip is bounded (`TIMEOUT`), and after `SKIP_AFTER` failures in a row the
//! store is skipped for `SKIP_FOR`, so no request waits on a store that is down, slow or out
//! of reach for longer than a round trip's bound. What a failure means is the caller's
//! decision: single use refuses, the limits follow `MCP_STATE_FAIL`.
//!
//! One multiplexed connection per process (the `redis` crate's connection manager, which
//! reconnects in the background); the answers read are each at most two integers.

mod scripts;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use secrecy::ExposeSecret;

use crate::config::StateSettings;
use crate::metrics::StateMetrics;

/// The longest any round trip may take before the store counts as unavailable for it.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(100);
/// How long a connection attempt may take (in the background: no request waits on it longer
/// than `TIMEOUT`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Failed round trips in a row after which the store is skipped for `SKIP_FOR`.
const SKIP_AFTER: u32 = 3;
const SKIP_FOR: Duration = Duration::from_secs(1);
/// How long a slot (a running call, a forge request) counts without being renewed: a
/// killed replica's slots come back after this.
pub(crate) const LEASE: Duration = Duration::from_secs(15);
/// How often the slots still held are renewed.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// Slots renewed, or given back, per round trip at most.
const BATCH: usize = 256;
/// Slots given back and not yet sent to the store, at most: beyond them a slot is left to
/// expire.
const RELEASE_QUEUE: usize = 4096;

/// The store could not decide: why, in a word for logs (never what it said).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unavailable(pub(crate) &'static str);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words = match self.0 {
            "timeout" => "it did not answer in time",
            "skipped" => "it failed just before and is skipped for a moment",
            "down" => "it cannot be reached",
            "auth" => "it refused the password (MCP_STATE_PASSWORD_FILE)",
            "full" => "it is out of memory",
            _ => "its answer was not understood",
        };
        f.write_str(words)
    }
}

/// What the store says of an id presented for single use.
#[derive(Debug)]
pub(crate) enum Once {
    /// The first use: the mark set, to take back with `forget` if the use did not happen.
    First(Mark),
    /// Used already.
    Used,
    /// Issued before the store's memory began (it restarted empty): nobody can say whether it
    /// was used, so it is refused.
    Reset,
}

/// One use of an id as the store holds it: its key and this attempt's own value, so that
/// taking it back never takes back another attempt's.
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    key: String,
    attempt: String,
}

/// What the store decided of one call against a limit.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Let through, holding a slot while it runs when a concurrency limit counts it.
    Let(Option<Lease>),
    /// At the concurrency limit: this many running.
    Busy(u32),
    /// Over the rate: the wait until one more call may go.
    Rate(Duration),
}

/// A limit as one store script judges it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    /// Calls running at once (0: none).
    pub(crate) concurrent: u32,
    /// GCRA: the time one call uses up and how far ahead the bucket may be drawn (`None`: no
    /// rate).
    pub(crate) rate: Option<(Duration, Duration)>,
}

/// The shared store of this process.
#[derive(Debug, Clone)]
pub(crate) struct Store(Arc<Inner>);

struct Inner {
    con: ConnectionManager,
    /// For `probe`'s own connection, which says why it cannot connect.
    client: redis::Client,
    key: aws_lc_rs::hmac::Key,
    namespace: String,
    /// This process's name among the slots' members.
    replica: String,
    scripts: scripts::Scripts,
    metrics: StateMetrics,
    failures: AtomicU32,
    /// Until when the store is skipped, as milliseconds since `epoch`.
    skip_until: AtomicU64,
    epoch: Instant,
    /// Slots held now, by number: their set and member, and when they were last renewed.
    held: Mutex<HashMap<u64, Held>>,
    next: AtomicU64,
    release: tokio::sync::mpsc::Sender<(Arc<str>, String)>,
    /// The last warning logged, as seconds since `epoch` + 1 (0: none yet).
    warned: AtomicU64,
}

#[derive(Debug)]
struct Held {
    set: Arc<str>,
    member: String,
    renewed: Instant,
}

impl std::fmt::Debug for Inner {
    /// The namespace only: the key is secret, the rest is state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("namespace", &self.namespace).finish_non_exhaustive()
    }
}

impl Store {
    /// The store `settings` name, not yet connected (the first round trip connects; a store
    /// down at start is a store down, not a start-up failure). Needs a Tokio runtime: it
    /// starts the tasks that renew and give back slots.
    pub(crate) fn connect(settings: &StateSettings, metrics: StateMetrics) -> Result<Store, String> {
        let info = redis::IntoConnectionInfo::into_connection_info(settings.url.as_str())
            .map_err(|_| "MCP_STATE_URL (--state-url) is not a store URL this server can use".to_owned())?;
        let mut redis_settings = info.redis_settings().clone();
        if let Some(password) = &settings.password {
            redis_settings = redis_settings.set_password(password.expose_secret());
        }
        let tcp = redis::io::tcp::TcpSettings::default()
            .set_nodelay(true)
            // A connection that dies without a word is noticed within seconds, not minutes.
            .set_user_timeout(Duration::from_secs(3));
        let info = info.set_redis_settings(redis_settings).set_tcp_settings(tcp);
        let client = match &settings.ca {
            None => redis::Client::open(info),
            Some(pem) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) },
            ),
        }
        .map_err(|_| {
            "the shared store's settings (MCP_STATE_URL, MCP_STATE_CA_FILE) are not usable".to_owned()
        })?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(6)
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_secs(2));
        let con = client
            .clone()
            .get_connection_manager_lazy(config)
            .map_err(|_| "cannot set up the connection to the shared store".to_owned())?;
        let (release, releases) = tokio::sync::mpsc::channel(RELEASE_QUEUE);
        let mut replica = [0u8; 9];
        aws_lc_rs::rand::fill(&mut replica).map_err(|_| "no randomness for the replica's name".to_owned())?;
        let inner = Arc::new(Inner {
            con,
            client,
            key: aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, settings.key.expose_secret()),
            namespace: settings.namespace.clone(),
            replica: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(replica),
            scripts: scripts::Scripts::new(),
            metrics,
            failures: AtomicU32::new(0),
            skip_until: AtomicU64::new(0),
            epoch: Instant::now(),
            held: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            release,
            warned: AtomicU64::new(0),
        });
        tokio::spawn(give_back(Arc::downgrade(&inner), releases));
        tokio::spawn(renew(Arc::downgrade(&inner)));
        Ok(Store(inner))
    }

    /// The store's key for `what` of `kind`: a keyed hash, 128 bits in base64url.
    fn key(&self, kind: &str, what: &[u8], suffix: &str) -> String {
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.0.key);
        ctx.update(kind.as_bytes());
        ctx.update(&[0]);
        ctx.update(what);
        let tag = ctx.sign();
        let short = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&tag.as_ref()[..16]);
        format!("{}:v1:{kind}:{short}{suffix}", self.0.namespace)
    }

    /// When the store's memory began, under a name of the key too: a new key finds no
    /// memory, so nothing used under the old one can be used again under the new.
    fn since_key(&self) -> String {
        self.key("since", b"", "")
    }

    /// Whether `id` of `kind` is used for the first time across every replica: it is
    /// remembered for `left` (the id's lifetime left); `issued` is when it was issued (Unix
    /// seconds), refused when the store's memory began after.
    pub(crate) async fn once(
        &self,
        kind: &str,
        id: &str,
        left: Duration,
        issued: u64,
    ) -> Result<Once, Unavailable> {
        let mut value = [0u8; 12];
        aws_lc_rs::rand::fill(&mut value).map_err(|_| Unavailable("reply"))?;
        let mark = Mark {
            key: self.key(kind, id.as_bytes(), ""),
            attempt: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value),
        };
        let keep_ms = left.as_millis().saturating_add(1000).min(u128::from(u32::MAX)) as u64;
        let mut call = self.0.scripts.once.prepare_invoke();
        call.key(&mark.key).key(self.since_key()).arg(&mark.attempt).arg(keep_ms).arg(issued);
        let mut con = self.0.con.clone();
        match self.run("once", call.invoke_async::<i64>(&mut con)).await {
            Ok(1) => Ok(Once::First(mark)),
            Ok(-1) => Ok(Once::Reset),
            Ok(_) => Ok(Once::Used),
            Err(e) => {
                // The mark may have been set and its answer lost: take this attempt's back
                // (never another's), so that a retry is not refused for a use that did not
                // happen.
                let store = self.clone();
                tokio::spawn(async move { store.forget_eventually(&mark).await });
                Err(e)
            }
        }
    }

    /// Take back a use marked by `once` (it did not happen: the forge could not be reached).
    pub(crate) async fn forget(&self, mark: &Mark) -> Result<(), Unavailable> {
        let mut call = self.0.scripts.forget.prepare_invoke();
        call.key(&mark.key).arg(&mark.attempt);
        let mut con = self.0.con.clone();
        self.run("forget", call.invoke_async::<i64>(&mut con)).await.map(drop)
    }

    /// `forget`, tried again for a while (in the background): a mark whose answer was lost
    /// would otherwise refuse the retry of a use that did not happen, for the id's lifetime.
    async fn forget_eventually(&self, mark: &Mark) {
        let mut pause = Duration::from_millis(200);
        for _ in 0..8 {
            if self.forget(mark).await.is_ok() {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// One more call of `who` under `limit`, judged for every replica at once (`op` names the
    /// use in the metrics). A call let through under a concurrency limit holds a slot until
    /// its `Lease` is dropped, or `LEASE` after its replica stopped renewing it.
    pub(crate) async fn admit(
        &self,
        op: &'static str,
        who: &[u8],
        limit: Limit,
    ) -> Result<Admit, Unavailable> {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        let member = format!("{}:{id}", self.0.replica);
        let set: Arc<str> = self.key("p", who, ":run").into();
        let (interval, tolerance) = limit.rate.map_or((0, 0), |(i, t)| (i.as_micros(), t.as_micros()));
        let mut call = self.0.scripts.admit.prepare_invoke();
        call.key(&*set)
            .key(self.key("p", who, ":rate"))
            .arg(limit.concurrent)
            .arg(&member)
            .arg(LEASE.as_millis() as u64)
            .arg(interval as u64)
            .arg(tolerance as u64);
        let mut con = self.0.con.clone();
        let (verdict, n) = self.run(op, call.invoke_async::<(i64, i64)>(&mut con)).await?;
        match verdict {
            0 if limit.concurrent > 0 => {
                let renewed = Instant::now();
                self.0.held.lock().expect("held lock").insert(id, Held { set, member, renewed });
                Ok(Admit::Let(Some(Lease { id, store: Arc::downgrade(&self.0) })))
            }
            0 => Ok(Admit::Let(None)),
            1 => Ok(Admit::Busy(u32::try_from(n).unwrap_or(u32::MAX))),
            2 => Ok(Admit::Rate(Duration::from_micros(n.max(0) as u64))),
            _ => Err(Unavailable("reply")),
        }
    }

    /// Whether a replica found `token` refused by the forge within the last while
    /// (`remember_refused`). A store that cannot say is taken as "no": the forge decides.
    pub(crate) async fn refused(&self, token: &[u8]) -> bool {
        let mut get = redis::cmd("EXISTS");
        get.arg(self.key("refused", token, ""));
        let mut con = self.0.con.clone();
        matches!(self.run("refused", get.query_async::<i64>(&mut con)).await, Ok(1))
    }

    /// Tell every replica, for `keep`, that the forge refused `token`.
    pub(crate) async fn remember_refused(&self, token: &[u8], keep: Duration) {
        let mut set = redis::cmd("SET");
        set.arg(self.key("refused", token, "")).arg(1).arg("PX").arg(keep.as_millis() as u64);
        let mut con = self.0.con.clone();
        let _ = self.run("remember_refused", set.query_async::<()>(&mut con)).await;
    }

    /// A round trip `op`, bounded by `TIMEOUT`, counted, and skipped while the store is
    /// judged down.
    async fn run<T>(
        &self,
        op: &'static str,
        trip: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Unavailable> {
        run(&self.0, op, trip).await
    }

    /// Log, at most once per 10 s, that `what` went without the store.
    pub(crate) fn warn(&self, what: &str, why: Unavailable) {
        let now = self.0.epoch.elapsed().as_secs() + 1;
        let last = self.0.warned.load(Ordering::Relaxed);
        if (last == 0 || now >= last + 10)
            && self.0.warned.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            tracing::warn!("the shared store (MCP_STATE_URL) could not be used: {why}; {what}");
        }
    }

    /// The metrics this store counts into.
    pub(crate) fn metrics(&self) -> &StateMetrics {
        &self.0.metrics
    }

    /// Whether the store answers, is one this server can use (Redis 6.2 or later, or a
    /// Valkey), and keeps what it is given when full (a store that evicts keys may forget a
    /// used code): `Err` when it cannot be used, else the warnings, for the start-up log and
    /// `doctor`.
    pub(crate) async fn probe(&self) -> Result<Vec<String>, String> {
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let asked = async {
            let mut con = self.0.client.get_multiplexed_async_connection().await?;
            let info = info.query_async::<String>(&mut con).await?;
            Ok::<_, redis::RedisError>((con, info))
        };
        let (mut con, info) = match tokio::time::timeout(CONNECT_TIMEOUT * 2, asked).await {
            Ok(Ok(got)) => {
                self.0.metrics.request("ping", "ok", Some(Duration::ZERO));
                got
            }
            Ok(Err(e)) => {
                self.0.metrics.request("ping", "error", Some(Duration::ZERO));
                return Err(format!(
                    "the shared store (MCP_STATE_URL) cannot be used: {}",
                    Unavailable(classify(&e))
                ));
            }
            Err(_) => {
                self.0.metrics.request("ping", "timeout", Some(Duration::ZERO));
                return Err("the shared store (MCP_STATE_URL) does not answer".into());
            }
        };
        let field = |name: &str| {
            info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_owned())
        };
        let version = field("redis_version").unwrap_or_default();
        let numbers: Vec<u32> = version.split('.').map_while(|n| n.parse().ok()).collect();
        if numbers.as_slice() < [6, 2].as_slice() {
            return Err(format!(
                "the shared store runs Redis {version:?}: its scripts need Redis 6.2 or later (or a Valkey)"
            ));
        }
        let mut warnings = Vec::new();
        let mut policy = redis::cmd("CONFIG");
        policy.arg("GET").arg("maxmemory-policy");
        match tokio::time::timeout(CONNECT_TIMEOUT, policy.query_async::<Vec<String>>(&mut con)).await {
            Ok(Ok(pair)) if pair.get(1).map(String::as_str) == Some("noeviction") => {}
            Ok(Ok(pair)) if pair.len() == 2 => warnings.push(
                "the shared store's maxmemory-policy is not noeviction: when full it may drop a used code's mark, and the code could be used again; set maxmemory-policy noeviction".to_owned(),
            ),
            _ => warnings.push(
                "could not check the shared store's maxmemory-policy (CONFIG GET refused?): make sure it is noeviction, or a full store may drop a used code's mark".to_owned(),
            ),
        }
        Ok(warnings)
    }

    /// At start, in the background: `probe`, logged.
    pub(crate) async fn check(&self) {
        match self.probe().await {
            Ok(warnings) => warnings.iter().for_each(|w| tracing::warn!("{w}")),
            Err(why) => tracing::warn!(
                "{why}; sign-ins are refused and the limits follow MCP_STATE_FAIL until it can"
            ),
        }
    }
}

async fn run<T>(
    inner: &Inner,
    op: &'static str,
    trip: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Unavailable> {
    let now_ms = inner.epoch.elapsed().as_millis() as u64;
    if inner.skip_until.load(Ordering::Relaxed) > now_ms {
        inner.metrics.request(op, "skipped", None);
        return Err(Unavailable("skipped"));
    }
    let started = Instant::now();
    let out = tokio::time::timeout(TIMEOUT, trip).await;
    let took = started.elapsed();
    let failed = |result: &'static str, why: &'static str| {
        inner.metrics.request(op, result, Some(took));
        if inner.failures.fetch_add(1, Ordering::Relaxed) + 1 >= SKIP_AFTER {
            inner.failures.store(0, Ordering::Relaxed);
            let until = inner.epoch.elapsed() + SKIP_FOR;
            inner.skip_until.store(until.as_millis() as u64, Ordering::Relaxed);
        }
        Unavailable(why)
    };
    match out {
        Ok(Ok(v)) => {
            inner.failures.store(0, Ordering::Relaxed);
            inner.metrics.request(op, "ok", Some(took));
            Ok(v)
        }
        Ok(Err(e)) => {
            let why = classify(&e);
            Err(failed(if why == "timeout" { "timeout" } else { "error" }, why))
        }
        Err(_) => Err(failed("timeout", "timeout")),
    }
}

/// A store error in a word (its text may quote the store, which is not ours to log).
fn classify(e: &redis::RedisError) -> &'static str {
    match e.kind() {
        _ if e.is_timeout() => "timeout",
        redis::ErrorKind::AuthenticationFailed => "auth",
        _ if e.code() == Some("OOM") => "full",
        _ if e.code() == Some("NOAUTH") || e.code() == Some("WRONGPASS") => "auth",
        redis::ErrorKind::Io | redis::ErrorKind::Client => "down",
        _ => "reply",
    }
}

/// A slot held in the store while it lives; dropped, it is given back (in the background:
/// if that fails, it expires).
#[derive(Debug)]
pub(crate) struct Lease {
    id: u64,
    store: Weak<Inner>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(inner) = self.store.upgrade() else { return };
        let held = inner.held.lock().expect("held lock").remove(&self.id);
        if let Some(held) = held {
            // A full queue means the store is far behind: the slot expires on its own.
            let _ = inner.release.try_send((held.set, held.member));
        }
    }
}

/// Give back the slots dropped, many per round trip.
async fn give_back(inner: Weak<Inner>, mut releases: tokio::sync::mpsc::Receiver<(Arc<str>, String)>) {
    let mut batch = Vec::with_capacity(BATCH);
    while releases.recv_many(&mut batch, BATCH).await > 0 {
        let Some(inner) = inner.upgrade() else { return };
        let mut pipe = redis::pipe();
        for (set, member) in batch.drain(..) {
            pipe.zrem(&*set, member).ignore();
        }
        let mut con = inner.con.clone();
        let _ = run(&inner, "release", pipe.query_async::<()>(&mut con)).await;
    }
}

/// Renew, every `RENEW_EVERY`, the slots held longer than that, so that only a replica that
/// stopped loses its slots.
async fn renew(inner: Weak<Inner>) {
    let mut every = tokio::time::interval(RENEW_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let due: Vec<(Arc<str>, String)> = {
            let mut held = inner.held.lock().expect("held lock");
            let now = Instant::now();
            held.values_mut()
                .filter(|h| now.duration_since(h.renewed) >= RENEW_EVERY - Duration::from_millis(500))
                .map(|h| {
                    h.renewed = now;
                    (h.set.clone(), h.member.clone())
                })
                .collect()
        };
        for chunk in due.chunks(BATCH) {
            let mut call = inner.scripts.renew.prepare_invoke();
            call.arg(LEASE.as_millis() as u64);
            for (set, member) in chunk {
                call.key(&**set).arg(member);
            }
            let mut con = inner.con.clone();
            let _ = run(&inner, "renew", call.invoke_async::<i64>(&mut con)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(key: u8) -> StateSettings {
        StateSettings {
            url: url::Url::parse("redis://127.0.0.1:1/").unwrap(),
            password: None,
            ca: None,
            key: Arc::new(secrecy::SecretBox::new(Box::new([key; 32]))),
            fail: crate::config::StateFail::Open,
            namespace: "ns-1".into(),
        }
    }

    #[tokio::test]
    async fn keys_are_namespaced_keyed_hashes_that_show_nothing_of_what_they_name() {
        let store = Store::connect(&settings(7), StateMetrics::default()).unwrap();
        let login = store.key("p", b"login:alice", ":rate");
        let (prefix, rest) = login.split_at("ns-1:v1:p:".len());
        assert_eq!(prefix, "ns-1:v1:p:");
        let hash = rest.strip_suffix(":rate").unwrap();
        assert_eq!(hash.len(), 22);
        assert!(!login.contains("alice"), "{login}");
        // One input, one key; another kind, another input or another key file: another key.
        assert_eq!(login, store.key("p", b"login:alice", ":rate"));
        assert_ne!(store.key("p", b"login:alice", ""), store.key("once", b"login:alice", ""));
        assert_ne!(store.key("p", b"login:alice", ""), store.key("p", b"login:alicf", ""));
        let other = Store::connect(&settings(8), StateMetrics::default()).unwrap();
        assert_ne!(login, other.key("p", b"login:alice", ":rate"));
        assert_ne!(store.since_key(), other.since_key(), "a new key file finds no memory");
        assert!(format!("{store:?}").contains("ns-1") && !format!("{store:?}").contains("07"));
    }

    #[test]
    fn unavailable_says_why_without_the_store_s_words() {
        assert_eq!(Unavailable("auth").to_string(), "it refused the password (MCP_STATE_PASSWORD_FILE)");
        assert_eq!(Unavailable("anything").to_string(), "its answer was not understood");
    }
}
