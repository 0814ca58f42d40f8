//! Arguments against the tool's JSON Schema, before anything is sent.
//!
//! A failure names the offending argument with a JSON Pointer (`path`) and says what was
//! expected, without echoing the value (it may be a password the model was asked to set).
//!
//! JSON Schema counts `1.0`, `1E2` and `-0` as integers, and so does the validator; sent as
//! written they would reach the forge as `/issues/1.0` or `-0.0`, which it reads as another
//! route or refuses. Once valid, every value the schema types as an integer is written as
//! one (`integers`), and one no 64-bit integer can hold is refused.

use serde_json::{Map, Value};

use crate::catalog::ToolDef;
use crate::error::CallError;
use jsonschema::error::ValidationErrorKind;

/// Check `args`; the first problem becomes an `invalid_arguments` error. The validator reads
/// a `Value`: the arguments move into one and back rather than being copied (an upload's
/// base64 may be megabytes, and every call is checked).
pub fn validate(tool: &ToolDef, args: &mut Map<String, Value>) -> Result<(), CallError> {
    let mut instance = Value::Object(std::mem::take(args));
    let checked = check(tool, &instance).and_then(|()| integers(tool.input_schema(), &mut instance));
    let Value::Object(back) = instance else { unreachable!("an object was put in") };
    *args = back;
    checked
}

/// Write every number that `schema` types as an integer as an integer (`1.0` → `1`, `1E2` →
/// `100`, `-0` → `0`), or refuse one that is not a whole number a 64-bit integer holds. The
/// walk follows the schema (properties, items, additional properties and the branches of
/// `anyOf`/`oneOf`/`allOf`) with an explicit stack, so its cost is the arguments' size.
fn integers(schema: &Map<String, Value>, instance: &mut Value) -> Result<(), CallError> {
    let mut stack: Vec<(&Map<String, Value>, &mut Value, String)> = vec![(schema, instance, String::new())];
    while let Some((schema, value, at)) = stack.pop() {
        // The schema and the branches of its `anyOf`/`oneOf`/`allOf`, one level deep: a
        // number any of them types as an integer is one, and each member is walked by the
        // first of them that describes it.
        let mut forms = vec![schema];
        for key in ["anyOf", "oneOf", "allOf"] {
            forms.extend(
                schema.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object),
            );
        }
        if forms.iter().any(|f| says_integer(f)) {
            whole(value, &at)?;
        }
        match value {
            Value::Object(members) => {
                for (name, v) in members.iter_mut() {
                    let described = forms.iter().find_map(|f| {
                        let own = f.get("properties").and_then(Value::as_object).and_then(|p| p.get(name));
                        own.or_else(|| f.get("additionalProperties")).and_then(Value::as_object)
                    });
                    if let Some(s) = described.filter(|s| may_hold_integers(s)) {
                        stack.push((s, v, child(&at, name)));
                    }
                }
            }
            Value::Array(items) => {
                let described = forms.iter().find_map(|f| f.get("items").and_then(Value::as_object));
                if let Some(s) = described.filter(|s| may_hold_integers(s)) {
                    for (i, v) in items.iter_mut().enumerate() {
                        stack.push((s, v, format!("{at}/{i}")));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether a value of `schema` is or may contain an integer (strings and booleans never do).
fn may_hold_integers(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => !matches!(t.as_str(), "string" | "boolean" | "null"),
        _ => true,
    }
}

fn says_integer(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// `value`, a number the schema types as an integer, written as an integer.
fn whole(value: &mut Value, at: &str) -> Result<(), CallError> {
    let Value::Number(n) = value else { return Ok(()) };
    if n.is_i64() || n.is_u64() {
        return Ok(());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    // 2^63 and 2^64: the first numbers an i64 and a u64 cannot hold. Past 2^53 a number
    // written with a decimal point or an exponent was read as a float, which may already be
    // another integer than the one written (9007199254740993.0 reads as …992): refused, not
    // sent as what it became.
    const I64_END: f64 = 9_223_372_036_854_775_808.0;
    const U64_END: f64 = 18_446_744_073_709_551_616.0;
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let int = if f.fract() != 0.0 || !f.is_finite() || f.abs() >= EXACT {
        None
    } else if (-I64_END..I64_END).contains(&f) {
        Some(Value::from(f as i64))
    } else if (0.0..U64_END).contains(&f) {
        Some(Value::from(f as u64))
    } else {
        None
    };
    match int {
        Some(v) => {
            *value = v;
            Ok(())
        }
        None => {
            let name = if at.is_empty() { "the arguments".to_owned() } else { format!("`{at}`") };
            Err(CallError::invalid_argument(
                at,
                format!(
                    "{name}: must be a whole number that a 64-bit integer holds (past 2^53, written without a decimal point or exponent)"
                ),
            ))
        }
    }
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
    fn integers_written_as_decimals_or_exponents_are_sent_as_integers() {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let t = c.get("issueGetIssue").unwrap();
        for (given, sent) in
            [("1.0", "1"), ("1E2", "100"), ("-0", "0"), ("7", "7"), ("9007199254740993", "9007199254740993")]
        {
            let mut args: Map<String, Value> =
                serde_json::from_str(&format!(r#"{{"owner": "o", "repo": "r", "index": {given}}}"#)).unwrap();
            validate(t, &mut args).unwrap();
            assert_eq!(args["index"].to_string(), sent, "{given}");
        }
        // Too large for any 64-bit integer: refused, by its pointer.
        for given in ["1e300", "9007199254740993.0", "1e19"] {
            let mut args: Map<String, Value> =
                serde_json::from_str(&format!(r#"{{"owner": "o", "repo": "r", "index": {given}}}"#)).unwrap();
            let CallError::Result(f) = validate(t, &mut args).unwrap_err() else { panic!() };
            assert_eq!((f.kind, f.path.as_deref()), (ErrorKind::InvalidArguments, Some("/index")), "{given}");
        }
        let f = check("issueGetIssue", json!({"owner": "o", "repo": "r", "index": 1.5})).unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/index"));
        // In a query and inside a body: a milestone, a list of assignee team ids.
        let t = c.get("issueEditIssue").unwrap();
        let mut args: Map<String, Value> = serde_json::from_str(
            r#"{"owner": "o", "repo": "r", "index": 2.0, "body": {"milestone": 3E0, "title": "1.0"}}"#,
        )
        .unwrap();
        validate(t, &mut args).unwrap();
        assert_eq!(
            Value::Object(args.clone()),
            json!({"owner": "o", "repo": "r", "index": 2, "body": {"milestone": 3, "title": "1.0"}})
        );
        let t = c.get("issueListIssues").unwrap();
        let mut args: Map<String, Value> =
            serde_json::from_str(r#"{"owner": "o", "repo": "r", "page": 2.0, "limit": 1E1}"#).unwrap();
        validate(t, &mut args).unwrap();
        assert_eq!((args["page"].to_string(), args["limit"].to_string()), ("2".into(), "10".into()));
    }

    #[test]
    fn pointer_escapes_slash_and_tilde() {
        assert_eq!(child("", "a/b~c"), "/a~1b~0c");
    }
}
