//! Which forge answers at the URL: `GET /api/v1/version`.

use crate::args::{CallPlan, PlanBody, Root};
use crate::catalog::{Method, ResponseKind, Version};
use crate::decode::status;
use crate::error::{CallError, ErrorKind};
use crate::identity::Credential;

use super::Forge;

/// Ask the forge for its version. A Forgejo version reveals itself (`X+gitea-Y`).
pub async fn detect(forge: &Forge, credential: &Credential) -> Result<Version, CallError> {
    let got = forge.send(&simple_get("/version"), credential).await?;
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
pub fn simple_get(path: &str) -> CallPlan {
    CallPlan {
        method: Method::Get,
        path: path.to_owned(),
        root: Root::Api,
        query: Vec::new(),
        body: PlanBody::None,
        expect: ResponseKind::Json,
        page: None,
        operation_id: None,
    }
}
