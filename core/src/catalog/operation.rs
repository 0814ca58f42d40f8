//! One spec operation as the executor needs it: method, path template, parameters, body
//! encoding, paging and what its answer carries. The tool a client sees is built on it in
//! `tool.rs`.

use serde_json::Value;

use super::fixes::SpecFix;
use super::spec::{RawOperation, Spec};
use super::wildcard::WildcardTable;
use super::{CatalogError, Flavor, Version};

/// HTTP methods the specs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub const ALL: [Method; 5] = [Method::Get, Method::Post, Method::Put, Method::Patch, Method::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// Parse an upper- or lower-case method name.
    pub(crate) fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(s))
    }
}

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Path,
    Query,
    /// The JSON body (argument `body`).
    Body,
    /// A multipart text field.
    FormField,
    /// A multipart file field, given as `{content_base64, filename, content_type}`.
    FormFile,
}

/// Swagger's `collectionFormat` for array query parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectionFormat {
    Csv,
    Ssv,
    Tsv,
    Pipes,
    /// `?k=a&k=b`
    Multi,
}

impl CollectionFormat {
    fn parse(s: Option<&str>) -> CollectionFormat {
        match s {
            Some("multi") => CollectionFormat::Multi,
            Some("ssv") => CollectionFormat::Ssv,
            Some("tsv") => CollectionFormat::Tsv,
            Some("pipes") => CollectionFormat::Pipes,
            _ => CollectionFormat::Csv,
        }
    }

    /// The separator that joins items, or `None` for `multi`.
    pub(crate) fn separator(self) -> Option<&'static str> {
        match self {
            CollectionFormat::Csv => Some(","),
            CollectionFormat::Ssv => Some(" "),
            CollectionFormat::Tsv => Some("\t"),
            CollectionFormat::Pipes => Some("|"),
            CollectionFormat::Multi => None,
        }
    }
}

/// One parameter of an operation.
#[derive(Debug, Clone)]
pub struct Param {
    /// The spec name, which is also the argument name (`body` for the JSON body).
    pub(crate) name: String,
    pub(crate) location: Location,
    pub(crate) required: bool,
    /// For array query parameters.
    pub(crate) collection: Option<CollectionFormat>,
    /// For path parameters: served through a catch-all route, so `/` stays literal.
    pub(crate) wildcard: bool,
}

/// What a successful answer of the operation carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    Json,
    Text,
    Binary,
    /// The operation answers with a 3xx whose `Location` is the result.
    Redirect,
}

/// How an operation's `body` argument goes on the wire, decided by the spec's `consumes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEncoding {
    /// As JSON, with `Content-Type: application/json` (every operation that accepts JSON).
    Json,
    /// The string as it is, with `Content-Type: text/plain; charset=utf-8`: the operation
    /// accepts only `text/plain` (`renderMarkdownRaw`), and both forges take its body
    /// byte for byte — a JSON-quoted string would come back rendered with its quotes.
    Text,
}

impl BodyEncoding {
    /// The media type a text body is sent with.
    pub const TEXT_MEDIA_TYPE: &'static str = "text/plain; charset=utf-8";

    /// From the media types an operation consumes (its own, else the spec's): text when
    /// they are all `text/plain`, JSON otherwise (also when the spec says nothing).
    pub(crate) fn from_consumes(consumes: &[String]) -> BodyEncoding {
        let plain = |m: &String| m.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("text/plain");
        if !consumes.is_empty() && consumes.iter().all(plain) {
            BodyEncoding::Text
        } else {
            BodyEncoding::Json
        }
    }
}

/// How an operation pages: which query parameters carry the page and the page size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    pub(crate) page_param: String,
    pub(crate) limit_param: Option<String>,
}

/// A piece of one path segment: literal text or a parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Lit(String),
    Param(String),
}

/// A path template such as `/repos/{owner}/{repo}/git/commits/{sha}.{diffType}`, split
/// into segments of pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    pub(crate) segments: Vec<Vec<Piece>>,
}

impl PathTemplate {
    /// Parse a template; braces always close within one segment in Swagger paths.
    pub(crate) fn parse(path: &str) -> PathTemplate {
        let segments = path
            .trim_start_matches('/')
            .split('/')
            .map(|seg| {
                let mut pieces = Vec::new();
                let mut rest = seg;
                while let Some(open) = rest.find('{') {
                    if open > 0 {
                        pieces.push(Piece::Lit(rest[..open].to_owned()));
                    }
                    let close = rest[open..].find('}').map(|c| open + c).unwrap_or(rest.len() - 1);
                    pieces.push(Piece::Param(rest[open + 1..close].to_owned()));
                    rest = &rest[(close + 1).min(rest.len())..];
                }
                if !rest.is_empty() {
                    pieces.push(Piece::Lit(rest.to_owned()));
                }
                pieces
            })
            .collect();
        PathTemplate { segments }
    }

    /// The names of the parameters in the template, in order.
    pub(crate) fn params(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().flatten().filter_map(|p| match p {
            Piece::Param(n) => Some(n.as_str()),
            Piece::Lit(_) => None,
        })
    }

    /// How literal the template is: routers prefer literal segments over parameters.
    pub(crate) fn literal_weight(&self) -> Vec<u8> {
        self.segments
            .iter()
            .map(|s| if s.iter().all(|p| matches!(p, Piece::Lit(_))) { 2 } else { 1 })
            .collect()
    }

    /// Whether literal, unencoded `segments` reach this template. A wildcard parameter
    /// (a whole segment) takes one or more segments; any other parameter exactly one.
    pub fn matches(&self, segments: &[&str], params: &[Param]) -> bool {
        let is_wild = |name: &str| params.iter().any(|p| p.name == name && p.wildcard);
        fn go(t: &[Vec<Piece>], s: &[&str], is_wild: &dyn Fn(&str) -> bool) -> bool {
            match (t.first(), s.first()) {
                (None, None) => true,
                (None, Some(_)) | (Some(_), None) => false,
                (Some(pieces), Some(seg)) => {
                    if let [Piece::Param(name)] = pieces.as_slice() {
                        if is_wild(name) {
                            let rest = &t[1..];
                            // Leave at least one segment for every remaining template segment.
                            return (1..=s.len().saturating_sub(rest.len())).any(|take| {
                                !s[..take].iter().any(|x| x.is_empty()) && go(rest, &s[take..], is_wild)
                            });
                        }
                    }
                    segment_matches(pieces, seg) && go(&t[1..], &s[1..], is_wild)
                }
            }
        }
        go(&self.segments, segments, &is_wild)
    }
}

/// One segment against its pieces: literals must appear, each parameter takes at least one
/// character. Parameters that share a segment are separated by the literal between them.
fn segment_matches(pieces: &[Piece], seg: &str) -> bool {
    fn go(pieces: &[Piece], seg: &str) -> bool {
        match pieces.first() {
            None => seg.is_empty(),
            Some(Piece::Lit(l)) => seg.strip_prefix(l.as_str()).is_some_and(|rest| go(&pieces[1..], rest)),
            Some(Piece::Param(_)) => {
                if pieces.len() == 1 {
                    return !seg.is_empty();
                }
                (1..=seg.len()).filter(|&i| seg.is_char_boundary(i)).any(|i| go(&pieces[1..], &seg[i..]))
            }
        }
    }
    go(pieces, seg)
}

/// An operation of the spec, resolved for one flavor and version.
#[derive(Debug, Clone)]
pub struct Operation {
    pub id: String,
    pub method: Method,
    /// The path template relative to `/api/v1`.
    pub(crate) path: String,
    pub template: PathTemplate,
    pub(crate) summary: String,
    pub(crate) tags: Vec<String>,
    pub params: Vec<Param>,
    /// How the `body` argument is sent.
    pub(crate) body: BodyEncoding,
    pub response: ResponseKind,
    /// The definition a JSON answer holds (one, or a list of them), when the spec names one.
    pub result: Option<super::results::Typed>,
    pub(crate) paging: Option<Paging>,
    pub(crate) deprecated: bool,
}

impl Operation {
    /// Resolve a raw operation: parameters and their locations, wildcard routes, how the
    /// body is sent, response kind (spec, then fixes), paging.
    pub(crate) fn from_spec(
        raw: &RawOperation,
        spec: &Spec,
        flavor: Flavor,
        version: &Version,
        wildcards: &WildcardTable,
        fixes: &[SpecFix],
    ) -> Result<Operation, CatalogError> {
        let err = |msg: String| CatalogError::Operation { op: raw.id.clone(), msg };
        let method =
            Method::parse(&raw.method).ok_or_else(|| err(format!("unsupported method {}", raw.method)))?;
        let mut params: Vec<Param> = Vec::new();
        for p in &raw.parameters {
            let name = p.name.clone().unwrap_or_default();
            let location = match (p.location.as_deref(), p.kind.as_deref()) {
                (Some("path"), _) => Location::Path,
                (Some("query"), _) => Location::Query,
                (Some("body"), _) => Location::Body,
                (Some("formData"), Some("file")) => Location::FormFile,
                (Some("formData"), _) => Location::FormField,
                // Header parameters (none in the embedded specs) are not offered as arguments.
                _ => continue,
            };
            let name = if location == Location::Body { "body".to_owned() } else { name };
            if name.is_empty() {
                return Err(err("a parameter has no name".into()));
            }
            if params.iter().any(|q| q.name == name) {
                return Err(err(format!("two parameters are named {name:?}")));
            }
            // A body whose schema has required fields is required even where the spec forgot
            // to say so: without it the forge can only answer 422.
            let required = location == Location::Path
                || p.required
                || (location == Location::Body && p.schema.as_ref().is_some_and(|s| spec.has_required(s)));
            let collection = (p.kind.as_deref() == Some("array"))
                .then(|| CollectionFormat::parse(p.collection_format.as_deref()));
            let wildcard = location == Location::Path
                && wildcards.is_wildcard(flavor, version, method.as_str(), &raw.path, &name);
            params.push(Param { name, location, required, collection, wildcard });
        }
        let template = PathTemplate::parse(&raw.path);
        for name in template.params() {
            if !params.iter().any(|p| p.location == Location::Path && p.name == name) {
                return Err(err(format!("the path names {{{name}}} but no path parameter declares it")));
            }
        }
        let response = fixes
            .iter()
            .find(|f| f.operation == raw.id)
            .map(|f| f.response)
            .unwrap_or_else(|| infer_response(raw, spec));
        let query_named = |n: &str| params.iter().any(|p| p.location == Location::Query && p.name == n);
        let paging = query_named("page").then(|| Paging {
            page_param: "page".into(),
            limit_param: ["limit", "per_page"].into_iter().find(|n| query_named(n)).map(str::to_owned),
        });
        let consumes = if raw.consumes.is_empty() { &spec.consumes } else { &raw.consumes };
        Ok(Operation {
            id: raw.id.clone(),
            method,
            path: raw.path.clone(),
            template,
            summary: raw.summary.clone(),
            tags: raw.tags.clone(),
            params,
            body: BodyEncoding::from_consumes(consumes),
            response,
            result: super::results::result_of(&raw.responses, spec)
                .filter(|_| response == ResponseKind::Json),
            paging,
            deprecated: raw.deprecated,
        })
    }

    /// The parameter that an argument name stands for.
    pub(crate) fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// From `produces` and the success responses: binary when a 2xx schema is `type: file` or
/// only binary media types are produced; text when only `text/*`; a redirect when only 3xx
/// are declared; JSON otherwise.
fn infer_response(raw: &RawOperation, spec: &Spec) -> ResponseKind {
    let success: Vec<&Value> = raw
        .responses
        .iter()
        .filter(|(code, _)| code.starts_with('2'))
        .map(|(_, r)| spec.response(r))
        .collect();
    if success.is_empty() && raw.responses.keys().any(|c| c.starts_with('3')) {
        return ResponseKind::Redirect;
    }
    let file_schema = success
        .iter()
        .any(|r| r.get("schema").and_then(|s| s.get("type")).and_then(Value::as_str) == Some("file"));
    let produces = if raw.produces.is_empty() { &spec.produces } else { &raw.produces };
    let is_json = |m: &String| m == "application/json" || m.ends_with("+json");
    if file_schema
        || (!produces.is_empty() && produces.iter().all(|m| !is_json(m) && !m.starts_with("text/")))
    {
        ResponseKind::Binary
    } else if !produces.is_empty() && produces.iter().all(|m| m.starts_with("text/")) {
        ResponseKind::Text
    } else {
        ResponseKind::Json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_with_two_parameters_in_one_segment_parse() {
        let t = PathTemplate::parse("/repos/{owner}/{repo}/git/commits/{sha}.{diffType}");
        assert_eq!(
            t.segments[5],
            vec![Piece::Param("sha".into()), Piece::Lit(".".into()), Piece::Param("diffType".into())]
        );
        assert!(segment_matches(&t.segments[5], "abc.diff"));
        assert!(!segment_matches(&t.segments[5], "abc"));
    }

    #[test]
    fn a_body_is_text_only_where_every_consumed_type_is_text_plain() {
        let of = |types: &[&str]| {
            BodyEncoding::from_consumes(&types.iter().map(|t| t.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(of(&["text/plain"]), BodyEncoding::Text);
        assert_eq!(of(&["text/plain; charset=utf-8"]), BodyEncoding::Text);
        assert_eq!(of(&["application/json", "text/plain"]), BodyEncoding::Json);
        assert_eq!(of(&["application/json"]), BodyEncoding::Json);
        assert_eq!(of(&["multipart/form-data"]), BodyEncoding::Json);
        assert_eq!(of(&[]), BodyEncoding::Json);
    }

    #[test]
    fn only_render_markdown_raw_takes_a_text_body_in_the_embedded_specs() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = super::super::Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            let text: Vec<&str> = c
                .all_tools()
                .filter_map(|t| t.operation())
                .filter(|op| op.body == BodyEncoding::Text)
                .map(|op| op.id.as_str())
                .collect();
            assert_eq!(text, ["renderMarkdownRaw"], "{flavor:?}");
        }
    }
}
