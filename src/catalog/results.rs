//! What the forge answers, typed by the spec's definitions: each operation's result type,
//! and per definition its members and which of them hold another definition (one or a list).
//!
//! The shape stage reads this to reduce the entities nested in a result and field selection
//! to name the members that exist. Read once at start from the definitions' text: only the
//! `properties` and their `$ref`s are parsed, the rest is skipped.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::spec::{Spec, definition_name};

/// A value of a definition: one, or a list of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    pub definition: String,
    pub list: bool,
}

impl Typed {
    /// The type a schema names: `$ref` to a definition, or an array of them.
    pub fn of(schema: &Value) -> Option<Typed> {
        if let Some(name) = definition_name(schema) {
            return Some(Typed { definition: name.to_owned(), list: false });
        }
        let items =
            schema.get("items").filter(|_| schema.get("type").and_then(Value::as_str) == Some("array"))?;
        definition_name(items).map(|name| Typed { definition: name.to_owned(), list: true })
    }
}

/// One definition's members in the spec's order, each with the definition it holds if any.
#[derive(Debug, Default)]
pub struct Definition {
    pub members: Vec<(String, Option<Typed>)>,
}

impl Definition {
    /// The type of member `name`, when it holds a definition.
    pub fn member(&self, name: &str) -> Option<&Typed> {
        self.members.iter().find(|(n, _)| n == name).and_then(|(_, t)| t.as_ref())
    }

    pub fn has(&self, name: &str) -> bool {
        self.members.iter().any(|(n, _)| n == name)
    }
}

/// Every definition of a spec, by name.
#[derive(Debug, Default)]
pub struct Definitions(HashMap<String, Definition>);

#[derive(Deserialize)]
struct Properties {
    #[serde(default)]
    properties: serde_json::Map<String, Value>,
}

impl Definitions {
    pub fn of(spec: &Spec) -> Definitions {
        let read = |text: &str| {
            let props = serde_json::from_str::<Properties>(text).map(|p| p.properties).unwrap_or_default();
            let members = props.iter().map(|(name, schema)| (name.clone(), Typed::of(schema))).collect();
            Definition { members }
        };
        Definitions(spec.definition_texts().map(|(name, text)| (name.to_owned(), read(text))).collect())
    }

    pub fn get(&self, name: &str) -> Option<&Definition> {
        self.0.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every definition some member of another holds: those a result can carry nested.
    pub fn nested(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self
            .0
            .values()
            .flat_map(|d| d.members.iter().filter_map(|(_, t)| t.as_ref()))
            .map(|t| t.definition.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }
}

/// The result type of an operation: the schema of its first success response with one.
pub fn result_of(responses: &serde_json::Map<String, Value>, spec: &Spec) -> Option<Typed> {
    responses
        .iter()
        .filter(|(code, _)| code.starts_with('2'))
        .find_map(|(_, r)| spec.response(r).get("schema").and_then(Typed::of))
}
