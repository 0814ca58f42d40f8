//! `doctor`: check the settings against the real forge and say what is wrong in plain
//! words. It first lists the settings given (from the table of settings, `config::Given`:
//! a secret only as set); then each check prints one line: `ok`, `warn` or `FAIL`, and what
//! to do.
//!
//! With a profiles file, the checks of one forge (`forge_checks`) run once per profile, with
//! that profile's settings, all at once: a forge that is down, or that refuses its profile's
//! token, is reported as such and holds up none of the others, as `serve` keeps serving the
//! others. The last line says which profiles are ready.

use std::process::ExitCode;

use secrecy::ExposeSecret;

use crate::config::{FlavorChoice, Given, Profile, ProfileCredential, Profiles, Settings};
use crate::executor::{Forge, flavor};
use crate::identity::{Credential, Mode};
use aegis_core::catalog::{Catalog, Flavor, Version};
use aegis_core::shape::trust::ContentTrust;

/// The lines of the checks, printed as they come; or held, for a profile checked beside the
/// others and printed with them in the file's order.
struct Report {
    failed: bool,
    /// The first failure, for the last line's "not ready: NAME (why)".
    first_failure: Option<String>,
    held: Option<Vec<String>>,
}

impl Report {
    fn printing() -> Report {
        Report { failed: false, first_failure: None, held: None }
    }
    fn holding() -> Report {
        Report { held: Some(Vec::new()), ..Report::printing() }
    }
    fn line(&mut self, status: &str, what: &str) {
        let line = format!("{status:<6}{what}");
        match &mut self.held {
            Some(lines) => lines.push(line),
            None => println!("{line}"),
        }
    }
    fn ok(&mut self, what: &str) {
        self.line("ok", what);
    }
    fn warn(&mut self, what: &str) {
        self.line("warn", what);
    }
    fn fail(&mut self, what: &str) {
        self.failed = true;
        self.first_failure.get_or_insert_with(|| what.to_owned());
        self.line("FAIL", what);
    }
    /// The settings given, one a line under the status column; the rest are at their defaults.
    fn settings(&mut self, given: &[Given]) {
        self.line("", "settings given (a secret only as set; the others are at their defaults, see --help):");
        for g in given {
            self.line("", &g.to_string());
        }
    }
}

/// What the forge checks are about: the one forge of the environment settings, or a profile
/// of the profiles file. Their words name the settings a person would change: `GITEA_TOKEN`
/// for the one, the profile's own keys for the other.
#[derive(Clone, Copy)]
enum Checked<'p> {
    Environment,
    Profile(&'p Profile),
}

impl Checked<'_> {
    fn no_credential(self) -> &'static str {
        match self {
            Checked::Environment => {
                "no token (GITEA_TOKEN, --token or --token-file) and no login and password (GITEA_USERNAME, GITEA_PASSWORD): only public data is reachable"
            }
            Checked::Profile(_) => {
                "no credential (token_env, token_file, or username with password_env or password_file): only public data is reachable"
            }
        }
    }
    /// The words for a flavor chosen (`chosen`) that the forge is not (`is`).
    fn flavor_mismatch(self, chosen: &str, is: Flavor) -> String {
        let (is_name, is) = (is.display_name(), is.as_str());
        match self {
            Checked::Environment => {
                format!("--flavor {chosen}, but the forge is {is_name}: use --flavor {is} or auto")
            }
            Checked::Profile(p) => format!(
                "flavor = \"{chosen}\", but the forge is {is_name}: set flavor = \"{is}\" or \"auto\" in the profile {}",
                p.name
            ),
        }
    }
    /// The setting that gives the sudo users.
    fn sudo_setting(self) -> &'static str {
        match self {
            Checked::Profile(p) if p.sudo_allowed_users.is_some() => "sudo_allowed_users",
            _ => "SUDO_ALLOWED_USERS",
        }
    }
    /// Where a login and password come from.
    fn basic(self) -> String {
        match self {
            Checked::Environment => "GITEA_USERNAME and GITEA_PASSWORD".into(),
            Checked::Profile(p) => match &p.credential {
                ProfileCredential::Basic { from, .. } => {
                    format!("its username and password (username and {from} of the profile {})", p.name)
                }
                _ => format!("the username and password of the profile {}", p.name),
            },
        }
    }
    /// What to do with a token the forge refused.
    fn new_token(self) -> String {
        match self {
            Checked::Environment => "create a new access token and set GITEA_TOKEN".into(),
            Checked::Profile(p) => match &p.credential {
                ProfileCredential::TokenEnv { variable, .. } => {
                    format!(
                        "create a new access token and set {variable} (token_env of the profile {})",
                        p.name
                    )
                }
                ProfileCredential::TokenFile { path, .. } => format!(
                    "create a new access token and write it to {} (token_file of the profile {})",
                    path.display(),
                    p.name
                ),
                _ => format!("give the profile {} a new access token", p.name),
            },
        }
    }
}

/// The profiles file, read and checked at start (a bad one stops every command, this one
/// too): one line per profile, with what it is (never a value).
fn profiles_checked(r: &mut Report, profiles: &Profiles) {
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

/// Run every check, after listing the settings `given`; exit 1 when one failed. With a
/// profiles file, the server-wide checks once, then each profile's forge (see `profiled`).
pub async fn run(settings: Settings, given: &[Given]) -> ExitCode {
    let mut r = Report::printing();
    r.settings(given);
    if let Some(profiles) = settings.profiles.clone() {
        return profiled(r, &settings, &profiles).await;
    }
    let Some(forge) = forge_checks(&mut r, &settings, Checked::Environment).await else {
        return ExitCode::FAILURE;
    };
    flow_checks(&mut r, &settings);
    if let Some(oauth) = &settings.oauth {
        oauth_checks(&mut r, &forge, oauth).await;
    }
    server_checks(&mut r, &settings).await;
    if r.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// With a profiles file: the profiles as read, the server-wide checks, then each profile's
/// forge checked with its own settings (`Settings::for_profile`). The profiles are checked at
/// once, each bounded by the forge timeouts (`GITEA_CONNECT_TIMEOUT`, `GITEA_TIMEOUT`), so a
/// forge that is down delays none of the others; their lines are printed in the file's order,
/// each under its name. The last line names the profiles that are ready and those that are
/// not, with the first reason; exit 1 when one is not (as `serve` would refuse its calls).
async fn profiled(mut r: Report, settings: &Settings, profiles: &Profiles) -> ExitCode {
    profiles_checked(&mut r, profiles);
    flow_checks(&mut r, settings);
    server_checks(&mut r, settings).await;
    let checks = profiles.forges.iter().map(|p| async move {
        let own = settings.for_profile(p);
        let mut held = Report::holding();
        if let Some(forge) = forge_checks(&mut held, &own, Checked::Profile(p)).await {
            // Sign-in with this forge: its own application, checked at its own callback.
            if let Some(oauth) = &own.oauth {
                oauth_checks(&mut held, &forge, oauth).await;
            }
        }
        held
    });
    let checked = futures::future::join_all(checks).await;
    let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
    for (p, held) in profiles.forges.iter().zip(checked) {
        r.line("", &format!("profile {}:", p.name));
        held.held.iter().flatten().for_each(|line| println!("{line}"));
        match held.first_failure {
            None => ready.push(p.name.as_str()),
            // What failed first, without its advice, which its section above gives.
            Some(why) => not_ready.push(format!("{} ({})", p.name, why.split("; ").next().unwrap_or(&why))),
        }
    }
    match (not_ready.is_empty(), ready.is_empty()) {
        (true, _) => r.ok(&format!("ready: {}", ready.join(", "))),
        (false, true) => r.fail(&format!("not ready: {}", not_ready.join(", "))),
        (false, false) => {
            r.fail(&format!("not ready: {}; ready: {}", not_ready.join(", "), ready.join(", ")))
        }
    }
    if r.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// The checks of one forge with `settings` (the environment's, or a profile's): its URL,
/// flavor and version, credential and login, sudo, and the tools of its spec. The forge's
/// client, for the checks that follow; `None` when there is none to ask.
async fn forge_checks(r: &mut Report, settings: &Settings, checked: Checked<'_>) -> Option<Forge> {
    let url = match settings.forge_url() {
        Ok(u) => u.clone(),
        Err(e) => {
            r.fail(&e.to_string());
            return None;
        }
    };
    r.ok(&format!("forge URL {url}"));
    let forge = match Forge::from_settings(settings) {
        Ok(f) => match checked {
            Checked::Environment => f,
            Checked::Profile(p) => f.with_store(None, Some(&p.name)),
        },
        Err(e) => {
            r.fail(&e);
            return None;
        }
    };
    let credential = match crate::forges::global_credential(settings) {
        Ok(c) => c,
        Err(e) => {
            r.fail(&e.to_string());
            Credential::anonymous()
        }
    };
    let basic = credential.mode() == Mode::Basic;
    if credential.mode() == Mode::Anonymous {
        r.warn(checked.no_credential());
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
            r.fail(&checked.flavor_mismatch("gitea", v.flavor()));
            Flavor::Gitea
        }
        (FlavorChoice::Forgejo, Some(v)) if v.flavor() != Flavor::Forgejo => {
            r.fail(&checked.flavor_mismatch("forgejo", v.flavor()));
            Flavor::Forgejo
        }
        (FlavorChoice::Gitea, _) => Flavor::Gitea,
        (FlavorChoice::Forgejo, _) => Flavor::Forgejo,
        (FlavorChoice::Auto, Some(v)) => v.flavor(),
        (FlavorChoice::Auto, None) => Flavor::Gitea,
    };

    let sudo = settings.sudo_allowed_users.is_some();
    let sudo_setting = checked.sudo_setting();
    if sudo && credential.mode() == Mode::Anonymous {
        r.warn(&format!(
            "{sudo_setting} is set but the server has no identity of its own: sudo is refused to anonymous calls"
        ));
    }
    if credential.mode() != Mode::Anonymous {
        match crate::identify::fetch_user_with(&forge, &credential).await {
            Ok(user) => {
                let login = &user.login;
                if basic {
                    r.ok(&format!("signed in as {login} with {}", checked.basic()));
                } else {
                    r.ok(&format!("the token belongs to {login}"));
                }
                match (sudo, user.is_admin) {
                    (true, true) => r.ok(&format!(
                        "{login} is a site administrator: calls may act as the users {sudo_setting} lists"
                    )),
                    (true, false) => r.warn(&format!(
                        "{sudo_setting} is set but {login} is not a site administrator: every sudo of the server's own identity is refused"
                    )),
                    (false, _) => {}
                }
            }
            Err(e) => match e.kind() {
                Some(aegis_core::error::ErrorKind::Forbidden) if !basic => r.warn(
                    "GET /api/v1/user is forbidden: the token lacks the read:user scope; calls work, results report login null",
                ),
                Some(aegis_core::error::ErrorKind::Unauthorized) if basic => r.fail(&format!(
                    "the forge refused {} (401): check them (a login with two-factor authentication cannot use a password here), or use a token",
                    checked.basic()
                )),
                Some(aegis_core::error::ErrorKind::Unauthorized) => {
                    r.fail(&format!("the forge refused the token (401): {}", checked.new_token()))
                }
                _ => r.fail(&format!("GET /api/v1/user: {e}")),
            },
        }
    }

    // A profile whose flavor is neither set nor told is not served (`forges.rs`): no tools to count.
    if matches!(checked, Checked::Profile(_)) && settings.flavor == FlavorChoice::Auto && detected.is_none() {
        return Some(forge);
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
    Some(forge)
}

/// The checks that belong to the server, not to a forge: the shared store and the bearer
/// token of HTTP.
async fn server_checks(r: &mut Report, settings: &Settings) {
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
}

/// Sign-in with the forge: ask the forge's token endpoint to exchange a code that does not
/// exist, with this server's client id, secret and callback. The forge checks them in that
/// order before the code, so its answer says which one is wrong — or that all three are right.
async fn oauth_checks(r: &mut Report, forge: &Forge, oauth: &crate::config::OAuthSettings) {
    let public_is_local = url::Url::parse(&oauth.public_url)
        .is_ok_and(|u| matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")));
    if oauth.public_url.starts_with("http://") && !public_is_local {
        r.warn(&format!(
            "MCP_PUBLIC_URL {} is plain http: tokens would cross the network unencrypted; serve it over https",
            oauth.public_url
        ));
    }
    for app in &oauth.apps {
        app_checks(r, forge, &oauth.public_url, app).await;
    }
}

/// One forge's OAuth2 application, at its own callback.
async fn app_checks(r: &mut Report, forge: &Forge, public_url: &str, app: &crate::config::SignInApp) {
    let callback = format!("{public_url}{}", crate::oauth::callback_path(app.profile.as_deref()));
    let form = [
        ("grant_type", "authorization_code"),
        ("code", "aegis-doctor-probe"),
        ("redirect_uri", callback.as_str()),
        ("client_id", app.client_id.as_str()),
        ("client_secret", app.client_secret.expose_secret()),
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
            "the forge has no OAuth2 application with {} {}: create one (Settings → Applications) with the redirect URI {callback}",
            app.id_setting(),
            app.client_id
        ));
    } else if description.contains("client secret") {
        r.fail(&format!("the forge refused {} for this application: copy the secret again (or regenerate it) on the forge", app.secret_setting()));
    } else if description.contains("redirect uri") {
        r.fail(&format!(
            "the forge's OAuth2 application does not allow the redirect URI {callback}: add it to the application on the forge (it must match MCP_PUBLIC_URL)"
        ));
    } else if (400..500).contains(&status) && !error.is_empty() {
        r.ok(&format!(
            "sign-in with the forge: the OAuth2 application {} accepts this server's secret and redirect URI {callback}",
            app.client_id
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
