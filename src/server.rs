//! The running server's shared, read-only state: settings, catalog, forge client, the
//! global identity and the guard. Built once by `Server::start`; every call borrows it.

use std::sync::Arc;
use std::time::Instant;

use crate::audit::Trace;
use crate::config::Settings;
use crate::forges::{ForgeProfile, Forges};
use crate::identity::{Caller, Identity, Mode};
use crate::metrics::Metrics;
use aegis_core::error::Shown;
use aegis_core::guard::Guard;

/// Everything a call needs besides its arguments.
#[derive(Debug)]
pub struct Server {
    pub settings: Settings,
    /// The forges it serves: each profile's client, credential, catalog, policy and caches.
    pub forges: Forges,
    /// Redaction, masking and bounds of every result.
    pub guard: Guard,
    /// Tool calls and resource reads running right now, each holding a token until it
    /// returns (graceful shutdown waits for them).
    pub(crate) calls: tokio_util::task::TaskTracker,
    /// HTTP requests whose answers are still being written, each holding a token until its
    /// response body is done (graceful shutdown waits for them after the calls).
    pub answers: tokio_util::task::TaskTracker,
    /// Calls per minute and calls running, per identity (`RATE_LIMIT_*`).
    pub limits: crate::limits::Limits,
    /// Tokens not yet confirmed, per client address (`MCP_NEW_TOKENS_PER_MINUTE`).
    pub new_tokens: crate::limits::NewTokens,
    /// Sign-in with the forge (HTTP transports, when configured).
    pub oauth: Option<Arc<crate::oauth::OAuth>>,
    /// How long building the catalog took (spec parse, schemas, validators).
    pub catalog_build: std::time::Duration,
    /// The audit trail, when `AUDIT_LOG` is set.
    pub audit: Option<crate::audit::AuditLog>,
    /// What `/metrics` shows; every part of the server counts into it.
    pub(crate) metrics: Metrics,
    /// The store the replicas share (`MCP_STATE_URL`), when there is one.
    pub(crate) state: Option<crate::state::Store>,
    /// Seals the request state of a call waiting for a person's confirmation.
    pub(crate) confirmations: crate::oauth::seal::Sealer,
    /// The confirmations a person's yes was given with, each used once: here, and with a
    /// shared store on every replica.
    pub(crate) confirmed: crate::oauth::used::UsedOnce,
    /// What each session read of private repositories (`FLOW_GUARD`), and visibilities.
    pub(crate) flows: crate::reads::Flows,
}

/// Most confirmations remembered as used on one replica (each for its `CONFIRM_TIMEOUT`).
const CONFIRMED_REMEMBERED: usize = 100_000;

/// The key that seals confirmations' request states: derived from the sign-in's key, else
/// from the shared store's (replicas have the same one, so any replica opens what another
/// sealed), else one of this process alone. A derived key, so that no state is ever a token.
fn confirmation_key(keys: &[Option<Arc<secrecy::SecretBox<[u8; 32]>>>; 2]) -> secrecy::SecretBox<[u8; 32]> {
    use aws_lc_rs::hmac;
    use secrecy::ExposeSecret;
    let mut out = [0u8; 32];
    match keys.iter().flatten().next() {
        Some(key) => {
            let tag = hmac::sign(
                &hmac::Key::new(hmac::HMAC_SHA256, key.expose_secret()),
                b"aegis confirmation state v1",
            );
            out.copy_from_slice(tag.as_ref());
        }
        // From the system's source directly: the crypto library's own generator seeds itself
        // at its first use from CPU jitter (about 30 ms of CPU), which a start-up need not pay.
        None => getrandom::fill(&mut out).expect("the system's random source works"),
    }
    secrecy::SecretBox::new(Box::new(out))
}

/// How long looking up a host name that a URL of a call names may take.
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The addresses of each of `hosts` (host names a call's URLs give), looked up now, so that
/// the repository allowlists can tell another name of this forge's address: the name of one
/// that cannot be looked up, which then cannot be judged.
pub(crate) async fn look_up(hosts: &[String]) -> Result<Vec<(String, Vec<std::net::IpAddr>)>, Shown> {
    let mut out = Vec::with_capacity(hosts.len());
    for host in hosts {
        match tokio::time::timeout(LOOKUP_TIMEOUT, look_up_one(host)).await {
            Ok(Some(found)) => out.push((host.clone(), found)),
            _ => return Err(host.clone()),
        }
    }
    Ok(out)
}

/// How many look-ups of the names calls give may run at once, over all callers. The system's
/// resolver blocks a thread for each and goes on after the caller stopped waiting (a name
/// whose servers never answer holds it for the resolver's own time-outs), so that without a
/// bound a caller naming such hosts over and over would fill the blocking threads that file
/// writes (the audit log) need too.
const MAX_LOOKUPS: usize = 16;

static LOOKUPS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_LOOKUPS);

/// One name looked up on a blocking thread that holds one of `LOOKUPS` until the resolver
/// answers, also when the caller has stopped waiting. `None`: it could not be.
async fn look_up_one(host: &str) -> Option<Vec<std::net::IpAddr>> {
    let permit = LOOKUPS.acquire().await.ok()?;
    let host = host.to_owned();
    let found = tokio::task::spawn_blocking(move || {
        let _held = permit;
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), 0)).map(|a| a.map(|a| a.ip()).collect())
    });
    found.await.ok()?.ok()
}

pub use crate::forges::{StartError, catalog_for};

impl Server {
    /// Build the server: HTTP client, credential (token or login and password), flavor
    /// (asking the forge when `auto`),
    /// spec, catalog. The only network access is the version probe of `--flavor auto`.
    pub async fn start(settings: Settings) -> Result<Server, StartError> {
        let metrics = Metrics::new();
        let state = settings
            .state
            .as_ref()
            .map(|s| crate::state::Store::connect(s, metrics.state()))
            .transpose()
            .map_err(StartError)?;
        if let Some(store) = state.clone() {
            tokio::spawn(async move { store.check().await });
        }
        let started = Instant::now();
        let forges = Forges::start(&settings, &metrics, state.as_ref()).await?;
        let catalog_build = started.elapsed();
        if settings.extra_secrets.iter().any(|s| secrecy::ExposeSecret::expose_secret(s).chars().count() < 4)
        {
            tracing::warn!(
                "an EXTRA_SECRETS value is shorter than 4 characters: every occurrence in every result will be redacted"
            );
        }
        let mcp_path =
            if settings.transport == crate::config::TransportChoice::Sse { "/sse" } else { "/mcp" };
        let oauth = settings
            .oauth
            .as_ref()
            .map(|o| Arc::new(crate::oauth::OAuth::new(o, mcp_path).with_store(state.clone())));
        let audit = match (&settings.audit_log, &settings.audit_key) {
            (None, _) => None,
            (Some(path), Some(key)) => Some(crate::audit::AuditLog::open(
                path,
                crate::audit::AuditKey::new(key),
                settings.audit_fail_open,
            )),
            (Some(_), None) => {
                return Err(StartError(
                    "AUDIT_LOG (--audit-log) needs AUDIT_KEY_FILE (--audit-key-file)".into(),
                ));
            }
        };
        let limits = crate::limits::Limits::from_settings(&settings, metrics.rate_limits(), state.clone());
        let new_tokens = crate::limits::NewTokens::new(settings.new_tokens_per_minute, metrics.rate_limits());
        let settings_keys =
            [settings.oauth.as_ref().map(|o| o.key.clone()), settings.state.as_ref().map(|s| s.key.clone())];
        let flows = crate::reads::Flows::new(settings.flow_window);
        Ok(Server {
            audit,
            oauth,
            guard: settings.guard().counted(metrics.guard()),
            forges,
            settings,
            catalog_build,
            metrics,
            limits,
            new_tokens,
            calls: Default::default(),
            answers: Default::default(),
            confirmed: crate::oauth::used::UsedOnce::new(CONFIRMED_REMEMBERED).shared(state.clone()),
            flows,
            state,
            confirmations: crate::oauth::seal::Sealer::new(&confirmation_key(&settings_keys)),
        })
    }

    /// Where a call of this server runs once routed to `profile`.
    pub(crate) fn at<'s>(&'s self, profile: &'s ForgeProfile) -> At<'s> {
        At { server: self, profile }
    }
}

/// Where a call runs: the server (settings, guard, audit, metrics, sessions) and the forge
/// profile it was routed to (client, credential, catalog, policy, caches). Every stage after
/// routing reads the forge only through `profile`.
#[derive(Clone, Copy)]
pub(crate) struct At<'s> {
    pub(crate) server: &'s Server,
    pub(crate) profile: &'s ForgeProfile,
}

impl At<'_> {
    /// Into `trace`, for the audit line, the identity `caller` is known to have before the
    /// forge is asked (the login when the login cache has it: nothing is asked of the forge
    /// for the audit line), and its secrets. Without an audit log, nothing.
    pub(crate) async fn note_caller(&self, trace: &mut Trace, caller: &Caller) {
        if self.server.audit.is_none() {
            return;
        }
        let profile = self.profile;
        let (login, mode) = match self.server.forges.caller_on(profile, caller) {
            Ok(Caller::Global) => {
                (profile.global.cached_login().map(str::to_owned), profile.global.credential.mode())
            }
            Ok(Caller::Token(t)) => (profile.logins.get(&t).await.map(|u| u.login), Mode::Token),
            Ok(Caller::Granted(g)) => {
                (profile.logins.get(&g.forge_token).await.map(|u| u.login), Mode::OAuth)
            }
            // No credential for this forge: the call is refused before anyone is asked.
            Ok(Caller::Forges(_)) | Err(_) => (None, Mode::Anonymous),
        };
        trace.caller(Identity { login, mode, sudo: None }, caller);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many look-ups at once share `MAX_LOOKUPS` blocking threads and each gets its answer;
    /// a name that does not resolve is named back; every thread is given back after.
    #[tokio::test]
    async fn look_ups_at_once_are_bounded_and_each_answered() {
        let hosts = ["localhost".to_owned()];
        let many = (0..MAX_LOOKUPS * 3).map(|_| look_up(&hosts));
        for found in futures::future::join_all(many).await {
            let found = found.unwrap();
            assert!(found[0].1.iter().any(std::net::IpAddr::is_loopback), "{found:?}");
        }
        let unknown = ["localhost".to_owned(), "no-such-host.invalid".to_owned()];
        assert_eq!(look_up(&unknown).await.unwrap_err(), "no-such-host.invalid");
        assert_eq!(LOOKUPS.available_permits(), MAX_LOOKUPS);
    }

    #[tokio::test]
    async fn a_server_printed_for_debugging_shows_no_credential() {
        const TOKEN: &str = "tok-Qx8debugSECRET0y";
        let forge = fake_forge::FakeForge::start(fake_forge::Options {
            users: vec![(TOKEN.to_owned(), "alice".to_owned())],
            ..fake_forge::Options::default()
        })
        .await;
        forge.seed_repo("alice", "demo");
        let url = forge.base_url();
        let settings = crate::config::test_settings(&["--url", &url, "--flavor", "gitea", "--token", TOKEN]);
        let server = Server::start(settings).await.unwrap();
        // A call builds what the server builds lazily (the guard's scanner, the login).
        let result = crate::call::run(
            &server,
            crate::identity::Caller::Global,
            &aegis_core::policy::Narrowing::default(),
            "repoGet",
            serde_json::json!({"owner": "alice", "repo": "demo"}).as_object().cloned(),
            &mut crate::audit::Trace::default(),
        )
        .await;
        assert!(result.is_ok());
        let printed = format!("{server:?}");
        assert!(!printed.contains("debugSECRET"), "{printed}");
    }
}
