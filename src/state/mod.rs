//! The store replicas share (`MCP_STATE_URL`: Redis, or a Valkey that speaks its protocol):
//! what must be counted or remembered once for all of them — codes and refresh tokens used
//! once, the rate and concurrency limits per identity, the forge's concurrency, tokens the
//! forge refused — is decided here, atomically, by short server-side scripts on the store's
//! own clock.
//!
//! The store is trusted to keep what it is given, not to see it: every key is a keyed hash
//! (`MCP_STATE_KEY_FILE`) of an id, a token or a login, and no value is a secret. Every key is
//! under the namespace and expires, but the one that names the store's memory.
//!
//! **The store's memory.** A store restarted empty has forgotten which ids were used, so an
//! id issued before must be refused. The memory has a generation, made by the first script
//! to find none (the store's clock in µs); every replica learns it from each answer that
//! carries it, and an id is issued under the generation its replica knows (`generation`, or
//! asked first with `fresh_generation` where nothing else went to the store just before). An
//! id of another generation is refused; one issued under a generation nobody knew is judged
//! by its time. So ids issued after a restart work at once, whatever the replicas' clocks
//! say, and no id from before it is accepted.
//!
//! Every round trip is bounded (`TIMEOUT`), and after `SKIP_AFTER` failures in a row the
//! store is skipped for `SKIP_FOR`, so no request waits on a store that is down, slow or out
//! of reach for longer than a round trip's bound. What a failure means is the caller's
//! decision: single use refuses, the limits follow `MCP_STATE_FAIL`. What must reach the
//! store eventually — a slot given back, a use taken back — goes through one background
//! worker that tries again while the store is away.
//!
//! One multiplexed connection per process (the `redis` crate's connection manager, which
//! reconnects in the background after an I/O error; after a refused connection it is built
//! anew, since it would keep that answer). The calls a replica judges while a round trip is
//! out go together in the next, so under load its calls share round trips; an answer read is
//! two integers per call judged, or one.

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
use aegis_core::error::Shown;

/// The member of an identity's flow set for content whose repository is unknown.
pub(crate) const FLOW_UNKNOWN: &str = "*";
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
/// How often the slots still held are renewed (and the store is asked whether it answers).
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long rate drawn for a replica's next calls may be used (what is left after is lost:
/// it was counted, so the limit's sum holds), and the window its demand is counted in.
const DRAWN_FOR: Duration = Duration::from_millis(50);
/// Slots or calls of rate drawn ahead at once, at most (the store gives at most a sixteenth
/// of the limit ahead, and only while half of it stays free).
const AHEAD: u32 = 64;
/// Keys remembered for the identities seen lately, at most (then forgotten all at once).
const NAMES: usize = 4096;
/// Asks, slots renewed, or chores sent, per round trip at most.
const BATCH: usize = 256;
/// Asks (and slots given back) waiting for the next round trip, at most: beyond them an ask
/// is refused at once (`Unavailable::Backlog`), a slot goes to the background worker.
const ASKS: usize = 4096;
/// Chores (slots given back, uses taken back) waiting for the store, at most: beyond them a
/// slot is left to expire and a use stays used.
const CHORES: usize = 4096;
/// How long a use taken back is tried again while the store is away; after that it stays
/// used (refused, never accepted twice).
const FORGET_FOR: Duration = Duration::from_secs(60);
/// Marks outlive the id they mark by this much, so that a replica whose clock is behind
/// still finds them.
const MARK_SLACK: Duration = Duration::from_secs(300);
/// How often, and how far apart, the generation is asked for an id about to be issued: a
/// store that has just restarted answers once its connection is made anew (within a few
/// hundred milliseconds). Only a sign-in's start and a confirmation's question wait so.
const FRESH_TRIES: u32 = 4;
const FRESH_AGAIN: Duration = Duration::from_millis(150);
/// An id issued without a generation this close after the store's memory began is refused
/// too: one issued in the same second as a reset, or by a replica whose clock is a little
/// ahead, may be older. (Ids with a generation need no such margin.)
const SINCE_SLACK_SECS: u64 = 1;

/// Why the store could not decide (never what it said: its words may quote it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// No answer within `TIMEOUT`.
    Timeout,
    /// Not asked: it failed just before and is skipped for `SKIP_FOR`.
    Skipped,
    /// The connection is broken or cannot be made.
    Down,
    /// It refused the connection (a wrong password, loading, too many clients).
    Refused,
    /// Out of memory (`maxmemory` with `noeviction`).
    Full,
    /// An answer not understood.
    Reply,
    /// Not asked: too many asks wait for it already.
    Backlog,
}

impl Unavailable {
    /// Whether the command may have reached the store and done its work, or part of it
    /// (a script stops at its first error and keeps what it did), although no answer usable
    /// came back.
    fn maybe_sent(self) -> bool {
        !matches!(self, Unavailable::Skipped | Unavailable::Refused | Unavailable::Backlog)
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unavailable::Timeout => "it did not answer in time",
            Unavailable::Skipped => "it failed just before and is skipped for a moment",
            Unavailable::Down => "it cannot be reached",
            Unavailable::Refused => {
                "it refused the connection (a wrong password in MCP_STATE_PASSWORD_FILE, or the store is loading or has too many clients)"
            }
            Unavailable::Full => "it is out of memory",
            Unavailable::Reply => "its answer was not understood",
            Unavailable::Backlog => "too many requests wait for it",
        })
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

/// What the background worker must still tell the store.
#[derive(Debug)]
enum Chore {
    /// Give a slot back (its set and member).
    Release(Arc<str>, String),
    /// Take a use back.
    Forget(Mark),
}

/// What waits for the next round trip of `send_asks`.
enum Item {
    Ask(Ask),
    /// A slot to give back (its set and member).
    Release(Arc<str>, String),
}

/// One call to judge against its limit, with how many slots and calls of rate to draw, and
/// where to answer (`Verdict`).
struct Ask {
    op: &'static str,
    slots: Arc<str>,
    rate: String,
    /// The prefix of the members of the slots drawn: `{prefix}.1`, `{prefix}.2`, …
    member: String,
    limit: Limit,
    want_slots: u32,
    want_rate: u32,
    reply: tokio::sync::oneshot::Sender<Result<Verdict, Unavailable>>,
}

/// What the store answered an ask: let through with this many slots and calls of rate
/// drawn, busy with this many running, or over the rate for this long; and the slots it
/// took.
struct Verdict {
    code: i64,
    x: i64,
    rate: i64,
    taken: Taken,
}

/// What a replica holds of one identity's limits (or the forge's) beyond what it asked for
/// its running calls: slots in the store that no call of it uses now, and rate drawn for its
/// next calls. A busy replica so asks the store once for many calls; near a limit the store
/// gives one at a time, and every call is judged there.
#[derive(Debug, Default)]
struct Reserve {
    /// Slots held in the store, unused (their numbers in `held`).
    free: Vec<u64>,
    /// This replica's calls running under the limit.
    running: u32,
    /// Calls that may still go on the rate drawn, until `until`; whether more is being drawn.
    rate: u32,
    until: Option<Instant>,
    drawing: bool,
    /// The concurrency limit (0: none).
    max: u32,
    /// Asks in the current window (since `since`), and in the one before it; the most calls
    /// running at once in each.
    asks: u32,
    before: u32,
    peak: u32,
    peak_before: u32,
    since: Option<Instant>,
}

impl Reserve {
    /// Count an ask at `now`, and say the demand: the asks of the last window, or of this
    /// one so far if more.
    fn ask(&mut self, now: Instant) -> u32 {
        match self.since {
            Some(since) if now.duration_since(since) < DRAWN_FOR => {}
            Some(since) => {
                let recent = now.duration_since(since) < DRAWN_FOR * 2;
                self.before = if recent { self.asks } else { 0 };
                self.peak_before = if recent { self.peak } else { 0 };
                self.asks = 0;
                self.peak = self.running;
                self.since = Some(now);
            }
            None => self.since = Some(now),
        }
        let demand = self.before.max(self.asks);
        self.asks += 1;
        demand
    }

    fn rate_left(&self, now: Instant) -> bool {
        self.rate > 0 && self.until.is_some_and(|until| now < until)
    }

    /// One more call running on a slot.
    fn start(&mut self) {
        self.running += 1;
        self.peak = self.peak.max(self.running);
    }

    /// Slots to hold unused for the next calls at `now`: enough for half as many again as ran
    /// at once in the last two windows, and two more, so that a busy replica seldom asks and a
    /// growing one draws more each time, while an idle one holds none; at most a sixteenth of
    /// the limit (and `AHEAD`).
    fn keep(&self, now: Instant) -> u32 {
        if self.since.is_none_or(|since| now.duration_since(since) >= DRAWN_FOR * 2) {
            return 0;
        }
        let peak = self.peak.max(self.peak_before);
        (peak + peak / 2 + 2).saturating_sub(self.running).min(AHEAD).min(self.max / 16)
    }

    /// The slots beyond what to keep, taken out to be given back.
    fn surplus(&mut self, now: Instant) -> Vec<u64> {
        let keep = self.keep(now) as usize;
        if self.free.len() > keep { self.free.drain(keep..).collect() } else { Vec::new() }
    }

    /// `drawn` calls of rate more, for `DRAWN_FOR` from `now` (with what is left).
    fn drawn(&mut self, drawn: i64, now: Instant) {
        let left = if self.rate_left(now) { self.rate } else { 0 };
        self.rate = left + u32::try_from(drawn).unwrap_or(0);
        self.until = Some(now + DRAWN_FOR);
    }

    /// Whether it holds nothing and has seen no ask for a while.
    fn idle(&self, now: Instant) -> bool {
        self.running == 0
            && self.free.is_empty()
            && self.since.is_none_or(|since| now.duration_since(since) > RENEW_EVERY)
    }
}

/// The shared store of this process.
#[derive(Debug, Clone)]
pub(crate) struct Store(Arc<Inner>);

struct Inner {
    /// The connection every round trip clones (built anew after a refused connection).
    con: Mutex<ConnectionManager>,
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// When the connection was last built anew, as milliseconds since `epoch`.
    rebuilt: AtomicU64,
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
    /// What this replica holds ahead, by the slots' set (`Reserve`). Locked before `held`
    /// when both are.
    reserves: Mutex<HashMap<Arc<str>, Reserve>>,
    /// The slots' key of each `who` seen lately (`slots_key`).
    names: Mutex<HashMap<Box<[u8]>, Arc<str>>>,
    next: AtomicU64,
    chores: tokio::sync::mpsc::Sender<(Instant, Chore)>,
    /// The uses queued to be taken back (`Chore::Forget`), by key: their attempts. A new use
    /// of the same id takes them back first (`once`); at most one per queued chore.
    taking_back: Mutex<HashMap<String, Vec<String>>>,
    /// Asks waiting for the next round trip, and slots to give back with it (`send_asks`).
    asks: tokio::sync::mpsc::Sender<Item>,
    /// The last warning logged, as seconds since `epoch` + 1 (0: none yet).
    warned: AtomicU64,
    /// The key that names the store's memory (`memory_key`), made once.
    memory: String,
    /// The key in which a version before generations recorded when the memory began.
    legacy_since: String,
    /// The generation of the store's memory this replica last learned; 0: none yet.
    generation: AtomicU64,
    /// Whether the limits refuse while the store cannot decide (`MCP_STATE_FAIL=closed`).
    fail_closed: bool,
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
    /// The store `settings` name, not yet connected (a store down at start is a store down,
    /// not a start-up failure). Needs a Tokio runtime: it starts the tasks that renew slots
    /// and do the chores.
    pub(crate) fn connect(settings: &StateSettings, metrics: StateMetrics) -> Result<Store, Shown> {
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
            .get_connection_manager_lazy(config.clone())
            .map_err(|_| "cannot set up the connection to the shared store".to_owned())?;
        let (chores, queue) = tokio::sync::mpsc::channel(CHORES);
        let (asks, waiting) = tokio::sync::mpsc::channel(ASKS);
        let mut replica = [0u8; 9];
        aws_lc_rs::rand::fill(&mut replica).map_err(|_| "no randomness for the replica's name".to_owned())?;
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, settings.key.expose_secret());
        let memory = hashed(&key, &settings.namespace, "memory", b"", "");
        let legacy_since = hashed(&key, &settings.namespace, "since", b"", "");
        let inner = Arc::new(Inner {
            con: Mutex::new(con),
            client,
            config,
            rebuilt: AtomicU64::new(0),
            key,
            namespace: settings.namespace.clone(),
            replica: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(replica),
            scripts: scripts::Scripts::new(),
            metrics,
            failures: AtomicU32::new(0),
            skip_until: AtomicU64::new(0),
            epoch: Instant::now(),
            held: Mutex::new(HashMap::new()),
            reserves: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            chores,
            taking_back: Mutex::new(HashMap::new()),
            asks,
            warned: AtomicU64::new(0),
            memory,
            legacy_since,
            generation: AtomicU64::new(0),
            fail_closed: settings.fail == crate::config::StateFail::Closed,
        });
        tokio::spawn(do_chores(Arc::downgrade(&inner), queue));
        tokio::spawn(send_asks(Arc::downgrade(&inner), waiting));
        tokio::spawn(renew(Arc::downgrade(&inner)));
        tokio::spawn(trim(Arc::downgrade(&inner)));
        Ok(Store(inner))
    }

    /// The store's key for `what` of `kind` (`hashed`).
    fn key(&self, kind: &str, what: &[u8], suffix: &str) -> String {
        hashed(&self.0.key, &self.0.namespace, kind, what, suffix)
    }

    /// The key that names the store's memory, under a name of the key too: a new key finds
    /// no memory, so nothing used under the old one can be used again under the new.
    fn memory_key(&self) -> &str {
        &self.0.memory
    }

    /// The generation of the store's memory as this replica last learned it (0: not yet),
    /// for an id issued right after a round trip that carried it.
    pub(crate) fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Relaxed)
    }

    /// The generation of the store's memory, asked now (made if the store has none), for an
    /// id issued with no round trip to the store just before it; 0 when the store cannot say
    /// (the id is then judged by its time: what this replica knew may be of a memory the
    /// store has lost meanwhile). Asked even while the store is skipped after failures: a
    /// store just back is asked at once, and again while its connection is being made anew
    /// (`FRESH_TRIES`, each within the round trip's bound) — but not again once the store is
    /// skipped after failures: a store that is down costs one round trip's bound here.
    pub(crate) async fn fresh_generation(&self) -> u64 {
        for attempt in 0..FRESH_TRIES {
            if attempt > 0 {
                tokio::time::sleep(FRESH_AGAIN).await;
            }
            let mut call = self.0.scripts.memory.prepare_invoke();
            call.key(self.memory_key()).key(&self.0.legacy_since);
            let mut con = self.0.con();
            match run(&self.0, &["memory"], call.invoke_async::<String>(&mut con), attempt == 0).await {
                Ok(g) => {
                    self.0.learn(&g);
                    return self.generation();
                }
                Err(Unavailable::Skipped) => break,
                Err(_) => {}
            }
        }
        0
    }

    /// Whether `id` of `kind` is used for the first time across every replica: it is
    /// remembered for `left` (the id's lifetime left). `generation` is the generation of the
    /// store's memory it was issued under (refused when it is not the store's now); 0 when its
    /// issuer knew none: then `issued`, when it was issued (Unix seconds), is judged instead,
    /// refused when the store's memory began after (or just before).
    pub(crate) async fn once(
        &self,
        kind: &str,
        id: &str,
        left: Duration,
        (issued, generation): (u64, u64),
    ) -> Result<Once, Unavailable> {
        let mut value = [0u8; 12];
        aws_lc_rs::rand::fill(&mut value).map_err(|_| Unavailable::Reply)?;
        let mark = Mark {
            key: self.key(kind, id.as_bytes(), ""),
            attempt: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value),
        };
        let keep_ms = u64::try_from((left + MARK_SLACK).as_millis()).unwrap_or(u64::MAX);
        let mut call = self.0.scripts.once.prepare_invoke();
        call.key(self.memory_key())
            .key(&self.0.legacy_since)
            .key(&mark.key)
            .arg(&mark.attempt)
            .arg(keep_ms)
            .arg(issued.saturating_sub(SINCE_SLACK_SECS))
            .arg(generation);
        // A use of this id whose answer was lost and that is still to be taken back (a client
        // retries at once when refused for it): taken back first, here, so that the retry is
        // not refused for a use that did not happen. Not taken back (the store is still away):
        // the store cannot decide this one either.
        for attempt in self.0.waiting_to_be_taken_back(&mark.key) {
            let earlier = Mark { key: mark.key.clone(), attempt };
            forget(&self.0, &earlier, false).await?;
            self.0.taken_back(&earlier);
        }
        let mut con = self.0.con();
        let answer = self.run("once", call.invoke_async::<(i64, String)>(&mut con)).await;
        if let Ok((_, g)) = &answer {
            self.0.learn(g);
        }
        match answer.map(|(verdict, _)| verdict) {
            Ok(1) => Ok(Once::First(mark)),
            Ok(-1) => Ok(Once::Reset),
            Ok(_) => Ok(Once::Used),
            Err(e) => {
                // The mark may have been set and its answer lost: take this attempt's back
                // (never another's), so that a retry is not refused for a use that did not
                // happen.
                if e.maybe_sent() {
                    self.0.take_back_later(mark);
                }
                Err(e)
            }
        }
    }

    /// Take back a use marked by `once` (it did not happen: the forge could not be reached),
    /// now or, while the store is away, in the background.
    pub(crate) async fn forget(&self, mark: Mark) {
        if forget(&self.0, &mark, false).await.is_err() {
            self.0.take_back_later(mark);
        }
    }

    /// One more call of `who` under `limit`, judged for every replica at once (`op` names the
    /// use in the metrics). A call let through under a concurrency limit holds a slot until
    /// its `Lease` is dropped, or `LEASE` after its replica stopped renewing it. A call goes
    /// on what this replica holds ahead when it can (`Reserve`); else it asks the store, and
    /// the asks that come while a round trip is out go together in the next (`send_asks`).
    pub(crate) async fn admit(
        &self,
        op: &'static str,
        who: &[u8],
        limit: Limit,
    ) -> Result<Admit, Unavailable> {
        let set = self.slots_key(who);
        let (slots, rate) = (limit.concurrent > 0, limit.rate.is_some());
        let now = Instant::now();
        let (want_slots, want_rate, kept) = {
            let mut reserves = self.0.reserves.lock().expect("reserves lock");
            let r = reserves.entry(set.clone()).or_default();
            r.max = limit.concurrent;
            let demand = r.ask(now);
            let slot_here = !slots || !r.free.is_empty();
            let rate_here = !rate || r.rate_left(now);
            if rate && rate_here {
                r.rate -= 1;
                // More drawn before this runs out, in the background, so that the calls
                // meanwhile neither wait for it nor each ask.
                if !r.drawing && r.rate < demand / 2 {
                    r.drawing = true;
                    let (store, set, who) = (self.clone(), set.clone(), who.to_vec());
                    tokio::spawn(
                        async move { store.draw_rate(&set, &who, limit, 1 + demand.min(AHEAD)).await },
                    );
                }
            }
            // The slot this call can have here, kept for it while the store judges its rate.
            let kept = if slots && slot_here { r.free.pop() } else { None };
            if slot_here && rate_here {
                if kept.is_some() {
                    r.start();
                }
                return Ok(Admit::Let(kept.map(|id| self.lease(id, &set))));
            }
            let want_slots = if slot_here { 0 } else { r.keep(now).max(1) };
            let want_rate = if rate_here { 0 } else { 1 + demand.min(AHEAD) };
            (want_slots, want_rate, kept)
        };
        let answer = self.ask(op, &set, who, limit, want_slots, want_rate).await;
        let mut reserves = self.0.reserves.lock().expect("reserves lock");
        let r = reserves.entry(set.clone()).or_default();
        let verdict = match answer {
            Ok(verdict) => verdict,
            Err(why) => {
                r.free.extend(kept);
                return Err(why);
            }
        };
        match verdict.code {
            0 => {
                if want_rate > 0 {
                    // One for this call.
                    r.drawn(verdict.rate - 1, now);
                }
                let mut taken = verdict.taken;
                let lease = match taken.slot.take() {
                    // The first slot drawn for this call, the others kept for the next.
                    Some((set, prefix, n)) => {
                        let mut held = self.0.held.lock().expect("held lock");
                        let mut ids = (1..=n).map(|i| {
                            let id = self.0.next.fetch_add(1, Ordering::Relaxed);
                            let (set, member) = (set.clone(), format!("{prefix}.{i}"));
                            held.insert(id, Held { set, member, renewed: now });
                            id
                        });
                        let first = ids.next();
                        r.free.extend(ids);
                        first
                    }
                    None => kept,
                };
                if lease.is_some() {
                    r.start();
                }
                Ok(Admit::Let(lease.map(|id| self.lease(id, &set))))
            }
            1 => Ok(Admit::Busy(u32::try_from(verdict.x).unwrap_or(u32::MAX))),
            _ => {
                r.free.extend(kept);
                Ok(Admit::Rate(Duration::from_micros(verdict.x.max(0) as u64)))
            }
        }
    }

    /// The key of `who`'s slots, made once per `who` (an HMAC per call would cost more than
    /// the rest of a call that goes on what its replica holds).
    fn slots_key(&self, who: &[u8]) -> Arc<str> {
        let mut names = self.0.names.lock().expect("names lock");
        if let Some(set) = names.get(who) {
            return set.clone();
        }
        if names.len() >= NAMES {
            names.clear();
        }
        let set: Arc<str> = self.key("p", who, ":run").into();
        names.insert(who.into(), set.clone());
        set
    }

    fn lease(&self, id: u64, set: &Arc<str>) -> Lease {
        Lease { id, set: set.clone(), store: Arc::downgrade(&self.0) }
    }

    /// Draw `want` calls of rate of `who` under `limit` for this replica's next calls.
    async fn draw_rate(&self, set: &Arc<str>, who: &[u8], limit: Limit, want: u32) {
        let limit = Limit { concurrent: 0, ..limit };
        let answer = self.ask("admit", set, who, limit, 0, want).await;
        let mut reserves = self.0.reserves.lock().expect("reserves lock");
        let Some(r) = reserves.get_mut(set) else { return };
        r.drawing = false;
        if let Ok(Verdict { code: 0, rate, .. }) = answer {
            r.drawn(rate, Instant::now());
        }
    }

    /// Ask the store for `want_slots` slots and `want_rate` calls of rate of `who` under
    /// `limit`, in the next round trip (`send_asks`), bounded by twice `TIMEOUT`.
    async fn ask(
        &self,
        op: &'static str,
        set: &Arc<str>,
        who: &[u8],
        limit: Limit,
        want_slots: u32,
        want_rate: u32,
    ) -> Result<Verdict, Unavailable> {
        if self.0.skipped(&[op]) {
            return Err(Unavailable::Skipped);
        }
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let ask = Ask {
            op,
            slots: set.clone(),
            rate: self.key("p", who, ":rate"),
            member: format!("{}:{id}", self.0.replica),
            limit,
            want_slots,
            want_rate,
            reply,
        };
        if self.0.asks.try_send(Item::Ask(ask)).is_err() {
            self.0.metrics.request(&[op], "backlog", None);
            return Err(Unavailable::Backlog);
        }
        // Bounded here too, for the wait behind the round trip already out. Given up, the
        // answer finds nobody and its slots are given back (`Taken`).
        match tokio::time::timeout(TIMEOUT * 2, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Unavailable::Down),
            Err(_) => {
                self.0.metrics.request(&[op], "timeout", None);
                Err(Unavailable::Timeout)
            }
        }
    }

    /// Note, for every replica, that identity `who` read `members` (`flow_member`, or
    /// `FLOW_UNKNOWN`) within the next `window`; at most `bound` are kept, past them `*`.
    pub(crate) async fn flow_note(
        &self,
        who: &[u8],
        members: &[String],
        window: Duration,
        bound: usize,
    ) -> Result<(), Unavailable> {
        let mut call = self.0.scripts.flow_note.prepare_invoke();
        call.key(self.key("flow", who, "")).arg(window.as_millis() as u64).arg(bound);
        for m in members {
            call.arg(m);
        }
        let mut con = self.0.con();
        self.run("flow_note", call.invoke_async::<i64>(&mut con)).await.map(drop)
    }

    /// What identity `who` read within its window, as every replica noted it (at most `bound`
    /// members and `*`).
    pub(crate) async fn flow_sources(&self, who: &[u8], bound: usize) -> Result<Vec<String>, Unavailable> {
        let mut call = self.0.scripts.flow_sources.prepare_invoke();
        call.key(self.key("flow", who, "")).arg(bound);
        let mut con = self.0.con();
        self.run("flow_sources", call.invoke_async::<Vec<String>>(&mut con)).await
    }

    /// The member that stands for repository `owner/repo` in an identity's flow set: keyed
    /// hashes of its owner and of its name (in lower case, as the forges match them), so the
    /// store never holds a private repository's name, and an owner can be compared.
    pub(crate) fn flow_member(&self, owner: &str, repo: &str) -> String {
        let owner = owner.to_lowercase();
        format!(
            "{}.{}",
            self.mac("flow owner", owner.as_bytes()),
            self.mac("flow repo", format!("{owner}/{}", repo.to_lowercase()).as_bytes())
        )
    }

    /// Whether `member` (`flow_member`) is a repository of `owner`.
    pub(crate) fn flow_member_of(&self, member: &str, owner: &str) -> bool {
        member
            .split_once('.')
            .is_some_and(|(o, _)| o == self.mac("flow owner", owner.to_lowercase().as_bytes()))
    }

    /// A short keyed hash of `what`, as `kind`.
    fn mac(&self, kind: &str, what: &[u8]) -> String {
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.0.key);
        ctx.update(kind.as_bytes());
        ctx.update(&[0]);
        ctx.update(what);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&ctx.sign().as_ref()[..12])
    }

    /// Whether a replica found `token` refused by the forge within the last while
    /// (`remember_refused`). A store that cannot say is taken as "no": the forge decides.
    pub(crate) async fn refused(&self, token: &[u8]) -> bool {
        let mut get = redis::cmd("EXISTS");
        get.arg(self.key("refused", token, ""));
        let mut con = self.0.con();
        matches!(self.run("refused", get.query_async::<i64>(&mut con)).await, Ok(1))
    }

    /// Tell every replica, for `keep`, that the forge refused `token`.
    pub(crate) async fn remember_refused(&self, token: &[u8], keep: Duration) {
        let mut set = redis::cmd("SET");
        set.arg(self.key("refused", token, "")).arg(1).arg("PX").arg(keep.as_millis() as u64);
        let mut con = self.0.con();
        let _ = self.run("remember_refused", set.query_async::<()>(&mut con)).await;
    }

    /// A round trip `op` of a request, bounded by `TIMEOUT`, counted, and skipped while the
    /// store is judged down.
    async fn run<T>(
        &self,
        op: &'static str,
        trip: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, Unavailable> {
        run(&self.0, &[op], trip, false).await
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

    /// Whether a limit refuses while the store cannot decide (`MCP_STATE_FAIL=closed`); else
    /// each replica judges by its own count meanwhile.
    pub(crate) fn fails_closed(&self) -> bool {
        self.0.fail_closed
    }

    /// The metrics this store counts into.
    pub(crate) fn metrics(&self) -> &StateMetrics {
        &self.0.metrics
    }

    /// Whether the store answers, is one this server can use (Redis 6.2 or later, or a
    /// Valkey), and keeps what it is given (a store that evicts keys, or brings back an old
    /// copy of itself, may forget a used code): `Err` when it cannot be used, else the
    /// warnings, for the start-up log and `doctor`. On a connection of its own, which says
    /// why it cannot connect.
    pub(crate) async fn probe(&self) -> Result<Vec<String>, Shown> {
        let mut info = redis::cmd("INFO");
        info.arg("server").arg("replication");
        let asked = async {
            let mut con = self.0.client.get_multiplexed_async_connection().await?;
            let info = info.query_async::<String>(&mut con).await?;
            Ok::<_, redis::RedisError>((con, info))
        };
        let (mut con, info) = match tokio::time::timeout(CONNECT_TIMEOUT * 2, asked).await {
            Ok(Ok(got)) => got,
            Ok(Err(e)) => {
                return Err(format!("the shared store (MCP_STATE_URL) cannot be used: {}", classify(&e)));
            }
            Err(_) => return Err("the shared store (MCP_STATE_URL) does not answer".into()),
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
        if field("connected_slaves").is_some_and(|n| n != "0") || field("role").is_some_and(|r| r != "master")
        {
            warnings.push(
                "the shared store has replicas (or is one): after a failover the new primary may lack the last codes marked used, and they could be used again; run one store".to_owned(),
            );
        }
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("maxmemory-policy").arg("save").arg("appendonly").arg("appendfsync");
        let config = tokio::time::timeout(CONNECT_TIMEOUT, config.query_async::<Vec<String>>(&mut con)).await;
        let Ok(Ok(pairs)) = config else {
            warnings.push(
                "could not read the shared store's configuration (CONFIG GET refused?): make sure maxmemory-policy is noeviction and that it keeps no snapshots (save \"\"), or a used code could be used again".to_owned(),
            );
            return Ok(warnings);
        };
        let setting = |name: &str| {
            pairs.chunks(2).find(|p| p[0] == name).and_then(|p| p.get(1)).map(String::as_str).unwrap_or("")
        };
        if setting("maxmemory-policy") != "noeviction" {
            warnings.push(
                "the shared store's maxmemory-policy is not noeviction: when full it may drop a used code's mark, and the code could be used again; set maxmemory-policy noeviction".to_owned(),
            );
        }
        let snapshots = !setting("save").is_empty();
        let loose_log = setting("appendonly") == "yes" && setting("appendfsync") != "always";
        if snapshots || loose_log {
            warnings.push(
                "the shared store keeps snapshots or an append-only log that may lose its last writes: restarted from them it lacks the last codes marked used but not its start, and they could be used again; run it with save \"\" and appendonly no (or appendfsync always)".to_owned(),
            );
        }
        Ok(warnings)
    }

    /// At start, in the background: the connection made (so that the first requests find it
    /// open), and `probe`, logged.
    pub(crate) async fn check(&self) {
        let mut call = self.0.scripts.memory.prepare_invoke();
        call.key(self.memory_key()).key(&self.0.legacy_since);
        let mut con = self.0.con();
        if let Ok(Ok(g)) =
            tokio::time::timeout(CONNECT_TIMEOUT * 2, call.invoke_async::<String>(&mut con)).await
        {
            self.0.learn(&g);
        }
        match self.probe().await {
            Ok(warnings) => warnings.iter().for_each(|w| tracing::warn!("{w}")),
            Err(why) => {
                tracing::warn!(
                    "{why}; sign-ins are refused and the limits follow MCP_STATE_FAIL until it can"
                )
            }
        }
    }
}

/// The key of `what` of `kind` under `namespace`: a keyed hash, 128 bits in base64url.
fn hashed(key: &aws_lc_rs::hmac::Key, namespace: &str, kind: &str, what: &[u8], suffix: &str) -> String {
    let mut ctx = aws_lc_rs::hmac::Context::with_key(key);
    ctx.update(kind.as_bytes());
    ctx.update(&[0]);
    ctx.update(what);
    let tag = ctx.sign();
    let short = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&tag.as_ref()[..16]);
    let kind = kind.replace(' ', "-");
    format!("{namespace}:v1:{kind}:{short}{suffix}")
}

impl Inner {
    /// A generation of the store's memory an answer carried (digits; anything else is not
    /// one and is ignored).
    fn learn(&self, g: &str) {
        if let Ok(g) = g.parse::<u64>() {
            self.generation.store(g, Ordering::Relaxed);
        }
    }

    fn con(&self) -> ConnectionManager {
        self.con.lock().expect("connection lock").clone()
    }

    /// The connection was refused (a wrong password, a store loading or full of clients): the
    /// connection manager keeps such an answer for good, so build it anew — at most once per
    /// `SKIP_FOR`.
    fn rebuild(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self.rebuilt.load(Ordering::Relaxed);
        let due = now >= last + SKIP_FOR.as_millis() as u64;
        if due && self.rebuilt.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            if let Ok(con) = self.client.clone().get_connection_manager_lazy(self.config.clone()) {
                *self.con.lock().expect("connection lock") = con;
            }
        }
    }

    /// Whether the store is skipped now (it failed just before): `ops` are counted so.
    fn skipped(&self, ops: &[&'static str]) -> bool {
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let skipped = self.skip_until.load(Ordering::Relaxed) > now_ms;
        if skipped {
            self.metrics.request(ops, "skipped", None);
        }
        skipped
    }

    /// Give the slots `ids` back (`release`).
    fn give_back(&self, ids: Vec<u64>) {
        if ids.is_empty() {
            return;
        }
        let mut held = self.held.lock().expect("held lock");
        for id in ids {
            if let Some(h) = held.remove(&id) {
                self.release(h.set, h.member);
            }
        }
    }

    /// Give a slot back, with the next round trip's asks (or, while too many wait, in the
    /// background).
    fn release(&self, set: Arc<str>, member: String) {
        if let Err(full) = self.asks.try_send(Item::Release(set, member)) {
            if let Item::Release(set, member) = full.into_inner() {
                self.chore(Chore::Release(set, member));
            }
        }
    }

    /// Queue `chore` for the background worker (a full queue: it is dropped; a slot then
    /// expires, a use stays used). Whether it was queued.
    fn chore(&self, chore: Chore) -> bool {
        self.chores.try_send((Instant::now(), chore)).is_ok()
    }

    /// Take `mark` back in the background, and remember that it waits (`once`).
    fn take_back_later(&self, mark: Mark) {
        let (key, attempt) = (mark.key.clone(), mark.attempt.clone());
        let mut waiting = self.taking_back.lock().expect("take-backs lock");
        if self.chore(Chore::Forget(mark)) {
            waiting.entry(key).or_default().push(attempt);
        }
    }

    /// The attempts of uses of `key` that wait to be taken back.
    fn waiting_to_be_taken_back(&self, key: &str) -> Vec<String> {
        let waiting = self.taking_back.lock().expect("take-backs lock");
        waiting.get(key).cloned().unwrap_or_default()
    }

    /// `mark` was taken back (or is given up on): it waits no more.
    fn taken_back(&self, mark: &Mark) {
        let mut waiting = self.taking_back.lock().expect("take-backs lock");
        if let Some(attempts) = waiting.get_mut(&mark.key) {
            attempts.retain(|a| *a != mark.attempt);
            if attempts.is_empty() {
                waiting.remove(&mark.key);
            }
        }
    }
}

/// Take back `mark` (compare-and-delete).
async fn forget(inner: &Inner, mark: &Mark, background: bool) -> Result<(), Unavailable> {
    let mut call = inner.scripts.forget.prepare_invoke();
    call.key(&mark.key).arg(&mark.attempt);
    let mut con = inner.con();
    run(inner, &["forget"], call.invoke_async::<i64>(&mut con), background).await.map(drop)
}

/// The slots the store took for an ask (their set, their members' prefix, how many): given
/// back when dropped, unless the asker took them (it read the answer, and holds them).
struct Taken {
    inner: Weak<Inner>,
    slot: Option<(Arc<str>, String, u32)>,
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let (Some((set, prefix, n)), Some(inner)) = (self.slot.take(), self.inner.upgrade()) {
            for i in 1..=n {
                inner.release(set.clone(), format!("{prefix}.{i}"));
            }
        }
    }
}

/// A round trip for the requests `ops` (one name each, for the metrics), bounded by
/// `TIMEOUT`, counted, and (unless `background`) skipped while the store is judged down.
async fn run<T>(
    inner: &Inner,
    ops: &[&'static str],
    trip: impl Future<Output = redis::RedisResult<T>>,
    background: bool,
) -> Result<T, Unavailable> {
    if !background && inner.skipped(ops) {
        return Err(Unavailable::Skipped);
    }
    let started = Instant::now();
    let out = tokio::time::timeout(TIMEOUT, trip).await;
    let took = started.elapsed();
    let failed = |why: Unavailable| {
        let result = if why == Unavailable::Timeout { "timeout" } else { "error" };
        inner.metrics.request(ops, result, Some(took));
        if why == Unavailable::Refused {
            inner.rebuild();
        }
        if !background && inner.failures.fetch_add(1, Ordering::Relaxed) + 1 >= SKIP_AFTER {
            inner.failures.store(0, Ordering::Relaxed);
            let until = inner.epoch.elapsed() + SKIP_FOR;
            inner.skip_until.store(until.as_millis() as u64, Ordering::Relaxed);
        }
        why
    };
    match out {
        Ok(Ok(v)) => {
            inner.failures.store(0, Ordering::Relaxed);
            inner.metrics.request(ops, "ok", Some(took));
            Ok(v)
        }
        Ok(Err(e)) => Err(failed(classify(&e))),
        Err(_) => Err(failed(Unavailable::Timeout)),
    }
}

/// What a store error means here (its text may quote the store, which is not ours to log).
fn classify(e: &redis::RedisError) -> Unavailable {
    match e.kind() {
        _ if e.is_timeout() => Unavailable::Timeout,
        // Raised while connecting, for any refusal of the handshake.
        redis::ErrorKind::AuthenticationFailed => Unavailable::Refused,
        _ if e.code() == Some("OOM") => Unavailable::Full,
        _ if matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "LOADING")) => Unavailable::Refused,
        redis::ErrorKind::Io | redis::ErrorKind::Client => Unavailable::Down,
        _ => Unavailable::Reply,
    }
}

/// A slot held in the store while it lives; dropped, it is given back (in the background:
/// if that fails for long, it expires).
#[derive(Debug)]
pub(crate) struct Lease {
    id: u64,
    /// Its slots' set, which names its `Reserve`.
    set: Arc<str>,
    store: Weak<Inner>,
}

impl Drop for Lease {
    /// The slot is kept for this replica's next calls while it has calls running (`Reserve`),
    /// else given back, with the kept ones no longer needed.
    fn drop(&mut self) {
        let Some(inner) = self.store.upgrade() else { return };
        let gone: Vec<u64> = {
            let mut reserves = inner.reserves.lock().expect("reserves lock");
            match reserves.get_mut(&self.set) {
                Some(r) => {
                    r.running = r.running.saturating_sub(1);
                    r.free.push(self.id);
                    r.surplus(Instant::now())
                }
                None => vec![self.id],
            }
        };
        inner.give_back(gone);
    }
}

/// Send the asks that came while the last round trip was out, and the slots given back
/// meanwhile, in one round trip (one script), and answer each ask: under load a replica's
/// calls share round trips, and alone a call waits for one round trip as before.
async fn send_asks(inner: Weak<Inner>, mut queue: tokio::sync::mpsc::Receiver<Item>) {
    let mut items = Vec::with_capacity(BATCH);
    loop {
        if queue.recv_many(&mut items, BATCH).await == 0 {
            return;
        }
        let Some(inner) = inner.upgrade() else { return };
        let (mut asks, mut releases) = (Vec::new(), Vec::new());
        for item in items.drain(..) {
            match item {
                // Its asker gave up before it was sent: nothing to ask.
                Item::Ask(ask) if ask.reply.is_closed() => {}
                Item::Ask(ask) => asks.push(ask),
                Item::Release(set, member) => releases.push((set, member)),
            }
        }
        let mut call = inner.scripts.admit.prepare_invoke();
        call.arg(LEASE.as_millis() as u64);
        let mut ops = Vec::with_capacity(releases.len() + asks.len());
        for (set, member) in &releases {
            call.key(&**set).arg("r").arg(member);
            ops.push("release");
        }
        for ask in &asks {
            let (interval, tolerance) =
                ask.limit.rate.map_or((0, 0), |(i, t)| (i.as_micros(), t.as_micros()));
            call.key(&*ask.slots)
                .key(&ask.rate)
                .arg("a")
                .arg(ask.limit.concurrent)
                .arg(&ask.member)
                .arg(ask.want_slots)
                .arg(interval as u64)
                .arg(tolerance as u64)
                .arg(ask.want_rate);
            ops.push(ask.op);
        }
        if ops.is_empty() {
            continue;
        }
        let mut con = inner.con();
        // Slots given back alone are background work: they do not open the breaker.
        let answer = run(&inner, &ops, call.invoke_async::<Vec<i64>>(&mut con), asks.is_empty()).await;
        let answer = answer.and_then(|v| {
            let understood = v.len() == 3 * asks.len()
                && asks.iter().zip(v.chunks(3)).all(|(ask, a)| understood(ask, a[0], a[1], a[2]));
            if understood { Ok(v) } else { Err(Unavailable::Reply) }
        });
        match answer {
            Ok(verdicts) => {
                for (ask, a) in asks.into_iter().zip(verdicts.chunks(3)) {
                    let drawn = u32::try_from(a[1]).unwrap_or(0);
                    let slot = (a[0] == 0 && drawn > 0).then_some((ask.slots, ask.member, drawn));
                    let taken = Taken { inner: Arc::downgrade(&inner), slot };
                    // An asker gone meanwhile drops the answer, and with it the slots.
                    let _ = ask.reply.send(Ok(Verdict { code: a[0], x: a[1], rate: a[2], taken }));
                }
            }
            Err(why) => {
                for (set, member) in releases {
                    inner.chore(Chore::Release(set, member));
                }
                // The script may have taken slots: they are given back (one never taken is
                // a no-op there).
                for ask in asks {
                    if why.maybe_sent() {
                        for i in 1..=ask.want_slots {
                            inner.chore(Chore::Release(ask.slots.clone(), format!("{}.{i}", ask.member)));
                        }
                    }
                    let _ = ask.reply.send(Err(why));
                }
            }
        }
    }
}

/// Whether the store's answer to `ask` is one it can give: a known verdict, and when let
/// through, at least one and at most the slots and calls of rate wanted.
fn understood(ask: &Ask, code: i64, x: i64, rate: i64) -> bool {
    let within =
        |got: i64, want: u32| if want == 0 { got == 0 } else { (1..=i64::from(want)).contains(&got) };
    match code {
        0 => within(x, ask.want_slots) && within(rate, ask.want_rate),
        1 => ask.want_slots > 0 && x >= 0,
        2 => ask.want_rate > 0 && x >= 0,
        _ => false,
    }
}

/// Tell the store what it must still hear: slots given back (many per round trip), uses
/// taken back. While it cannot be reached, try again every `SKIP_FOR`; a slot older than
/// `LEASE` has expired there anyway, a use older than `FORGET_FOR` stays used.
async fn do_chores(inner: Weak<Inner>, mut queue: tokio::sync::mpsc::Receiver<(Instant, Chore)>) {
    let mut batch: Vec<(Instant, Chore)> = Vec::with_capacity(BATCH);
    let mut again: Vec<(Instant, Chore)> = Vec::new();
    loop {
        if again.is_empty() {
            if queue.recv_many(&mut batch, BATCH).await == 0 {
                return;
            }
        } else {
            tokio::time::sleep(SKIP_FOR).await;
            while batch.len() < BATCH
                && let Ok(chore) = queue.try_recv()
            {
                batch.push(chore);
            }
        }
        let Some(inner) = inner.upgrade() else { return };
        batch.append(&mut again);
        batch.retain(|(queued, chore)| {
            let age = queued.elapsed();
            match chore {
                Chore::Release(..) => age < LEASE,
                Chore::Forget(_) if age < FORGET_FOR => true,
                Chore::Forget(mark) => {
                    inner.taken_back(mark);
                    false
                }
            }
        });
        let (releases, forgets): (Vec<_>, Vec<_>) =
            batch.drain(..).partition(|(_, c)| matches!(c, Chore::Release(..)));
        if !releases.is_empty() {
            let mut pipe = redis::pipe();
            for (_, chore) in &releases {
                if let Chore::Release(set, member) = chore {
                    pipe.zrem(&**set, member).ignore();
                }
            }
            let mut con = inner.con();
            if run(&inner, &["release"], pipe.query_async::<()>(&mut con), true).await.is_err() {
                again.extend(releases);
            }
        }
        for (queued, chore) in forgets {
            if let Chore::Forget(mark) = &chore {
                if forget(&inner, mark, true).await.is_err() {
                    again.push((queued, chore));
                } else {
                    inner.taken_back(mark);
                }
            }
        }
    }
}

/// Give back, every two windows of demand, the slots kept for calls that no longer come, and
/// forget the limits no call has asked of for a while.
async fn trim(inner: Weak<Inner>) {
    let mut every = tokio::time::interval(DRAWN_FOR * 2);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let now = Instant::now();
        let surplus: Vec<u64> = {
            let mut reserves = inner.reserves.lock().expect("reserves lock");
            reserves.retain(|_, r| !r.idle(now));
            reserves.values_mut().flat_map(|r| r.surplus(now)).collect()
        };
        inner.give_back(surplus);
    }
}

/// Renew, every `RENEW_EVERY`, the slots not renewed for half of that, so that only a
/// replica that stopped loses its slots (a lease outlives two missed renewals); and record
/// when the store's memory began if it has lost that, which also says whether it answers
/// (`aegis_state_up`, on an idle replica too).
async fn renew(inner: Weak<Inner>) {
    let mut every = tokio::time::interval(RENEW_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let mut call = inner.scripts.memory.prepare_invoke();
        call.key(&inner.memory).key(&inner.legacy_since);
        let mut con = inner.con();
        if let Ok(g) = run(&inner, &["ping"], call.invoke_async::<String>(&mut con), true).await {
            inner.learn(&g);
        }
        let due: Vec<(u64, Arc<str>, String)> = {
            let held = inner.held.lock().expect("held lock");
            let now = Instant::now();
            held.iter()
                .filter(|(_, h)| now.duration_since(h.renewed) >= RENEW_EVERY / 2)
                .map(|(id, h)| (*id, h.set.clone(), h.member.clone()))
                .collect()
        };
        for chunk in due.chunks(BATCH) {
            let mut call = inner.scripts.renew.prepare_invoke();
            call.arg(LEASE.as_millis() as u64);
            for (_, set, member) in chunk {
                call.key(&**set).arg(member);
            }
            let mut con = inner.con();
            let started = Instant::now();
            if run(&inner, &["renew"], call.invoke_async::<i64>(&mut con), true).await.is_ok() {
                let mut held = inner.held.lock().expect("held lock");
                for (id, ..) in chunk {
                    if let Some(h) = held.get_mut(id) {
                        h.renewed = started;
                    }
                }
            }
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
        assert!(store.key("refresh token", b"x", "").starts_with("ns-1:v1:refresh-token:"));
        let other = Store::connect(&settings(8), StateMetrics::default()).unwrap();
        assert_ne!(login, other.key("p", b"login:alice", ":rate"));
        assert_ne!(store.memory_key(), other.memory_key(), "a new key file finds no memory");
        assert!(format!("{store:?}").contains("ns-1") && !format!("{store:?}").contains("07"));
    }

    /// A real Redis (Debian's `redis-server`, which the test set-up installs) on a free
    /// port, killed when dropped.
    struct Redis {
        child: std::process::Child,
        port: u16,
        _dir: tempfile::TempDir,
    }

    impl Redis {
        fn start() -> Redis {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let dir = tempfile::tempdir().unwrap();
            let child = std::process::Command::new("redis-server")
                .args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(["--loglevel", "warning"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server is not installed: run scripts/setup-test-env");
            let redis = Redis { child, port, _dir: dir };
            for _ in 0..100 {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return redis;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            panic!("redis-server did not come up on port {port}");
        }
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The round trips the store's metrics counted so far.
    fn round_trips(metrics: &crate::metrics::Metrics) -> u64 {
        let text = metrics.render();
        let line = text.lines().find_map(|l| l.strip_prefix("aegis_state_round_trips_total "));
        line.map_or(0, |n| n.trim().parse().unwrap())
    }

    fn unix_now() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
    }

    /// Ids issued under the store's memory work at once, on every replica, also right after
    /// the store lost its memory: the ids issued before are refused, the ids issued after are
    /// not, whatever second of the clock each falls in. An id issued where no generation was
    /// known is judged by its time.
    #[tokio::test(flavor = "current_thread")]
    async fn ids_issued_after_the_store_lost_its_memory_work_at_once_and_those_before_never() {
        let redis = Redis::start();
        let mut settings = settings(9);
        settings.url = url::Url::parse(&format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
        let (a, b) = (
            Store::connect(&settings, crate::metrics::Metrics::new().state()).unwrap(),
            Store::connect(&settings, crate::metrics::Metrics::new().state()).unwrap(),
        );
        let left = Duration::from_secs(60);
        for round in 0..3 {
            let g = a.fresh_generation().await;
            assert!(g > 1_000_000_000_000_000, "a generation in µs: {g}");
            let old = format!("old-{round}");
            assert!(matches!(a.once("code", &old, left, (unix_now(), g)).await, Ok(Once::First(_))));
            // The memory lost (a restart empty, a flush); the replicas have not noticed yet.
            let flushed = std::process::Command::new("redis-cli")
                .args(["-p", &redis.port.to_string(), "FLUSHALL"])
                .output()
                .unwrap();
            assert!(flushed.status.success());
            // An id of the old memory is refused, on the replica that issued it and on another.
            for store in [&b, &a] {
                let replay = store.once("code", &old, left, (unix_now(), g)).await;
                assert!(matches!(replay, Ok(Once::Reset)), "{round}: {replay:?}");
            }
            // One issued now, under the new memory, works at once and once.
            let new = a.generation();
            assert_ne!(new, g, "the refusal carried the new generation");
            let id = format!("new-{round}");
            assert!(matches!(b.once("code", &id, left, (unix_now(), new)).await, Ok(Once::First(_))));
            assert!(matches!(a.once("code", &id, left, (unix_now(), new)).await, Ok(Once::Used)));
            assert_eq!(b.fresh_generation().await, new);
        }
        // No generation known to its issuer: issued before the memory began is refused, one
        // issued in a later second is not.
        let began = a.fresh_generation().await / 1_000_000;
        assert!(matches!(a.once("code", "t0", left, (began - 5, 0)).await, Ok(Once::Reset)));
        assert!(matches!(a.once("code", "t1", left, (began + 2, 0)).await, Ok(Once::First(_))));
    }

    /// A store written by a version before generations holds when its memory began (Unix
    /// seconds) under the `since` key: the first replica of this version takes that over, so
    /// the ids the older replicas issued since keep working through a rolling upgrade, and
    /// those issued before it are still refused.
    #[tokio::test(flavor = "current_thread")]
    async fn an_upgrade_takes_over_when_the_memory_began_and_is_not_a_reset() {
        let redis = Redis::start();
        let mut settings = settings(11);
        settings.url = url::Url::parse(&format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
        let store = Store::connect(&settings, crate::metrics::Metrics::new().state()).unwrap();
        let began = unix_now() - 3600;
        let set = std::process::Command::new("redis-cli")
            .args(["-p", &redis.port.to_string(), "SET", &store.0.legacy_since, &began.to_string()])
            .output()
            .unwrap();
        assert!(set.status.success());
        let left = Duration::from_secs(60);
        // Ids of the older version carry no generation: judged by their time against `since`.
        assert!(matches!(store.once("code", "old-a", left, (began + 60, 0)).await, Ok(Once::First(_))));
        assert!(matches!(store.once("code", "old-b", left, (began - 60, 0)).await, Ok(Once::Reset)));
        assert_eq!(store.fresh_generation().await, began * 1_000_000, "the memory's start, in µs");
        // Another replica that first asks for the generation finds the same one.
        let other = Store::connect(&settings, crate::metrics::Metrics::new().state()).unwrap();
        assert_eq!(other.fresh_generation().await, began * 1_000_000);
    }

    // One thread: the asks made at once are all queued before the task that sends them runs,
    // as asks that come while a round trip is out are.
    #[tokio::test(flavor = "current_thread")]
    async fn asks_made_while_a_round_trip_is_out_share_the_next_and_slots_given_back_ride_along() {
        let redis = Redis::start();
        let mut settings = settings(7);
        settings.url = url::Url::parse(&format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
        let metrics = crate::metrics::Metrics::new();
        let store = Store::connect(&settings, metrics.state()).unwrap();
        let limit = Limit { concurrent: 5, rate: None };
        // The first round trip (and the renewer's first tick) out of the way.
        let first = store.admit("admit", b"bob", limit).await.unwrap();
        assert!(matches!(first, Admit::Let(Some(_))), "{first:?}");
        drop(first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = round_trips(&metrics);

        let asks = (0..20).map(|_| store.admit("admit", b"bob", limit));
        let answers: Vec<Admit> =
            futures::future::join_all(asks).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(round_trips(&metrics) - before, 1, "twenty asks, one round trip");
        // Judged one after the other in the store: the first slot was given back with them.
        let let_through = answers.iter().filter(|a| matches!(a, Admit::Let(Some(_)))).count();
        assert_eq!(let_through, 5, "{answers:?}");
        assert!(answers[5..].iter().all(|a| matches!(a, Admit::Busy(5))), "{answers:?}");

        // The five slots given back go with the next ask, before it: it finds them free.
        drop(answers);
        let next = store.admit("admit", b"bob", limit).await.unwrap();
        assert!(matches!(next, Admit::Let(Some(_))), "{next:?}");
        assert_eq!(round_trips(&metrics) - before, 2, "the slots given back rode along");
        let text = metrics.render();
        assert!(text.contains("aegis_state_requests_total{op=\"release\",result=\"ok\"} 6"), "{text}");
        assert!(text.contains("aegis_state_requests_total{op=\"admit\",result=\"ok\"} 22"), "{text}");
    }

    /// Two stores of one key file and namespace on `redis`: two replicas, each with its
    /// metrics.
    fn replicas(redis: &Redis) -> [(Store, crate::metrics::Metrics); 2] {
        let mut settings = settings(7);
        settings.url = url::Url::parse(&format!("redis://127.0.0.1:{}/", redis.port)).unwrap();
        [0, 1].map(|_| {
            let metrics = crate::metrics::Metrics::new();
            (Store::connect(&settings, metrics.state()).unwrap(), metrics)
        })
    }

    /// What `redis-cli` answers `args` on `redis`.
    fn cli(redis: &Redis, args: &[&str]) -> String {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &redis.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_busy_replica_draws_slots_ahead_and_the_sum_across_replicas_still_holds_exactly() {
        let redis = Redis::start();
        let [(a, metrics_a), (b, metrics_b)] = replicas(&redis);
        let limit = Limit { concurrent: 64, rate: None };
        let running = a.key("p", b"bob", ":run");
        // One replica taking 16 slots, holding them: it draws a few at a time.
        let mut held = Vec::new();
        for _ in 0..16 {
            match a.admit("admit", b"bob", limit).await.unwrap() {
                Admit::Let(Some(lease)) => held.push(lease),
                other => panic!("{other:?}"),
            }
        }
        let trips = round_trips(&metrics_a);
        assert!(trips < 10, "16 slots in {trips} round trips");
        // Both replicas taking slots in turn until the store says busy to each: together
        // they hold the limit exactly, none left unused in either.
        let mut busy = [false, false];
        while busy != [true, true] {
            for (i, store) in [&a, &b].into_iter().enumerate() {
                if !busy[i] {
                    match store.admit("admit", b"bob", limit).await.unwrap() {
                        Admit::Let(Some(lease)) => held.push(lease),
                        Admit::Busy(64) => busy[i] = true,
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        assert_eq!(held.len(), 64);
        assert_eq!(cli(&redis, &["ZCARD", &running]), "64");
        assert!(round_trips(&metrics_a) + round_trips(&metrics_b) < 64 + 2);
        // Given back once nothing runs: at most a sixteenth of the limit kept by each replica
        // for its next calls, and those too within two windows of demand.
        drop(held);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(cli(&redis, &["ZCARD", &running]).parse::<u32>().unwrap() <= 2 * 64 / 16);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(cli(&redis, &["ZCARD", &running]), "0");
        // Under a small limit every call is judged in the store, one slot each.
        let small = Limit { concurrent: 8, rate: None };
        let before = round_trips(&metrics_a);
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(a.admit("admit", b"carol", small).await.unwrap());
        }
        assert_eq!(round_trips(&metrics_a) - before, 8);
        assert!(matches!(b.admit("admit", b"carol", small).await.unwrap(), Admit::Busy(8)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn rate_drawn_ahead_never_lets_more_through_than_the_bucket_holds() {
        let redis = Redis::start();
        let [(a, metrics_a), (b, metrics_b)] = replicas(&redis);
        // 320 a minute: one call every 187.5 ms, 320 at once from a full bucket.
        let interval = Duration::from_micros(187_500);
        let limit = Limit { concurrent: 0, rate: Some((interval, interval * 319)) };
        let mut let_through = 0;
        let mut over = [false, false];
        let started = Instant::now();
        while over != [true, true] {
            for (i, store) in [&a, &b].into_iter().enumerate() {
                if !over[i] {
                    match store.admit("admit", b"dave", limit).await.unwrap() {
                        Admit::Let(None) => let_through += 1,
                        Admit::Rate(_) => over[i] = true,
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        // Never more than the bucket and what it refilled meanwhile. Rate drawn and not used
        // in time (valid for DRAWN_FOR; on a loaded machine a draw can outlive it) is lost,
        // never let through twice: at most a draw's worth, a sixteenth of the bucket, per
        // replica.
        let refilled = (started.elapsed().as_micros() / interval.as_micros()) as usize;
        let lost = 2 * (320 / 16 + 1);
        assert!(
            (320 - lost..=320 + refilled + 1).contains(&let_through),
            "{let_through}, {refilled} refilled"
        );
        let trips = round_trips(&metrics_a) + round_trips(&metrics_b);
        assert!(trips < 250, "{let_through} calls in {trips} round trips");
    }

    #[test]
    fn unavailable_says_why_without_the_store_s_words() {
        assert!(Unavailable::Refused.to_string().contains("MCP_STATE_PASSWORD_FILE"));
        assert_eq!(Unavailable::Reply.to_string(), "its answer was not understood");
        assert!(Unavailable::Timeout.maybe_sent() && Unavailable::Down.maybe_sent());
        assert!(Unavailable::Reply.maybe_sent() && Unavailable::Full.maybe_sent());
        assert!(!Unavailable::Skipped.maybe_sent() && !Unavailable::Refused.maybe_sent());
        assert!(!Unavailable::Backlog.maybe_sent());
    }
}
