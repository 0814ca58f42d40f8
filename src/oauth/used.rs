//! Codes, refresh tokens and sign-ins this replica has already accepted, so that a second
//! use is refused at once, before the forge is asked.
//!
//! On `moka`, so that the hard parts are not ours: the check and the insert are one step per
//! id (moka runs the compute calls of one key one at a time, so of two concurrent first uses
//! of an id exactly one is the first), the set is bounded, and each entry leaves at its own
//! expiry (moka's `Expiry`) with no sweep here.
//!
//! Two clocks: the times asked about are the sign-in server's `Clock` (Unix seconds, which a
//! test moves forward), moka's expiry runs on its own. So an entry holds its `expires`, and
//! one whose `expires` has passed at the `now` it is asked at counts as absent (a new use
//! replaces it); moka's expiry, the lifetime left at the insert plus a second, only frees the
//! memory. The sign-in clock never runs behind the system's, so moka never drops an entry
//! that clock still counts as live.
//!
//! With a shared store (`MCP_STATE_URL`) this set is the first filter only: a replay on this
//! replica is refused with no round trip, and a first use here is then asked of the store,
//! which decides for every replica. A store that cannot decide refuses (single use fails
//! closed), and the id is taken back here so that the client may try again.
//!
//! When full, the least recently used entries go (LRU: moka's default admission policy may
//! refuse to keep a new entry at all, and the newest are the ones a replay reuses). An id
//! dropped so is not refused here a second time, but the forge still refuses a reused code or
//! rotated refresh token on its own.

use std::time::{Duration, Instant};

use moka::Expiry;
use moka::ops::compute::{CompResult, Op};
use moka::policy::EvictionPolicy;
use moka::sync::Cache;

use crate::state::{Mark, Once, Store};

pub(crate) struct UsedOnce {
    ids: Cache<String, Used>,
    shared: Option<Store>,
}

/// Why an id is not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotFirst {
    /// It was used before.
    Used,
    /// It was issued before the shared store's memory began (the store restarted empty).
    Reset,
    /// The shared store could not decide.
    Unavailable,
}

/// A use let through. Settled once the forge has answered for it; dropped unsettled (the
/// forge could not be reached, or the request went away meanwhile), it is taken back here
/// and in the shared store, so that the client may try again while the id lives.
#[derive(Debug)]
pub(crate) struct Use {
    id: String,
    mark: Option<Mark>,
    ids: Cache<String, Used>,
    shared: Option<Store>,
    settled: bool,
}

impl Use {
    /// The use happened: it stays used.
    pub(crate) fn settle(mut self) {
        self.settled = true;
    }
}

impl Drop for Use {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.ids.invalidate(&self.id);
        if let (Some(store), Some(mark)) = (self.shared.take(), self.mark.take()) {
            // Without a runtime (the process is ending) the mark stays: refused, never
            // accepted twice.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { store.forget(mark).await });
            }
        }
    }
}

/// One accepted id: until when it counts (the sign-in clock's Unix seconds), and how long
/// moka keeps it from its insert.
#[derive(Debug, Clone, Copy)]
struct Used {
    expires: u64,
    keep: Duration,
}

/// Each entry leaves `keep` after it was put, by moka's clock.
struct Keep;

impl Expiry<String, Used> for Keep {
    fn expire_after_create(&self, _: &String, used: &Used, _: Instant) -> Option<Duration> {
        Some(used.keep)
    }

    fn expire_after_update(
        &self,
        _: &String,
        used: &Used,
        _: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(used.keep)
    }
}

impl std::fmt::Debug for UsedOnce {
    /// The count only: the ids are nobody's business, and there may be many.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsedOnce").field("entries", &self.ids.entry_count()).finish()
    }
}

impl UsedOnce {
    /// A set of at most `cap` ids.
    pub(crate) fn new(cap: usize) -> UsedOnce {
        let ids = Cache::builder()
            .max_capacity(cap.max(1) as u64)
            .eviction_policy(EvictionPolicy::lru())
            .expire_after(Keep)
            .build();
        UsedOnce { ids, shared: None }
    }

    /// The same set, asking `store` after its own check when there is one.
    pub(crate) fn shared(mut self, store: Option<Store>) -> UsedOnce {
        self.shared = store;
        self
    }

    /// The generation of the shared store's memory to issue an id under, right after a round
    /// trip to the store (0: no store, or none known).
    pub(crate) fn generation(&self) -> u64 {
        self.shared.as_ref().map_or(0, Store::generation)
    }

    /// The generation of the shared store's memory to issue an id under, asked of the store
    /// now (what this replica knew when it cannot say; 0: no store).
    pub(crate) async fn fresh_generation(&self) -> u64 {
        match &self.shared {
            Some(store) => store.fresh_generation().await,
            None => 0,
        }
    }

    /// Whether `id` of `kind` (a sign-in coming back, a code, a refresh token, a yes) is used
    /// for the first time at `now`, here and, with a shared store, on every replica:
    /// remembered until `expires`. `generation` is the generation of the store's memory the id
    /// was issued under; for an id issued under none (0), `lifetime` is how long such ids live,
    /// so that the store can tell an id issued before its memory began by its time.
    pub(crate) async fn take(
        &self,
        kind: &'static str,
        id: &str,
        (expires, lifetime): (u64, u64),
        generation: u64,
        now: u64,
    ) -> Result<Use, NotFirst> {
        if !self.first_use(id, expires, now) {
            return Err(NotFirst::Used);
        }
        let taken = |mark| Use {
            id: id.to_owned(),
            mark,
            ids: self.ids.clone(),
            shared: self.shared.clone(),
            settled: false,
        };
        let Some(store) = &self.shared else { return Ok(taken(None)) };
        let left = Duration::from_secs(expires.saturating_sub(now));
        match store.once(kind, id, left, (expires.saturating_sub(lifetime), generation)).await {
            Ok(Once::First(mark)) => Ok(taken(Some(mark))),
            Ok(Once::Used) => Err(NotFirst::Used),
            Ok(Once::Reset) => Err(NotFirst::Reset),
            Err(why) => {
                self.forget_here(id);
                store.warn(&format!("each {kind} is refused meanwhile"), why);
                Err(NotFirst::Unavailable)
            }
        }
    }

    /// Whether `id` is used for the first time at `now` (then it is remembered until
    /// `expires`; both Unix seconds of the sign-in clock).
    pub(crate) fn first_use(&self, id: &str, expires: u64, now: u64) -> bool {
        let keep = Duration::from_secs(expires.saturating_sub(now).saturating_add(1));
        let done = self.ids.entry(id.to_owned()).and_compute_with(|seen| match seen {
            Some(seen) if seen.value().expires >= now => Op::Nop,
            _ => Op::Put(Used { expires, keep }),
        });
        matches!(done, CompResult::Inserted(_) | CompResult::ReplacedWith(_))
    }

    /// Forget `id` here.
    fn forget_here(&self, id: &str) {
        self.ids.invalidate(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::{Arc, Barrier};

    fn now() -> u64 {
        super::super::now()
    }

    #[test]
    fn a_second_use_is_refused_and_the_set_stays_bounded() {
        let used = UsedOnce::new(3);
        let later = now() + 60;
        assert!(used.first_use("a", later, now()));
        assert!(!used.first_use("a", later, now()));
        assert!(!used.first_use("a", later + 600, now()), "a later expiry asked for changes nothing");
        for id in ["b", "c", "d", "e", "f", "g"] {
            assert!(used.first_use(id, later + 1, now()));
        }
        used.ids.run_pending_tasks();
        assert!(used.ids.entry_count() <= 3, "{} entries", used.ids.entry_count());
        // The newest stay (least recently used go first).
        assert!(!used.first_use("g", later + 1, now()));
    }

    #[test]
    fn an_expired_entry_counts_as_absent_and_is_replaced() {
        let used = UsedOnce::new(10);
        let t = now();
        assert!(used.first_use("x", t - 1, t), "already expired when first used");
        assert!(used.first_use("x", t + 60, t), "an expired entry does not count");
        assert!(!used.first_use("x", t + 60, t));
        // Judged by the time asked at, not by moka's clock: moved past the expiry (as a test
        // moves the sign-in clock), the entry is gone; the expiry itself still counts.
        assert!(!used.first_use("x", t + 600, t + 60));
        assert!(used.first_use("x", t + 600, t + 61));
        assert!(!used.first_use("x", t + 600, t + 61), "the replacement counts in full");
        // Moka frees what has expired by its own clock (lifetime left + 1 s).
        let short = UsedOnce::new(10);
        assert!(short.first_use("y", t, t));
        std::thread::sleep(Duration::from_millis(1100));
        assert!(!short.ids.contains_key("y"));
        short.ids.run_pending_tasks();
        assert_eq!(short.ids.entry_count(), 0);
    }

    #[test]
    fn a_forgotten_id_may_be_used_again_and_only_that_one() {
        let used = UsedOnce::new(10);
        let (t, later) = (now(), now() + 60);
        assert!(used.first_use("a", later, t) && used.first_use("b", later, t));
        used.forget_here("a");
        used.forget_here("never-used");
        assert!(used.first_use("a", later, t));
        assert!(!used.first_use("a", later, t));
        assert!(!used.first_use("b", later, t));
    }

    #[test]
    fn of_concurrent_first_uses_of_one_id_exactly_one_is_first() {
        let used = Arc::new(UsedOnce::new(1000));
        let (threads, rounds) = (8, 200);
        let barrier = Arc::new(Barrier::new(threads));
        let running: Vec<_> = (0..threads)
            .map(|_| {
                let (used, barrier) = (used.clone(), barrier.clone());
                std::thread::spawn(move || {
                    (0..rounds)
                        .map(|round| {
                            barrier.wait();
                            used.first_use(&format!("id-{round}"), now() + 60, now())
                        })
                        .collect::<Vec<bool>>()
                })
            })
            .collect();
        let firsts: Vec<Vec<bool>> = running.into_iter().map(|t| t.join().unwrap()).collect();
        for round in 0..rounds {
            let n = firsts.iter().filter(|f| f[round]).count();
            assert_eq!(n, 1, "round {round}: {n} first uses");
        }
        // An expired entry raced for: replaced once, too.
        let t = now();
        assert!(used.first_use("old", t - 1, t));
        let running: Vec<_> = (0..threads)
            .map(|_| {
                let (used, barrier) = (used.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    used.first_use("old", t + 60, t)
                })
            })
            .collect();
        let winners = running.into_iter().map(|h| h.join().unwrap()).filter(|&f| f).count();
        assert_eq!(winners, 1);
    }
}
