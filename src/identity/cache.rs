//! Logins of per-request tokens (with whether each is a site administrator), cached by a
//! SHA-256 of the token: bounded in size, short lived. The token itself is never stored; a
//! collision-resistant hash is used because a collision would hand one caller another's login.
//! Hits, misses and failures are counted for `/metrics`.
//!
//! Tokens nobody has established cost the forge a lookup each, and anyone can send any number
//! of them. So the cache also tells those apart: a token it has confirmed within `KNOWN_FOR`
//! is *known* (its lookup, once its entry is stale, goes like any call), while an unknown
//! one's lookup waits for one of `LOOKUPS` slots of its own (`lookup_slot`), never for the
//! forge slots established callers use; a token the forge refused is remembered for
//! `REFUSED_FOR` (by hash, bounded) and refused again without asking; and a token seen for
//! the first time in `SEEN_FOR` is *new* (`first_sight`), which the HTTP layer counts against
//! its address's budget.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use secrecy::SecretString;

use super::ForgeUser;
use crate::metrics::IdentityCacheCounts;

/// How long a resolved login is trusted without asking the forge again.
pub const TTL: Duration = Duration::from_secs(60);
/// How long a token the forge confirmed counts as known (its lookups take the forge slots
/// of established callers, not the small pool of new tokens).
pub const KNOWN_FOR: Duration = Duration::from_secs(3600);
/// How long a token the forge refused is refused again without asking it.
pub const REFUSED_FOR: Duration = Duration::from_secs(30);
/// Most tokens remembered at once (confirmed; and, apart, refused).
pub const CAPACITY: usize = 4096;
/// How long a login lookup may take, whatever `GITEA_TIMEOUT` allows: a client waits for
/// the answer of the request behind it (the SDKs give up after 30 s), so a forge that does not
/// answer is said in time, as an error the client can show.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a token seen once does not count as new again.
pub const SEEN_FOR: Duration = Duration::from_secs(60);
/// Lookups of unknown tokens at the forge at once, for every caller together.
pub const LOOKUPS: usize = 8;
/// How long an unknown token's lookup waits for one of `LOOKUPS` slots (a burst of people
/// arriving at once is served in turn; garbage in numbers waits, then is refused).
pub const LOOKUP_WAIT: Duration = Duration::from_secs(5);

type Key = [u8; 32];

/// The cache.
#[derive(Debug)]
pub struct LoginCache {
    entries: Mutex<HashMap<Key, (ForgeUser, Instant)>>,
    /// Tokens the forge refused, and when.
    refused: Mutex<HashMap<Key, Instant>>,
    /// Tokens seen (confirmed or not) in the last `SEEN_FOR`, and when first: a token counts
    /// as new once, not at every request that carries it.
    seen: Mutex<HashMap<Key, Instant>>,
    /// The slots for lookups of unknown tokens.
    lookups: tokio::sync::Semaphore,
    /// One lock per token being resolved, so that concurrent first calls of one token ask
    /// the forge once.
    resolving: Mutex<HashMap<Key, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Hits, misses and failures, for `/metrics`.
    counts: IdentityCacheCounts,
}

fn key(token: &SecretString) -> Key {
    super::header::token_hash(token)
}

impl Default for LoginCache {
    fn default() -> LoginCache {
        LoginCache {
            entries: Mutex::default(),
            refused: Mutex::default(),
            seen: Mutex::default(),
            lookups: tokio::sync::Semaphore::new(LOOKUPS),
            resolving: Mutex::default(),
            counts: IdentityCacheCounts::default(),
        }
    }
}

impl LoginCache {
    /// An empty cache that counts how it answers into `counts`.
    pub(crate) fn counted(counts: IdentityCacheCounts) -> LoginCache {
        LoginCache { counts, ..LoginCache::default() }
    }

    /// The cached user of `token`, if fresh.
    pub fn get(&self, token: &SecretString) -> Option<ForgeUser> {
        let k = key(token);
        let map = self.entries.lock().expect("cache lock");
        map.get(&k).filter(|(_, at)| at.elapsed() < TTL).map(|(l, _)| l.clone())
    }

    /// Whether the forge confirmed `token` within `KNOWN_FOR`.
    pub fn knows(&self, token: &SecretString) -> bool {
        let k = key(token);
        self.entries.lock().expect("cache lock").get(&k).is_some_and(|(_, at)| at.elapsed() < KNOWN_FOR)
    }

    /// Whether the forge refused `token` within `REFUSED_FOR`.
    pub fn refused_recently(&self, token: &SecretString) -> bool {
        let k = key(token);
        self.refused.lock().expect("cache lock").get(&k).is_some_and(|at| at.elapsed() < REFUSED_FOR)
    }

    /// Whether `token` is new: neither confirmed within `KNOWN_FOR` nor seen within
    /// `SEEN_FOR`. Seeing it makes it not new for `SEEN_FOR`.
    pub fn first_sight(&self, token: &SecretString) -> bool {
        if self.knows(token) {
            return false;
        }
        let k = key(token);
        let mut seen = self.seen.lock().expect("cache lock");
        if seen.get(&k).is_some_and(|at| at.elapsed() < SEEN_FOR) {
            return false;
        }
        insert_bounded(&mut seen, k, Instant::now(), |at| at.elapsed() < SEEN_FOR);
        true
    }

    /// Remember that the forge refused `token` (a token it confirms later is forgotten here).
    pub fn put_refused(&self, token: &SecretString) {
        let k = key(token);
        let mut map = self.refused.lock().expect("cache lock");
        insert_bounded(&mut map, k, Instant::now(), |at| at.elapsed() < REFUSED_FOR);
        self.counts.refused.inc();
    }

    /// A slot for the lookup of a token that is not known, within `LOOKUP_WAIT`; `None` when
    /// all `LOOKUPS` stay taken (unknown tokens are being looked up in numbers).
    pub async fn lookup_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.lookup_slot_within(LOOKUP_WAIT).await
    }

    async fn lookup_slot_within(&self, wait: Duration) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match tokio::time::timeout(wait, self.lookups.acquire()).await {
            Ok(permit) => Some(permit.expect("the semaphore is never closed")),
            Err(_) => {
                self.counts.busy.inc();
                None
            }
        }
    }

    /// Remember a user; when full, entries no longer known go first, then the oldest.
    pub fn put(&self, token: &SecretString, user: ForgeUser) {
        let k = key(token);
        self.refused.lock().expect("cache lock").remove(&k);
        let mut map = self.entries.lock().expect("cache lock");
        insert_bounded(&mut map, k, (user, Instant::now()), |(_, at)| at.elapsed() < KNOWN_FOR);
    }

    /// The user of `token`: cached, or resolved by `resolve` — once for all concurrent
    /// callers of the same token. Failures are not cached.
    pub async fn get_or_resolve<F, Fut, E>(&self, token: &SecretString, resolve: F) -> Result<ForgeUser, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ForgeUser, E>>,
    {
        if let Some(l) = self.get(token) {
            self.counts.hit.inc();
            return Ok(l);
        }
        let k = key(token);
        let lock = self.resolving.lock().expect("cache lock").entry(k).or_default().clone();
        let result = {
            let _one_at_a_time = lock.lock().await;
            match self.get(token) {
                Some(l) => {
                    self.counts.hit.inc();
                    Ok(l)
                }
                None => {
                    let r = resolve().await;
                    match &r {
                        Ok(user) => {
                            self.counts.miss.inc();
                            self.put(token, user.clone());
                        }
                        Err(_) => {
                            self.counts.failure.inc();
                        }
                    }
                    r
                }
            }
        };
        let mut resolving = self.resolving.lock().expect("cache lock");
        if std::sync::Arc::strong_count(&lock) <= 2 {
            resolving.remove(&k);
        }
        result
    }

    /// Tokens remembered as confirmed (fresh or only known).
    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Insert into a map of at most `CAPACITY` entries: when full, the entries `keep` says are
/// over go first, then the oldest of the rest.
fn insert_bounded<V: Clone + Timed>(map: &mut HashMap<Key, V>, k: Key, v: V, keep: impl Fn(&V) -> bool) {
    if map.len() >= CAPACITY && !map.contains_key(&k) {
        map.retain(|_, v| keep(v));
        if map.len() >= CAPACITY {
            if let Some(oldest) = map.iter().min_by_key(|(_, v)| v.at()).map(|(k, _)| *k) {
                map.remove(&oldest);
            }
        }
    }
    map.insert(k, v);
}

/// When an entry was made.
trait Timed {
    fn at(&self) -> Instant;
}

impl Timed for Instant {
    fn at(&self) -> Instant {
        *self
    }
}

impl Timed for (ForgeUser, Instant) {
    fn at(&self) -> Instant {
        self.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(login: &str) -> ForgeUser {
        ForgeUser { login: login.to_owned(), is_admin: false }
    }

    #[tokio::test]
    async fn concurrent_first_calls_of_one_token_resolve_once() {
        let c = std::sync::Arc::new(LoginCache::default());
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (c, calls) = (c.clone(), calls.clone());
            tasks.push(tokio::spawn(async move {
                c.get_or_resolve(&SecretString::from("tok"), || async {
                    calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    Ok::<_, ()>(user("alice"))
                })
                .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(user("alice")));
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn remembers_by_token_and_is_bounded() {
        let c = LoginCache::default();
        let a = SecretString::from("token-a");
        c.put(&a, ForgeUser { login: "alice".into(), is_admin: true });
        assert_eq!(c.get(&a), Some(ForgeUser { login: "alice".into(), is_admin: true }));
        assert_eq!(c.get(&SecretString::from("token-b")), None);
        for i in 0..CAPACITY + 10 {
            c.put(&SecretString::from(format!("t{i}")), user(&format!("u{i}")));
        }
        assert!(c.len() <= CAPACITY);
    }

    #[test]
    fn refused_tokens_are_remembered_briefly_and_bounded_and_a_confirmed_one_is_known() {
        let c = LoginCache::default();
        let bad = SecretString::from("garbage");
        assert!(!c.refused_recently(&bad) && !c.knows(&bad));
        c.put_refused(&bad);
        assert!(c.refused_recently(&bad));
        for i in 0..CAPACITY + 10 {
            c.put_refused(&SecretString::from(format!("g{i}")));
        }
        assert!(c.refused.lock().unwrap().len() <= CAPACITY);
        // The forge confirming it later (a token just created) forgets the refusal.
        c.put(&bad, user("late"));
        assert!(!c.refused_recently(&bad) && c.knows(&bad));
    }

    #[tokio::test]
    async fn lookups_of_unknown_tokens_have_a_few_slots_of_their_own() {
        let c = LoginCache::default();
        let mut held = Vec::new();
        let wait = Duration::from_millis(10);
        for _ in 0..LOOKUPS {
            held.push(c.lookup_slot_within(wait).await.expect("a free slot"));
        }
        assert!(c.lookup_slot_within(wait).await.is_none(), "every slot is taken");
        drop(held.pop());
        assert!(c.lookup_slot_within(wait).await.is_some());
        // A token counts as new once a minute, and never once confirmed.
        let t = SecretString::from("fresh");
        assert!(c.first_sight(&t) && !c.first_sight(&t));
        let confirmed = SecretString::from("confirmed");
        c.put(&confirmed, user("u"));
        assert!(!c.first_sight(&confirmed));
    }
}
