//! The raw tool's arguments → `CallPlan`.
//!
//! The path is literal text: we refuse what could change its meaning (`%`, `?`, `#`, dot
//! and empty segments) and encode each segment ourselves. The query may not carry `sudo`
//! (the server's `identify::sudo`). The operation its route reaches
//! (looked up once per call, by `Prepared`) gives it paging, response-kind handling and how
//! a string body is sent (as it is, to an operation that accepts only text).

use serde_json::{Map, Value};

use super::plan::{CallPlan, PageRequest, PlanBody, Root, encode_body, push_query};
use crate::args::sudo;
use crate::catalog::{BodyEncoding, Method, Operation, ResponseKind};
use crate::error::{CallError, Shown};
use crate::path::encode_segment;

/// Build the plan of a raw call (`Prepared::plan`): `args` passed the raw tool's schema and
/// its path `check_path` already; `reached` is the spec operation its method and path reach
/// (`Catalog::reached_by_raw`), if any.
pub(crate) fn plan(args: &Map<String, Value>, reached: Option<&Operation>) -> Result<CallPlan, CallError> {
    let method = args.get("method").and_then(Value::as_str).and_then(Method::parse).ok_or_else(|| {
        CallError::invalid_argument("/method", "`method` must be GET, POST, PUT, PATCH or DELETE")
    })?;
    let raw_path = args.get("path").and_then(Value::as_str).unwrap_or("");
    debug_assert!(check_path(raw_path).is_ok(), "a prepared raw call's path was checked");
    let path: String = raw_path.split('/').skip(1).map(|s| format!("/{}", encode_segment(s))).collect();

    let mut query = Vec::new();
    if let Some(q) = args.get("query").and_then(Value::as_object) {
        for (k, v) in q {
            if sudo::is_query_sudo(k) {
                return Err(sudo::query_refusal());
            }
            push_query(&mut query, k, v, None);
        }
    }
    let body = match args.get("body") {
        None | Some(Value::Null) => PlanBody::None,
        Some(_) if method == Method::Get => {
            return Err(CallError::invalid_argument(
                "/body",
                "a GET request cannot carry a body; use `query`",
            ));
        }
        Some(v @ Value::String(_)) => encode_body(reached.map_or(BodyEncoding::Json, |op| op.body), v),
        Some(v) => PlanBody::Json(v.clone()),
    };
    let op = reached;
    let page = op.and_then(|op| op.paging.as_ref()).map(|pg| {
        let num = |name: &str| query.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.parse::<u64>().ok());
        PageRequest {
            page: num(&pg.page_param).unwrap_or(1).max(1),
            limit: pg.limit_param.as_deref().and_then(num),
        }
    });
    Ok(CallPlan {
        method,
        path,
        root: Root::Api,
        query,
        body,
        expect: op.map(|o| o.response).unwrap_or(ResponseKind::Json),
        page,
        operation_id: op.map(|o| o.id.clone()),
    })
}

/// The rules for raw paths (README, "Results"), each with a message a person can act on.
pub fn check_path(p: &str) -> Result<(), Shown> {
    if !p.starts_with('/') {
        return Err(format!(
            "`path` must start with '/', relative to /api/v1, e.g. /repos/alice/demo (got {p:?})"
        ));
    }
    if p.contains('%') {
        return Err("`path` must not contain '%': write it unencoded; for values with '/' inside one segment (a tag like rel/1.0) use the operation's own tool, which encodes it".into());
    }
    if p.contains('?') || p.contains('#') {
        return Err("`path` must not contain '?' or '#': pass query parameters in `query`".into());
    }
    if p == "/api/v1" || p.starts_with("/api/v1/") {
        return Err("`path` is relative to /api/v1: drop the /api/v1 prefix".into());
    }
    if p.chars().any(char::is_control) {
        return Err("`path` must not contain control characters".into());
    }
    for seg in p.split('/').skip(1) {
        match seg {
            "" => {
                return Err("`path` must not have empty segments (leading '//', trailing '/' or '//')".into());
            }
            "." | ".." => return Err("`path` must not contain '.' or '..' segments".into()),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use serde_json::json;

    /// The plan of a raw call as a call builds it: prepared, then planned.
    fn raw(args: Value) -> Result<CallPlan, String> {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let tool = c.get(crate::catalog::raw_tool::NAME).unwrap();
        crate::args::Prepared::new(c, tool, args.as_object().unwrap().clone())
            .and_then(|call| call.plan(1 << 20))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn refuses_percent_dotdot_query_and_fragment() {
        for bad in [
            "/repos/o/r/releases/tags/rel%2F1.0",
            "/repos/o/../admin/users",
            "/repos?x=1",
            "/repos#x",
            "repos/o",
            "/repos//o",
            "/api/v1/repos/o/r",
        ] {
            let e = raw(json!({"method": "GET", "path": bad})).unwrap_err();
            assert!(e.contains("invalid_arguments"), "{bad}: {e}");
        }
    }

    #[test]
    fn encodes_segments_and_learns_paging_from_the_route() {
        let p = raw(json!({"method": "GET", "path": "/repos/o/r/issues", "query": {"page": 3, "limit": 10, "labels": ["a", "b"]}})).unwrap();
        assert_eq!(p.path, "/repos/o/r/issues");
        assert_eq!(p.page, Some(PageRequest { page: 3, limit: Some(10) }));
        assert_eq!(p.operation_id.as_deref(), Some("issueListIssues"));
        assert_eq!(p.query.iter().filter(|(k, _)| k == "labels").count(), 2);
        let f = raw(json!({"method": "GET", "path": "/repos/o/r/contents/docs/a b.md"})).unwrap();
        assert_eq!(f.path, "/repos/o/r/contents/docs/a%20b.md");
    }

    #[test]
    fn a_string_body_goes_as_text_only_to_a_route_that_takes_text() {
        let p = raw(json!({"method": "POST", "path": "/markdown/raw", "body": "# T"})).unwrap();
        assert_eq!(p.body, PlanBody::Text("# T".into()));
        let p = raw(json!({"method": "POST", "path": "/markdown", "body": "# T"})).unwrap();
        assert_eq!(p.body, PlanBody::Json(json!("# T")));
        let p = raw(json!({"method": "POST", "path": "/markdown/raw", "body": {"a": 1}})).unwrap();
        assert_eq!(p.body, PlanBody::Json(json!({"a": 1})));
    }

    #[test]
    fn a_sudo_query_parameter_is_refused_in_any_letter_case() {
        for key in ["sudo", "Sudo", "SUDO"] {
            let e = raw(json!({"method": "GET", "path": "/user", "query": {key: "bob"}})).unwrap_err();
            assert!(e.contains("denied") && e.contains("`sudo` argument"), "{key}: {e}");
        }
    }

    #[test]
    fn get_with_a_body_is_refused() {
        assert!(raw(json!({"method": "GET", "path": "/user", "body": {}})).is_err());
        assert!(
            raw(json!({"method": "DELETE", "path": "/repos/o/r/contents/x", "body": {"sha": "1"}})).is_ok()
        );
    }
}
