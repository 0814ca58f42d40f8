//! Input JSON Schemas for tools, built from Swagger parameters.
//!
//! Path and query parameters are top-level properties, the JSON body is `body`, a file
//! upload is `{content_base64, filename, content_type}`. Every `$ref` the operation reaches
//! is inlined (clients differ in how well they follow references; inlining leaves nothing to
//! follow and nothing unreachable), and Swagger-only keywords (`x-go-name`, `example`,
//! `readOnly`, `discriminator`, …) are dropped. The result is valid both as draft 4 and as
//! 2020-12, the MCP default; we validate with 2020-12 and the linear-time `regex` engine.

use serde_json::{Map, Value, json};

use super::operation::{Location, Operation};
use super::spec::Spec;
use crate::error::Shown;

/// Keywords kept from Swagger schemas. Everything else is noise to a JSON Schema client.
const KEPT: &[&str] = &[
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "description",
];

/// Whether `keyword` is one of the JSON Schema keywords kept from the spec's schemas.
pub(crate) fn is_kept_keyword(keyword: &str) -> bool {
    KEPT.contains(&keyword)
}

/// The input schema of one operation, from its parameters as the spec declares them.
pub(crate) fn input_schema(
    parameters: &[Map<String, Value>],
    op: &Operation,
    spec: &Spec,
) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for p in parameters {
        let name = match p.get("in").and_then(Value::as_str) {
            Some("body") => "body",
            Some("path" | "query" | "formData") => p.get("name").and_then(Value::as_str).unwrap_or(""),
            _ => continue,
        };
        let Some(param) = op.param(name) else {
            continue;
        };
        let mut prop = match param.location {
            Location::Body => {
                let mut s = clean(p.get("schema").unwrap_or(&Value::Bool(true)), spec, &mut Vec::new());
                if let (Some(d), Value::Object(m)) = (p.get("description").and_then(Value::as_str), &mut s) {
                    m.entry("description").or_insert_with(|| d.into());
                }
                s
            }
            Location::FormFile => file_schema(p.get("description").and_then(Value::as_str)),
            _ => simple_param(p),
        };
        if param.location == Location::Path {
            if let Value::Object(m) = &mut prop {
                if m.get("type").and_then(Value::as_str) == Some("string") {
                    m.entry("minLength").or_insert(json!(1));
                }
                if param.wildcard {
                    let d = m.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.');
                    let d = if d.is_empty() {
                        "May contain '/'.".to_owned()
                    } else {
                        format!("{d}. May contain '/'.")
                    };
                    m.insert("description".into(), d.into());
                }
            }
        }
        if param.required {
            required.push(Value::String(name.to_owned()));
        }
        properties.insert(name.to_owned(), prop);
    }
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    schema
}

/// The schema of an uploaded file argument.
pub(crate) fn file_schema(description: Option<&str>) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {
            "content_base64": {"type": "string", "description": "The file's bytes, base64-encoded."},
            "filename": {"type": "string", "description": "File name sent to the forge."},
            "content_type": {"type": "string", "description": "Media type, default application/octet-stream."}
        },
        "required": ["content_base64"],
        "additionalProperties": false
    });
    if let Some(d) = description {
        s["description"] = d.into();
    }
    s
}

/// A non-body parameter: its own keywords, and `items` for arrays.
fn simple_param(p: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (k, v) in p {
        match k.as_str() {
            "items" => {
                if let Value::Object(items) = v {
                    out.insert("items".into(), simple_param(items));
                }
            }
            "exclusiveMinimum" | "exclusiveMaximum" => {} // folded below
            "format" if is_int_format(v) => {}
            k if KEPT.contains(&k) => {
                out.insert(k.to_owned(), v.clone());
            }
            _ => {}
        }
    }
    fold_exclusive_bounds(p, &mut out);
    Value::Object(out)
}

/// `int64`/`int32` say nothing a JSON client can use (JSON numbers are not sized); other
/// formats (`date-time`, `email`) do.
/// The Go widths Swagger writes as formats (`int64`): JSON Schema knows no such format.
pub(crate) fn is_int_format(v: &Value) -> bool {
    matches!(v.as_str(), Some("int64" | "int32"))
}

/// Swagger/draft-4 boolean `exclusiveMinimum` becomes the 2020-12 number form.
fn fold_exclusive_bounds(src: &Map<String, Value>, out: &mut Map<String, Value>) {
    for (flag, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        if src.get(flag).and_then(Value::as_bool) == Some(true) {
            if let Some(b) = out.remove(bound) {
                out.insert(flag.to_owned(), b);
            }
        }
    }
}

/// Clean a body schema: inline `$ref`s (a reference back into a definition being inlined
/// becomes an open object), keep only JSON Schema keywords, recurse into subschemas.
fn clean(schema: &Value, spec: &Spec, stack: &mut Vec<String>) -> Value {
    let Value::Object(src) = schema else {
        return schema.clone();
    };
    if let Some(name) = super::spec::definition_name(schema) {
        if stack.iter().any(|s| s == name) {
            return json!({"type": "object", "description": format!("A {name} (recursive; any object is accepted).")});
        }
        let Some(target) = spec.definition(schema) else {
            return json!({});
        };
        stack.push(name.to_owned());
        let mut inlined = clean(&target, spec, stack);
        stack.pop();
        if let (Some(d), Value::Object(m)) = (src.get("description"), &mut inlined) {
            m.entry("description").or_insert_with(|| d.clone());
        }
        return inlined;
    }
    let mut out = Map::new();
    for (k, v) in src {
        match k.as_str() {
            "properties" => {
                if let Value::Object(props) = v {
                    let cleaned = props.iter().map(|(n, s)| (n.clone(), clean(s, spec, stack))).collect();
                    out.insert(k.clone(), Value::Object(cleaned));
                }
            }
            "items" | "additionalProperties" => {
                out.insert(k.clone(), if v.is_object() { clean(v, spec, stack) } else { v.clone() });
            }
            "allOf" | "anyOf" | "oneOf" => {
                if let Value::Array(list) = v {
                    out.insert(k.clone(), Value::Array(list.iter().map(|s| clean(s, spec, stack)).collect()));
                }
            }
            "required" => {
                if v.as_array().is_some_and(|a| !a.is_empty()) {
                    out.insert(k.clone(), v.clone());
                }
            }
            "type" if v == "file" => {
                out.insert(k.clone(), "string".into());
            }
            "format" if is_int_format(v) => {}
            k if KEPT.contains(&k) => {
                out.insert(k.to_owned(), v.clone());
            }
            _ => {}
        }
    }
    fold_exclusive_bounds(src, &mut out);
    Value::Object(out)
}

/// The first sentence of a description, at most `MAX_SENTENCE` characters (cut at a word,
/// marked with `…`). Spec descriptions run to paragraphs; a client pays for every byte of
/// `tools/list`, and the discovery schema tool has the rest.
pub(crate) fn first_sentence(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    let mut end = line.len();
    for (i, _) in line.match_indices(". ") {
        // "e.g. x", "1. x" and "v1.2. x" are not sentence ends; a lower-case letter or a
        // closing bracket before the dot usually is.
        let before = line[..i].chars().last().unwrap_or(' ');
        let word = line[..i].rsplit(' ').next().unwrap_or("");
        if (before.is_ascii_lowercase() || before == ')' || before == '`')
            && !["e.g", "i.e", "etc", "vs"].contains(&word)
        {
            end = i + 1;
            break;
        }
    }
    let sentence = &line[..end];
    if sentence.chars().count() <= MAX_SENTENCE {
        return sentence.to_owned();
    }
    let cut: String = sentence.chars().take(MAX_SENTENCE).collect();
    let cut = cut.rsplit_once(' ').map(|(a, _)| a).unwrap_or(&cut);
    format!("{}…", cut.trim_end_matches([',', ';', ':']))
}

const MAX_SENTENCE: usize = 160;

/// Descriptions of the arguments most tools share, said once the same way everywhere.
const COMMON_ARGUMENTS: &[(&str, &str)] = &[
    ("owner", "Owner of the repository."),
    ("repo", "Name of the repository."),
    ("page", "Page number (1-based)."),
    ("limit", "Page size."),
];

/// The schema `tools/list` shows: the validation schema with every `description` cut to
/// its first sentence, the Go type docs of objects and enums ("CreateFileOptions options for
/// creating a file") dropped, and the common arguments described alike. What tells a client
/// nothing it would write differently is left out too: `additionalProperties: false`, a
/// `minLength` of 1, and members described as deprecated. The validator keeps all of it, so
/// an unknown, empty or deprecated argument is judged exactly as before; every other
/// constraint is listed as it is.
pub(crate) fn lean(schema: &Map<String, Value>) -> Map<String, Value> {
    fn object(m: &Map<String, Value>) -> Map<String, Value> {
        // Only the description of an object or an enum is a copied type doc ("ReviewStateType
        // review state type"); a field's ("DefaultBranch of the repository") says what the
        // field is.
        let typed = m.get("type").and_then(Value::as_str) == Some("object") || m.contains_key("enum");
        m.iter()
            .filter(|(k, x)| !(typed && k.as_str() == "description" && x.as_str().is_some_and(names_a_type)))
            .map(|(k, x)| match (k.as_str(), x) {
                ("description", Value::String(d)) => (k.clone(), Value::String(first_sentence(d))),
                // Property names are data, not keywords: keep them, lean their schemas.
                ("properties", Value::Object(props)) => {
                    (k.clone(), Value::Object(props.iter().map(|(n, s)| (n.clone(), go(s))).collect()))
                }
                ("enum" | "default", _) => (k.clone(), x.clone()),
                _ => (k.clone(), go(x)),
            })
            .collect()
    }
    fn go(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(object(m)),
            Value::Array(a) => Value::Array(a.iter().map(go).collect()),
            other => other.clone(),
        }
    }
    let mut out = unwritten_left_out(&object(schema));
    if let Some(Value::Object(props)) = out.get_mut("properties") {
        for (name, text) in COMMON_ARGUMENTS {
            if let Some(Value::Object(p)) = props.get_mut(*name) {
                if p.get("type").and_then(Value::as_str) != Some("object") {
                    p.insert("description".into(), (*text).into());
                }
            }
        }
    }
    out
}

/// A schema for `tools/list` without what tells a client nothing it would write differently:
/// `additionalProperties: false`, a `minLength` of 1, members described as deprecated (at
/// every depth). The validator keeps them all.
pub(crate) fn unwritten_left_out(schema: &Map<String, Value>) -> Map<String, Value> {
    fn go(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(unwritten_left_out(m)),
            Value::Array(a) => Value::Array(a.iter().map(go).collect()),
            other => other.clone(),
        }
    }
    schema
        .iter()
        .filter(|(k, x)| match k.as_str() {
            "additionalProperties" => *x != &Value::Bool(false),
            "minLength" => x.as_u64() != Some(1),
            _ => true,
        })
        .map(|(k, x)| match (k.as_str(), x) {
            ("properties", Value::Object(props)) => (
                k.clone(),
                Value::Object(
                    props.iter().filter(|(_, s)| !deprecated(s)).map(|(n, s)| (n.clone(), go(s))).collect(),
                ),
            ),
            ("enum" | "default" | "required", _) => (k.clone(), x.clone()),
            _ => (k.clone(), go(x)),
        })
        .collect()
}

/// Whether a member's description says it is deprecated (`"deprecated"`, `"Deprecated: use …"`).
fn deprecated(schema: &Value) -> bool {
    schema
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| d.trim_start().get(..10).is_some_and(|w| w.eq_ignore_ascii_case("deprecated")))
}

/// Whether a description starts with a Go type name (`CreateFileOptions …`,
/// `ChangeFileOperation …`): Swagger generators copy type docs, which tell a client nothing.
fn names_a_type(d: &str) -> bool {
    let first = d.split_whitespace().next().unwrap_or("");
    let mut chars = first.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && first.chars().all(|c| c.is_ascii_alphanumeric())
        && first.chars().skip(1).any(|c| c.is_ascii_uppercase())
        && first.chars().any(|c| c.is_ascii_lowercase())
}

/// Compile a validator: 2020-12 semantics, no remote references, linear-time regexes.
pub(crate) fn compile(schema: &Map<String, Value>) -> Result<jsonschema::Validator, Shown> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&Value::Object(schema.clone()))
        .map_err(|e| format!("its input schema does not compile: {e}"))
}

#[cfg(test)]
mod tests {
    use crate::catalog::{Catalog, Flavor};
    use serde_json::Value;

    fn walk<'a>(v: &'a Value, out: &mut Vec<(String, &'a Value)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    out.push((k.clone(), x));
                    walk(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }

    #[test]
    fn no_reference_or_swagger_noise_survives_in_any_schema() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            for t in c.all_tools() {
                let mut keys = Vec::new();
                let schema = Value::Object((**t.input_schema()).clone());
                walk(&schema, &mut keys);
                for (k, _) in keys {
                    // Property names can be anything; the keywords we check never name properties
                    // in these specs, so a hit is a leak of a keyword.
                    assert!(
                        !(k == "$ref" || k.starts_with("x-go") || k == "example" || k == "discriminator"),
                        "{}: {k}",
                        t.name
                    );
                }
            }
        }
    }

    #[test]
    fn create_issue_schema_has_path_params_and_an_inlined_body() {
        let c = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let s = &c.get("issueCreateIssue").unwrap().input_schema();
        assert_eq!(s["required"], serde_json::json!(["owner", "repo", "body"]));
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["owner"]["type"], "string");
        assert_eq!(s["properties"]["body"]["properties"]["title"]["type"], "string");
        assert!(s["properties"]["body"]["required"].as_array().unwrap().contains(&"title".into()));
    }

    #[test]
    fn upload_field_is_a_base64_object_and_wildcards_say_so() {
        let c = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let s = &c.get("issueCreateIssueAttachment").unwrap().input_schema();
        assert_eq!(s["properties"]["attachment"]["required"], serde_json::json!(["content_base64"]));
        let f = &c.get("repoGetContents").unwrap().input_schema();
        assert!(f["properties"]["filepath"]["description"].as_str().unwrap().contains("May contain '/'"));
    }
}
