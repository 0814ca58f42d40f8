//! The Swagger 2.0 document as read: just enough structure to generate tools.
//!
//! No maintained crate parses Swagger 2.0, and we need little of it: operations with their
//! parameters, `consumes`, `produces`, success responses, and the `definitions` / `responses` that
//! `$ref`s point into. Schemas stay `serde_json::Value` because they become input schemas.
//!
//! Read for a fast start with little memory: the document is checked and scanned once,
//! borrowing from its bytes (which live as long as the process); each operation is read into
//! a small struct, and a definition is parsed only when an input schema follows a `$ref` to it
//! — most definitions describe answers, which no input schema needs.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::CatalogError;
use crate::error::Shown;

/// One operation as the spec declares it.
#[derive(Debug)]
pub(crate) struct RawOperation {
    pub(crate) id: String,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) summary: String,
    pub(crate) description: String,
    pub(crate) tags: Vec<String>,
    pub(crate) parameters: Vec<ParamDoc>,
    /// The media types the operation accepts as its body; empty: the spec's.
    pub(crate) consumes: Vec<String>,
    pub(crate) produces: Vec<String>,
    pub(crate) responses: Map<String, Value>,
    pub(crate) deprecated: bool,
}

/// The parts of the spec the generator reads.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) info_version: String,
    /// The media types every operation accepts unless it names its own.
    pub(crate) consumes: Vec<String>,
    pub(crate) produces: Vec<String>,
    /// Each operation's text, in the order the operations were read: its parameters are read again
    /// when its tool's schema is built, rather than kept.
    texts: Vec<&'static RawValue>,
    /// Each definition's text, parsed when a reference is followed.
    definitions: HashMap<String, &'static RawValue>,
    pub(crate) responses: Map<String, Value>,
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// An object's members in document order, each value left unparsed.
struct Entries(Vec<(String, &'static RawValue)>);

impl<'de: 'static> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct Members;
        impl<'de: 'static> Visitor<'de> for Members {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Entries, M::Error> {
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some(entry) = m.next_entry::<String, &'static RawValue>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Members)
    }
}

impl Entries {
    /// The members of an object, or `None` when `raw` is not one.
    fn of(raw: &'static RawValue) -> Option<Entries> {
        serde_json::from_str(raw.get()).ok()
    }
}

/// The members of an operation the generator reads; the rest is skipped unparsed.
#[derive(Deserialize)]
struct OperationDoc {
    #[serde(rename = "operationId", default)]
    id: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    parameters: Vec<ParamDoc>,
    #[serde(default)]
    consumes: Vec<String>,
    #[serde(default)]
    produces: Vec<String>,
    #[serde(default)]
    responses: Map<String, Value>,
    #[serde(default)]
    deprecated: bool,
}

/// What the catalog reads of a parameter to plan a call; its schema keywords are read again
/// when the tool's input schema is built.
#[derive(Debug, Deserialize)]
pub(crate) struct ParamDoc {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(rename = "in", default)]
    pub(crate) location: Option<String>,
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) required: bool,
    #[serde(rename = "collectionFormat", default)]
    pub(crate) collection_format: Option<String>,
    /// A body's schema (usually a reference to a definition).
    #[serde(default)]
    pub(crate) schema: Option<Value>,
}

/// Only an operation's parameters.
#[derive(Deserialize)]
struct ParametersOnly {
    #[serde(default)]
    parameters: Vec<Value>,
}

/// Only whether a definition lists required members.
#[derive(Deserialize)]
struct RequiredOnly {
    #[serde(default)]
    required: Vec<serde::de::IgnoredAny>,
}

impl Spec {
    /// Parse and check the shape of a Swagger 2.0 document: the spec, and its operations as
    /// read (the catalog turns them into tools; the spec keeps only what schemas need later).
    /// The bytes are borrowed for as long as the spec lives: embedded specs are static, a spec
    /// file is read once.
    pub(crate) fn parse(bytes: &'static [u8]) -> Result<(Spec, Vec<RawOperation>), CatalogError> {
        let top: Entries = serde_json::from_slice(bytes).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => {
                CatalogError::Shape("the document is not a JSON object".into())
            }
            _ => CatalogError::Json(e.to_string()),
        })?;
        let member = |key: &str| top.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let value = |key: &str| member(key).and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
        if value("swagger").as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(CatalogError::Shape("`swagger` must be \"2.0\"".into()));
        }
        let info_version = value("info")
            .as_ref()
            .and_then(|i| i.get("version"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let consumes = strings(value("consumes").as_ref());
        let produces = strings(value("produces").as_ref());
        let definitions = member("definitions").and_then(Entries::of).map(|e| e.0.into_iter().collect());
        let responses = match value("responses") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let paths = member("paths")
            .and_then(Entries::of)
            .ok_or_else(|| CatalogError::Shape("`paths` is missing".into()))?;
        let mut operations = Vec::new();
        let mut texts = Vec::new();
        for (path, item) in paths.0 {
            let Some(item) = Entries::of(item) else { continue };
            for (method, op) in item.0 {
                if !METHODS.contains(&method.as_str()) {
                    continue;
                }
                let name = || format!("{} {path}", method.to_uppercase());
                let doc: OperationDoc = serde_json::from_str(op.get())
                    .map_err(|e| CatalogError::Operation { op: name(), msg: e.to_string() })?;
                let id = doc.id.filter(|s| !s.is_empty()).ok_or_else(|| CatalogError::Operation {
                    op: name(),
                    msg: "has no operationId".into(),
                })?;
                let text = |t: Option<String>| t.map(|t| t.trim().to_owned()).unwrap_or_default();
                texts.push(op);
                operations.push(RawOperation {
                    summary: text(doc.summary),
                    description: text(doc.description),
                    tags: doc.tags,
                    consumes: doc.consumes,
                    produces: doc.produces,
                    responses: doc.responses,
                    deprecated: doc.deprecated,
                    parameters: doc.parameters,
                    id,
                    method: method.to_uppercase(),
                    path: path.clone(),
                });
            }
        }
        let spec = Spec {
            info_version,
            consumes,
            produces,
            texts,
            definitions: definitions.unwrap_or_default(),
            responses,
        };
        Ok((spec, operations))
    }

    /// The parameters of operation `index` (its place in `operations` as read), read again
    /// from the document.
    pub(crate) fn parameters(&self, index: usize) -> Vec<Map<String, Value>> {
        self.texts
            .get(index)
            .and_then(|raw| serde_json::from_str::<ParametersOnly>(raw.get()).ok())
            .map(|p| objects(p.parameters))
            .unwrap_or_default()
    }

    /// Follow a `#/responses/X` reference (one level, as the specs use them).
    pub(crate) fn response<'a>(&'a self, r: &'a Value) -> &'a Value {
        match r.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix("#/responses/")) {
            Some(name) => self.responses.get(name).unwrap_or(r),
            None => r,
        }
    }

    /// The definition a `#/definitions/X` reference names, parsed (`None`: not a reference to
    /// a definition the spec has, or one that is not JSON this parser takes).
    pub(crate) fn definition(&self, schema: &Value) -> Option<Value> {
        let raw = self.definitions.get(definition_name(schema)?)?;
        serde_json::from_str(raw.get()).ok()
    }

    /// Every definition's name and unparsed text.
    pub(crate) fn definition_texts(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.definitions.iter().map(|(name, raw)| (name.as_str(), raw.get()))
    }

    /// Whether `schema` (or the definition it refers to) lists required members, read
    /// without building the definition.
    pub(crate) fn has_required(&self, schema: &Value) -> bool {
        match definition_name(schema) {
            Some(name) => self
                .definitions
                .get(name)
                .and_then(|raw| serde_json::from_str::<RequiredOnly>(raw.get()).ok())
                .is_some_and(|r| !r.required.is_empty()),
            None => schema.get("required").and_then(Value::as_array).is_some_and(|r| !r.is_empty()),
        }
    }
}

/// The spec to read: the file at `path`, else the one embedded for `flavor`; or why the file
/// cannot be read. A file is read once and kept for the life of the process, since the
/// catalog borrows from it.
pub fn bytes(path: Option<&std::path::Path>, flavor: super::Flavor) -> Result<&'static [u8], Shown> {
    match path {
        Some(p) => std::fs::read(p)
            .map(|b| &*b.leak())
            .map_err(|e| format!("cannot read the spec {}: {}", p.display(), e.kind())),
        None => Ok(flavor.embedded_spec()),
    }
}

/// The name in a `#/definitions/X` reference.
pub(crate) fn definition_name(schema: &Value) -> Option<&str> {
    schema.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix("#/definitions/"))
}

fn objects(values: Vec<Value>) -> Vec<Map<String, Value>> {
    values
        .into_iter()
        .filter_map(|p| match p {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_that_is_not_swagger_2_is_refused_with_a_reason() {
        assert!(matches!(Spec::parse(b"[]"), Err(CatalogError::Shape(_))));
        assert!(matches!(Spec::parse(br#"{"openapi":"3.0.0","paths":{}}"#), Err(CatalogError::Shape(_))));
        assert!(matches!(Spec::parse(b"{nope"), Err(CatalogError::Json(_))));
    }

    #[test]
    fn an_operation_without_id_is_named_in_the_error() {
        let e = Spec::parse(br#"{"swagger":"2.0","paths":{"/x":{"get":{}}}}"#).unwrap_err();
        assert!(e.to_string().contains("GET /x"), "{e}");
    }
}
