//! Token authentication with Gitea's rules and messages.
//!
//! Gitea accepts `Authorization: token X` and `Authorization: Bearer X`, the scheme in any case.
//! An unknown token fails the whole request with 401, whatever the route (`/version` too, on
//! both forges, though they answer it without any token); no header at all is an anonymous
//! request, which may read but not write.

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No `Authorization` header.
    Anonymous,
    /// A known token: the login it belongs to.
    User(String),
    /// Credentials that match no user.
    Invalid,
}

/// Resolves the `Authorization` header value (if any) against `users` (token -> login).
pub(crate) fn caller(authorization: Option<&str>, users: &[(String, String)]) -> Caller {
    let Some(value) = authorization else {
        return Caller::Anonymous;
    };
    let value = value.trim();
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    let token = token.trim();
    if !(scheme.eq_ignore_ascii_case("token") || scheme.eq_ignore_ascii_case("bearer")) {
        return Caller::Invalid;
    }
    users.iter().find(|(t, _)| t == token).map_or(Caller::Invalid, |(_, login)| Caller::User(login.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        let users = vec![("t1".to_string(), "alice".to_string())];
        let alice = Caller::User("alice".into());
        assert_eq!(caller(Some("token t1"), &users), alice);
        assert_eq!(caller(Some("Bearer t1"), &users), alice);
        assert_eq!(caller(Some("TOKEN t1"), &users), alice);
        assert_eq!(caller(Some("token t2"), &users), Caller::Invalid);
        assert_eq!(caller(Some("Basic dDE6"), &users), Caller::Invalid);
        assert_eq!(caller(None, &users), Caller::Anonymous);
    }
}
