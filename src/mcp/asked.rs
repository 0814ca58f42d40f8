//! What the handler reads of one request, from whichever way it came.

use rmcp::model::{ClientCapabilities, Implementation, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use super::marks::Oversized;

/// What the handler reads of one request: its HTTP head (none over stdio), whether its message
/// was too long to read, its client and, where the server may send it requests, the way back
/// to it. Built from rmcp's context, or by `transport::direct` from the request it parsed.
pub(crate) struct Asked<'a> {
    pub(crate) parts: Option<&'a http::request::Parts>,
    pub(crate) oversized: Option<Oversized>,
    pub(crate) client: Client,
    pub(crate) peer: Option<Peer<RoleServer>>,
}

/// A request's client as the handler is told of it: the protocol version it speaks, its name
/// and its capabilities — from the request's own `_meta` from 2026-07-28 on, from its
/// session's handshake before.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) protocol: Option<ProtocolVersion>,
    pub(crate) info: Option<Implementation>,
    pub(crate) capabilities: Option<ClientCapabilities>,
}

impl<'a> Asked<'a> {
    pub(crate) fn of(context: &'a RequestContext<RoleServer>) -> Asked<'a> {
        Asked {
            parts: context.extensions.get::<http::request::Parts>(),
            oversized: oversized_of(context),
            client: Client {
                protocol: context.protocol_version(),
                info: context.client_info(),
                capabilities: context.client_capabilities(),
            },
            peer: Some(context.peer.clone()),
        }
    }
}

/// Whether the call stands for a message too long to read (`Oversized`, put by the
/// stdio reader into the message, by the HTTP body layer into the request).
fn oversized_of(context: &RequestContext<RoleServer>) -> Option<Oversized> {
    context.extensions.get::<Oversized>().copied().or_else(|| {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Oversized>().copied())
    })
}
