//! Routes a raw request path to a spec operation the way chi does inside Gitea and Forgejo.
//!
//! Both servers hand chi the *escaped* path (their common middleware sets the route path from
//! the request's escaped path), so `%2F` stays inside one segment while routing and is decoded
//! only when a handler reads the parameter. The fake copies that exactly, because its main use
//! is to prove how a client encodes path parameters:
//!
//! * `{param}` matches one non-empty segment; the captured value is percent-decoded afterwards.
//! * a catch-all parameter (chi `/*`, listed in [`crate::catch_all`]) captures one or more
//!   segments, literal `/` included. It may be followed by static segments (Gitea's
//!   `commits/{ref}/status`).
//! * a segment mixing literals and parameters (`{sha}.{diffType}`) splits at the first
//!   occurrence of each literal; a parameter with an `enum` only accepts those values (Gitea
//!   registers `{diffType:diff|patch}`).
//! * precedence, segment by segment from the left: static, then mixed, then `{param}`, then
//!   catch-all. Among the templates that match the path, the best one having the request method
//!   wins; if only other methods match, the answer is 405.
//! * a path with an empty segment (`//`, a trailing `/`) matches nothing. Real servers collapse
//!   these, but the fake wants a client that sends them to notice.

use std::cmp::Ordering;
use std::collections::HashMap;

use percent_encoding::percent_decode_str;

/// One piece of a segment that mixes literals and parameters.
#[derive(Debug, Clone)]
enum Piece {
    Lit(String),
    Param { name: String, allowed: Option<Vec<String>> },
}

/// One `/`-separated segment of a path template.
#[derive(Debug, Clone)]
enum Seg {
    Static(String),
    Mixed(Vec<Piece>),
    Param(String),
    CatchAll(String),
}

impl Seg {
    /// Lower ranks win (chi: static, regexp/mixed, param, catch-all).
    fn rank(&self) -> u8 {
        match self {
            Seg::Static(_) => 0,
            Seg::Mixed(_) => 1,
            Seg::Param(_) => 2,
            Seg::CatchAll(_) => 3,
        }
    }
}

/// A parsed path template such as `/repos/{owner}/{repo}/branches/{branch}`.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    segs: Vec<Seg>,
}

impl Template {
    /// Parses `path` (without `/api/v1`). `catch_all` names the parameter that is a chi
    /// wildcard for this route; `enums` gives the allowed values of enum path parameters.
    pub(crate) fn parse(
        path: &str,
        catch_all: Option<&str>,
        enums: &HashMap<String, Vec<String>>,
    ) -> Template {
        let segs =
            path.trim_start_matches('/').split('/').map(|s| parse_segment(s, catch_all, enums)).collect();
        Template { segs }
    }

    /// Matches the segments of a raw path; returns the raw (still encoded) captures in
    /// template order.
    fn matches(&self, path: &[&str]) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        match self.segs.iter().position(|s| matches!(s, Seg::CatchAll(_))) {
            None => {
                if path.len() != self.segs.len() {
                    return None;
                }
                for (t, p) in self.segs.iter().zip(path) {
                    match_one(t, p, &mut out)?;
                }
            }
            Some(c) => {
                let after = self.segs.len() - c - 1;
                if path.len() < c + 1 + after {
                    return None;
                }
                let tail_start = path.len() - after;
                for (t, p) in self.segs[..c].iter().zip(&path[..c]) {
                    match_one(t, p, &mut out)?;
                }
                if let Seg::CatchAll(name) = &self.segs[c] {
                    out.push((name.clone(), path[c..tail_start].join("/")));
                }
                for (t, p) in self.segs[c + 1..].iter().zip(&path[tail_start..]) {
                    match_one(t, p, &mut out)?;
                }
            }
        }
        Some(out)
    }

    /// Chi's preference between two templates that both match a path.
    fn precedence(&self, other: &Template) -> Ordering {
        let a = self.segs.iter().map(Seg::rank);
        let b = other.segs.iter().map(Seg::rank);
        a.cmp(b)
    }
}

fn parse_segment(s: &str, catch_all: Option<&str>, enums: &HashMap<String, Vec<String>>) -> Seg {
    if !s.contains('{') {
        return Seg::Static(s.to_string());
    }
    if let Some(name) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}'))
        && !name.contains('{')
    {
        return if catch_all == Some(name) {
            Seg::CatchAll(name.to_string())
        } else {
            Seg::Param(name.to_string())
        };
    }
    let mut pieces = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').unwrap_or(r.len());
            let name = r[..end].to_string();
            let allowed = enums.get(&name).cloned();
            pieces.push(Piece::Param { name, allowed });
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find('{').unwrap_or(rest.len());
            pieces.push(Piece::Lit(rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    Seg::Mixed(pieces)
}

fn match_one(t: &Seg, p: &str, out: &mut Vec<(String, String)>) -> Option<()> {
    match t {
        Seg::Static(s) => (s == p).then_some(()),
        Seg::Param(name) => {
            out.push((name.clone(), p.to_string()));
            Some(())
        }
        Seg::Mixed(pieces) => match_mixed(pieces, p, out),
        Seg::CatchAll(_) => None,
    }
}

fn match_mixed(pieces: &[Piece], mut p: &str, out: &mut Vec<(String, String)>) -> Option<()> {
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Lit(l) => p = p.strip_prefix(l.as_str())?,
            Piece::Param { name, allowed } => {
                let end = match pieces.get(i + 1) {
                    Some(Piece::Lit(next)) => p.find(next.as_str())?,
                    _ => p.len(),
                };
                let value = &p[..end];
                if value.is_empty() {
                    return None;
                }
                if let Some(allowed) = allowed
                    && !allowed.iter().any(|a| a == &decode(value))
                {
                    return None;
                }
                out.push((name.clone(), value.to_string()));
                p = &p[end..];
            }
        }
    }
    p.is_empty().then_some(())
}

fn decode(raw: &str) -> String {
    percent_decode_str(raw).decode_utf8_lossy().into_owned()
}

/// One routable (method, template) pair, pointing at an operation by index.
#[derive(Debug)]
struct Route {
    method: String,
    template: Template,
    op: usize,
}

/// What [`Router::route`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RouteMatch {
    /// The operation at this index, with its percent-decoded path parameters.
    Found { op: usize, params: Vec<(String, String)> },
    /// The path matches a template, but not for this method.
    MethodNotAllowed,
    /// Nothing matches.
    NotFound,
}

/// All routes of one spec flavor.
#[derive(Debug, Default)]
pub(crate) struct Router {
    routes: Vec<Route>,
}

impl Router {
    /// Adds the route of operation `op`.
    pub(crate) fn add(&mut self, method: &str, template: Template, op: usize) {
        self.routes.push(Route { method: method.to_ascii_uppercase(), template, op });
    }

    /// Routes `path`, the raw request path after `/api/v1` (it starts with `/`).
    pub(crate) fn route(&self, method: &str, path: &str) -> RouteMatch {
        let Some(rest) = path.strip_prefix('/') else {
            return RouteMatch::NotFound;
        };
        let segs: Vec<&str> = rest.split('/').collect();
        if segs.iter().any(|s| s.is_empty()) {
            return RouteMatch::NotFound;
        }
        let mut best: Option<(&Route, Vec<(String, String)>)> = None;
        let mut path_matched = false;
        for route in &self.routes {
            let Some(caps) = route.template.matches(&segs) else {
                continue;
            };
            path_matched = true;
            if !route.method.eq_ignore_ascii_case(method) {
                continue;
            }
            let better = match &best {
                None => true,
                Some((b, _)) => route.template.precedence(&b.template) == Ordering::Less,
            };
            if better {
                best = Some((route, caps));
            }
        }
        match best {
            Some((route, caps)) => RouteMatch::Found {
                op: route.op,
                params: caps.into_iter().map(|(k, v)| (k, decode(&v))).collect(),
            },
            None if path_matched => RouteMatch::MethodNotAllowed,
            None => RouteMatch::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router {
        let mut enums = HashMap::new();
        enums.insert("diffType".to_string(), vec!["diff".to_string(), "patch".to_string()]);
        let mut r = Router::default();
        let t = |p: &str, c: Option<&str>| Template::parse(p, c, &enums);
        r.add("GET", t("/repos/{owner}/{repo}/issues/{index}", None), 0);
        r.add("GET", t("/repos/{owner}/{repo}/issues/comments", None), 1);
        r.add("GET", t("/repos/{owner}/{repo}/pulls/{base}/{head}", Some("head")), 2);
        r.add("GET", t("/repos/{owner}/{repo}/pulls/{index}/files", None), 3);
        r.add("GET", t("/repos/{owner}/{repo}/pulls/{index}.{diffType}", None), 4);
        r.add("GET", t("/repos/{owner}/{repo}/pulls/{index}", None), 5);
        r.add("GET", t("/repos/{owner}/{repo}/commits/{ref}/status", Some("ref")), 6);
        r
    }

    fn found(m: RouteMatch) -> (usize, Vec<(String, String)>) {
        match m {
            RouteMatch::Found { op, params } => (op, params),
            other => panic!("expected a match, got {other:?}"),
        }
    }

    #[test]
    fn static_beats_param() {
        let r = router();
        assert_eq!(found(r.route("GET", "/repos/o/r/issues/comments")).0, 1);
        assert_eq!(found(r.route("GET", "/repos/o/r/issues/7")).0, 0);
    }

    #[test]
    fn catch_all_and_mixed() {
        let r = router();
        let (op, p) = found(r.route("GET", "/repos/o/r/pulls/main/feature/x"));
        assert_eq!(op, 2);
        assert_eq!(p[2], ("base".into(), "main".into()));
        assert_eq!(p[3], ("head".into(), "feature/x".into()));
        assert_eq!(found(r.route("GET", "/repos/o/r/pulls/1/files")).0, 3);
        let (op, p) = found(r.route("GET", "/repos/o/r/pulls/1.diff"));
        assert_eq!(op, 4);
        assert_eq!(p[2..], [("index".into(), "1".into()), ("diffType".into(), "diff".into())]);
        assert_eq!(found(r.route("GET", "/repos/o/r/pulls/1.txt")).0, 5);
        let (op, p) = found(r.route("GET", "/repos/o/r/commits/a/b%2Fc/status"));
        assert_eq!(op, 6);
        assert_eq!(p[2].1, "a/b/c");
    }

    #[test]
    fn empty_segments_and_methods() {
        let r = router();
        assert_eq!(r.route("GET", "/repos/o/r/issues/7/"), RouteMatch::NotFound);
        assert_eq!(r.route("GET", "/repos//r/issues/7"), RouteMatch::NotFound);
        assert_eq!(r.route("POST", "/repos/o/r/issues/7"), RouteMatch::MethodNotAllowed);
        assert_eq!(r.route("GET", "/nothing"), RouteMatch::NotFound);
    }
}
