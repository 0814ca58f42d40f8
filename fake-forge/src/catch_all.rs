//! The fake's own table of catch-all routes: which path parameter of which route the real
//! forges capture with chi's `*`, so that a literal `/` stays inside the value.
//!
//! The server under test keeps a table for the same question. The fake must not read it: a
//! wrong row there would be routed the same wrong way here, and every test would pass. These
//! rows were written by reading the forges' API routers, `routers/api/v1/api.go`:
//!
//! * Gitea 1.26.1 to 1.26.4 and 1.27.3: the same catch-alls in every one of these versions, so
//!   the rows carry no version range. The commit-status routes are not plain chi routes there:
//!   `commits/*` is handed to a path group that matches `<ref:*>/status` and `<ref:*>/statuses`,
//!   where `<ref:*>` may contain `/`; the row says that with the spec's `{ref}`.
//! * Forgejo 16 (the `v16.0/forgejo` branch; v10 to v15 register the same catch-alls). Forgejo
//!   registers `branch_protections/{name}` and `commits/{ref}/…` as single segments, and has no
//!   `contents-ext`.
//!
//! A row is one (method, spec path) and names the spec's operation for it. Catch-alls that no
//! spec operation reaches (the `tarball|zipball|bundle` downloads, Gitea's `activitypub/*`) are
//! left out: the fake routes spec operations only.

use crate::Flavor;

/// One route whose `param` is a chi catch-all.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CatchAll {
    /// The forges that register the route with `*`.
    pub flavors: &'static [Flavor],
    /// Upper-case HTTP method.
    pub method: &'static str,
    /// The route as the spec spells it (without `/api/v1`).
    pub path: &'static str,
    /// The spec's name of the parameter the `*` captures.
    pub param: &'static str,
    /// The spec's `operationId` for (method, path) in every flavor of `flavors`.
    pub operation: &'static str,
}

const BOTH: &[Flavor] = &[Flavor::Gitea, Flavor::Forgejo];
const GITEA: &[Flavor] = &[Flavor::Gitea];
const FORGEJO: &[Flavor] = &[Flavor::Forgejo];

const fn row(
    flavors: &'static [Flavor],
    method: &'static str,
    path: &'static str,
    param: &'static str,
    operation: &'static str,
) -> CatchAll {
    CatchAll { flavors, method, path, param, operation }
}

/// The table.
pub(crate) const CATCH_ALL: &[CatchAll] = &[
    // `BASE...HEAD`, where HEAD may be `owner/repo:branch`.
    row(BOTH, "GET", "/repos/{owner}/{repo}/compare/{basehead}", "basehead", "repoCompareDiff"),
    // A file path, which may start with a ref when no `ref` query is given.
    row(BOTH, "GET", "/repos/{owner}/{repo}/raw/{filepath}", "filepath", "repoGetRawFile"),
    row(BOTH, "GET", "/repos/{owner}/{repo}/media/{filepath}", "filepath", "repoGetRawFileOrLFS"),
    // `{ref}.zip` and the like; Gitea also answers HEAD there, which the spec does not list.
    row(BOTH, "GET", "/repos/{owner}/{repo}/archive/{archive}", "archive", "repoGetArchive"),
    row(BOTH, "GET", "/repos/{owner}/{repo}/branches/{branch}", "branch", "repoGetBranch"),
    row(BOTH, "DELETE", "/repos/{owner}/{repo}/branches/{branch}", "branch", "repoDeleteBranch"),
    // PATCH renames a branch in both; the operations are named differently. Only Gitea has PUT.
    row(GITEA, "PATCH", "/repos/{owner}/{repo}/branches/{branch}", "branch", "repoRenameBranch"),
    row(FORGEJO, "PATCH", "/repos/{owner}/{repo}/branches/{branch}", "branch", "repoUpdateBranch"),
    row(GITEA, "PUT", "/repos/{owner}/{repo}/branches/{branch}", "branch", "repoUpdateBranch"),
    // Rule names are branch globs such as `release/*`.
    row(GITEA, "GET", "/repos/{owner}/{repo}/branch_protections/{name}", "name", "repoGetBranchProtection"),
    row(
        GITEA,
        "PATCH",
        "/repos/{owner}/{repo}/branch_protections/{name}",
        "name",
        "repoEditBranchProtection",
    ),
    row(
        GITEA,
        "DELETE",
        "/repos/{owner}/{repo}/branch_protections/{name}",
        "name",
        "repoDeleteBranchProtection",
    ),
    row(BOTH, "GET", "/repos/{owner}/{repo}/tags/{tag}", "tag", "repoGetTag"),
    row(BOTH, "DELETE", "/repos/{owner}/{repo}/tags/{tag}", "tag", "repoDeleteTag"),
    // Only the head is a catch-all; the base before it is one segment.
    row(BOTH, "GET", "/repos/{owner}/{repo}/pulls/{base}/{head}", "head", "repoGetPullRequestByBaseHead"),
    // The catch-all is followed by a static segment.
    row(GITEA, "GET", "/repos/{owner}/{repo}/commits/{ref}/status", "ref", "repoGetCombinedStatusByRef"),
    row(GITEA, "GET", "/repos/{owner}/{repo}/commits/{ref}/statuses", "ref", "repoListStatusesByRef"),
    // A ref or a prefix of one, such as `heads/main`.
    row(BOTH, "GET", "/repos/{owner}/{repo}/git/refs/{ref}", "ref", "repoListGitRefs"),
    row(BOTH, "GET", "/repos/{owner}/{repo}/contents/{filepath}", "filepath", "repoGetContents"),
    row(BOTH, "POST", "/repos/{owner}/{repo}/contents/{filepath}", "filepath", "repoCreateFile"),
    row(BOTH, "PUT", "/repos/{owner}/{repo}/contents/{filepath}", "filepath", "repoUpdateFile"),
    row(BOTH, "DELETE", "/repos/{owner}/{repo}/contents/{filepath}", "filepath", "repoDeleteFile"),
    row(GITEA, "GET", "/repos/{owner}/{repo}/contents-ext/{filepath}", "filepath", "repoGetContentsExt"),
];

/// The catch-all parameter of operation `operation` (`method path`) in `flavor`, if its route
/// has one. A row applies only when all four agree, so a row that no longer matches its spec
/// routes nothing as a catch-all, and the tests below notice.
pub(crate) fn param(flavor: Flavor, method: &str, path: &str, operation: &str) -> Option<&'static str> {
    CATCH_ALL
        .iter()
        .find(|r| {
            r.path == path
                && r.method.eq_ignore_ascii_case(method)
                && r.operation == operation
                && r.flavors.contains(&flavor)
        })
        .map(|r| r.param)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use serde_json::Value;

    use super::*;
    use crate::router::RouteMatch;
    use crate::spec;

    fn rows_of(flavor: Flavor) -> impl Iterator<Item = &'static CatchAll> {
        CATCH_ALL.iter().filter(move |r| r.flavors.contains(&flavor))
    }

    #[test]
    fn every_row_names_its_operation_and_parameter_in_each_flavors_spec() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let spec: Value = serde_json::from_slice(spec::raw(flavor)).unwrap();
            for r in rows_of(flavor) {
                let row = format!("{flavor:?} {} {}", r.method, r.path);
                let item = &spec["paths"][r.path];
                let op = &item[r.method.to_ascii_lowercase()];
                assert_eq!(op["operationId"].as_str(), Some(r.operation), "{row}");
                let declared = item["parameters"].as_array().into_iter().chain(op["parameters"].as_array());
                let p = declared
                    .flatten()
                    .map(|p| crate::util::resolve(&spec, p))
                    .find(|p| p["in"] == "path" && p["name"] == r.param)
                    .unwrap_or_else(|| panic!("{row}: no path parameter {}", r.param));
                assert_eq!(p["type"], "string", "{row}");
                assert!(
                    r.path.contains(&format!("/{{{}}}", r.param)),
                    "{row}: {{{}}} is a whole segment",
                    r.param
                );
            }
        }
    }

    #[test]
    fn every_row_routes_a_value_with_slashes_to_its_operation() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let api = spec::api(flavor);
            for r in rows_of(flavor) {
                let mut path = r.path.replace(&format!("{{{}}}", r.param), "a/b%20c/d");
                while let Some(start) = path.find('{') {
                    let end = start + path[start..].find('}').unwrap();
                    path.replace_range(start..=end, "x");
                }
                let row = format!("{flavor:?} {} {path}", r.method);
                match api.router.route(r.method, &path) {
                    RouteMatch::Found { op, params } => {
                        assert_eq!(api.ops[op].id, r.operation, "{row}");
                        let value = params.iter().find(|(k, _)| k == r.param).map(|(_, v)| v.as_str());
                        assert_eq!(value, Some("a/b c/d"), "{row}");
                    }
                    other => panic!("{row}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn no_route_is_listed_twice_for_a_flavor() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let mut seen = HashSet::new();
            for r in rows_of(flavor) {
                assert!(seen.insert((r.method, r.path)), "{flavor:?} {} {}", r.method, r.path);
            }
        }
    }

    #[test]
    fn forgejo_keeps_one_segment_where_gitea_has_a_catch_all() {
        let (g, f) = (Flavor::Gitea, Flavor::Forgejo);
        let rules = "/repos/{owner}/{repo}/branch_protections/{name}";
        assert_eq!(param(g, "GET", rules, "repoGetBranchProtection"), Some("name"));
        assert_eq!(param(f, "GET", rules, "repoGetBranchProtection"), None);
        let status = "/repos/{owner}/{repo}/commits/{ref}/status";
        assert_eq!(param(g, "GET", status, "repoGetCombinedStatusByRef"), Some("ref"));
        assert_eq!(param(f, "GET", status, "repoGetCombinedStatusByRef"), None);
        let release = "/repos/{owner}/{repo}/releases/tags/{tag}";
        assert_eq!(param(g, "GET", release, "repoGetReleaseByTag"), None);
    }
}
