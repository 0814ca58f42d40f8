//! `doctor`: check the settings against the real forge and say what is wrong in plain
//! words. It first lists the settings given (from the table of settings, `config::Given`:
//! a secret only as set); then each check prints one line: `ok`, `warn` or `FAIL`, and what
//! to do.

use std::process::ExitCode;

use secrecy::ExposeSecret;

use crate::config::{FlavorChoice, Given, Profiles, Settings};
use crate::executor::{Forge, flavor};
use crate::identity::{Credential, Mode};
use aegis_core::catalog::{Catalog, Flavor, Version};
use aegis_core::shape::trust::ContentTrust;

struct Report {
    failed: bool,
}

impl Report {
    fn ok(&self, what: &str) {
        println!("ok    {what}");
    }
    fn warn(&self, what: &str) {
        println!("warn  {what}");
    }
    fn fail(&mut self, what: &str) {
        self.failed = true;
        println!("FAIL  {what}");
    }
    /// The settings given, one a line under the status column; the rest are at their defaults.
    fn settings(&self, given: &[Given]) {
        println!(
            "      settings given (a secret only as set; the others are at their defaults, see --help):"
        );
        for g in given {
            println!("      {g}");
        }
    }
}

/// The profiles file, read and checked at start (a bad one stops every command, this one
/// too): one line per profile, with what it is (never a value). Its forges are not asked yet.
fn profiles_checked(r: &Report, profiles: &Profiles) {
    let default = match &profiles.default {
        Some(name) => format!("default {name}"),
        None => "no default: a call matching no repositories pattern must name its forge".into(),
    };
    r.ok(&format!(
        "profiles file {}: {} profile(s), {default}",
        profiles.path.display(),
        profiles.forges.len()
    ));
    for p in &profiles.forges {
        let flavor = match p.flavor {
            FlavorChoice::Auto => "auto",
            FlavorChoice::Gitea => "gitea",
            FlavorChoice::Forgejo => "forgejo",
        };
        let own = p.own_settings();
        let own = if own.is_empty() { String::new() } else { format!("; its own {}", own.join(", ")) };
        r.ok(&format!("profile {}: {} (flavor {flavor}), {}{own}", p.name, p.url, p.credential.describe()));
    }
    if profiles.default.is_none() {
        r.warn("several profiles and no default: set default = \"<name>\" in the profiles file for calls that name no forge");
    }
}

/// Run every check, after listing the settings `given`; exit 1 when one failed.
pub async fn run(settings: Settings, given: &[Given]) -> ExitCode {
    let mut r = Report { failed: false };
    r.settings(given);
    if let Some(profiles) = &settings.profiles {
        profiles_checked(&r, profiles);
    }
    let url = match settings.forge_url() {
        Ok(u) => u.clone(),
        Err(e) => {
            r.fail(&e.to_string());
            return ExitCode::FAILURE;
        }
    };
    r.ok(&format!("forge URL {url}"));
    let forge = match Forge::from_settings(&settings) {
        Ok(f) => f,
        Err(e) => {
            r.fail(&e);
            return ExitCode::FAILURE;
        }
    };
    let credential = match crate::forges::global_credential(&settings) {
        Ok(c) => c,
        Err(e) => {
            r.fail(&e.to_string());
            Credential::anonymous()
        }
    };
    let basic = credential.mode() == Mode::Basic;
    if credential.mode() == Mode::Anonymous {
        r.warn(
            "no token (GITEA_TOKEN, --token or --token-file) and no login and password (GITEA_USERNAME, GITEA_PASSWORD): only public data is reachable",
        );
    }

    if credential.mode() == Mode::Anonymous && settings.content_trust == ContentTrust::Withhold {
        r.warn(
            "CONTENT_TRUST=withhold without an identity: the forges show who may write to a repository only to a signed-in user, so calls as the server's own identity withhold the text of every author in public repositories",
        );
    }

    let detected: Option<Version> = match flavor::detect(&forge, &credential).await {
        Ok(probe) => {
            let v = probe.version;
            // A refused token is reported by the token check below.
            let asked = match (probe.token_refused, basic) {
                (false, _) => "",
                (true, false) => " (asked without the token, which it refused)",
                (true, true) => " (asked without the login and password, which it refused)",
            };
            r.ok(&format!("{} {} answers at {url}{asked}", v.flavor().display_name(), v.text));
            Some(v)
        }
        Err(e) => {
            r.fail(&format!("GET /api/v1/version: {e}"));
            None
        }
    };
    let flavor = match (settings.flavor, &detected) {
        (FlavorChoice::Gitea, Some(v)) if v.flavor() != Flavor::Gitea => {
            r.fail("--flavor gitea, but the forge is Forgejo: use --flavor forgejo or auto");
            Flavor::Gitea
        }
        (FlavorChoice::Forgejo, Some(v)) if v.flavor() != Flavor::Forgejo => {
            r.fail("--flavor forgejo, but the forge is Gitea: use --flavor gitea or auto");
            Flavor::Forgejo
        }
        (FlavorChoice::Gitea, _) => Flavor::Gitea,
        (FlavorChoice::Forgejo, _) => Flavor::Forgejo,
        (FlavorChoice::Auto, Some(v)) => v.flavor(),
        (FlavorChoice::Auto, None) => Flavor::Gitea,
    };

    let sudo = settings.sudo_allowed_users.is_some();
    if sudo && credential.mode() == Mode::Anonymous {
        r.warn("SUDO_ALLOWED_USERS is set but the server has no identity of its own: sudo is refused to anonymous calls");
    }
    if credential.mode() != Mode::Anonymous {
        match crate::identify::fetch_user_with(&forge, &credential).await {
            Ok(user) => {
                let login = &user.login;
                if basic {
                    r.ok(&format!("signed in as {login} with GITEA_USERNAME and GITEA_PASSWORD"));
                } else {
                    r.ok(&format!("the token belongs to {login}"));
                }
                match (sudo, user.is_admin) {
                    (true, true) => r.ok(&format!(
                        "{login} is a site administrator: calls may act as the users SUDO_ALLOWED_USERS lists"
                    )),
                    (true, false) => r.warn(&format!(
                        "SUDO_ALLOWED_USERS is set but {login} is not a site administrator: every sudo of the server's own identity is refused"
                    )),
                    (false, _) => {}
                }
            }
            Err(e) => match e.kind() {
                Some(aegis_core::error::ErrorKind::Forbidden) if !basic => r.warn(
                    "GET /api/v1/user is forbidden: the token lacks the read:user scope; calls work, results report login null",
                ),
                Some(aegis_core::error::ErrorKind::Unauthorized) if basic => r.fail(
                    "the forge refused GITEA_USERNAME and GITEA_PASSWORD (401): check them (a login with two-factor authentication cannot use a password here), or use a token",
                ),
                Some(aegis_core::error::ErrorKind::Unauthorized) => {
                    r.fail("the forge refused the token (401): create a new access token and set GITEA_TOKEN")
                }
                _ => r.fail(&format!("GET /api/v1/user: {e}")),
            },
        }
    }

    let spec: &'static [u8] = match aegis_core::catalog::spec::bytes(settings.spec.as_deref(), flavor) {
        Ok(b) => b,
        Err(why) => {
            r.fail(&why);
            &[]
        }
    };
    if !spec.is_empty() {
        match Catalog::build(spec, flavor, detected.clone()) {
            Ok(c) => {
                let policy = settings.policy();
                let none = aegis_core::policy::Narrowing::default();
                r.ok(&format!(
                    "{} tools from the {} {} spec; tools/list shows {} of them (TOOLSETS, READ_ONLY, ENABLED_TOOLS, DISABLED_TOOLS), the discovery tools reach the other allowed ones",
                    c.all_tools().count(),
                    flavor.display_name(),
                    c.spec_version,
                    c.all_tools().filter(|t| policy.lists(&none, t)).count(),
                ));
                for (name, why) in c.uncompilable() {
                    r.fail(&format!("{name}: {why}; calls to it are refused"));
                }
                for (setting, names) in
                    [("DISABLED_TOOLS", &settings.disabled_tools), ("ENABLED_TOOLS", &settings.enabled_tools)]
                {
                    let unknown: Vec<&String> = names.iter().filter(|n| c.get(n).is_none()).collect();
                    if !unknown.is_empty() {
                        r.warn(&format!("{setting} names tools this forge does not have: {unknown:?}"));
                    }
                }
                if let Some(v) = &detected {
                    if v.flavor() == flavor
                        && settings.spec.is_none()
                        && v.numbers.0 != Version::parse(&c.spec_version).map(|s| s.numbers.0).unwrap_or(0)
                    {
                        r.warn(&format!("the forge runs {} while the tools come from the {} spec: some tools may not exist there", v.text, c.spec_version));
                    }
                }
            }
            Err(e) => r.fail(&format!("the spec does not generate tools: {e}")),
        }
    }
    flow_checks(&mut r, &settings);
    if let Some(oauth) = &settings.oauth {
        oauth_checks(&mut r, &forge, oauth).await;
    }
    if let Some(state) = &settings.state {
        match crate::state::Store::connect(state, Default::default()) {
            Err(e) => r.fail(&e),
            Ok(store) => match store.probe().await {
                Err(why) => r.fail(&why),
                Ok(warnings) => {
                    r.ok(&format!("the shared store at {} answers", state.url));
                    warnings.iter().for_each(|w| r.warn(w));
                }
            },
        }
    }
    if settings.mcp_bearer_token.as_ref().is_some_and(|t| t.expose_secret().len() < 16) {
        r.warn("MCP_BEARER_TOKEN is shorter than 16 characters: use a long random value");
    }
    if r.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// Sign-in with the forge: ask the forge's token endpoint to exchange a code that does not
/// exist, with this server's client id, secret and callback. The forge checks them in that
/// order before the code, so its answer says which one is wrong — or that all three are right.
async fn oauth_checks(r: &mut Report, forge: &Forge, oauth: &crate::config::OAuthSettings) {
    let callback = format!("{}{}", oauth.public_url, crate::oauth::CALLBACK_PATH);
    let public_is_local = url::Url::parse(&oauth.public_url)
        .is_ok_and(|u| matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")));
    if oauth.public_url.starts_with("http://") && !public_is_local {
        r.warn(&format!(
            "MCP_PUBLIC_URL {} is plain http: tokens would cross the network unencrypted; serve it over https",
            oauth.public_url
        ));
    }
    let form = [
        ("grant_type", "authorization_code"),
        ("code", "aegis-doctor-probe"),
        ("redirect_uri", callback.as_str()),
        ("client_id", oauth.client_id.as_str()),
        ("client_secret", oauth.client_secret.expose_secret()),
    ];
    let (status, body) = match forge.oauth_token_endpoint(&form).await {
        Ok(answer) => answer,
        Err(why) => {
            r.fail(&format!("the forge's OAuth2 token endpoint (/login/oauth/access_token): {why}"));
            return;
        }
    };
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let error = answer["error"].as_str().unwrap_or("");
    let description = answer["error_description"].as_str().unwrap_or("").to_ascii_lowercase();
    if error == "invalid_client" || description.contains("cannot load client") {
        r.fail(&format!(
            "the forge has no OAuth2 application with GITEA_OAUTH_CLIENT_ID {}: create one (Settings → Applications) with the redirect URI {callback}",
            oauth.client_id
        ));
    } else if description.contains("client secret") {
        r.fail("the forge refused GITEA_OAUTH_CLIENT_SECRET for this application: copy the secret again (or regenerate it) on the forge");
    } else if description.contains("redirect uri") {
        r.fail(&format!(
            "the forge's OAuth2 application does not allow the redirect URI {callback}: add it to the application on the forge (it must match MCP_PUBLIC_URL)"
        ));
    } else if (400..500).contains(&status) && !error.is_empty() {
        r.ok(&format!(
            "sign-in with the forge: the OAuth2 application {} accepts this server's secret and redirect URI {callback}",
            oauth.client_id
        ));
    } else {
        r.fail(&format!(
            "the forge's OAuth2 token endpoint answered {status} without an OAuth error: is OAuth2 enabled on the forge ([oauth2] ENABLED)?"
        ));
    }
}

/// What the flow guard does with a write that widens what its session read.
fn flow_checks(r: &mut Report, settings: &Settings) {
    use aegis_core::policy::flow::FlowGuard;
    let window = settings.flow_window.as_secs();
    match settings.flow_guard {
        FlowGuard::Off => r.warn(
            "FLOW_GUARD=off: a session that read a private repository can publish it (a comment on a public issue, a webhook) without a person",
        ),
        guard => r.ok(&format!(
            "FLOW_GUARD={}: a write that would carry private content read in its session where more people see it is {} (over stateless HTTP, the reads of the last {window} s count: FLOW_WINDOW)",
            guard.as_str(),
            if guard == FlowGuard::Ask { "asked of the person" } else { "refused" }
        )),
    }
}
