//! Rate and concurrency limits per identity (`RATE_LIMIT_PER_MINUTE`,
//! `RATE_LIMIT_CONCURRENT`), checked by `call.rs` once the caller's identity is known and
//! before anything is sent for the call: over a limit the call fails at once as
//! `rate_limited`, saying which limit and how long to wait.
//!
//! Each identity (the server's own, or a forge login) has its own entry, so one at its limit
//! neither waits on nor takes from another. The rate is GCRA — a token bucket of
//! `RATE_LIMIT_PER_MINUTE` calls refilled smoothly, kept as the one instant at which the
//! bucket is full again — so no task refills anything. Entries sit in shards, each behind its
//! own mutex held for a few comparisons; a call's running count is an atomic its permit
//! gives back on drop, without a lock.
//!
//! The table is bounded: an entry whose bucket is full and which runs nothing is the same as
//! no entry, and goes first when a shard is full. When a shard holds only active entries,
//! the one nearest to idle is forgotten: that identity may get its burst again early, and
//! nobody is ever refused because of the table — so many identities cannot lock others out.
//!
//! With a shared store (`MCP_STATE_URL`) the limits of an identity are judged by the store,
//! for every replica at once, by the same GCRA and a count of leased slots; this table then
//! only decides while the store cannot (`MCP_STATE_FAIL=open`), as if there were no store.
//!
//! The same machinery bounds something else that costs the forge: tokens nobody has
//! established yet, which need a login lookup. `NewTokens` gives each client address its own
//! budget of them per minute (`MCP_NEW_TOKENS_PER_MINUTE`), judged by the HTTP layer before a
//! request is read.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::identity::Principal;
use crate::state::{Admit, Lease, Limit, Store};
use aegis_core::error::CallError;

/// Most identities remembered at once (as many as the login cache holds).
pub(crate) const CAPACITY: usize = crate::identity::cache::CAPACITY;
const SHARDS: usize = 16;
const PER_SHARD: usize = CAPACITY / SHARDS;

/// The wait suggested to an identity at its concurrency limit: when one of its calls ends is
/// not known, and calls usually take well under a second.
pub(crate) const BUSY_RETRY_AFTER: u64 = 1;

/// Whom a limit counts for: a caller whose identity is known (every token of one login shares
/// its limits), or, for new tokens, the client's address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Caller(Principal),
    Peer(IpAddr),
}

/// The per-minute rate as GCRA's two durations.
#[derive(Debug, Clone, Copy)]
struct Rate {
    per_minute: u32,
    /// Time one call uses up: a minute divided by the rate.
    interval: Duration,
    /// How far ahead of now the bucket may be drawn: `per_minute - 1` intervals, so that a
    /// rested identity may make `per_minute` calls at once.
    tolerance: Duration,
}

#[derive(Debug)]
struct Entry {
    /// GCRA's theoretical arrival time: the bucket is full again at `tat` (full when ≤ now).
    tat: Instant,
    /// Calls of this identity running now.
    running: Arc<AtomicU32>,
}

impl Entry {
    fn idle(&self, now: Instant) -> bool {
        self.tat <= now && self.running.load(Ordering::Acquire) == 0
    }
}

/// The limits of every identity.
#[derive(Debug)]
pub struct Limits {
    rate: Option<Rate>,
    concurrent: Option<u32>,
    shards: Box<[Mutex<HashMap<Key, Entry>>]>,
    hasher: RandomState,
    /// Where refusals are counted.
    refused: crate::metrics::RateLimits,
    /// The store that judges for every replica, and what to do while it cannot.
    shared: Option<Store>,
}

/// A call let through; while it lives, it counts as running for its identity.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// Counted nowhere: no concurrency limit.
    Free,
    /// Counted in this replica's table.
    Here(Arc<AtomicU32>),
    /// Counted in the shared store.
    Shared { _lease: Lease },
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Admitted::Here(running) = self {
            running.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The wait suggested while the shared store cannot judge and `MCP_STATE_FAIL=closed`.
const STORE_RETRY_AFTER: u64 = 1;

impl Limits {
    /// `per_minute` calls per identity per minute, `concurrent` calls of one identity at
    /// once; `None`: no such limit.
    pub(crate) fn new(per_minute: Option<NonZeroU32>, concurrent: Option<NonZeroU32>) -> Limits {
        let rate = per_minute.map(|n| {
            let interval = Duration::from_secs(60) / n.get();
            Rate { per_minute: n.get(), interval, tolerance: interval * (n.get() - 1) }
        });
        Limits {
            rate,
            concurrent: concurrent.map(NonZeroU32::get),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            refused: Default::default(),
            shared: None,
        }
    }

    /// The limits of the settings, counting their refusals into `refused`.
    /// With `store`, judged by it for every replica.
    pub(crate) fn from_settings(
        s: &crate::config::Settings,
        refused: crate::metrics::RateLimits,
        store: Option<Store>,
    ) -> Limits {
        Limits { refused, shared: store, ..Limits::new(s.rate_limit_per_minute, s.rate_limit_concurrent) }
    }

    /// Let a call of `key` through, or say which limit refuses it and for how long.
    pub(crate) async fn admit(&self, key: Key) -> Result<Admitted, CallError> {
        if self.rate.is_none() && self.concurrent.is_none() {
            return Ok(Admitted::Free);
        }
        if let (Some(store), Key::Caller(principal)) = (&self.shared, &key) {
            let who = match principal {
                Principal::Global => "global".to_owned(),
                Principal::Login(login) => format!("login:{login}"),
            };
            let limit = Limit {
                concurrent: self.concurrent.unwrap_or(0),
                rate: self.rate.map(|r| (r.interval, r.tolerance)),
            };
            match store.admit("admit", who.as_bytes(), limit).await {
                Ok(Admit::Let(Some(lease))) => return Ok(Admitted::Shared { _lease: lease }),
                Ok(Admit::Let(None)) => return Ok(Admitted::Free),
                Ok(Admit::Busy(running)) => return Err(self.refusal(Refusal::Busy(running))),
                Ok(Admit::Rate(wait)) => {
                    let per_minute = self.rate.map_or(0, |r| r.per_minute);
                    return Err(self.refusal(Refusal::Rate(per_minute, retry_seconds(wait))));
                }
                Err(why) if store.fails_closed() => {
                    store.metrics().fallback("caller", "refused");
                    store.warn("calls are refused meanwhile (MCP_STATE_FAIL=closed)", why);
                    self.refused.refused("state");
                    return Err(CallError::rate_limited(
                        format!(
                            "the limits' shared store (MCP_STATE_URL) could not be reached, and MCP_STATE_FAIL=closed refuses calls meanwhile; nothing was sent — retry after {STORE_RETRY_AFTER} s"
                        ),
                        STORE_RETRY_AFTER,
                    ));
                }
                Err(why) => {
                    store.metrics().fallback("caller", "local");
                    store.warn(
                        "each replica applies the limits on its own meanwhile (MCP_STATE_FAIL=open)",
                        why,
                    );
                }
            }
        }
        self.admit_at(key, Instant::now())
    }

    fn admit_at(&self, key: Key, now: Instant) -> Result<Admitted, CallError> {
        self.check(key, now).map_err(|refusal| self.refusal(refusal))
    }

    /// The refusal of a limit, counted.
    fn refusal(&self, refusal: Refusal) -> CallError {
        match refusal {
            Refusal::Busy(running) => {
                self.refused.refused("concurrent");
                CallError::rate_limited(
                    format!(
                        "this identity already has {running} calls running, its limit (RATE_LIMIT_CONCURRENT); nothing was sent — retry after {BUSY_RETRY_AFTER} s, or when one of them has finished"
                    ),
                    BUSY_RETRY_AFTER,
                )
            }
            Refusal::Rate(per_minute, wait) => {
                self.refused.refused("per_minute");
                CallError::rate_limited(
                    format!(
                        "this identity is over its limit of {per_minute} calls per minute (RATE_LIMIT_PER_MINUTE); nothing was sent — retry after {wait} s"
                    ),
                    wait,
                )
            }
        }
    }

    /// The entry of `key` takes one more call, or the limit it would break.
    fn check(&self, key: Key, now: Instant) -> Result<Admitted, Refusal> {
        let shard = &self.shards[self.hasher.hash_one(&key) as usize % SHARDS];
        let mut map = shard.lock().expect("limits lock");
        if map.len() >= PER_SHARD && !map.contains_key(&key) {
            make_room(&mut map, now);
        }
        let entry = map.entry(key).or_insert_with(|| Entry { tat: now, running: Arc::default() });
        if let Some(max) = self.concurrent {
            let running = entry.running.load(Ordering::Acquire);
            if running >= max {
                return Err(Refusal::Busy(running));
            }
        }
        if let Some(rate) = self.rate {
            let tat = entry.tat.max(now);
            let ahead = tat - now;
            if ahead > rate.tolerance {
                return Err(Refusal::Rate(rate.per_minute, retry_seconds(ahead - rate.tolerance)));
            }
            entry.tat = tat + rate.interval;
        }
        if self.concurrent.is_none() {
            return Ok(Admitted::Free);
        }
        entry.running.fetch_add(1, Ordering::AcqRel);
        Ok(Admitted::Here(entry.running.clone()))
    }

    /// Identities remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().expect("limits lock").len()).sum()
    }
}

/// Which limit a call would break: the calls running, or the rate per minute and the wait.
enum Refusal {
    Busy(u32),
    Rate(u32, u64),
}

/// Tokens nobody has established yet, per client address: each costs a login lookup at the
/// forge, so one address may present at most `per_minute` of them a minute (that many at once,
/// then one every 60/N s). Tokens already known to the login cache cost nothing here.
#[derive(Debug)]
pub struct NewTokens(Limits);

impl NewTokens {
    /// `per_minute` new tokens per address (`None`: no limit), refusals counted into `refused`.
    pub(crate) fn new(per_minute: Option<NonZeroU32>, refused: crate::metrics::RateLimits) -> NewTokens {
        NewTokens(Limits { refused, ..Limits::new(per_minute, None) })
    }

    /// Whether `peer` may present one more new token: the wait it should take when not.
    pub(crate) fn admit(&self, peer: IpAddr) -> Result<(), CallError> {
        let Some(rate) = self.0.rate else { return Ok(()) };
        match self.0.check(Key::Peer(peer), Instant::now()) {
            // No concurrency limit here: only the rate can refuse.
            Ok(_) | Err(Refusal::Busy(_)) => Ok(()),
            Err(Refusal::Rate(_, wait)) => {
                self.0.refused.refused("new_tokens");
                Err(CallError::rate_limited(
                    format!(
                        "this address has presented more than {} tokens new to this server in a minute (MCP_NEW_TOKENS_PER_MINUTE; each is looked up at the forge); nothing was sent — retry after {wait} s with a token the forge has confirmed",
                        rate.per_minute
                    ),
                    wait,
                ))
            }
        }
    }
}

/// A full shard: idle entries go (they hold nothing); if none was idle, the entry nearest to
/// idle — not running, the earliest full bucket — is forgotten.
fn make_room(map: &mut HashMap<Key, Entry>, now: Instant) {
    map.retain(|_, e| !e.idle(now));
    if map.len() < PER_SHARD {
        return;
    }
    let nearest = map
        .iter()
        .min_by_key(|(_, e)| (e.running.load(Ordering::Acquire) > 0, e.tat))
        .map(|(k, _)| k.clone());
    if let Some(k) = nearest {
        map.remove(&k);
    }
}

/// A wait in whole seconds, rounded up, at least 1 (a client told 0 would retry at once).
fn retry_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aegis_core::error::ErrorKind;

    fn limits(per_minute: u32, concurrent: u32) -> Limits {
        Limits::new(NonZeroU32::new(per_minute), NonZeroU32::new(concurrent))
    }

    fn retry_after(r: Result<Admitted, CallError>) -> u64 {
        match r {
            Err(CallError::Result(f)) => {
                assert_eq!(f.kind, ErrorKind::RateLimited, "{}", f.message);
                assert!(f.message.contains(&format!("retry after {} s", f.retry_after.unwrap())));
                f.retry_after.unwrap()
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_rested_identity_gets_its_burst_then_one_call_per_interval() {
        let l = limits(6, 0); // one call per 10 s, 6 at once
        let t0 = Instant::now();
        for _ in 0..6 {
            l.admit_at(Key::Caller(Principal::Global), t0).unwrap();
        }
        assert_eq!(retry_after(l.admit_at(Key::Caller(Principal::Global), t0)), 10);
        assert_eq!(
            retry_after(l.admit_at(Key::Caller(Principal::Global), t0 + Duration::from_millis(9_500))),
            1
        );
        // Refusals use nothing up: after one interval, exactly one more call.
        l.admit_at(Key::Caller(Principal::Global), t0 + Duration::from_secs(10)).unwrap();
        assert_eq!(retry_after(l.admit_at(Key::Caller(Principal::Global), t0 + Duration::from_secs(10))), 10);
        // Rested for a minute: the whole burst again, no more.
        let t1 = t0 + Duration::from_secs(80);
        for _ in 0..6 {
            l.admit_at(Key::Caller(Principal::Global), t1).unwrap();
        }
        assert!(l.admit_at(Key::Caller(Principal::Global), t1).is_err());
    }

    #[test]
    fn the_wait_is_rounded_up_to_whole_seconds() {
        let l = limits(7, 0); // one call per 8.571… s
        let t0 = Instant::now();
        for _ in 0..7 {
            l.admit_at(Key::Caller(Principal::Global), t0).unwrap();
        }
        assert_eq!(retry_after(l.admit_at(Key::Caller(Principal::Global), t0)), 9);
        assert_eq!(retry_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_seconds(Duration::ZERO), 1);
        assert_eq!(retry_seconds(Duration::from_secs(3)), 3);
    }

    #[test]
    fn one_identity_at_its_limit_does_not_touch_another() {
        let l = limits(2, 0);
        let t0 = Instant::now();
        for _ in 0..2 {
            l.admit_at(Key::Caller(Principal::login("bob")), t0).unwrap();
        }
        assert!(l.admit_at(Key::Caller(Principal::login("bob")), t0).is_err());
        assert!(
            l.admit_at(Key::Caller(Principal::login("BOB")), t0).is_err(),
            "a login in any letter case is one identity"
        );
        l.admit_at(Key::Caller(Principal::login("alice")), t0).unwrap();
        l.admit_at(Key::Caller(Principal::Global), t0).unwrap();
    }

    #[test]
    fn running_calls_count_until_their_permit_is_dropped() {
        let l = limits(0, 2);
        let admit = |who: &str| l.admit_at(Key::Caller(Principal::login(who)), Instant::now());
        let a = admit("bob").unwrap();
        let b = admit("bob").unwrap();
        assert_eq!(retry_after(admit("bob")), BUSY_RETRY_AFTER);
        let other = admit("carol").unwrap();
        drop(a);
        let c = admit("bob").unwrap();
        assert!(admit("bob").is_err());
        drop((b, c, other));
        admit("bob").unwrap();
    }

    #[test]
    fn a_call_refused_for_concurrency_uses_up_no_rate() {
        let l = limits(2, 1);
        let t0 = Instant::now();
        let running = l.admit_at(Key::Caller(Principal::Global), t0).unwrap();
        for _ in 0..5 {
            assert!(l.admit_at(Key::Caller(Principal::Global), t0).is_err());
        }
        drop(running);
        l.admit_at(Key::Caller(Principal::Global), t0).unwrap();
    }

    #[tokio::test]
    async fn without_limits_nothing_is_remembered() {
        let l = limits(0, 0);
        for i in 0..100 {
            l.admit(Key::Caller(Principal::login(&format!("u{i}")))).await.unwrap();
        }
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn the_table_is_bounded_and_idle_identities_go_first() {
        let l = limits(60, 0);
        let t0 = Instant::now();
        for i in 0..CAPACITY * 2 {
            l.admit_at(Key::Caller(Principal::login(&format!("u{i}"))), t0).unwrap();
        }
        assert!(l.len() <= CAPACITY, "{}", l.len());
        // An identity whose bucket is empty is remembered while others rest.
        for _ in 0..60 {
            l.admit_at(Key::Caller(Principal::login("heavy")), t0).unwrap();
        }
        let later = t0 + Duration::from_secs(2);
        for i in 0..CAPACITY * 2 {
            l.admit_at(Key::Caller(Principal::login(&format!("v{i}"))), later).unwrap();
        }
        assert!(l.len() <= CAPACITY);
        // The `u` entries were full again (idle) and went before it: it is still remembered,
        // with the 2 calls 2 s have given back, not a new burst.
        for _ in 0..2 {
            l.admit_at(Key::Caller(Principal::login("heavy")), later).unwrap();
        }
        assert!(l.admit_at(Key::Caller(Principal::login("heavy")), later).is_err());
    }

    #[test]
    fn a_full_table_of_active_identities_forgets_one_and_refuses_nobody() {
        let l = limits(1, 1);
        let t0 = Instant::now();
        let mut held = Vec::new();
        for i in 0..CAPACITY * 2 {
            // Each identity has used its bucket and has a call running.
            held.push(l.admit_at(Key::Caller(Principal::login(&format!("u{i}"))), t0).unwrap());
        }
        assert!(l.len() <= CAPACITY);
        drop(held);
    }

    #[test]
    fn each_address_has_its_own_budget_of_new_tokens() {
        let n = NewTokens::new(NonZeroU32::new(3), Default::default());
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for _ in 0..3 {
            n.admit(a).unwrap();
        }
        let Err(CallError::Result(f)) = n.admit(a) else { panic!("the fourth new token") };
        assert!(
            f.message.contains("MCP_NEW_TOKENS_PER_MINUTE") && f.retry_after == Some(20),
            "{}",
            f.message
        );
        n.admit(b).unwrap();
        let open = NewTokens::new(None, Default::default());
        for _ in 0..1000 {
            open.admit(a).unwrap();
        }
    }
}
