//! Accepting HTTP connections, with limits on what one peer can hold.
//!
//! A client that opens connections and never finishes a request (slow headers, a body that
//! never ends, an idle keep-alive) costs a descriptor and memory for as long as it likes
//! unless something ends it. Here every connection is watched:
//!
//! - its request headers must arrive within `header_timeout` of their first byte;
//! - between requests it may idle for `idle_timeout`, then it is closed;
//! - a client that stops reading (the server's writes blocked for `write_stall`) is closed,
//!   whatever it was doing: an unread answer or stream holds nothing for long;
//! - a request body must arrive within the body timeout (`layers::read_body_within`);
//! - a request answered before its body was read (a 401 to a POST, a refused host) has the
//!   rest of its body read and dropped before the answer goes out, up to `drain_bytes` and
//!   within `drain_timeout`: closing a socket with unread bytes makes the kernel reset the
//!   connection, and the reset can destroy the answer on its way or the client's next request
//!   on the kept-alive connection (a client sending its body in a second write after the
//!   head, as Python's httpx does, meets this on its first unauthenticated POST);
//! - at most `max` connections are open, at most `per_peer` from one address (an IPv6 /64
//!   counts as one address). A connection
//!   over the per-peer cap is answered 503 and closed. At the overall cap, the oldest
//!   connection with no request in progress makes room (it is closed), so that a flood of
//!   slow or idle connections from many addresses cannot lock new clients out; only when
//!   every connection is busy with a request is the newcomer refused.
//!
//! HTTP/1.1 only: MCP clients speak it, and it keeps these rules simple to state and check.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use http_body::Frame;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// What a connection may do.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub(crate) max: usize,
    pub(crate) per_peer: usize,
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) write_stall: Duration,
    /// The most of an unread request body read (and dropped) after an early answer.
    pub(crate) drain_bytes: usize,
    /// How long that may take.
    pub(crate) drain_timeout: Duration,
}

/// Put into every request's extensions: cancelling it closes the request's connection (the
/// legacy SSE transport ends a stream whose client stopped reading this way).
#[derive(Debug, Clone)]
pub(crate) struct CloseConnection(pub CancellationToken);

/// The address a request's connection counts against (an IPv4 address, or an IPv6 /64), put
/// into every request's extensions: the layers bound what one address may cost (new tokens).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub IpAddr);

/// Largest request head (request line and headers) a connection buffers.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How often each connection's timeouts are checked.
const TICK: Duration = Duration::from_millis(250);

/// Serve `app` on `listener` until `stop` is cancelled; then stop accepting, let every
/// connection finish its requests (`graceful`), and return once all are closed or `drain`
/// cancels.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
    drain: CancellationToken,
) {
    let registry = Arc::new(Registry::default());
    let started = Instant::now();
    // Every connection's task, so that shutdown waits for them to end, not for a count.
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or a peer that reset before accept: wait, go on.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(conn) = registry.admit(peer_of(peer.ip()), limits, started) else {
            refuse(tcp, "too many connections from this address; close idle ones").await;
            continue;
        };
        let Some(conn) = conn else {
            refuse(tcp, "the server is at its connection limit with every connection busy; try again").await;
            continue;
        };
        if let Err(e) = tcp.set_nodelay(true) {
            // Small answers written in several frames would wait for delayed ACKs otherwise.
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        connections.spawn(serve_connection(tcp, app.clone(), conn, limits, stop.clone(), drain.clone()));
    }
    // Wait for open connections to finish (they were told to close after their requests).
    connections.close();
    tokio::select! {
        _ = connections.wait() => {}
        _ = drain.cancelled() => {}
    }
}

/// The address a connection counts against: an IPv4 address (also when written as IPv6), or
/// an IPv6 /64 — one host usually holds a whole /64, so counting single addresses would give it
/// billions of shares.
fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// A 503 written at once, without reading the request, then close.
async fn refuse(tcp: TcpStream, why: &str) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": why}})
        .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(response.as_bytes());
}

/// Open connections: how many, from where, and each one's state (to find one to close).
#[derive(Default)]
struct Registry {
    inner: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    by_peer: HashMap<IpAddr, usize>,
    conns: HashMap<u64, Arc<ConnState>>,
}

impl Registry {
    /// Admit a connection from `peer`: `None` over the per-peer cap, `Some(None)` when at the
    /// overall cap and nothing can make room.
    fn admit(self: &Arc<Self>, peer: IpAddr, limits: ConnLimits, started: Instant) -> Option<Option<Conn>> {
        let mut open = self.inner.lock().expect("registry lock");
        let from_peer = open.by_peer.get(&peer).copied().unwrap_or(0);
        if from_peer >= limits.per_peer {
            return None;
        }
        if open.conns.len() >= limits.max {
            // The oldest connection without a request in progress makes room.
            let victim = open
                .conns
                .values()
                .filter(|c| c.active.load(Ordering::SeqCst) == 0 && !c.closing.is_cancelled())
                .min_by_key(|c| c.opened)
                .cloned();
            match victim {
                Some(v) => v.closing.cancel(),
                None => return Some(None),
            }
        }
        open.next_id += 1;
        let id = open.next_id;
        *open.by_peer.entry(peer).or_default() += 1;
        let state = Arc::new(ConnState::new(started));
        open.conns.insert(id, state.clone());
        Some(Some(Conn { id, peer, state, registry: self.clone() }))
    }
}

/// An admitted connection; leaves the registry when dropped.
struct Conn {
    id: u64,
    peer: IpAddr,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut open = self.registry.inner.lock().expect("registry lock");
        open.conns.remove(&self.id);
        if let Some(n) = open.by_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.by_peer.remove(&self.peer);
            }
        }
    }
}

/// What the watchdog of one connection looks at. Times are milliseconds since the server
/// started (0: not set).
struct ConnState {
    started: Instant,
    opened: Instant,
    /// Requests whose answer has not been sent completely.
    active: AtomicUsize,
    /// When the connection last became idle (no request in progress).
    idle_since: AtomicU64,
    /// When the first byte of the next request's head arrived.
    head_since: AtomicU64,
    /// Since when the socket has taken no bytes of a write (0: writes are flowing).
    write_blocked_since: AtomicU64,
    /// Cancelled to close the connection (to make room, or on a timeout).
    closing: CancellationToken,
}

impl ConnState {
    fn new(started: Instant) -> ConnState {
        let s = ConnState {
            started,
            opened: Instant::now(),
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(0),
            closing: CancellationToken::new(),
        };
        s.idle_since.store(s.now(), Ordering::SeqCst);
        s
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64 + 1
    }

    /// A request's head is complete: it is in progress until its answer is sent.
    fn request_started(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Ordering::SeqCst);
        self.head_since.store(0, Ordering::SeqCst);
        Active(self.clone())
    }

    /// Bytes arrived; with no request in progress they begin the next request's head.
    fn read_some(&self) {
        if self.active.load(Ordering::SeqCst) == 0 && self.head_since.load(Ordering::SeqCst) == 0 {
            self.head_since.store(self.now(), Ordering::SeqCst);
        }
    }

    /// What a write did: the socket took bytes (writes flow again), or it took none and the
    /// write waits (the clock of a stalled reader starts, if it has not yet).
    fn wrote<T>(&self, r: &Poll<io::Result<T>>, took_some: impl Fn(&T) -> bool) {
        match r {
            Poll::Ready(Ok(n)) if took_some(n) => self.write_blocked_since.store(0, Ordering::SeqCst),
            Poll::Pending => {
                let _ = self.write_blocked_since.compare_exchange(
                    0,
                    self.now(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
            }
            _ => {}
        }
    }

    /// Why the connection should be closed now, if it should.
    fn overdue(&self, limits: ConnLimits) -> Option<&'static str> {
        let now = self.now();
        let blocked = self.write_blocked_since.load(Ordering::SeqCst);
        if blocked != 0 && now - blocked > limits.write_stall.as_millis() as u64 {
            return Some("the client stopped reading");
        }
        if self.active.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let head = self.head_since.load(Ordering::SeqCst);
        if head != 0 {
            return (now - head > limits.header_timeout.as_millis() as u64)
                .then_some("request head too slow");
        }
        let idle = self.idle_since.load(Ordering::SeqCst);
        (now.saturating_sub(idle) > limits.idle_timeout.as_millis() as u64).then_some("idle")
    }
}

/// A request in progress; dropped when its answer has been sent (or abandoned).
struct Active(Arc<ConnState>);

impl Drop for Active {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle_since.store(self.0.now(), Ordering::SeqCst);
        }
    }
}

/// One connection: hyper's HTTP/1.1 over the watched socket, closed by the watchdog when a
/// timeout passes or room is needed, and gracefully when the server stops.
async fn serve_connection(
    tcp: TcpStream,
    app: Router,
    conn: Conn,
    limits: ConnLimits,
    stop: CancellationToken,
    drain: CancellationToken,
) {
    let state = conn.state.clone();
    let peer = Peer(conn.peer);
    let io = TokioIo::new(Watched { inner: tcp, state: state.clone() });
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        let active = state.request_started();
        req.extensions_mut().insert(CloseConnection(state.closing.clone()));
        req.extensions_mut().insert(peer);
        let app = app.clone();
        async move {
            let (req, kept) = keep_body(req);
            let mut response = app.oneshot(req).await.unwrap_or_else(|e| match e {});
            if body_refused(response.status()) {
                // The body itself was refused (too slow, too large): not read any further.
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            } else {
                drain_unread(kept, limits).await;
            }
            Ok::<_, std::convert::Infallible>(response.map(|body| Tracked { body, _active: active }))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.max_buf_size(MAX_HEAD_BYTES).keep_alive(true);
    let connection = http.serve_connection(io, service);
    tokio::pin!(connection);
    let mut tick = tokio::time::interval(TICK);
    let mut graceful = false;
    loop {
        tokio::select! {
            done = connection.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            _ = stop.cancelled(), if !graceful => {
                graceful = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = drain.cancelled() => break,
            _ = conn.state.closing.cancelled() => break,
            _ = tick.tick() => {
                if let Some(why) = conn.state.overdue(limits) {
                    tracing::debug!(why, "closing a connection");
                    break;
                }
            }
        }
    }
    drop(conn);
}

/// The socket, telling the connection's state when bytes arrive.
struct Watched {
    inner: TcpStream,
    state: Arc<ConnState>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.read_some();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.state.wrote(&r, |n| *n > 0);
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.state.wrote(&r, |n| *n > 0);
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The request with its body behind a shared slot, and the slot: what the application leaves
/// unread can be read after it has answered.
fn keep_body(req: hyper::Request<hyper::body::Incoming>) -> (axum::extract::Request, Arc<Mutex<Incoming>>) {
    let (parts, body) = req.into_parts();
    let slot = Arc::new(Mutex::new(body));
    (axum::extract::Request::from_parts(parts, Body::new(Kept(slot.clone()))), slot)
}

type Incoming = hyper::body::Incoming;

/// Read and drop what the application left of the request body, bounded in bytes and time; a
/// body still held by the application (a handler streaming it) is left to it.
async fn drain_unread(slot: Arc<Mutex<Incoming>>, limits: ConnLimits) {
    use http_body_util::BodyExt;
    let Some(body) = Arc::into_inner(slot).map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner())) else {
        return;
    };
    if http_body::Body::is_end_stream(&body) {
        return;
    }
    let drain = async move {
        let mut body = body;
        let mut read = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > limits.drain_bytes {
                // Too much to be worth reading: the connection closes instead.
                return;
            }
        }
    };
    let _ = tokio::time::timeout(limits.drain_timeout, drain).await;
}

/// Whether `status` refuses the request's body itself, so that reading more of it is pointless.
fn body_refused(status: StatusCode) -> bool {
    matches!(status, StatusCode::REQUEST_TIMEOUT | StatusCode::PAYLOAD_TOO_LARGE)
}

/// A request body read through its connection's slot.
struct Kept(Arc<Mutex<Incoming>>);

impl http_body::Body for Kept {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut body = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Pin::new(&mut *body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).size_hint()
    }
}

/// A response body that keeps its request counted as in progress until it is sent.
struct Tracked {
    body: Body,
    _active: Active,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Raise the open-file limit to what the system allows, and say how many connections fit:
/// `wanted`, or fewer when descriptors would run out first (some are kept for the forge's
/// connections and the process itself).
pub(crate) fn connections_that_fit(wanted: usize) -> usize {
    const RESERVE: u64 = 128;
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) if limit < wanted as u64 + RESERVE => {
            let fit = limit.saturating_sub(RESERVE).max(16) as usize;
            tracing::warn!(
                "the open-file limit is {limit}: at most {fit} connections instead of {wanted} (raise `ulimit -n` or lower MCP_MAX_CONNECTIONS)"
            );
            fit
        }
        _ => wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_slash_64_counts_as_one_peer_and_mapped_ipv4_as_its_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(peer_of(a), peer_of(b));
        assert_ne!(peer_of(a), peer_of(c));
        let mapped: IpAddr = "::ffff:127.0.0.7".parse().unwrap();
        assert_eq!(peer_of(mapped), "127.0.0.7".parse::<IpAddr>().unwrap());
        assert_eq!(peer_of("10.0.0.1".parse().unwrap()), "10.0.0.1".parse::<IpAddr>().unwrap());
    }
}
