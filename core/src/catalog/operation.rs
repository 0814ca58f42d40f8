//! One spec operation turned into a tool definition: name, description, input schema,
//! annotations, a compiled validator, and what the executor needs to build the request.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::fixes::SpecFix;
use super::spec::{RawOperation, Spec};
use super::wildcard::WildcardTable;
use super::{CatalogError, Flavor, Version, schema};

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

/// Hints for clients, derived from the method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
}

impl Annotations {
    pub(crate) fn for_method(m: Method) -> Annotations {
        Annotations {
            read_only: m == Method::Get,
            destructive: m == Method::Delete,
            idempotent: matches!(m, Method::Get | Method::Put | Method::Delete),
        }
    }
}

/// What a tool does when called.
#[derive(Debug)]
pub enum Target {
    /// A spec operation.
    Operation(Box<Operation>),
    /// The raw tool `gitea_api_request`.
    Raw,
    /// `gitea_download_attachment`: `/attachments/{uuid}` outside `/api/v1`.
    AttachmentDownload,
    /// `gitea_search_operations`: answered from the catalog, no request.
    SearchOperations,
    /// `gitea_get_operation_schema`: answered from the catalog, no request.
    OperationSchema,
    /// `gitea_call_operation`: runs another tool.
    CallOperation,
}

/// A tool as offered to clients. Its schemas and validator are built on first use: a
/// server start reads every operation but builds only what `tools/list` shows, and compiles a
/// validator only for a tool that is called.
#[derive(Debug)]
pub struct ToolDef {
    pub name: String,
    pub title: String,
    /// The short description `tools/list` shows.
    pub description: String,
    /// Everything the spec says about the operation (the discovery schema tool shows it).
    pub details: String,
    pub annotations: Annotations,
    pub target: Target,
    /// The area toolset of a spec operation (`toolsets::AREAS`); empty for built-in tools.
    pub(crate) toolset: &'static str,
    /// Whether the operation is one of the everyday ones (`toolsets::CORE_OPERATIONS`).
    pub core: bool,
    /// Whether the tool takes the optional `sudo` argument (`SUDO_ALLOWED_USERS`, see
    /// `identity::sudo`); it is then in both schemas, and taken out before validation.
    pub(crate) offers_sudo: bool,
    /// Where the schemas come from.
    source: Source,
    schemas: OnceLock<Schemas>,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

/// What a tool's schemas are built from.
#[derive(Debug)]
enum Source {
    /// The spec and the operation's place in it.
    Spec(Arc<Spec>, usize),
    /// A built-in tool's own schema, already lean.
    Given(Arc<Map<String, Value>>),
}

#[derive(Debug)]
struct Schemas {
    /// The schema arguments are validated against (the discovery schema tool shows it).
    input: Arc<Map<String, Value>>,
    /// The same schema with descriptions cut to their first sentence, for `tools/list`.
    listed: Arc<Map<String, Value>>,
    /// The body's field names regardless of letter case (`None`: nothing to rename).
    body_fields: Option<super::fields::Shape>,
}

impl ToolDef {
    /// The tool of operation `raw`, the `index`th of `spec`.
    pub(crate) fn new(
        op: Operation,
        raw: &RawOperation,
        spec: &Arc<Spec>,
        index: usize,
        flavor: Flavor,
    ) -> ToolDef {
        let meaning = super::meanings::summary_for(flavor, &op.id);
        ToolDef {
            name: op.id.clone(),
            title: title_of(&op, meaning),
            description: describe(raw, &op, meaning, flavor),
            details: raw.description.trim().to_owned(),
            annotations: Annotations::for_method(op.method),
            toolset: super::toolsets::area_of(&op.path),
            core: super::toolsets::is_core(&op.id),
            offers_sudo: false,
            target: Target::Operation(Box::new(op)),
            source: Source::Spec(spec.clone(), index),
            schemas: OnceLock::new(),
            validator: OnceLock::new(),
        }
    }

    /// A built-in tool (not a spec operation): its schema is already lean.
    pub(crate) fn builtin(
        name: &str,
        title: &str,
        description: String,
        schema: Value,
        annotations: Annotations,
        target: Target,
    ) -> ToolDef {
        let Value::Object(schema) = schema else { panic!("{name}: a tool schema is an object") };
        ToolDef {
            name: name.to_owned(),
            title: title.to_owned(),
            details: String::new(),
            description,
            annotations,
            target,
            toolset: "",
            core: false,
            offers_sudo: false,
            source: Source::Given(Arc::new(schema)),
            schemas: OnceLock::new(),
            validator: OnceLock::new(),
        }
    }

    fn schemas(&self) -> &Schemas {
        self.schemas.get_or_init(|| {
            let (mut input, mut listed) = match &self.source {
                Source::Spec(spec, index) => {
                    let Target::Operation(op) = &self.target else {
                        unreachable!("a spec tool runs an operation")
                    };
                    let input = schema::input_schema(&spec.parameters(*index), op, spec);
                    let listed = schema::lean(&input);
                    (Arc::new(input), Arc::new(listed))
                }
                Source::Given(schema) => (schema.clone(), Arc::new(schema::unwritten_left_out(schema))),
            };
            if self.offers_sudo {
                offer_sudo_in(Arc::make_mut(&mut input), SUDO_FULL);
                offer_sudo_in(Arc::make_mut(&mut listed), SUDO_LEAN);
            }
            // Every tool that answers JSON takes them; `tools/list` shows them where reading
            // makes them worth their bytes: reads, the raw tool and the call tool.
            if self.takes_shape() {
                offer_shape_in(Arc::make_mut(&mut input), Some(SHAPE_FULL), FIELDS_FULL);
                if self.annotations.read_only || self.operation().is_none() {
                    offer_shape_in(Arc::make_mut(&mut listed), None, FIELDS_LEAN);
                }
            }
            let body_fields =
                input.get("properties").and_then(|p| p.get("body")).and_then(super::fields::Shape::of);
            Schemas { input, listed, body_fields }
        })
    }

    /// Whether the schemas have been built (tests of what a start builds).
    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        self.schemas.get().is_some() && self.validator.get().is_some()
    }

    /// The schema arguments are validated against (the discovery schema tool shows it).
    pub fn input_schema(&self) -> &Arc<Map<String, Value>> {
        &self.schemas().input
    }

    /// The same schema with descriptions cut to their first sentence, for `tools/list`.
    pub fn listed_schema(&self) -> &Arc<Map<String, Value>> {
        &self.schemas().listed
    }

    /// The body's field names regardless of letter case (`None`: nothing to rename).
    pub(crate) fn body_fields(&self) -> Option<&super::fields::Shape> {
        self.schemas().body_fields.as_ref()
    }

    /// The compiled input schema, or why it does not compile (a spec given with `--spec`
    /// may hold a schema the validator refuses; the embedded ones all compile).
    pub fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        self.validator.get_or_init(|| schema::compile(self.input_schema())).as_ref().map_err(String::as_str)
    }

    /// Offer the optional `sudo` argument in both schemas. Done while the catalog is built,
    /// before any schema is: the argument is taken out of the arguments before they are
    /// validated, so the validator need not know it.
    pub(crate) fn offer_sudo(&mut self) {
        debug_assert!(self.schemas.get().is_none(), "sudo is offered before the schemas are built");
        self.schemas = OnceLock::new();
        self.offers_sudo = true;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is one of the discovery tools (search, schema, call), which answer from the
    /// catalog or name the operation to run rather than reaching the forge themselves.
    pub(crate) fn is_discovery(&self) -> bool {
        matches!(self.target, Target::SearchOperations | Target::OperationSchema | Target::CallOperation)
    }

    /// Whether the tool takes `shape` and `fields` for its result: every operation that
    /// answers JSON, the raw tool and the call tool.
    pub(crate) fn takes_shape(&self) -> bool {
        match &self.target {
            Target::Operation(op) => op.response == ResponseKind::Json,
            Target::Raw | Target::CallOperation => true,
            Target::AttachmentDownload | Target::SearchOperations | Target::OperationSchema => false,
        }
    }

    /// The spec operation, unless this is the raw tool.
    pub fn operation(&self) -> Option<&Operation> {
        match &self.target {
            Target::Operation(op) => Some(op),
            _ => None,
        }
    }
}

const SUDO_FULL: &str = "Act as this user (a login) for this call only: sent to the forge as the Sudo header, never as a parameter. Allowed when the caller is a site administrator and SUDO_ALLOWED_USERS lists the login; otherwise the call is refused before anything is sent.";
const SUDO_LEAN: &str =
    "Act as this user (a login): needs a site administrator and a login SUDO_ALLOWED_USERS lists.";

const SHAPE_FULL: &str = "\"full\": the forge's own JSON. By default (compact) nested users, repositories, labels and the like are reduced to their login, full name or name, derivable URLs are left out, and so are members that are empty, zero, false or null: absent means empty.";
const FIELDS_FULL: &str = "Keep only these members of the result, or of each item of a list: member paths such as `number`, `title`, `user`, `head.ref`. A path the result does not have is refused with the paths it has.";
const FIELDS_LEAN: &str = "Members to keep, e.g. title, head.ref";

/// Add the `shape` and `fields` properties to a schema.
/// (The listed schema's `shape` has no description: the server's instructions say it.)
fn offer_shape_in(schema: &mut Map<String, Value>, shape: Option<&str>, fields: &str) {
    use super::results::{FIELDS_ARGUMENT, MAX_FIELDS, MAX_PATH_CHARS, SHAPE_ARGUMENT};
    let props = schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        let mut s = serde_json::json!({"enum": ["compact", "full"]});
        let mut f = serde_json::json!({"type": "array", "items": {"type": "string"}, "description": fields});
        if let Some(text) = shape {
            s["description"] = text.into();
            f["items"]["maxLength"] = MAX_PATH_CHARS.into();
            f["maxItems"] = MAX_FIELDS.into();
        }
        props.insert(SHAPE_ARGUMENT.into(), s);
        props.insert(FIELDS_ARGUMENT.into(), f);
    }
}

/// Add the `sudo` property, described by `text`, to a schema.
fn offer_sudo_in(schema: &mut Map<String, Value>, text: &str) {
    let property = serde_json::json!({
        "type": "string",
        "minLength": 1,
        "maxLength": crate::identity::MAX_LOGIN_CHARS,
        "pattern": "^[A-Za-z0-9_.-]+$",
        "description": text,
    });
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert(crate::identity::SUDO_ARGUMENT.to_owned(), property);
    } else {
        let mut props = Map::new();
        props.insert(crate::identity::SUDO_ARGUMENT.to_owned(), property);
        schema.insert("properties".into(), Value::Object(props));
    }
}

/// The display name: the first sentence of the summary (some summaries run on: "Edit an
/// issue. If using deadline only the date will be taken into account, …").
fn title_of(op: &Operation, meaning: Option<&str>) -> String {
    let s = schema::first_sentence(meaning.unwrap_or(&op.summary));
    let s = s.trim().trim_end_matches('.');
    if s.is_empty() { op.id.clone() } else { s.to_owned() }
}

/// One line a model can act on: the summary (or the flavor's own meaning of a name that
/// means different things on Gitea and Forgejo), the first sentence of the spec's
/// description when it adds something, notes on the result, paging, and the route, e.g.
/// `GET /repos/{owner}/{repo}`. The whole spec text is in `details`.
fn describe(raw: &RawOperation, op: &Operation, meaning: Option<&str>, flavor: Flavor) -> String {
    let mut d = String::new();
    if op.deprecated {
        d.push_str("Deprecated. ");
    }
    let summary = meaning.unwrap_or(raw.summary.trim());
    d.push_str(if summary.is_empty() { &op.id } else { summary });
    if !d.ends_with('.') {
        d.push('.');
    }
    let extra = schema::first_sentence(raw.description.trim());
    let same = |a: &str, b: &str| a.trim_end_matches('.').eq_ignore_ascii_case(b.trim_end_matches('.'));
    if meaning.is_none() && !extra.is_empty() && !same(&extra, summary) {
        d.push(' ');
        d.push_str(&extra);
        if !d.ends_with('.') {
            d.push('.');
        }
    }
    let note = super::fixes::FIXES
        .iter()
        .find(|f| f.flavor == flavor && f.operation == op.id)
        .map(|f| f.note)
        .unwrap_or("");
    let note = if !note.is_empty() {
        note
    } else {
        match op.response {
            ResponseKind::Binary => {
                "Returns binary content as data.content_base64 (text content as a string)."
            }
            ResponseKind::Text => "Returns text.",
            ResponseKind::Redirect => "Answers with a redirect: data.location is the target.",
            ResponseKind::Json => "",
        }
    };
    if !note.is_empty() {
        d.push(' ');
        d.push_str(note);
    }
    if op.body == BodyEncoding::Text {
        d.push_str(" Its body is a string, sent as plain text as it is.");
    }
    if op.paging.is_some() {
        d.push_str(" Paged.");
    }
    // A JSON result comes compact by default (the server's instructions and the `shape`
    // argument say the rest): what an agent must not misread is a missing member.
    if op.response == ResponseKind::Json {
        d.push_str(" Absent means empty.");
    }
    d.push_str(&format!("\n\n{} {}", op.method.as_str(), op.path));
    d
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

    #[test]
    fn method_annotations_follow_the_method() {
        assert_eq!(
            Annotations::for_method(Method::Get),
            Annotations { read_only: true, destructive: false, idempotent: true }
        );
        assert!(Annotations::for_method(Method::Delete).destructive);
        assert!(!Annotations::for_method(Method::Post).idempotent);
        assert!(Annotations::for_method(Method::Put).idempotent);
    }
}
