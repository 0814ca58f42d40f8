//! Forge statuses → error kinds, and the forge's own words about an error.

use serde_json::Value;

use crate::error::ErrorKind;

/// The status table of INTERFACE.md. 5xx is `upstream_error`, any other non-success
/// status `unexpected_status`.
const TABLE: &[(u16, ErrorKind)] = &[
    (400, ErrorKind::BadRequest),
    (401, ErrorKind::Unauthorized),
    (403, ErrorKind::Forbidden),
    (404, ErrorKind::NotFound),
    (405, ErrorKind::MethodNotAllowed),
    (409, ErrorKind::Conflict),
    (413, ErrorKind::PayloadTooLarge),
    (422, ErrorKind::ValidationFailed),
    (423, ErrorKind::Locked),
    (429, ErrorKind::RateLimited),
];

/// `None` for statuses that are results (2xx, and 3xx which the server does not follow).
pub fn kind_for(status: u16) -> Option<ErrorKind> {
    if (200..400).contains(&status) {
        return None;
    }
    Some(TABLE.iter().find(|(s, _)| *s == status).map(|(_, k)| *k).unwrap_or(
        if (500..600).contains(&status) { ErrorKind::UpstreamError } else { ErrorKind::UnexpectedStatus },
    ))
}

/// A hint that helps the model or the operator act on an error kind.
pub fn hint(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Unauthorized => " (the token is missing, wrong or expired)",
        ErrorKind::Forbidden => " (the identity lacks the permission or the token lacks the scope)",
        ErrorKind::NotFound => {
            " (check owner, repository and names; private items look missing without access)"
        }
        ErrorKind::RateLimited => " (wait before retrying)",
        ErrorKind::UpstreamError => " (the forge failed; retrying later may help)",
        _ => "",
    }
}

/// What the forge said about an error: Gitea's `{"message", "errors"}` JSON, else the text.
pub fn forge_message(body: &[u8]) -> String {
    if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) {
        let mut msg = m.get("message").and_then(Value::as_str).unwrap_or("").trim().to_owned();
        if let Some(errs) = m.get("errors").and_then(Value::as_array) {
            let list: Vec<String> = errs
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .filter(|s| !s.is_empty())
                .collect();
            if !list.is_empty() {
                if !msg.is_empty() {
                    msg.push_str(": ");
                }
                msg.push_str(&list.join("; "));
            }
        }
        if !msg.is_empty() {
            return msg;
        }
    }
    String::from_utf8_lossy(body).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_table_and_the_ranges() {
        for (status, kind) in TABLE {
            assert_eq!(kind_for(*status), Some(*kind));
        }
        assert_eq!(kind_for(200), None);
        assert_eq!(kind_for(204), None);
        assert_eq!(kind_for(302), None);
        assert_eq!(kind_for(500), Some(ErrorKind::UpstreamError));
        assert_eq!(kind_for(503), Some(ErrorKind::UpstreamError));
        assert_eq!(kind_for(418), Some(ErrorKind::UnexpectedStatus));
        assert_eq!(kind_for(100), Some(ErrorKind::UnexpectedStatus));
    }

    #[test]
    fn gitea_error_bodies_give_their_message_and_errors() {
        assert_eq!(forge_message(br#"{"message":"not found","url":"https://g/api/swagger"}"#), "not found");
        assert_eq!(
            forge_message(br#"{"message":"invalid","errors":["title is required"]}"#),
            "invalid: title is required"
        );
        assert_eq!(forge_message(b"  plain words \n"), "plain words");
    }
}
