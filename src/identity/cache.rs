//! Logins of per-request tokens (with whether each is a site administrator), cached by a
//! SHA-256 of the token: bounded in size, short lived. The token itself is never stored; a collision-resistant hash is used because a
//! collision would hand one caller another's login. Hits, misses and failures are counted
//! for `/metrics`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

use super::ForgeUser;
use crate::metrics::IdentityCacheCounts;

/// How long a resolved login is trusted without asking the forge again.
pub const TTL: Duration = Duration::from_secs(60);
/// Most tokens remembered at once.
pub const CAPACITY: usize = 4096;

type Key = [u8; 32];

/// The cache.
#[derive(Debug, Default)]
pub struct LoginCache {
    entries: Mutex<HashMap<Key, (ForgeUser, Instant)>>,
    /// One lock per token being resolved, so that concurrent first calls of one token ask
    /// the forge once.
    resolving: Mutex<HashMap<Key, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Hits, misses and failures, for `/metrics`.
    counts: IdentityCacheCounts,
}

fn key(token: &SecretString) -> Key {
    Sha256::digest(token.expose_secret().as_bytes()).into()
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

    /// Remember a user; when full, expired entries go first, then the oldest.
    pub fn put(&self, token: &SecretString, user: ForgeUser) {
        let k = key(token);
        let mut map = self.entries.lock().expect("cache lock");
        if map.len() >= CAPACITY && !map.contains_key(&k) {
            map.retain(|_, (_, at)| at.elapsed() < TTL);
            if map.len() >= CAPACITY {
                if let Some(oldest) = map.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
        }
        map.insert(k, (user, Instant::now()));
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

    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
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
}
