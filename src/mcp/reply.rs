//! The one mapping of a guarded result to the protocol: a tool call's `Outcome` as a
//! `CallToolResult` (or the JSON-RPC error of an unknown tool), and a resource read's guarded
//! text as its contents (or its JSON-RPC error). Each takes only what passed the guard.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents};
use serde_json::Value;

use aegis_core::envelope::Link;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::{Guarded, GuardedError, Outcome};

/// A `link` as the protocol's resource: named by the last part of its path.
fn resource_of(l: Link) -> Resource {
    let path = l.uri.split('?').next().unwrap_or(&l.uri);
    let mut r = Resource::new(l.uri.clone(), path.rsplit('/').next().unwrap_or(path).to_owned());
    r.description = Some(format!("{} bytes of {}: read this resource for them", l.size, l.mime_type));
    r.mime_type = Some(l.mime_type);
    r.size = Some(l.size);
    r
}

/// What a resource read answers: the envelope text, or for binary content (`data` is
/// `{content_base64, content_type, size}`) the bytes as a blob of their own type. The blob is
/// read from the text in place (base64 has no escapes) and copied once: a resource may be
/// `MAX_RESOURCE_BYTES` large.
pub(crate) fn resource_contents(text: Guarded, uri: &str) -> ResourceContents {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        data: Blob<'a>,
    }
    /// Exactly the members decoding gives binary content: a forge's JSON that happens to
    /// hold such members among others is text.
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Blob<'a> {
        #[serde(borrow)]
        content_base64: std::borrow::Cow<'a, str>,
        content_type: String,
        #[allow(dead_code)]
        size: u64,
    }
    let text = text.into_string();
    let binary = match serde_json::from_str::<Envelope>(&text) {
        Ok(e) => Some((e.data.content_base64.into_owned(), e.data.content_type)),
        Err(_) => None,
    };
    match binary {
        Some((blob, mime)) => {
            drop(text);
            ResourceContents::blob(blob, uri).with_mime_type(mime)
        }
        None => ResourceContents::text(text, uri).with_mime_type("application/json"),
    }
}

/// A failed resource read as a JSON-RPC error: -32002 for a resource the forge does not
/// have (rmcp sends -32602 instead to peers on protocol 2026-07-28, SEP-2164), -32602 for a
/// URI we cannot read, -32603 otherwise; the kind and status travel in `data`, with
/// `retry_after_seconds` when known (as in an error result).
pub(crate) fn resource_error(e: GuardedError) -> ErrorData {
    let (kind, status, message, retry_after) = match e.into_error() {
        CallError::Result(f) => (f.kind, f.status, f.message, f.retry_after),
        CallError::UnknownTool(name) => (ErrorKind::InvalidArguments, None, name, None),
    };
    let code = match kind {
        ErrorKind::NotFound => rmcp::model::ErrorCode::RESOURCE_NOT_FOUND,
        ErrorKind::InvalidArguments => rmcp::model::ErrorCode::INVALID_PARAMS,
        _ => rmcp::model::ErrorCode::INTERNAL_ERROR,
    };
    let mut data = serde_json::json!({"kind": kind.as_str(), "status": status});
    if let Some(seconds) = retry_after {
        data["retry_after_seconds"] = seconds.into();
    }
    ErrorData::new(code, message, Some(data))
}

/// How an envelope with a `link` begins it (after `data`): only this server writes the
/// envelope's own members, so a forge's JSON cannot start one.
const LINK_MEMBER: &str = "\"link\":{\"uri\":\"gitea://";

/// An `Outcome` in rmcp's terms. A success for a client given typed results (`typed`) also
/// carries the envelope as `structuredContent`, parsed from the very text the guard passed,
/// so the two channels hold the same JSON; an error carries text only (a client checking it
/// against the success schema would hide the error). An envelope with a `link` also carries
/// it as a `resource_link` item, for the client to read.
pub fn to_rmcp(outcome: Outcome, typed: bool) -> Result<CallToolResult, ErrorData> {
    match outcome {
        Outcome::Success(text) => {
            let text = text.into_string();
            let linked = text.contains(LINK_MEMBER);
            let envelope = if typed || linked {
                serde_json::from_str::<Value>(&text).ok().filter(Value::is_object)
            } else {
                None
            };
            let link = envelope
                .as_ref()
                .filter(|_| linked)
                .and_then(|e| serde_json::from_value::<Link>(e.get("link")?.clone()).ok());
            let mut content = vec![ContentBlock::text(text)];
            if let Some(l) = link {
                content.push(ContentBlock::resource_link(resource_of(l)));
            }
            let mut result = CallToolResult::success(content);
            if typed {
                result.structured_content = envelope;
            }
            Ok(result)
        }
        Outcome::Error(text) => Ok(CallToolResult::error(vec![ContentBlock::text(text.into_string())])),
        Outcome::UnknownTool(message) => Err(ErrorData::invalid_params(message.into_string(), None)),
    }
}
