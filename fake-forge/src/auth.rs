//! Authentication and sudo with Gitea's rules and messages.
//!
//! Gitea accepts `Authorization: token X` and `Authorization: Bearer X`, the scheme in any case,
//! and HTTP Basic `login:password`. An unknown token or a wrong password fails the whole request
//! with 401, whatever the route (`/version` too, on both forges, though they answer it without
//! any token); no header at all is an anonymous request, which may read but not write. Some
//! routes (creating and listing access tokens) want Basic and nothing else.
//!
//! A `sudo` query parameter, else a `Sudo` header, asks to act as another user: a site admin
//! becomes that user (an unknown one is 404), anyone else is refused with 403.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No `Authorization` header.
    Anonymous,
    /// A known token: the login it belongs to.
    User(String),
    /// A known login with its password (HTTP Basic).
    Basic(String),
    /// A token that matches no user.
    Invalid,
    /// HTTP Basic with an unknown login or a wrong password: the login as given.
    WrongPassword(String),
}

impl Caller {
    /// The signed-in login, if any.
    pub(crate) fn login(&self) -> Option<&str> {
        match self {
            Caller::User(l) | Caller::Basic(l) => Some(l),
            _ => None,
        }
    }
}

/// Resolves the `Authorization` header value (if any) against `users` (token -> login) and
/// `passwords` (login -> password; logins case-insensitive as on the forges).
pub(crate) fn caller(
    authorization: Option<&str>,
    users: &[(String, String)],
    passwords: &[(String, String)],
) -> Caller {
    let Some(value) = authorization else {
        return Caller::Anonymous;
    };
    let value = value.trim();
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("basic") {
        return basic(token, passwords);
    }
    if !(scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer")) {
        return Caller::Invalid;
    }
    users.iter().find(|(t, _)| t == token).map_or(Caller::Invalid, |(_, login)| Caller::User(login.clone()))
}

fn basic(encoded: &str, passwords: &[(String, String)]) -> Caller {
    let decoded = STANDARD.decode(encoded).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default();
    let (login, password) = decoded.split_once(':').unwrap_or((decoded.as_str(), ""));
    match passwords.iter().find(|(l, _)| l.eq_ignore_ascii_case(login)) {
        Some((l, p)) if !password.is_empty() && p == password => Caller::Basic(l.clone()),
        _ => Caller::WrongPassword(login.to_string()),
    }
}

/// The login a request asks to act as: the `sudo` query parameter, else the `Sudo` header
/// (Gitea reads them in this order); `None` when both are absent or empty.
pub(crate) fn sudo_target<'a>(query: &'a [(String, String)], header: Option<&'a str>) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, v)| k == "sudo" && !v.is_empty())
        .map(|(_, v)| v.as_str())
        .or(header.filter(|h| !h.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        let users = vec![("t1".to_string(), "alice".to_string())];
        let pw = vec![("alice".to_string(), "pw".to_string())];
        let alice = Caller::User("alice".into());
        assert_eq!(caller(Some("token t1"), &users, &pw), alice);
        assert_eq!(caller(Some("Bearer t1"), &users, &pw), alice);
        assert_eq!(caller(Some("TOKEN t1"), &users, &pw), alice);
        assert_eq!(caller(Some("token t2"), &users, &pw), Caller::Invalid);
        assert_eq!(caller(Some("Basic dDE6"), &users, &pw), Caller::WrongPassword("t1".into()));
        assert_eq!(caller(None, &users, &pw), Caller::Anonymous);
    }

    #[test]
    fn basic_needs_the_password_of_a_known_login() {
        let pw = vec![("alice".to_string(), "s3cret".to_string())];
        let b = |s: &str| format!("Basic {}", STANDARD.encode(s));
        assert_eq!(caller(Some(&b("alice:s3cret")), &[], &pw), Caller::Basic("alice".into()));
        assert_eq!(caller(Some(&b("ALICE:s3cret")), &[], &pw), Caller::Basic("alice".into()));
        assert_eq!(caller(Some(&b("alice:wrong")), &[], &pw), Caller::WrongPassword("alice".into()));
        assert_eq!(caller(Some(&b("alice:")), &[], &pw), Caller::WrongPassword("alice".into()));
        assert_eq!(caller(Some(&b("bob:s3cret")), &[], &pw), Caller::WrongPassword("bob".into()));
        assert_eq!(caller(Some("basic !!!"), &[], &pw), Caller::WrongPassword(String::new()));
    }

    #[test]
    fn sudo_is_read_from_the_query_first() {
        let q = vec![("sudo".to_string(), "bob".to_string())];
        assert_eq!(sudo_target(&q, Some("carol")), Some("bob"));
        assert_eq!(sudo_target(&[], Some("carol")), Some("carol"));
        assert_eq!(sudo_target(&[], Some("")), None);
        assert_eq!(sudo_target(&[], None), None);
    }
}
