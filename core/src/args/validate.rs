//! Arguments against the tool's JSON Schema, before anything is sent.
//!
//! A failure names the offending argument with a JSON Pointer (`path`) and says what was
//! expected, without echoing the value (it may be a password the model was asked to set).

use serde_json::{Map, Value};

use crate::catalog::ToolDef;
use crate::error::CallError;
use jsonschema::error::ValidationErrorKind;

/// Check `args`; the first problem becomes an `invalid_arguments` error. The validator reads
/// a `Value`: the arguments move into one and back rather than being copied (an upload's
/// base64 may be megabytes, and every call is checked).
pub fn validate(tool: &ToolDef, args: &mut Map<String, Value>) -> Result<(), CallError> {
    let instance = Value::Object(std::mem::take(args));
    let checked = check(tool, &instance);
    let Value::Object(back) = instance else { unreachable!("an object was put in") };
    *args = back;
    checked
}

fn check(tool: &ToolDef, instance: &Value) -> Result<(), CallError> {
    let validator = tool.validator().map_err(|why| {
        CallError::local(
            crate::error::ErrorKind::InvalidArguments,
            format!("the arguments of {} cannot be checked, so the call is not sent: {why}", tool.name),
        )
    })?;
    let mut errors = validator.iter_errors(instance);
    let Some(first) = errors.next() else {
        return Ok(());
    };
    let more = errors.count();
    let base = first.instance_path().to_string();
    let (pointer, mut message) = match first.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let what = if base.is_empty() { "argument" } else { "field" };
            (child(&base, name), format!("missing required {what} `{name}`"))
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let name = unexpected.first().map(String::as_str).unwrap_or_default();
            let known = if base.is_empty() {
                let names: Vec<&str> = tool
                    .input_schema()
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                format!("; {} takes: {}", tool.name, names.join(", "))
            } else {
                String::new()
            };
            let what = if base.is_empty() { "argument" } else { "field" };
            (child(&base, name), format!("unknown {what} `{name}`{known}"))
        }
        _ => {
            let at = if base.is_empty() { "the arguments".to_owned() } else { format!("`{base}`") };
            (base.clone(), format!("{at}: {}", first.masked()))
        }
    };
    if more > 0 {
        message.push_str(&format!(" (and {more} more problem{})", if more == 1 { "" } else { "s" }));
    }
    Err(CallError::invalid_argument(pointer, message))
}

/// Append one property name to a JSON Pointer, escaping `~` and `/` (RFC 6901).
fn child(base: &str, name: &str) -> String {
    format!("{base}/{}", crate::error::pointer_segment(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use crate::error::{ErrorKind, ToolFailure};
    use serde_json::json;

    fn check(tool: &str, args: Value) -> Result<(), ToolFailure> {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let t = c.get(tool).unwrap();
        validate(t, &mut args.as_object().unwrap().clone()).map_err(|e| match e {
            CallError::Result(f) => f,
            other => panic!("{other}"),
        })
    }

    #[test]
    fn missing_argument_points_at_it() {
        let f = check("repoGet", json!({"owner": "o"})).unwrap_err();
        assert_eq!((f.kind, f.path.as_deref()), (ErrorKind::InvalidArguments, Some("/repo")));
        assert!(f.message.contains("`repo`"));
    }

    #[test]
    fn unknown_top_level_argument_is_refused_and_the_known_ones_listed() {
        let f = check("repoGet", json!({"owner": "o", "repo": "r", "repository": "x"})).unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/repository"));
        assert!(f.message.contains("owner, repo"), "{}", f.message);
    }

    #[test]
    fn nested_type_errors_point_into_the_body_without_echoing_the_value() {
        let f = check(
            "issueCreateIssue",
            json!({"owner": "o", "repo": "r", "body": {"title": "t", "labels": [1, "secret-label-value"]}}),
        )
        .unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/body/labels/1"));
        assert!(!f.message.contains("secret-label-value"), "{}", f.message);
    }

    #[test]
    fn enum_and_integer_checks_apply_to_query_parameters() {
        let f = check("issueListIssues", json!({"owner": "o", "repo": "r", "state": "weird"})).unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/state"));
        let f = check("issueListIssues", json!({"owner": "o", "repo": "r", "page": "two"})).unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/page"));
        assert!(
            check("issueListIssues", json!({"owner": "o", "repo": "r", "page": 2, "state": "all"})).is_ok()
        );
    }

    #[test]
    fn pointer_escapes_slash_and_tilde() {
        assert_eq!(child("", "a/b~c"), "/a~1b~0c");
    }
}
