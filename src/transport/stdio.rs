//! JSON-RPC over stdin/stdout, one message per line. Every call runs as the global
//! identity; logs go to stderr.
//!
//! Ours rather than rmcp's, because rmcp drops a line that is not JSON without a word: a
//! client that sent one (invalid UTF-8, nesting 10,000 deep, a 100,000-digit id, a line of
//! 100 MB) would wait forever for its answer. Here every line gets what JSON-RPC prescribes
//! (`jsonrpc::read`). A line longer than `MCP_MAX_BODY_BYTES` is not kept: it is read to its
//! end and answered with a parse error.

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use serde_json::Value;

use super::jsonrpc::{self, Read};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::mcp::McpHandler;

/// Serve until the client closes stdin.
pub async fn serve(handler: McpHandler, max_line: usize) -> anyhow::Result<()> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
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
    let mut oversized = false;
    loop {
        let (consumed, done) = {
            let Ok(available) = input.fill_buf().await else { return };
            if available.is_empty() {
                return;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if !oversized {
                let part = &available[..newline.unwrap_or(available.len())];
                if line.len() + part.len() > max {
                    oversized = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(part);
                }
            }
            (take, newline.is_some())
        };
        input.consume(consumed);
        if !done {
            continue;
        }
        let what = if oversized {
            Read::Answer(jsonrpc::error(
                Value::Null,
                jsonrpc::PARSE_ERROR,
                &format!("Parse error: the line is longer than {max} bytes (MCP_MAX_BODY_BYTES)"),
            ))
        } else if let Err(error) = jsonrpc::check_values(&line) {
            Read::Answer(error)
        } else {
            jsonrpc::read(&line)
        };
        line.clear();
        oversized = false;
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

    #[test]
    fn a_closed_output_is_said_in_the_words_the_log_leaves_out() {
        let closed = SendError::OutputClosed.to_string();
        assert!(crate::guard::log::CLOSED.contains(&closed.as_str()), "{closed}");
        let fault = SendError::Unwritable("x".into()).to_string();
        assert!(!crate::guard::log::CLOSED.contains(&fault.as_str()), "{fault}");
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
}
