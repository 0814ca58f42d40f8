//! Body field names in any letter case → the spec's spelling, before validation.
//!
//! The forges match body field names regardless of case (`do` and `Do` are one field, see
//! `catalog::fields`), and an agent moving between Gitea and Forgejo brings the other spec's
//! spelling. A key that differs from a property of its object only in case is renamed to the
//! property's spelling; two keys that would become the same field are refused, rather than
//! one picked. One lookup per key of the body: the cost is linear in the arguments. The walk
//! goes only where the schema has nested objects, so its depth is the schema's, not the
//! input's.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::catalog::ToolDef;
use crate::catalog::fields::Shape;
use crate::error::{CallError, pointer_segment};

/// Rename the body keys of `args` to the spec's spelling of `tool`'s body fields.
pub fn normalize(tool: &ToolDef, args: &mut Map<String, Value>) -> Result<(), CallError> {
    let (Some(shape), Some(body)) = (tool.body_fields(), args.get_mut("body")) else {
        return Ok(());
    };
    walk(shape, body).map_err(|c| {
        let mut pointer = String::from("/body");
        for segment in c.at.iter().rev().chain([&c.key]) {
            pointer.push('/');
            pointer.push_str(&pointer_segment(segment));
        }
        CallError::invalid_argument(
            pointer,
            format!(
                "`{}` and `{}` name the same field `{}` (field names are matched regardless of letter case); send it once",
                c.key, c.other, c.spelling
            ),
        )
    })
}

/// Two keys of one object that name the same field; `at` is the way back up to the body.
struct Collision {
    key: String,
    other: String,
    spelling: String,
    /// The object's pointer segments, innermost first (pushed while returning).
    at: Vec<String>,
}

fn walk(shape: &Shape, value: &mut Value) -> Result<(), Collision> {
    match value {
        Value::Object(map) => {
            if shape.has_names() {
                rename(shape, map)?;
            }
            for (key, child) in map.iter_mut() {
                if let Some(inner) = shape.field(key) {
                    walk(inner, child).map_err(|mut c| {
                        c.at.push(key.clone());
                        c
                    })?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(inner) = shape.items() {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(inner, item).map_err(|mut c| {
                        c.at.push(i.to_string());
                        c
                    })?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Rename the keys of one object that differ from a property only in case.
fn rename(shape: &Shape, map: &mut Map<String, Value>) -> Result<(), Collision> {
    let renames: Vec<(String, String)> =
        map.keys().filter_map(|k| shape.spelling(k).map(|s| (k.clone(), s.to_owned()))).collect();
    // The spec's spelling → the key renamed to it, to name both keys of a collision.
    let mut renamed: HashMap<String, String> = HashMap::with_capacity(renames.len());
    for (key, spelling) in renames {
        if map.contains_key(&spelling) {
            let other = renamed.remove(&spelling).unwrap_or_else(|| spelling.clone());
            return Err(Collision { key, other, spelling, at: Vec::new() });
        }
        let v = map.remove(&key).expect("a key of this map");
        map.insert(spelling.clone(), v);
        renamed.insert(spelling, key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};
    use crate::error::ToolFailure;
    use serde_json::json;

    fn run(flavor: Flavor, tool: &str, args: Value) -> Result<Value, ToolFailure> {
        let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
        let mut args = args.as_object().unwrap().clone();
        normalize(c.get(tool).unwrap(), &mut args).map_err(|e| match e {
            CallError::Result(f) => f,
            other => panic!("{other}"),
        })?;
        Ok(Value::Object(args))
    }

    #[test]
    fn each_forge_gets_its_own_spelling_of_the_merge_style() {
        let got = run(Flavor::Gitea, "repoMergePullRequest", json!({"owner": "o", "body": {"Do": "merge"}}));
        assert_eq!(got.unwrap()["body"], json!({"do": "merge"}));
        let got = run(
            Flavor::Forgejo,
            "repoMergePullRequest",
            json!({"body": {"do": "squash", "Force_Merge": true}}),
        );
        assert_eq!(got.unwrap()["body"], json!({"Do": "squash", "force_merge": true}));
    }

    #[test]
    fn unknown_keys_and_arguments_outside_the_body_stay_as_sent() {
        let got = run(
            Flavor::Gitea,
            "repoMergePullRequest",
            json!({"Owner": "o", "body": {"Nope": 1, "do": "merge"}}),
        );
        assert_eq!(got.unwrap(), json!({"Owner": "o", "body": {"Nope": 1, "do": "merge"}}));
    }

    #[test]
    fn two_keys_naming_one_field_are_refused_with_a_pointer_and_no_value() {
        let f =
            run(Flavor::Gitea, "repoMergePullRequest", json!({"body": {"do": "merge", "Do": "secret-ish"}}))
                .unwrap_err();
        assert_eq!(f.kind, crate::error::ErrorKind::InvalidArguments);
        assert_eq!(f.path.as_deref(), Some("/body/Do"));
        assert!(f.message.contains("`Do` and `do`"), "{}", f.message);
        assert!(!f.message.contains("secret-ish"), "{}", f.message);
        let f = run(Flavor::Gitea, "repoMergePullRequest", json!({"body": {"DO": "merge", "Do": "merge"}}))
            .unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/body/Do"));
        assert!(f.message.contains("`Do` and `DO`"), "{}", f.message);
    }

    #[test]
    fn nested_objects_in_arrays_are_renamed_and_collisions_point_into_them() {
        // A list of objects inside the body: the files of one commit.
        let args = json!({"owner": "o", "repo": "r", "body": {"Files": [
            {"Operation": "create", "PATH": "a.txt", "content": "aGk="}
        ]}});
        let got = run(Flavor::Gitea, "repoChangeFiles", args).unwrap();
        assert_eq!(got["body"]["files"][0]["operation"], "create");
        assert_eq!(got["body"]["files"][0]["path"], "a.txt");
        let args = json!({"owner": "o", "repo": "r", "body": {"files": [
            {"operation": "create", "path": "a", "content": "aGk="},
            {"operation": "create", "path": "b", "Path": "c"}
        ]}});
        let f = run(Flavor::Gitea, "repoChangeFiles", args).unwrap_err();
        assert_eq!(f.path.as_deref(), Some("/body/files/1/Path"));
    }
}
