//! Scripted responses: canned answers that take precedence over routing and the model.
//!
//! They exist to put a client in front of misbehaving servers: slow headers, chunked bodies,
//! bodies that never end, a `Content-Length` that lies, a server that never answers or closes
//! the connection instead of answering. Streaming
//! bodies are produced lazily, one chunk each time hyper asks for more, so an endless body
//! costs no memory and stops as soon as the connection is gone (hyper drops the body).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;

use crate::reply::{Body, build};

/// A queued scripted response.
#[derive(Debug, Clone)]
pub struct Script {
    /// The method to answer (case-insensitive); `None` answers any method.
    pub method: Option<String>,
    /// Matched against the raw request path: exactly, or as a prefix when it ends with `*`.
    pub path: String,
    /// How many requests it answers before being discarded (`usize::MAX` = forever).
    pub times: usize,
    /// The answer.
    pub response: ScriptedResponse,
}

impl Script {
    /// Answers the next matching request once.
    pub fn once(method: Option<&str>, path: &str, response: ScriptedResponse) -> Script {
        Script { method: method.map(str::to_string), path: path.to_string(), times: 1, response }
    }

    /// Answers every matching request.
    pub fn always(method: Option<&str>, path: &str, response: ScriptedResponse) -> Script {
        Script { times: usize::MAX, ..Script::once(method, path, response) }
    }

    fn matches(&self, method: &str, raw_path: &str) -> bool {
        let method_ok = self.method.as_deref().is_none_or(|m| m.eq_ignore_ascii_case(method));
        let path_ok = match self.path.strip_suffix('*') {
            Some(prefix) => raw_path.starts_with(prefix),
            None => raw_path == self.path,
        };
        method_ok && path_ok && self.times > 0
    }
}

/// The response of a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptedResponse {
    /// The status code.
    pub status: u16,
    /// Extra headers. `content-length` and `transfer-encoding` are ignored: the body variant
    /// decides them.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: ScriptBody,
    /// Waited before sending the headers.
    pub delay: Duration,
    /// Held before sending the headers (after `delay`) until the test opens it.
    pub gate: Option<Gate>,
}

/// What holds a scripted response until the test opens it: for a request that must still be
/// in flight while the test does something (its client leaves, the server shuts down),
/// however slow the machine, where a delay would have to outlast the test's own steps.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate(Arc::new(tokio::sync::watch::Sender::new(false)))
    }

    /// Lets every response it holds, and any that reaches it later, go.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn passed(&self) {
        let _ = self.0.subscribe().wait_for(|open| *open).await;
    }
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new()
    }
}

impl ScriptedResponse {
    /// `status` with an empty body.
    pub fn status(status: u16) -> ScriptedResponse {
        ScriptedResponse {
            status,
            headers: Vec::new(),
            body: ScriptBody::Bytes(Vec::new()),
            delay: Duration::ZERO,
            gate: None,
        }
    }

    /// `status` with a JSON body and Gitea's JSON content type.
    pub fn json(status: u16, value: &serde_json::Value) -> ScriptedResponse {
        ScriptedResponse::status(status)
            .with_header("content-type", crate::reply::JSON)
            .with_body(ScriptBody::Bytes(value.to_string().into_bytes()))
    }

    /// Replaces the body.
    pub fn with_body(mut self, body: ScriptBody) -> ScriptedResponse {
        self.body = body;
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> ScriptedResponse {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the delay before the headers.
    pub fn with_delay(mut self, delay: Duration) -> ScriptedResponse {
        self.delay = delay;
        self
    }

    /// Holds the response (before its headers) until `gate` is opened.
    pub fn held_until(mut self, gate: &Gate) -> ScriptedResponse {
        self.gate = Some(gate.clone());
        self
    }
}

/// The body of a [`ScriptedResponse`].
#[derive(Debug, Clone)]
pub enum ScriptBody {
    /// Sent at once, with `Content-Length`.
    Bytes(Vec<u8>),
    /// Sent chunk by chunk with chunked transfer encoding (no `Content-Length`), waiting
    /// `delay_between` between two chunks.
    Chunked {
        /// The chunks, in order.
        chunks: Vec<Vec<u8>>,
        /// The pause between two chunks.
        delay_between: Duration,
    },
    /// Repeats `chunk` forever (no `Content-Length`) until the client goes away. Produced only
    /// as fast as the client reads. An empty chunk stands for 16 KiB of `x`.
    Endless {
        /// The repeated chunk.
        chunk: Vec<u8>,
    },
    /// Declares `Content-Length: declared` but sends only `actual`, then closes the connection.
    /// `declared` should be larger than `actual.len()`.
    LyingLength {
        /// The announced length.
        declared: u64,
        /// What is really sent.
        actual: Vec<u8>,
    },
    /// Never answers; the request stays pending until the client gives up.
    Hang,
    /// Closes the connection without sending a byte of a response (after the delay), like a
    /// server that crashed mid-request. The status and headers are ignored.
    Close,
}

/// Takes the newest script matching the request, counting one use.
pub(crate) fn take_match(
    scripts: &mut Vec<Script>,
    method: &str,
    raw_path: &str,
) -> Option<ScriptedResponse> {
    let index = scripts.iter().rposition(|s| s.matches(method, raw_path))?;
    let script = &mut scripts[index];
    let response = script.response.clone();
    if script.times != usize::MAX {
        script.times -= 1;
        if script.times == 0 {
            scripts.remove(index);
        }
    }
    Some(response)
}

/// Counters shared by all streaming bodies of one server.
#[derive(Debug, Default)]
pub(crate) struct StreamCounters {
    /// Streaming bodies and hanging requests alive right now.
    pub open: AtomicUsize,
    /// Bytes handed to hyper by streaming bodies.
    pub bytes: AtomicU64,
}

/// Keeps [`StreamCounters::open`] up while a streaming body or a hanging request is alive.
struct OpenGuard(Arc<StreamCounters>);

impl OpenGuard {
    fn new(counters: Arc<StreamCounters>) -> OpenGuard {
        counters.open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(counters)
    }

    fn sent(&self, chunk: &Bytes) {
        self.0.bytes.fetch_add(chunk.len() as u64, Ordering::SeqCst);
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Plays a scripted response: waits, then builds the body; `None` means close the connection
/// ([`ScriptBody::Close`]). For [`ScriptBody::Hang`] this never returns (the connection task is
/// dropped when the client disconnects).
pub(crate) async fn play(
    response: ScriptedResponse,
    counters: Arc<StreamCounters>,
) -> Option<http::Response<Body>> {
    tokio::time::sleep(response.delay).await;
    if let Some(gate) = &response.gate {
        gate.passed().await;
    }
    let mut headers: Vec<(String, String)> = response
        .headers
        .into_iter()
        .filter(|(n, _)| {
            !n.eq_ignore_ascii_case("content-length") && !n.eq_ignore_ascii_case("transfer-encoding")
        })
        .collect();
    let body = match response.body {
        ScriptBody::Hang => {
            // Counted as open until hyper drops this future (the client went away).
            let _open = OpenGuard::new(counters);
            std::future::pending().await
        }
        ScriptBody::Close => return None,
        ScriptBody::Bytes(b) => Full::new(Bytes::from(b)).map_err(|never| match never {}).boxed_unsync(),
        ScriptBody::Chunked { chunks, delay_between } => {
            chunked(chunks, delay_between, OpenGuard::new(counters))
        }
        ScriptBody::Endless { chunk } => endless(chunk, OpenGuard::new(counters)),
        ScriptBody::LyingLength { declared, actual } => {
            headers.push(("content-length".into(), declared.to_string()));
            lying(actual, OpenGuard::new(counters))
        }
    };
    Some(build(response.status, &headers, body))
}

fn chunked(chunks: Vec<Vec<u8>>, delay: Duration, guard: OpenGuard) -> Body {
    let stream = futures::stream::iter(chunks.into_iter().enumerate()).then(move |(i, c)| async move {
        if i > 0 {
            tokio::time::sleep(delay).await;
        }
        Bytes::from(c)
    });
    frames(stream, guard)
}

/// A stream (unknown size, so hyper trusts the declared length) that sends `actual` and ends
/// after a pause. The pause lets hyper flush the head and the bytes; the early end then makes
/// hyper abort the connection instead of completing the response.
fn lying(actual: Vec<u8>, guard: OpenGuard) -> Body {
    let data = futures::stream::iter([Bytes::from(actual)]);
    // Made when hyper first asks past the data, so that the pause is one whatever the delay
    // between building the body and sending it.
    let pause = futures::stream::once(async { tokio::time::sleep(Duration::from_millis(50)).await })
        .filter_map(|()| async { None });
    frames(data.chain(pause), guard)
}

fn endless(chunk: Vec<u8>, guard: OpenGuard) -> Body {
    let chunk = if chunk.is_empty() { Bytes::from(vec![b'x'; 16 * 1024]) } else { Bytes::from(chunk) };
    frames(futures::stream::repeat(chunk), guard)
}

fn frames(stream: impl futures::Stream<Item = Bytes> + Send + 'static, guard: OpenGuard) -> Body {
    let stream = stream.map(move |chunk| {
        guard.sent(&chunk);
        Ok::<_, std::io::Error>(Frame::data(chunk))
    });
    StreamBody::new(stream).boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_match_wins_and_times_count_down() {
        let mut scripts = vec![
            Script::always(None, "/api/v1/*", ScriptedResponse::status(500)),
            Script::once(Some("get"), "/api/v1/version", ScriptedResponse::status(418)),
        ];
        let status = |s: Option<ScriptedResponse>| s.map(|r| r.status);
        assert_eq!(status(take_match(&mut scripts, "GET", "/api/v1/version")), Some(418));
        assert_eq!(status(take_match(&mut scripts, "GET", "/api/v1/version")), Some(500));
        assert_eq!(status(take_match(&mut scripts, "POST", "/api/v1/x")), Some(500));
        assert_eq!(status(take_match(&mut scripts, "GET", "/other")), None);
        assert_eq!(scripts.len(), 1);
    }
}
