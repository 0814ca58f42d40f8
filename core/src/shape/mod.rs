//! What the agent needs of a result: the stage between decoding and the guard.
//!
//! Most of a forge's JSON is repetition: every nested user is a full profile, every nested
//! repository 65 fields, every item carries API links that its ids rebuild. The compact shape
//! (the default) keeps the top-level object, or each item of a top-level list, with every
//! member it has, except:
//! - an entity nested in it is reduced to what identifies it (`entities::NESTED`: a `User`
//!   to its login, a `Repository` to `full_name`, a `Milestone` to its id and title);
//! - derivable URLs are left out (`entities::DERIVABLE_URLS`; the item keeps its `html_url`);
//! - a member whose value is empty or its type's default (`""`, `0`, `false`, `null`, `[]`,
//!   `{}`, the zero times `0001-01-01T00:00:00Z` and `1970-01-01T00:00:00Z`) is left out: absent means empty;
//! - a member that repeats another (`assignee` beside `assignees`) is left out.
//!
//! Which definition a value is comes from the spec (the operation's result type and each
//! definition's members), never from a table per operation. An object whose only list holds a
//! definition (`SearchResults.data`, `GitTreeResponse.tree`) wraps a listing: its list's items
//! are the items. `fields` keeps only the given member paths of each item, before compaction;
//! the full shape is the forge's JSON as decoded, with `fields` applied if given.

pub mod entities;
pub(crate) mod schema;
pub mod trust;

use serde_json::{Map, Value};

use crate::catalog::results::{Definition, Definitions, Typed};
use crate::error::CallError;
use entities::Nested;

/// How `data` is rendered (`RESULT_SHAPE`, or a call's `shape`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Shape {
    /// Nested entities reduced to what identifies them, derivable URLs and empty members left out.
    #[default]
    Compact,
    /// The forge's JSON as decoded.
    Full,
}

impl Shape {
    pub(crate) fn parse(s: &str) -> Option<Shape> {
        match s {
            "compact" => Some(Shape::Compact),
            "full" => Some(Shape::Full),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Compact => "compact",
            Shape::Full => "full",
        }
    }
}

pub(crate) use crate::catalog::results::{FIELDS_ARGUMENT, MAX_FIELDS, MAX_PATH_CHARS, SHAPE_ARGUMENT};

/// What a call asked beside the operation's arguments: of its result, and the target a
/// person confirmed (`confirm`, judged by the policy's confirmations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    pub shape: Option<Shape>,
    pub fields: Option<Vec<String>>,
    pub confirm: Option<String>,
}

impl Ask {
    /// Take `shape` and `fields` out of `args` (they are not the operation's): what was asked,
    /// or which argument is wrong and why.
    pub fn take(args: &mut Map<String, Value>) -> Result<Ask, CallError> {
        let shape = match args.remove(SHAPE_ARGUMENT) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if Shape::parse(&s).is_some() => Shape::parse(&s),
            Some(_) => {
                return Err(CallError::invalid_argument("/shape", "`shape` is \"compact\" or \"full\""));
            }
        };
        let fields = match args.remove(FIELDS_ARGUMENT) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) if items.len() <= MAX_FIELDS => {
                let mut paths = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        Value::String(p) if valid_path(&p) => paths.push(p),
                        _ => {
                            return Err(CallError::invalid_argument(
                                format!("/fields/{i}"),
                                format!(
                                    "each field is a member path such as `title` or `head.ref` (letters, digits, `_`, `-`, dots between names; at most {MAX_PATH_CHARS} characters)"
                                ),
                            ));
                        }
                    }
                }
                Some(paths)
            }
            Some(_) => {
                return Err(CallError::invalid_argument(
                    "/fields",
                    format!("`fields` is a list of at most {MAX_FIELDS} member paths"),
                ));
            }
        };
        Ok(Ask { shape, fields, confirm: None })
    }

    /// Merge what a later place asked (the call tool's own arguments over the operation's).
    pub(crate) fn or(self, other: Ask) -> Ask {
        Ask {
            shape: self.shape.or(other.shape),
            fields: self.fields.or(other.fields),
            confirm: self.confirm.or(other.confirm),
        }
    }
}

fn valid_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= MAX_PATH_CHARS
        && p.split('.')
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
}

/// The definition of each item of a result of type `result`, and the list member that holds
/// the items when the result is an object wrapping a listing.
fn items_of<'d>(defs: &'d Definitions, result: Option<&Typed>) -> (Option<&'d Definition>, Option<&'d str>) {
    let Some(t) = result else { return (None, None) };
    let Some(def) = defs.get(&t.definition) else { return (None, None) };
    if t.list {
        return (Some(def), None);
    }
    match wrapped(def) {
        Some((member, inner)) => (defs.get(&inner.definition), Some(member)),
        None => (Some(def), None),
    }
}

/// The one list of a definition that holds nothing else of a definition.
fn wrapped(def: &Definition) -> Option<(&str, &Typed)> {
    let mut typed = def.members.iter().filter_map(|(n, t)| t.as_ref().map(|t| (n.as_str(), t)));
    match (typed.next(), typed.next()) {
        (Some((name, t)), None) if t.list => Some((name, t)),
        _ => None,
    }
}

/// Before anything is sent: `fields` of a call of `op` (the operation a raw or call tool
/// reaches, when known). An operation that answers text, a file's bytes or a redirect has no
/// members to keep, so `fields` is refused rather than silently ignored; for one that answers
/// JSON, as `check_fields`.
pub fn check_asked(
    defs: &Definitions,
    op: Option<&crate::catalog::Operation>,
    fields: &[String],
) -> Result<(), CallError> {
    use crate::catalog::ResponseKind;
    let answers = match op.map(|op| op.response) {
        Some(ResponseKind::Text) => "text",
        Some(ResponseKind::Binary) => "a file's bytes",
        Some(ResponseKind::Redirect) => "a redirect (its location)",
        Some(ResponseKind::Json) | None => {
            return check_fields(defs, op.and_then(|op| op.result.as_ref()), fields);
        }
    };
    let id = op.map_or("", |op| op.id.as_str());
    Err(CallError::invalid_argument(
        "/fields",
        format!(
            "`fields` keeps members of a JSON result, and {id} answers {answers}, which has none: leave `fields` out"
        ),
    ))
}

/// Before anything is sent: every path of `fields` names members the items of a `result`
/// have (nested paths as far as the spec types them), or the error lists those they have.
/// Without a result type the paths are checked against the data instead (`render`).
pub fn check_fields(defs: &Definitions, result: Option<&Typed>, fields: &[String]) -> Result<(), CallError> {
    let (Some(item), _) = items_of(defs, result) else { return Ok(()) };
    for (i, path) in fields.iter().enumerate() {
        let mut def = Some(item);
        for (depth, segment) in path.split('.').enumerate() {
            let Some(d) = def else { break };
            // The relation the trust pass adds to authored items is a member of theirs.
            let added = depth == 0 && segment == trust::RELATION && trust::authored_type(result);
            if !d.has(segment) && !added {
                let at = path.split('.').take(depth).collect::<Vec<_>>().join(".");
                let names = listed(d.members.iter().map(|(n, _)| n.as_str()));
                let within = if at.is_empty() { "each item has".to_owned() } else { format!("`{at}` has") };
                return Err(CallError::invalid_argument(
                    format!("/fields/{i}"),
                    format!("no member `{segment}` in field `{path}`; {within}: {names}"),
                ));
            }
            def = d.member(segment).and_then(|t| defs.get(&t.definition));
        }
    }
    Ok(())
}

/// Render `data`, a JSON result of type `result`, in `shape` with only `fields` (if given)
/// of each item. Fails only for a path no item has, when the spec did not type the result.
pub fn render(
    defs: &Definitions,
    result: Option<&Typed>,
    shape: Shape,
    fields: Option<&[String]>,
    data: &mut Value,
) -> Result<(), CallError> {
    let (item_def, wrapper) = items_of(defs, result);
    let wrapper_def = result.filter(|_| wrapper.is_some()).and_then(|t| defs.get(&t.definition));
    if let Some(fields) = fields {
        let tree = Tree::of(fields);
        let items = items_mut(data, wrapper);
        if item_def.is_none() {
            unknown_in(&items, fields)?;
        }
        for item in items {
            tree.select(item);
        }
    }
    if shape == Shape::Full {
        return Ok(());
    }
    // A member asked for by name is kept even where the compact shape leaves such links out.
    let asked: Vec<&str> = fields.into_iter().flatten().filter_map(|p| p.rsplit('.').next()).collect();
    let c = Compactor { defs, asked };
    match (data, wrapper) {
        (Value::Object(outer), Some(member)) => {
            let mut list = outer.remove(member).unwrap_or(Value::Null);
            c.members(wrapper_def, outer, true);
            c.top_item(item_def, &mut list);
            if !is_empty(&list) {
                outer.insert(member.to_owned(), list);
            }
        }
        (value, _) => c.top_item(item_def, value),
    }
    Ok(())
}

/// The items of `data`: a list's, the wrapped list's, or the object itself.
fn items_mut<'v>(data: &'v mut Value, wrapper: Option<&str>) -> Vec<&'v mut Value> {
    let data = match wrapper {
        Some(member) => match data.get_mut(member) {
            Some(list) => list,
            None => return Vec::new(),
        },
        None => data,
    };
    match data {
        Value::Array(items) => items.iter_mut().collect(),
        other => vec![other],
    }
}

/// For a result the spec does not type: each path's first member must be in some item.
fn unknown_in(items: &[&mut Value], fields: &[String]) -> Result<(), CallError> {
    let objects: Vec<&Map<String, Value>> = items.iter().filter_map(|v| v.as_object()).collect();
    if objects.is_empty() {
        return Ok(());
    }
    for (i, path) in fields.iter().enumerate() {
        let first = path.split('.').next().unwrap_or(path);
        if !objects.iter().any(|o| o.contains_key(first)) {
            let mut names: Vec<&str> = objects.iter().flat_map(|o| o.keys().map(String::as_str)).collect();
            names.sort_unstable();
            names.dedup();
            return Err(CallError::invalid_argument(
                format!("/fields/{i}"),
                format!("no member `{first}` in field `{path}`; the items have: {}", listed(names)),
            ));
        }
    }
    Ok(())
}

/// At most this many member names in an error: an answer's keys are the forge's to choose.
const MAX_NAMED: usize = 80;

/// Names for an error message: the first `MAX_NAMED`, and how many more there are.
fn listed<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    let mut text = names.iter().take(MAX_NAMED).copied().collect::<Vec<_>>().join(", ");
    if names.len() > MAX_NAMED {
        text.push_str(&format!(" and {} more", names.len() - MAX_NAMED));
    }
    text
}

/// Member paths as a tree: `head.ref` and `head.sha` keep `head` with those two.
#[derive(Debug, Default)]
struct Tree(Vec<(String, Option<Tree>)>);

impl Tree {
    fn of(paths: &[String]) -> Tree {
        let mut tree = Tree::default();
        for p in paths {
            tree.add(p);
        }
        tree
    }

    fn add(&mut self, path: &str) {
        let (first, rest) = match path.split_once('.') {
            Some((first, rest)) => (first, Some(rest)),
            None => (path, None),
        };
        let at = match self.0.iter().position(|(n, _)| n == first) {
            Some(at) => at,
            None => {
                self.0.push((first.to_owned(), Some(Tree::default())));
                self.0.len() - 1
            }
        };
        match (&mut self.0[at].1, rest) {
            // Already wanted whole.
            (None, _) => {}
            (Some(_), None) => self.0[at].1 = None,
            (Some(sub), Some(rest)) => sub.add(rest),
        }
    }

    /// Keep only the paths of this tree in `value` (an object, or each object of a list).
    fn select(&self, value: &mut Value) {
        match value {
            Value::Object(m) => {
                m.retain(|k, v| match self.0.iter().find(|(n, _)| n == k) {
                    None => false,
                    Some((_, None)) => true,
                    Some((_, Some(sub))) => {
                        sub.select(v);
                        true
                    }
                });
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.select(v)),
            _ => {}
        }
    }
}

/// The compact rendering of one result: the spec's definitions, and the member names
/// `fields` asked for (never left out as links).
struct Compactor<'a> {
    defs: &'a Definitions,
    asked: Vec<&'a str>,
}

impl Compactor<'_> {
    /// A top-level item, or each item of a list of them (at any depth of lists).
    fn top_item(&self, def: Option<&Definition>, value: &mut Value) {
        match value {
            Value::Object(m) => self.members(def, m, true),
            Value::Array(items) => items.iter_mut().for_each(|v| self.top_item(def, v)),
            _ => {}
        }
    }

    /// Compact the members of an object of definition `def` (`top`: a top-level item).
    fn members(&self, def: Option<&Definition>, m: &mut Map<String, Value>, top: bool) {
        for (dup, of) in entities::DUPLICATES {
            if m.get(*of).is_some_and(|v| !is_empty(v)) && !self.asked.contains(dup) {
                m.remove(*dup);
            }
        }
        m.retain(|k, v| {
            let link = entities::DERIVABLE_URLS.contains(&k.as_str()) || (!top && k == "html_url");
            if link && !self.asked.contains(&k.as_str()) {
                return false;
            }
            let typed = def.and_then(|d| d.member(k));
            self.nested(typed.map(|t| t.definition.as_str()), v);
            !is_empty(v)
        });
    }

    /// Compact a nested value (one, or a list) of definition `name`.
    fn nested(&self, name: Option<&str>, value: &mut Value) {
        match value {
            Value::Array(items) => items.iter_mut().for_each(|v| self.nested(name, v)),
            Value::Object(m) => {
                if let Some(Nested::Identify(ids)) = name.and_then(entities::nested)
                    && let Some(identity) = identify(m, ids)
                {
                    *value = identity;
                    return;
                }
                self.members(name.and_then(|n| self.defs.get(n)), m, false);
            }
            _ => {}
        }
    }
}

/// What identifies an entity: the value of its one identifying member, or an object of them;
/// `None` when the first is missing (the object is kept, compacted).
fn identify(m: &Map<String, Value>, ids: &[&str]) -> Option<Value> {
    let first = m.get(ids[0]).filter(|v| !is_empty(v) && !v.is_object() && !v.is_array())?;
    if ids.len() == 1 {
        return Some(first.clone());
    }
    let kept: Map<String, Value> = ids
        .iter()
        .filter_map(|id| m.get(*id).filter(|v| !is_empty(v)).map(|v| ((*id).to_owned(), v.clone())))
        .collect();
    Some(Value::Object(kept))
}

/// The times the forges write for "never": Go's zero time, and the Unix epoch of a zero
/// timestamp (a user who never signed in).
const ZERO_TIMES: &[&str] = &["0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z"];

/// Empty or its type's default: absent in the compact shape.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty() || ZERO_TIMES.contains(&s.as_str()),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

#[cfg(test)]
mod tests;
