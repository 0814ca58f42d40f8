//! Forge statuses → error kinds, and the forge's own words about an error: its message, the
//! wait it asks for (`Retry-After`), and the hint that tells the reader what to do — by kind,
//! or for an answer whose words change what its status means (`RECOGNISED`).

use std::time::SystemTime;

use serde_json::Value;

use crate::error::ErrorKind;

/// The forge's status → the error kind (README, "Results"). 5xx is `upstream_error`, any other non-success
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

/// An answer recognised by its status and the forge's own words, where the status alone
/// would mislead: the kind stays the status's, the hint says what the answer means.
struct Recognised {
    status: u16,
    /// The forge's whole message, compared ignoring letter case and surrounding space.
    message: &'static str,
    hint: &'static str,
}

/// Gitea and Forgejo answer a merge with 405 "Please try again later" while they are still
/// checking whether a new or updated pull request can be merged — and with the same words
/// when the check found conflicts. Only the first passes by waiting.
const MERGE_NOT_READY: &str = " (the forge has not found the pull request mergeable yet: right after it is opened or updated, the forge is still checking it — wait a few seconds and try again; if the answer stays the same, the pull request has conflicts: repoGetPullRequest shows `mergeable`)";

/// Both forges answer an API route they do not serve with their router's plain-text 404, not
/// with their JSON "not found": the route is in the spec but switched off here (Forgejo's
/// ActivityPub, nodeinfo, quota and repository flags on a default install), or this version
/// lacks it. Checking names would not help.
const ROUTE_NOT_SERVED: &str = " (the forge's router does not serve this route at all, which is not the same as a missing item: the feature may be disabled on this forge — ActivityPub, nodeinfo, quota and repository flags are off on a default Forgejo — or its version lacks the operation; ask the forge's operator, or use another operation)";

/// The answers recognised by their words (one test per row).
const RECOGNISED: &[Recognised] = &[
    Recognised { status: 405, message: "Please try again later", hint: MERGE_NOT_READY },
    Recognised { status: 404, message: "404 page not found", hint: ROUTE_NOT_SERVED },
];

/// A hint that helps the model or the operator act on an error: the hint of a recognised
/// answer (`RECOGNISED`, by status and the forge's message), else the hint of its kind.
pub fn hint(status: u16, kind: ErrorKind, forge_message: &str) -> &'static str {
    let said = forge_message.trim();
    RECOGNISED
        .iter()
        .find(|r| r.status == status && r.message.eq_ignore_ascii_case(said))
        .map(|r| r.hint)
        .unwrap_or_else(|| kind_hint(kind))
}

/// The hint of an error kind.
fn kind_hint(kind: ErrorKind) -> &'static str {
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

/// Longest wait passed on from a forge's `Retry-After`: a day (a larger one is a mistake or a
/// way to park the client; the forge refuses it again if it still means it).
pub(crate) const MAX_RETRY_AFTER: u64 = 86_400;

/// The seconds a forge's `Retry-After` asks to wait, as of `now`: delay-seconds, or an
/// HTTP-date (any of the three forms HTTP allows; a date already past is 0). `None` when
/// absent or unreadable. At most `MAX_RETRY_AFTER`.
pub fn retry_after(value: Option<&str>, now: SystemTime) -> Option<u64> {
    let v = value?.trim();
    let seconds = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        v.parse::<u64>().unwrap_or(u64::MAX)
    } else {
        let at = httpdate::parse_http_date(v).ok()?;
        let wait = at.duration_since(now).unwrap_or_default();
        wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
    };
    Some(seconds.min(MAX_RETRY_AFTER))
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
    fn every_recognised_answer_gets_its_hint_and_other_words_the_kind_hint() {
        for r in RECOGNISED {
            let kind = kind_for(r.status).unwrap();
            assert_eq!(hint(r.status, kind, r.message), r.hint);
            assert_eq!(hint(r.status, kind, &format!("  {}\n", r.message.to_uppercase())), r.hint);
            assert_eq!(hint(r.status, kind, "something else"), kind_hint(kind));
            assert_eq!(hint(r.status + 1, kind, r.message), kind_hint(kind), "the status matters too");
        }
        assert_eq!(hint(404, ErrorKind::NotFound, "not found"), kind_hint(ErrorKind::NotFound));
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        use std::time::Duration;
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after(Some("120"), now), Some(120));
        assert_eq!(retry_after(Some(" 0 "), now), Some(0));
        assert_eq!(retry_after(Some("Sun, 06 Nov 1994 08:50:07 GMT"), now), Some(30));
        assert_eq!(retry_after(Some("Sunday, 06-Nov-94 08:50:07 GMT"), now), Some(30));
        assert_eq!(retry_after(Some("Sun Nov  6 08:50:07 1994"), now), Some(30));
        assert_eq!(retry_after(Some("Sun, 06 Nov 1994 08:00:00 GMT"), now), Some(0), "a date already past");
        assert_eq!(retry_after(Some("99999999999999999999999"), now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(Some("Sat, 06 Nov 2094 08:49:37 GMT"), now), Some(MAX_RETRY_AFTER));
        for unreadable in ["", "-5", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(retry_after(Some(unreadable), now), None, "{unreadable:?}");
        }
        assert_eq!(retry_after(None, now), None);
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
