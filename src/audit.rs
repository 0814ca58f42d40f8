//! The audit trail (`AUDIT_LOG`): one JSON line per tool call and per resource read, written
//! before the result goes back to the client, each line chained to the one before by a hash.
//!
//! A line holds who called, over which transport and client, which tool and operation, the
//! method and path sent to the forge, the outcome, the duration and the size of the result —
//! never argument values or result data: the arguments appear only as the SHA-256 of their
//! canonical JSON (keys sorted, no white space). Its `seq` counts the lines of the chain and
//! its `prev` is the SHA-256 (hex) of the bytes of the line before (without the line end); the
//! first line of a chain has `prev` = 64 zeros. When the file was rotated away (renamed,
//! removed, or truncated in place) the first line written to the new file carries the last
//! hash of the old one as `prev` and also as `continues`, and `seq` goes on counting: each
//! file verifies alone from its first line, and files given in order verify as one chain.
//! On start the chain continues from the last line of an existing file (read from its end).
//!
//! Writes are serialized by one mutex, one `write` per line on a file opened for appending,
//! so lines never interleave. There is no fsync: a line is in the operating system's hands
//! before the result is returned (it survives a crash of this process, not of the machine).
//! When a line cannot be written the call fails with `audit_failed`, and calls are refused
//! before they run while the file cannot be opened; `AUDIT_FAIL_OPEN` makes them proceed with
//! a warning instead.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::{CallError, ErrorKind};
use crate::guard::{Guarded, GuardedError};
use crate::identity::{Caller, Identity, Mode};
use crate::server::Server;

/// The `prev` of the first line of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a call learned on its way, for its audit line: filled in by `call::run` and
/// `call::run_reads` as far as the call got.
#[derive(Debug, Default)]
pub struct Trace {
    pub identity: Option<Identity>,
    /// The operationId reached (of the tool, of the raw tool's route, of the call tool's target).
    pub operation: Option<String>,
    pub method: Option<&'static str>,
    /// The path as sent to the forge (no query), with known secrets redacted.
    pub path: Option<String>,
    /// The forge's HTTP status.
    pub status: Option<u16>,
}

impl Trace {
    /// The identity a caller would have before the forge is asked: replaced once established.
    pub fn caller(&mut self, server: &Server, caller: &Caller) {
        // Only the audit line reads it: without one, a call asks the login cache nothing more.
        if server.audit.is_none() {
            return;
        }
        let (login, mode) = match caller {
            Caller::Global => {
                (server.global.cached_login().map(str::to_owned), server.global.credential.mode())
            }
            // A call answered or refused before it is identified still names its caller when
            // the login is known already; nothing is asked of the forge for the audit line.
            Caller::Token(t) => (server.logins.get(t).map(|u| u.login), Mode::Token),
            Caller::Granted(g) => (server.logins.get(&g.forge_token).map(|u| u.login), Mode::OAuth),
        };
        self.identity = Some(Identity { login, mode, sudo: None });
    }

    /// What the plan sends: operation, method, and path (no query) with known secrets redacted.
    pub fn sent(&mut self, plan: &crate::args::CallPlan, redactor: &crate::guard::Redactor) {
        if plan.operation_id.is_some() {
            self.operation.clone_from(&plan.operation_id);
        }
        self.method = Some(plan.method.as_str());
        self.path = Some(redactor.redact_str(&plan.path));
    }
}

/// Longest client name, version or tool name written (a client chooses them), and longest
/// path: a line stays small whatever a client sends.
const MAX_NAME: usize = 200;
const MAX_PATH: usize = 2000;

/// `text` cut to `max` characters, marked with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

/// Where a call came from: the transport, and the MCP client as it named itself.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `stdio`, `http`, `sse`, or `cli` for the `call` command.
    pub transport: &'static str,
    /// The client's `clientInfo` name and version from the MCP handshake, when known.
    pub client: Option<(String, String)>,
}

/// One call being audited: started before the call runs, finished with its result.
pub struct Pending<'a> {
    server: &'a Server,
    started: Instant,
    origin: Origin,
    subject: Subject<'a>,
    args_sha256: String,
}

/// What a line is about: a tool as the client named it, or a resource read.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Tool(&'a str),
    ResourceRead,
}

/// Start auditing a call of `subject` with `args`: refused
/// here, before it runs, when the audit log cannot be written (unless `AUDIT_FAIL_OPEN`).
pub fn begin<'a>(
    server: &'a Server,
    origin: Origin,
    subject: Subject<'a>,
    args: Option<&Map<String, Value>>,
) -> Result<Pending<'a>, GuardedError> {
    let started = Instant::now();
    if let Some(log) = &server.audit {
        if let Err(why) = log.ready() {
            refuse_or_warn(server, log, why)?;
        }
    }
    let args_sha256 = match (&server.audit, args) {
        (None, _) => String::new(),
        (Some(_), Some(a)) => sha256_hex(&canonical_object(a)),
        (Some(_), None) => sha256_hex(b"{}"),
    };
    Ok(Pending { server, started, origin, subject, args_sha256 })
}

impl Pending<'_> {
    /// Write the call's line, then hand its result on; `audit_failed` instead when the line
    /// could not be written (the call ran, its result is withheld).
    pub fn finish(
        self,
        trace: &Trace,
        result: Result<Guarded, GuardedError>,
    ) -> Result<Guarded, GuardedError> {
        let Some(log) = &self.server.audit else { return result };
        let outcome = crate::metrics::outcome(&result);
        let (status, bytes) = match &result {
            Ok(text) => (trace.status, text.as_str().len()),
            Err(e) => match e.error() {
                CallError::UnknownTool(_) => (None, 0),
                CallError::Result(f) => (f.status, crate::envelope::error_text(f).len()),
            },
        };
        let mut line = Map::new();
        line.insert("time".into(), rfc3339_utc(SystemTime::now()).into());
        line.insert("id".into(), uuid::Uuid::new_v4().to_string().into());
        line.insert("transport".into(), self.origin.transport.into());
        if let Some((name, version)) = &self.origin.client {
            line.insert(
                "client".into(),
                json!({"name": clip(name, MAX_NAME), "version": clip(version, MAX_NAME)}),
            );
        }
        line.insert("identity".into(), serde_json::to_value(&trace.identity).unwrap_or(Value::Null));
        // A name the catalog does not have is the client's text, which may hold anything
        // (a pasted token): it is not written.
        let tool = match self.subject {
            Subject::Tool(name) => self.server.catalog.get(name).map(|t| t.name()),
            Subject::ResourceRead => Some("resources/read"),
        };
        line.insert("tool".into(), json!(tool));
        line.insert("operation".into(), json!(trace.operation));
        line.insert("method".into(), json!(trace.method));
        line.insert("path".into(), json!(trace.path.as_deref().map(|p| clip(p, MAX_PATH))));
        line.insert("outcome".into(), outcome.into());
        line.insert("status".into(), json!(status));
        line.insert("duration_ms".into(), json!(self.started.elapsed().as_secs_f64() * 1000.0));
        line.insert("bytes".into(), bytes.into());
        line.insert("args_sha256".into(), self.args_sha256.into());
        match log.append(line) {
            Ok(()) => result,
            Err(why) => {
                refuse_or_warn(self.server, log, why)?;
                result
            }
        }
    }
}

fn refuse_or_warn(server: &Server, log: &AuditLog, why: String) -> Result<(), GuardedError> {
    if log.fail_open {
        tracing::warn!(audit_log = %log.path.display(), "{why}; the call proceeds unrecorded (AUDIT_FAIL_OPEN)");
        return Ok(());
    }
    tracing::error!(audit_log = %log.path.display(), "{why}");
    Err(server.guard.error(CallError::local(
        ErrorKind::AuditFailed,
        format!(
            "{why}; calls are not run unrecorded — the operator must fix AUDIT_LOG (or set AUDIT_FAIL_OPEN=true)"
        ),
    )))
}

/// The audit log file and the end of its chain.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    fail_open: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The open file and its identity (device, inode); `None` until it could be opened.
    file: Option<(File, (u64, u64))>,
    /// Hex SHA-256 of the last line written (or read at start), `GENESIS` before any.
    prev: String,
    /// `seq` of the last line; 0 before any.
    seq: u64,
}

impl AuditLog {
    /// The log at `path`; a file that cannot be opened now is tried again at each call.
    pub fn open(path: &Path, fail_open: bool) -> AuditLog {
        let log = AuditLog {
            path: path.to_owned(),
            fail_open,
            state: Mutex::new(State { file: None, prev: GENESIS.to_owned(), seq: 0 }),
        };
        if let Err(why) = log.ready() {
            tracing::warn!(audit_log = %path.display(), "{why}");
        }
        log
    }

    /// Whether the file is open (opening it if not).
    fn ready(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.file.is_none() { self.reopen(&mut state) } else { Ok(()) }
    }

    /// Open the file at the path and continue from its last line, if it has one.
    fn reopen(&self, state: &mut State) -> Result<(), String> {
        let cannot =
            |e: std::io::Error| format!("cannot write the audit log {}: {}", self.path.display(), e.kind());
        let mut file =
            OpenOptions::new().create(true).append(true).read(true).open(&self.path).map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        if !meta.is_file() {
            return Err(format!("cannot write the audit log {}: not a regular file", self.path.display()));
        }
        if let Some(last) = last_line(&mut file).map_err(cannot)? {
            let seq_of = |l: &[u8]| serde_json::from_slice::<Value>(l).ok()?.get("seq")?.as_u64();
            let (line, seq) = last.ok().and_then(|l| seq_of(&l).map(|seq| (l, seq))).ok_or_else(|| {
                format!(
                    "the audit log {} ends in a line that is not an audit line (cut short?); check it with `aegis-gitea-mcp audit verify` and move it aside",
                    self.path.display()
                )
            })?;
            state.prev = sha256_hex(&line);
            state.seq = seq;
        }
        state.file = Some((file, file_id(&meta)));
        Ok(())
    }

    /// Append one line: the fields of `body`, then `seq`, `prev` (and `continues` on the
    /// first line of a file that continues another).
    fn append(&self, mut body: Map<String, Value>) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // Rotated away (renamed or removed) or truncated in place: a new file continues the chain.
        let here = std::fs::metadata(&self.path).ok();
        let moved = match (&state.file, &here) {
            (Some((_, id)), Some(m)) => file_id(m) != *id,
            _ => true,
        };
        if moved {
            state.file = None;
            self.reopen(&mut state)?;
        }
        let empty = here.as_ref().is_some_and(|m| m.len() == 0) || (moved && here.is_none());
        let continues = (empty && state.seq > 0).then(|| state.prev.clone());
        let mut line = Map::with_capacity(body.len() + 3);
        line.insert("seq".into(), (state.seq + 1).into());
        line.append(&mut body);
        line.insert("prev".into(), state.prev.clone().into());
        if let Some(c) = continues {
            line.insert("continues".into(), c.into());
        }
        let mut bytes = serde_json::to_vec(&Value::Object(line)).map_err(|e| e.to_string())?;
        let hash = sha256_hex(&bytes);
        bytes.push(b'\n');
        let (file, _) = state.file.as_mut().expect("opened above");
        if let Err(e) = file.write_all(&bytes).and_then(|()| file.flush()) {
            // Whatever became of the file, the next call opens it again.
            state.file = None;
            return Err(format!("cannot write the audit log {}: {}", self.path.display(), e.kind()));
        }
        state.prev = hash;
        state.seq += 1;
        Ok(())
    }
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    (0, m.created().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as u64))
}

/// A last line longer than any audit line (client text is clipped, so lines are small): it is
/// not read whole.
#[derive(Debug, PartialEq)]
struct TooLong;

/// The last line of `file` (without its line end), read backwards from the end in blocks;
/// `None` for an empty file.
fn last_line(file: &mut File) -> std::io::Result<Option<Result<Vec<u8>, TooLong>>> {
    const BLOCK: u64 = 4096;
    const MAX_LINE: usize = 1 << 20;
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    // Skip the final line end, then look for the one before the last line.
    let end = {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        if last[0] == b'\n' { len - 1 } else { len }
    };
    // Blocks from the end backwards, joined once the line's start is found.
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let mut read = 0usize;
    let mut pos = end;
    let mut line = Vec::new();
    while pos > 0 {
        let start = pos.saturating_sub(BLOCK);
        let mut block = vec![0u8; (pos - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        if let Some(i) = memchr::memrchr(b'\n', &block) {
            line.extend_from_slice(&block[i + 1..]);
            break;
        }
        read += block.len();
        if read > MAX_LINE {
            return Ok(Some(Err(TooLong)));
        }
        blocks.push(block);
        pos = start;
    }
    for b in blocks.iter().rev() {
        line.extend_from_slice(b);
    }
    Ok(Some(Ok(line)))
}

/// `2026-11-30T22:10:00.123Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    Sha256::digest(bytes).iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Canonical JSON of an object: keys sorted (by their UTF-8 bytes) at every level, no white
/// space, strings and numbers as serde_json writes them.
pub fn canonical_object(map: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    canonical_map(map, &mut out);
    out
}

fn canonical_map(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    out.push(b'{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, k);
        out.push(b':');
        canonical(&map[k], out);
    }
    out.push(b'}');
}

fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => canonical_map(m, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// What `audit verify` found in one file.
#[derive(Debug, PartialEq, Eq)]
pub struct FileReport {
    pub lines: u64,
    /// `seq` and `prev` of the first line (`None` for an empty file).
    pub first: Option<(u64, String)>,
    /// `seq` and hash of the last line.
    pub last: Option<(u64, String)>,
    /// The first break: line number (from 1) and why.
    pub broken: Option<(u64, String)>,
}

/// One line as `verify` keeps it: its number, `seq`, `prev` and own hash.
struct Link {
    n: u64,
    seq: u64,
    prev: String,
    hash: String,
}

/// Check one file's chain from its first line's declared `prev`.
pub fn verify_file(path: &Path) -> std::io::Result<FileReport> {
    verify_reader(BufReader::new(File::open(path)?))
}

/// Check the chain of one file's contents, read from `reader` (a file, or bytes in memory).
pub fn verify_reader(mut reader: impl BufRead) -> std::io::Result<FileReport> {
    let mut links: Vec<Link> = Vec::new();
    let mut buf = Vec::new();
    let mut n = 0u64;
    let report = |links: &[Link], broken: Option<(u64, String)>| FileReport {
        lines: links.len() as u64,
        first: links.first().map(|l| (l.seq, l.prev.clone())),
        last: links.last().map(|l| (l.seq, l.hash.clone())),
        broken,
    };
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        let complete = buf.last() == Some(&b'\n');
        if complete {
            buf.pop();
        }
        let parsed = serde_json::from_slice::<Value>(&buf).ok();
        let fields = parsed.as_ref().and_then(|v| {
            let seq = v.get("seq")?.as_u64()?;
            let prev = v.get("prev")?.as_str().filter(|p| is_hash(p))?.to_owned();
            let continues = v.get("continues").map(|c| c.as_str() == Some(prev.as_str()));
            Some((seq, prev, continues))
        });
        let Some((seq, prev, continues_ok)) = fields else {
            let why = if complete {
                format!("line {n} is not an audit line (edited or damaged)")
            } else {
                format!(
                    "line {n}, the last, is truncated: it has no line end (a write cut short, or the file was cut)"
                )
            };
            return Ok(report(&links, Some((n, why))));
        };
        if !complete {
            return Ok(report(
                &links,
                Some((n, format!("line {n}, the last, is truncated: it has no line end (the file was cut)"))),
            ));
        }
        if continues_ok == Some(false) {
            return Ok(report(
                &links,
                Some((n, format!("line {n}: its continues and prev differ (edited)"))),
            ));
        }
        links.push(Link { n, seq, prev, hash: sha256_hex(&buf) });
        if links.len() >= 2 {
            if let Some(why) = link_break(&links, &mut reader)? {
                return Ok(report(&links[..links.len() - 1], Some((n, why))));
            }
        }
    }
    Ok(report(&links, None))
}

/// Why the newest link does not follow the one before, if it does not. For a jump in `seq`
/// the rest of the file is read (seq numbers only) to tell lines moved from lines deleted.
fn link_break(links: &[Link], rest: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let (before, this) = (&links[links.len() - 2], &links[links.len() - 1]);
    let (a, b, n) = (before.seq, this.seq, this.n);
    // At the largest seq nothing follows (an overflow here panicked, or wrapped to 0).
    let follows = a.checked_add(1) == Some(b);
    if follows && this.prev == before.hash {
        return Ok(None);
    }
    if follows {
        return Ok(Some(format!(
            "line {} was edited: its hash is not the prev that line {n} recorded",
            before.n
        )));
    }
    if b <= a || links.iter().any(|l| l.hash == this.prev && l.n != before.n) {
        return Ok(Some(format!("line {n} is out of order: seq {b} follows seq {a} (lines reordered)")));
    }
    // seq jumps forward: deleted, unless a skipped seq comes later (moved down).
    let mut later = Vec::new();
    let mut buf = Vec::new();
    while rest.read_until(b'\n', &mut buf)? > 0 {
        if let Some(s) = serde_json::from_slice::<Value>(&buf).ok().and_then(|v| v.get("seq")?.as_u64()) {
            later.push(s);
        }
        buf.clear();
    }
    if later.iter().any(|s| (a + 1..b).contains(s)) {
        return Ok(Some(format!("line {n} is out of order: seq {b} follows seq {a} (lines reordered)")));
    }
    let missing = b - a - 1;
    Ok(Some(format!(
        "{missing} line(s) deleted between line {} and line {n} (seq {} to {} are missing)",
        before.n,
        a + 1,
        b - 1
    )))
}

fn is_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `audit verify FILE...`: each file alone, then each against the one before. The report
/// for a person, and whether everything held.
pub fn verify(paths: &[PathBuf]) -> (String, bool) {
    verify_each(paths.iter().map(|p| (p.display().to_string(), File::open(p).map(BufReader::new))))
}

/// `verify` over named sources, each opened (or not) as it comes: each read alone, then each
/// against the one before.
pub fn verify_each<R: BufRead>(
    files: impl IntoIterator<Item = (String, std::io::Result<R>)>,
) -> (String, bool) {
    let mut out = String::new();
    let mut ok = true;
    let mut before: Option<(String, (u64, String))> = None;
    for (name, opened) in files {
        let report = match opened.and_then(verify_reader) {
            Ok(r) => r,
            Err(e) => {
                out.push_str(&format!("{name}: cannot read: {}\n", e.kind()));
                ok = false;
                before = None;
                continue;
            }
        };
        let start = match &report.first {
            None => "empty".to_owned(),
            Some((_, p)) if p == GENESIS => "starts a chain".to_owned(),
            Some((_, p)) => format!("continues a chain at {p}"),
        };
        match &report.broken {
            None => out.push_str(&format!(
                "{name}: ok, {} lines, {start}, last seq {} hash {}\n",
                report.lines,
                report.last.as_ref().map_or(0, |l| l.0),
                report.last.as_ref().map_or(GENESIS, |l| l.1.as_str())
            )),
            Some((n, why)) => {
                ok = false;
                out.push_str(&format!("{name}: BROKEN at line {n}: {why}\n"));
            }
        }
        if let (Some((prev_name, (seq, hash))), Some((first_seq, first_prev))) = (&before, &report.first) {
            if first_prev != hash || seq.checked_add(1) != Some(*first_seq) {
                ok = false;
                out.push_str(&format!(
                    "{name}: does not continue {prev_name}: its first line has seq {first_seq} and prev {first_prev}, expected seq {} and prev {hash}\n",
                    u128::from(*seq) + 1
                ));
            }
        }
        before = report.last.clone().map(|l| (name, l));
    }
    (out, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(dir: &Path, lines: usize) -> PathBuf {
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path, false);
        for i in 0..lines {
            let mut body = Map::new();
            body.insert("tool".into(), format!("t{i}").into());
            log.append(body).unwrap();
        }
        path
    }

    fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
        let mut lines: Vec<String> =
            std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect();
        f(&mut lines);
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn broken(path: &Path) -> (u64, String) {
        verify_file(path).unwrap().broken.expect("a break")
    }

    /// A line as `append` writes it, and its hash.
    fn line(seq: u64, prev: &str) -> (String, String) {
        let text = json!({"seq": seq, "tool": "t", "prev": prev}).to_string();
        let hash = sha256_hex(text.as_bytes());
        (text, hash)
    }

    #[test]
    fn a_chain_at_the_largest_seq_is_reported_not_a_panic() {
        // seq u64::MAX followed by seq 0 with the right prev: `a + 1` overflowed (a panic
        // with overflow checks, a wrap to 0 — a chain taken as whole — without).
        let (first, hash) = line(u64::MAX, GENESIS);
        let (second, _) = line(0, &hash);
        let report = verify_reader(format!("{first}\n{second}\n").as_bytes()).unwrap();
        assert_eq!(report.broken.map(|b| b.0), Some(2), "seq 0 does not follow seq u64::MAX");
        let (gap, _) = line(5, &hash);
        let report = verify_reader(format!("{first}\n{gap}\n").as_bytes()).unwrap();
        assert!(report.broken.is_some_and(|(n, why)| n == 2 && why.contains("out of order")));
        // A file that ends at u64::MAX has no continuation.
        let (next, _) = line(0, &hash);
        let files = [("a".to_owned(), Ok(format!("{first}\n"))), ("b".to_owned(), Ok(format!("{next}\n")))];
        let (out, ok) = verify_each(files.map(|(n, t)| (n, t.map(std::io::Cursor::new))));
        assert!(!ok && out.contains("b: does not continue a"), "{out}");
    }

    #[test]
    fn an_untouched_chain_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        let r = verify_file(&path).unwrap();
        assert_eq!(r.broken, None);
        assert_eq!(r.lines, 5);
        assert_eq!(r.first, Some((1, GENESIS.to_owned())));
    }

    #[test]
    fn client_chosen_names_are_clipped() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip(&"é".repeat(10), 2), "éé…");
    }

    #[test]
    fn an_edited_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        rewrite(&path, |l| l[2] = l[2].replace("t2", "tX"));
        let (n, why) = broken(&path);
        assert_eq!(n, 4);
        assert!(why.contains("line 3 was edited"), "{why}");
    }

    #[test]
    fn a_deleted_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        rewrite(&path, |l| {
            l.remove(2);
        });
        let (n, why) = broken(&path);
        assert_eq!(n, 3);
        assert!(why.contains("1 line(s) deleted between line 2 and line 3"), "{why}");
    }

    #[test]
    fn reordered_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        rewrite(&path, |l| l.swap(1, 2));
        let (n, why) = broken(&path);
        assert_eq!(n, 2);
        assert!(why.contains("out of order"), "{why}");
    }

    #[test]
    fn a_truncated_last_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 10]).unwrap();
        let (n, why) = broken(&path);
        assert_eq!(n, 3);
        assert!(why.contains("truncated"), "{why}");
    }

    #[test]
    fn a_restart_and_a_rotation_continue_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 2);
        // A second writer on the same file (a restart) goes on from its last line.
        let log = AuditLog::open(&path, false);
        log.append(Map::new()).unwrap();
        assert_eq!(verify_file(&path).unwrap().broken, None);
        let old = dir.path().join("audit.jsonl.1");
        std::fs::rename(&path, &old).unwrap();
        log.append(Map::new()).unwrap();
        log.append(Map::new()).unwrap();
        let new = verify_file(&path).unwrap();
        assert_eq!(new.broken, None);
        let first_line: Value =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().lines().next().unwrap()).unwrap();
        assert_eq!(first_line["continues"], first_line["prev"]);
        let (report, ok) = verify(&[old.clone(), path.clone()]);
        assert!(ok, "{report}");
        let (report, ok) = verify(&[path, old]);
        assert!(!ok && report.contains("does not continue"), "{report}");
    }

    #[test]
    fn long_last_lines_are_read_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let long = "x".repeat(10_000);
        std::fs::write(&path, format!("first\n{long}\n")).unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(last_line(&mut f).unwrap().unwrap(), Ok(long.clone().into_bytes()));
        std::fs::write(&path, &long).unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(last_line(&mut f).unwrap().unwrap(), Ok(long.into_bytes()));
        // A "line" longer than any audit line is not read whole, and is not an audit line.
        std::fs::write(&path, format!("first\n{}", "y".repeat(3 << 20))).unwrap();
        let mut f = File::open(&path).unwrap();
        assert_eq!(last_line(&mut f).unwrap().unwrap(), Err(TooLong));
    }

    #[test]
    fn times_and_canonical_json() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_709_251_199_250);
        assert_eq!(rfc3339_utc(t), "2024-02-29T23:59:59.250Z");
        let a: Map<String, Value> =
            serde_json::from_str(r#"{"b":1,"a":{"d":[1,{"y":2,"x":3}],"c":"s"}}"#).unwrap();
        assert_eq!(canonical_object(&a), br#"{"a":{"c":"s","d":[1,{"x":3,"y":2}]},"b":1}"#);
    }
}
