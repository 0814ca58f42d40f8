//! What each session has read of private repositories, and how far repositories and
//! profiles reach, as one replica remembers them: the flow guard's memory (`flow.rs` judges
//! with it and says why it is kept so). Both are bounded, and expire: a session that calls
//! nothing for `IDLE_FOR` is forgotten, a visibility is asked again after `VISIBLE_FOR`.

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

/// What one session has read of private repositories.
#[derive(Debug, Default)]
struct Record {
    /// Owner, name (as the call spelled them), and when last read.
    repos: Vec<(String, String, Instant)>,
    /// When it last read content whose repository it could not name, or read past the bound.
    unknown: Option<Instant>,
}

impl Record {
    fn add(&mut self, owner: &str, repo: &str, now: Instant) {
        if let Some(r) = self
            .repos
            .iter_mut()
            .find(|(o, n, _)| o.eq_ignore_ascii_case(owner) && n.eq_ignore_ascii_case(repo))
        {
            r.2 = now;
        } else if self.repos.len() < MAX_SOURCES {
            self.repos.push((owner.to_owned(), repo.to_owned(), now));
        } else {
            self.unknown = Some(now);
        }
    }

    /// What was read since `since` (`None`: ever).
    fn sources(&self, since: Option<Instant>) -> Sources {
        let recent = |t: &Instant| since.is_none_or(|s| *t >= s);
        Sources {
            repos: self
                .repos
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
    visibility: moka::sync::Cache<(Principal, Option<String>, String), Seen>,
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

    /// What the session of `key` read (over stateless HTTP, within `FLOW_WINDOW`).
    pub(crate) fn sources(&self, key: &Key) -> Sources {
        let Some(record) = self.records.get(key) else { return Sources::default() };
        let since =
            matches!(key, Key::Identity(..)).then(|| Instant::now().checked_sub(self.window)).flatten();
        let r = record.lock().expect("flow record lock");
        r.sources(since)
    }

    /// The session of `key` read `private` repositories, and (`unknown`) content of one it
    /// could not name.
    pub(crate) fn add(&self, key: &Key, private: &[(String, String)], unknown: bool) {
        let now = Instant::now();
        let record = self.records.get_with_by_ref(key, Default::default);
        let mut r = record.lock().expect("flow record lock");
        for (o, n) in private {
            r.add(o, n, now);
        }
        if unknown {
            r.unknown = Some(now);
        }
    }

    /// How far what `who` looked up (`what`) reaches, if it was looked up lately.
    pub(crate) fn seen(&self, who: &(Principal, Option<String>), what: &str) -> Option<Seen> {
        self.visibility.get(&(who.0.clone(), who.1.clone(), what.to_owned()))
    }

    pub(crate) fn remember(&self, who: &(Principal, Option<String>), what: &str, seen: Seen) {
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
