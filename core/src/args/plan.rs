//! `CallPlan`: a request ready to send, built from validated arguments.

use serde_json::{Map, Value};

use super::upload::{self, FilePart};
use crate::catalog::{BodyEncoding, Location, Method, Operation, ResponseKind};
use crate::error::CallError;
use crate::path;

/// The request body.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanBody {
    None,
    Json(Value),
    /// Sent as it is, as `text/plain` (an operation that accepts only text).
    Text(String),
    Multipart {
        fields: Vec<(String, String)>,
        files: Vec<(String, FilePart)>,
    },
}

/// The page a paged call asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub page: u64,
    pub limit: Option<u64>,
}

/// Where a plan's path is rooted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// Under `/api/v1` (every API operation).
    Api,
    /// Under the forge's base URL (attachment downloads).
    Site,
}

/// Everything the executor needs, and what the envelope reports about the request. Made only
/// here, in the core: from validated arguments (`for_operation`, the raw tool's `raw::plan`,
/// `attachment_download`), or as one of the server's own fixed GETs (`fixed_get`), so a plan
/// never carries what no check has seen. Read through its accessors.
#[derive(Debug, Clone, PartialEq)]
pub struct CallPlan {
    pub(crate) method: Method,
    /// Encoded path relative to `root`, starting with `/`.
    pub(crate) path: String,
    pub(crate) root: Root,
    /// Query pairs, unencoded, in order; repeated keys allowed.
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: PlanBody,
    /// What a successful answer is expected to carry.
    pub(crate) expect: ResponseKind,
    /// Set for paged operations.
    pub(crate) page: Option<PageRequest>,
    /// The spec operation this call reaches, when known.
    pub(crate) operation_id: Option<String>,
}

impl CallPlan {
    /// A parameterless GET of JSON that the server makes for itself (`/version`, `/user`,
    /// Forgejo's version outside `/api/v1`). The path is a literal of the server's code, never
    /// text a client or the forge sent, which its type (`&'static str`) keeps so.
    pub fn fixed_get(root: Root, path: &'static str) -> CallPlan {
        CallPlan {
            method: Method::Get,
            path: path.to_owned(),
            root,
            query: Vec::new(),
            body: PlanBody::None,
            expect: ResponseKind::Json,
            page: None,
            operation_id: None,
        }
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// The encoded path relative to `root`, starting with `/`.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn root(&self) -> Root {
        self.root
    }

    /// Query pairs, unencoded, in order; repeated keys allowed.
    pub fn query(&self) -> &[(String, String)] {
        &self.query
    }

    pub fn body(&self) -> &PlanBody {
        &self.body
    }

    /// What a successful answer is expected to carry.
    pub fn expect(&self) -> ResponseKind {
        self.expect
    }

    /// The page asked for, for paged operations.
    pub fn page(&self) -> Option<PageRequest> {
        self.page
    }

    /// The spec operation this call reaches, when known.
    pub fn operation_id(&self) -> Option<&str> {
        self.operation_id.as_deref()
    }
}

/// Build the plan of a spec operation. `args` passed `validate` already.
pub fn for_operation(
    op: &Operation,
    args: &Map<String, Value>,
    max_upload: u64,
) -> Result<CallPlan, CallError> {
    let texts: Vec<(&str, String)> = op
        .params
        .iter()
        .filter(|p| p.location == Location::Path)
        .filter_map(|p| args.get(&p.name).map(|v| (p.name.as_str(), scalar(v))))
        .collect();
    let path = path::render(&op.template, &op.params, |name| {
        texts.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    })
    .map_err(|e| {
        CallError::invalid_argument(format!("/{}", e.param), format!("`{}` {}", e.param, e.message))
    })?;

    let mut query = Vec::new();
    let mut fields = Vec::new();
    let mut files = Vec::new();
    let mut json_body = None;
    for p in &op.params {
        let Some(v) = args.get(&p.name) else { continue };
        match p.location {
            Location::Path => {}
            // Only in a spec given with --spec: see `Catalog::offer_sudo`.
            Location::Query if crate::args::sudo::is_query_sudo(&p.name) => {
                return Err(crate::args::sudo::query_refusal());
            }
            Location::Query => push_query(&mut query, &p.name, v, p.collection.and_then(|c| c.separator())),
            Location::Body => json_body = Some(encode_body(op.body, v)),
            Location::FormField => fields.push((p.name.clone(), scalar(v))),
            Location::FormFile => {
                let obj = v.as_object().cloned().unwrap_or_default();
                files.push((p.name.clone(), upload::decode(&p.name, &obj, max_upload)?));
            }
        }
    }
    let body = if !files.is_empty() || !fields.is_empty() {
        PlanBody::Multipart { fields, files }
    } else {
        json_body.unwrap_or(PlanBody::None)
    };
    let page = op.paging.as_ref().map(|pg| PageRequest {
        page: args.get(&pg.page_param).and_then(Value::as_u64).unwrap_or(1).max(1),
        limit: pg.limit_param.as_ref().and_then(|l| args.get(l)).and_then(Value::as_u64),
    });
    Ok(CallPlan {
        method: op.method,
        path,
        root: Root::Api,
        query,
        body,
        expect: op.response,
        page,
        operation_id: Some(op.id.clone()),
    })
}

/// A body argument as the operation takes it: JSON, or for a text operation the string
/// itself (never JSON-quoted; the schema asks for a string, anything else goes as JSON text).
pub(crate) fn encode_body(encoding: BodyEncoding, v: &Value) -> PlanBody {
    match encoding {
        BodyEncoding::Json => PlanBody::Json(v.clone()),
        BodyEncoding::Text => PlanBody::Text(scalar(v)),
    }
}

/// The plan of `gitea_download_attachment`: `GET /attachments/{uuid}` at the forge's root.
/// The schema's pattern already limited the uuid to hex digits and dashes.
pub(crate) fn attachment_download(args: &Map<String, Value>) -> CallPlan {
    let uuid = args.get("uuid").and_then(Value::as_str).unwrap_or_default();
    CallPlan {
        method: Method::Get,
        path: format!("/attachments/{}", path::encode_segment(uuid)),
        root: Root::Site,
        query: Vec::new(),
        body: PlanBody::None,
        expect: ResponseKind::Binary,
        page: None,
        operation_id: None,
    }
}

/// Add a query value: arrays are joined by the collection separator, or repeated (`multi`).
pub(crate) fn push_query(query: &mut Vec<(String, String)>, name: &str, v: &Value, separator: Option<&str>) {
    match v {
        Value::Array(items) => match separator {
            Some(sep) => {
                query.push((name.to_owned(), items.iter().map(scalar).collect::<Vec<_>>().join(sep)))
            }
            None => query.extend(items.iter().map(|i| (name.to_owned(), scalar(i)))),
        },
        Value::Null => {}
        other => query.push((name.to_owned(), scalar(other))),
    }
}

/// The string form of a scalar argument (strings unquoted; anything else as JSON).
pub(crate) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};
    use serde_json::json;

    fn plan(tool: &str, args: Value) -> Result<CallPlan, CallError> {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let op = c.get(tool).unwrap().operation().unwrap().clone();
        for_operation(&op, args.as_object().unwrap(), 1 << 20)
    }

    #[test]
    fn integers_and_booleans_become_query_text_and_multi_arrays_repeat() {
        let p = plan(
            "issueSearchIssues",
            json!({"state": "open", "labels": "bug", "page": 2, "limit": 5, "assigned": true}),
        )
        .unwrap();
        assert!(p.query.contains(&("page".into(), "2".into())));
        assert!(p.query.contains(&("assigned".into(), "true".into())));
        assert_eq!(p.page, Some(PageRequest { page: 2, limit: Some(5) }));
        let a = plan(
            "repoGetArchive",
            json!({"owner": "o", "repo": "r", "archive": "main.zip", "path": ["a", "b c"]}),
        )
        .unwrap();
        assert_eq!(a.query, [("path".to_owned(), "a".to_owned()), ("path".to_owned(), "b c".to_owned())]);
    }

    #[test]
    fn integer_path_values_are_rendered() {
        let p = plan("issueGetIssue", json!({"owner": "o", "repo": "r", "index": 7})).unwrap();
        assert_eq!(p.path, "/repos/o/r/issues/7");
        assert_eq!(p.page, None);
    }

    #[test]
    fn a_text_body_is_the_string_itself_and_a_json_body_stays_json() {
        let p = plan("renderMarkdownRaw", json!({"body": "# Title \"q\""})).unwrap();
        assert_eq!(p.body, PlanBody::Text("# Title \"q\"".into()));
        let p = plan("issueCreateIssue", json!({"owner": "o", "repo": "r", "body": {"title": "t"}})).unwrap();
        assert_eq!(p.body, PlanBody::Json(json!({"title": "t"})));
    }

    #[test]
    fn a_query_parameter_named_sudo_is_never_sent() {
        let spec = br#"{"swagger":"2.0","info":{"version":"1"},"paths":{
            "/q":{"get":{"operationId":"q","parameters":[{"name":"Sudo","in":"query","type":"string"}],"responses":{"200":{"description":"ok"}}}}}}"#;
        let c = Catalog::build(spec, Flavor::Gitea, None).unwrap();
        let op = c.get("q").unwrap().operation().unwrap().clone();
        let e = for_operation(&op, json!({"Sudo": "bob"}).as_object().unwrap(), 1).unwrap_err();
        assert_eq!(e.kind(), Some(crate::error::ErrorKind::Denied), "{e}");
        assert!(for_operation(&op, &Map::new(), 1).unwrap().query.is_empty());
    }

    #[test]
    fn a_bad_path_value_names_the_argument() {
        let e = plan("repoGet", json!({"owner": "..", "repo": "r"})).unwrap_err();
        let CallError::Result(f) = e else { panic!() };
        assert_eq!(f.path.as_deref(), Some("/owner"));
    }
}
