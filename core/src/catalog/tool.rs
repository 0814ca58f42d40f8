//! A tool definition: name, description, input schema, annotations, a compiled validator,
//! and the target it runs (a spec operation, or one of the built-in tools). The schemas and
//! the validator are built at first use (`schema.rs`), so a start reads every operation but
//! builds little.

use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::operation::{BodyEncoding, Method, Operation, ResponseKind};
use super::spec::{RawOperation, Spec};
use super::{Flavor, schema};
use crate::error::Shown;

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
    /// Whether the tool takes the optional `sudo` argument (`SUDO_ALLOWED_USERS`, see the
    /// server's `identify::sudo`); it is then in both schemas, and taken out before validation.
    pub(crate) offers_sudo: bool,
    /// Whether the tool takes the optional `confirm` argument (a call that cannot be undone,
    /// for a client that cannot ask its person); then in both schemas, and taken out before
    /// validation.
    pub(crate) offers_confirm: bool,
    /// Whether the listed schema shows `confirm` too.
    pub(crate) confirm_listed: bool,
    /// Where the schemas come from.
    source: Source,
    schemas: OnceLock<Schemas>,
    validator: OnceLock<Result<jsonschema::Validator, Shown>>,
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
            offers_confirm: false,
            confirm_listed: false,
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
            offers_confirm: false,
            confirm_listed: false,
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
            // Listed without a description (the server's instructions say it once, and the
            // error of a call without it says what to send).
            if self.offers_confirm {
                let full = if self.operation().is_some() { CONFIRM_FULL } else { CONFIRM_REACHED_FULL };
                offer_confirm_in(Arc::make_mut(&mut input), Some(full));
                if self.confirm_listed {
                    offer_confirm_in(Arc::make_mut(&mut listed), None);
                }
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

    /// Offer the optional `confirm` argument in both schemas (before they are built, as
    /// `offer_sudo`).
    /// `listed`: in the listed schema too; else only in the full one (`gitea_get_operation_schema`),
    /// for a write that needs it only after its session read private content, whose error
    /// then says what to send: `tools/list` stays the size it was.
    pub(crate) fn offer_confirm(&mut self, listed: bool) {
        debug_assert!(self.schemas.get().is_none(), "confirm is offered before the schemas are built");
        self.schemas = OnceLock::new();
        self.offers_confirm = true;
        self.confirm_listed = listed;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is one of the discovery tools (search, schema, call), which answer from the
    /// catalog or name the operation to run rather than reaching the forge themselves.
    pub fn is_discovery(&self) -> bool {
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

const CONFIRM_FULL: &str = "This call cannot be undone. A client that can ask its person (elicitation) is asked and this is ignored; otherwise the exact target the person agreed to, as the error of a call without it names it (e.g. alice/webapp, alice/webapp#branch/feat-x). Never fill it in without asking the person.";
const CONFIRM_REACHED_FULL: &str = "For an operation that cannot be undone (deleting a repository, a branch, a release, ...): the exact target the person agreed to, as the error of a call without it names it; a client that can ask its person is asked instead. Never fill it in without asking the person.";

/// The argument that carries a person's confirmation when the client cannot ask them, and
/// the longest one read (a target is a route's values).
pub const CONFIRM_ARGUMENT: &str = "confirm";
pub(crate) const MAX_CONFIRM_BYTES: usize = 2048;

/// Add the `confirm` property, described by `text` if given, to a schema.
fn offer_confirm_in(schema: &mut Map<String, Value>, text: Option<&str>) {
    let mut property = serde_json::json!({"type": "string"});
    if let Some(text) = text {
        property["maxLength"] = MAX_CONFIRM_BYTES.into();
        property["description"] = text.into();
    }
    let props = schema.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        props.insert(CONFIRM_ARGUMENT.to_owned(), property);
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
