//! What a transport puts into a request's extensions for the handler to honour: the
//! request's deadline, and that its message was too long to read. Defined with the handler
//! that reads them, so that the transports depend on the MCP layer and not the other way.

/// Put into a request's extensions (the message's own over stdio, the HTTP request's over
/// HTTP): the message it stands for was longer than `limit` bytes, so it was not read; only
/// its id and tool name were skimmed. The handler answers it without running anything.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Oversized {
    pub(crate) limit: usize,
}

/// When a request must be done: set as it is authenticated, and honoured by every later wait
/// — establishing its identity, waiting for its session, and the call itself — so that
/// `MCP_REQUEST_TIMEOUT` bounds the whole request, not each step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(pub tokio::time::Instant);

impl Deadline {
    /// The deadline a request carries (from `authenticate`), or one from now.
    pub(crate) fn of(extensions: &axum::http::Extensions, otherwise: std::time::Duration) -> Deadline {
        extensions
            .get::<Deadline>()
            .copied()
            .unwrap_or_else(|| Deadline(tokio::time::Instant::now() + otherwise))
    }

    /// The time left.
    pub(crate) fn left(&self) -> std::time::Duration {
        self.0.saturating_duration_since(tokio::time::Instant::now())
    }
}
