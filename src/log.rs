//! Log output goes through exact redaction and pattern masking before it reaches stderr.
//!
//! This is the second line of defence: the code does not log secrets in the first place
//! (credentials are sensitive headers, argument values are never logged, and the MCP and
//! HTTP libraries, whose debug output prints raw messages and headers, are capped at `info`
//! by `third_party_cap` — at `warn` unless the log filter names them: their `info` lines
//! come with every request; the errors they report when a client has simply gone away are
//! not logged at all).

use std::io::{self, Write};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Filter};

use aegis_core::guard::{Masker, Redactor};

/// Targets whose debug/trace events may print raw protocol messages or headers.
const CAPPED: &[&str] =
    &["rmcp", "hyper", "hyper_util", "h2", "reqwest", "rustls", "tower", "tower_http", "axum"];

/// What the MCP library reports as an error when it cannot hand an answer on: with one of
/// `CLOSED` as the reason, the client has gone away (a closed connection, a session deleted
/// while a call ran) and nothing failed on this side, so nothing is logged. Any other reason
/// is.
const CLIENT_GONE: &[&str] = &["failed to send pending response during drain", "fail to response message"];

/// The reasons a transport gives when its other side has closed: the MCP library's
/// session and worker transports, and this server's stdio transport.
pub(crate) const CLOSED: &[&str] = &["Transport closed", "standard output has closed"];

/// The cap on third-party output for a log filter (`LOG_LEVEL`): their events pass up to
/// `warn`, or up to `info` for a library the filter names (`info,rmcp=info`); never `debug`.
pub fn third_party_cap(filter: &str) -> ThirdPartyCap {
    let named = CAPPED
        .iter()
        .copied()
        .filter(|c| {
            filter.split(',').map(str::trim).any(|d| {
                d.strip_prefix(c).is_some_and(|rest| rest.starts_with('=') || rest.starts_with("::"))
            })
        })
        .collect();
    ThirdPartyCap { named }
}

/// The filter `third_party_cap` builds.
pub struct ThirdPartyCap {
    named: Vec<&'static str>,
}

/// The capped library an event's target belongs to.
fn library(target: &str) -> Option<&'static str> {
    CAPPED
        .iter()
        .copied()
        .find(|c| target == *c || target.strip_prefix(*c).is_some_and(|r| r.starts_with("::")))
}

impl<S> Filter<S> for ThirdPartyCap {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        match library(meta.target()) {
            None => true,
            Some(c) if self.named.contains(&c) => *meta.level() <= Level::INFO,
            Some(_) => *meta.level() <= Level::WARN,
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        if library(event.metadata().target()) != Some("rmcp") {
            return true;
        }
        /// Whether the event's message is one of `CLIENT_GONE`, and its error one of `CLOSED`.
        #[derive(Default)]
        struct Gone {
            message: bool,
            closed: bool,
        }
        impl Gone {
            fn note(&mut self, field: &Field, value: &str) {
                match field.name() {
                    "message" => self.message = CLIENT_GONE.contains(&value),
                    "error" => self.closed = CLOSED.contains(&value),
                    _ => {}
                }
            }
        }
        impl Visit for Gone {
            fn record_str(&mut self, field: &Field, value: &str) {
                self.note(field, value);
            }
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if matches!(field.name(), "message" | "error") {
                    self.note(field, &format!("{value:?}"));
                }
            }
        }
        let mut gone = Gone::default();
        event.record(&mut gone);
        !(gone.message && gone.closed)
    }
}

/// A `MakeWriter` for stderr that redacts each formatted event.
#[derive(Clone)]
pub struct RedactingStderr {
    redactor: Redactor,
    masker: &'static Masker,
}

impl RedactingStderr {
    pub fn new(redactor: Redactor, masker: &'static Masker) -> RedactingStderr {
        RedactingStderr { redactor, masker }
    }
}

/// Buffers one event and writes it redacted when dropped.
pub struct EventWriter {
    buf: Vec<u8>,
    redactor: Redactor,
    masker: &'static Masker,
}

impl Write for EventWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let text = self.redactor.redact_str(&text);
        let text = self.masker.mask_str(&text).unwrap_or(text);
        let _ = io::stderr().lock().write_all(text.as_bytes());
    }
}

impl<'a> MakeWriter<'a> for RedactingStderr {
    type Writer = EventWriter;
    fn make_writer(&'a self) -> EventWriter {
        EventWriter { buf: Vec::with_capacity(256), redactor: self.redactor.clone(), masker: self.masker }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::prelude::*;

    /// What the events logged inside `f` look like under `third_party_cap(filter)` and the
    /// filter itself, layered as the server's log is.
    fn logged(filter: &str, f: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = out.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || Sink(sink.clone()))
            .with_ansi(false)
            .with_filter(third_party_cap(filter))
            .with_filter(tracing_subscriber::EnvFilter::new(filter));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_client_that_left_is_not_an_error_but_other_library_errors_are() {
        let log = logged("info", || {
            let error = "Transport closed";
            tracing::error!(target: "rmcp::service", %error, "failed to send pending response during drain");
            tracing::error!(target: "rmcp::service", %error, "fail to response message");
            let error = "standard output has closed";
            tracing::error!(target: "rmcp::service", %error, "fail to response message");
            tracing::error!(target: "rmcp::service", %error, "response send task failed");
            tracing::info!(target: "rmcp::service", "serve finished");
            tracing::error!(target: "aegis", "fail to response message");
            // The same words with another reason: something failed here, and it is said.
            let error = "serialization failed";
            tracing::error!(target: "rmcp::service", %error, "fail to response message");
        });
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 3, "{log}");
        assert!(lines[0].contains("response send task failed"), "{log}");
        assert!(lines[1].contains("aegis") && lines[1].contains("fail to response message"), "{log}");
        assert!(lines[2].contains("serialization failed"), "{log}");
    }

    #[test]
    fn a_named_library_is_shown_at_info_and_never_at_debug() {
        let log = logged("debug,rmcp=debug", || {
            tracing::info!(target: "rmcp::service", "serve finished");
            tracing::debug!(target: "rmcp::service", "raw message");
            tracing::debug!(target: "hyper::proto", "raw header");
            tracing::warn!(target: "hyper::proto", "a warning");
        });
        assert!(log.contains("serve finished") && log.contains("a warning"), "{log}");
        assert!(!log.contains("raw message") && !log.contains("raw header"), "{log}");
    }
}
