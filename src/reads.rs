//! What each session has read, and how far repositories and profiles reach, as one replica
//! remembers them: the flow guard's memory (`flow.rs` judges with it).
//!
//! Everything is bounded, because a client chooses how much it reads: a session keeps 64
//! private repositories by name and 256 read but not yet judged, and past either counts as
//! having read from every owner (it may be asked more, never less). A replica remembers
//! 100,000 sessions, each until it calls nothing for a day; one forgotten to make room starts
//! again with nothing read, which is why the bound is far above the sessions a replica serves
//! (`MCP_MAX_SESSIONS`). A visibility is asked again after five minutes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::identity::Principal;
use aegis_core::identity::Identity;
use aegis_core::policy::flow::{Seen, Sources};

/// Private repositories one session keeps by name; past them it counts as having read
/// from every owner.
pub(crate) const MAX_SOURCES: usize = 64;
/// Sessions (and stateless identities) remembered on one replica at once.
const SESSIONS: u64 = 100_000;
/// How long a session that calls nothing is remembered (an MCP session ends long before).
const IDLE_FOR: Duration = Duration::from_secs(24 * 3600);
/// Visibilities remembered per replica, and for how long.
const VISIBILITIES: u64 = 16_384;
const VISIBLE_FOR: Duration = Duration::from_secs(300);

/// Whose reads a call is judged by, as its transport says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Session {
    /// stdio, the `call` command, the benchmarks: one session per process.
    Process,
    /// An MCP session (Streamable HTTP with sessions, legacy SSE), by its id.
    Id(String),
    /// Stateless HTTP: the caller's identity, over `FLOW_WINDOW`.
    Identity,
}

/// The key of a session's record, once its caller is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Process,
    Id(String),
    Identity(Principal, Option<String>),
}

/// Repositories one session has read and whose visibility is not looked up yet, at most;
/// past them it counts as having read from every owner.
const MAX_UNJUDGED: usize = 256;

/// A repository read: owner, name (as the call spelled them), and when last read.
type Readout = (String, String, Instant);

/// What one session has read.
#[derive(Debug, Default)]
struct Record {
    /// Repositories read whose visibility is not known yet: looked up at the session's next
    /// write, so a session that only reads costs the forge nothing more.
    unjudged: Vec<Readout>,
    /// The private ones.
    private: Vec<Readout>,
    /// When it last read content whose repository it could not name, or read past a bound.
    unknown: Option<Instant>,
}

fn position(list: &[Readout], owner: &str, repo: &str) -> Option<usize> {
    list.iter().position(|(o, n, _)| o.eq_ignore_ascii_case(owner) && n.eq_ignore_ascii_case(repo))
}

impl Record {
    fn read(&mut self, owner: &str, repo: &str, now: Instant) {
        if let Some(i) = position(&self.private, owner, repo) {
            self.private[i].2 = now;
        } else if let Some(i) = position(&self.unjudged, owner, repo) {
            self.unjudged[i].2 = now;
        } else if self.unjudged.len() < MAX_UNJUDGED {
            self.unjudged.push((owner.to_owned(), repo.to_owned(), now));
        } else {
            self.unknown = Some(now);
        }
    }

    fn judged(&mut self, owner: &str, repo: &str, private: bool) {
        let Some(i) = position(&self.unjudged, owner, repo) else { return };
        let read = self.unjudged.swap_remove(i);
        if !private {
            return;
        }
        if let Some(j) = position(&self.private, owner, repo) {
            self.private[j].2 = self.private[j].2.max(read.2);
        } else if self.private.len() < MAX_SOURCES {
            self.private.push(read);
        } else {
            self.unknown = Some(read.2);
        }
    }

    /// What was read since `since` (`None`: ever) of private repositories.
    fn sources(&self, since: Option<Instant>) -> Sources {
        let recent = |t: &Instant| since.is_none_or(|s| *t >= s);
        Sources {
            repos: self
                .private
                .iter()
                .filter(|(_, _, t)| recent(t))
                .map(|(o, r, _)| (o.clone(), r.clone()))
                .collect(),
            unknown: self.unknown.as_ref().is_some_and(recent),
            ..Sources::default()
        }
    }
}

/// What every session on this replica has read, and the visibilities looked up.
#[derive(Debug)]
pub(crate) struct Flows {
    records: moka::sync::Cache<Key, Arc<Mutex<Record>>>,
    visibility: moka::sync::Cache<(Principal, Option<String>, String), Option<Seen>>,
    window: Duration,
}

impl Flows {
    pub(crate) fn new(window: Duration) -> Flows {
        Flows {
            records: moka::sync::Cache::builder().max_capacity(SESSIONS).time_to_idle(IDLE_FOR).build(),
            visibility: moka::sync::Cache::builder()
                .max_capacity(VISIBILITIES)
                .time_to_live(VISIBLE_FOR)
                .build(),
            window,
        }
    }

    /// Since when reads count for the session of `key` (`None`: its whole life).
    fn since(&self, key: &Key) -> Option<Instant> {
        matches!(key, Key::Identity(..)).then(|| Instant::now().checked_sub(self.window)).flatten()
    }

    /// What the session of `key` read of private repositories (over stateless HTTP, within
    /// `FLOW_WINDOW`), and the repositories it read whose visibility is not known yet.
    pub(crate) fn sources(&self, key: &Key) -> (Sources, Vec<(String, String)>) {
        let Some(record) = self.records.get(key) else { return Default::default() };
        let since = self.since(key);
        let r = record.lock().expect("flow record lock");
        let unjudged = r
            .unjudged
            .iter()
            .filter(|(_, _, t)| since.is_none_or(|s| *t >= s))
            .map(|(o, n, _)| (o.clone(), n.clone()))
            .collect();
        (r.sources(since), unjudged)
    }

    /// The session of `key` read the content of `repos` (their visibility to be judged), and
    /// (`unknown`) content of a repository it could not name.
    pub(crate) fn read(&self, key: &Key, repos: &[(String, String)], unknown: bool) {
        let now = Instant::now();
        let record = self.records.get_with_by_ref(key, Default::default);
        let mut r = record.lock().expect("flow record lock");
        for (o, n) in repos {
            r.read(o, n, now);
        }
        if unknown {
            r.unknown = Some(now);
        }
    }

    /// What the visibility look-ups said of repositories the session of `key` read: each
    /// private or not.
    pub(crate) fn judged(&self, key: &Key, judged: &[((String, String), bool)]) {
        let Some(record) = self.records.get(key) else { return };
        let mut r = record.lock().expect("flow record lock");
        for ((o, n), private) in judged {
            r.judged(o, n, *private);
        }
    }

    /// How far what `who` looked up (`what`) reaches, if it was looked up lately (`Some(None)`:
    /// the look-up failed).
    pub(crate) fn seen(&self, who: &(Principal, Option<String>), what: &str) -> Option<Option<Seen>> {
        self.visibility.get(&(who.0.clone(), who.1.clone(), what.to_owned()))
    }

    pub(crate) fn remember(&self, who: &(Principal, Option<String>), what: &str, seen: Option<Seen>) {
        self.visibility.insert((who.0.clone(), who.1.clone(), what.to_owned()), seen);
    }

    /// `FLOW_WINDOW`.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }
}

/// The record key of `session` for a caller of `identity` (`global`: the server's own).
pub(crate) fn key_of(session: &Session, global: bool, identity: &Identity) -> Key {
    match session {
        Session::Process => Key::Process,
        Session::Id(id) => Key::Id(id.clone()),
        Session::Identity => Key::Identity(Principal::of(global, identity), identity.sudo.clone()),
    }
}
