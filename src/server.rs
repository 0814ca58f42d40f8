//! The running server's shared, read-only state: settings, catalog, forge client, the
//! global identity and the guard. Built once by `Server::start`; every call borrows it.

use std::sync::Arc;
use std::time::Instant;

use crate::audit::Trace;
use crate::config::{FlavorChoice, Settings};
use crate::executor::{Forge, flavor};
use crate::identity::{Caller, Credential, GlobalIdentity, Identity, Mode};
use crate::metrics::Metrics;
use aegis_core::catalog::{Catalog, Flavor, Version};
use aegis_core::error::{CallError, ErrorKind, Shown};
use aegis_core::guard::Guard;
use aegis_core::policy::{Narrowing, Policy};

/// Everything a call needs besides its arguments.
#[derive(Debug)]
pub struct Server {
    pub settings: Settings,
    pub catalog: Arc<Catalog>,
    pub(crate) forge: Forge,
    pub(crate) global: GlobalIdentity,
    /// Which tools are listed and which calls are allowed.
    pub policy: Policy,
    /// Redaction, masking and bounds of every result.
    pub guard: Guard,
    /// Tool calls and resource reads running right now, each holding a token until it
    /// returns (graceful shutdown waits for them).
    pub(crate) calls: tokio_util::task::TaskTracker,
    /// HTTP requests whose answers are still being written, each holding a token until its
    /// response body is done (graceful shutdown waits for them after the calls).
    pub answers: tokio_util::task::TaskTracker,
    /// Logins of per-request tokens (HTTP), by a hash of the token.
    pub logins: crate::identity::cache::LoginCache,
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
    /// What the forge said of repositories' authors, per identity (`CONTENT_TRUST`).
    pub(crate) authors: crate::trust::AuthorCache,
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

/// The forge as URLs in arguments may name it: its base URL and the addresses of its host,
/// looked up once (within 2 s; none when the lookup fails, and the name still counts), so
/// that a migration from this forge's own address is judged like one from its name.
async fn forge_host(base: &url::Url) -> aegis_core::policy::repos::ForgeHost {
    let addresses = match (base.host_str(), base.port_or_known_default()) {
        (Some(host), Some(port)) => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let lookup = tokio::net::lookup_host((host, port));
            match tokio::time::timeout(std::time::Duration::from_secs(2), lookup).await {
                Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    };
    aegis_core::policy::repos::ForgeHost::new(Some(base.clone()), addresses)
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

/// Why the server could not start, in words a person can act on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

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
        let forge = Forge::from_settings(&settings)
            .map_err(StartError)?
            .counted(metrics.forge())
            .with_store(state.clone());
        let credential = global_credential(&settings)?;
        let detected = match settings.flavor {
            FlavorChoice::Auto => Some(detect(&forge, &credential).await?),
            FlavorChoice::Gitea | FlavorChoice::Forgejo => None,
        };
        let started = Instant::now();
        let catalog = catalog_for(&settings, detected)?;
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
        let mut policy = settings.policy();
        policy.forge = forge_host(forge.base()).await;
        let settings_keys =
            [settings.oauth.as_ref().map(|o| o.key.clone()), settings.state.as_ref().map(|s| s.key.clone())];
        let flows = crate::reads::Flows::new(settings.flow_window);
        Ok(Server {
            audit,
            oauth,
            guard: settings.guard().counted(metrics.guard()),
            global: GlobalIdentity::new(credential),
            policy,
            catalog: Arc::new(catalog),
            forge,
            settings,
            catalog_build,
            logins: crate::identity::cache::LoginCache::counted(metrics.identity_cache()),
            metrics,
            limits,
            new_tokens,
            calls: Default::default(),
            answers: Default::default(),
            confirmed: crate::oauth::used::UsedOnce::new(CONFIRMED_REMEMBERED).shared(state.clone()),
            flows,
            state,
            confirmations: crate::oauth::seal::Sealer::new(&confirmation_key(&settings_keys)),
            authors: Default::default(),
        })
    }

    /// Into `trace`, for the audit line, the identity `caller` is known to have before the
    /// forge is asked (the login when the login cache has it: nothing is asked of the forge
    /// for the audit line), and its secrets. Without an audit log, nothing.
    pub(crate) async fn note_caller(&self, trace: &mut Trace, caller: &Caller) {
        if self.audit.is_none() {
            return;
        }
        let (login, mode) = match caller {
            Caller::Global => (self.global.cached_login().map(str::to_owned), self.global.credential.mode()),
            Caller::Token(t) => (self.logins.get(t).await.map(|u| u.login), Mode::Token),
            Caller::Granted(g) => (self.logins.get(&g.forge_token).await.map(|u| u.login), Mode::OAuth),
        };
        trace.caller(Identity { login, mode, sudo: None }, caller);
    }

    /// What the discovery tools see for a request that narrowed the policy so.
    pub fn discovery<'n>(&self, narrowing: &'n Narrowing) -> aegis_core::discovery::Discovery<'_, 'n> {
        aegis_core::discovery::Discovery { catalog: &self.catalog, policy: &self.policy, narrowing }
    }
}

/// The server's own credential: the token, else the login and password (HTTP Basic), else
/// none (anonymous). The settings never hold both (`config/resolve.rs` refuses that).
pub(crate) fn global_credential(settings: &Settings) -> Result<Credential, StartError> {
    match (&settings.token, &settings.username, &settings.password) {
        (Some(t), _, _) => Credential::token(t).map_err(|e| StartError(format!("GITEA_TOKEN: {e}"))),
        (None, Some(username), Some(password)) => Ok(Credential::basic(username, password)),
        _ => Ok(Credential::anonymous()),
    }
}

/// The catalog the settings describe: the tools of the flavor they name, or of the forge's
/// `detected` version (`--flavor auto`), from the embedded spec or `--spec`. No network
/// access, so `tools --flavor gitea|forgejo` needs neither a URL nor a token.
pub fn catalog_for(settings: &Settings, detected: Option<Version>) -> Result<Catalog, StartError> {
    let flavor = match (settings.flavor, &detected) {
        (_, Some(v)) => v.flavor(),
        (FlavorChoice::Gitea, None) => Flavor::Gitea,
        (FlavorChoice::Forgejo, None) => Flavor::Forgejo,
        (FlavorChoice::Auto, None) => {
            return Err(StartError(
                "--flavor auto asks the forge which it is: pass --url (or set GITEA_URL), or pass --flavor gitea|forgejo".into(),
            ));
        }
    };
    let spec_bytes =
        aegis_core::catalog::spec::bytes(settings.spec.as_deref(), flavor).map_err(StartError)?;
    let mut catalog = Catalog::build(spec_bytes, flavor, detected)
        .map_err(|e| StartError(format!("cannot generate tools from the spec: {e}")))?;
    // The same rule admission applies: the tools whose calls take `confirm` offer it.
    let offers = settings.policy();
    catalog.offer_confirm(|t| offers.offers_confirm(t));
    if settings.sudo_allowed_users.is_some() {
        for name in catalog.offer_sudo() {
            tracing::warn!(
                "{name} has a parameter named sudo: its tool keeps it and takes no sudo; act as another user through gitea_call_operation's own sudo"
            );
        }
    }
    for (setting, names) in
        [("DISABLED_TOOLS", &settings.disabled_tools), ("ENABLED_TOOLS", &settings.enabled_tools)]
    {
        let unknown: Vec<&String> = names.iter().filter(|n| catalog.get(n).is_none()).collect();
        if !unknown.is_empty() {
            tracing::warn!(
                "{setting} names tools this {} spec does not have: {unknown:?}",
                flavor.display_name()
            );
        }
    }
    Ok(catalog)
}

/// The forge's version for `--flavor auto`. A token the forge refuses stops the start with
/// words that say so (the version is still asked without it, to name the forge): a server
/// whose every call would answer 401 is better not started.
async fn detect(forge: &Forge, credential: &Credential) -> Result<Version, StartError> {
    match flavor::detect(forge, credential).await {
        Ok(probe) if probe.token_refused && credential.mode() == Mode::Basic => Err(StartError(format!(
            "the forge refused GITEA_USERNAME and GITEA_PASSWORD (401): {} {} answers at {}, but does not sign this login in with this password (a login with two-factor authentication cannot use a password here); fix them, or use a token (GITEA_TOKEN)",
            probe.version.flavor().display_name(),
            probe.version.text,
            forge.base()
        ))),
        Ok(probe) if probe.token_refused => Err(StartError(format!(
            "the forge refused GITEA_TOKEN (401): {} {} answers at {}, but not to this token; create a new access token and set GITEA_TOKEN (or unset it to run anonymously)",
            probe.version.flavor().display_name(),
            probe.version.text,
            forge.base()
        ))),
        Ok(probe) => Ok(probe.version),
        Err(CallError::Result(f)) if f.kind == ErrorKind::Unauthorized => Err(StartError(f.message)),
        Err(e) => Err(StartError(format!(
            "cannot detect the forge ({e}); fix the URL, or pass --flavor gitea|forgejo to start without asking"
        ))),
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
