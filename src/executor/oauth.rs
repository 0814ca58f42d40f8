//! The forge's OAuth2 provider, asked by the authorization server (`oauth/`): its consent
//! page's URL, its token endpoint (the client secret goes only there, only to the configured
//! forge), and client ID metadata documents, which are the only requests this server sends
//! to an address a client chose: without any credential, within `DOCUMENT_TIMEOUT` and
//! `MAX_DOCUMENT_BYTES`, never following a redirect.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use secrecy::SecretString;
use url::Url;

use super::Forge;

/// Largest answer read from the forge's token endpoint or a client's metadata document.
pub const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// How long a client ID metadata document may take.
pub const DOCUMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the forge's token endpoint granted.
pub struct ForgeGrant {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub expires_in: Option<u64>,
}

/// Why the forge's token endpoint gave no grant.
#[derive(Debug, PartialEq, Eq)]
pub enum ForgeRefusal {
    /// The grant (code or refresh token) was refused: sign in again.
    Refused,
    /// The forge refused this server's application: the operator must fix the settings.
    Misconfigured,
    /// No usable answer: down, slow, or answering something else.
    Unavailable(String),
}

const AGENT: &str = concat!("aegis-gitea-mcp/", env!("CARGO_PKG_VERSION"));

impl Forge {
    /// The forge's consent page with these parameters.
    pub fn oauth_authorize_url(&self, pairs: &[(&str, &str)]) -> String {
        let mut url = self.base().join("login/oauth/authorize").expect("a fixed relative path joins");
        url.query_pairs_mut().extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()));
        url.into()
    }

    /// POST the form to the forge's token endpoint: its status and body (bounded).
    pub async fn oauth_token_endpoint(&self, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), String> {
        let url = self.base().join("login/oauth/access_token").expect("a fixed relative path joins");
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let req =
            self.client().post(url).header(CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
        let (status, resp) = exchange(req).await?;
        Ok((status, read_bounded(resp).await?))
    }

    /// The grant the forge's token endpoint gives for the form, or why none.
    pub async fn oauth_token(&self, form: &[(&str, &str)]) -> Result<ForgeGrant, ForgeRefusal> {
        let (status, body) = self.oauth_token_endpoint(form).await.map_err(ForgeRefusal::Unavailable)?;
        #[derive(serde::Deserialize)]
        struct Answer {
            access_token: Option<String>,
            refresh_token: Option<String>,
            expires_in: Option<u64>,
            error: Option<String>,
            error_description: Option<String>,
        }
        let answer: Option<Answer> = serde_json::from_slice(&body).ok();
        match (status, answer) {
            (200, Some(Answer { access_token: Some(a), refresh_token, expires_in, .. })) if !a.is_empty() => {
                Ok(ForgeGrant {
                    access_token: SecretString::from(a),
                    refresh_token: refresh_token.filter(|r| !r.is_empty()).map(SecretString::from),
                    expires_in,
                })
            }
            (_, Some(Answer { error: Some(e), error_description, .. }))
                if e == "invalid_client" || client_refused(error_description.as_deref()) =>
            {
                Err(ForgeRefusal::Misconfigured)
            }
            (400..=499, _) => Err(ForgeRefusal::Refused),
            (s, _) => Err(ForgeRefusal::Unavailable(format!("the forge's token endpoint answered {s}"))),
        }
    }

    /// The client ID metadata document at `url`: no credential, no redirect, bounded.
    pub async fn client_document(&self, url: &Url) -> Result<Vec<u8>, String> {
        if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = url.host() {
            let private = match url.host() {
                Some(url::Host::Ipv4(ip)) => ip.is_private() || ip.is_link_local() || ip.is_unspecified(),
                Some(url::Host::Ipv6(ip)) => ip.is_unspecified() || (ip.segments()[0] & 0xfe00) == 0xfc00,
                _ => false,
            };
            if private {
                return Err("its host is a private address".into());
            }
        }
        let (status, resp) = exchange(self.client().get(url.clone()).timeout(DOCUMENT_TIMEOUT)).await?;
        if status != 200 {
            return Err(format!("it answered {status}"));
        }
        read_bounded(resp).await
    }
}

/// Whether the forge's words say it refused this server's application rather than the grant
/// (Gitea and Forgejo answer `unauthorized_client` for both).
pub fn client_refused(description: Option<&str>) -> bool {
    description.is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d.contains("client secret") || d.contains("redirect uri") || d.contains("cannot load client")
    })
}

/// Send `req` asking for JSON: the status and the response, or in words why there is none.
async fn exchange(req: reqwest::RequestBuilder) -> Result<(u16, reqwest::Response), String> {
    let resp =
        req.header(ACCEPT, "application/json").header(USER_AGENT, AGENT).send().await.map_err(|e| {
            if e.is_timeout() { "no answer in time".to_owned() } else { "no connection".to_owned() }
        })?;
    Ok((resp.status().as_u16(), resp))
}

/// The body, at most `MAX_DOCUMENT_BYTES`.
async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    if resp.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
        return Err(format!("the answer is larger than {MAX_DOCUMENT_BYTES} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|_| "the answer broke off".to_owned())? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("the answer is larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
