//! A session request whose answer is its only message goes back as plain JSON with a
//! `Content-Length`, as a stateless one does.
//!
//! The MCP library streams every answer inside a session as Server-Sent Events (a priming
//! event, then the message, then the end of the stream), which clients must run through an
//! event-stream parser: the official Python client spends half again as long per call on that
//! as on a plain JSON body. A POST's stream carries more than its answer only when the handler
//! sends something first (progress, a log message, a request to the client); this server's
//! handlers do not, but when one does, or when the stream does not end right after the
//! answer, the events go out as a stream as before, none lost. The standalone GET stream and
//! clients that do not take `application/json` are left alone.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// The most of a stream held while deciding; a longer answer is streamed as it comes.
const MAX_HELD: usize = 16 << 20;
/// How long the end of the stream may take after the answer before it is streamed instead.
const END_WAIT: Duration = Duration::from_millis(500);

pub(crate) async fn plain_json(req: Request, next: Next) -> Response {
    let wants = req.method() == Method::POST && takes_json(req.headers().get(header::ACCEPT));
    let response = next.run(req).await;
    if !wants || !is_event_stream(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut held: Vec<u8> = Vec::new();
    let mut answer: Option<Data> = None;
    let mut reader = Events::default();
    // Read events until the first one with data: the answer, or something else (then stream).
    let streamed = loop {
        match reader.first_message(&held) {
            Message::Incomplete => {}
            Message::Answer(data) => {
                answer = Some(data);
                break false;
            }
            Message::Other => break true,
        }
        if held.len() > MAX_HELD {
            break true;
        }
        match stream.next().await {
            Some(Ok(chunk)) => held.extend_from_slice(&chunk),
            // Nothing (more) to tell: pass on what there is, as the library made it.
            Some(Err(_)) | None => break true,
        }
    };
    // What the stream sent after the answer, when it did not simply end: it goes out too.
    let mut next_item = None;
    if !streamed {
        // The answer must be the last thing the stream carries.
        match tokio::time::timeout(END_WAIT, stream.next()).await {
            Ok(None) => {
                if let Some(data) = answer.take() {
                    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    parts.headers.remove(header::CACHE_CONTROL);
                    parts.headers.remove(header::TRANSFER_ENCODING);
                    parts.headers.remove("x-accel-buffering");
                    let body = match data {
                        Data::Within(range) => Bytes::from(held).slice(range),
                        Data::Joined(joined) => Bytes::from(joined),
                    };
                    return Response::from_parts(parts, Body::from(body));
                }
            }
            Ok(Some(item)) => next_item = Some(item),
            Err(_) => {}
        }
    }
    let head =
        futures::stream::iter(std::iter::once(Ok::<Bytes, axum::Error>(Bytes::from(held))).chain(next_item));
    let body = head.chain(stream);
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether an `Accept` header takes `application/json` (the protocol asks every client to
/// accept both it and `text/event-stream`).
fn takes_json(accept: Option<&HeaderValue>) -> bool {
    accept.and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(',')
            .map(|m| m.split(';').next().unwrap_or("").trim())
            .any(|m| m.eq_ignore_ascii_case("application/json") || m == "application/*" || m == "*/*")
    })
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("text/event-stream"))
}

enum Message {
    /// No event with data is complete yet.
    Incomplete,
    /// The first event with data is a JSON-RPC response (its data), and nothing follows it.
    Answer(Data),
    /// The first event with data is something else, or more follows the answer.
    Other,
}

/// Where the reading of the held bytes stands: every byte is looked at once, however the
/// stream is cut into chunks.
#[derive(Default)]
struct Events {
    /// Where the event being read starts.
    start: usize,
    /// How far the search for its end has gone.
    searched: usize,
}

impl Events {
    /// What the held bytes start with, once events without data (the priming event) are
    /// passed.
    fn first_message(&mut self, held: &[u8]) -> Message {
        loop {
            let from = self.searched.max(self.start);
            let Some(end) = blank_line(held, self.start, from) else {
                self.searched = held.len().saturating_sub(2);
                return Message::Incomplete;
            };
            let data = event_data(&held[self.start..end.0], self.start);
            let after = &held[end.1..];
            let bytes = match &data {
                Data::Within(r) => &held[r.clone()],
                Data::Joined(j) => j.as_slice(),
            };
            if bytes.is_empty() {
                self.start = end.1;
                continue;
            }
            if !is_response(bytes) {
                return Message::Other;
            }
            return if after.iter().all(u8::is_ascii_whitespace) {
                Message::Answer(data)
            } else {
                Message::Other
            };
        }
    }
}

/// The first blank line at or after `from` that ends an event begun at `start`: where the
/// event's text ends and where the next begins.
fn blank_line(bytes: &[u8], start: usize, from: usize) -> Option<(usize, usize)> {
    let mut i = from.max(start);
    while let Some(n) = memchr::memchr(b'\n', &bytes[i..]) {
        let at = i + n;
        let next = &bytes[at + 1..];
        if next.starts_with(b"\n") {
            return Some((at, at + 2));
        }
        if next.starts_with(b"\r\n") {
            return Some((at, at + 3));
        }
        i = at + 1;
    }
    None
}

/// An event's data: where it lies in the held bytes (one `data:` line, as the MCP library
/// writes it: the answer is not copied), or its lines joined.
#[derive(Debug, PartialEq)]
enum Data {
    Within(std::ops::Range<usize>),
    Joined(Vec<u8>),
}

/// The event's `data:` lines joined with newlines, as the event-stream format reads them;
/// `offset` is where `event` starts in the held bytes.
fn event_data(event: &[u8], offset: usize) -> Data {
    let mut values = Vec::new();
    let mut start = 0;
    for line in event.split(|&b| b == b'\n') {
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(value) = text.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let at = start + (text.len() - value.len());
            values.push(at..at + value.len());
        }
        start += line.len() + 1;
    }
    match values.as_slice() {
        [] => Data::Within(offset..offset),
        [one] => Data::Within(offset + one.start..offset + one.end),
        many => Data::Joined(many.iter().map(|r| &event[r.clone()]).collect::<Vec<_>>().join(&b'\n')),
    }
}

/// Whether `data` is a JSON-RPC response: an id, a result or an error, and no method.
fn is_response(data: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Shape {
        id: Option<IgnoredAny>,
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Shape>(data)
        .is_ok_and(|s| s.id.is_some() && s.method.is_none() && (s.result.is_some() || s.error.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::routing::post;
    use tower::ServiceExt;

    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
    /// What the official clients send.
    const BOTH: &str = "application/json, text/event-stream";

    /// `ANSWER` as one event.
    fn answer_event() -> &'static str {
        static EVENT: std::sync::LazyLock<String> =
            std::sync::LazyLock::new(|| format!("data: {ANSWER}\n\n"));
        &EVENT
    }

    /// The body of a response that stayed a stream.
    async fn streamed(r: Response) -> String {
        assert_eq!(content_type(&r), "text/event-stream");
        text(r).await
    }

    async fn through(events: Vec<&'static str>, accept: &str, pause: Option<Duration>) -> Response {
        let app = Router::new()
            .route(
                "/mcp",
                post(move || async move {
                    let body = futures::stream::iter(events).then(move |e| async move {
                        if let (Some(p), true) = (pause, e.is_empty()) {
                            tokio::time::sleep(p).await;
                        }
                        Ok::<_, std::io::Error>(Bytes::from(e))
                    });
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/event-stream")
                        .header(header::CACHE_CONTROL, "no-cache")
                        .header("mcp-session-id", "s1")
                        .body(Body::from_stream(body))
                        .unwrap()
                }),
            )
            .layer(axum::middleware::from_fn(plain_json));
        let req = Request::post("/mcp").header(header::ACCEPT, accept).body(Body::empty()).unwrap();
        app.oneshot(req).await.unwrap()
    }

    async fn text(r: Response) -> String {
        String::from_utf8(axum::body::to_bytes(r.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap()
    }

    fn content_type(r: &Response) -> &str {
        r.headers().get(header::CONTENT_TYPE).unwrap().to_str().unwrap()
    }

    #[tokio::test]
    async fn an_answer_alone_after_the_priming_event_becomes_plain_json() {
        let events = vec!["id: 0\nretry: 3000\ndata:\n\n", answer_event()];
        let r = through(events, BOTH, None).await;
        assert_eq!(content_type(&r), "application/json");
        assert!(r.headers().get(header::CACHE_CONTROL).is_none());
        assert_eq!(r.headers().get("mcp-session-id").unwrap(), "s1");
        assert_eq!(text(r).await, ANSWER);
    }

    #[test]
    fn one_data_line_is_found_where_it_lies_and_several_are_joined() {
        let held = b"xx: comment\r\ndata: {\"a\":1}\r\nid: 3";
        let Data::Within(r) = event_data(&held[2..], 2) else { panic!("one line is not copied") };
        assert_eq!(&held[r], b"{\"a\":1}");
        assert_eq!(event_data(b"data:x\ndata:\ndata: y", 0), Data::Joined(b"x\n\ny".to_vec()));
        assert_eq!(event_data(b"id: 0\nretry: 3000", 5), Data::Within(5..5));
    }

    #[tokio::test]
    async fn an_answer_split_across_chunks_and_lines_is_joined() {
        let events =
            vec!["data:", " {\"jsonrpc\":\"2.0\",\"id\":1,\r\n", "data: \"error\":{\"code\":-1}}\r\n\r\n"];
        let r = through(events, BOTH, None).await;
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(text(r).await, "{\"jsonrpc\":\"2.0\",\"id\":1,\n\"error\":{\"code\":-1}}");
    }

    #[tokio::test]
    async fn a_notification_before_the_answer_keeps_the_stream_whole() {
        let note = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n";
        let data = answer_event();
        let r = through(vec!["data:\n\n", note, data], BOTH, None).await;
        assert_eq!(streamed(r).await, format!("data:\n\n{note}data: {ANSWER}\n\n"));
    }

    #[tokio::test]
    async fn something_after_the_answer_keeps_the_stream_whole() {
        let both: &'static str = Box::leak(format!("data: {ANSWER}\n\ndata: {ANSWER}\n\n").into_boxed_str());
        let r = through(vec![both], BOTH, None).await;
        assert_eq!(streamed(r).await, both);
    }

    #[tokio::test]
    async fn a_stream_that_does_not_end_after_the_answer_is_streamed() {
        let data = answer_event();
        // The empty chunk after the answer arrives only after a pause longer than END_WAIT.
        let r =
            through(vec![data, "", ": keep-alive\n\n"], BOTH, Some(END_WAIT + Duration::from_millis(300)))
                .await;
        assert_eq!(streamed(r).await, format!("{data}: keep-alive\n\n"));
    }

    #[tokio::test]
    async fn what_follows_the_answer_at_once_goes_out_with_it() {
        let data = answer_event();
        let r = through(vec![data, ": keep-alive\n\n", "data:\n\n"], BOTH, None).await;
        assert_eq!(streamed(r).await, format!("{data}: keep-alive\n\ndata:\n\n"));
    }

    #[tokio::test]
    async fn an_answer_longer_than_what_is_held_is_streamed_whole() {
        let mib: &'static str = Box::leak("a".repeat(1 << 20).into_boxed_str());
        let mut events = vec!["data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\""];
        events.extend(std::iter::repeat_n(mib, (MAX_HELD >> 20) + 1));
        events.push("\"}\n\n");
        let r = through(events.clone(), BOTH, None).await;
        assert_eq!(streamed(r).await.len(), events.iter().map(|e| e.len()).sum::<usize>());
    }

    #[tokio::test]
    async fn a_client_that_takes_only_event_streams_gets_one() {
        let data = answer_event();
        let r = through(vec![data], "text/event-stream", None).await;
        assert_eq!(streamed(r).await, data);
    }
}
