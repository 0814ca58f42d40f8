//! The one HTTP client to the forge.
//!
//! Nothing else builds an HTTP client. Credentials are attached here, per request, as a
//! sensitive header, and only ever to URLs under the configured base URL; so is the `Sudo`
//! header of a call allowed to act as another user. Redirects are
//! not followed (a 3xx is a result). Bodies are read in chunks and never beyond their
//! limit plus one byte; a `Content-Length` over the limit is refused without reading. Of an
//! error answer only the first `ERROR_BODY_BYTES` are read: its message is all we use.
//! A body larger than `LARGE_BODY` needs one of `LARGE_CALLS` permits before it is read
//! further, held until the body is decoded: however many calls run, at most that many large
//! bodies are in memory at once. With `FORGE_MAX_CONCURRENT`, each request holds one of that
//! many slots from before it is sent until its body is read; a request that finds none free
//! within `SLOT_WAIT` is not sent and fails as `rate_limited`; with a shared store the slots
//! are counted for every replica at once, each request holding a lease there besides its
//! local slot (which stays the cap, and the fallback while the store cannot decide).
//! Each request sent is timed, and
//! the status it was answered with counted, for `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, USER_AGENT};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};
use url::Url;

use crate::identity::Credential;
use crate::metrics::ForgeMetrics;
use crate::state::{Admit, Lease, Limit, Store};
use aegis_core::args::{CallPlan, PlanBody, Root};
use aegis_core::decode::body::{Limits, ReadLimit, read_limit};
use aegis_core::error::{CallError, ErrorKind, Shown};

/// The header by which both forges let a site administrator act as another user.
const SUDO: &str = "Sudo";

/// Bodies larger than this count as large (see `LARGE_CALLS`).
pub(crate) const LARGE_BODY: usize = 1 << 20;
/// Most large bodies being read or decoded at once.
pub(crate) const LARGE_CALLS: usize = 4;
/// Most bytes read of an error answer.
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;
/// How long a request waits for a slot of `FORGE_MAX_CONCURRENT` before it fails: long
/// enough to ride out a burst, short enough to stay a fast answer.
pub(crate) const SLOT_WAIT: Duration = Duration::from_millis(200);
/// The wait suggested to a request refused for want of a slot.
const SLOT_RETRY_AFTER: u64 = 1;
/// How often a request asks the shared store again for a slot while all are taken (plus up
/// to 20 ms, so that the askers spread out).
const SLOT_POLL: Duration = Duration::from_millis(60);
/// Whose slots the forge's are in the shared store (no login is spelled so).
const FORGE_SLOTS: &[u8] = b"\0forge";

/// A few bits that differ from call to call, to spread retries.
fn jitter() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_micros())
}

/// One request's slot: here, and in the shared store when there is one.
#[derive(Debug)]
struct Slot<'a> {
    _here: SemaphorePermit<'a>,
    _shared: Option<Lease>,
}

/// How an answer of binary content over `MAX_BINARY_BYTES` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binary {
    /// Refused, `payload_too_large`.
    Refuse,
    /// Read up to this many bytes (`MAX_RESOURCE_BYTES`: a resource read).
    UpTo(u64),
    /// Not kept but counted, up to this many bytes: `Received::over` says how many (a tool
    /// call whose content a resource reads again).
    Measure(u64),
}

/// A forge answer as received: status, headers, and the body or why it was not read.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    /// Binary content over `MAX_BINARY_BYTES`, counted and not kept (`Binary::Measure`): its
    /// size; the body is empty then.
    pub(crate) over: Option<u64>,
    /// Held while a large body is in memory; released when this answer is dropped (never
    /// read: it is here for its drop).
    pub(crate) _large: Option<OwnedSemaphorePermit>,
}

impl Received {
    /// A header as text, if present and readable.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The forge: its base URL and the shared client.
#[derive(Debug, Clone)]
pub(crate) struct Forge {
    client: reqwest::Client,
    /// `<base>/api/v1` without a trailing slash.
    api: String,
    base: Url,
    limits: Limits,
    timeout: Duration,
    /// Permits for large bodies (`LARGE_CALLS`), shared by every clone.
    large: Arc<Semaphore>,
    /// How long requests take and what the forge answers.
    metrics: ForgeMetrics,
    /// Slots for requests in flight (`FORGE_MAX_CONCURRENT`) and their number, shared by
    /// every clone; `None`: no limit.
    slots: Option<(Arc<Semaphore>, u32)>,
    /// The store that counts the slots of every replica, and what to do while it cannot.
    store: Option<Store>,
    /// This forge's key for its slots in the store (one per profile).
    slots_key: Arc<[u8]>,
    /// Whether the forge has answered any request yet (shared by every clone), for `/readyz`.
    answered: Arc<std::sync::atomic::AtomicBool>,
    /// Where its URL is set, for the words of a failed connection: `GITEA_URL`, or a profile's.
    url_setting: Arc<str>,
}

impl Forge {
    /// Build the client for `base` (with a trailing `/`).
    pub(crate) fn new(
        base: Url,
        limits: Limits,
        connect_timeout: Duration,
        timeout: Duration,
    ) -> Result<Forge, Shown> {
        let builder = reqwest::Client::builder();
        // Redirects are not followed, so a forge reached over plain HTTP never needs TLS:
        // reading and parsing the system's certificate store would only slow the start.
        let builder = if base.scheme() == "http" { builder.tls_certs_only([]) } else { builder };
        let client = builder
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let api = format!("{}api/v1", base.as_str());
        Ok(Forge {
            client,
            api,
            base,
            limits,
            timeout,
            large: Arc::new(Semaphore::new(LARGE_CALLS)),
            metrics: ForgeMetrics::default(),
            slots: None,
            store: None,
            slots_key: FORGE_SLOTS.into(),
            answered: Arc::default(),
            url_setting: Arc::from("GITEA_URL"),
        })
    }

    /// This client, recording each request's time and status into `metrics`.
    pub(crate) fn counted(mut self, metrics: ForgeMetrics) -> Forge {
        self.metrics = metrics;
        self
    }

    /// The same forge, its large bodies counted with those of `other` (every forge of one
    /// server shares the `LARGE_CALLS` permits: the memory bound is the server's, not a forge's).
    pub(crate) fn sharing_large_bodies_with(mut self, other: &Forge) -> Forge {
        self.large = other.large.clone();
        self
    }

    /// The same forge with at most `max` requests in flight at once (`None`: no limit).
    pub(crate) fn with_max_concurrent(mut self, max: Option<std::num::NonZeroU32>) -> Forge {
        self.slots = max.map(|n| (Arc::new(Semaphore::new(n.get() as usize)), n.get()));
        self
    }

    /// The same forge, with `FORGE_MAX_CONCURRENT` counted for every replica sharing `store`.
    /// The same forge with its slots counted in `store` too, under the key of the profile
    /// `name` (the one forge of the environment settings has none), whose URL its words name.
    pub(crate) fn with_store(mut self, store: Option<Store>, name: Option<&str>) -> Forge {
        self.store = store;
        if let Some(name) = name {
            self.slots_key = [FORGE_SLOTS, b"\0", name.as_bytes()].concat().into();
            self.url_setting = Arc::from(format!("the url of the profile {name}"));
        }
        self
    }

    /// The shared client, for the OAuth requests of `oauth.rs`.
    pub(super) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The base URL of the forge.
    pub(crate) fn base(&self) -> &Url {
        &self.base
    }

    /// The client the settings describe (URL, body limits, timeouts); fails without a URL.
    pub(crate) fn from_settings(s: &crate::config::Settings) -> Result<Forge, Shown> {
        let limits = Limits { max_binary: s.max_binary_bytes, max_response: s.max_response_bytes };
        let url = s.forge_url().map_err(|e| e.to_string())?;
        Ok(Forge::new(url.clone(), limits, s.connect_timeout, s.timeout)?
            .with_max_concurrent(s.forge_max_concurrent))
    }

    /// The full URL of a plan (for direct comparisons in benchmarks and tests).
    pub(crate) fn url_of(&self, plan: &CallPlan) -> Result<Url, CallError> {
        let prefix = match plan.root() {
            Root::Api => self.api.as_str(),
            Root::Site => self.base.as_str().trim_end_matches('/'),
        };
        let mut url = Url::parse(&format!("{prefix}{}", plan.path())).map_err(|e| {
            CallError::local(
                ErrorKind::InvalidArguments,
                format!("the request path does not form a URL: {e}"),
            )
        })?;
        if !plan.query().is_empty() {
            url.query_pairs_mut().extend_pairs(plan.query().iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        // The path is ours (encoded segments appended to the API base), but check anyway that
        // nothing moved the request off the forge before a credential is attached.
        if url.origin() != self.base.origin() || !url.path().starts_with(self.base.path()) {
            return Err(CallError::local(ErrorKind::Denied, "the request would leave the configured forge"));
        }
        Ok(url)
    }

    /// Send a plan with a credential and read the answer within the limits, holding a slot
    /// of `FORGE_MAX_CONCURRENT` meanwhile.
    pub(crate) async fn send(&self, plan: &CallPlan, credential: &Credential) -> Result<Received, CallError> {
        self.send_reading(plan, credential, Binary::Refuse).await
    }

    /// `send`, reading binary content over `MAX_BINARY_BYTES` as `binary` says.
    pub(crate) async fn send_reading(
        &self,
        plan: &CallPlan,
        credential: &Credential,
        binary: Binary,
    ) -> Result<Received, CallError> {
        let _slot = self.slot().await?;
        self.send_now(plan, credential, binary).await
    }

    /// Send the login lookup of a token not yet established, without a slot of
    /// `FORGE_MAX_CONCURRENT`: such lookups are bounded by a small pool of their own (the
    /// login cache's), so that however many unknown tokens arrive they never take the slots
    /// established callers need.
    pub(crate) async fn send_lookup(
        &self,
        plan: &CallPlan,
        credential: &Credential,
    ) -> Result<Received, CallError> {
        self.send_now(plan, credential, Binary::Refuse).await
    }

    /// A slot for one request (none needed without `FORGE_MAX_CONCURRENT`), or `rate_limited`
    /// when none frees up within `SLOT_WAIT`: here first, then in the shared store.
    async fn slot(&self) -> Result<Option<Slot<'_>>, CallError> {
        let Some((slots, max)) = &self.slots else { return Ok(None) };
        let deadline = tokio::time::Instant::now() + SLOT_WAIT;
        let Ok(here) = tokio::time::timeout_at(deadline, slots.acquire()).await else {
            return Err(self.no_slot(*max));
        };
        let here = here.expect("the semaphore is never closed");
        let Some(store) = &self.store else { return Ok(Some(Slot { _here: here, _shared: None })) };
        let limit = Limit { concurrent: *max, rate: None };
        loop {
            // Never past the deadline, whatever the store does (a slot it may have taken for a
            // dropped answer is given back by the store module).
            let asked = store.admit("forge_admit", &self.slots_key, limit);
            let answer = tokio::time::timeout_at(deadline, asked).await.unwrap_or(Ok(Admit::Busy(*max)));
            match answer {
                Ok(Admit::Let(shared)) => return Ok(Some(Slot { _here: here, _shared: shared })),
                Ok(_) => {
                    // Spread the askers out, so that they do not all ask again at once.
                    let pause = SLOT_POLL + Duration::from_millis(u64::from(jitter()) % 20);
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Err(self.no_slot(*max));
                    }
                    tokio::time::sleep(pause).await;
                }
                Err(why) if store.fails_closed() => {
                    store.metrics().fallback("forge_concurrent", "refused");
                    store.warn("requests to the forge are refused meanwhile (MCP_STATE_FAIL=closed)", why);
                    self.metrics.state_refused();
                    return Err(CallError::rate_limited(
                        format!(
                            "the shared store (MCP_STATE_URL) that counts FORGE_MAX_CONCURRENT could not be reached, and MCP_STATE_FAIL=closed refuses requests meanwhile; nothing was sent — retry after {SLOT_RETRY_AFTER} s"
                        ),
                        SLOT_RETRY_AFTER,
                    ));
                }
                Err(why) => {
                    store.metrics().fallback("forge_concurrent", "local");
                    store.warn("each replica counts FORGE_MAX_CONCURRENT on its own meanwhile", why);
                    return Ok(Some(Slot { _here: here, _shared: None }));
                }
            }
        }
    }

    /// The refusal of a request that found no slot.
    fn no_slot(&self, max: u32) -> CallError {
        self.metrics.slot_refused();
        CallError::rate_limited(
            format!(
                "{max} requests to the forge are already in flight, the limit for all callers together (FORGE_MAX_CONCURRENT); nothing was sent — retry after {SLOT_RETRY_AFTER} s"
            ),
            SLOT_RETRY_AFTER,
        )
    }

    async fn send_now(
        &self,
        plan: &CallPlan,
        credential: &Credential,
        binary: Binary,
    ) -> Result<Received, CallError> {
        let url = self.url_of(plan)?;
        let started = Instant::now();
        let got = self.exchange(url, plan, credential, binary).await;
        let status = match &got {
            Ok(r) => Some(r.status),
            Err(CallError::Result(f)) => f.status,
            Err(CallError::UnknownTool(_)) => None,
        };
        self.metrics.request(started.elapsed(), status);
        // A 5xx may come from a proxy in front of the forge: only an answer below that shows
        // that the forge itself is there.
        // Written once: a store on every call would bounce the flag's cache line between
        // the cores that serve calls.
        if status.is_some_and(|s| s < 500) && !self.has_answered() {
            self.answered.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        got
    }

    /// Whether the forge has answered a request (any status below 500) since the start.
    pub(crate) fn has_answered(&self) -> bool {
        self.answered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// One request and its answer, read within the limits.
    async fn exchange(
        &self,
        url: Url,
        plan: &CallPlan,
        credential: &Credential,
        binary: Binary,
    ) -> Result<Received, CallError> {
        let method = reqwest::Method::from_bytes(plan.method().as_str().as_bytes()).expect("standard method");
        let mut req = self
            .client
            .request(method, url)
            .header(ACCEPT, "application/json, text/plain;q=0.9, */*;q=0.8")
            .header(USER_AGENT, concat!("aegis-gitea-mcp/", env!("CARGO_PKG_VERSION")));
        if let Some(h) = credential.header() {
            req = req.header(AUTHORIZATION, h.clone());
        }
        if let Some(login) = credential.sudo() {
            req = req.header(SUDO, login.clone());
        }
        req = match plan.body() {
            PlanBody::None => req,
            PlanBody::Json(v) => req
                .header(CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(v).expect("a JSON value serializes")),
            PlanBody::Text(text) => req
                .header(CONTENT_TYPE, aegis_core::catalog::BodyEncoding::TEXT_MEDIA_TYPE)
                .body(text.clone()),
            PlanBody::Multipart { fields, files } => {
                let mut form = reqwest::multipart::Form::new();
                for (k, v) in fields {
                    form = form.text(k.clone(), v.clone());
                }
                for (k, f) in files {
                    let part = reqwest::multipart::Part::bytes(f.bytes.clone())
                        .file_name(f.filename.clone())
                        .mime_str(&f.content_type)
                        .map_err(|_| {
                            CallError::invalid_argument(
                                format!("/{k}/content_type"),
                                "`content_type` is not a valid media type",
                            )
                        })?;
                    form = form.part(k.clone(), part);
                }
                req.multipart(form)
            }
        };
        let mut resp = req.send().await.map_err(|e| self.transport_error(&e))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let limit = read_limit(plan.expect(), content_type, self.limits);
        let is_binary = limit.setting == "MAX_BINARY_BYTES";
        let resource = ReadLimit { bytes: 0, setting: "MAX_RESOURCE_BYTES" };
        // Binary content past MAX_BINARY_BYTES: a resource read keeps it up to its own bound;
        // a tool call that links to such a resource only counts it.
        let (limit, measure) = match binary {
            Binary::UpTo(max) if is_binary => (ReadLimit { bytes: max, ..resource }, None),
            Binary::Measure(max) if is_binary => (limit, Some(ReadLimit { bytes: max, ..resource })),
            _ => (limit, None),
        };
        let declared =
            headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        // An error's message is at its start: read that much, drop the rest.
        let error_prefix = (status >= 400).then_some(ERROR_BODY_BYTES);
        if let (Some(len), Some(up_to)) = (declared, measure) {
            if len > limit.bytes && error_prefix.is_none() {
                if len > up_to.bytes {
                    return Err(too_large(status, up_to, Some(len)));
                }
                // Larger than a result holds: its size is all that is wanted.
                return Ok(Received { status, headers, body: Vec::new(), over: Some(len), _large: None });
            }
        }
        if let Some(len) = declared.filter(|&len| len > limit.bytes && error_prefix.is_none()) {
            return Err(too_large(status, limit, Some(len)));
        }
        let mut large = None;
        if declared.is_some_and(|len| len > LARGE_BODY as u64) && error_prefix.is_none() {
            large = Some(self.large_permit().await);
        }
        let initial = declared.unwrap_or(0).min(limit.bytes).min(error_prefix.unwrap_or(usize::MAX) as u64);
        let mut body: Vec<u8> = Vec::with_capacity(initial as usize);
        // Bytes counted past the limit and dropped (`Binary::Measure`, without a length).
        let mut counted: Option<u64> = None;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if let Some(max) = error_prefix {
                        body.extend_from_slice(&chunk[..chunk.len().min(max - body.len())]);
                        if body.len() == max {
                            break;
                        }
                        continue;
                    }
                    if let Some(n) = &mut counted {
                        *n += chunk.len() as u64;
                        if measure.is_some_and(|m| *n > m.bytes) {
                            return Err(too_large(status, measure.expect("measuring"), None));
                        }
                        continue;
                    }
                    if body.len() as u64 + chunk.len() as u64 > limit.bytes {
                        if let Some(up_to) = measure {
                            let n = body.len() as u64 + chunk.len() as u64;
                            if n > up_to.bytes {
                                return Err(too_large(status, up_to, None));
                            }
                            counted = Some(n);
                            body = Vec::new();
                            large = None;
                            continue;
                        }
                        return Err(too_large(status, limit, None));
                    }
                    if large.is_none() && body.len() + chunk.len() > LARGE_BODY {
                        large = Some(self.large_permit().await);
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(CallError::from_forge(
                        status,
                        ErrorKind::Timeout,
                        format!(
                            "the forge started answering but the body did not arrive within {}s; try again, or raise GITEA_TIMEOUT",
                            self.timeout.as_secs_f64()
                        ),
                    ));
                }
                Err(_) => {
                    return Err(CallError::from_forge(
                        status,
                        ErrorKind::ConnectionFailed,
                        "the connection to the forge broke before the whole answer arrived; try again",
                    ));
                }
            }
        }
        if let Some(size) = counted {
            return Ok(Received { status, headers, body: Vec::new(), over: Some(size), _large: None });
        }
        Ok(Received { status, headers, body, over: None, _large: large })
    }

    /// One of the permits for large bodies; waits while `LARGE_CALLS` are taken (the
    /// request's own timeout still runs, and the forge's connection waits unread).
    async fn large_permit(&self) -> OwnedSemaphorePermit {
        self.large.clone().acquire_owned().await.expect("the semaphore is never closed")
    }

    /// A request that did not get an answer: timeout or connection failure, in plain words.
    fn transport_error(&self, e: &reqwest::Error) -> CallError {
        let host = self.base.host_str().unwrap_or("the forge");
        if e.is_timeout() {
            return CallError::local(
                ErrorKind::Timeout,
                format!(
                    "{host} did not answer within {}s; it may be overloaded or unreachable — try again, or raise GITEA_TIMEOUT",
                    self.timeout.as_secs_f64()
                ),
            );
        }
        let cause = root_cause(e);
        let what = if e.is_connect() { "could not connect to" } else { "lost the connection to" };
        CallError::local(
            ErrorKind::ConnectionFailed,
            format!(
                "{what} {} ({cause}); check {} and that the forge is running",
                self.base, self.url_setting
            ),
        )
    }
}

fn too_large(status: u16, limit: ReadLimit, declared: Option<u64>) -> CallError {
    let size = declared.map(|n| format!("{n} bytes")).unwrap_or_else(|| "more than that".into());
    let (bytes, setting) = (limit.bytes, limit.setting);
    CallError::from_forge(
        status,
        ErrorKind::PayloadTooLarge,
        format!(
            "the forge's answer is {size}, over the limit of {bytes} bytes ({setting}); ask for less (a smaller page, a narrower path, a single file) or raise {setting}"
        ),
    )
}

/// The innermost cause of a transport error: the part that tells a person what happened
/// ("Connection refused", "failed to lookup address"). It holds no credential: those
/// travel only in a sensitive header, which errors do not print.
pub(super) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: &(dyn std::error::Error + 'static) = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
