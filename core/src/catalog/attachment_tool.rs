//! `gitea_download_attachment`: the bytes of an issue, comment or release attachment.
//!
//! The REST API only returns attachment metadata; the bytes live at `/attachments/{uuid}`,
//! outside `/api/v1` (the `browser_download_url`). The forges accept API tokens there, so
//! this tool fetches that one route on the configured forge, under the caller's identity,
//! with the same binary limit and envelope as every other tool. It takes the uuid, never a
//! URL: a URL from forge data could point anywhere, and the credential must not follow it.

use serde_json::json;

use super::Flavor;
use super::tool::{Annotations, Target, ToolDef};

/// The tool's name.
pub const NAME: &str = "gitea_download_attachment";

/// Its definition.
pub(crate) fn definition(flavor: Flavor) -> ToolDef {
    let schema = json!({
        "type": "object",
        "properties": {
            "uuid": {
                "type": "string",
                "pattern": "^[0-9A-Fa-f][0-9A-Fa-f-]{7,63}$",
                "description": "The attachment's uuid (the last segment of its browser_download_url)."
            }
        },
        "required": ["uuid"],
        "additionalProperties": false
    });
    ToolDef::builtin(
        NAME,
        "Download an attachment",
        format!(
            "Download the bytes of an issue, comment or release attachment from {} by its uuid. \
             Returns text as a string, other content as data.content_base64 (over a few KB, a link to read).\n\nGET /attachments/{{uuid}} (outside /api/v1)",
            flavor.display_name()
        ),
        schema,
        Annotations { read_only: true, destructive: false, idempotent: true },
        Target::AttachmentDownload,
    )
}
