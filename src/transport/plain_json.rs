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
//!
//! The events are read by `sse_stream`, the parser the MCP library itself uses, given the
//! bytes by hand: the bytes as they came stay here, to go out unchanged if the stream is kept.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde::de::IgnoredAny;
use sse_stream::{ByteStreamBody, Sse, SseStream};

/// The most memory held while deciding, the parser's copies included; an answer longer than
/// `MAX_HELD / COPIES` is streamed as it comes.
const MAX_HELD: usize = 16 << 20;
/// How many times the bytes read are held at most: as they came (to go out unchanged), in the
/// data the parser gathers, and in the line it gathers when a line runs on into the next
/// chunk.
const COPIES: usize = 3;
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
    let mut events = Events::new();
    // What the stream sent that was not read: it goes out after what was.
    let mut next_item = None;
    // Read events until the first one with data: the answer, or something else (then stream).
    let answer = loop {
        match stream.next().await {
            Some(Ok(chunk)) => {
                // The chunk that would take what is held past the bound is not read: it goes
                // out after what was, so at most one chunk more than MAX_HELD is held.
                if COPIES * (held.len() + chunk.len()) > MAX_HELD {
                    next_item = Some(Ok(chunk));
                    break None;
                }
                held.extend_from_slice(&chunk);
                match events.read(chunk) {
                    Message::Incomplete => {}
                    Message::Answer(data) => break Some(data),
                    Message::Other => break None,
                }
            }
            // Nothing (more) to tell: pass on what there is, as the library made it.
            item @ Some(Err(_)) => {
                next_item = item;
                break None;
            }
            None => break None,
        }
    };
    drop(events);
    if let Some(data) = answer {
        // The answer must be the last thing the stream carries.
        match tokio::time::timeout(END_WAIT, stream.next()).await {
            Ok(None) => {
                parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                parts.headers.remove(header::CACHE_CONTROL);
                parts.headers.remove(header::TRANSFER_ENCODING);
                parts.headers.remove("x-accel-buffering");
                return Response::from_parts(parts, Body::from(data));
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
    Answer(String),
    /// The first event with data is something else, or more follows the answer, or the
    /// parser cannot read the stream.
    Other,
}

/// What the parser reads from: the lines it is given, one at a time.
type Fed = mpsc::UnboundedReceiver<Result<Bytes, Infallible>>;

/// The event-stream parser, given one line at a time and asked after each for what it
/// completed: at most one event, so what follows an event is known to the byte, and a line
/// within a chunk is read where it lies. It looks at every byte a fixed number of times (for
/// the line's end, then its colon and text once the line is whole: a line cut into many chunks
/// is gathered, not rescanned), as this reader does for a line's end, however the stream is
/// cut into chunks.
struct Events {
    feed: mpsc::UnboundedSender<Result<Bytes, Infallible>>,
    parsed: SseStream<ByteStreamBody<Fed, Bytes>>,
}

impl Events {
    fn new() -> Events {
        let (feed, fed) = mpsc::unbounded();
        Events { feed, parsed: SseStream::from_bytes_stream(fed) }
    }

    /// Gives the parser `chunk`: what the stream read so far starts with, once events without
    /// data (the priming event) are passed.
    fn read(&mut self, mut chunk: Bytes) -> Message {
        while !chunk.is_empty() {
            // A line and its end (a CR and its LF may be given apart), or what the chunk holds of
            // a line it does not end.
            let cut = memchr::memchr2(b'\n', b'\r', &chunk).map_or(chunk.len(), |at| at + 1);
            if self.feed.unbounded_send(Ok(chunk.split_to(cut))).is_err() {
                return Message::Other;
            }
            loop {
                match self.parsed.next().now_or_never() {
                    // It waits for the next line.
                    None => break,
                    Some(Some(Ok(Sse { data: Some(data), event, .. }))) if !data.is_empty() => {
                        // An event without a type, or an empty one, is a message.
                        let message = event.is_none_or(|e| e.is_empty() || e == "message");
                        return if message && is_response(data.as_bytes()) && self.nothing_after(&chunk) {
                            Message::Answer(data)
                        } else {
                            Message::Other
                        };
                    }
                    // An event without data, as the priming event is: clients pass over it.
                    Some(Some(Ok(_))) => {}
                    // What it cannot read, or (never: the feed is open) the end of its input.
                    Some(Some(Err(_)) | None) => return Message::Other,
                }
            }
        }
        Message::Incomplete
    }

    /// Whether an event just read is followed by nothing but blank space in `rest`, the chunk's
    /// bytes not yet given, and the parser holds no other event.
    fn nothing_after(&mut self, rest: &[u8]) -> bool {
        rest.iter().all(u8::is_ascii_whitespace) && self.parsed.next().now_or_never().is_none()
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

    /// Asserts that `events`, sent as one chunk, go out as a stream, as they came.
    async fn goes_out_as_it_came(events: String) {
        let events: &'static str = Box::leak(events.into_boxed_str());
        assert_eq!(streamed(through(vec![events], BOTH, None).await).await, events);
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

    #[tokio::test]
    async fn comments_and_other_fields_are_passed_over_and_data_lines_are_joined() {
        let events = vec![
            ": comment\r\nid: 0\r\nretry: 3000\r\n\r\n",
            ": comment\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:\r\ndata: \"id\":3,\"result\":{}}\r\nid: 3\r\n\r\n",
        ];
        let r = through(events, BOTH, None).await;
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(text(r).await, "{\"jsonrpc\":\"2.0\",\n\n\"id\":3,\"result\":{}}");
    }

    #[tokio::test]
    async fn an_answer_arriving_a_byte_at_a_time_is_read_once() {
        // Every byte its own chunk: a parser that looked again at what it holds for each one
        // would not finish.
        let answer = format!(r#"{{"jsonrpc":"2.0","id":1,"result":"{}"}}"#, "a".repeat(1 << 20));
        let event: &'static str = Box::leak(format!("data: {answer}\n\n").into_boxed_str());
        let bytes = (0..event.len()).map(|i| &event[i..=i]).collect();
        let r = through(bytes, BOTH, None).await;
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(text(r).await, answer);
    }

    #[tokio::test]
    async fn an_answer_under_another_event_type_keeps_its_stream() {
        goes_out_as_it_came(format!("event: other\ndata: {ANSWER}\n\n")).await;
    }

    #[tokio::test]
    async fn a_stream_the_parser_cannot_read_goes_out_unchanged() {
        let data = answer_event();
        let r = through(vec!["what: ever\n\n", data], BOTH, None).await;
        assert_eq!(streamed(r).await, format!("what: ever\n\n{data}"));
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
    async fn lines_may_end_in_a_cr_alone() {
        let events: &'static str = Box::leak(format!("data:\r\rdata: {ANSWER}\r\r").into_boxed_str());
        let r = through(vec![events], BOTH, None).await;
        assert_eq!(content_type(&r), "application/json");
        assert_eq!(text(r).await, ANSWER);
        goes_out_as_it_came(format!("data: {ANSWER}\r\r: later\r\r")).await;
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
        goes_out_as_it_came(format!("data: {ANSWER}\n\ndata: {ANSWER}\n\n")).await;
        // Even what no client would read as an event.
        goes_out_as_it_came(format!("data: {ANSWER}\n\n: later\n\n")).await;
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
