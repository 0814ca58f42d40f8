//! The field names of a tool's body, by their letter-case-free form: what lets a call spell a
//! body field in any case, as the forges accept it.
//!
//! Both forges decode JSON bodies with Go's `encoding/json`, which matches field names
//! regardless of letter case: Forgejo's spec spells the merge style `Do` where Gitea's says
//! `do`, and either forge takes both. The schema check would refuse the spelling of the other
//! forge, so before it a call's body keys are renamed to the spec's spelling
//! (`args::fields`). The lookup is built here once per tool from its body schema: for each
//! object schema its property names by their lower-case form, and the shapes of the nested
//! objects (properties, array items, map values) — a call then costs one lookup per key.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

/// The names of one object schema and where nested objects sit, for renaming keys.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Lower-case name → the spec's spelling; `None` where two properties differ only in
    /// case (then neither is renamed to).
    names: HashMap<String, Option<String>>,
    /// The shapes of properties that hold objects (or arrays or maps of them), by the spec's name.
    fields: HashMap<String, Shape>,
    /// The shape of an array's items.
    items: Option<Box<Shape>>,
    /// The shape of a map's values (`additionalProperties`), for keys that are no property.
    values: Option<Box<Shape>>,
}

impl Shape {
    /// The shape of a body schema (refs already inlined), or `None` when it holds no object
    /// with named properties, so that nothing is ever renamed in it. The schema is finite (a
    /// recursive definition was inlined as an open object), and so is the shape.
    pub(crate) fn of(schema: &Value) -> Option<Shape> {
        let mut shape = Shape::default();
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                shape
                    .names
                    .entry(fold(name).into_owned())
                    .and_modify(|spelling| *spelling = None)
                    .or_insert_with(|| Some(name.clone()));
                if let Some(nested) = Shape::of(sub) {
                    shape.fields.insert(name.clone(), nested);
                }
            }
        }
        shape.items = schema.get("items").and_then(Shape::of).map(Box::new);
        shape.values = schema.get("additionalProperties").and_then(Shape::of).map(Box::new);
        let empty = shape.names.is_empty()
            && shape.fields.is_empty()
            && shape.items.is_none()
            && shape.values.is_none();
        (!empty).then_some(shape)
    }

    /// The spec's spelling of a key that is not spelled so, if one property matches it
    /// regardless of case.
    pub(crate) fn spelling(&self, key: &str) -> Option<&str> {
        match self.names.get(fold(key).as_ref()) {
            Some(Some(spelled)) if spelled != key => Some(spelled),
            _ => None,
        }
    }

    /// Whether `key` is a property of this object, spelled as the spec spells it.
    pub(crate) fn is_property(&self, key: &str) -> bool {
        matches!(self.names.get(fold(key).as_ref()), Some(Some(spelled)) if spelled == key)
    }

    /// Whether this object names properties (else only its nested shapes matter).
    pub(crate) fn has_names(&self) -> bool {
        !self.names.is_empty()
    }

    /// The shape of the value under the property `key` (spelled as the spec spells it), or
    /// under a key that is no property when this object is a map.
    pub(crate) fn field(&self, key: &str) -> Option<&Shape> {
        match self.fields.get(key) {
            Some(s) => Some(s),
            None if !self.is_property(key) => self.values.as_deref(),
            None => None,
        }
    }

    /// The shape of an array's items.
    pub(crate) fn items(&self) -> Option<&Shape> {
        self.items.as_deref()
    }
}

/// A name in the form that all its spellings Go's JSON decoding takes for one field share:
/// lower case, and the long s (`ſ`), which Go's standard decoder folds to `s`, as `s` (the
/// Kelvin sign lower-cases to `k` already). Forgejo 16 reads `deſcription` as no field at
/// all; renamed, every decoder reads what the policy judged. Borrowed when nothing changes.
fn fold(name: &str) -> Cow<'_, str> {
    if name.chars().any(|c| c.is_uppercase() || c == 'ſ') {
        Cow::Owned(name.to_lowercase().replace('ſ', "s"))
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_nested_objects_array_items_and_map_values_are_found() {
        let s = Shape::of(&json!({"type": "object", "properties": {
            "Do": {"type": "string"},
            "opts": {"type": "object", "properties": {"deep_Name": {"type": "boolean"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {}}}}
        }}))
        .unwrap();
        assert_eq!(s.spelling("do"), Some("Do"));
        assert_eq!(s.spelling("DO"), Some("Do"));
        assert_eq!(s.spelling("Do"), None, "already the spec's spelling");
        // The two letters outside ASCII that Go's folding takes for ASCII ones.
        let u = Shape::of(&json!({"properties": {"username": {}, "key": {}}})).unwrap();
        assert_eq!(u.spelling("u\u{17f}ername"), Some("username"));
        assert_eq!(u.spelling("\u{212a}EY"), Some("key"));
        assert_eq!(s.spelling("nope"), None);
        assert_eq!(s.field("opts").unwrap().spelling("DEEP_NAME"), Some("deep_Name"));
        assert_eq!(s.field("list").unwrap().items().unwrap().spelling("ID"), Some("id"));
        assert_eq!(s.field("map").unwrap().field("any key").unwrap().spelling("X"), Some("x"));
        assert!(s.field("Do").is_none(), "a string holds no names");
    }

    #[test]
    fn properties_that_differ_only_in_case_are_never_renamed_to() {
        let s = Shape::of(&json!({"properties": {"id": {}, "ID": {}, "name": {}}})).unwrap();
        assert_eq!(s.spelling("Id"), None);
        assert_eq!(s.spelling("NAME"), Some("name"));
    }

    #[test]
    fn schemas_without_named_objects_have_no_shape() {
        for schema in
            [json!({"type": "string"}), json!({"type": "array", "items": {"type": "integer"}}), json!({})]
        {
            assert!(Shape::of(&schema).is_none(), "{schema}");
        }
    }
}
