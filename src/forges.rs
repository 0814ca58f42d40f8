//! The forges one server serves: a profile for each of the profiles file (`GITEA_PROFILES`),
//! or the one forge of the environment settings. Each profile holds everything that belongs to
//! one forge and account: its client, credential, catalog (its flavor's spec), policy, sudo
//! users, and the caches of what that forge said (logins, authors).
//!
//! Why each profile has its own of all of these, rather than one shared and keyed: isolation
//! by construction. A call picks its profile first (`route`), and every later stage reads only
//! that profile, so a credential, a cached login or a catalog of one forge cannot serve a call
//! to another; a client sends only to its own base URL (`executor/client.rs`).
//!
//! A profile whose forge cannot be asked its flavor at start (down, or refusing the profile's
//! credential) does not stop the others: it is kept as `Down`, and its calls are refused with
//! words that name it. The one-forge case stays as it was: a start failure stops the server.

use std::sync::Arc;

use aegis_core::args::sudo::Allowed;
use aegis_core::catalog::{Catalog, Flavor, Version};
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::policy::Policy;
use aegis_core::policy::repos::RepoList;
use aegis_core::policy::route::{self, Matched};
use serde_json::{Map, Value};

use secrecy::ExposeSecret;

use crate::config::{FlavorChoice, Settings};
use crate::executor::{Forge, flavor};
use crate::identity::{Caller, Credential, GlobalIdentity, Mode};
use crate::metrics::Metrics;

/// Every forge of the server, in the profiles file's order.
#[derive(Debug)]
pub struct Forges {
    profiles: Vec<ForgeProfile>,
    /// The profiles that could not start, with why.
    down: Vec<Down>,
    /// The profile a call goes to when neither `forge` nor a pattern picks one.
    default: Option<Arc<str>>,
    /// Whether there is a profiles file: calls then take `forge`, and results name it.
    named: bool,
}

/// One forge and account.
#[derive(Debug)]
pub struct ForgeProfile {
    /// The profile's name (`None`: the one forge of the environment settings).
    pub(crate) name: Option<Arc<str>>,
    pub catalog: Arc<Catalog>,
    pub(crate) forge: Forge,
    pub(crate) global: GlobalIdentity,
    /// Which tools are listed and which calls are allowed on this forge.
    pub policy: Policy,
    /// Who calls may act as with `sudo` here.
    pub(crate) sudo_allowed_users: Option<Allowed>,
    /// The calls that go here without naming a forge (`repositories`).
    pub(crate) repositories: Option<RepoList>,
    /// Logins of per-request tokens for this forge, by a hash of the token.
    pub logins: crate::identity::cache::LoginCache,
    /// What this forge said of repositories' authors, per identity.
    pub(crate) authors: crate::trust::AuthorCache,
    /// This profile's own credential (its token, or password and Basic value), to be found in
    /// calls to the other forges, where it must never go.
    secrets: aegis_core::guard::Redactor,
}

/// A profile that could not start: its forge did not tell its flavor, or refused its credential.
#[derive(Debug)]
struct Down {
    name: Arc<str>,
    url: url::Url,
    repositories: Option<RepoList>,
    why: String,
}

/// The authorization server asks each profile's forge (`None`: the default one).
impl crate::oauth::ForgeOf for Forges {
    fn forge_of(&self, profile: Option<&str>) -> Option<&Forge> {
        match profile {
            None => Some(&self.primary().forge),
            Some(p) => self.by_name(p).map(|f| &f.forge),
        }
    }
}

/// Why the server could not start, in words a person can act on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

impl Forges {
    /// Start every profile (the profiles file's, or the environment's one forge), concurrently.
    pub(crate) async fn start(
        settings: &Settings,
        metrics: &Metrics,
        state: Option<&crate::state::Store>,
    ) -> Result<Forges, StartError> {
        let Some(profiles) = &settings.profiles else {
            let one = ForgeProfile::start(None, settings.clone(), None, metrics, state).await?;
            return Ok(Forges { profiles: vec![one], down: Vec::new(), default: None, named: false });
        };
        let default = profiles.default.as_deref();
        let starting = profiles.forges.iter().map(|p| {
            let own = settings.for_profile(p);
            let name: Arc<str> = Arc::from(p.name.as_str());
            async move {
                let patterns = p.repositories.clone();
                ForgeProfile::start(Some(name.clone()), own, patterns, metrics, state).await.map_err(|e| {
                    Down { name, url: p.url.clone(), repositories: p.repositories.clone(), why: e.0 }
                })
            }
        });
        let (mut up, mut down): (Vec<ForgeProfile>, Vec<Down>) = (Vec::new(), Vec::new());
        for started in futures::future::join_all(starting).await {
            match started {
                Ok(mut p) => {
                    if let Some(first) = up.first() {
                        p.forge = p.forge.sharing_large_bodies_with(&first.forge);
                    }
                    up.push(p);
                }
                Err(d) => {
                    tracing::error!(forge = %d.name, "the forge {} cannot be served until the server restarts: {}", d.name, d.why);
                    down.push(d);
                }
            }
        }
        if up.is_empty() {
            let why: Vec<String> = down.iter().map(|d| format!("{}: {}", d.name, d.why)).collect();
            return Err(StartError(format!(
                "no forge of the profiles file could start ({})",
                why.join("; ")
            )));
        }
        Ok(Forges { profiles: up, down, default: default.map(Arc::from), named: true })
    }

    /// Whether the server serves named profiles (a profiles file).
    pub fn named(&self) -> bool {
        self.named
    }

    /// Every profile that started, in the file's order.
    pub fn all(&self) -> impl Iterator<Item = &ForgeProfile> {
        self.profiles.iter()
    }

    /// The profile the tool list and the server-wide answers are made from: the default
    /// profile, else the first that started.
    pub fn primary(&self) -> &ForgeProfile {
        self.default.as_deref().and_then(|d| self.by_name(d)).unwrap_or(&self.profiles[0])
    }

    fn by_name(&self, name: &str) -> Option<&ForgeProfile> {
        self.profiles.iter().find(|p| p.name.as_deref() == Some(name))
    }

    /// The names of every profile, the default marked, for messages.
    fn names(&self) -> String {
        let names =
            self.profiles.iter().filter_map(|p| p.name.as_deref()).chain(self.down.iter().map(|d| &*d.name));
        let shown = names.map(|n| {
            if self.default.as_deref() == Some(n) { format!("{n} (default)") } else { n.to_owned() }
        });
        shown.collect::<Vec<_>>().join(", ")
    }

    /// Which profile the call of tool `name` goes to: the `forge` it names (taken out of
    /// `args`), else the profile whose `repositories` match what its route names, else the
    /// default. With one unnamed forge, that one, and `args` untouched (`forge` is then an
    /// argument no tool has).
    pub(crate) fn route(
        &self,
        name: &str,
        args: &mut Map<String, Value>,
    ) -> Result<&ForgeProfile, CallError> {
        if !self.named {
            return Ok(&self.profiles[0]);
        }
        let picked = match route::take(args)? {
            Some(forge) => self.named_profile(&forge)?,
            None => self.by_patterns(name, args)?,
        };
        self.has_tool(picked, name, args)?;
        Ok(picked)
    }

    /// Whether the arguments of a call to `picked` hold a credential of another forge: one of
    /// its profile, or one the request carries for it (in any spelling the guard knows). Such
    /// a call is refused, nothing sent: a forge's credential never reaches another forge, not
    /// in a migration's address, a mirror's password or a webhook's header.
    pub(crate) fn foreign_credential(
        &self,
        picked: &ForgeProfile,
        caller: &Caller,
        args: &Map<String, Value>,
    ) -> Result<(), CallError> {
        if !self.named {
            return Ok(());
        }
        let bytes = serde_json::to_vec(args).unwrap_or_default();
        let holds = |p: &ForgeProfile| {
            let requests = caller.on(p.name(), self.is_default(p)).map(|c| c.secrets()).unwrap_or_default();
            p.secrets.occurs_in(&bytes)
                || (!requests.is_empty() && aegis_core::guard::Redactor::once(requests).occurs_in(&bytes))
        };
        match self.profiles.iter().filter(|p| !std::ptr::eq(*p, picked)).find(|p| holds(p)) {
            None => Ok(()),
            Some(other) => Err(CallError::local(
                ErrorKind::Denied,
                format!(
                    "this call's arguments hold a credential of the forge {}, and it goes to the forge {}: a forge's credential is never sent to another forge; nothing was sent",
                    other.name().unwrap_or_default(),
                    picked.name().unwrap_or_default()
                ),
            )),
        }
    }

    /// The profile `forge` names, or why there is none.
    fn named_profile(&self, forge: &str) -> Result<&ForgeProfile, CallError> {
        if let Some(p) = self.by_name(forge) {
            return Ok(p);
        }
        if let Some(d) = self.down.iter().find(|d| &*d.name == forge) {
            return Err(d.refusal());
        }
        let shown: String = forge.chars().take(64).collect();
        Err(CallError::invalid_argument(
            "/forge",
            format!("{shown:?} is not a forge of this server; its forges are {}", self.names()),
        ))
    }

    /// The profile whose patterns match the call's route, else the default.
    fn by_patterns(&self, name: &str, args: &Map<String, Value>) -> Result<&ForgeProfile, CallError> {
        // Every flavor's catalog, the default's first: an operation only one has still names
        // its route.
        let catalogs: Vec<&Catalog> =
            std::iter::once(self.primary()).chain(&self.profiles).map(|p| &*p.catalog).collect();
        let mut lists: Vec<Option<&RepoList>> =
            self.profiles.iter().map(|p| p.repositories.as_ref()).collect();
        lists.extend(self.down.iter().map(|d| d.repositories.as_ref()));
        let up = self.profiles.len();
        let name_of = |i: usize| -> &str {
            if i < up {
                self.profiles[i].name.as_deref().unwrap_or_default()
            } else {
                &self.down[i - up].name
            }
        };
        match route::matching(&catalogs, name, args, &lists) {
            Matched::One(i) if i < up => Ok(&self.profiles[i]),
            Matched::One(i) => Err(self.down[i - up].refusal()),
            Matched::Several(found) => {
                let names: Vec<&str> = found.into_iter().map(name_of).collect();
                Err(CallError::invalid_argument(
                    "/forge",
                    format!(
                        "the repositories of the forges {} both match this call; pass forge with the one it is for",
                        names.join(" and ")
                    ),
                ))
            }
            Matched::None => match self.default.as_deref() {
                Some(d) => self.named_profile(d),
                None => Err(CallError::invalid_argument(
                    "/forge",
                    format!(
                        "this call names no repository that a forge's repositories match, and there is no default forge; pass forge: one of {}",
                        self.names()
                    ),
                )),
            },
        }
    }

    /// The catalog that knows tool `name` (the default's first), else the default's: for
    /// what is counted and audited of a call before it is routed.
    pub(crate) fn catalog_of(&self, name: &str) -> &Catalog {
        self.catalog_with(name).unwrap_or(&self.primary().catalog)
    }

    /// The catalog of the first profile that has tool `name` (the default's first).
    fn catalog_with(&self, name: &str) -> Option<&Catalog> {
        std::iter::once(self.primary())
            .chain(self.profiles.iter())
            .map(|p| &*p.catalog)
            .find(|c| c.get(name).is_some())
    }

    /// Whether `picked` has the tool (or, for the call tool, the operation) a call names: an
    /// operation only another flavor has is refused with where it exists. A name no forge has
    /// is left to admission (an unknown tool).
    fn has_tool(
        &self,
        picked: &ForgeProfile,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<(), CallError> {
        let id = match picked.catalog.get(name).map(|t| &t.target) {
            Some(
                aegis_core::catalog::Target::CallOperation | aegis_core::catalog::Target::OperationSchema,
            ) => match args.get("operation_id").and_then(Value::as_str) {
                Some(id) => id,
                None => return Ok(()),
            },
            Some(_) => return Ok(()),
            None => name,
        };
        if picked.catalog.get(id).is_some() {
            return Ok(());
        }
        let elsewhere: Vec<String> = self
            .profiles
            .iter()
            .filter(|p| p.catalog.get(id).is_some())
            .map(|p| {
                format!("{} ({})", p.name.as_deref().unwrap_or_default(), p.catalog.flavor.display_name())
            })
            .collect();
        if elsewhere.is_empty() {
            return Ok(());
        }
        let at = if id == name { "" } else { "/operation_id" };
        Err(CallError::invalid_argument(
            at,
            format!(
                "{id} is not an operation of the forge {} ({} {}); it exists on {}: pass forge with one of them",
                picked.name.as_deref().unwrap_or_default(),
                picked.catalog.flavor.display_name(),
                picked.catalog.version.text,
                elsewhere.join(", ")
            ),
        ))
    }

    /// What the server's instructions say of its forges (with profiles): each profile's name,
    /// flavor, address and patterns, and how a call picks one. Said once here, not in every
    /// tool's schema.
    pub(crate) fn instructions(&self) -> Option<String> {
        if !self.named {
            return None;
        }
        let each: Vec<String> = self
            .profiles
            .iter()
            .map(|p| {
                let mut about = vec![format!("{} {}", p.catalog.flavor.display_name(), p.url())];
                if self.default.as_deref() == p.name() {
                    about.push("default".into());
                }
                if let Some(r) = &p.repositories {
                    about.push(format!("repositories {}", r.entries().join(" ")));
                }
                format!("{} ({})", p.name().unwrap_or_default(), about.join("; "))
            })
            .collect();
        let fallback = match self.default.as_deref() {
            Some(d) => format!("else to {d}"),
            None => "else it must name one".into(),
        };
        Some(format!(
            " This server reaches several forges: {}. Every tool takes forge: NAME; without it a call goes to the forge whose repositories match its owner/repo, {fallback}. Results name their forge; resource URIs name it first: gitea://NAME/repos/….",
            each.join(", ")
        ))
    }

    /// Whether `profile` is the default forge: the one `Authorization` carries a forge token
    /// for (the default profile, else the first).
    pub(crate) fn is_default(&self, profile: &ForgeProfile) -> bool {
        std::ptr::eq(profile, self.primary())
    }

    /// The caller on `profile`, or the refusal of a call to a forge the request carries no
    /// credential for: nothing is sent, and no other credential is used instead.
    pub(crate) fn caller_on(&self, profile: &ForgeProfile, caller: &Caller) -> Result<Caller, CallError> {
        caller.on(profile.name(), self.is_default(profile)).ok_or_else(|| {
            let name = profile.name().unwrap_or_default();
            CallError::local(
                ErrorKind::Unauthorized,
                format!(
                    "this request carries no credential for the forge {name} ({}), so nothing was sent to it: a call is never made with another forge's credential or the server's own. Send X-MCP-Forge-Authorization-{name}: token <an access token of {name}> with every request (a header of this server in your MCP client){}",
                    profile.url(),
                    if self.is_default(profile) { ", or Authorization: token <token>" } else { "" }
                ),
            )
        })
    }

    /// The forge a request's identity is established on (who owns its session): the default
    /// forge when it carries a credential for it, else the first that it carries one for.
    pub(crate) fn first_for(&self, caller: &Caller) -> &ForgeProfile {
        let primary = self.primary();
        std::iter::once(primary)
            .chain(self.profiles.iter())
            .find(|p| caller.on(p.name(), self.is_default(p)).is_some())
            .unwrap_or(primary)
    }

    /// The names of every profile (none with one unnamed forge).
    pub(crate) fn names_all(&self) -> impl Iterator<Item = &str> {
        self.profiles.iter().filter_map(|p| p.name()).chain(self.down.iter().map(|d| &*d.name))
    }

    /// Every forge as the discovery tools see it (none with one forge).
    pub(crate) fn views(&self) -> Vec<aegis_core::discovery::Forge<'_>> {
        let named = self.profiles.iter().filter_map(|p| Some((p.name()?, p)));
        named
            .map(|(name, p)| aegis_core::discovery::Forge { name, catalog: &p.catalog, policy: &p.policy })
            .collect()
    }

    /// Whether any forge has answered a request (readiness).
    pub(crate) fn any_answered(&self) -> bool {
        self.profiles.iter().any(|p| p.forge.has_answered())
    }
}

impl Down {
    fn refusal(&self) -> CallError {
        CallError::local(
            ErrorKind::ConnectionFailed,
            format!(
                "the forge {} ({}) could not be served: at start {}; nothing was sent — fix it and restart the server, or pass forge with another",
                self.name, self.url, self.why
            ),
        )
    }
}

impl ForgeProfile {
    /// Start one forge: its client, credential, flavor (asked when `auto`), catalog and policy.
    async fn start(
        name: Option<Arc<str>>,
        settings: Settings,
        repositories: Option<RepoList>,
        metrics: &Metrics,
        state: Option<&crate::state::Store>,
    ) -> Result<ForgeProfile, StartError> {
        let forge = Forge::from_settings(&settings)
            .map_err(StartError)?
            .counted(metrics.forge())
            .with_store(state.cloned(), name.as_deref());
        let credential = global_credential(&settings)?;
        let detected = match settings.flavor {
            FlavorChoice::Auto => Some(detect(&forge, &credential, name.is_some()).await?),
            FlavorChoice::Gitea | FlavorChoice::Forgejo => None,
        };
        let catalog = catalog_for(&settings, detected)?;
        let mut policy = settings.policy();
        policy.forge = forge_host(forge.base()).await;
        let own =
            [&settings.token, &settings.password].into_iter().flatten().map(|s| s.expose_secret().to_owned());
        let mut own: Vec<String> = own.collect();
        if let (Some(user), Some(password)) = (&settings.username, &settings.password) {
            own.push(aegis_core::identity::basic_blob(user, password).expose_secret().to_owned());
        }
        Ok(ForgeProfile {
            secrets: aegis_core::guard::Redactor::new(own),
            name,
            catalog: Arc::new(catalog),
            forge,
            global: GlobalIdentity::new(credential),
            policy,
            sudo_allowed_users: settings.sudo_allowed_users.clone(),
            repositories,
            logins: crate::identity::cache::LoginCache::counted(metrics.identity_cache()),
            authors: Default::default(),
        })
    }

    /// The profile's name, when the server has a profiles file.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The forge's base URL.
    pub(crate) fn url(&self) -> &url::Url {
        self.forge.base()
    }

    /// What the discovery tools see for a request that narrowed the policy so.
    pub fn discovery<'n>(
        &self,
        narrowing: &'n aegis_core::policy::Narrowing,
    ) -> aegis_core::discovery::Discovery<'_, 'n> {
        aegis_core::discovery::Discovery {
            catalog: &self.catalog,
            policy: &self.policy,
            narrowing,
            forges: &[],
        }
    }
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

/// The server's own credential: the token, else the login and password (HTTP Basic), else
/// none (anonymous). The settings never hold both (`config/resolve.rs` refuses that).
pub(crate) fn global_credential(settings: &Settings) -> Result<Credential, StartError> {
    match (&settings.token, &settings.username, &settings.password) {
        (Some(t), _, _) => Credential::token(t).map_err(|e| {
            let which = if settings.has_profiles() { "the profile's token" } else { "GITEA_TOKEN" };
            StartError(format!("{which}: {e}"))
        }),
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
/// whose every call would answer 401 is better not started. A profile's credential is named
/// as the profiles file gives it (`profiled`).
async fn detect(forge: &Forge, credential: &Credential, profiled: bool) -> Result<Version, StartError> {
    let (basic, token, set) = if profiled {
        ("its username and password", "its token", "give the profile a new access token")
    } else {
        (
            "GITEA_USERNAME and GITEA_PASSWORD",
            "GITEA_TOKEN",
            "create a new access token and set GITEA_TOKEN (or unset it to run anonymously)",
        )
    };
    let instead = if profiled { "" } else { " (GITEA_TOKEN)" };
    match flavor::detect(forge, credential).await {
        Ok(probe) if probe.token_refused && credential.mode() == Mode::Basic => Err(StartError(format!(
            "the forge refused {basic} (401): {} {} answers at {}, but does not sign this login in with this password (a login with two-factor authentication cannot use a password here); fix them, or use a token{instead}",
            probe.version.flavor().display_name(),
            probe.version.text,
            forge.base()
        ))),
        Ok(probe) if probe.token_refused => Err(StartError(format!(
            "the forge refused {token} (401): {} {} answers at {}, but not to this token; {set}",
            probe.version.flavor().display_name(),
            probe.version.text,
            forge.base()
        ))),
        Ok(probe) => Ok(probe.version),
        Err(CallError::Result(f)) if f.kind == ErrorKind::Unauthorized => Err(StartError(f.message)),
        Err(e) if profiled => Err(StartError(format!(
            "cannot detect the forge ({e}); fix the profile's url, or give it flavor = \"gitea\" or \"forgejo\" to start without asking"
        ))),
        Err(e) => Err(StartError(format!(
            "cannot detect the forge ({e}); fix the URL, or pass --flavor gitea|forgejo to start without asking"
        ))),
    }
}
