//! JSON-RPC over stdin/stdout, one message per line. Every call runs as the global
//! identity; logs go to stderr. It serves until the client closes stdin, or until SIGTERM or
//! SIGINT: then no new message is read, the calls running are let finish (within a bound)
//! and their answers written, and `serve` returns, so that the audit chain's head is logged
//! as at any other end.
//!
//! Ours rather than rmcp's, because rmcp drops a line that is not JSON without a word: a
//! client that sent one (invalid UTF-8, nesting 10,000 deep, a 100,000-digit id, a line of
//! 100 MB) would wait forever for its answer. Here every line gets what JSON-RPC prescribes
//! (`jsonrpc::read`). A line longer than `MCP_MAX_BODY_BYTES` is not kept: it is read to its
//! end, skimmed for its id, and answered to that id (a tool call with the tool error
//! `payload_too_large`).

use std::future::Future;
use std::pin::Pin;

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};

use super::jsonrpc::{self, Read};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::mcp::McpHandler;

/// How long the calls running at a signal may take to finish.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Serve until the client closes stdin, or a signal asks the process to stop: then no new
/// message is read, and once the calls running have finished (within `DRAIN`) the input ends
/// as if stdin had closed, so that the MCP service writes their answers and stops.
pub async fn serve(handler: McpHandler, max_line: usize) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let calls = handler.calls();
    let input = Until::new(stdin, async move {
        super::http::wait_for_signal().await;
        tracing::info!(
            "shutting down on a signal: no new messages are read; the calls running may finish for {}s",
            DRAIN.as_secs()
        );
        calls.close();
        if tokio::time::timeout(DRAIN, calls.wait()).await.is_err() {
            tracing::warn!("{} calls still running after {}s; exiting", calls.len(), DRAIN.as_secs());
        }
    });
    serve_on(handler, input, stdout, max_line).await
}

/// A byte stream that ends (reads as end of file) once `stop` has completed, whatever is
/// still to come: the input of a session asked to stop.
struct Until<R> {
    inner: R,
    stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    stopped: bool,
}

impl<R> Until<R> {
    fn new(inner: R, stop: impl Future<Output = ()> + Send + 'static) -> Until<R> {
        Until { inner, stop: Box::pin(stop), stopped: false }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Until<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if !self.stopped && self.stop.as_mut().poll(cx).is_ready() {
            self.stopped = true;
        }
        if self.stopped {
            // End of file: nothing more is read.
            return std::task::Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// `serve` over any pair of byte streams: the process's standard input and output, or a
/// test's in-memory pipe. Returns when `input` ends.
pub async fn serve_on(
    handler: McpHandler,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    max_line: usize,
) -> anyhow::Result<()> {
    let (stdin, stdout) = (input, output);
    let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(64);
    let (in_tx, in_rx) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let writer = tokio::spawn(write_lines(stdout, out_rx));
    tokio::spawn(read_lines(BufReader::new(stdin), max_line, in_tx, out_tx.clone()));
    let running = handler.serve(StdioTransport { inbox: in_rx, outbox: out_tx }).await?;
    running.waiting().await?;
    // Everything answered has been handed to the writer; let it finish.
    let _ = writer.await;
    Ok(())
}

/// Write each line to stdout as it comes, flushed.
async fn write_lines(mut stdout: impl AsyncWrite + Unpin, mut lines: mpsc::Receiver<Vec<u8>>) {
    while let Some(mut line) = lines.recv().await {
        line.push(b'\n');
        if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
            return;
        }
    }
}

/// Read stdin line by line, never holding more than `max` bytes of one line.
pub(crate) async fn read_lines(
    mut input: impl tokio::io::AsyncBufRead + Unpin,
    max: usize,
    messages: mpsc::Sender<ClientJsonRpcMessage>,
    answers: mpsc::Sender<Vec<u8>>,
) {
    let mut line = Vec::new();
    // A line over `max` is not kept: what it says about itself is skimmed as it goes by.
    let mut oversized: Option<jsonrpc::Skim> = None;
    loop {
        let (consumed, done) = {
            let Ok(available) = input.fill_buf().await else { return };
            if available.is_empty() {
                return;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let part = &available[..newline.unwrap_or(available.len())];
            match &mut oversized {
                Some(skim) => skim.feed(part),
                None if line.len() + part.len() > max => {
                    let mut skim = jsonrpc::Skim::default();
                    skim.feed(&line);
                    skim.feed(part);
                    oversized = Some(skim);
                    line = Vec::new();
                }
                None => line.extend_from_slice(part),
            }
            (take, newline.is_some())
        };
        input.consume(consumed);
        if !done {
            continue;
        }
        let what = if let Some(skim) = oversized.take() {
            jsonrpc::oversized(skim.head(), max)
        } else if let Err(error) = jsonrpc::check_values(&line) {
            Read::Answer(error)
        } else {
            jsonrpc::read(&line)
        };
        line.clear();
        let sent = match what {
            Read::Message(m) => messages.send(*m).await.is_ok(),
            Read::Answer(v) => answers.send(v.to_string().into_bytes()).await.is_ok(),
            Read::Nothing => true,
        };
        if !sent {
            return;
        }
    }
}

/// The MCP service's side: messages read from stdin in, its messages out to the writer.
struct StdioTransport {
    inbox: mpsc::Receiver<ClientJsonRpcMessage>,
    outbox: mpsc::Sender<Vec<u8>>,
}

/// Why a message could not be sent. The first is the client leaving, which the log does
/// not report (`guard::log::CLOSED` holds its words); the second would be a fault here.
#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("standard output has closed")]
    OutputClosed,
    #[error("the message could not be written as JSON: {0}")]
    Unwritable(String),
}

impl Transport<RoleServer> for StdioTransport {
    type Error = SendError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SendError>> + Send + 'static {
        let outbox = self.outbox.clone();
        async move {
            let line = serde_json::to_vec(&item).map_err(|e| SendError::Unwritable(e.to_string()))?;
            outbox.send(line).await.map_err(|_| SendError::OutputClosed)
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.inbox.recv().await
    }

    async fn close(&mut self) -> Result<(), SendError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_closed_output_is_said_in_the_words_the_log_leaves_out() {
        let closed = SendError::OutputClosed.to_string();
        assert!(crate::log::CLOSED.contains(&closed.as_str()), "{closed}");
        let fault = SendError::Unwritable("x".into()).to_string();
        assert!(!crate::log::CLOSED.contains(&fault.as_str()), "{fault}");
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_one_is_read() {
        let mut input = vec![b'x'; 5000];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let (m_tx, mut m_rx) = mpsc::channel(4);
        let (a_tx, mut a_rx) = mpsc::channel(4);
        read_lines(BufReader::with_capacity(64, &input[..]), 1000, m_tx, a_tx).await;
        let a: Value = serde_json::from_slice(&a_rx.recv().await.unwrap()).unwrap();
        assert_eq!(a["error"]["code"], -32700);
        assert!(a["error"]["message"].as_str().unwrap().contains("longer than 1000 bytes"));
        assert!(m_rx.recv().await.is_some(), "the next line is read");
    }

    #[tokio::test]
    async fn an_oversized_request_is_answered_to_its_own_id() {
        let mut input = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"repoCreateFile","arguments":{{"content":"{}"}}}},"id":77}}"#,
            "A".repeat(5000)
        )
        .into_bytes();
        input.push(b'\n');
        input.extend_from_slice(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}\n",
                "B".repeat(5000)
            )
            .as_bytes(),
        );
        let (m_tx, mut m_rx) = mpsc::channel(4);
        let (a_tx, mut a_rx) = mpsc::channel(4);
        read_lines(BufReader::with_capacity(64, &input[..]), 1000, m_tx, a_tx).await;
        let call = m_rx.recv().await.expect("the tool call goes on, marked");
        let rmcp::model::JsonRpcMessage::Request(r) = call else { panic!("{call:?}") };
        assert_eq!(r.id, rmcp::model::RequestId::Number(77));
        use rmcp::model::GetExtensions;
        assert_eq!(r.request.extensions().get::<crate::mcp::Oversized>().map(|o| o.limit), Some(1000));
        let a: Value = serde_json::from_slice(&a_rx.recv().await.unwrap()).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (serde_json::json!("p"), serde_json::json!(-32600))
        );
    }
}
