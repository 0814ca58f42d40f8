//! Which values of a call are secrets the result must not echo: the request body's
//! credential fields, and the value of an Actions secret being written.
//!
//! Only what this call sent is known here; a later read of an object that stores such a
//! value is covered by pattern masking, not by this rule.

use serde_json::Value;

/// JSON members whose key says the value is a secret — the one list, used twice: the values
/// a call's body sends under these keys are redacted exactly from its result (the request-body secret fields, plus the
/// names masking knew), and pattern masking shortens
/// any value under these keys in any result (`mask.rs`). Keys are matched case-insensitively,
/// as the forges decode JSON field names. Exact names, so that `token_last_eight` or a
/// package file's `sha1` are left alone.
pub(crate) const SECRET_FIELDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "client_secret",
    "token",
    "access_token",
    "refresh_token",
    "auth_token",
    "api_key",
    "apikey",
    "private_key",
    "authorization_header",
    "remote_password",
    "mirror_password",
    "mirror_token",
    "auth_password",
    "aws_secret_access_key",
    "aws_access_key_id",
];

/// Whether a JSON member's key names a secret.
pub(crate) fn is_secret_key(key: &str) -> bool {
    SECRET_FIELDS.iter().any(|k| key.eq_ignore_ascii_case(k))
}

/// Body secrets shorter than this are not collected: they would match everywhere.
pub(crate) const MIN_FIELD_SECRET_LEN: usize = 4;

/// Fields are collected from objects and lists nested up to this depth (the body is 1).
pub(crate) const MAX_DEPTH: usize = 8;

/// Operations whose body `data` is an Actions secret value, redacted at any length.
pub(crate) const ACTION_SECRET_WRITES: &[&str] = &["updateRepoSecret", "updateOrgSecret", "updateUserSecret"];

/// The secrets of one call's request body.
pub fn from_body(operation_id: Option<&str>, body: Option<&Value>) -> Vec<String> {
    let Some(body) = body else { return Vec::new() };
    let mut out = Vec::new();
    if operation_id.is_some_and(|id| ACTION_SECRET_WRITES.contains(&id)) {
        if let Some(data) = body.get("data").and_then(Value::as_str).filter(|d| !d.is_empty()) {
            out.push(data.to_owned());
        }
    }
    // (value, depth of the container holding its members)
    let mut stack: Vec<(&Value, usize)> = vec![(body, 1)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if let Value::String(s) = x {
                        if is_secret_key(k) && s.chars().count() >= MIN_FIELD_SECRET_LEN {
                            out.push(s.clone());
                        }
                    } else if depth < MAX_DEPTH {
                        stack.push((x, depth + 1));
                    }
                }
            }
            Value::Array(items) if depth < MAX_DEPTH => {
                stack.extend(items.iter().map(|x| (x, depth + 1)));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `{"n": {"n": … {"password": v}}}` with the password at `depth` (the body is depth 1).
    fn nested(depth: usize, v: &str) -> Value {
        let mut x = json!({"password": v});
        for _ in 1..depth {
            x = json!({"n": x});
        }
        x
    }

    #[test]
    fn fields_are_collected_to_depth_8_and_not_9() {
        assert_eq!(from_body(None, Some(&nested(1, "pw-one"))), ["pw-one"]);
        assert_eq!(from_body(None, Some(&nested(8, "pw-eight"))), ["pw-eight"]);
        assert!(from_body(None, Some(&nested(9, "pw-nine"))).is_empty());
    }

    #[test]
    fn lists_count_as_a_level() {
        let b = json!({"hooks": [{"config": {"secret": "hook-secret"}}]});
        assert_eq!(from_body(None, Some(&b)), ["hook-secret"]);
    }

    #[test]
    fn short_values_and_other_fields_are_not_collected() {
        let b = json!({"password": "abc", "title": "long enough title", "token": 12345678});
        assert!(from_body(None, Some(&b)).is_empty());
        assert_eq!(from_body(None, Some(&json!({"authorization_header": "Bearer xyz"}))), ["Bearer xyz"]);
    }

    #[test]
    fn keys_are_matched_case_insensitively_like_the_forges_do() {
        let b = json!({"Password": "pw-upper", "API_KEY": "key-value", "aws_access_key_id": "AKIAXXXX"});
        let mut got = from_body(None, Some(&b));
        got.sort();
        assert_eq!(got, ["AKIAXXXX", "key-value", "pw-upper"]);
    }

    #[test]
    fn action_secret_data_is_collected_at_any_length() {
        assert_eq!(from_body(Some("updateRepoSecret"), Some(&json!({"data": "x"}))), ["x"]);
        assert!(from_body(Some("issueCreateIssue"), Some(&json!({"data": "x"}))).is_empty());
    }
}
