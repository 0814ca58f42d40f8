//! Log output goes through exact redaction and pattern masking before it reaches stderr.
//!
//! This is the second line of defence: the code does not log secrets in the first place
//! (credentials are sensitive headers, argument values are never logged, and the MCP and
//! HTTP libraries, whose debug output prints raw messages and headers, are capped at `info`
//! by `third_party_cap` — at `warn` unless the log filter names them: their `info` lines
//! come with every request).

use std::io::{self, Write};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

use super::{Masker, Redactor};

/// Targets whose debug/trace events may print raw protocol messages or headers.
const CAPPED: &[&str] =
    &["rmcp", "hyper", "hyper_util", "h2", "reqwest", "rustls", "tower", "tower_http", "axum"];

/// The cap on third-party output for a log filter (`LOG_LEVEL`): their events pass up to
/// `warn`, or up to `info` for a library the filter names (`info,rmcp=info`); never `debug`.
pub fn third_party_cap(filter: &str) -> impl Fn(&Metadata<'_>) -> bool + Send + Sync + 'static {
    let named: Vec<&'static str> = CAPPED
        .iter()
        .copied()
        .filter(|c| {
            filter.split(',').map(str::trim).any(|d| {
                d.strip_prefix(c).is_some_and(|rest| rest.starts_with('=') || rest.starts_with("::"))
            })
        })
        .collect();
    move |meta: &Metadata<'_>| {
        let target = meta.target();
        let library = CAPPED
            .iter()
            .find(|c| target == **c || target.strip_prefix(**c).is_some_and(|r| r.starts_with("::")));
        match library {
            None => true,
            Some(c) if named.contains(c) => *meta.level() <= Level::INFO,
            Some(_) => *meta.level() <= Level::WARN,
        }
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
