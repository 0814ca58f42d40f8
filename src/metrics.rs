//! What the server counts for an operator: calls by tool and outcome, how long calls and
//! forge requests take, the forge's status codes, what the guard did, how the identity
//! cache answered, the sessions and streams open, which path answered Streamable HTTP
//! requests, and rate-limit refusals. One registry per
//! `Server` (never a global: a process may run several), rendered as Prometheus text at
//! `/metrics` (`transport/metrics.rs`).
//!
//! Every label value comes from a set this server fixes: a catalog tool name (any other
//! name is `unknown`), an error kind, a guard action, a status code. Nothing a client or the
//! forge writes — a login, a token, an argument — ever becomes a label, so a client cannot
//! grow the registry and a scrape reveals no one. The hot path is an atomic increment, a
//! read-locked map lookup per labelled counter, and a short mutex per histogram.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use aegis_core::guard::{Action, Tally};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use aegis_core::catalog::ToolDef;
use aegis_core::error::ErrorKind;
use aegis_core::guard::{Guarded, GuardedError};

/// The `Content-Type` of what `render` writes (Prometheus text format 0.0.4).
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Durations from 1 ms to about 33 s, doubling.
fn seconds_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 16)
}

/// The server's metrics and the registry that renders them.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_duration: Histogram,
    resource_reads: Family<OutcomeLabel, Counter>,
    forge: ForgeMetrics,
    guard: Arc<GuardActions>,
    identity_cache: IdentityCacheCounts,
    sessions_open: Gauge<i64, AtomicI64>,
    streams_open: Gauge<i64, AtomicI64>,
    mcp_requests: McpRequests,
    rate_limited: RateLimits,
    state: StateMetrics,
    flow_writes: Family<KindLabel, Counter>,
    flow_sources: Family<KindLabel, Counter>,
    flow_lookups: Family<KindLabel, Counter>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("aegis");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "calls",
            "Tool calls by tool (a catalog name, else unknown) and outcome (ok or the error kind)",
            calls.clone(),
        );
        let call_duration = Histogram::new(seconds_buckets());
        registry.register(
            "call_duration_seconds",
            "Time of a whole tool call, from its arrival to its answer",
            call_duration.clone(),
        );
        let resource_reads = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "resource_reads",
            "Resource reads by outcome (ok or the error kind)",
            resource_reads.clone(),
        );
        let rate_limited = RateLimits::default();
        registry.register(
            "rate_limited",
            "Requests refused by a rate limit, by limit",
            rate_limited.0.clone(),
        );
        let forge = ForgeMetrics { refused: rate_limited.clone(), ..ForgeMetrics::default() };
        registry.register(
            "forge_request_duration_seconds",
            "Time of one request to the forge, its body read included",
            forge.duration.clone(),
        );
        registry.register(
            "forge_responses",
            "Answers of the forge by HTTP status code",
            forge.responses.clone(),
        );
        let actions = Family::<ActionLabel, Counter>::default();
        registry.register(
            "guard_actions",
            "Results the guard acted on, by action (each action counted once per result)",
            actions.clone(),
        );
        let action = |name: &'static str| actions.get_or_create(&ActionLabel { action: name }).clone();
        let guard =
            Arc::new(GuardActions(Action::ALL.into_iter().map(|a| (a, action(a.as_str()))).collect()));
        let lookups = Family::<ResultLabel, Counter>::default();
        registry.register(
            "identity_cache",
            "Logins of per-request tokens: hit (cached), miss (asked the forge), failure (the forge could not say), refused (the forge refused the token; remembered a while), lookups_full (an unknown token found every lookup slot taken)",
            lookups.clone(),
        );
        let lookup = |name: &'static str| lookups.get_or_create(&ResultLabel { result: name }).clone();
        let identity_cache = IdentityCacheCounts {
            hit: lookup("hit"),
            miss: lookup("miss"),
            failure: lookup("failure"),
            refused: lookup("refused"),
            busy: lookup("lookups_full"),
        };
        let sessions_open = Gauge::<i64, AtomicI64>::default();
        registry.register("sessions_open", "Open Streamable HTTP sessions", sessions_open.clone());
        let streams_open = Gauge::<i64, AtomicI64>::default();
        registry.register("streams_open", "Open legacy SSE streams", streams_open.clone());
        let paths = Family::<PathLabel, Counter>::default();
        registry.register(
            "mcp_requests",
            "Streamable HTTP requests at /mcp by the path that answered them: direct (a plain call, stateless or in a session, and a plain handshake, answered without the MCP library's per-request machinery) or library (everything else)",
            paths.clone(),
        );
        let library_sessions = Counter::default();
        registry.register(
            "library_sessions",
            "MCP library sessions built for sessions opened without one, on the first request that needs one",
            library_sessions.clone(),
        );
        let path = |name: &'static str| paths.get_or_create(&PathLabel { path: name }).clone();
        let mcp_requests = McpRequests { direct: path("direct"), library: path("library"), library_sessions };
        let state = StateMetrics::default();
        registry.register(
            "state_requests",
            "Requests to the shared store by operation and result (ok, error, timeout, skipped while the store is judged down, or backlog: too many waiting); the requests that wait while a round trip is out share the next",
            state.requests.clone(),
        );
        registry.register(
            "state_round_trips",
            "Round trips to the shared store, each carrying one or more requests",
            state.round_trips.clone(),
        );
        registry.register(
            "state_request_duration_seconds",
            "Time of one round trip to the shared store",
            state.duration.clone(),
        );
        registry.register(
            "state_fallback",
            "Calls the limits judged without the shared store, which could not be reached: by limit (caller: the per-identity limits, forge_concurrent) and decision (local: by this replica's own count, refused: MCP_STATE_FAIL=closed)",
            state.fallback.clone(),
        );
        registry.register(
            "state_up",
            "1 when the last round trip to the shared store succeeded, else 0",
            state.up.clone(),
        );
        let (flow_writes, flow_sources, flow_lookups) = Default::default();
        registry.register(
            "flow_writes",
            "Writes of sessions that had read private content, judged by FLOW_GUARD: by kind (kept: within the sources' own owner; asked: the person was asked, or the confirm argument judged; refused: FLOW_GUARD=refuse)",
            Family::clone(&flow_writes),
        );
        registry.register(
            "flow_sources",
            "Private reads that made a repository a source of their session: by kind (repository, or unknown: content whose repository the call does not name, or past the bound)",
            Family::clone(&flow_sources),
        );
        registry.register(
            "flow_visibility_lookups",
            "Visibility look-ups of the flow guard: by kind (hit: cached, miss: asked the forge)",
            Family::clone(&flow_lookups),
        );
        Metrics {
            registry,
            state,
            flow_writes,
            flow_sources,
            flow_lookups,
            calls,
            call_duration,
            resource_reads,
            forge,
            guard,
            identity_cache,
            sessions_open,
            streams_open,
            mcp_requests,
            rate_limited,
        }
    }

    /// A finished tool call: `tool` is the catalog's tool of that name (`None`: no such
    /// tool), `outcome` `ok` or an error kind's wire name.
    pub(crate) fn call(
        &self,
        tool: Option<&Arc<ToolDef>>,
        forge: Option<&Arc<str>>,
        outcome: &'static str,
        took: Duration,
    ) {
        let labels = CallLabels { tool: ToolLabel(tool.cloned()), outcome, forge: forge.cloned() };
        self.calls.get_or_create(&labels).inc();
        self.call_duration.observe(took.as_secs_f64());
    }

    /// A write of a session with private sources, judged: `kept`, `asked` or `refused`.
    pub(crate) fn flow_write(&self, kind: &'static str) {
        self.flow_writes.get_or_create(&KindLabel { kind }).inc();
    }

    /// A private read noted: `repos` repositories, and content of an unknown one.
    pub(crate) fn flow_sources(&self, repos: usize, unknown: bool) {
        self.flow_sources.get_or_create(&KindLabel { kind: "repository" }).inc_by(repos as u64);
        if unknown {
            self.flow_sources.get_or_create(&KindLabel { kind: "unknown" }).inc();
        }
    }

    /// A visibility look-up: answered from the cache (`hit`), or not.
    pub(crate) fn flow_lookup(&self, hit: bool) {
        self.flow_lookups.get_or_create(&KindLabel { kind: if hit { "hit" } else { "miss" } }).inc();
    }

    /// A finished resource read: `ok` or an error kind's wire name.
    pub(crate) fn resource_read(&self, outcome: &'static str) {
        self.resource_reads.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Where the per-identity limiter counts its refusals.
    pub(crate) fn rate_limits(&self) -> RateLimits {
        self.rate_limited.clone()
    }

    /// What the forge client records.
    pub(crate) fn forge(&self) -> ForgeMetrics {
        self.forge.clone()
    }

    /// What the guard records.
    pub(crate) fn guard(&self) -> Arc<GuardActions> {
        self.guard.clone()
    }

    /// What the login cache records.
    pub(crate) fn identity_cache(&self) -> IdentityCacheCounts {
        self.identity_cache.clone()
    }

    /// The gauge of open Streamable HTTP sessions.
    pub(crate) fn state(&self) -> StateMetrics {
        self.state.clone()
    }

    pub(crate) fn sessions_open(&self) -> Gauge<i64, AtomicI64> {
        self.sessions_open.clone()
    }

    /// The gauge of open legacy SSE streams.
    pub(crate) fn streams_open(&self) -> Gauge<i64, AtomicI64> {
        self.streams_open.clone()
    }

    /// Which path answered the Streamable HTTP requests, and the library sessions built.
    pub(crate) fn mcp_requests(&self) -> &McpRequests {
        &self.mcp_requests
    }

    /// Every metric as Prometheus text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}

/// How a call or read ended, as `/metrics` and the debug log name it: `ok`, the error's kind,
/// or `unknown_tool`.
pub(crate) fn outcome(result: &Result<Guarded, GuardedError>) -> &'static str {
    result.as_ref().map_or_else(error_outcome, |_| "ok")
}

/// How a failed call or read ended: the error's kind, or `unknown_tool`.
pub(crate) fn error_outcome(e: &GuardedError) -> &'static str {
    e.kind().map_or("unknown_tool", ErrorKind::as_str)
}

/// The forge client's metrics (cloned into `executor::Forge`; a default one counts into
/// nothing a registry shows, for a client built outside a server).
#[derive(Debug, Clone)]
pub(crate) struct ForgeMetrics {
    duration: Histogram,
    responses: Family<StatusLabel, Counter>,
    /// Requests refused a slot (`FORGE_MAX_CONCURRENT`).
    refused: RateLimits,
}

impl Default for ForgeMetrics {
    fn default() -> ForgeMetrics {
        ForgeMetrics {
            duration: Histogram::new(seconds_buckets()),
            responses: Family::default(),
            refused: RateLimits::default(),
        }
    }
}

/// Refusals of a rate limit, by the limit's fixed name (never a caller's identity or address):
/// `per_minute` and `concurrent` (per identity), `forge_concurrent` (overall).
#[derive(Clone, Debug, Default)]
pub(crate) struct RateLimits(Family<LimitLabel, Counter>);

impl RateLimits {
    pub(crate) fn refused(&self, limit: &'static str) {
        self.0.get_or_create(&LimitLabel { limit }).inc();
    }
}

impl ForgeMetrics {
    /// One request to the forge took `took`; `status` is the status it answered with, if it
    /// answered at all.
    /// A request found every forge slot taken.
    pub(crate) fn slot_refused(&self) {
        self.refused.refused("forge_concurrent");
    }

    /// A request refused because the shared store that counts the slots could not be
    /// reached (`MCP_STATE_FAIL=closed`).
    pub(crate) fn state_refused(&self) {
        self.refused.refused("state");
    }

    pub(crate) fn request(&self, took: Duration, status: Option<u16>) {
        self.duration.observe(took.as_secs_f64());
        if let Some(status) = status {
            self.responses.get_or_create(&StatusLabel { status }).inc();
        }
    }
}

/// The shared store's counters (cloned into `state::Store` and the limits that fall back).
#[derive(Debug, Clone)]
pub(crate) struct StateMetrics {
    requests: Family<StateLabels, Counter>,
    round_trips: Counter,
    duration: Histogram,
    fallback: Family<FallbackLabels, Counter>,
    up: Gauge<i64, AtomicI64>,
}

impl Default for StateMetrics {
    fn default() -> StateMetrics {
        StateMetrics {
            requests: Family::default(),
            round_trips: Counter::default(),
            duration: Histogram::new(seconds_buckets()),
            fallback: Family::default(),
            up: Gauge::default(),
        }
    }
}

impl StateMetrics {
    /// The requests `ops` ended in `result`, together in one round trip that took `took`
    /// (`None`: none made).
    pub(crate) fn request(&self, ops: &[&'static str], result: &'static str, took: Option<Duration>) {
        for &op in ops {
            self.requests.get_or_create(&StateLabels { op, result }).inc();
        }
        if let Some(took) = took {
            self.round_trips.inc();
            self.duration.observe(took.as_secs_f64());
            self.up.set(i64::from(result == "ok"));
        }
    }

    /// A call judged without the store: `limit` names which, `decision` how.
    pub(crate) fn fallback(&self, limit: &'static str, decision: &'static str) {
        self.fallback.get_or_create(&FallbackLabels { limit, decision }).inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    op: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    limit: &'static str,
    decision: &'static str,
}

/// The guard's counters, one per action.
#[derive(Debug)]
pub(crate) struct GuardActions(Vec<(Action, Counter)>);

impl Tally for GuardActions {
    fn add(&self, action: Action) {
        if let Some((_, c)) = self.0.iter().find(|(a, _)| *a == action) {
            c.inc();
        }
    }
}

/// Streamable HTTP requests by the path that answered them (an increment each, no lookup),
/// and the library sessions built for sessions opened without one.
#[derive(Debug, Clone, Default)]
pub(crate) struct McpRequests {
    pub(crate) direct: Counter,
    pub(crate) library: Counter,
    pub(crate) library_sessions: Counter,
}

/// The login cache's counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdentityCacheCounts {
    pub(crate) hit: Counter,
    pub(crate) miss: Counter,
    pub(crate) failure: Counter,
    pub(crate) refused: Counter,
    pub(crate) busy: Counter,
}

/// A call's labels: its tool and outcome, and with several forges the profile it went to (a
/// name of the profiles file, never the client's text: a fixed set). With one forge there is
/// no `forge` label at all, so the exposition is what it always was.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
struct CallLabels {
    tool: ToolLabel,
    outcome: &'static str,
    forge: Option<Arc<str>>,
}

impl EncodeLabelSet for CallLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> Result<(), fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        ("tool", self.tool.name()).encode(encoder.encode_label())?;
        ("outcome", self.outcome).encode(encoder.encode_label())?;
        if let Some(forge) = &self.forge {
            ("forge", &**forge).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabel {
    path: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

/// A tool as a label: the catalog's own definition (its name is shared, not copied per
/// call), or `unknown` for a name the catalog does not have.
#[derive(Clone)]
struct ToolLabel(Option<Arc<ToolDef>>);

impl ToolLabel {
    fn name(&self) -> &str {
        self.0.as_ref().map_or("unknown", |t| t.name.as_str())
    }
}

impl PartialEq for ToolLabel {
    fn eq(&self, other: &ToolLabel) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ToolLabel {}

impl Hash for ToolLabel {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl fmt::Debug for ToolLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl EncodeLabelValue for ToolLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        EncodeLabelValue::encode(&self.name(), encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;
    use serde_json::json;

    fn sample<'a>(text: &'a str, name: &str, labels: &str) -> Option<&'a str> {
        let head = format!("{name}{labels} ");
        text.lines().find_map(|l| l.strip_prefix(head.as_str()))
    }

    #[test]
    fn every_metric_is_rendered_with_its_prefix_and_type() {
        let m = Metrics::new();
        m.call(None, None, "unknown_tool", Duration::from_millis(3));
        m.resource_read("ok");
        m.forge().request(Duration::from_millis(2), Some(404));
        m.guard().add(Action::Mask);
        m.identity_cache().hit.inc();
        m.sessions_open().inc();
        m.mcp_requests().direct.inc();
        m.mcp_requests().library_sessions.inc();
        m.rate_limits().refused("per_minute");
        m.state().request(&["admit", "release"], "ok", Some(Duration::from_micros(50)));
        m.state().fallback("caller", "local");
        let text = m.render();
        assert_eq!(sample(&text, "aegis_state_requests_total", r#"{op="admit",result="ok"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_state_requests_total", r#"{op="release",result="ok"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_state_round_trips_total", ""), Some("1"));
        assert_eq!(sample(&text, "aegis_state_up", ""), Some("1"));
        for (name, kind) in [
            ("aegis_calls_total", "counter"),
            ("aegis_call_duration_seconds", "histogram"),
            ("aegis_resource_reads_total", "counter"),
            ("aegis_forge_request_duration_seconds", "histogram"),
            ("aegis_forge_responses_total", "counter"),
            ("aegis_guard_actions_total", "counter"),
            ("aegis_identity_cache_total", "counter"),
            ("aegis_sessions_open", "gauge"),
            ("aegis_streams_open", "gauge"),
            ("aegis_mcp_requests_total", "counter"),
            ("aegis_library_sessions_total", "counter"),
            ("aegis_rate_limited_total", "counter"),
            ("aegis_state_requests_total", "counter"),
            ("aegis_state_round_trips_total", "counter"),
            ("aegis_state_request_duration_seconds", "histogram"),
            ("aegis_state_fallback_total", "counter"),
            ("aegis_state_up", "gauge"),
        ] {
            assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name} {kind} in\n{text}");
        }
        assert_eq!(
            sample(&text, "aegis_calls_total", r#"{tool="unknown",outcome="unknown_tool"}"#),
            Some("1")
        );
        assert_eq!(sample(&text, "aegis_forge_responses_total", r#"{status="404"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_guard_actions_total", r#"{action="mask"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_guard_actions_total", r#"{action="block"}"#), Some("0"));
        assert_eq!(sample(&text, "aegis_identity_cache_total", r#"{result="hit"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_sessions_open", ""), Some("1"));
        assert_eq!(sample(&text, "aegis_mcp_requests_total", r#"{path="direct"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_mcp_requests_total", r#"{path="library"}"#), Some("0"));
        assert_eq!(sample(&text, "aegis_library_sessions_total", ""), Some("1"));
        assert_eq!(sample(&text, "aegis_rate_limited_total", r#"{limit="per_minute"}"#), Some("1"));
        assert_eq!(sample(&text, "aegis_call_duration_seconds_count", ""), Some("1"));
    }

    /// Calls as a caller whose token, login and arguments are known: none of them shows in
    /// what a scrape reads, whatever tool names the client makes up.
    #[tokio::test]
    async fn no_label_carries_a_login_a_token_or_an_argument() {
        const TOKEN: &str = "tok-Zq7metricsSECRET0x";
        const LOGIN: &str = "login-Xc9metricsSECRET";
        const ARG: &str = "arg-Pw4metricsSECRET";
        let forge = fake_forge::FakeForge::start(fake_forge::Options {
            users: vec![(TOKEN.to_owned(), LOGIN.to_owned())],
            ..fake_forge::Options::default()
        })
        .await;
        let url = forge.base_url();
        let settings = crate::config::test_settings(&["--url", &url, "--flavor", "gitea"]);
        let server = crate::server::Server::start(settings).await.unwrap();
        let calls = [
            ("repoGet", json!({"owner": LOGIN, "repo": ARG})),
            ("repoGet", json!({"owner": LOGIN, "repo": ARG, "token": TOKEN})),
            (TOKEN, json!({})),
            (ARG, json!({"x": TOKEN})),
        ];
        for (tool, args) in calls {
            let started = std::time::Instant::now();
            let result = crate::call::run(
                &server,
                crate::identity::Caller::Token(SecretString::from(TOKEN)),
                &aegis_core::policy::Narrowing::default(),
                tool,
                args.as_object().cloned(),
                &mut crate::audit::Trace::default(),
            )
            .await;
            server.metrics.call(
                server.forges.primary().catalog.get(tool),
                None,
                outcome(&result),
                started.elapsed(),
            );
        }
        let text = server.metrics.render();
        for secret in [TOKEN, LOGIN, ARG] {
            assert!(!text.contains(secret), "{secret} in\n{text}");
        }
        assert_eq!(
            sample(&text, "aegis_calls_total", r#"{tool="unknown",outcome="unknown_tool"}"#),
            Some("2")
        );
        assert_eq!(sample(&text, "aegis_calls_total", r#"{tool="repoGet",outcome="not_found"}"#), Some("1"));
        assert_eq!(
            sample(&text, "aegis_calls_total", r#"{tool="repoGet",outcome="invalid_arguments"}"#),
            Some("1")
        );
        assert_eq!(sample(&text, "aegis_identity_cache_total", r#"{result="miss"}"#), Some("1"));
    }
}
