//! The parameters of each OAuth request (a query or an `application/x-www-form-urlencoded`
//! body) as a typed struct read by `serde_urlencoded`. RFC 6749 §3.1 asks two things of
//! every parameter, and both live here rather than at each lookup: one sent twice is refused
//! (serde's derived code refuses a duplicate field; no struct may use `flatten`, which would
//! hide duplicates from it), and one sent empty counts as not sent (`Param`). A parameter a
//! struct does not name is ignored, as RFC 6749 asks; each request reads only the fields it
//! uses, so a repeated parameter it ignores is ignored too. Bytes that are not UTF-8 are read
//! with replacement characters (no value of ours contains one, so such a value is refused
//! where it is checked).

use serde::de::{Deserialize, DeserializeOwned, Deserializer};

use super::error::OAuthError;
use aegis_core::error::Shown;

/// `text` (a query string or form body) as the request `T`, or `invalid_request` naming the
/// repeated parameter.
pub(crate) fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, OAuthError> {
    serde_urlencoded::from_bytes(text).map_err(|e| {
        let said = e.to_string();
        match said.strip_prefix("duplicate field `").and_then(|rest| rest.strip_suffix('`')) {
            Some(name) => OAuthError::request(format!("the parameter {name} is repeated")),
            // Not serde's words: they may quote a value the client sent.
            None => OAuthError::request("the parameters could not be read as a form"),
        }
    })
}

/// `parse` for a request answered with a page for the person (`what`: what was sent, as the
/// page names it), or the page's words.
pub(crate) fn parse_for_page<T: DeserializeOwned>(text: &[u8], what: &str) -> Result<T, Shown> {
    parse(text).map_err(|e| {
        format!("{what} could not be read ({}); start again from your MCP client", e.description)
    })
}

/// One parameter's value; none when it was not sent or sent empty.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Param(Option<String>);

impl Param {
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The value, or `invalid_request` naming the parameter `name` as missing.
    pub(crate) fn required(&self, name: &str) -> Result<&str, OAuthError> {
        self.get().ok_or_else(|| OAuthError::request(format!("the parameter {name} is missing")))
    }
}

impl<'de> Deserialize<'de> for Param {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Param, D::Error> {
        Ok(Param(Some(String::deserialize(d)?).filter(|v| !v.is_empty())))
    }
}

/// `GET /authorize`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct AuthorizeQuery {
    pub(crate) client_id: Param,
    pub(crate) redirect_uri: Param,
    pub(crate) response_type: Param,
    pub(crate) state: Param,
    pub(crate) code_challenge: Param,
    pub(crate) code_challenge_method: Param,
    pub(crate) scope: Param,
    pub(crate) resource: Param,
}

/// `POST /authorize`: the consent page's answer.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct ApproveForm {
    pub(crate) pending: Param,
    pub(crate) granted: Param,
}

/// `GET /oauth/callback`: the forge's answer.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct CallbackQuery {
    pub(crate) state: Param,
    pub(crate) code: Param,
    pub(crate) error: Param,
}

/// `POST /token`, read first for its grant type alone: which grant's fields to read next.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct TokenGrant {
    pub(crate) grant_type: Param,
}

/// `POST /token` with `grant_type=authorization_code`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct CodeGrant {
    pub(crate) client_id: Param,
    pub(crate) code: Param,
    pub(crate) redirect_uri: Param,
    pub(crate) code_verifier: Param,
    pub(crate) resource: Param,
}

/// `POST /token` with `grant_type=refresh_token`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RefreshGrant {
    pub(crate) client_id: Param,
    pub(crate) refresh_token: Param,
    pub(crate) scope: Param,
    pub(crate) resource: Param,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_field_is_refused_by_name_an_empty_one_is_absent_an_unknown_one_ignored() {
        let e = parse::<CodeGrant>(b"code=a&client_id=c&code=b").unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_request"));
        assert_eq!(e.description, "the parameter code is repeated");
        // Repeated even when one of the two is empty.
        let e = parse::<CodeGrant>(b"resource=&resource=x").unwrap_err();
        assert_eq!(e.description, "the parameter resource is repeated");
        let g = parse::<CodeGrant>(b"code=&client_id=c&other=1&other=2&scope=a&scope=b").unwrap();
        assert_eq!((g.code.get(), g.client_id.get(), g.resource.get()), (None, Some("c"), None));
        assert_eq!(g.code.required("code").unwrap_err().description, "the parameter code is missing");
        assert_eq!(g.client_id.required("client_id"), Ok("c"));
    }

    #[test]
    fn values_are_percent_decoded_and_garbage_is_read_as_text() {
        let g = parse::<RefreshGrant>(b"scope=read+write&resource=http%3A%2F%2Fa%2Fmcp").unwrap();
        assert_eq!((g.scope.get(), g.resource.get()), (Some("read write"), Some("http://a/mcp")));
        // Broken escapes stay as written; bytes that are not UTF-8 become replacement
        // characters: neither is an error of the form, and no value of ours looks like them.
        let g = parse::<RefreshGrant>(b"refresh_token=%ZZ%4&client_id=%FF%FEx\xC3").unwrap();
        assert_eq!(g.refresh_token.get(), Some("%ZZ%4"));
        assert_eq!(g.client_id.get(), Some("\u{FFFD}\u{FFFD}x\u{FFFD}"));
        // The name is read the same way: a mangled name is another (ignored) parameter.
        let g = parse::<RefreshGrant>(b"scop%65=read&sc%FFope=write").unwrap();
        assert_eq!(g.scope.get(), Some("read"));
    }
}
