//! Who a call runs as: the credential of a caller and the identity the forge says it
//! belongs to, looked up before anything of the call is sent.
//!
//! The global identity's login is asked once and cached; a per-request token's is asked
//! before its first call and cached by a hash of the token for a short time
//! (`identity/cache.rs`), so that a token the forge refuses fails its call (`unauthorized`,
//! or `identity_failed` when the forge cannot say) and never runs under another identity.
//! Sudo (`sudo.rs`) is decided here too, once the caller is known: it needs the same
//! look-up (whether the caller is a site administrator).
//!
//! This sits above `server` (it reads the server's caches, store and forge client) and below
//! `call`, which runs it as a stage; `doctor` and the HTTP sessions use the same look-ups.

pub(crate) mod sudo;

use secrecy::{ExposeSecret, SecretString};

use crate::executor::flavor::simple_get;
use crate::executor::{Forge, Received, forge_error};
use crate::identity::{Caller, Credential, ForgeUser, Identity, Mode};
use crate::server::At;
use aegis_core::decode::status;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::Redactor;

/// The credential and identity of a caller.
///
/// The global login is resolved once with `GET /api/v1/user` and cached; when that fails (a
/// token scoped without `read:user`, a forge hiccup) the call still runs under the same
/// credential, with `login: null`. A per-request token's login is resolved before the call
/// (cached by a hash of the token for a short time); if that fails the call fails with
/// `identity_failed` (or `unauthorized` for a refused token) and is not made at all.
pub(crate) async fn identify(at: At<'_>, caller: Caller) -> Result<(Credential, Identity), CallError> {
    match at.server.forges.caller_on(at.profile, &caller)? {
        Caller::Global => {
            let credential = at.profile.global.credential.clone();
            let mode = credential.mode();
            let login = if mode == Mode::Anonymous { None } else { global_login(at).await };
            Ok((credential, Identity { login, mode, sudo: None }))
        }
        Caller::Token(token) => {
            let credential = Credential::request_token(&token).map_err(unusable)?;
            let login = per_request_login(at, &token, &credential).await?;
            Ok((credential.clone(), Identity { login: Some(login), mode: credential.mode(), sudo: None }))
        }
        Caller::Granted(grant) => {
            let credential = Credential::bearer(&grant.forge_token).map_err(unusable)?;
            let login = per_request_login(at, &grant.forge_token, &credential).await?;
            Ok((credential, Identity { login: Some(login), mode: Mode::OAuth, sudo: None }))
        }
        // `caller_on` gives one forge's credential, never a set of them.
        Caller::Forges(_) => Err(CallError::local(
            ErrorKind::IdentityFailed,
            "the request's credentials could not be told apart by forge; nothing was sent",
        )),
    }
}

fn unusable(e: crate::identity::InvalidToken) -> CallError {
    CallError::local(ErrorKind::IdentityFailed, format!("the Authorization header's token is unusable: {e}"))
}

/// The login behind a per-request forge token: cached by a hash of the token, else asked. A
/// token the forge refused moments ago is refused again without asking — here, or with a
/// shared store on any replica; one it has never confirmed is asked through the small pool of
/// lookups of unknown tokens, not the forge slots of established callers (`identity/cache.rs`).
async fn per_request_login(
    at: At<'_>,
    token: &SecretString,
    credential: &Credential,
) -> Result<String, CallError> {
    let (server, logins) = (at.server, &at.profile.logins);
    // What the replicas remember a refused token by: with several forges, the forge's name
    // too (a token one forge refused may be another's).
    let refused_key: Vec<u8> = match at.profile.name() {
        Some(forge) => [forge.as_bytes(), b"\0", token.expose_secret().as_bytes()].concat(),
        None => token.expose_secret().as_bytes().to_vec(),
    };
    let refused_key = &refused_key;
    if logins.refused_recently(token) {
        return Err(refused_token());
    }
    let lookup = || async {
        if logins.knows(token) {
            fetch_user(at, credential).await
        } else {
            let Some(_slot) = logins.lookup_slot().await else {
                return Err(CallError::rate_limited(
                    format!(
                        "the server is already asking the forge about {} tokens it has not seen before, its limit for all callers together; nothing was sent — retry after 1 s",
                        crate::identity::cache::LOOKUPS
                    ),
                    1,
                ));
            };
            fetch_user_with_lookup(&at.profile.forge, credential).await
        }
    };
    let resolve = || async {
        // Not in this replica's cache: another replica may have just seen the forge refuse it
        // (a round trip to the store is cheaper than a lookup at the forge).
        let shared = server.state.as_ref();
        if let Some(store) = shared {
            if store.refused(refused_key).await {
                logins.put_refused(token);
                return Err(refused_token());
            }
        }
        let limit = crate::identity::cache::LOOKUP_TIMEOUT.min(server.settings.timeout);
        let got = tokio::time::timeout(limit, lookup()).await.unwrap_or_else(|_| {
            Err(CallError::local(
                ErrorKind::Timeout,
                format!("the forge did not answer within {}s", limit.as_secs_f64()),
            ))
        });
        if matches!(&got, Err(e) if e.kind() == Some(ErrorKind::Unauthorized)) {
            logins.put_refused(token);
            if let Some(store) = shared {
                let keep = crate::identity::cache::REFUSED_FOR;
                store.remember_refused(refused_key, keep).await;
            }
        }
        got
    };
    logins.get_or_resolve(token, resolve).await.map_err(identity_error).map(|u| u.login)
}

/// A token the forge refused: the words a caller acts on.
fn refused_token() -> CallError {
    CallError::Result(aegis_core::error::ToolFailure {
        status: Some(401),
        kind: ErrorKind::Unauthorized,
        message:
            "the forge refused the token of this request (401); check the token in your Authorization header"
                .into(),
        path: None,
        retry_after: None,
    })
}

/// Why a per-request identity could not be established, without the token in any word.
/// The forge's words in it were sanitized with the token already (`fetch_user_with`), and
/// every caller guards the error again with the token known.
fn identity_error(e: CallError) -> CallError {
    match e {
        CallError::Result(f) if f.kind == ErrorKind::Unauthorized => refused_token(),
        // A limit (FORGE_MAX_CONCURRENT, or the forge's own 429) stays what it is: wait and retry.
        CallError::Result(f) if f.kind == ErrorKind::RateLimited => CallError::Result(f),
        CallError::Result(f) => CallError::Result(aegis_core::error::ToolFailure {
            status: f.status,
            kind: ErrorKind::IdentityFailed,
            message: format!(
                "could not establish who this request's token belongs to ({}: {}); the call was not made under any other identity — try again",
                f.kind, f.message
            ),
            path: None,
            retry_after: None,
        }),
        other => other,
    }
}

async fn global_login(at: At<'_>) -> Option<String> {
    let global = &at.profile.global;
    if let Some(l) = global.cached_login() {
        return Some(l.to_owned());
    }
    match fetch_user(at, &global.credential).await {
        Ok(user) => {
            let login = user.login.clone();
            global.remember(user);
            Some(login)
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not resolve the login of the global token; reporting login null");
            None
        }
    }
}

/// `GET /api/v1/user` → `login` and `is_admin`.
pub(crate) async fn fetch_user(at: At<'_>, credential: &Credential) -> Result<ForgeUser, CallError> {
    fetch_user_with(&at.profile.forge, credential).await
}

/// `GET /api/v1/user` → `login` and `is_admin`, with any forge client (`doctor` uses it
/// before a server exists).
pub(crate) async fn fetch_user_with(forge: &Forge, credential: &Credential) -> Result<ForgeUser, CallError> {
    let got = forge.send(&simple_get("/user"), credential).await?;
    user_of(got, credential)
}

/// `fetch_user_with` for a token not yet established: outside the forge slots of established
/// callers (the caller holds a slot of the lookups of unknown tokens).
async fn fetch_user_with_lookup(forge: &Forge, credential: &Credential) -> Result<ForgeUser, CallError> {
    let got = forge.send_lookup(&simple_get("/user"), credential).await?;
    user_of(got, credential)
}

/// The user a `GET /api/v1/user` answered with, or why not.
fn user_of(got: Received, credential: &Credential) -> Result<ForgeUser, CallError> {
    if let Some(kind) = status::kind_for(got.status) {
        let redactor = Redactor::once(credential.secret().map(|s| s.expose_secret()));
        return Err(forge_error(&got, kind, &redactor));
    }
    // Only the login and the admin flag are read (the rest is skipped, not stored); a login
    // is a short name, and it is cached per token, so a longer one is not accepted.
    #[derive(serde::Deserialize)]
    struct User {
        login: Option<String>,
        #[serde(default)]
        is_admin: Option<bool>,
    }
    let user = serde_json::from_slice::<User>(&got.body).ok();
    let is_admin = user.as_ref().and_then(|u| u.is_admin).unwrap_or(false);
    user.and_then(|u| u.login)
        .filter(|l| !l.is_empty() && l.chars().count() <= aegis_core::identity::MAX_LOGIN_CHARS)
        .map(|login| ForgeUser { login, is_admin })
        .ok_or_else(|| {
            CallError::from_forge(
                got.status,
                ErrorKind::UnexpectedStatus,
                "GET /api/v1/user returned no login (or one longer than any forge allows)",
            )
        })
}

/// Whether the user of `credential` is a site administrator: from the user cached with its
/// login (the global identity's, or a per-request token's), else asked again.
pub(crate) async fn is_admin(at: At<'_>, credential: &Credential) -> Result<bool, CallError> {
    let global = &at.profile.global;
    let cached = if credential.header() == global.credential.header() {
        global.cached_user().cloned()
    } else {
        match credential.secret() {
            Some(token) => at.profile.logins.get(token).await,
            None => None,
        }
    };
    match cached {
        Some(user) => Ok(user.is_admin),
        None => fetch_user(at, credential).await.map(|u| u.is_admin),
    }
}
