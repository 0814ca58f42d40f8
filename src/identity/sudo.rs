//! Sudo: one call made as another forge user, by a caller who is a site administrator.
//!
//! Both forges let a site administrator act as any user by sending `Sudo: <login>`. The
//! server offers that as an optional `sudo` argument of every operation tool, the raw tool
//! and the call tool, only when `SUDO_ALLOWED_USERS` is set (otherwise the argument is
//! unknown and refused like any other), and decides each call itself before the forge hears
//! of it: the caller must be signed in, the login must be listed (or the list be `*`), and
//! the caller must be a site administrator (`is_admin` of `GET /api/v1/user`, cached with its
//! login). The argument leaves the arguments before they are checked (`take`) — it is a
//! header, never a parameter — and only the executor sends the header, from the credential
//! `authorize` returns. The envelope reports the login in `identity.sudo`; `identity.login`
//! stays the caller's.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{Credential, Identity, Mode};
use crate::call::{MAX_LOGIN_CHARS, fetch_user};
use crate::catalog::{Catalog, Target};
use crate::error::{CallError, ErrorKind};
use crate::server::Server;

/// The argument's name.
pub const ARGUMENT: &str = "sudo";

/// `SUDO_ALLOWED_USERS`: who calls may act as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// `*`: any user.
    Any,
    /// These logins, lower-case (the forges match logins regardless of letter case).
    Logins(BTreeSet<String>),
}

impl Allowed {
    /// Parse the setting: comma-separated logins, or `*` alone. Nothing but commas and white
    /// space is no setting at all.
    pub fn parse(text: &str) -> Result<Option<Allowed>, String> {
        let entries: Vec<&str> = text.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        if entries.is_empty() {
            return Ok(None);
        }
        if entries.contains(&"*") {
            if entries.len() > 1 {
                return Err("`*` allows any user: give it alone, or list logins without it".into());
            }
            return Ok(Some(Allowed::Any));
        }
        if let Some(bad) = entries.iter().find(|e| !is_login(e)) {
            return Err(format!(
                "{bad:?} is not a login (letters, digits, '-', '_' and '.'; at most {MAX_LOGIN_CHARS} characters)"
            ));
        }
        Ok(Some(Allowed::Logins(entries.iter().map(|e| e.to_lowercase()).collect())))
    }

    /// Whether calls may act as `login`.
    pub fn lists(&self, login: &str) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Logins(logins) => logins.contains(&login.to_lowercase()),
        }
    }
}

/// Why a query parameter named `sudo` is never sent: the forges read `?sudo=` as "act as
/// this user" (in any spec, whatever it calls the parameter), and only the `sudo` argument,
/// which `authorize` judges, may ask that.
pub fn query_refusal() -> CallError {
    CallError::local(
        ErrorKind::Denied,
        "a query parameter `sudo` is never sent: the forge would act as that user unchecked; acting as another user goes only through the tool's own `sudo` argument (see SUDO_ALLOWED_USERS)",
    )
}

/// Whether a query parameter name is the forges' `sudo` (matched in any letter case, to be safe).
pub fn is_query_sudo(name: &str) -> bool {
    name.eq_ignore_ascii_case(ARGUMENT)
}

/// What the forges accept as a login: ASCII letters, digits, `-`, `_` and `.`. Such a value
/// is also always a valid header value.
fn is_login(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LOGIN_CHARS
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The `sudo` a call asked for, taken out of its arguments: the tool's own, and for the call
/// tool also the one inside `arguments`, where the operation's schema shows it.
#[derive(Debug, Default)]
pub struct Requested {
    own: Option<Value>,
    inner: Option<Value>,
}

/// Take `sudo` out of the arguments of tool `name`, when the tool offers it (which it does
/// only with `SUDO_ALLOWED_USERS` set). Anything else is left for the schema to judge.
pub fn take(catalog: &Catalog, name: &str, args: &mut Map<String, Value>) -> Requested {
    let Some(tool) = catalog.get(name).filter(|t| t.offers_sudo) else {
        return Requested::default();
    };
    let own = args.remove(ARGUMENT);
    let inner = match tool.target {
        Target::CallOperation => {
            let target = args.get("operation_id").and_then(Value::as_str).and_then(|id| catalog.get(id));
            match (target.is_some_and(|t| t.offers_sudo), args.get_mut("arguments")) {
                (true, Some(Value::Object(a))) => a.remove(ARGUMENT),
                _ => None,
            }
        }
        _ => None,
    };
    Requested { own, inner }
}

/// Decide a call's sudo once its caller is known (`credential`, `identity`), before anything
/// is sent for it: allowed, the credential that carries the `Sudo` header and the identity
/// that reports it; refused, `denied` with the condition that failed.
pub async fn authorize(
    server: &Server,
    requested: Requested,
    credential: Credential,
    mut identity: Identity,
) -> Result<(Credential, Identity), CallError> {
    let value = match (requested.own, requested.inner) {
        (None, None) => return Ok((credential, identity)),
        (Some(a), Some(b)) if a != b => {
            return Err(CallError::invalid_argument(
                "/sudo",
                "`sudo` is given twice with different values (beside `arguments` and inside it); give it once",
            ));
        }
        (Some(v), _) | (None, Some(v)) => v,
    };
    let login = value.as_str().filter(|l| is_login(l)).ok_or_else(|| {
        CallError::invalid_argument(
            "/sudo",
            format!(
                "`sudo` must be a login: letters, digits, '-', '_' and '.', at most {MAX_LOGIN_CHARS} characters"
            ),
        )
    })?;
    let Some(allowed) = &server.settings.sudo_allowed_users else {
        // Not reached: without the setting no tool offers the argument.
        return Err(CallError::invalid_argument(
            "/sudo",
            "unknown argument `sudo`: SUDO_ALLOWED_USERS is not set",
        ));
    };
    let denied = |why: String| Err(CallError::local(ErrorKind::Denied, why));
    if identity.mode == Mode::Anonymous {
        return denied(
            "sudo needs a signed-in caller who is a site administrator, and this call would run anonymously (the server has neither GITEA_TOKEN nor GITEA_USERNAME and GITEA_PASSWORD); nothing was sent".into(),
        );
    }
    if !allowed.lists(login) {
        return denied(
            "SUDO_ALLOWED_USERS does not list the user named in `sudo`, so this server does not act as that user; nothing was sent".into(),
        );
    }
    let caller = identity.login.as_deref().map(|l| format!(" ({l})")).unwrap_or_default();
    match is_admin(server, &credential).await {
        Ok(true) => {}
        Ok(false) => {
            return denied(format!(
                "the caller{caller} is not a site administrator, and only a site administrator may act as another user; nothing was sent"
            ));
        }
        Err(e) => {
            return denied(format!(
                "could not establish whether the caller{caller} is a site administrator ({}), so sudo was refused; nothing was sent",
                e
            ));
        }
    }
    let credential = credential
        .acting_as(login)
        .map_err(|_| CallError::invalid_argument("/sudo", "`sudo` cannot be sent as a header value"))?;
    identity.sudo = Some(login.to_owned());
    Ok((credential, identity))
}

/// Whether the user of `credential` is a site administrator: from the user cached with its
/// login (the global identity's, or a per-request token's), else asked again.
async fn is_admin(server: &Server, credential: &Credential) -> Result<bool, CallError> {
    let cached = if credential.header() == server.global.credential.header() {
        server.global.cached_user().cloned()
    } else {
        credential.secret().and_then(|token| server.logins.get(token))
    };
    match cached {
        Some(user) => Ok(user.is_admin),
        None => fetch_user(server, credential).await.map(|u| u.is_admin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_lists_logins_in_any_case_or_anyone() {
        let a = Allowed::parse(" Bob, carol ,,").unwrap().unwrap();
        assert!(a.lists("bob") && a.lists("BOB") && a.lists("Carol"));
        assert!(!a.lists("alice") && !a.lists("bo"));
        assert_eq!(Allowed::parse("*").unwrap(), Some(Allowed::Any));
        assert!(Allowed::parse(" * ").unwrap().unwrap().lists("anyone"));
        assert_eq!(Allowed::parse(" , ").unwrap(), None);
        assert!(Allowed::parse("*,bob").unwrap_err().contains("alone"));
        assert!(Allowed::parse("bob smith").unwrap_err().contains("not a login"));
    }

    #[test]
    fn a_login_is_what_the_forges_accept() {
        for ok in ["bob", "a.b-c_d", "X9"] {
            assert!(is_login(ok), "{ok}");
        }
        for bad in ["", "a b", "a:b", "a\nb", "é", "a,b", &"x".repeat(MAX_LOGIN_CHARS + 1)] {
            assert!(!is_login(bad), "{bad:?}");
        }
    }
}
