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
use aegis_core::error::Shown;

/// Largest answer read from the forge's token endpoint or a client's metadata document.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 64 * 1024;
/// Longest forge access or refresh token accepted (Gitea's JWTs are a few hundred bytes).
pub(crate) const MAX_FORGE_TOKEN_BYTES: usize = 4096;
/// How long a client ID metadata document may take.
pub(crate) const DOCUMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the forge's token endpoint granted.
pub(crate) struct ForgeGrant {
    pub(crate) access_token: SecretString,
    pub(crate) refresh_token: Option<SecretString>,
    pub(crate) expires_in: Option<u64>,
}

/// Why the forge's token endpoint gave no grant.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ForgeRefusal {
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
    pub(crate) fn oauth_authorize_url(&self, pairs: &[(&str, &str)]) -> String {
        let mut url = self.base().join("login/oauth/authorize").expect("a fixed relative path joins");
        url.query_pairs_mut().extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()));
        url.into()
    }

    /// POST the form to the forge's token endpoint: its status and body (bounded).
    pub(crate) async fn oauth_token_endpoint(&self, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), Shown> {
        let url = self.base().join("login/oauth/access_token").expect("a fixed relative path joins");
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let req =
            self.client().post(url).header(CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
        let (status, resp) = exchange(req).await?;
        Ok((status, read_bounded(resp).await?))
    }

    /// The grant the forge's token endpoint gives for the form, or why none.
    pub(crate) async fn oauth_token(&self, form: &[(&str, &str)]) -> Result<ForgeGrant, ForgeRefusal> {
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
            // A token travels sealed inside ours, which must fit an Authorization header.
            (200, Some(Answer { access_token: Some(a), refresh_token, .. }))
                if a.len() > MAX_FORGE_TOKEN_BYTES
                    || refresh_token.as_ref().is_some_and(|r| r.len() > MAX_FORGE_TOKEN_BYTES) =>
            {
                Err(ForgeRefusal::Unavailable(format!(
                    "the forge answered a token longer than {MAX_FORGE_TOKEN_BYTES} bytes"
                )))
            }
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

    /// The client ID metadata document at `url`: https on port 443, a host whose every
    /// address is public (checked after resolving it, and the request pinned to those
    /// addresses), no credential, no redirect, bounded. `loopback` allows plain http to a
    /// loopback address on any port (a server that itself listens on loopback: a local test).
    /// Every failure reads the same, so that the answer says nothing about what is behind an
    /// address.
    pub(crate) async fn client_document(&self, url: &Url, loopback: bool) -> Result<Vec<u8>, Shown> {
        const UNFETCHABLE: &str = "it could not be fetched (it must be served over https on port 443 from a public address, answering 200 with JSON within 5 s and 64 KiB)";
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(UNFETCHABLE.into());
        };
        let local_test = loopback && url.scheme() == "http";
        if !local_test && (url.scheme() != "https" || port != 443) {
            return Err(UNFETCHABLE.into());
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<std::net::SocketAddr> =
            match tokio::time::timeout(DOCUMENT_TIMEOUT, tokio::net::lookup_host((host, port))).await {
                Ok(Ok(found)) => found.take(16).collect(),
                _ => return Err(UNFETCHABLE.into()),
            };
        let allowed = |ip: std::net::IpAddr| is_public(ip) || (local_test && ip.is_loopback());
        if addrs.is_empty() || !addrs.iter().all(|a| allowed(a.ip())) {
            return Err(UNFETCHABLE.into());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(DOCUMENT_TIMEOUT)
            .resolve_to_addrs(host, &addrs)
            .build()
            .map_err(|_| UNFETCHABLE.to_owned())?;
        let (status, resp) = exchange(client.get(url.clone())).await.map_err(|_| UNFETCHABLE.to_owned())?;
        if status != 200 {
            return Err(UNFETCHABLE.into());
        }
        read_bounded(resp).await.map_err(|_| UNFETCHABLE.to_owned())
    }
}

/// Whether the forge's words say it refused this server's application rather than the grant
/// (Gitea and Forgejo answer `unauthorized_client` for both).
pub(crate) fn client_refused(description: Option<&str>) -> bool {
    description.is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d.contains("client secret") || d.contains("redirect uri") || d.contains("cannot load client")
    })
}

/// Whether an address is on the public internet: not loopback, private, link-local,
/// shared (100.64/10), unspecified, multicast, documentation or reserved, in IPv4, IPv6, or
/// IPv4 written as IPv6.
fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || o[0] >= 240
                || (o[0] == 192 && o[1] == 0 && o[2] == 0))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

/// Send `req` asking for JSON: the status and the response, or in words why there is none.
async fn exchange(req: reqwest::RequestBuilder) -> Result<(u16, reqwest::Response), Shown> {
    let resp =
        req.header(ACCEPT, "application/json").header(USER_AGENT, AGENT).send().await.map_err(|e| {
            if e.is_timeout() { "no answer in time".to_owned() } else { "no connection".to_owned() }
        })?;
    Ok((resp.status().as_u16(), resp))
}

/// The body, at most `MAX_DOCUMENT_BYTES`.
async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, Shown> {
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

#[cfg(test)]
mod tests {
    use super::is_public;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "224.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
