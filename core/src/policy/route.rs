//! Which forge a call goes to, when one server serves several (profiles): the `forge` a call
//! names, else the profile whose `repositories` patterns match the owner and repository its
//! route names, else the default profile. Pure: the server names the profiles and words the
//! refusals.
//!
//! Why by the route: an agent that works on `acme/app` need not repeat where `acme` lives on
//! every call, and the patterns are the operator's own statement of it. Only what the route
//! names counts (never a body's URL, which may name any host): that is what the call is about.

use serde_json::{Map, Value};

use super::repos::{Named, RepoList, Values, named};
use crate::catalog::{Catalog, Operation, Target};
use crate::error::CallError;

/// The argument every tool takes when the server serves several forges.
pub const ARGUMENT: &str = "forge";

/// Take the `forge` a call names out of its arguments: the tool's own, and for the call tool
/// also the one inside `arguments` (where an agent may put it beside the operation's). Given
/// twice with different values, or not a string, is a wrong argument.
pub fn take(args: &mut Map<String, Value>) -> Result<Option<String>, CallError> {
    let own = args.remove(ARGUMENT);
    let inner = match args.get_mut("arguments") {
        Some(Value::Object(a)) => a.remove(ARGUMENT),
        _ => None,
    };
    let value = match (own, inner) {
        (None, None) => return Ok(None),
        (Some(a), Some(b)) if a != b => {
            return Err(CallError::invalid_argument(
                "/forge",
                "`forge` is given twice with different values (beside `arguments` and inside it); give it once",
            ));
        }
        (Some(v), _) | (None, Some(v)) => v,
    };
    match value {
        Value::String(name) => Ok(Some(name)),
        _ => Err(CallError::invalid_argument(
            "/forge",
            "`forge` must be the name of one of the server's forges",
        )),
    }
}

/// What the patterns say of a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Matched {
    /// No pattern matches (or the route names no repository): the default profile.
    None,
    /// The patterns of this profile (its index in `lists`).
    One(usize),
    /// The patterns of several profiles: the call must name its forge.
    Several(Vec<usize>),
}

/// Which of `lists` (each profile's `repositories`, in the profiles' order) match what the
/// call of tool `name` with raw `args` names in its route, as the first of `catalogs` that
/// knows the tool (and the operation it runs) says.
/// A repository matches `owner/repo` and `owner/*`; an owner alone only `owner/*`.
pub fn matching(
    catalogs: &[&Catalog],
    name: &str,
    args: &Map<String, Value>,
    lists: &[Option<&RepoList>],
) -> Matched {
    let named = catalogs.iter().map(|c| route_names(c, name, args)).find(|n| !n.is_empty());
    let mut found: Vec<usize> = Vec::new();
    for what in named.unwrap_or_default() {
        for (i, list) in lists.iter().enumerate() {
            let Some(list) = list else { continue };
            let hit = match &what {
                Named::Repo(o, r) => list.allows_repo(&o.to_lowercase(), &r.to_lowercase()),
                Named::Owner(o) => list.allows_owner(&o.to_lowercase()),
            };
            if hit && !found.contains(&i) {
                found.push(i);
            }
        }
    }
    match found.as_slice() {
        [] => Matched::None,
        [one] => Matched::One(*one),
        _ => Matched::Several(found),
    }
}

/// The owners and repositories the route of tool `name` names with raw `args`: its
/// operation's, the call tool's operation's (inside `arguments`), or the route the raw tool's
/// path reaches. None for the discovery tools and the attachment download.
fn route_names(catalog: &Catalog, name: &str, args: &Map<String, Value>) -> Vec<Named> {
    let Some(tool) = catalog.get(name) else { return Vec::new() };
    let op_named = |op: &Operation, values: &Map<String, Value>| named(op, &Values::Args(values));
    match &tool.target {
        Target::Operation(op) => op_named(op, args),
        Target::CallOperation => {
            let op = args.get("operation_id").and_then(Value::as_str).and_then(|id| catalog.get(id));
            match (op.and_then(|t| t.operation()), args.get("arguments")) {
                (Some(op), Some(Value::Object(inner))) => op_named(op, inner),
                _ => Vec::new(),
            }
        }
        Target::Raw => {
            let Some(op) = catalog.reached_by_raw(args).and_then(|t| t.operation()) else {
                return Vec::new();
            };
            let Some(path) = args.get("path").and_then(Value::as_str) else { return Vec::new() };
            named(op, &Values::Segments(&crate::catalog::segments(path)))
        }
        Target::AttachmentDownload | Target::SearchOperations | Target::OperationSchema => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        let bytes = crate::catalog::spec::bytes(None, crate::catalog::Flavor::Gitea).unwrap();
        Catalog::build(bytes, crate::catalog::Flavor::Gitea, None).unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_repository_matches_its_owner_and_itself_an_owner_only_its_owner() {
        let c = catalog();
        let acme = RepoList::parse("acme/*").unwrap();
        let app = RepoList::parse("bob/app").unwrap();
        let lists = [None, Some(&acme), Some(&app)];
        let m = |name: &str, a: Value| matching(&[&c], name, &args(a), &lists);
        assert_eq!(m("repoGet", json!({"owner": "ACME", "repo": "x"})), Matched::One(1));
        assert_eq!(m("repoGet", json!({"owner": "bob", "repo": "App"})), Matched::One(2));
        assert_eq!(m("repoGet", json!({"owner": "bob", "repo": "other"})), Matched::None);
        assert_eq!(m("orgListRepos", json!({"org": "acme"})), Matched::One(1));
        assert_eq!(m("orgListRepos", json!({"org": "bob"})), Matched::None);
        assert_eq!(m("gitea_search_operations", json!({"query": "acme"})), Matched::None);
        assert_eq!(m("repoGet", json!({"owner": 3, "repo": "x"})), Matched::None);
    }

    #[test]
    fn the_call_tool_and_the_raw_tool_are_matched_by_the_route_they_reach() {
        let c = catalog();
        let acme = RepoList::parse("acme/*").unwrap();
        let lists = [Some(&acme)];
        let m = |name: &str, a: Value| matching(&[&c], name, &args(a), &lists);
        let called = json!({"operation_id": "repoGet", "arguments": {"owner": "acme", "repo": "x"}});
        assert_eq!(m("gitea_call_operation", called), Matched::One(0));
        assert_eq!(
            m("gitea_api_request", json!({"method": "GET", "path": "/repos/acme/x/issues"})),
            Matched::One(0)
        );
        assert_eq!(m("gitea_api_request", json!({"method": "GET", "path": "/repos/zed/x"})), Matched::None);
    }

    #[test]
    fn two_profiles_whose_patterns_match_are_both_named() {
        let c = catalog();
        let (all, one) = (RepoList::parse("acme/*").unwrap(), RepoList::parse("acme/app").unwrap());
        let lists = [Some(&all), Some(&one)];
        let got = matching(&[&c], "repoGet", &args(json!({"owner": "acme", "repo": "app"})), &lists);
        assert_eq!(got, Matched::Several(vec![0, 1]));
    }

    #[test]
    fn forge_is_taken_from_beside_and_inside_arguments_and_must_agree() {
        let mut a = args(json!({"forge": "work", "owner": "o"}));
        assert_eq!(take(&mut a).unwrap().as_deref(), Some("work"));
        assert!(!a.contains_key("forge"));
        let mut a = args(json!({"operation_id": "repoGet", "arguments": {"forge": "home"}}));
        assert_eq!(take(&mut a).unwrap().as_deref(), Some("home"));
        assert_eq!(a["arguments"], json!({}));
        let mut a = args(json!({"forge": "work", "arguments": {"forge": "home"}}));
        assert!(take(&mut a).unwrap_err().to_string().contains("twice"));
        let mut a = args(json!({"forge": 7}));
        assert!(take(&mut a).is_err());
        assert_eq!(take(&mut args(json!({"owner": "o"}))).unwrap(), None);
    }
}
