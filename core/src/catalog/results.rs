//! What the forge answers, typed by the spec's definitions: each operation's result type,
//! and per definition its members and which of them hold another definition (one or a list).
//!
//! The shape stage reads this to reduce the entities nested in a result and field selection
//! to name the members that exist. Read from the definitions' text at the first result that
//! needs them: only the `properties` and their `$ref`s are parsed, the rest is skipped.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::spec::{Spec, definition_name};

/// The arguments every tool that answers JSON takes for its result (the shape stage reads
/// them; the catalog offers them in the tools' schemas).
pub(crate) const SHAPE_ARGUMENT: &str = "shape";
pub(crate) const FIELDS_ARGUMENT: &str = "fields";
/// At most this many member paths, each at most `MAX_PATH_CHARS` long.
pub(crate) const MAX_FIELDS: usize = 64;
pub(crate) const MAX_PATH_CHARS: usize = 200;

/// A value of a definition: one, or a list of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    pub(crate) definition: String,
    pub list: bool,
}

impl Typed {
    /// The type a schema names: `$ref` to a definition, or an array of them.
    pub(crate) fn of(schema: &Value) -> Option<Typed> {
        if let Some(name) = definition_name(schema) {
            return Some(Typed { definition: name.to_owned(), list: false });
        }
        let items =
            schema.get("items").filter(|_| schema.get("type").and_then(Value::as_str) == Some("array"))?;
        definition_name(items).map(|name| Typed { definition: name.to_owned(), list: true })
    }
}

/// One definition's members in the spec's order, each with the definition it holds if any,
/// and found by name in constant time (the shape stage asks for every member of every object).
#[derive(Debug, Default)]
pub(crate) struct Definition {
    pub(crate) members: Vec<(String, Option<Typed>)>,
    by_name: HashMap<String, usize>,
}

impl Definition {
    fn new(members: Vec<(String, Option<Typed>)>) -> Definition {
        let by_name = members.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        Definition { members, by_name }
    }

    /// The type of member `name`, when it holds a definition.
    pub(crate) fn member(&self, name: &str) -> Option<&Typed> {
        self.by_name.get(name).and_then(|&i| self.members[i].1.as_ref())
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
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
    pub(crate) fn of(spec: &Spec) -> Definitions {
        let read = |text: &str| {
            let props = serde_json::from_str::<Properties>(text).map(|p| p.properties).unwrap_or_default();
            Definition::new(props.iter().map(|(name, schema)| (name.clone(), Typed::of(schema))).collect())
        };
        Definitions(spec.definition_texts().map(|(name, text)| (name.to_owned(), read(text))).collect())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Definition> {
        self.0.get(name)
    }

    #[cfg(test)]
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every definition some member of another holds: those a result can carry nested.
    #[cfg(test)]
    pub(crate) fn nested(&self) -> impl Iterator<Item = &str> {
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

/// Operations whose spec declares one of a definition where the forge answers a list of
/// them for some arguments: the contents of a directory are its entries (both forges'
/// `routers/api/v1/repo/file.go`, `GetContents`: a directory is answered with a list). The
/// shape stage renders either alike; their output schemas admit both.
pub(crate) const ONE_OR_A_LIST: &[&str] = &["repoGetContents"];

/// The result type of an operation: the schema of its first success response with one.
pub(crate) fn result_of(responses: &serde_json::Map<String, Value>, spec: &Spec) -> Option<Typed> {
    responses
        .iter()
        .filter(|(code, _)| code.starts_with('2'))
        .find_map(|(_, r)| spec.response(r).get("schema").and_then(Typed::of))
}
