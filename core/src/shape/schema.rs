//! The JSON Schema of `data` in each shape, from the same definitions and the same entity
//! table the stage reads: what the schema discovery tool answers as an operation's output.
//!
//! What the schema promises is what the pipeline does, not what the spec wishes:
//! - no member is required, and others may appear: the compact shape leaves empty members
//!   out, the forges leave some out and newer ones add some;
//! - in the full shape any member may be null: the forges write null where the specs say
//!   nothing of it (a pull request's `merged_by`, an issue's `assignees`);
//! - in the compact shape a nested entity is what identifies it (`entities::NESTED`), or the
//!   object itself, compacted, when that member is missing;
//! - `data` may also be a string, when the forge's answer was not JSON or was cut to a prefix
//!   of its text to fit the bounds (the envelope's `truncated` says so), and null when the
//!   answer had no body.
//!
//! Definitions are referenced as `#/$defs/NAME`, once each (a repository holds its parent
//! repository), and carried beside the envelope, at the schema's root.

use serde_json::{Map, Value, json};

use super::Shape;
use super::entities::{self, Nested};
use crate::catalog::results::{ONE_OR_A_LIST, Typed};
use crate::catalog::schema::{first_sentence, is_int_format, is_kept_keyword};
use crate::catalog::{Catalog, Operation, ResponseKind};

/// The schema of an operation's `data`, and the definitions it references.
#[derive(Debug)]
pub(crate) struct DataSchema {
    pub(crate) data: Value,
    pub(crate) defs: Map<String, Value>,
}

/// The schema of `data` for a success of `op` in `shape`.
pub(crate) fn data_schema(catalog: &Catalog, op: &Operation, shape: Shape) -> DataSchema {
    let mut b = Builder { catalog, shape, defs: Map::new(), todo: Vec::new(), read: Default::default() };
    let expected = match op.response {
        ResponseKind::Text => json!({"type": "string", "description": "The forge's text."}),
        ResponseKind::Binary => json!({
            "type": "object",
            "description": "Content that is not text, base64-encoded; text comes as a string. Without content_base64 when too large to inline: the envelope's link reads it.",
            "properties": {
                "content_base64": {"type": "string"},
                "content_type": {"type": "string"},
                "size": {"type": "integer", "minimum": 0}
            },
            "required": ["content_type", "size"],
            "additionalProperties": false
        }),
        ResponseKind::Redirect => json!({
            "type": "object",
            "description": "Where the forge redirects to.",
            "properties": {"location": {"type": ["string", "null"]}},
            "required": ["location"],
            "additionalProperties": false
        }),
        ResponseKind::Json => match &op.result {
            Some(t) if ONE_OR_A_LIST.contains(&op.id.as_str()) => {
                let one = b.top(t);
                json!({"anyOf": [one, {"type": "array", "items": one}]})
            }
            Some(t) => b.top(t),
            None => json!({"description": "JSON the spec does not type."}),
        },
    };
    b.drain();
    let otherwise = json!({
        "type": ["string", "null"],
        "description": "A string when the answer was not JSON or was cut to fit (see truncated); null when it had no body."
    });
    DataSchema { data: json!({"anyOf": [expected, otherwise]}), defs: b.defs }
}

struct Builder<'a> {
    catalog: &'a Catalog,
    shape: Shape,
    defs: Map<String, Value>,
    /// Definitions referenced and not yet converted.
    todo: Vec<String>,
    /// Definitions read from the spec, once each (every nested user asks for `User`).
    read: std::collections::HashMap<String, Option<Value>>,
}

impl Builder<'_> {
    /// The result itself: a definition, or a list of them.
    fn top(&mut self, t: &Typed) -> Value {
        let one = self.reference(&t.definition);
        if t.list { json!({"type": "array", "items": one}) } else { one }
    }

    fn reference(&mut self, name: &str) -> Value {
        if !self.defs.contains_key(name) && !self.todo.iter().any(|n| n == name) {
            self.todo.push(name.to_owned());
        }
        json!({"$ref": format!("#/$defs/{name}")})
    }

    /// Convert every definition referenced, and those they reference.
    fn drain(&mut self) {
        while let Some(name) = self.todo.pop() {
            if self.defs.contains_key(&name) {
                continue;
            }
            // Claimed before converting, so that a definition holding itself is done once.
            self.defs.insert(name.clone(), Value::Null);
            let mut converted = match self.definition(&name) {
                Some(src) => self.convert(&src),
                None => json!({}),
            };
            // The Go type's doc ("Issue represents an issue in a repository") says nothing.
            if converted.get("description").and_then(Value::as_str).is_some_and(|d| d.starts_with(&name))
                && let Value::Object(m) = &mut converted
            {
                m.remove("description");
            }
            if self.shape == Shape::Compact && entities::AUTHORED.contains(&name.as_str()) {
                relation_member(&mut converted);
            }
            self.defs.insert(name, converted);
        }
    }

    /// Definition `name` of the spec, parsed at its first use.
    fn definition(&mut self, name: &str) -> Option<Value> {
        let catalog = self.catalog;
        self.read.entry(name.to_owned()).or_insert_with(|| catalog.definition_schema(name)).clone()
    }

    /// A schema of the spec in the rendered shape: its JSON Schema keywords, its members
    /// as `member` renders them, nothing required.
    fn convert(&mut self, src: &Value) -> Value {
        if let Some(name) = crate::catalog::spec::definition_name(src) {
            return self.reference(name);
        }
        let Value::Object(src) = src else { return src.clone() };
        let mut out = Map::new();
        for (k, v) in src {
            match (k.as_str(), v) {
                ("properties", Value::Object(props)) => {
                    let full = self.shape == Shape::Full;
                    let members = props
                        .iter()
                        .filter(|(n, _)| full || !left_out(n))
                        .map(|(n, s)| (n.clone(), self.member(s)))
                        .collect();
                    out.insert(k.clone(), Value::Object(members));
                }
                ("items", _) => {
                    out.insert(k.clone(), self.convert(v));
                }
                ("additionalProperties", Value::Object(_)) => {
                    out.insert(k.clone(), self.member(v));
                }
                ("allOf" | "anyOf" | "oneOf", Value::Array(list)) => {
                    out.insert(k.clone(), Value::Array(list.iter().map(|s| self.convert(s)).collect()));
                }
                ("description", Value::String(d)) => {
                    out.insert(k.clone(), first_sentence(d).into());
                }
                ("type", _) if v == "file" => {
                    out.insert(k.clone(), "string".into());
                }
                ("format", _) if is_int_format(v) => {}
                ("required", _) | ("default", _) => {}
                (k, _) if is_kept_keyword(k) => {
                    out.insert(k.to_owned(), v.clone());
                }
                _ => {}
            }
        }
        Value::Object(out)
    }

    /// One member of an object: reduced to its identity when it is a nested entity in the
    /// compact shape, nullable in the full shape.
    fn member(&mut self, src: &Value) -> Value {
        let held = Typed::of(src);
        if self.shape == Shape::Compact
            && let Some(t) = &held
            && let Some(Nested::Identify(ids)) = entities::nested(&t.definition)
        {
            let one = self.identity(&t.definition, ids);
            return if t.list { json!({"type": "array", "items": one}) } else { one };
        }
        let converted = self.convert(src);
        match self.shape {
            Shape::Compact => converted,
            Shape::Full => nullable(converted),
        }
    }

    /// What a nested entity is in the compact shape: the value of its one identifying member,
    /// or an object of them; the object itself when that member is missing.
    fn identity(&mut self, name: &str, ids: &[&str]) -> Value {
        let def = self.definition(name).unwrap_or(Value::Null);
        let type_of = |id: &str| def["properties"][id]["type"].as_str().unwrap_or("string").to_owned();
        let said = format!("A {name}: its {}.", ids.join(" and "));
        if let [id] = ids {
            return json!({"type": [type_of(id), "object"], "description": said});
        }
        let props: Map<String, Value> =
            ids.iter().map(|id| ((*id).to_owned(), json!({"type": type_of(id)}))).collect();
        json!({"type": "object", "description": said, "properties": props})
    }
}

/// The member the trust pass adds to an authored item (`trust::RELATION`), among its
/// properties.
fn relation_member(schema: &mut Value) {
    let relations: Vec<&str> = super::trust::Relation::ALL.iter().map(|r| r.as_str()).collect();
    let member = json!({
        "enum": relations,
        "description": "The author's relation to the repository (CONTENT_TRUST): owner, collaborator, member (may write through a team), none, or unknown (it could not be looked up)."
    });
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(super::trust::RELATION.to_owned(), member);
    }
}

/// Members the compact shape leaves out wherever they are (`html_url` it keeps on the
/// top-level item: it is listed, as every member not left out is).
fn left_out(name: &str) -> bool {
    entities::DERIVABLE_URLS.contains(&name) || entities::DUPLICATES.iter().any(|(dup, _)| *dup == name)
}

/// A member's schema that also admits null.
fn nullable(mut schema: Value) -> Value {
    let Value::Object(m) = &mut schema else { return schema };
    if m.contains_key("$ref") {
        return json!({"anyOf": [schema, {"type": "null"}]});
    }
    match m.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => types.push("null".into()),
        _ => {}
    }
    if let Some(Value::Array(values)) = m.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;

    fn catalog(flavor: Flavor) -> Catalog {
        Catalog::build(flavor.embedded_spec(), flavor, None).unwrap()
    }

    fn op<'c>(c: &'c Catalog, id: &str) -> &'c Operation {
        c.get(id).and_then(|t| t.operation()).unwrap()
    }

    #[test]
    fn an_issue_listing_is_a_list_of_issues_whose_nested_users_and_labels_are_their_names() {
        let c = catalog(Flavor::Gitea);
        let s = data_schema(&c, op(&c, "issueListIssues"), Shape::Compact);
        assert_eq!(s.data["anyOf"][0], json!({"type": "array", "items": {"$ref": "#/$defs/Issue"}}));
        let issue = &s.defs["Issue"]["properties"];
        assert_eq!(issue["user"]["type"], json!(["string", "object"]), "{issue}");
        assert_eq!(issue["labels"]["items"]["type"], json!(["string", "object"]));
        assert_eq!(issue["milestone"]["properties"]["title"], json!({"type": "string"}));
        assert!(issue.get("url").is_none() && issue.get("assignee").is_none());
        assert!(issue.get("html_url").is_some());
        assert_eq!(
            issue["author_relation"]["enum"],
            json!(["owner", "member", "collaborator", "none", "unknown"])
        );
        // Nothing nested by identity needs its definition.
        assert!(!s.defs.contains_key("User") && !s.defs.contains_key("Label"), "{:?}", s.defs.keys());
    }

    #[test]
    fn the_full_shape_references_every_definition_once_and_admits_null_members() {
        let c = catalog(Flavor::Forgejo);
        let s = data_schema(&c, op(&c, "repoGet"), Shape::Full);
        assert_eq!(s.data["anyOf"][0], json!({"$ref": "#/$defs/Repository"}));
        let repo = &s.defs["Repository"]["properties"];
        assert_eq!(repo["owner"], json!({"anyOf": [{"$ref": "#/$defs/User"}, {"type": "null"}]}));
        assert_eq!(repo["parent"]["anyOf"][0], json!({"$ref": "#/$defs/Repository"}));
        assert_eq!(repo["name"]["type"], json!(["string", "null"]));
        assert!(s.defs.contains_key("User") && s.defs.contains_key("Permission"));
        // Every reference resolves.
        let text = Value::Object(s.defs.clone()).to_string();
        for part in text.split("#/$defs/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(s.defs.contains_key(name), "{name} is referenced and not defined");
        }
    }

    #[test]
    fn every_operation_of_both_specs_has_a_schema_that_compiles_in_both_shapes_and_fits_an_answer() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = catalog(flavor);
            for t in c.operations() {
                for shape in [Shape::Compact, Shape::Full] {
                    let s = data_schema(&c, t.operation().unwrap(), shape);
                    let Value::Object(whole) = crate::envelope::schema::exact(s.data, s.defs) else {
                        panic!()
                    };
                    crate::catalog::schema::compile(&whole)
                        .unwrap_or_else(|e| panic!("{flavor:?} {} {shape:?}: {e}", t.name));
                    // The schema tool's answer holds it beside the input schema, within the
                    // default bound of 40,000 characters (the largest is 17,000).
                    let chars = Value::Object(whole).to_string().len();
                    assert!(chars < 25_000, "{flavor:?} {} {shape:?}: {chars} characters", t.name);
                }
            }
        }
    }
}
