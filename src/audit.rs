//! The audit trail (`AUDIT_LOG`): one JSON line per tool call and per resource read, written
//! before the result goes back to the client, each line authenticated with the audit key
//! (`AUDIT_KEY_FILE`) and chained to the one before.
//!
//! A line holds who called, over which transport and client, which tool and operation, the
//! method and path sent to the forge, the outcome, the duration and the size of the result —
//! never argument values or result data: the arguments appear only as `args_hmac`, an HMAC of
//! their canonical JSON (keys sorted, no white space) under the key, so that nobody without
//! the key can test guesses against it (a password of a few words would fall to a dictionary
//! against a plain hash). What a client chose (its `clientInfo`, a login to act as) passes
//! exact redaction of the known secrets and the caller's own, and is cut to a bound.
//!
//! **The chain.** Every line ends in `,"mac":"<hex>"}`: HMAC-SHA256 of the line's bytes before
//! `,"mac":"`, so a line authenticates itself, the last one too. Its `prev` is the `mac` of
//! the line before (64 zeros on the first line of a chain) and its `seq` counts the lines of
//! the chain, so a line deleted, moved or taken from another chain breaks the links, and
//! without the key no line can be written that verifies. The line MACs and `args_hmac` use
//! two keys derived from the one in the file, so no value of one stands for the other.
//! When the file was rotated away (renamed, removed, or truncated in place) the first line
//! written to the new file carries the last `mac` of the old one as `prev` and also as
//! `continues`, and `seq` goes on: each file verifies alone, and files given in order verify
//! as one chain.
//!
//! **What the file must hold.** On start the chain continues from the last line of an
//! existing file (read from its end) only when that line verifies with the key; while
//! running, only when the file still ends in the last line this process wrote (or is empty,
//! as logrotate leaves it). Anything else — an edited last line, a file replaced, shortened
//! or written by another process — is refused: calls fail with `audit_failed` until the
//! file is moved aside. A torn write (a full disk cuts a line short) leaves bytes without a
//! line end after the last whole line; when that line is this chain's, the tail is cut back
//! to it and the next line records how many bytes went (`cut_bytes`), so a transient
//! failure stays transient. The head of the chain (its `seq` and `mac`) goes to the server's
//! log at start, at each rotation and at shutdown (`close`, after which nothing is written),
//! so a tail cut off cleanly can be found against it.
//!
//! Writes are serialized by one mutex, one `write` per line on a file opened for appending,
//! so lines never interleave. There is no fsync: a line is in the operating system's hands
//! before the result is returned (it survives a crash of this process, not of the machine).
//! When a line cannot be written the call fails with `audit_failed`, and calls are refused
//! before they run while the file cannot be written; `AUDIT_FAIL_OPEN` makes them proceed
//! with a warning instead.

use std::cell::OnceCell;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::hmac;
use secrecy::{ExposeSecret, SecretBox, SecretString};
use serde_json::{Map, Value, json};

use crate::identity::{Caller, Identity};
use aegis_core::catalog::Catalog;
use aegis_core::error::{CallError, ErrorKind, Shown};
use aegis_core::guard::{Guard, Guarded, GuardedError, Redactor};

/// The `prev` of the first line of a chain.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The audit key (`AUDIT_KEY_FILE`) as the two keys derived from it: one for the lines'
/// MACs, one for `args_hmac`.
pub struct AuditKey {
    line: hmac::Key,
    args: hmac::Key,
}

/// Derived from a secret: nothing of it is shown.
impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl AuditKey {
    /// The keys derived from the 32 bytes of the key file: HMAC-SHA256 of a fixed label each.
    pub fn new(key: &SecretBox<[u8; 32]>) -> AuditKey {
        let master = hmac::Key::new(hmac::HMAC_SHA256, key.expose_secret());
        let derive = |label: &[u8]| hmac::Key::new(hmac::HMAC_SHA256, hmac::sign(&master, label).as_ref());
        AuditKey {
            line: derive(b"aegis-gitea-mcp audit line mac v1"),
            args: derive(b"aegis-gitea-mcp audit args hmac v1"),
        }
    }

    /// `args_hmac` of arguments (a JSON object): hex HMAC of their canonical JSON.
    pub fn args_hmac(&self, args: &Map<String, Value>) -> String {
        hex(hmac::sign(&self.args, &canonical_object(args)).as_ref())
    }
}

/// What a call learned on its way, for its audit line: filled in by `call::run` and
/// `call::run_reads` as far as the call got.
#[derive(Debug, Default)]
pub struct Trace {
    pub(crate) identity: Option<Identity>,
    /// The operationId reached (of the tool, of the raw tool's route, of the call tool's target).
    pub(crate) operation: Option<String>,
    pub(crate) method: Option<&'static str>,
    /// The path as sent to the forge (no query), with known secrets redacted.
    pub(crate) path: Option<String>,
    /// The forge's HTTP status.
    pub(crate) status: Option<u16>,
    /// How a call that cannot be undone was confirmed (never what the person wrote).
    pub(crate) confirmed: Option<aegis_core::policy::confirm::Confirmed>,
    /// The profile the call went to, with several forges (a name of the profiles file).
    pub(crate) forge: Option<std::sync::Arc<str>>,
    /// What the flow guard made of a write of a session that had read private content: `kept`
    /// (within the sources' own owner), `widening` (asked, or refused: see `outcome`),
    /// `off` (FLOW_GUARD=off). Never which repositories: the line carries no content.
    pub(crate) flow: Option<&'static str>,
    /// The call's answer is a question for the person (protocol 2026-07-28): it ends this
    /// round as `input_required`, not refused.
    pub(crate) input_required: bool,
    /// What the call's lines share, when there is an audit log (`Pending::trace`).
    facts: Option<Facts>,
    /// The `seq` of the line that said this write was about to be sent (`AuditLog::before_write`).
    intent: Option<u64>,
    /// The caller's own secrets (its token), redacted from what the client chose.
    caller_secrets: Vec<SecretString>,
}

impl Trace {
    /// The identity a caller is known to have before the forge is asked (replaced once
    /// established), and its secrets.
    pub(crate) fn caller(&mut self, identity: Identity, caller: &Caller) {
        self.identity = Some(identity);
        self.caller_secrets = caller.secrets().into_iter().map(SecretString::from).collect();
    }

    /// How the call ended, as its audit line and the metrics say: the result's kind, or
    /// `input_required` for a round that asks the person.
    pub(crate) fn outcome(&self, result: &Result<Guarded, GuardedError>) -> &'static str {
        match result {
            Err(e) if self.input_required && e.kind() == Some(ErrorKind::NotConfirmed) => "input_required",
            _ => crate::metrics::outcome(result),
        }
    }

    /// What the plan sends: operation, method, and path (no query) with known secrets redacted.
    pub(crate) fn sent(&mut self, plan: &aegis_core::args::CallPlan, redactor: &aegis_core::guard::Redactor) {
        if let Some(id) = plan.operation_id() {
            self.operation = Some(id.to_owned());
        }
        self.method = Some(plan.method().as_str());
        self.path = Some(redactor.redact_str(plan.path()));
    }
}

/// Longest client name, version or login written (a client chooses them), and longest
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

/// Text a client chose, made fit for a line: the server's known secrets and the caller's own
/// redacted (in every spelling), cut to a bound — a secret whose end the cut took is
/// redacted too. The caller's secrets get an automaton only when a text is long enough to
/// hold one, which the names clients send never are.
struct ClientText<'a> {
    configured: &'a Redactor,
    caller: &'a [SecretString],
    caller_redactor: OnceCell<Redactor>,
}

impl<'a> ClientText<'a> {
    fn new(configured: &'a Redactor, caller: &'a [SecretString]) -> ClientText<'a> {
        ClientText { configured, caller, caller_redactor: OnceCell::new() }
    }

    fn clean(&self, text: &str, max: usize) -> String {
        let (head, cut) = match text.char_indices().nth(max) {
            None => (text, false),
            Some((at, _)) => (&text[..at], true),
        };
        // Every spelling of a secret is at least as long as the secret.
        let caller = self.caller.iter().any(|s| s.expose_secret().len() <= text.len()).then(|| {
            self.caller_redactor.get_or_init(|| Redactor::once(self.caller.iter().map(|s| s.expose_secret())))
        });
        let mut out = self.configured.redact_str(head);
        if let Some(r) = caller {
            out = r.redact_str(&out);
        }
        if cut {
            out = self.configured.redact_cut_tail(&out);
            if let Some(r) = caller {
                out = r.redact_cut_tail(&out);
            }
            out.push('…');
        }
        out
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
pub(crate) struct Pending<'a> {
    log: Option<&'a AuditLog>,
    guard: &'a Guard,
    started: Instant,
    facts: Facts,
}

/// What every line of one call says alike: its id (a write's intent line and its outcome
/// line share it), where it came from, its tool (as the catalog names it; `None` for a name
/// the catalog does not have, which is the client's text) and `args_hmac`.
#[derive(Debug, Clone)]
struct Facts {
    id: String,
    origin: Origin,
    tool: Option<String>,
    args_hmac: String,
}

/// What a line is about: a tool as the client named it, or a resource read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    Tool(&'a str),
    ResourceRead,
}

/// Start auditing a call of `subject` with `args`: refused here, before it runs, when the
/// audit log cannot be written (unless `AUDIT_FAIL_OPEN`). `guard` guards the refusal;
/// `catalog` says which tool names are its own (the line names no other).
pub(crate) fn begin<'a>(
    log: Option<&'a AuditLog>,
    guard: &'a Guard,
    catalog: &'a Catalog,
    origin: Origin,
    subject: Subject<'a>,
    args: Option<&Map<String, Value>>,
) -> Result<Pending<'a>, GuardedError> {
    let started = Instant::now();
    let args_hmac = match log {
        None => String::new(),
        Some(log) => {
            if let Err(why) = log.ready() {
                refuse_or_warn(guard, log, why)?;
            }
            log.key.args_hmac(args.unwrap_or(&Map::new()))
        }
    };
    // A name the catalog does not have is the client's text, which may hold anything (a
    // pasted token): it is not written.
    let tool = match subject {
        Subject::Tool(name) => catalog.get(name).map(|t| t.name().to_owned()),
        Subject::ResourceRead => Some("resources/read".to_owned()),
    };
    let facts = Facts { id: uuid::Uuid::new_v4().to_string(), origin, tool, args_hmac };
    Ok(Pending { log, guard, started, facts })
}

/// The members of a call's line, as far as the call got: who, which tool and operation, what
/// was sent, the outcome. Client text is redacted with `redactor` (the configured secrets)
/// and the caller's own, and bounded.
fn line_of(
    facts: &Facts,
    trace: &Trace,
    redactor: &Redactor,
    outcome: &str,
    status: Option<u16>,
) -> Map<String, Value> {
    let chosen = ClientText::new(redactor, &trace.caller_secrets);
    let mut line = Map::new();
    line.insert("time".into(), rfc3339_utc(SystemTime::now()).into());
    line.insert("id".into(), facts.id.clone().into());
    line.insert("transport".into(), facts.origin.transport.into());
    if let Some((name, version)) = &facts.origin.client {
        line.insert(
            "client".into(),
            json!({"name": chosen.clean(name, MAX_NAME), "version": chosen.clean(version, MAX_NAME)}),
        );
    }
    // The login to act as is the client's text; the login the forge's, guarded alike.
    let identity = trace.identity.as_ref().map(|id| Identity {
        login: id.login.as_deref().map(|l| chosen.clean(l, MAX_NAME)),
        mode: id.mode,
        sudo: id.sudo.as_deref().map(|l| chosen.clean(l, MAX_NAME)),
    });
    line.insert("identity".into(), serde_json::to_value(&identity).unwrap_or(Value::Null));
    if let Some(forge) = &trace.forge {
        line.insert("forge".into(), json!(&**forge));
    }
    line.insert("tool".into(), json!(facts.tool));
    line.insert("operation".into(), json!(trace.operation));
    line.insert("method".into(), json!(trace.method));
    line.insert("path".into(), json!(trace.path.as_deref().map(|p| clip(p, MAX_PATH))));
    line.insert("outcome".into(), outcome.into());
    line.insert("status".into(), json!(status));
    if let Some(how) = trace.confirmed {
        line.insert("confirmed".into(), how.as_str().into());
    }
    if let Some(flow) = trace.flow {
        line.insert("flow".into(), flow.into());
    }
    line
}

impl Pending<'_> {
    /// The trace the call fills in: with an audit log, it carries what the call's lines share,
    /// so that a write's intent line can be written before it is sent (`AuditLog::before_write`).
    pub(crate) fn trace(&self) -> Trace {
        Trace { facts: self.log.map(|_| self.facts.clone()), ..Trace::default() }
    }

    /// Write the call's line, then hand its result on; `audit_failed` instead when the line
    /// could not be written (the call ran, its result is withheld; a write that was sent says
    /// so, and its intent line records it).
    pub(crate) fn finish(
        self,
        trace: &Trace,
        result: Result<Guarded, GuardedError>,
    ) -> Result<Guarded, GuardedError> {
        let Some(log) = self.log else { return result };
        let outcome = trace.outcome(&result);
        let (status, bytes) = match &result {
            Ok(text) => (trace.status, text.as_str().len()),
            Err(e) => match e.error() {
                CallError::UnknownTool(_) => (None, 0),
                CallError::Result(f) => (f.status, aegis_core::envelope::error_text(f).len()),
            },
        };
        let mut line = line_of(&self.facts, trace, self.guard.redactor(), outcome, status);
        if let Some(seq) = trace.intent {
            line.insert("intent_seq".into(), seq.into());
        }
        line.insert("duration_ms".into(), json!(self.started.elapsed().as_secs_f64() * 1000.0));
        line.insert("bytes".into(), bytes.into());
        line.insert("args_hmac".into(), self.facts.args_hmac.clone().into());
        match log.append(line) {
            Ok(_) => result,
            // Refused for want of its intent line: that says it all (nothing was sent).
            Err(why) if matches!(&result, Err(e) if e.kind() == Some(ErrorKind::AuditFailed)) => {
                tracing::error!(audit_log = %log.path.display(), "{why}");
                result
            }
            Err(why) => {
                let why = match (trace.intent, trace.status) {
                    (Some(seq), Some(status)) => format!(
                        "{why}. The call WAS sent to the forge, which answered {status}: its intent line (seq {seq}) records it, its outcome could not be"
                    ),
                    (Some(seq), None) => format!(
                        "{why}. The call may have reached the forge (no answer came back): its intent line (seq {seq}) records that it was about to be sent, its outcome could not be recorded"
                    ),
                    _ => why,
                };
                refuse_or_warn(self.guard, log, why)?;
                result
            }
        }
    }
}

fn refuse_or_warn(guard: &Guard, log: &AuditLog, why: String) -> Result<(), GuardedError> {
    if log.fail_open {
        tracing::warn!(audit_log = %log.path.display(), "{why}; the call proceeds unrecorded (AUDIT_FAIL_OPEN)");
        return Ok(());
    }
    tracing::error!(audit_log = %log.path.display(), "{why}");
    Err(guard.error(CallError::local(
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
    key: AuditKey,
    fail_open: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The file being written, while it is known to end where this process left it.
    file: Option<Open>,
    /// The end of the chain: the last line written, or found at start. `None` before any.
    head: Option<Head>,
    /// Bytes of torn writes cut from the file and not yet recorded in a line.
    cut: u64,
    /// A file (device, inode) this process found empty and wrote into: a torn write in it
    /// before its first whole line is this process's own.
    began: Option<(u64, u64)>,
    /// Closed at shutdown: nothing more is written, so the head logged then is the last.
    closed: bool,
}

#[derive(Debug)]
struct Open {
    file: File,
    /// Device and inode: a different one at the path means the file was rotated away.
    id: (u64, u64),
    /// Where this process's last write ended (or the file's length when it was opened).
    end: u64,
    /// The next line is the first of a file that continues the chain (`continues`).
    first: bool,
}

/// The last line of the chain: its `seq` and `mac`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    seq: u64,
    mac: String,
}

impl AuditLog {
    /// The log at `path`, chained with `key`; a file that cannot be written now is tried again
    /// at each call. The head of the chain found (or why the file is refused) is logged.
    pub(crate) fn open(path: &Path, key: AuditKey, fail_open: bool) -> AuditLog {
        let log = AuditLog { path: path.to_owned(), key, fail_open, state: Mutex::new(State::default()) };
        let mut state = log.lock();
        match log.ensure(&mut state) {
            Ok(()) => log.log_head(&state, "at start"),
            Err(why) => tracing::error!(audit_log = %path.display(), "{why}"),
        }
        drop(state);
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a line could be written now (opening and checking the file if need be).
    fn ready(&self) -> Result<(), Shown> {
        let mut state = self.lock();
        self.ensure(&mut state)
    }

    /// Log the head of the chain, and close the log: nothing more is written to it (a call
    /// still running fails with `audit_failed`), so the head logged is the file's last line.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.file = None;
        self.log_head(&state, "at shutdown");
    }

    /// The head of the chain to the server's log, `when` it was reached.
    fn log_head(&self, state: &State, when: &str) {
        let path = self.path.display();
        match &state.head {
            Some(h) => {
                tracing::info!(audit_log = %path, seq = h.seq, mac = %h.mac, "audit chain head {when}")
            }
            None => tracing::info!(audit_log = %path, "audit chain head {when}: no line yet"),
        }
    }

    /// The file is open and ends where this process left it, or has been checked again:
    /// opened at the path, a torn tail of this chain cut back, its last line verified.
    fn ensure(&self, state: &mut State) -> Result<(), Shown> {
        if state.closed {
            return Err(format!(
                "the audit log {} is closed: the server is shutting down",
                self.path.display()
            ));
        }
        let here = std::fs::metadata(&self.path).ok();
        if let (Some(open), Some(m)) = (&mut state.file, &here) {
            if file_id(m) == open.id && m.len() == open.end {
                return Ok(());
            }
            if file_id(m) == open.id && m.len() == 0 {
                // Truncated in place (logrotate's `copytruncate`): the chain goes on in it.
                let rotated = state.head.is_some();
                open.end = 0;
                open.first = rotated;
                state.began = Some(open.id);
                if rotated {
                    self.log_head(
                        state,
                        "at rotation (the file was truncated; the next line continues the chain)",
                    );
                }
                return Ok(());
            }
        }
        state.file = None;
        self.reopen(state)
    }

    /// Open the file at the path and decide whether the chain may go on in it.
    fn reopen(&self, state: &mut State) -> Result<(), Shown> {
        let path = self.path.display();
        let cannot = |e: std::io::Error| format!("cannot write the audit log {path}: {}", e.kind());
        let mut file =
            OpenOptions::new().create(true).append(true).read(true).open(&self.path).map_err(cannot)?;
        let meta = file.metadata().map_err(cannot)?;
        if !meta.is_file() {
            return Err(format!("cannot write the audit log {path}: not a regular file"));
        }
        let id = file_id(&meta);
        let Ok(tail) = read_tail(&mut file).map_err(cannot)? else {
            return Err(format!(
                "the audit log {path} ends in more than {} bytes without a line of this chain: it is not this server's; check it with `aegis-gitea-mcp audit verify` and move it aside",
                MAX_TAIL
            ));
        };
        let whole = match &tail.whole {
            None => None,
            Some(line) => Some(open_line(&self.key, line).map_err(|fault| self.untrusted(fault))?),
        };
        if let (Some(head), Some(last)) = (&state.head, &whole) {
            if head.mac != last.mac {
                tracing::error!(
                    audit_log = %path, seq = head.seq, mac = %head.mac,
                    "audit chain head this server wrote last; the file at the path ends in seq {}",
                    last.seq
                );
                return Err(format!(
                    "the audit log {path} changed under the running server: its last line (seq {}) is not the last line this server wrote (seq {}, logged with its mac) — lines were removed, or the file was replaced or written by another process; nothing more is written to it. Check it with `aegis-gitea-mcp audit verify`, then move it aside (an empty file at the path, as logrotate leaves, continues the chain)",
                    last.seq, head.seq
                ));
            }
        }
        let mut end = tail.len;
        if tail.partial > 0 {
            // A torn write: bytes without a line end after the chain's last whole line (or, in a
            // file this process began, before any) are cut back.
            if whole.is_none() && state.began != Some(id) {
                return Err(format!(
                    "the audit log {path} holds {} bytes without a line end and no whole line: it is not this server's; move it aside",
                    tail.partial
                ));
            }
            end = tail.len - tail.partial;
            file.set_len(end).map_err(cannot)?;
            state.cut += tail.partial;
            tracing::warn!(
                audit_log = %path,
                bytes = tail.partial,
                "the audit log ended in a torn write (a line cut short, e.g. by a full disk): cut back to its last whole line; the next line records the bytes cut (cut_bytes)"
            );
        }
        let first = match whole {
            Some(last) => {
                state.head.get_or_insert(Head { seq: last.seq, mac: last.mac });
                false
            }
            None => {
                // A file new to this process (not one it began and then failed to write).
                if state.head.is_some() && state.began != Some(id) {
                    self.log_head(state, "at rotation (a new file at the path continues the chain)");
                }
                state.began = Some(id);
                state.head.is_some()
            }
        };
        state.file = Some(Open { file, id, end, first });
        Ok(())
    }

    /// Why a file whose last whole line does not verify is not continued, and what to do.
    fn untrusted(&self, fault: Fault) -> String {
        let path = self.path.display();
        let what = match fault {
            Fault::NotKeyed => {
                "is not a line of a keyed audit chain (it has no mac at its end): it was edited, or written by a version before the chain was keyed"
            }
            Fault::BadMac => {
                "does not verify with AUDIT_KEY_FILE: it was edited, or the file was written with another key"
            }
        };
        format!(
            "the last line of the audit log {path} {what}; nothing more is written to it. Check it with `aegis-gitea-mcp audit verify --key-file KEY {path}`, then move it aside (the server writes on in a new file)"
        )
    }

    /// Append one line: the fields of `body`, then `seq`, `prev` (and `continues` on the
    /// first line of a file that continues another, `cut_bytes` after a torn write was cut),
    /// then its `mac`.
    fn append(&self, mut body: Map<String, Value>) -> Result<u64, Shown> {
        let mut state = self.lock();
        self.ensure(&mut state)?;
        let (seq, prev) = match &state.head {
            Some(h) => (h.seq + 1, h.mac.clone()),
            None => (1, GENESIS.to_owned()),
        };
        let cut = state.cut;
        let open = state.file.as_mut().expect("ensured above");
        let mut line = Map::with_capacity(body.len() + 5);
        line.insert("seq".into(), seq.into());
        line.append(&mut body);
        line.insert("prev".into(), prev.clone().into());
        if open.first {
            line.insert("continues".into(), prev.into());
        }
        if cut > 0 {
            line.insert("cut_bytes".into(), cut.into());
        }
        let (mut bytes, mac) = seal(&self.key, &line);
        bytes.push(b'\n');
        if let Err(e) = open.file.write_all(&bytes) {
            // A full disk cuts the line short: the bytes that went are cut back at once, so the
            // file ends in a whole line (and verifies) while space stays short; the next line
            // records them. Whatever else became of the file, the next call checks it again.
            let torn = open.file.metadata().map(|m| m.len().saturating_sub(open.end));
            match torn {
                Ok(0) => {}
                Ok(torn) if open.file.set_len(open.end).is_ok() => {
                    state.cut += torn;
                    tracing::warn!(
                        audit_log = %self.path.display(),
                        bytes = torn,
                        "a write to the audit log was cut short (a full disk?): its torn line was cut back; the next line records the bytes cut (cut_bytes)"
                    );
                }
                _ => state.file = None,
            }
            return Err(format!("cannot write the audit log {}: {}", self.path.display(), e.kind()));
        }
        open.end += bytes.len() as u64;
        open.first = false;
        state.cut = 0;
        state.head = Some(Head { seq, mac });
        Ok(seq)
    }

    /// Before a write is sent: the line that says it is about to be (`"outcome": "sending"`,
    /// the id its outcome line will have), so that a write never reaches the forge without a
    /// line that says so. When it cannot be written the write is refused, not sent (unless
    /// `AUDIT_FAIL_OPEN`).
    pub fn before_write(&self, guard: &Guard, trace: &mut Trace) -> Result<(), CallError> {
        let Some(facts) = &trace.facts else { return Ok(()) };
        let mut line = line_of(facts, trace, guard.redactor(), "sending", None);
        line.insert("args_hmac".into(), facts.args_hmac.clone().into());
        match self.append(line) {
            Ok(seq) => {
                trace.intent = Some(seq);
                Ok(())
            }
            Err(why) if self.fail_open => {
                tracing::warn!(audit_log = %self.path.display(), "{why}; the write is sent unrecorded (AUDIT_FAIL_OPEN)");
                Ok(())
            }
            Err(why) => {
                tracing::error!(audit_log = %self.path.display(), "{why}");
                Err(CallError::local(
                    ErrorKind::AuditFailed,
                    format!(
                        "{why}; the call was NOT sent (a write goes to the forge only once the audit line that says so is written) — the operator must fix AUDIT_LOG (or set AUDIT_FAIL_OPEN=true)"
                    ),
                ))
            }
        }
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

/// The member that ends every line, before the 64 hex digits of its MAC and `"}`.
const MAC_MEMBER: &[u8] = b",\"mac\":\"";
/// `,"mac":"` + 64 hex digits + `"}`.
const MAC_END: usize = MAC_MEMBER.len() + 64 + 2;

/// The bytes of a line (without its line end) for the members of `line`, and its MAC: the
/// object's JSON without its closing brace, then `,"mac":"<hex>"}`, the MAC taken over the
/// bytes before `,"mac":"`.
pub(crate) fn seal(key: &AuditKey, line: &Map<String, Value>) -> (Vec<u8>, String) {
    let mut bytes = serde_json::to_vec(line).expect("a JSON object always serializes");
    bytes.pop();
    let mac = hex(hmac::sign(&key.line, &bytes).as_ref());
    bytes.extend_from_slice(MAC_MEMBER);
    bytes.extend_from_slice(mac.as_bytes());
    bytes.extend_from_slice(b"\"}");
    (bytes, mac)
}

/// Why a line is not one of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// No `,"mac":"<hex>"}` at its end, or not an audit line's JSON.
    NotKeyed,
    /// Its MAC is not the key's for its bytes.
    BadMac,
}

/// A line that verified with the key.
#[derive(Debug)]
struct Sealed {
    seq: u64,
    prev: String,
    mac: String,
    /// `Some(false)` when it has a `continues` that is not its `prev`.
    continues: Option<bool>,
    cut_bytes: Option<u64>,
}

/// Check one line (without its line end) against the key, then read its chain members.
fn open_line(key: &AuditKey, line: &[u8]) -> Result<Sealed, Fault> {
    if line.len() < MAC_END + 1 {
        return Err(Fault::NotKeyed);
    }
    let (body, end) = line.split_at(line.len() - MAC_END);
    let digits = &end[MAC_MEMBER.len()..MAC_MEMBER.len() + 64];
    if !end.starts_with(MAC_MEMBER) || !end.ends_with(b"\"}") || !is_hex(digits) {
        return Err(Fault::NotKeyed);
    }
    let tag = unhex(digits).ok_or(Fault::NotKeyed)?;
    hmac::verify(&key.line, body, &tag).map_err(|_| Fault::BadMac)?;
    let v: Value = serde_json::from_slice(line).map_err(|_| Fault::NotKeyed)?;
    let seq = v.get("seq").and_then(Value::as_u64).ok_or(Fault::NotKeyed)?;
    let prev =
        v.get("prev").and_then(Value::as_str).filter(|p| is_hex(p.as_bytes())).ok_or(Fault::NotKeyed)?;
    Ok(Sealed {
        seq,
        prev: prev.to_owned(),
        mac: String::from_utf8_lossy(digits).into_owned(),
        continues: v.get("continues").map(|c| c.as_str() == Some(prev)),
        cut_bytes: v.get("cut_bytes").and_then(Value::as_u64),
    })
}

/// The end of a file: its length, its last whole line (without the line end), and how many
/// bytes follow that line without a line end of their own (a torn write).
#[derive(Debug, PartialEq, Eq)]
struct Tail {
    len: u64,
    whole: Option<Vec<u8>>,
    partial: u64,
}

/// More than this at the end of a file without a whole line there is no audit line: lines
/// are small (client text is bounded), so a longer tail is not read.
const MAX_TAIL: u64 = 2 << 20;

/// A tail longer than `MAX_TAIL` without the line ends it needs.
#[derive(Debug, PartialEq, Eq)]
struct TooLong;

/// The end of `file`, read backwards in blocks that double until they hold its last whole
/// line (or the whole file).
fn read_tail(file: &mut File) -> std::io::Result<Result<Tail, TooLong>> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut size = len.min(4096);
    loop {
        let start = len - size;
        let mut buf = vec![0u8; size as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        let at_start = start == 0;
        match memchr::memrchr(b'\n', &buf) {
            None if at_start => return Ok(Ok(Tail { len, whole: None, partial: len })),
            Some(last) => {
                let partial = (buf.len() - last - 1) as u64;
                match memchr::memrchr(b'\n', &buf[..last]) {
                    Some(before) => {
                        return Ok(Ok(Tail { len, whole: Some(buf[before + 1..last].to_vec()), partial }));
                    }
                    None if at_start => {
                        return Ok(Ok(Tail { len, whole: Some(buf[..last].to_vec()), partial }));
                    }
                    None => {}
                }
            }
            None => {}
        }
        if size >= MAX_TAIL {
            return Ok(Err(TooLong));
        }
        size = (size * 2).min(len);
    }
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Lower-case hex digits, 64 of them (a MAC, a `prev`).
fn is_hex(s: &[u8]) -> bool {
    s.len() == 64 && s.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    let digit = |b: u8| (b as char).to_digit(16);
    s.chunks(2).map(|p| Some((digit(p[0])? * 16 + digit(*p.get(1)?)?) as u8)).collect()
}

/// `2026-11-30T22:10:00.123Z`.
pub(crate) fn rfc3339_utc(t: SystemTime) -> String {
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

/// Canonical JSON of an object: keys sorted (by their UTF-8 bytes) at every level, no white
/// space, strings and numbers as serde_json writes them.
pub(crate) fn canonical_object(map: &Map<String, Value>) -> Vec<u8> {
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
pub(crate) struct FileReport {
    /// Lines that verified and linked, up to the first break.
    pub(crate) lines: u64,
    /// `seq` and `prev` of the first line (`None` for an empty file).
    pub(crate) first: Option<(u64, String)>,
    /// `seq` and `mac` of the last line that verified and linked.
    pub(crate) last: Option<(u64, String)>,
    /// The first break: line number (from 1) and why.
    pub(crate) broken: Option<(u64, String)>,
    /// What a person should know of lines that verified (a torn write cut before one).
    pub(crate) notes: Vec<String>,
}

/// One line as `verify` keeps it: its number, `seq`, `prev` and `mac`.
struct Link {
    n: u64,
    seq: u64,
    prev: String,
    mac: String,
}

/// Check one file's chain with `key`, from its first line's declared `prev`.
#[cfg(test)]
fn verify_file(path: &Path, key: &AuditKey) -> std::io::Result<FileReport> {
    verify_reader(BufReader::new(File::open(path)?), key)
}

/// Check the chain of one file's contents with `key`, read from `reader` (a file, or bytes in
/// memory).
pub(crate) fn verify_reader(mut reader: impl BufRead, key: &AuditKey) -> std::io::Result<FileReport> {
    let mut links: Vec<Link> = Vec::new();
    let mut notes = Vec::new();
    let mut buf = Vec::new();
    let mut n = 0u64;
    let report = |links: &[Link], notes: Vec<String>, broken: Option<(u64, String)>| FileReport {
        lines: links.len() as u64,
        first: links.first().map(|l| (l.seq, l.prev.clone())),
        last: links.last().map(|l| (l.seq, l.mac.clone())),
        broken,
        notes,
    };
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        n += 1;
        if buf.pop_if(|b| *b == b'\n').is_none() {
            // A torn write (a full disk, a crash): the lines before it verify; the bytes after
            // the last whole line are no line at all, and say nothing.
            notes.push(format!(
                "the file ends in {} bytes without a line end after line {}: a write cut short (a full disk, a crash) or the file was cut there; the lines before verify, and a running server cuts such a tail back before its next line and records the bytes cut there (cut_bytes)",
                buf.len(),
                n - 1
            ));
            return Ok(report(&links, notes, None));
        }
        let line = match open_line(key, &buf) {
            Ok(line) => line,
            Err(Fault::NotKeyed) => {
                let why = format!(
                    "line {n} is not a line of a keyed audit chain (it has no mac at its end): it was edited or damaged, or written by a version before the chain was keyed"
                );
                return Ok(report(&links, notes, Some((n, why))));
            }
            Err(Fault::BadMac) => {
                let mut why = format!(
                    "line {n} does not verify with this key: it was changed after it was written, or written with another key"
                );
                if n == 1 && !any_line_verifies(&mut reader, key)? {
                    why.push_str(
                        "; no line of the file verifies with it: is this the server's AUDIT_KEY_FILE? (if it is, the whole file was written without the key)",
                    );
                }
                return Ok(report(&links, notes, Some((n, why))));
            }
        };
        if line.continues == Some(false) {
            let why = format!(
                "line {n}: its continues and prev differ, which the server never writes (written by someone who has the key)"
            );
            return Ok(report(&links, notes, Some((n, why))));
        }
        if let Some(cut) = line.cut_bytes {
            notes.push(format!(
                "line {n} records {cut} bytes of a torn write (a line cut short, e.g. by a full disk) cut from the end of the file before it"
            ));
        }
        links.push(Link { n, seq: line.seq, prev: line.prev, mac: line.mac });
        if links.len() >= 2 {
            if let Some(why) = link_break(&links, &mut reader)? {
                return Ok(report(&links[..links.len() - 1], notes, Some((n, why))));
            }
        }
    }
    Ok(report(&links, notes, None))
}

/// Whether any of the remaining lines verifies with `key`.
fn any_line_verifies(rest: &mut impl BufRead, key: &AuditKey) -> std::io::Result<bool> {
    let mut buf = Vec::new();
    while rest.read_until(b'\n', &mut buf)? > 0 {
        buf.pop_if(|b| *b == b'\n');
        if open_line(key, &buf).is_ok() {
            return Ok(true);
        }
        buf.clear();
    }
    Ok(false)
}

/// Why the newest link does not follow the one before, if it does not. For a jump in `seq`
/// the rest of the file is read (seq numbers only) to tell lines moved from lines deleted.
fn link_break(links: &[Link], rest: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let (before, this) = (&links[links.len() - 2], &links[links.len() - 1]);
    let (a, b, n) = (before.seq, this.seq, this.n);
    // At the largest seq nothing follows (an overflow here panicked, or wrapped to 0).
    let follows = a.checked_add(1) == Some(b);
    if follows && this.prev == before.mac {
        return Ok(None);
    }
    if follows {
        return Ok(Some(format!(
            "line {n} does not follow line {}: its prev is not that line's mac (a line of another chain was put in its place, or two servers write this file)",
            before.n
        )));
    }
    if b <= a || links.iter().any(|l| l.mac == this.prev && l.n != before.n) {
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

/// `audit verify FILE...`: each file alone with `key`, then each against the one before.
/// The report for a person, and whether everything held.
pub fn verify(paths: &[PathBuf], key: &AuditKey) -> (String, bool) {
    verify_each(paths.iter().map(|p| (p.display().to_string(), File::open(p).map(BufReader::new))), key)
}

/// `verify` over named sources, each opened (or not) as it comes: each read alone with `key`,
/// then each against the one before.
pub(crate) fn verify_each<R: BufRead>(
    files: impl IntoIterator<Item = (String, std::io::Result<R>)>,
    key: &AuditKey,
) -> (String, bool) {
    let mut out = String::new();
    let mut ok = true;
    let mut before: Option<(String, (u64, String))> = None;
    for (name, opened) in files {
        let report = match opened.and_then(|r| verify_reader(r, key)) {
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
            Some((seq, p)) => format!("continues a chain after seq {} mac {p}", seq.saturating_sub(1)),
        };
        match &report.broken {
            None => out.push_str(&format!(
                "{name}: ok, {} lines, {start}, last seq {} mac {}\n",
                report.lines,
                report.last.as_ref().map_or(0, |l| l.0),
                report.last.as_ref().map_or(GENESIS, |l| l.1.as_str())
            )),
            Some((n, why)) => {
                ok = false;
                out.push_str(&format!("{name}: BROKEN at line {n}: {why}\n"));
            }
        }
        for note in &report.notes {
            out.push_str(&format!("{name}: note: {note}\n"));
        }
        if let (Some((prev_name, (seq, mac))), Some((first_seq, first_prev))) = (&before, &report.first) {
            if first_prev != mac || seq.checked_add(1) != Some(*first_seq) {
                ok = false;
                out.push_str(&format!(
                    "{name}: does not continue {prev_name}: its first line has seq {first_seq} and prev {first_prev}, expected seq {} and prev {mac}\n",
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

    fn key_of(byte: u8) -> AuditKey {
        AuditKey::new(&SecretBox::new(Box::new([byte; 32])))
    }

    fn key() -> AuditKey {
        key_of(7)
    }

    fn body(i: usize) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("tool".into(), format!("t{i}").into());
        body
    }

    fn chain(dir: &Path, lines: usize) -> PathBuf {
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path, key(), false);
        for i in 0..lines {
            log.append(body(i)).unwrap();
        }
        path
    }

    fn lines_of(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect()
    }

    fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
        let mut lines = lines_of(path);
        f(&mut lines);
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

    fn broken(path: &Path) -> (u64, String) {
        verify_file(path, &key()).unwrap().broken.expect("a break")
    }

    /// A line as someone without the key would write it: the members changed, the chain
    /// members and the mac recomputed with a key of their own.
    fn forged(
        line: &str,
        prev: &str,
        with: &AuditKey,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> (String, String) {
        let mut m: Map<String, Value> = serde_json::from_str(line).unwrap();
        m.remove("mac");
        m.insert("prev".into(), prev.into());
        change(&mut m);
        let (bytes, mac) = seal(with, &m);
        (String::from_utf8(bytes).unwrap(), mac)
    }

    #[test]
    fn an_untouched_chain_verifies_and_every_line_ends_in_its_mac() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        let r = verify_file(&path, &key()).unwrap();
        assert_eq!(r.broken, None);
        assert_eq!(r.lines, 5);
        assert_eq!(r.first, Some((1, GENESIS.to_owned())));
        let lines = lines_of(&path);
        let parsed: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        for (i, l) in parsed.iter().enumerate() {
            let keys: Vec<&String> = l.as_object().unwrap().keys().collect();
            assert_eq!(keys.last().unwrap().as_str(), "mac", "{l}");
            if i > 0 {
                assert_eq!(l["prev"], parsed[i - 1]["mac"], "prev is the mac of the line before");
            }
        }
        assert_eq!(r.last, Some((5, parsed[4]["mac"].as_str().unwrap().to_owned())));
        // The mac is the key's: another key verifies none of it.
        let other = verify_file(&path, &key_of(8)).unwrap().broken.unwrap();
        assert_eq!(other.0, 1);
        assert!(other.1.contains("no line of the file verifies with it"), "{}", other.1);
    }

    /// A line with `seq` and `prev` as `append` writes it, sealed with `key()`: its text and mac.
    fn sealed_line(seq: u64, prev: &str) -> (String, String) {
        let mut line = Map::new();
        line.insert("seq".into(), seq.into());
        line.insert("tool".into(), "t".into());
        line.insert("prev".into(), prev.into());
        let (bytes, mac) = seal(&key(), &line);
        (String::from_utf8(bytes).unwrap(), mac)
    }

    #[test]
    fn a_chain_at_the_largest_seq_is_reported_not_a_panic() {
        // seq u64::MAX followed by seq 0 with the right prev: `a + 1` overflowed (a panic
        // with overflow checks, a wrap to 0 — a chain taken as whole — without).
        let (first, mac) = sealed_line(u64::MAX, GENESIS);
        let (second, _) = sealed_line(0, &mac);
        let report = verify_reader(format!("{first}\n{second}\n").as_bytes(), &key()).unwrap();
        assert_eq!(report.broken.map(|b| b.0), Some(2), "seq 0 does not follow seq u64::MAX");
        let (gap, _) = sealed_line(5, &mac);
        let report = verify_reader(format!("{first}\n{gap}\n").as_bytes(), &key()).unwrap();
        assert!(report.broken.is_some_and(|(n, why)| n == 2 && why.contains("out of order")));
        // A file that ends at u64::MAX has no continuation.
        let (next, _) = sealed_line(0, &mac);
        let files = [("a".to_owned(), Ok(format!("{first}\n"))), ("b".to_owned(), Ok(format!("{next}\n")))];
        let (out, ok) = verify_each(files.map(|(n, t)| (n, t.map(std::io::Cursor::new))), &key());
        assert!(!ok && out.contains("b: does not continue a"), "{out}");
    }

    #[test]
    fn client_chosen_names_are_clipped() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc…");
        assert_eq!(clip(&"é".repeat(10), 2), "éé…");
    }

    #[test]
    fn client_text_loses_known_secrets_and_the_callers_own_in_every_spelling() {
        let configured = Redactor::new(["Zq7GLOBALtok3n0x"]);
        let caller = [SecretString::from("tok-caller-abcdef0123")];
        let text = ClientText::new(&configured, &caller);
        assert_eq!(text.clean("claude-code", MAX_NAME), "claude-code");
        assert_eq!(text.clean("x Zq7GLOBALtok3n0x y", MAX_NAME), "x [REDACTED] y");
        assert_eq!(text.clean("tok-caller-abcdef0123", MAX_NAME), "[REDACTED]");
        let percent: String = "tok-caller-abcdef0123".bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(text.clean(&format!("v{percent}"), MAX_NAME), "v[REDACTED]");
        // Cut at the bound in the middle of a secret: its first part goes too.
        let long = format!("{}tok-caller-abcdef0123", "p".repeat(MAX_NAME - 8));
        let cut = text.clean(&long, MAX_NAME);
        assert!(!cut.contains("tok-call"), "{cut}");
        assert!(cut.ends_with("[REDACTED]…"), "{cut}");
        assert!(cut.chars().count() <= MAX_NAME + "[REDACTED]…".len());
    }

    #[test]
    fn args_hmac_is_keyed_and_canonical() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"password":"hunter2","login":"bob"}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"login":"bob","password":"hunter2"}"#).unwrap();
        assert_eq!(key().args_hmac(&a), key().args_hmac(&b), "key order does not matter");
        assert_ne!(key().args_hmac(&a), key_of(8).args_hmac(&a), "without the key no guess can be checked");
        assert_eq!(key().args_hmac(&a).len(), 64);
        let plain = hex(&{
            use sha2::Digest;
            sha2::Sha256::digest(canonical_object(&a))
        });
        assert_ne!(key().args_hmac(&a), plain);
    }

    #[test]
    fn an_edited_line_is_named_the_last_one_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        rewrite(&path, |l| l[2] = l[2].replace("t2", "tX"));
        let (n, why) = broken(&path);
        assert_eq!(n, 3);
        assert!(why.contains("line 3 does not verify with this key"), "{why}");
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 3);
        rewrite(&path, |l| l[2] = l[2].replace("t2", "tX"));
        assert_eq!(broken(&path).0, 3, "the last line authenticates itself");
    }

    #[test]
    fn a_chain_recomputed_without_the_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 5);
        // A middle line edited and the chain after it recomputed, with a key of one's own.
        let attacker = key_of(9);
        rewrite(&path, |l| {
            let prev: Value = serde_json::from_str(&l[1]).unwrap();
            let mut prev = prev["mac"].as_str().unwrap().to_owned();
            for (i, line) in l.iter_mut().enumerate().skip(2) {
                let (text, mac) = forged(line, &prev, &attacker, |m| {
                    if i == 2 {
                        m.insert("tool".into(), "tX".into());
                    }
                });
                *line = text;
                prev = mac;
            }
        });
        let (n, why) = broken(&path);
        assert_eq!(n, 3);
        assert!(why.contains("does not verify"), "{why}");
        // A whole file forged: nothing of it verifies.
        rewrite(&path, |l| {
            let mut prev = GENESIS.to_owned();
            for line in l.iter_mut() {
                let (text, mac) = forged(line, &prev, &attacker, |_| {});
                *line = text;
                prev = mac;
            }
        });
        let (n, why) = broken(&path);
        assert_eq!(n, 1);
        assert!(why.contains("no line of the file verifies"), "{why}");
        // A line without a mac is no line of the chain.
        rewrite(&path, |l| l[0] = r#"{"seq":1,"prev":"00"}"#.into());
        assert!(broken(&path).1.contains("not a line of a keyed audit chain"));
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
    fn a_file_cut_inside_its_last_line_verifies_up_to_the_cut_and_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        let cut = &text[..text.len() - 10];
        std::fs::write(&path, cut).unwrap();
        let report = verify_file(&path, &key()).unwrap();
        assert_eq!((report.broken, report.lines), (None, 2));
        let tail = cut.len() - cut.rfind('\n').unwrap() - 1;
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains(&format!("ends in {tail} bytes without a line end after line 2"))),
            "{:?}",
            report.notes
        );
    }

    #[test]
    fn a_restart_and_a_rotation_continue_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 2);
        // A second writer on the same file (a restart) goes on from its last line.
        let log = AuditLog::open(&path, key(), false);
        log.append(Map::new()).unwrap();
        assert_eq!(verify_file(&path, &key()).unwrap().broken, None);
        let old = dir.path().join("audit.jsonl.1");
        std::fs::rename(&path, &old).unwrap();
        log.append(Map::new()).unwrap();
        log.append(Map::new()).unwrap();
        let new = verify_file(&path, &key()).unwrap();
        assert_eq!(new.broken, None);
        let first_line: Value = serde_json::from_str(&lines_of(&path)[0]).unwrap();
        assert_eq!(first_line["continues"], first_line["prev"]);
        let (report, ok) = verify(&[old.clone(), path.clone()], &key());
        assert!(ok, "{report}");
        let (report, ok) = verify(&[path.clone(), old], &key());
        assert!(!ok && report.contains("does not continue"), "{report}");
        // Truncated in place (copytruncate): the chain goes on in the same file.
        let copy = dir.path().join("audit.jsonl.2");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        log.append(Map::new()).unwrap();
        let (report, ok) = verify(&[copy, path], &key());
        assert!(ok, "{report}");
    }

    #[test]
    fn a_restart_does_not_adopt_a_last_line_that_does_not_verify() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 3);
        rewrite(&path, |l| l[2] = l[2].replace("t2", "tX"));
        let log = AuditLog::open(&path, key(), false);
        let why = log.append(Map::new()).unwrap_err();
        assert!(
            why.contains("does not verify with AUDIT_KEY_FILE") && why.contains("move it aside"),
            "{why}"
        );
        assert!(log.ready().is_err(), "calls are refused before they run");
        assert_eq!(lines_of(&path).len(), 3, "nothing was added");
        // Another key: the same.
        let other = tempfile::tempdir().unwrap();
        let path = chain(other.path(), 1);
        assert!(AuditLog::open(&path, key_of(8), false).append(Map::new()).is_err());
        // Moved aside, the server writes on in a new file.
        std::fs::rename(&path, path.with_extension("old")).unwrap();
        let log = AuditLog::open(&path, key_of(8), false);
        log.append(Map::new()).unwrap();
    }

    #[test]
    fn a_file_replaced_under_the_running_server_is_not_continued() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 1);
        let log = AuditLog::open(&path, key(), false);
        log.append(body(1)).unwrap();
        let kept = std::fs::read_to_string(&path).unwrap();
        log.append(body(2)).unwrap();
        // The file replaced by an older copy of itself (its last line cut off), another inode.
        let copy = dir.path().join("copy");
        std::fs::write(&copy, &kept).unwrap();
        std::fs::rename(&copy, &path).unwrap();
        let why = log.append(body(3)).unwrap_err();
        assert!(why.contains("changed under the running server") && why.contains("seq 2"), "{why}");
        assert!(log.ready().is_err(), "calls are refused before they run");
        // Shortened in place, the same inode: the same.
        std::fs::remove_file(&path).unwrap();
        log.append(body(3)).unwrap();
        log.append(body(4)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let first_len = text.find('\n').unwrap() + 1;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(first_len as u64).unwrap();
        assert!(log.append(body(5)).unwrap_err().contains("changed under the running server"));
        // Put back as it was, it is continued.
        std::fs::write(&path, &text).unwrap();
        log.append(body(5)).unwrap();
        assert_eq!(verify_file(&path, &key()).unwrap().broken, None);
    }

    #[test]
    fn a_torn_write_is_cut_back_and_recorded_in_the_next_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 2);
        let log = AuditLog::open(&path, key(), false);
        log.append(body(2)).unwrap();
        let whole = std::fs::metadata(&path).unwrap().len();
        // A line cut short, as a full disk leaves it.
        let torn = br#"{"seq":4,"time":"2026-"#;
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();
        let before = verify_file(&path, &key()).unwrap();
        assert!(before.broken.is_none() && before.notes.iter().any(|n| n.contains("without a line end")));
        log.append(body(3)).unwrap();
        let report = verify_file(&path, &key()).unwrap();
        assert_eq!(report.broken, None);
        assert_eq!(report.lines, 4);
        assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
        assert!(
            report.notes[0].contains(&format!("line 4 records {} bytes", torn.len())),
            "{:?}",
            report.notes
        );
        let last: Value = serde_json::from_str(lines_of(&path).last().unwrap()).unwrap();
        assert_eq!(last["cut_bytes"], torn.len());
        assert!(std::fs::metadata(&path).unwrap().len() > whole);
        // At a restart too: the torn tail follows a line that verifies.
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();
        let log = AuditLog::open(&path, key(), false);
        log.append(body(4)).unwrap();
        assert_eq!(verify_file(&path, &key()).unwrap().broken, None);
        // A torn first line in a file this process began is its own, too.
        let fresh = dir.path().join("fresh.jsonl");
        let log = AuditLog::open(&fresh, key(), false);
        std::fs::write(&fresh, torn).unwrap();
        log.append(body(0)).unwrap();
        let r = verify_file(&fresh, &key()).unwrap();
        assert_eq!((r.broken, r.lines, r.notes.len()), (None, 1, 1));
        // But not bytes without a whole line that no process here wrote.
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, torn).unwrap();
        let why = AuditLog::open(&other, key(), false).append(body(0)).unwrap_err();
        assert!(why.contains("no whole line"), "{why}");
    }

    #[test]
    fn a_closed_log_writes_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = chain(dir.path(), 1);
        let log = AuditLog::open(&path, key(), false);
        log.close();
        assert!(log.append(Map::new()).unwrap_err().contains("shutting down"));
        assert!(log.ready().is_err());
        assert_eq!(lines_of(&path).len(), 1);
    }

    #[test]
    fn the_tail_is_read_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let long = "x".repeat(10_000);
        let tail = |text: &str| {
            std::fs::write(&path, text).unwrap();
            read_tail(&mut File::open(&path).unwrap()).unwrap()
        };
        let len = |t: &str| t.len() as u64;
        let text = format!("first\n{long}\n");
        assert_eq!(
            tail(&text),
            Ok(Tail { len: len(&text), whole: Some(long.clone().into_bytes()), partial: 0 })
        );
        let text = format!("{long}\n");
        assert_eq!(
            tail(&text),
            Ok(Tail { len: len(&text), whole: Some(long.clone().into_bytes()), partial: 0 })
        );
        let text = format!("first\n{long}\ntorn");
        assert_eq!(
            tail(&text),
            Ok(Tail { len: len(&text), whole: Some(long.clone().into_bytes()), partial: 4 })
        );
        assert_eq!(tail(&long), Ok(Tail { len: len(&long), whole: None, partial: len(&long) }));
        assert_eq!(tail(""), Ok(Tail { len: 0, whole: None, partial: 0 }));
        // A "line" longer than any audit line is not read whole.
        assert_eq!(tail(&format!("first\n{}", "y".repeat(3 << 20))), Err(TooLong));
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
