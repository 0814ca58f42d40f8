//! Which path parameters keep a literal `/`: the routes the forges serve with a catch-all.
//!
//! The table is data (`specs/wildcard-params.json`, with its router evidence in
//! `specs/wildcard-params.md`), keyed on route, method and parameter — never on the
//! parameter's name alone: `releases/tags/{tag}` is single-segment while `tags/{tag}` is a
//! catch-all. Entries whose Gitea `since` is newer than the forge's version do not apply:
//! older Gitea serves those routes single-segment.

use serde::Deserialize;

use super::{Flavor, Version};

#[derive(Debug, Deserialize)]
struct Entry {
    path: String,
    param: String,
    method: String,
    servers: Vec<String>,
    #[serde(default)]
    since: Option<Since>,
}

#[derive(Debug, Deserialize)]
struct Since {
    #[serde(default)]
    gitea: Option<String>,
}

/// The wildcard routes of both flavors.
#[derive(Debug)]
pub(crate) struct WildcardTable {
    entries: Vec<Entry>,
}

impl WildcardTable {
    /// The table embedded in the binary.
    pub(crate) fn embedded() -> WildcardTable {
        let entries: Vec<Entry> =
            serde_json::from_slice(include_bytes!("../../../specs/wildcard-params.json"))
                .expect("specs/wildcard-params.json is valid (checked by a test)");
        WildcardTable { entries }
    }

    /// Whether `param` of `method path` is served through a catch-all route by this forge.
    pub(crate) fn is_wildcard(
        &self,
        flavor: Flavor,
        version: &Version,
        method: &str,
        path: &str,
        param: &str,
    ) -> bool {
        self.entries.iter().any(|e| {
            e.path == path
                && e.param == param
                && (e.method == "*" || e.method.eq_ignore_ascii_case(method))
                && e.servers.iter().any(|s| s == flavor.as_str())
                && (flavor != Flavor::Gitea || version_reached(e.since.as_ref(), version))
        })
    }

    /// Number of entries (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// `since.gitea` is prose such as `"1.26 (commit 094104bc, #36264)"` or
/// `"GET/DELETE <=1.20, PATCH 1.23, PUT 1.26"`. Only a leading version is a gate; prose that
/// starts otherwise describes when individual methods appeared and is no gate.
fn version_reached(since: Option<&Since>, version: &Version) -> bool {
    let Some(text) = since.and_then(|s| s.gitea.as_deref()) else {
        return true;
    };
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        return true;
    }
    match Version::parse(text.split_whitespace().next().unwrap_or("")) {
        Some(min) if version.numbers != (0, 0, 0) => version.numbers >= min.numbers,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn the_embedded_table_parses() {
        assert_eq!(WildcardTable::embedded().len(), 13);
    }

    #[test]
    fn decision_is_keyed_on_route_not_parameter_name() {
        let t = WildcardTable::embedded();
        let g = v("1.27.0");
        assert!(t.is_wildcard(Flavor::Gitea, &g, "GET", "/repos/{owner}/{repo}/tags/{tag}", "tag"));
        assert!(!t.is_wildcard(Flavor::Gitea, &g, "GET", "/repos/{owner}/{repo}/releases/tags/{tag}", "tag"));
        assert!(t.is_wildcard(Flavor::Gitea, &g, "GET", "/repos/{owner}/{repo}/pulls/{base}/{head}", "head"));
        assert!(!t.is_wildcard(
            Flavor::Gitea,
            &g,
            "GET",
            "/repos/{owner}/{repo}/pulls/{base}/{head}",
            "base"
        ));
    }

    #[test]
    fn gitea_gates_apply_by_version_and_forgejo_keeps_single_segments() {
        let t = WildcardTable::embedded();
        let p = "/repos/{owner}/{repo}/branch_protections/{name}";
        assert!(t.is_wildcard(Flavor::Gitea, &v("1.26.0"), "GET", p, "name"));
        assert!(!t.is_wildcard(Flavor::Gitea, &v("1.25.4"), "GET", p, "name"));
        assert!(!t.is_wildcard(Flavor::Forgejo, &v("16.0.1+gitea-1.22.0"), "GET", p, "name"));
        let s = "/repos/{owner}/{repo}/commits/{ref}/status";
        assert!(t.is_wildcard(Flavor::Gitea, &v("1.27.0"), "GET", s, "ref"));
        assert!(!t.is_wildcard(Flavor::Forgejo, &v("16.0.1+gitea-1.22.0"), "GET", s, "ref"));
    }

    #[test]
    fn method_specific_entries_only_cover_their_method() {
        let t = WildcardTable::embedded();
        let g = v("1.27.0");
        let c = "/repos/{owner}/{repo}/contents/{filepath}";
        for m in ["GET", "POST", "PUT", "DELETE"] {
            assert!(t.is_wildcard(Flavor::Gitea, &g, m, c, "filepath"), "{m}");
        }
        assert!(t.is_wildcard(Flavor::Gitea, &g, "GET", "/repos/{owner}/{repo}/git/refs/{ref}", "ref"));
        assert!(!t.is_wildcard(Flavor::Gitea, &g, "DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "ref"));
    }
}
