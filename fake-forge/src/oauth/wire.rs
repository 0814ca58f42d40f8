//! How Gitea's web handlers read requests and write redirects, down to the bytes a client sees.
//!
//! * Forms: Gitea binds handler forms with `go-chi/binding`: a body whose content type contains
//!   `form-urlencoded` or `multipart/form-data` is merged with the query (`Request.Form`: body
//!   values first), one containing `json` is decoded alone (field names as their `json` tags,
//!   matched ignoring case as `encoding/json` does, non-string values skipped), and a POST with
//!   any other content type, or none, binds nothing. The first value of a field wins.
//! * `Authorization`: `modules/auth/httpauth`: exactly two fields; `Basic` with standard base64
//!   of `user:password` (not URL-decoded), or `token`/`Bearer` (scheme in any case).
//! * Redirects: `ctx.Redirect` is Go's `http.Redirect` with 303; the target's query is rebuilt
//!   with `url.Values.Encode` (keys sorted), which is where `code`/`state`/`error` land.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::multipart;
use crate::paging::query_escape;
use crate::recorded::{Recorded, parse_query};
use crate::reply::Reply;

/// A bound form: field name -> first value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    /// The value of `name` ("" when absent), as a Go form struct field would hold it.
    pub(super) fn get(&self, name: &str) -> &str {
        self.0.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }

    /// The query alone (what a GET binds).
    pub(super) fn from_query(rec: &Recorded) -> Form {
        Form(rec.query_pairs())
    }

    /// What `binding.Bind` fills in for a POST, for the named `fields`.
    pub(super) fn from_post(rec: &Recorded, fields: &[&str]) -> Form {
        let content_type = rec.header("content-type").unwrap_or("");
        if content_type.contains("form-urlencoded") {
            // `ParseForm` reads the body only for exactly this media type.
            let mut pairs = if media_type(content_type) == "application/x-www-form-urlencoded" {
                parse_query(&String::from_utf8_lossy(&rec.body))
            } else {
                Vec::new()
            };
            pairs.extend(rec.query_pairs());
            Form(pairs)
        } else if content_type.contains("multipart/form-data") {
            let mut pairs: Vec<(String, String)> = multipart::boundary(content_type)
                .and_then(|b| multipart::parse(&rec.body, &b))
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.filename.is_none())
                .map(|p| (p.name, String::from_utf8_lossy(&p.data).into_owned()))
                .collect();
            pairs.extend(rec.query_pairs());
            Form(pairs)
        } else if content_type.contains("json") {
            Form(json_fields(&rec.body, fields))
        } else {
            Form::default()
        }
    }
}

/// The lower-case media type of a `Content-Type` value, without parameters.
fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

/// `encoding/json` decoding the first JSON value of `body` into a struct of string `fields`:
/// a key matches a field exactly or else ignoring ASCII case, later keys overwrite earlier
/// ones, and values that are not strings leave the field alone. Anything but an object binds
/// nothing.
fn json_fields(body: &[u8], fields: &[&str]) -> Vec<(String, String)> {
    let first = serde_json::Deserializer::from_slice(body).into_iter::<Value>().next();
    let Some(Ok(Value::Object(map))) = first else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for (key, value) in &map {
        let field = fields
            .iter()
            .find(|f| **f == key)
            .or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key)));
        if let (Some(field), Value::String(s)) = (field, value) {
            out.retain(|(k, _)| k != field);
            out.push((field.to_string(), s.clone()));
        }
    }
    out
}

/// An `Authorization` header as `httpauth.ParseAuthorizationHeader` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Authorization {
    Basic {
        user: String,
        password: String,
    },
    Bearer(String),
    /// Not two fields, an unknown scheme, or Basic credentials that do not decode.
    Unparsed,
}

pub(super) fn authorization(value: &str) -> Authorization {
    let fields: Vec<&str> = value.split_ascii_whitespace().collect();
    let [scheme, credentials] = fields[..] else {
        return Authorization::Unparsed;
    };
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = STANDARD.decode(credentials).ok().map(|b| String::from_utf8_lossy(&b).into_owned());
        match decoded.as_deref().and_then(|d| d.split_once(':')) {
            Some((user, password)) => {
                Authorization::Basic { user: user.to_string(), password: password.to_string() }
            }
            None => Authorization::Unparsed,
        }
    } else if scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer") {
        Authorization::Bearer(credentials.to_string())
    } else {
        Authorization::Unparsed
    }
}

/// The token of a `token X` / `Bearer X` header, if it is one.
pub(super) fn bearer(value: &str) -> Option<&str> {
    let fields: Vec<&str> = value.split_ascii_whitespace().collect();
    match fields[..] {
        [scheme, token] if scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer") => {
            Some(token)
        }
        _ => None,
    }
}

/// `uri` with the parameters of `set` replacing any of the same name, the query re-encoded as
/// `url.Values.Encode` does (keys sorted, values of one key in order) and the fragment kept.
pub(super) fn with_query(uri: &str, set: &[(&str, &str)]) -> String {
    let (rest, fragment) = match uri.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (uri, None),
    };
    let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut pairs: Vec<(String, String)> =
        parse_query(query).into_iter().filter(|(k, _)| !set.iter().any(|(s, _)| s == k)).collect();
    pairs.extend(set.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let encoded: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v))).collect();
    let mut out = format!("{base}?{}", encoded.join("&"));
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Go's `http.Redirect(w, r, url, 303)` for a GET: `Location` (non-ASCII bytes hex-escaped) and
/// the short HTML body.
pub(super) fn see_other(url: &str) -> Reply {
    let body = format!("<a href=\"{}\">See Other</a>.\n\n", html_escape(url));
    Reply::bytes(303, "text/html; charset=utf-8", body).header("location", hex_escape_non_ascii(url))
}

/// Gitea's `ctx.HTML(400, "user/auth/grant_error")`, reduced to what a client could read: the
/// page title and the error description.
pub(super) fn grant_error_page(code: &str, description: &str) -> Reply {
    let body = format!(
        "<!DOCTYPE html>\n<html lang=\"en-US\">\n<head><meta charset=\"utf-8\">\
         <title>Authorization failed</title></head>\n<body>\n<h3>Authorization failed</h3>\n\
         <p>The authorization request is invalid ({}).</p>\n\
         <div class=\"ui red message\">{}</div>\n</body>\n</html>\n",
        html_escape(code),
        html_escape(description)
    );
    Reply::bytes(400, "text/html; charset=utf-8", body)
}

/// Go's `http.Error`: plain text with a trailing newline.
pub(super) fn http_error(status: u16, text: &str) -> Reply {
    Reply::bytes(status, "text/plain; charset=utf-8", format!("{text}\n"))
        .header("x-content-type-options", "nosniff")
}

/// Gitea's `ctx.PlainText`: plain text as given.
pub(super) fn plain_text(status: u16, text: &str) -> Reply {
    Reply::bytes(status, "text/plain;charset=utf-8", text.to_string())
        .header("x-content-type-options", "nosniff")
}

/// `net/http`'s `htmlEscape`.
fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// `net/http`'s `hexEscapeNonASCII`.
fn hex_escape_non_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b >= 0x80 {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

/// Gitea's `ContainsRedirectURI`: equal ignoring ASCII case and one trailing `/`; a public
/// client may also use any port on an `http` loopback address registered without one.
pub(super) fn contains_redirect_uri(app: &crate::OAuthApp, redirect_uri: &str) -> bool {
    let normalize = |s: &str| {
        let lower = s.to_ascii_lowercase();
        lower.strip_suffix('/').map(str::to_string).unwrap_or(lower)
    };
    let mut candidates = vec![normalize(redirect_uri)];
    if !app.confidential
        && let Some(without_port) = loopback_without_port(redirect_uri)
    {
        candidates.push(normalize(&without_port));
    }
    app.redirect_uris.iter().any(|r| candidates.contains(&normalize(r)))
}

/// Go's `url.Parse`, `uri.Host = uri.Hostname()`, `uri.String()` for an `http` URI whose host
/// is a loopback IP with an explicit port: `http://127.0.0.1:PORT/x` -> `http://127.0.0.1/x`.
/// `Hostname` drops the brackets of an IPv6 address, so `[::1]` becomes `::1` — which Gitea
/// then never finds registered. `None` when the URI is not such a loopback URI.
pub(super) fn loopback_without_port(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("http://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((user, host_port)) => (format!("{user}@"), host_port),
        None => (String::new(), authority),
    };
    let (host, port) = host_port.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let ip: std::net::IpAddr = bare.parse().ok()?;
    ip.is_loopback().then(|| format!("http://{userinfo}{bare}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(content_type: Option<&str>, query: Option<&str>, body: &[u8]) -> Recorded {
        let mut headers = Vec::new();
        if let Some(ct) = content_type {
            headers.push(("content-type".to_string(), ct.to_string()));
        }
        Recorded {
            method: "POST".into(),
            raw_path: "/login/oauth/access_token".into(),
            raw_query: query.map(str::to_string),
            headers,
            body: body.to_vec(),
            operation_id: None,
            path_params: Vec::new(),
        }
    }

    const FIELDS: &[&str] = &["grant_type", "code"];

    #[test]
    fn forms_bind_like_go_chi_binding() {
        let form = "application/x-www-form-urlencoded";
        let f =
            Form::from_post(&post(Some(form), Some("code=q&grant_type=z"), b"code=a+b%2F&code=c"), FIELDS);
        assert_eq!((f.get("code"), f.get("grant_type")), ("a b/", "z"));
        let f = Form::from_post(
            &post(
                Some("application/json; charset=utf-8"),
                None,
                br#"{"CODE":"x","code":"y","grant_type":1} trailing"#,
            ),
            FIELDS,
        );
        assert_eq!((f.get("code"), f.get("grant_type")), ("y", ""));
        let f = Form::from_post(&post(Some("application/json"), Some("code=q"), b"[1]"), FIELDS);
        assert_eq!(f.get("code"), "");
        let f = Form::from_post(&post(None, Some("code=q"), b"code=a"), FIELDS);
        assert_eq!(f.get("code"), "");
        let f = Form::from_post(&post(Some("text/plain"), None, b"code=a"), FIELDS);
        assert_eq!(f.get("code"), "");
        let mp = b"--B\r\nContent-Disposition: form-data; name=\"code\"\r\n\r\nm\r\n--B--\r\n";
        let f = Form::from_post(&post(Some("multipart/form-data; boundary=B"), None, mp), FIELDS);
        assert_eq!(f.get("code"), "m");
    }

    #[test]
    fn authorization_headers_parse_like_httpauth() {
        let basic = |u: &str, p: &str| Authorization::Basic { user: u.into(), password: p.into() };
        assert_eq!(authorization("Basic aWQ6c2U6Y3I="), basic("id", "se:cr"));
        assert_eq!(authorization("basic aWQlM0E6eA=="), basic("id%3A", "x"));
        assert_eq!(authorization("Basic aWQ="), Authorization::Unparsed);
        assert_eq!(authorization("BEARER  t"), Authorization::Bearer("t".into()));
        assert_eq!(authorization("Bearer a b"), Authorization::Unparsed);
        assert_eq!(authorization("Digest x"), Authorization::Unparsed);
        assert_eq!(bearer("token  abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
    }

    #[test]
    fn redirects_rebuild_the_query_like_go() {
        let url =
            with_query("https://app.example/cb?z=1&state=old#frag", &[("state", "s t&"), ("code", "gta_x")]);
        assert_eq!(url, "https://app.example/cb?code=gta_x&state=s+t%26&z=1#frag");
        assert_eq!(with_query("http://h", &[("code", "c")]), "http://h?code=c");
        let r = see_other("https://a/?x=1&y=\"é\"");
        assert_eq!(r.status, 303);
        assert_eq!(r.headers.iter().find(|(n, _)| n == "location").unwrap().1, "https://a/?x=1&y=\"%c3%a9\"");
        assert_eq!(&r.body[..], "<a href=\"https://a/?x=1&amp;y=&#34;é&#34;\">See Other</a>.\n\n".as_bytes());
    }
}
