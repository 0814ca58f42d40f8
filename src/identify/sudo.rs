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

use aegis_core::args::sudo::{Allowed, Requested};
use aegis_core::error::{CallError, ErrorKind};

use crate::identity::{Credential, Identity, Mode};

/// Decide a call's sudo once its caller is known (`credential`, `identity`), before anything
/// is sent for it: allowed, the credential that carries the `Sudo` header and the identity
/// that reports it; refused, `denied` with the condition that failed. `allowed` is
/// `SUDO_ALLOWED_USERS`; `is_admin` says whether a credential's user is a site administrator
/// (asked only once the other conditions hold).
pub(crate) async fn authorize(
    allowed: Option<&Allowed>,
    requested: Requested,
    credential: Credential,
    mut identity: Identity,
    is_admin: impl AsyncFnOnce(&Credential) -> Result<bool, CallError>,
) -> Result<(Credential, Identity), CallError> {
    let Some(login) = requested.login()? else {
        return Ok((credential, identity));
    };
    let login = login.as_str();
    let Some(allowed) = allowed else {
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
    match is_admin(&credential).await {
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
