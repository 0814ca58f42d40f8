//! The Swagger 2.0 document as read: just enough structure to generate tools.
//!
//! No maintained crate parses Swagger 2.0, and we need little of it: operations with their
//! parameters, `consumes`, `produces`, success responses, and the `definitions` / `responses` that
//! `$ref`s point into. Schemas stay `serde_json::Value` because they become input schemas.

use serde_json::{Map, Value};

use super::CatalogError;

/// One operation as the spec declares it.
#[derive(Debug)]
pub struct RawOperation {
    pub id: String,
    pub method: String,
    pub path: String,
    pub summary: String,
    pub description: String,
    pub tags: Vec<String>,
    pub parameters: Vec<Map<String, Value>>,
    /// The media types the operation accepts as its body; empty: the spec's.
    pub consumes: Vec<String>,
    pub produces: Vec<String>,
    pub responses: Map<String, Value>,
    pub deprecated: bool,
}

/// The parts of the spec the generator reads.
#[derive(Debug)]
pub struct Spec {
    pub info_version: String,
    /// The media types every operation accepts unless it names its own.
    pub consumes: Vec<String>,
    pub produces: Vec<String>,
    pub operations: Vec<RawOperation>,
    pub definitions: Map<String, Value>,
    pub responses: Map<String, Value>,
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

impl Spec {
    /// Parse and check the shape of a Swagger 2.0 document.
    pub fn parse(bytes: &[u8]) -> Result<Spec, CatalogError> {
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| CatalogError::Json(e.to_string()))?;
        let Value::Object(mut doc) = doc else {
            return Err(CatalogError::Shape("the document is not a JSON object".into()));
        };
        if doc.get("swagger").and_then(Value::as_str) != Some("2.0") {
            return Err(CatalogError::Shape("`swagger` must be \"2.0\"".into()));
        }
        let info_version =
            doc.get("info").and_then(|i| i.get("version")).and_then(Value::as_str).unwrap_or("").to_owned();
        let consumes = strings(doc.get("consumes"));
        let produces = strings(doc.get("produces"));
        let take_map = |doc: &mut Map<String, Value>, key: &str| match doc.remove(key) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let definitions = take_map(&mut doc, "definitions");
        let responses = take_map(&mut doc, "responses");
        let Some(Value::Object(paths)) = doc.remove("paths") else {
            return Err(CatalogError::Shape("`paths` is missing".into()));
        };
        let mut operations = Vec::new();
        for (path, item) in paths {
            let Value::Object(item) = item else { continue };
            for (method, op) in item {
                if !METHODS.contains(&method.as_str()) {
                    continue;
                }
                let Value::Object(mut op) = op else { continue };
                let id = op
                    .get("operationId")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| CatalogError::Operation {
                        op: format!("{} {path}", method.to_uppercase()),
                        msg: "has no operationId".into(),
                    })?
                    .to_owned();
                let text = |op: &Map<String, Value>, k: &str| {
                    op.get(k).and_then(Value::as_str).unwrap_or("").trim().to_owned()
                };
                let parameters = match op.remove("parameters") {
                    Some(Value::Array(ps)) => ps
                        .into_iter()
                        .filter_map(|p| match p {
                            Value::Object(m) => Some(m),
                            _ => None,
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                operations.push(RawOperation {
                    summary: text(&op, "summary"),
                    description: text(&op, "description"),
                    tags: strings(op.get("tags")),
                    consumes: strings(op.get("consumes")),
                    produces: strings(op.get("produces")),
                    responses: match op.remove("responses") {
                        Some(Value::Object(m)) => m,
                        _ => Map::new(),
                    },
                    deprecated: op.get("deprecated").and_then(Value::as_bool).unwrap_or(false),
                    parameters,
                    id,
                    method: method.to_uppercase(),
                    path: path.clone(),
                });
            }
        }
        Ok(Spec { info_version, consumes, produces, operations, definitions, responses })
    }

    /// Follow a `#/responses/X` reference (one level, as the specs use them).
    pub fn response<'a>(&'a self, r: &'a Value) -> &'a Value {
        match r.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix("#/responses/")) {
            Some(name) => self.responses.get(name).unwrap_or(r),
            None => r,
        }
    }

    /// Follow a `#/definitions/X` reference, if `schema` is one.
    pub fn definition<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix("#/definitions/")) {
            Some(name) => self.definitions.get(name).unwrap_or(schema),
            None => schema,
        }
    }
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
