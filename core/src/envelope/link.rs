//! The `gitea://` URIs results link to: where a resource read gets again what a call
//! answered (the resource templates parse them back; a test and a fuzz target hold the two
//! to each other).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::attachment_tool;

/// The URI scheme of every resource.
pub const SCHEME: &str = "gitea://";

/// The envelope's `link` member: where the bytes `data` describes are read, and what they are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Link {
    /// A `gitea://` resource URI.
    pub uri: String,
    pub mime_type: String,
    /// The content's size in bytes.
    pub size: u64,
}

/// The resource that reads again what a call of `tool` with `args` answered, when one does:
/// a raw file (the file resource), or an attachment. With several forges, the URI names the
/// call's (`gitea://{forge}/…`), so that it is read again there and nowhere else.
pub fn uri_of(forge: Option<&str>, tool: &str, args: &Map<String, Value>) -> Option<String> {
    let uri = uri_on_one_forge(tool, args)?;
    Some(match forge {
        Some(forge) => format!("{SCHEME}{forge}/{}", &uri[SCHEME.len()..]),
        None => uri,
    })
}

fn uri_on_one_forge(tool: &str, args: &Map<String, Value>) -> Option<String> {
    let arg = |k: &str| args.get(k).and_then(Value::as_str).filter(|v| !v.is_empty());
    match tool {
        "repoGetRawFile" => {
            let (owner, repo, path) = (arg("owner")?, arg("repo")?, arg("filepath")?);
            // The file resource refuses an empty segment: such a path is not linked.
            if path.split('/').any(str::is_empty) {
                return None;
            }
            let mut uri =
                format!("{SCHEME}repos/{}/{}/contents/{}", encode(owner), encode(repo), encode_path(path));
            if let Some(r) = arg("ref") {
                uri.push_str("?ref=");
                uri.push_str(&encode(r));
            }
            Some(uri)
        }
        attachment_tool::NAME => Some(format!("{SCHEME}attachments/{}", encode(arg("uuid")?))),
        _ => None,
    }
}

/// Percent-encode a URI part: every byte but the unreserved ones (RFC 3986), the set the
/// executor encodes path values with (this layer is below it).
fn encode(s: &str) -> String {
    const UNRESERVED_KEPT: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    percent_encoding::utf8_percent_encode(s, UNRESERVED_KEPT).to_string()
}

/// A file path: each segment encoded, the `/` between them kept.
fn encode_path(path: &str) -> String {
    path.split('/').map(encode).collect::<Vec<_>>().join("/")
}
