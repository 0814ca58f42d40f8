//! Which forge answers at the URL: `GET /api/v1/version`.
//!
//! Both forges tell their version without a token, but refuse a token they do not know (or a
//! wrong password) on every route, `/version` too (401). So when the forge refuses the token, the
//! version is asked again without it. When `/api/v1/version` still gives no version (refused to
//! everyone, or hidden by a proxy that answers 403 or 404 for it), Forgejo's own
//! `/api/forgejo/v1/version` is asked the same way: Gitea has no such route. The probe says that
//! the token was refused (at either route), so that `serve` and `doctor` say so plainly instead
//! of doubting the URL.

use crate::executor::Received;
use crate::identity::{Credential, Mode};
use aegis_core::args::{CallPlan, Root};
use aegis_core::catalog::Version;
use aegis_core::decode::status;
use aegis_core::error::{CallError, ErrorKind};

use super::Forge;

/// What the version probe learned.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) version: Version,
    /// The forge refused the credential (401); the version came from asking without it.
    pub(crate) token_refused: bool,
}

/// Where Forgejo serves its version outside `/api/v1` (Gitea has no such route).
const FORGEJO_VERSION: &str = "/api/forgejo/v1/version";

/// Ask the forge for its version. A Forgejo version reveals itself (`X+gitea-Y`).
pub(crate) async fn detect(forge: &Forge, credential: &Credential) -> Result<Probe, CallError> {
    let (got, mut token_refused) = ask(forge, &simple_get("/version"), credential).await?;
    let error = match read_version(forge, &got) {
        Ok(version) => return Ok(Probe { version, token_refused }),
        Err(e) => e,
    };
    // A credential the forge refused is not sent again. Only an answer that carries a version
    // counts; a refusal here is kept, any other failure leaves the words of the first answer.
    let again = if token_refused { &Credential::anonymous() } else { credential };
    if let Ok((own, refused_there)) = ask(forge, &site_get(FORGEJO_VERSION), again).await {
        token_refused |= refused_there;
        if let Ok(version) = read_version(forge, &own) {
            return Ok(Probe { version, token_refused });
        }
    }
    let (who, fix) = if credential.mode() == Mode::Basic {
        ("GITEA_USERNAME and GITEA_PASSWORD", "fix them")
    } else {
        ("GITEA_TOKEN", "create a new access token and set GITEA_TOKEN")
    };
    let message = match (token_refused, got.status) {
        (false, 401) => {
            "GET /api/v1/version answered 401: this forge tells its version only to signed-in users; set GITEA_TOKEN".to_owned()
        }
        (false, _) => return Err(error),
        (true, 401) => format!("the forge refused {who} (401) and tells its version only to signed-in users: {fix}"),
        (true, status) => {
            format!("the forge refused {who} (401), and GET /api/v1/version answered {status}: {fix}")
        }
    };
    Err(CallError::from_forge(
        401,
        ErrorKind::Unauthorized,
        format!("{message}, or pass --flavor gitea|forgejo to skip detection"),
    ))
}

/// GET `plan` with the credential, and again without it when the forge refuses it (401): the
/// answer, and whether the credential was refused.
async fn ask(forge: &Forge, plan: &CallPlan, credential: &Credential) -> Result<(Received, bool), CallError> {
    let got = forge.send(plan, credential).await?;
    if got.status == 401 && credential.mode() != Mode::Anonymous {
        return Ok((forge.send(plan, &Credential::anonymous()).await?, true));
    }
    Ok((got, false))
}

/// The version in an answer, or why there is none.
fn read_version(forge: &Forge, got: &Received) -> Result<Version, CallError> {
    if let Some(kind) = status::kind_for(got.status) {
        return Err(CallError::from_forge(
            got.status,
            kind,
            format!(
                "GET /api/v1/version answered {}; is {} a Gitea or Forgejo instance? Pass --flavor gitea|forgejo to skip detection",
                got.status,
                forge.base()
            ),
        ));
    }
    // Only the version is read; the rest of the body is skipped, not stored.
    #[derive(serde::Deserialize)]
    struct Answer {
        version: Option<String>,
    }
    let text = serde_json::from_slice::<Answer>(&got.body).ok().and_then(|a| a.version);
    text.as_deref().and_then(Version::parse).ok_or_else(|| {
        CallError::from_forge(
            got.status,
            ErrorKind::UnexpectedStatus,
            format!(
                "GET /api/v1/version at {} did not return a version; is it a Gitea or Forgejo instance? Pass --flavor to skip detection",
                forge.base()
            ),
        )
    })
}

/// A parameterless GET plan for the server's own requests (`/version`, `/user`).
pub(crate) fn simple_get(path: &'static str) -> CallPlan {
    CallPlan::fixed_get(Root::Api, path)
}

/// A parameterless GET under the forge's base URL, outside `/api/v1`.
fn site_get(path: &'static str) -> CallPlan {
    CallPlan::fixed_get(Root::Site, path)
}
