//! Who owns each open session (a Streamable HTTP session, a legacy SSE stream), and how
//! many each identity holds.
//!
//! A session is opened by an identity the forge has confirmed (the global identity, or the
//! login behind a caller's token) and belongs to it: a request for the session from any other
//! identity is answered as if the session did not exist (404), so that holding a session id
//! is not enough to use, close or read another person's session. A session counts against
//! the limits (`MCP_MAX_SESSIONS` / `MCP_MAX_SSE_STREAMS` overall, and
//! `MCP_MAX_SESSIONS_PER_IDENTITY` per identity) only once that identity is established, so
//! tokens the forge refuses never take a slot.
//!
//! Requests with the token that opened a session (or another token already confirmed as the
//! same identity) are matched by a hash of the token, without asking the forge again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::identity::header::token_hash;
use axum::http::StatusCode;
use axum::response::Response;

use super::answers::{refuse, unauthorized_for};
use crate::identity::{Caller, Principal};
use crate::mcp::asked::Client;
use crate::server::Server;
use aegis_core::error::ErrorKind;

tokio::task_local! {
    /// The session the current `initialize` request is opening: set by the sessions layer
    /// (`layers::sessions`), taken by whichever builds the session (the session manager of
    /// `http.rs`, or `direct.rs`) to name it.
    pub(crate) static OPENING: std::cell::RefCell<Option<(Opening, Fingerprint)>>;
}

/// A fingerprint of how a request authenticated (a hash of its token; one value for the
/// global identity), to recognise a confirmed credential without asking the forge.
pub(crate) type Fingerprint = [u8; 32];

/// Most fingerprints remembered per session (a client that rotates tokens often is asked the
/// forge again, nothing worse).
const MAX_FINGERPRINTS: usize = 8;

/// A new session id: 122 random bits, led by this replica's name when it has one
/// (`r1.0f8b…`), which is what a load balancer routes a session's requests on.
pub(crate) fn new_id(replica: Option<&str>) -> String {
    let random = uuid::Uuid::new_v4().simple();
    match replica {
        Some(r) => format!("{r}.{random}"),
        None => random.to_string(),
    }
}

/// The fingerprint of a request's identity.
pub(crate) fn fingerprint(identity: &Caller) -> Fingerprint {
    match identity {
        Caller::Global => [0; 32],
        Caller::Token(t) => token_hash(t),
        Caller::Granted(g) => token_hash(&g.presented),
        Caller::Forges(f) => {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            h.update(f.default.as_ref().map_or([0; 32], fingerprint));
            let mut named: Vec<(&str, [u8; 32])> =
                f.named.iter().map(|(n, c)| (n.as_str(), fingerprint(c))).collect();
            named.sort();
            for (name, hash) in named {
                h.update(name.as_bytes());
                h.update([0]);
                h.update(hash);
            }
            h.finalize().into()
        }
    }
}

/// The identity behind a request, confirmed: the global identity as it is, a token by the
/// login the forge reports for it (cached for a minute), within `limit` — and the lookup
/// itself within its own short bound (`identity::cache::LOOKUP_TIMEOUT`), so that a forge
/// that does not answer is said to the client before it gives up on its request. A refusal is
/// an HTTP answer with a JSON-RPC error a client can act on, its words guarded like a result.
pub(crate) async fn establish(
    server: &Server,
    identity: &Caller,
    limit: Duration,
) -> Result<Principal, Box<Response>> {
    if let Caller::Global = identity {
        return Ok(Principal::Global);
    }
    // Owned by who it is on the first forge it carries a credential for (the default first).
    let forge = server.forges.first_for(identity);
    let resolved =
        tokio::time::timeout(limit, crate::identify::identify(server.at(forge), identity.clone())).await;
    let e = match resolved {
        Ok(Ok((_, known))) => return Ok(Principal::of_on(forge.name(), false, &known)),
        Ok(Err(e)) if e.kind() == Some(ErrorKind::Unauthorized) => {
            return Err(Box::new(unauthorized_for(
                server.oauth.as_deref(),
                "the forge refused the token of this request (revoked or expired there); send a new token, or sign in again",
            )));
        }
        Ok(Err(e)) => e,
        Err(_) => {
            return Err(Box::new(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                &format!(
                    "could not establish who this request's token belongs to within the request's time (MCP_REQUEST_TIMEOUT, {} s); try again",
                    server.settings.request_timeout.as_secs_f64()
                ),
            )));
        }
    };
    let guarded = server.guard.for_call(identity.secrets()).error(e);
    let aegis_core::error::CallError::Result(f) = guarded.error() else {
        return Err(Box::new(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "could not establish who this request's token belongs to; try again",
        )));
    };
    let status = match f.kind {
        ErrorKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut r = refuse(status, -32000, &f.message);
    if let Some(wait) = f.retry_after {
        r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(wait));
    }
    Err(Box::new(r))
}

/// Whether a request may use session `id`: its owner may (a credential of the owner seen for
/// the first time is remembered); anyone else, and a session that does not exist here, get
/// the same 404, so that a session id reveals nothing to another identity.
pub(crate) async fn admit(
    owners: &Owners,
    server: &Server,
    id: &str,
    identity: &Caller,
    limit: Duration,
) -> Result<(), Box<Response>> {
    let fp = fingerprint(identity);
    let owner = match owners.access(id, &fp) {
        Access::Granted => return Ok(()),
        Access::Unknown => return Err(Box::new(owners.unknown())),
        Access::OwnedBy(owner) => owner,
    };
    if establish(server, identity, limit).await? != owner {
        return Err(Box::new(owners.unknown()));
    }
    owners.confirm(id, fp);
    Ok(())
}

/// The open sessions of one transport.
#[derive(Debug)]
pub(crate) struct Owners {
    inner: Mutex<State>,
    max: usize,
    per_owner: usize,
    /// What a session is called in messages ("MCP sessions", "SSE streams") and the settings
    /// that bound them.
    words: Words,
    /// How many are open, for `/metrics`.
    gauge: OpenGauge,
}

/// The gauge of open sessions (or streams) that `/metrics` shows.
pub(crate) type OpenGauge = prometheus_client::metrics::gauge::Gauge<i64, std::sync::atomic::AtomicI64>;

/// How refusals name things.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Words {
    pub(crate) what: &'static str,
    pub(crate) max_setting: &'static str,
    pub(crate) how_to_close: &'static str,
    pub(crate) how_to_open: &'static str,
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<String, Entry>,
    by_owner: HashMap<Principal, usize>,
    /// Sessions being opened (counted, not yet named).
    opening: usize,
}

#[derive(Debug)]
struct Entry {
    owner: Principal,
    fingerprints: Vec<Fingerprint>,
    /// When its owner last used it.
    used: Instant,
    /// Its client as its handshake named it, with the version the server agreed to, once
    /// answered (Streamable HTTP sessions only): what the MCP library hands the session's
    /// handlers, kept for the calls answered without the library (`direct.rs`).
    handshake: Option<Arc<Client>>,
}

/// What a request holding a session id may do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// The session is this request's (its credential was seen before).
    Granted,
    /// The session exists; whether it is this request's depends on who the request is.
    OwnedBy(Principal),
    /// No such session here.
    Unknown,
}

impl Owners {
    /// The sessions of one transport, counted open in `gauge`.
    pub(crate) fn new(max: usize, per_owner: usize, words: Words, gauge: OpenGauge) -> Arc<Owners> {
        Arc::new(Owners { inner: Mutex::default(), max, per_owner: per_owner.min(max).max(1), words, gauge })
    }

    /// Count a session about to be opened by `owner`, or refuse: 503 at the overall limit,
    /// 429 when `owner` holds its share. The slot is given back when the returned `Opening`
    /// is dropped without `opened`.
    pub(crate) fn open(self: &Arc<Self>, owner: Principal) -> Result<Opening, Box<Response>> {
        let mut st = self.inner.lock().expect("sessions lock");
        let w = self.words;
        if st.sessions.len() + st.opening >= self.max {
            return Err(Box::new(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                &format!(
                    "too many open {} ({}); {} or raise {}",
                    w.what, self.max, w.how_to_close, w.max_setting
                ),
            )));
        }
        let held = st.by_owner.get(&owner).copied().unwrap_or(0);
        if held >= self.per_owner {
            return Err(Box::new(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                -32000,
                &format!(
                    "this identity already holds {held} open {} (MCP_MAX_SESSIONS_PER_IDENTITY); {}",
                    w.what, w.how_to_close
                ),
            )));
        }
        *st.by_owner.entry(owner.clone()).or_default() += 1;
        st.opening += 1;
        Ok(Opening { owners: self.clone(), owner: Some(owner) })
    }

    /// The answer to a request for a session that is not its own (or not there at all).
    pub(crate) fn unknown(&self) -> Response {
        refuse(
            StatusCode::NOT_FOUND,
            -32600,
            &format!("unknown or closed session: {}", self.words.how_to_open),
        )
    }

    /// The session is gone (closed by its client, ended by the server, expired).
    pub(crate) fn close(&self, id: &str) {
        let mut st = self.inner.lock().expect("sessions lock");
        if let Some(e) = st.sessions.remove(id) {
            release(&mut st, &e.owner);
            self.gauge.dec();
        }
    }

    /// What a request with `fingerprint` may do with session `id`; a request of its owner
    /// counts as a use of it.
    pub(crate) fn access(&self, id: &str, fingerprint: &Fingerprint) -> Access {
        let mut st = self.inner.lock().expect("sessions lock");
        match st.sessions.get_mut(id) {
            None => Access::Unknown,
            Some(e) if e.fingerprints.contains(fingerprint) => {
                e.used = Instant::now();
                Access::Granted
            }
            Some(e) => Access::OwnedBy(e.owner.clone()),
        }
    }

    /// Remember that `fingerprint` is the owner's too (its request is a use of the session).
    pub(crate) fn confirm(&self, id: &str, fingerprint: Fingerprint) {
        let mut st = self.inner.lock().expect("sessions lock");
        if let Some(e) = st.sessions.get_mut(id) {
            if e.fingerprints.len() >= MAX_FINGERPRINTS {
                e.fingerprints.remove(1);
            }
            e.fingerprints.push(fingerprint);
            e.used = Instant::now();
        }
    }

    /// Session `id`'s handshake was answered so.
    pub(crate) fn shook_hands(&self, id: &str, handshake: Client) {
        let mut st = self.inner.lock().expect("sessions lock");
        if let Some(e) = st.sessions.get_mut(id) {
            e.handshake = Some(Arc::new(handshake));
        }
    }

    /// Session `id`'s handshake, once answered.
    pub(crate) fn handshake(&self, id: &str) -> Option<Arc<Client>> {
        self.inner.lock().expect("sessions lock").sessions.get(id).and_then(|e| e.handshake.clone())
    }

    /// The sessions their owners have not used for `idle` or longer.
    pub(crate) fn idle(&self, idle: Duration) -> Vec<String> {
        let st = self.inner.lock().expect("sessions lock");
        st.sessions.iter().filter(|(_, e)| e.used.elapsed() >= idle).map(|(id, _)| id.clone()).collect()
    }
}

fn release(st: &mut State, owner: &Principal) {
    if let Some(n) = st.by_owner.get_mut(owner) {
        *n -= 1;
        if *n == 0 {
            st.by_owner.remove(owner);
        }
    }
}

/// A session being opened: its slot is held until it is named (`opened`) or dropped.
#[derive(Debug)]
pub(crate) struct Opening {
    owners: Arc<Owners>,
    owner: Option<Principal>,
}

impl Opening {
    /// The session exists now, under `id`, opened with `fingerprint`.
    pub(crate) fn opened(mut self, id: String, fingerprint: Fingerprint) {
        let owner = self.owner.take().expect("opened once");
        let mut st = self.owners.inner.lock().expect("sessions lock");
        st.opening -= 1;
        let entry = Entry { owner, fingerprints: vec![fingerprint], used: Instant::now(), handshake: None };
        if st.sessions.insert(id, entry).is_none() {
            self.owners.gauge.inc();
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            let mut st = self.owners.inner.lock().expect("sessions lock");
            st.opening -= 1;
            release(&mut st, &owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: Words = Words {
        what: "MCP sessions",
        max_setting: "--max-sessions",
        how_to_close: "close some",
        how_to_open: "open one",
    };

    fn alice() -> Principal {
        Principal::login("alice")
    }

    #[test]
    fn the_overall_limit_and_each_identitys_share() {
        let o = Owners::new(3, 2, WORDS, OpenGauge::default());
        o.open(alice()).unwrap().opened("a1".into(), [1; 32]);
        o.open(alice()).unwrap().opened("a2".into(), [1; 32]);
        let refused = o.open(alice()).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        o.open(Principal::Global).unwrap().opened("g".into(), [0; 32]);
        assert_eq!(o.open(Principal::login("bob")).unwrap_err().status(), StatusCode::SERVICE_UNAVAILABLE);
        o.close("a1");
        o.open(alice()).unwrap().opened("a3".into(), [1; 32]);
        assert_eq!(o.gauge.get(), 3, "the gauge counts what is open");
    }

    #[test]
    fn an_opening_that_never_names_its_session_gives_its_slot_back() {
        let o = Owners::new(1, 1, WORDS, OpenGauge::default());
        drop(o.open(alice()).unwrap());
        o.open(alice()).unwrap().opened("a".into(), [1; 32]);
        assert!(o.open(alice()).is_err());
    }

    #[test]
    fn access_by_fingerprint_then_by_owner() {
        let o = Owners::new(10, 10, WORDS, OpenGauge::default());
        o.open(alice()).unwrap().opened("s".into(), [1; 32]);
        assert_eq!(o.access("s", &[1; 32]), Access::Granted);
        assert_eq!(o.access("s", &[2; 32]), Access::OwnedBy(alice()));
        o.confirm("s", [2; 32]);
        assert_eq!(o.access("s", &[2; 32]), Access::Granted);
        assert_eq!(o.access("nope", &[1; 32]), Access::Unknown);
        for i in 3..20 {
            o.confirm("s", [i; 32]);
        }
        assert_eq!(o.access("s", &[1; 32]), Access::Granted, "the opener's credential is kept");
        o.close("s");
        assert_eq!(o.access("s", &[1; 32]), Access::Unknown);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_is_idle_from_its_owners_last_request_and_keeps_its_handshake() {
        let idle = Duration::from_secs(300);
        let o = Owners::new(10, 10, WORDS, OpenGauge::default());
        o.open(alice()).unwrap().opened("a".into(), [1; 32]);
        o.open(alice()).unwrap().opened("b".into(), [1; 32]);
        assert!(o.handshake("a").is_none(), "no handshake before it is answered");
        use rmcp::model::{ClientCapabilities, Implementation, ProtocolVersion};
        let handshake = Client {
            protocol: Some(ProtocolVersion::V_2025_06_18),
            info: Some(Implementation::new("c", "1")),
            capabilities: Some(ClientCapabilities::default()),
        };
        o.shook_hands("a", handshake);
        assert_eq!(o.handshake("a").unwrap().protocol, Some(ProtocolVersion::V_2025_06_18));
        tokio::time::advance(Duration::from_secs(200)).await;
        assert_eq!(o.access("a", &[1; 32]), Access::Granted);
        // Another identity's request is not a use.
        assert_eq!(o.access("b", &[2; 32]), Access::OwnedBy(alice()));
        tokio::time::advance(Duration::from_secs(100)).await;
        assert_eq!(o.idle(idle), vec!["b".to_owned()]);
        tokio::time::advance(Duration::from_secs(200)).await;
        let mut both = o.idle(idle);
        both.sort();
        assert_eq!(both, ["a", "b"]);
        o.close("a");
        assert!(o.handshake("a").is_none(), "gone with its session");
    }
}
