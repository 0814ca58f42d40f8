//! Codes and refresh tokens this replica has already accepted, so that a second use is
//! refused at once, before the forge is asked. Bounded: entries leave when they expire, and
//! a full set first drops the expired ones; if it is still full the oldest-expiring entry
//! goes (the forge still refuses a reused code or rotated refresh token on its own).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

#[derive(Debug)]
pub struct UsedOnce {
    inner: Mutex<Inner>,
    cap: usize,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, u64>,
    by_expiry: BTreeSet<(u64, String)>,
}

impl UsedOnce {
    pub fn new(cap: usize) -> UsedOnce {
        UsedOnce { inner: Mutex::new(Inner::default()), cap: cap.max(1) }
    }

    /// Whether `id` is used for the first time at `now` (then it is remembered until
    /// `expires`; both Unix seconds).
    pub fn first_use(&self, id: &str, expires: u64, now: u64) -> bool {
        let mut inner = self.inner.lock().expect("the used set is never poisoned");
        while let Some((e, _)) = inner.by_expiry.first() {
            if *e >= now {
                break;
            }
            let (_, old) = inner.by_expiry.pop_first().expect("checked above");
            inner.by_id.remove(&old);
        }
        if inner.by_id.contains_key(id) {
            return false;
        }
        if inner.by_id.len() >= self.cap {
            if let Some((_, old)) = inner.by_expiry.pop_first() {
                inner.by_id.remove(&old);
            }
        }
        inner.by_id.insert(id.to_owned(), expires);
        inner.by_expiry.insert((expires, id.to_owned()));
        true
    }
}

impl UsedOnce {
    /// Forget `id` (its use did not happen: the forge could not be reached, so the client
    /// may try again while the code lives).
    pub fn forget(&self, id: &str) {
        let mut inner = self.inner.lock().expect("the used set is never poisoned");
        if let Some(e) = inner.by_id.remove(id) {
            inner.by_expiry.remove(&(e, id.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_use_is_refused_and_the_set_stays_bounded() {
        let used = UsedOnce::new(3);
        let later = super::super::now() + 60;
        assert!(used.first_use("a", later, super::super::now()));
        assert!(!used.first_use("a", later, super::super::now()));
        for id in ["b", "c", "d", "e"] {
            assert!(used.first_use(id, later + 1, super::super::now()));
        }
        assert!(used.inner.lock().unwrap().by_id.len() <= 3);
        // Expired entries are forgotten.
        let gone = UsedOnce::new(10);
        assert!(gone.first_use("x", 0, super::super::now()));
        assert!(gone.first_use("x", later, super::super::now()));
    }
}
