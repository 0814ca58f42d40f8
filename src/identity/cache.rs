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

use std::time::Duration;

use secrecy::SecretString;

use super::ForgeUser;
use crate::metrics::IdentityCacheCounts;

/// How long a resolved login is trusted without asking the forge again.
pub(crate) const TTL: Duration = Duration::from_secs(60);
/// How long a token the forge confirmed counts as known (its lookups take the forge slots
/// of established callers, not the small pool of new tokens).
pub(crate) const KNOWN_FOR: Duration = Duration::from_secs(3600);
/// How long a token the forge refused is refused again without asking it.
pub(crate) const REFUSED_FOR: Duration = Duration::from_secs(30);
/// Most tokens remembered at once (confirmed; and, apart, refused).
pub(crate) const CAPACITY: usize = 4096;
/// How long a login lookup may take, whatever `GITEA_TIMEOUT` allows: a client waits for
/// the answer of the request behind it (the SDKs give up after 30 s), so a forge that does not
/// answer is said in time, as an error the client can show.
pub(crate) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a token seen once does not count as new again.
pub(crate) const SEEN_FOR: Duration = Duration::from_secs(60);
/// Lookups of unknown tokens at the forge at once, for every caller together.
pub(crate) const LOOKUPS: usize = 8;
/// How long an unknown token's lookup waits for one of `LOOKUPS` slots (a burst of people
/// arriving at once is served in turn; garbage in numbers waits, then is refused).
pub(crate) const LOOKUP_WAIT: Duration = Duration::from_secs(5);

type Key = [u8; 32];

/// The cache.
#[derive(Debug)]
pub struct LoginCache {
    /// Users confirmed within `TTL`, trusted without asking again.
    fresh: moka::future::Cache<Key, ForgeUser>,
    /// Tokens confirmed within `KNOWN_FOR`.
    known: moka::sync::Cache<Key, ()>,
    /// Tokens the forge refused within `REFUSED_FOR`.
    refused: moka::sync::Cache<Key, ()>,
    /// Tokens seen (confirmed or not) in the last `SEEN_FOR`: a token counts as new once, not
    /// at every request that carries it.
    seen: moka::sync::Cache<Key, ()>,
    /// The slots for lookups of unknown tokens.
    lookups: tokio::sync::Semaphore,
    /// Hits, misses and failures, for `/metrics`.
    counts: IdentityCacheCounts,
}

fn key(token: &SecretString) -> Key {
    super::header::token_hash(token)
}

/// A set of at most `CAPACITY` token hashes, each forgotten `ttl` after it was put.
fn expiring(ttl: Duration) -> moka::sync::Cache<Key, ()> {
    moka::sync::Cache::builder().max_capacity(CAPACITY as u64).time_to_live(ttl).build()
}

impl Default for LoginCache {
    fn default() -> LoginCache {
        LoginCache {
            fresh: moka::future::Cache::builder().max_capacity(CAPACITY as u64).time_to_live(TTL).build(),
            known: expiring(KNOWN_FOR),
            refused: expiring(REFUSED_FOR),
            seen: expiring(SEEN_FOR),
            lookups: tokio::sync::Semaphore::new(LOOKUPS),
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
    pub(crate) async fn get(&self, token: &SecretString) -> Option<ForgeUser> {
        self.fresh.get(&key(token)).await
    }

    /// Whether the forge confirmed `token` within `KNOWN_FOR`.
    pub(crate) fn knows(&self, token: &SecretString) -> bool {
        self.known.contains_key(&key(token))
    }

    /// Whether the forge refused `token` within `REFUSED_FOR`.
    pub(crate) fn refused_recently(&self, token: &SecretString) -> bool {
        self.refused.contains_key(&key(token))
    }

    /// Whether `token` is new: neither confirmed within `KNOWN_FOR` nor seen within
    /// `SEEN_FOR`. Seeing it makes it not new for `SEEN_FOR`.
    pub(crate) fn first_sight(&self, token: &SecretString) -> bool {
        if self.knows(token) {
            return false;
        }
        self.seen.entry(key(token)).or_insert(()).is_fresh()
    }

    /// Remember that the forge refused `token` (a token it confirms later is forgotten here).
    pub(crate) fn put_refused(&self, token: &SecretString) {
        self.refused.insert(key(token), ());
        self.counts.refused.inc();
    }

    /// A slot for the lookup of a token that is not known, within `LOOKUP_WAIT`; `None` when
    /// all `LOOKUPS` stay taken (unknown tokens are being looked up in numbers).
    pub(crate) async fn lookup_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
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

    #[cfg(test)]
    /// Remember a user the forge confirmed for `token`.
    pub(crate) async fn put(&self, token: &SecretString, user: ForgeUser) {
        let k = key(token);
        self.confirmed(k);
        self.fresh.insert(k, user).await;
    }

    fn confirmed(&self, k: Key) {
        self.refused.invalidate(&k);
        self.known.insert(k, ());
    }

    /// The user of `token`: cached, or resolved by `resolve` — once for all concurrent
    /// callers of the same token (they share its answer). Failures are not cached; a
    /// resolution abandoned half-way (its caller timed out) leaves nothing behind, and the
    /// next caller resolves again.
    pub(crate) async fn get_or_resolve<F, Fut, E>(
        &self,
        token: &SecretString,
        resolve: F,
    ) -> Result<ForgeUser, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ForgeUser, E>>,
        E: Clone + Send + Sync + 'static,
    {
        if let Some(l) = self.get(token).await {
            self.counts.hit.inc();
            return Ok(l);
        }
        let k = key(token);
        match self.fresh.entry(k).or_try_insert_with(resolve()).await {
            // Asked the forge; every other caller waiting for the same token got it too.
            Ok(entry) if entry.is_fresh() => {
                self.counts.miss.inc();
                self.confirmed(k);
                Ok(entry.into_value())
            }
            Ok(entry) => {
                self.counts.hit.inc();
                Ok(entry.into_value())
            }
            Err(e) => {
                self.counts.failure.inc();
                Err(std::sync::Arc::unwrap_or_clone(e))
            }
        }
    }

    #[cfg(test)]
    /// Tokens confirmed within `KNOWN_FOR` (after the cache's pending upkeep).
    pub(crate) fn len(&self) -> usize {
        self.known.run_pending_tasks();
        self.known.entry_count() as usize
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
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

    #[tokio::test]
    async fn remembers_by_token_and_is_bounded() {
        let c = LoginCache::default();
        let a = SecretString::from("token-a");
        c.put(&a, ForgeUser { login: "alice".into(), is_admin: true }).await;
        assert_eq!(c.get(&a).await, Some(ForgeUser { login: "alice".into(), is_admin: true }));
        assert_eq!(c.get(&SecretString::from("token-b")).await, None);
        for i in 0..CAPACITY + 10 {
            c.put(&SecretString::from(format!("t{i}")), user(&format!("u{i}"))).await;
        }
        c.fresh.run_pending_tasks().await;
        assert!(c.len() <= CAPACITY && c.fresh.entry_count() <= CAPACITY as u64);
    }

    #[tokio::test]
    async fn refused_tokens_are_remembered_briefly_and_bounded_and_a_confirmed_one_is_known() {
        let c = LoginCache::default();
        let bad = SecretString::from("garbage");
        assert!(!c.refused_recently(&bad) && !c.knows(&bad));
        c.put_refused(&bad);
        assert!(c.refused_recently(&bad));
        for i in 0..CAPACITY + 10 {
            c.put_refused(&SecretString::from(format!("g{i}")));
        }
        c.refused.run_pending_tasks();
        assert!(c.refused.entry_count() <= CAPACITY as u64);
        // The forge confirming it later (a token just created) forgets the refusal.
        c.put(&bad, user("late")).await;
        assert!(!c.refused_recently(&bad) && c.knows(&bad));
    }

    /// A lookup abandoned half-way (its request timed out) leaves nothing behind: the next
    /// caller of the token asks again, and a thousand abandoned tokens hold no entry.
    #[tokio::test]
    async fn an_abandoned_lookup_leaves_nothing_behind() {
        let c = LoginCache::default();
        for i in 0..1000 {
            let token = SecretString::from(format!("slow-{i}"));
            let hanging = c.get_or_resolve(&token, std::future::pending::<Result<ForgeUser, ()>>);
            assert!(tokio::time::timeout(Duration::from_millis(1), hanging).await.is_err());
        }
        c.fresh.run_pending_tasks().await;
        assert_eq!(c.fresh.entry_count(), 0);
        assert!(c.is_empty());
        let token = SecretString::from("slow-0");
        let asked = c.get_or_resolve(&token, || async { Ok::<_, ()>(user("alice")) }).await;
        assert_eq!(asked, Ok(user("alice")));
        assert!(c.knows(&token));
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
        c.put(&confirmed, user("u")).await;
        assert!(!c.first_sight(&confirmed));
    }
}
