//! The running server's shared, read-only state: settings, catalog, forge client, the
//! global identity and the guard. Built once by `Server::start`; every call borrows it.

use std::sync::Arc;
use std::time::Instant;

use crate::catalog::{Catalog, Flavor, Method, Target, ToolDef, Version};
use crate::config::{FlavorChoice, Settings};
use crate::executor::{Forge, flavor};
use crate::guard::Guard;
use crate::identity::{Credential, GlobalIdentity};

/// Everything a call needs besides its arguments.
#[derive(Debug)]
pub struct Server {
    pub settings: Settings,
    pub catalog: Arc<Catalog>,
    pub forge: Forge,
    pub global: GlobalIdentity,
    /// Redaction, masking and bounds of every result.
    pub guard: Guard,
    /// Tool calls running right now (graceful shutdown waits for them).
    pub in_flight: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Logins of per-request tokens (HTTP), by a hash of the token.
    pub logins: crate::identity::cache::LoginCache,
    /// How long building the catalog took (spec parse, schemas, validators).
    pub catalog_build: std::time::Duration,
}

/// Why the server could not start, in words a person can act on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StartError(pub String);

impl Server {
    /// Build the server: HTTP client, credential, flavor (asking the forge when `auto`),
    /// spec, catalog. The only network access is the version probe of `--flavor auto`.
    pub async fn start(settings: Settings) -> Result<Server, StartError> {
        let forge = Forge::from_settings(&settings).map_err(StartError)?;
        let credential = match &settings.token {
            Some(t) => Credential::token(t).map_err(|e| StartError(format!("GITEA_TOKEN: {e}")))?,
            None => Credential::anonymous(),
        };
        let (flavor, version) = match settings.flavor {
            FlavorChoice::Gitea => (Flavor::Gitea, None),
            FlavorChoice::Forgejo => (Flavor::Forgejo, None),
            FlavorChoice::Auto => {
                let v: Version = flavor::detect(&forge, &credential)
                    .await
                    .map_err(|e| {
                        StartError(format!(
                            "cannot detect the forge ({e}); fix the URL, or pass --flavor gitea|forgejo to start without asking"
                        ))
                    })?;
                (v.flavor(), Some(v))
            }
        };
        let spec_bytes: std::borrow::Cow<'static, [u8]> = match &settings.spec {
            Some(path) => std::fs::read(path)
                .map_err(|e| StartError(format!("cannot read the spec {}: {}", path.display(), e.kind())))?
                .into(),
            None => flavor.embedded_spec().into(),
        };
        let started = Instant::now();
        let catalog = Catalog::build(&spec_bytes, flavor, version)
            .map_err(|e| StartError(format!("cannot generate tools from the spec: {e}")))?;
        let catalog_build = started.elapsed();
        if settings.extra_secrets.iter().any(|s| secrecy::ExposeSecret::expose_secret(s).chars().count() < 4)
        {
            tracing::warn!(
                "an EXTRA_SECRETS value is shorter than 4 characters: every occurrence in every result will be redacted"
            );
        }
        Ok(Server {
            guard: Guard::from_settings(&settings),
            global: GlobalIdentity::new(credential),
            catalog: Arc::new(catalog),
            forge,
            settings,
            catalog_build,
            logins: Default::default(),
            in_flight: Default::default(),
        })
    }

    /// Why a tool is neither offered nor callable under the current settings, if it is not:
    /// `READ_ONLY` removes every operation that is not a GET, `ENABLED_TOOLS` keeps only the
    /// tools it names, `DISABLED_TOOLS` removes the ones it names.
    /// `args` matter only for the raw tool, whose method decides whether it writes.
    pub fn refusal(
        &self,
        tool: &ToolDef,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<String> {
        let s = &self.settings;
        let name = tool.name.as_str();
        if s.disabled_tools.contains(name) {
            return Some(format!("the tool {name} is disabled on this server (DISABLED_TOOLS)"));
        }
        if !s.enabled_tools.is_empty() && !s.enabled_tools.contains(name) {
            return Some(format!(
                "the tool {name} is not among the tools this server offers (ENABLED_TOOLS)"
            ));
        }
        if s.read_only {
            if tool.operation().is_some_and(|op| op.method != Method::Get) {
                return Some(format!("the server is read-only (READ_ONLY): {name} would change data"));
            }
            if matches!(tool.target, Target::Raw) {
                let method = args.get("method").and_then(serde_json::Value::as_str).unwrap_or("GET");
                if !method.eq_ignore_ascii_case("GET") {
                    return Some(format!(
                        "the server is read-only (READ_ONLY): {name} accepts only GET, not {method:?}"
                    ));
                }
            }
        }
        None
    }

    /// Whether a tool is offered under the current settings (before any arguments).
    pub fn enabled(&self, tool: &ToolDef) -> bool {
        self.refusal(tool, &serde_json::Map::new()).is_none()
    }
}
