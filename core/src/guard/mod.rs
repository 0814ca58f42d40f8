//! The guard: every result — success and error, generated tools and built-in ones alike —
//! passes here after decoding and before it is sent, in this order:
//!
//! 0. content hygiene (`CONTENT_HYGIENE`, `hygiene.rs`): invisible and bidirectional-control
//!    characters and HTML comments in forge text are marked (`mark`) or removed (`strip`)
//!    and counted in `hidden_content`; first, so that the steps below see the text as it
//!    leaves (a secret split by zero-width characters is joined for them);
//! 1. exact redaction (always on): every secret the server knows, plus the caller's token and
//!    the secrets this call's body carried, become `[REDACTED]` in strings and keys — in every
//!    spelling `spellings.rs` lists (percent-encoded, base64 at any alignment), also where
//!    JSON escapes spell them, and inside base64 file content (`encoded.rs`); binary content
//!    in which one occurs is withheld (`secret_blocked`), since it cannot be redacted;
//! 2. pattern masking (`SECRET_DETECTION_MODE`): `off` skips it, `mask` shortens
//!    credential-looking strings, `block` withholds the result as `secret_blocked`;
//!    successful results of credential-issuing operations skip this step, and the answers
//!    of the built-in tools (spec text, not forge data) are masked, never withheld;
//! 3. bounds (`MAX_TOOL_RESPONSE_ITEMS`, `MAX_TOOL_RESPONSE_CHARS`).
//!
//! The whole envelope is guarded, not only `data`: the login the forge reports, the path as
//! sent. What leaves a call is a `Guarded` text or a `GuardedError`, which only this module
//! can build, so no path can skip the guard. Log lines go through steps 1 and 2 as well
//! (`log.rs`).
//! What the guard did to each result (redacted, masked, blocked, truncated, hidden content
//! found) is counted once per result for `/metrics`.

pub(crate) mod bound;
pub mod credential_ops;
mod encoded;
pub mod hygiene;
pub(crate) mod mask;
mod percent;
pub(crate) mod redact;
pub(crate) mod rules;
pub mod secrets;
pub mod spellings;
pub mod unescape;

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind};

pub use bound::Bounds;
pub use mask::Masker;
pub use redact::Redactor;
pub use spellings::spellings;

use serde_json::Value;

use crate::decode::json::Elided;
use crate::envelope::{HiddenContent, Success};
use crate::error::{CallError, ErrorKind, ToolFailure};

/// The text of a result that passed the guard: the only form in which a result leaves a call.
/// Only the guard builds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded(String);

impl Guarded {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A failed call whose every word passed the guard. Only the guard builds one.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedError(CallError);

impl GuardedError {
    pub fn error(&self) -> &CallError {
        &self.0
    }

    pub fn into_error(self) -> CallError {
        self.0
    }

    /// The kind, when this is a tool result.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.0.kind()
    }
}

impl std::fmt::Display for GuardedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How a finished call reaches the client, decided here once for every transport and the
/// `call` command. Each holds text that passed the guard, so a result reaches the protocol
/// only through a guard pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A success result: its text.
    Success(Guarded),
    /// An error result (`isError: true`): its text.
    Error(Guarded),
    /// Not a result at all: a JSON-RPC `-32602` error with this message.
    UnknownTool(Guarded),
}

impl Outcome {
    /// Classify a call's result.
    pub fn from_result(result: Result<Guarded, GuardedError>) -> Outcome {
        match result {
            Ok(text) => Outcome::Success(text),
            Err(e) => match e.into_error() {
                CallError::UnknownTool(name) => {
                    Outcome::UnknownTool(Guarded(format!("unknown tool: {name}")))
                }
                CallError::Result(f) => Outcome::Error(Guarded(crate::envelope::error_text(&f))),
            },
        }
    }
}

/// Longest forge message kept in an error result, in characters.
pub(crate) const MAX_MESSAGE_CHARS: usize = 500;

/// `SECRET_DETECTION_MODE`: what pattern masking does with credential-looking strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DetectionMode {
    /// No pattern masking (exact redaction of known secrets still applies).
    Off,
    /// Shorten each match to at most 4 leading characters and say it was masked.
    Mask,
    /// Withhold a result that contains a match, as an error of kind secret_blocked.
    Block,
}

/// `CONTENT_HYGIENE`: what the guard does with text from the forge that a person reading it
/// rendered would not see (invisible and bidirectional-control characters, HTML comments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ContentHygiene {
    /// Make them visible in place (`[U+202E]`, `[hidden comment: …]`) and count them in the
    /// envelope's `hidden_content` member.
    Mark,
    /// Remove them (a comment with its text) and count them.
    Strip,
    /// Leave forge text as it is.
    Off,
}

impl ContentHygiene {
    /// The setting's value, as written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ContentHygiene::Mark => "mark",
            ContentHygiene::Strip => "strip",
            ContentHygiene::Off => "off",
        }
    }
}

/// What the guard did to a result; each is counted once per result it happened to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A known secret was replaced by `[REDACTED]`.
    Redaction,
    /// A credential-looking string was shortened (`SECRET_DETECTION_MODE=mask`).
    Mask,
    /// The result was withheld as `secret_blocked`.
    Block,
    /// The result was cut to its bounds (it carries a `truncated` note).
    Truncation,
    /// Hidden content was marked or stripped (it carries `hidden_content`).
    HiddenContent,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 5] =
        [Action::Redaction, Action::Mask, Action::Block, Action::Truncation, Action::HiddenContent];

    /// Its name in the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Redaction => "redaction",
            Action::Mask => "mask",
            Action::Block => "block",
            Action::Truncation => "truncation",
            Action::HiddenContent => "hidden_content",
        }
    }
}

/// Whoever counts what the guard does (the server's metrics); a guard without one counts
/// nothing.
pub trait Tally: Send + Sync + std::fmt::Debug {
    /// `action` happened to one result.
    fn add(&self, action: Action);
}

/// The server-wide guard: configured secrets, mode, rules, bounds.
#[derive(Debug, Clone)]
pub struct Guard {
    redactor: Redactor,
    mode: DetectionMode,
    masker: &'static Masker,
    bounds: Bounds,
    hygiene: ContentHygiene,
    /// With masking on, one case-insensitive pass over a result's text for the rules'
    /// anchors and the secret field names. The secrets, in every spelling, are found by the
    /// call's redactor over the same text (case-sensitive, behind its literal prefilter).
    /// No hit in either — the common case — means no walk.
    scan: Arc<LazyScan>,
    /// What the guard did, for `/metrics`.
    actions: Option<Arc<dyn Tally>>,
}

/// The literals besides the secrets whose presence in a result's JSON text means the guard
/// must look closer: in `mask` and `block` modes the rules' anchors and the secret field
/// names.
fn scan_patterns(mode: DetectionMode) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if mode != DetectionMode::Off {
        out.extend(rules::RULES.iter().flat_map(|r| r.anchors.iter().map(|a| a.to_string())));
        out.extend(secrets::SECRET_FIELDS.iter().map(|k| k.to_string()));
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The scanner of a guard, built at the first result it reads (not at start).
struct LazyScan {
    patterns: Vec<String>,
    built: std::sync::OnceLock<Option<Arc<AhoCorasick>>>,
}

/// The patterns are secrets, and an automaton's states spell them: neither is shown.
impl std::fmt::Debug for LazyScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyScan")
            .field("patterns", &self.patterns.len())
            .field("built", &self.built.get().is_some())
            .finish()
    }
}

impl LazyScan {
    fn get(&self) -> Option<&AhoCorasick> {
        self.built.get_or_init(|| scanner(&self.patterns, redact::automaton_kind(&self.patterns))).as_deref()
    }
}

/// A case-insensitive scanner for `patterns`, of `kind` (see `redact.rs` for which).
fn scanner(patterns: &[String], kind: AhoCorasickKind) -> Option<Arc<AhoCorasick>> {
    (!patterns.is_empty()).then(|| {
        Arc::new(
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .kind(Some(kind))
                .build(patterns)
                .expect("literal patterns always build"),
        )
    })
}

impl Guard {
    pub fn new(secrets: Vec<String>, mode: DetectionMode, bounds: Bounds) -> Guard {
        let scan = Arc::new(LazyScan { patterns: scan_patterns(mode), built: Default::default() });
        Guard {
            redactor: Redactor::new(secrets),
            mode,
            masker: Masker::shared(),
            bounds,
            hygiene: ContentHygiene::Mark,
            scan,
            actions: None,
        }
    }

    /// This guard, counting what it does to results into `actions`.
    pub fn counted(mut self, actions: Arc<dyn Tally>) -> Guard {
        self.actions = Some(actions);
        self
    }

    fn tally(&self, action: Action) {
        if let Some(t) = &self.actions {
            t.add(action);
        }
    }

    /// This guard with `CONTENT_HYGIENE` set to `mode` (`new` marks).
    pub fn with_hygiene(mut self, mode: ContentHygiene) -> Guard {
        self.hygiene = mode;
        self
    }

    /// Exact redaction of the configured secrets only.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The guard of one call: the configured secrets plus this call's own.
    pub fn for_call(&self, call_secrets: Vec<String>) -> CallGuard {
        CallGuard {
            redactor: self.redactor.with(call_secrets),
            guard: self.clone(),
            file_bytes: false,
            whole_binary: false,
            contents: None,
        }
    }

    /// A failure outside any call (a request that could not become one), guarded with the
    /// configured secrets.
    pub fn error(&self, e: CallError) -> GuardedError {
        guard_error(&self.redactor, self, e)
    }

    /// The masker when pattern masking is on.
    fn masking(&self) -> Option<&Masker> {
        (self.mode != DetectionMode::Off).then_some(self.masker)
    }

    /// Mask a string in place when masking is on; whether it changed.
    fn mask_in_place(&self, s: &mut String) -> bool {
        if self.mode == DetectionMode::Off {
            return false;
        }
        match self.masker.mask_str(s) {
            Some(m) => {
                *s = m;
                true
            }
            None => false,
        }
    }
}

/// A result withheld because a known secret is in base64 content that is not text.
fn withheld_encoded(status: u16) -> CallError {
    CallError::from_forge(
        status,
        ErrorKind::SecretBlocked,
        "the result was withheld because a secret this server knows occurs in base64 content that is not text (or the content does not decode, so it could not be checked); fetch it without the server, or remove the secret from it",
    )
}

/// Redact and mask an error's words (errors are masked, never blocked: the status and kind
/// stay useful), then cut the message to `MAX_MESSAGE_CHARS`. The message, which can quote
/// the forge, has its hidden content marked or removed first (not counted: an error has no
/// `hidden_content` member).
fn guard_error(redactor: &Redactor, guard: &Guard, e: CallError) -> GuardedError {
    let (redacted, masked) = (std::cell::Cell::new(false), std::cell::Cell::new(false));
    let clean = |s: &str| {
        let mut out = redactor.redact_str(s);
        redacted.set(redacted.get() || out != s);
        masked.set(guard.mask_in_place(&mut out) || masked.get());
        out
    };
    let visible = |s: &str| {
        let mut counts = hygiene::Counts::default();
        hygiene::clean_str(s, guard.hygiene, redactor, guard.masking(), &mut counts)
            .unwrap_or_else(|| s.to_owned())
    };
    let guarded = GuardedError(match e {
        CallError::Result(f) => CallError::Result(ToolFailure {
            message: redact::truncate_chars(&clean(&visible(&f.message)), MAX_MESSAGE_CHARS + 200),
            // A pointer into the arguments names what the client sent: guarded the same.
            path: f.path.as_deref().map(|p| redact::truncate_chars(&clean(p), MAX_MESSAGE_CHARS)),
            ..f
        }),
        // A tool name is the client's text, as long as it made it.
        CallError::UnknownTool(name) => {
            CallError::UnknownTool(redact::truncate_chars(&clean(&name), MAX_MESSAGE_CHARS))
        }
    });
    for (done, action) in [
        (redacted.get(), Action::Redaction),
        (masked.get(), Action::Mask),
        (guarded.kind() == Some(ErrorKind::SecretBlocked), Action::Block),
    ] {
        if done {
            guard.tally(action);
        }
    }
    guarded
}

/// The guard of one call. Its redactor spells its secrets only in its automaton, which its
/// `Debug` does not show.
#[derive(Clone, Debug)]
pub struct CallGuard {
    redactor: Redactor,
    guard: Guard,
    /// The operation returns file bytes: its result is exact content, no hygiene.
    file_bytes: bool,
    /// Binary content is kept whole, beyond `MAX_TOOL_RESPONSE_CHARS` (a resource read: the
    /// client fetches it, and `MAX_BINARY_BYTES` bounded it when it was read).
    whole_binary: bool,
    /// The base64 content of the data was checked before shaping (`contents`), and whether a
    /// secret was redacted in it; `None`: `success` checks it.
    contents: Option<bool>,
}

impl CallGuard {
    /// This guard for an operation that returns file bytes (`true`): content hygiene leaves
    /// its result alone, whatever the forge sent it as.
    pub fn for_file_bytes(mut self, file_bytes: bool) -> CallGuard {
        self.file_bytes = file_bytes;
        self
    }

    /// This guard for a resource read: binary content is not held to the characters of a
    /// tool result, which bound what a model reads; the client reads a blob.
    pub fn for_resource_read(mut self) -> CallGuard {
        self.whole_binary = true;
        self
    }

    /// Known secrets in the base64 content of `data`, a JSON result of type `result` as the
    /// forge sent it (before the shape stage keeps only some members): redacted in text and
    /// encoded again, or the result withheld (`secret_blocked`) for content that is not text.
    /// `success` then leaves the content alone.
    pub fn contents(
        &mut self,
        defs: &crate::catalog::results::Definitions,
        result: Option<&crate::catalog::results::Typed>,
        status: u16,
        data: &mut Value,
    ) -> Result<(), CallError> {
        if self.redactor.secrets().is_empty() {
            self.contents = Some(false);
            return Ok(());
        }
        // A resource read checks each of its reads before the one success of them all.
        let before = self.contents.unwrap_or(false);
        match encoded::redact_typed(&self.redactor, defs, result, data) {
            encoded::Found::Clean => self.contents = Some(before),
            encoded::Found::Redacted => self.contents = Some(true),
            encoded::Found::InBinary => return Err(withheld_encoded(status)),
        }
        Ok(())
    }

    /// This guard, also knowing `more` secrets (a request body's, once the operation is known).
    pub fn with(&self, more: Vec<String>) -> CallGuard {
        if more.is_empty() {
            return self.clone();
        }
        let mut all = self.redactor.secrets().to_vec();
        all.extend(more);
        let mut g = self.guard.for_call(all).for_file_bytes(self.file_bytes);
        g.whole_binary = self.whole_binary;
        g.contents = self.contents;
        g
    }

    /// Redact, mask (or block) and bound a success; its text. `issues_credentials`: the
    /// operation exists to hand out a credential, so masking and blocking are skipped.
    /// `elided`: what the parser did not keep of the data, for the `truncated` note.
    pub fn success(
        &self,
        s: &mut Success,
        issues_credentials: bool,
        elided: &Elided,
    ) -> Result<Guarded, GuardedError> {
        let mut done = Done::default();
        let result = self.try_success(s, issues_credentials, elided, &mut done);
        done.truncated = s.truncated.is_some();
        done.count(&self.guard);
        result.map(Guarded).map_err(|e| self.error(e))
    }

    fn try_success(
        &self,
        s: &mut Success,
        issues_credentials: bool,
        elided: &Elided,
        done: &mut Done,
    ) -> Result<String, CallError> {
        // The path as sent can hold argument values; it is ours to redact, never to mask.
        let path = self.redactor.redact_str(&s.request.path);
        done.redacted |= path != s.request.path;
        s.request.path = path;
        // The login is the forge's word: guarded like data.
        if let Some(login) = &mut s.identity.login {
            let redacted = self.redactor.redact_str(login);
            done.redacted |= redacted != *login;
            *login = redacted;
            done.masked |= self.guard.mask_in_place(login);
        }
        let mut text = s.to_text();
        // The rest that comes from the forge is `data` (and `truncated`): scan from the `data`
        // member on, so the envelope's own words (`"mode":"token"`) do not count as hits. A
        // raw `,"data":` cannot occur inside an earlier string, where quotes are escaped.
        let from = text.find(",\"data\":").unwrap_or(0);
        // File contents come base64-encoded, where no text scan sees a secret (checked before
        // shaping when the caller did, `contents`).
        if let Some(redacted) = self.contents {
            done.redacted |= redacted;
        } else if bound::binary_size(&s.data).is_some() {
            // Binary content as decoding gives it: its bytes were checked before they were
            // encoded (`binary`), and decoding its base64 again would hold it twice more.
        } else if !self.redactor.secrets().is_empty() && encoded::may_hold(&text[from..]) {
            match encoded::redact(&self.redactor, &mut s.data) {
                encoded::Found::Clean => {}
                encoded::Found::Redacted => {
                    done.redacted = true;
                    text = s.to_text();
                }
                encoded::Found::InBinary => return Err(withheld_encoded(s.status)),
            }
        }
        // Hidden content first, so that redaction and masking see the text as it leaves.
        if self.guard.hygiene != ContentHygiene::Off && !self.file_bytes && hygiene::may_hold(&text[from..]) {
            let masker = if issues_credentials { None } else { self.guard.masking() };
            let found = hygiene::clean_value(&mut s.data, self.guard.hygiene, &self.redactor, masker);
            if found.any() {
                done.hidden = true;
                s.hidden_content = Some(HiddenContent {
                    characters: found.characters,
                    comments: found.comments,
                    mode: self.guard.hygiene.as_str(),
                });
                text = s.to_text();
            }
        }
        if self.hit(&text[from..]) {
            done.redacted |= self.redactor.redact_value(&mut s.data);
            if !issues_credentials {
                match self.guard.mode {
                    DetectionMode::Off => {}
                    DetectionMode::Mask => {
                        done.masked |= self.guard.masker.mask_value(&mut s.data) > 0;
                    }
                    DetectionMode::Block => {
                        let kinds = self.guard.masker.kinds_in_value(&s.data);
                        if !kinds.is_empty() {
                            let kinds: Vec<&str> = kinds.into_iter().collect();
                            return Err(CallError::from_forge(
                                s.status,
                                ErrorKind::SecretBlocked,
                                format!(
                                    "the result was withheld because it contains what looks like a secret ({}); SECRET_DETECTION_MODE=block",
                                    kinds.join(", ")
                                ),
                            ));
                        }
                    }
                }
            }
            text = s.to_text();
        }
        // The parser named the lists it cut by their keys as the forge sent them.
        let elided = self.cleaned(elided);
        if self.whole_binary && bound::binary_size(&s.data).is_some() {
            return Ok(text);
        }
        bound::fit(s, self.guard.bounds, text, &elided)
    }

    /// What the parser left out, its pointers guarded like data (a key can be a secret).
    fn cleaned(&self, elided: &Elided) -> Elided {
        let mut out = elided.clone();
        for cut in &mut out.cuts {
            cut.pointer = self.pointer(&cut.pointer);
            self.guard.mask_in_place(&mut cut.pointer);
        }
        out
    }

    /// A pointer the parser built from the forge's keys, redacted segment by segment in its
    /// unescaped form (a secret holding `/` or `~` is spelled `~1`/`~0` in a pointer). A
    /// pointer cut short (`…`) may end in the first part of a secret: that goes too.
    fn pointer(&self, pointer: &str) -> String {
        let (whole, cut) = match pointer.strip_suffix('…') {
            Some(p) => (p, true),
            None => (pointer, false),
        };
        let segments: Vec<&str> = whole.split('/').collect();
        let last = segments.len() - 1;
        let mut out: Vec<String> = Vec::with_capacity(segments.len());
        for (i, segment) in segments.into_iter().enumerate() {
            let raw = segment.replace("~1", "/").replace("~0", "~");
            let mut redacted = self.redactor.redact_str(&raw);
            if cut && i == last {
                redacted = self.redactor.redact_cut_tail(&redacted);
            }
            out.push(crate::error::pointer_segment(&redacted));
        }
        let mut out = out.join("/");
        if cut {
            out.push('…');
        }
        out
    }

    /// The answer of a built-in tool (the discovery tools: spec text and names, no forge
    /// data): redacted (a query can carry a secret), masked but never withheld, and bounded.
    pub fn answer(&self, value: Value) -> Result<Guarded, GuardedError> {
        let mut a = bound::Answer { value, truncated: None };
        let mut done = Done::default();
        let text = a.text_now();
        if self.hit(&text) {
            done.redacted = self.redactor.redact_value(&mut a.value);
            if self.guard.mode != DetectionMode::Off {
                done.masked = self.guard.masker.mask_value(&mut a.value) > 0;
            }
        }
        let text = a.text_now();
        let result = bound::fit(&mut a, self.guard.bounds, text, &Elided::default());
        done.truncated = a.truncated.is_some();
        done.count(&self.guard);
        result.map(Guarded).map_err(|e| self.error(e))
    }

    /// Binary content may not leave when a known secret occurs in its bytes: it cannot be
    /// redacted without corrupting it, and its base64 would carry the secret.
    pub fn binary(&self, status: u16, bytes: &[u8]) -> Result<(), CallError> {
        if self.redactor.occurs_in(bytes) {
            return Err(CallError::from_forge(
                status,
                ErrorKind::SecretBlocked,
                "the binary content was withheld because a secret this server knows occurs in it; fetch it without the server, or remove the secret from it",
            ));
        }
        Ok(())
    }

    /// Whether a text may hold something the walks act on: a secret of this call in any
    /// spelling (the redactor's own search), an anchor or secret field name (the scan), or —
    /// when there are secrets to find — a backslash inside a string (written `\\` in JSON
    /// text), which may begin an escape that spells one. The backslash is looked for on its
    /// own, with a vectorised search: as a pattern of the scanners it made every scan twice as
    /// slow.
    fn hit(&self, t: &str) -> bool {
        self.redactor.occurs_in(t.as_bytes())
            || self.guard.scan.get().is_some_and(|a| a.is_match(t))
            || (!self.redactor.secrets().is_empty() && memchr::memmem::find(t.as_bytes(), br"\\").is_some())
    }

    /// A failed call, guarded with this call's secrets.
    pub fn error(&self, e: CallError) -> GuardedError {
        guard_error(&self.redactor, &self.guard, e)
    }

    /// Exact redaction with this call's secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }
}

/// What the guard did to one result, each counted once.
#[derive(Default)]
struct Done {
    redacted: bool,
    masked: bool,
    hidden: bool,
    truncated: bool,
}

impl Done {
    fn count(&self, guard: &Guard) {
        for (done, action) in [
            (self.redacted, Action::Redaction),
            (self.masked, Action::Mask),
            (self.hidden, Action::HiddenContent),
            (self.truncated, Action::Truncation),
        ] {
            if done {
                guard.tally(action);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use crate::envelope::{RequestInfo, untrusted_notice};
    use crate::identity::{Identity, Mode};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    const SECRETS: [&str; 4] =
        ["Zq7GLOBALtok3n0x", "Xc9EXTRAsecr3tVv", "Pw4BODYfield99Kk", "Ac2CALLERtokenQz"];

    fn guard(mode: DetectionMode, max_items: usize, max_chars: usize) -> CallGuard {
        Guard::new(vec![SECRETS[0].into(), SECRETS[1].into()], mode, Bounds { max_items, max_chars })
            .for_call(vec![SECRETS[2].into(), SECRETS[3].into()])
    }

    fn success(data: Value) -> Success {
        Success {
            identity: Identity { login: Some("alice".into()), mode: Mode::Token, sudo: None },
            forge: None,
            request: RequestInfo { method: "GET", path: "/repos/o/r/issues".into() },
            status: 200,
            pagination: None,
            untrusted_content: untrusted_notice(Flavor::Gitea),
            shape: None,
            data,
            link: None,
            truncated: None,
            hidden_content: None,
            filtered: None,
            withheld: None,
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-zA-Z0-9 _./:-]{0,40}".prop_map(Value::String),
            "[a-z]{0,3}".prop_map(|s| Value::String(s.repeat(400))),
        ];
        leaf.prop_recursive(6, 120, 12, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,10}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Put `secret` somewhere in `v`: as a value, as a key, or inside a longer string,
    /// at the position chosen by `path` (a sequence of choices).
    fn insert(v: &mut Value, secret: &str, how: u8, path: &[usize]) {
        if let Some((&p, rest)) = path.split_first() {
            match v {
                Value::Array(a) if !a.is_empty() => {
                    let n = a.len();
                    return insert(&mut a[p % n], secret, how, rest);
                }
                Value::Object(m) if !m.is_empty() => {
                    let n = m.len();
                    let key = m.keys().nth(p % n).unwrap().clone();
                    return insert(m.get_mut(&key).unwrap(), secret, how, rest);
                }
                _ => {}
            }
        }
        match (v, how % 3) {
            (Value::Object(m), 0) => {
                m.insert(format!("k-{secret}-k"), json!(1));
            }
            (Value::Array(a), 0) => a.push(json!({ secret: "v" })),
            (Value::String(s), 1) => s.push_str(&format!(" and {secret} inside")),
            (slot, _) => *slot = json!(format!("x{secret}y")),
        }
    }

    /// A secret as written in a string: as is, every character JSON-escaped, or some; every
    /// byte percent-encoded (upper- or lower-case hex); or base64-encoded between neighbouring
    /// bytes that put it at each alignment, in either alphabet.
    fn spell(secret: &str, how: u8) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        match how % 6 {
            0 => secret.to_owned(),
            1 => secret.chars().map(|c| format!("\\u{:04x}", c as u32)).collect(),
            2 => secret
                .chars()
                .enumerate()
                .map(|(i, c)| if i % 2 == 0 { format!("\\u{:04X}", c as u32) } else { c.to_string() })
                .collect(),
            3 => secret.bytes().map(|b| format!("%{b:02X}")).collect(),
            4 => secret.bytes().map(|b| format!("%{b:02x}")).collect(),
            _ => {
                let stream = format!("{}{secret}\u{1}", &"<?>"[..usize::from(how / 6 % 3)]);
                if (how / 18).is_multiple_of(2) {
                    STANDARD.encode(stream)
                } else {
                    URL_SAFE_NO_PAD.encode(stream)
                }
            }
        }
    }

    /// Every base64 reading of `s`: each run of one alphabet's characters, decoded from each of
    /// its first four positions (a partial last group dropped), in both alphabets.
    fn base64_readings(s: &str) -> Vec<Vec<u8>> {
        use base64::Engine;
        use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
        let mut out = Vec::new();
        for (engine, extra) in [(STANDARD_NO_PAD, "+/"), (URL_SAFE_NO_PAD, "-_")] {
            for run in s.split(|c: char| !(c.is_ascii_alphanumeric() || extra.contains(c))) {
                for from in 0..run.len().min(4) {
                    let body = &run[from..];
                    if let Ok(bytes) = engine.decode(&body[..body.len() / 4 * 4]) {
                        out.push(bytes);
                    }
                }
            }
        }
        out
    }

    /// No known secret in the text, in any spelling a reader would decode: as is, and in every
    /// string of the parsed JSON read with its escapes, base64 content decoded.
    fn assert_no_secret(text: &str) -> Result<(), TestCaseError> {
        for secret in SECRETS {
            prop_assert!(!text.contains(secret), "{secret} in {text}");
        }
        let parsed: Value = serde_json::from_str(text).unwrap();
        let mut stack = vec![&parsed];
        while let Some(v) = stack.pop() {
            let mut strings: Vec<&str> = Vec::new();
            match v {
                Value::String(s) => strings.push(s),
                Value::Array(a) => stack.extend(a.iter()),
                Value::Object(m) => {
                    strings.extend(m.keys().map(String::as_str));
                    stack.extend(m.values());
                }
                _ => {}
            }
            for s in strings {
                let read = unescape::read(s);
                let percent = percent_encoding::percent_decode_str(&read).decode_utf8_lossy();
                let decoded = base64_readings(&read);
                for secret in SECRETS {
                    prop_assert!(!read.contains(secret), "{secret} spelled in {s:?}");
                    prop_assert!(!percent.contains(secret), "{secret} percent-encoded in {s:?}");
                    prop_assert!(
                        !decoded.iter().any(|d| d.windows(secret.len()).any(|w| w == secret.as_bytes())),
                        "{secret} in base64 {s:?}"
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// The guard over whole envelopes: a secret anywhere — in data (as is or spelled with
        /// escapes), in the forge's login, in the path as sent — never comes out, and the text
        /// is valid JSON within the bounds.
        #[test]
        fn no_secret_survives_and_the_text_is_valid_json_within_bounds(
            data in arb_json(),
            which in 0usize..4,
            how in any::<u8>(),
            spelling in any::<u8>(),
            path in prop::collection::vec(any::<usize>(), 0..6),
            in_login in any::<bool>(),
            in_path in any::<bool>(),
            max_items in 1usize..30,
            max_chars in 2_000usize..30_000,
            mode in prop_oneof![Just(DetectionMode::Off), Just(DetectionMode::Mask), Just(DetectionMode::Block)],
        ) {
            let mut data = data;
            insert(&mut data, &spell(SECRETS[which], spelling), how, &path);
            let g = guard(mode, max_items, max_chars);
            let mut s = success(data);
            if in_login {
                s.identity.login = Some(format!("ali{}ce", SECRETS[(which + 1) % 4]));
            }
            if in_path {
                s.request.path = format!("/repos/o/{}", SECRETS[(which + 2) % 4]);
            }
            let text = match g.success(&mut s, false, &Elided::default()) {
                Ok(text) => text.into_string(),
                Err(e) => match e.into_error() {
                    CallError::Result(f) => crate::envelope::error_text(&f),
                    other => panic!("{other}"),
                },
            };
            assert_no_secret(&text)?;
            prop_assert!(text.chars().count() <= max_chars, "{} > {max_chars}", text.chars().count());
        }

        #[test]
        fn no_secret_survives_in_error_messages(which in 0usize..4, spelling in any::<u8>(), prefix in ".{0,600}", suffix in ".{0,600}") {
            let g = guard(DetectionMode::Mask, 100, 100_000);
            let secret = spell(SECRETS[which], spelling);
            let f = ToolFailure { status: Some(500), kind: ErrorKind::UpstreamError, message: format!("{prefix}{secret}{suffix}"), path: Some(format!("/{secret}")), retry_after: None };
            let text = match g.error(CallError::Result(f)).into_error() {
                CallError::Result(f) => crate::envelope::error_text(&f),
                other => panic!("{other}"),
            };
            assert_no_secret(&text)?;
        }

        /// Built-in answers pass the same guard: redacted, and within the char bound.
        #[test]
        fn built_in_answers_are_redacted_and_bounded(data in arb_json(), which in 0usize..4, spelling in any::<u8>(), how in any::<u8>(), max_chars in 2_000usize..8_000) {
            let mut data = json!({"results": [data]});
            insert(&mut data, &spell(SECRETS[which], spelling), how, &[0, 0]);
            let g = guard(DetectionMode::Block, 100, max_chars);
            let text = g.answer(data).unwrap().into_string();
            assert_no_secret(&text)?;
            prop_assert!(text.chars().count() <= max_chars);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// The decoder over arbitrary bytes and media types, then the guard, as a call runs
        /// them: no panic, and no known secret in what comes out, whatever the bytes around
        /// it (stray non-UTF-8 bytes, JSON that does not parse, escapes).
        #[test]
        fn decoded_bodies_never_carry_a_known_secret_out(
            before in prop::collection::vec(any::<u8>(), 0..200),
            after in prop::collection::vec(any::<u8>(), 0..200),
            which in 0usize..4,
            spelling in any::<u8>(),
            as_json in any::<bool>(),
            media in prop_oneof![
                Just(None), Just(Some("application/json")), Just(Some("text/plain; charset=utf-8")),
                Just(Some("application/octet-stream")), Just(Some("application/zip")), Just(Some("text/html")),
            ],
            expect in prop_oneof![
                Just(crate::catalog::ResponseKind::Json), Just(crate::catalog::ResponseKind::Text),
                Just(crate::catalog::ResponseKind::Binary),
            ],
        ) {
            use crate::decode::body::{Decoded, decode};
            let secret = spell(SECRETS[which], spelling);
            let mut bytes = before;
            if as_json {
                bytes.extend_from_slice(format!("{{\"k\": \"{secret}\"}}").as_bytes());
            } else {
                bytes.extend_from_slice(secret.as_bytes());
            }
            bytes.extend(after);
            let g = guard(DetectionMode::Off, 100, 100_000);
            let keep = crate::decode::json::Keep { items: 100, values: 100_000 };
            let (decoded, _) = decode(expect, media, bytes, keep);
            if let Decoded::Binary { bytes, .. } = &decoded {
                if g.binary(200, bytes).is_err() {
                    return Ok(());
                }
            }
            let mut s = success(decoded.into_data());
            let text = match g.success(&mut s, false, &Elided::default()) {
                Ok(t) => t.into_string(),
                Err(e) => match e.into_error() {
                    CallError::Result(f) => crate::envelope::error_text(&f),
                    other => panic!("{other}"),
                },
            };
            assert_no_secret(&text)?;
        }
    }

    #[test]
    fn lists_the_parser_cut_are_named_without_the_secrets_in_their_keys() {
        use crate::decode::json::{Keep, parse};
        for (i, secret) in SECRETS.iter().enumerate() {
            let text = format!(
                r#"{{"{secret}": [1,2,3,4,5], "k": {{"x{}y": [1,2,3]}}}}"#,
                spell(secret, i as u8 + 1)
            );
            let parsed = parse(&text, Keep { items: 2, values: 100 }).unwrap();
            assert_eq!(parsed.elided.cuts.len(), 2);
            let g = guard(DetectionMode::Mask, 2, 100_000);
            let mut s = success(parsed.value);
            let out = g.success(&mut s, false, &parsed.elided).unwrap().into_string();
            assert_no_secret(&out).unwrap();
            assert!(out.contains("\"returned\":2,\"total\":5"), "{out}");
        }
    }

    /// A secret spelled with `/` or `~` (escaped `~1`/`~0` in a pointer) and a secret that a
    /// pointer cut at its length limit leaves only the first part of are both redacted.
    #[test]
    fn cut_pointers_hold_no_secret_escaped_or_cut_short() {
        use crate::decode::json::{Keep, MAX_POINTER_CHARS, parse};
        let slashed = "ab/cd~ef+Gh7/Ij9Kk";
        let long = "Lq8LONGsecretThatCrossesTheCutOfThePointer0123456789";
        let g = Guard::new(
            vec![slashed.into(), long.into()],
            DetectionMode::Mask,
            Bounds { max_items: 2, max_chars: 100_000 },
        )
        .for_call(Vec::new());
        let pad = "p".repeat(MAX_POINTER_CHARS - 20);
        for key in [format!("x{slashed}y"), format!("{pad}{long}")] {
            let text = format!(r#"{{"{key}": [1,2,3,4,5]}}"#);
            let parsed = parse(&text, Keep { items: 2, values: 100 }).unwrap();
            let pointer = &parsed.elided.cuts[0].pointer;
            let mut s = success(parsed.value);
            let out = g.success(&mut s, false, &parsed.elided).unwrap().into_string();
            assert!(out.contains("\"returned\":2,\"total\":5"), "{out}");
            for leak in ["cd~0ef", "ab~1cd", "Lq8LONG", "cd~ef"] {
                assert!(!out.contains(leak), "{leak} in {out} (pointer {pointer})");
            }
            assert!(out.contains(REDACTED_MARK), "{out}");
        }
    }

    const REDACTED_MARK: &str = "[REDACTED]";

    #[test]
    fn binary_content_holding_a_known_secret_is_withheld() {
        let g = guard(DetectionMode::Off, 100, 100_000);
        for secret in SECRETS {
            let mut bytes = vec![0xff, 0x00, 0x89];
            bytes.extend_from_slice(secret.as_bytes());
            bytes.push(0xfe);
            let e = g.binary(200, &bytes).unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::SecretBlocked));
            assert!(!e.to_string().contains(secret));
        }
        g.binary(200, &[0xff, 0x00, b'a', b'b']).unwrap();
    }

    #[test]
    fn credential_results_skip_masking_and_blocking_but_not_redaction() {
        for mode in [DetectionMode::Mask, DetectionMode::Block] {
            let g = guard(mode, 100, 100_000);
            let mut s = success(
                json!({"client_secret": "gto_brandnewsecretvalue", "note": format!("by {}", SECRETS[3])}),
            );
            let text = g.success(&mut s, true, &Elided::default()).unwrap().into_string();
            assert!(text.contains("gto_brandnewsecretvalue"));
            assert_eq!(s.data["client_secret"], "gto_brandnewsecretvalue");
            assert_eq!(s.data["note"], "by [REDACTED]");
        }
    }

    #[test]
    fn secrets_that_json_escapes_are_still_found_by_the_fast_scan() {
        let tricky = "quo\"te\\back\nslash-secret";
        let g = Guard::new(
            vec![tricky.into()],
            DetectionMode::Off,
            Bounds { max_items: 100, max_chars: 100_000 },
        )
        .for_call(vec!["call\"secret\\x".into()]);
        let mut s = success(json!({"a": format!("x{tricky}y"), "b": "call\"secret\\x"}));
        let text = g.success(&mut s, false, &Elided::default()).unwrap().into_string();
        assert_eq!(s.data, json!({"a": "x[REDACTED]y", "b": "[REDACTED]"}), "{text}");
    }

    #[test]
    fn a_guard_printed_for_debugging_shows_no_secret_in_any_form() {
        let bounds = Bounds { max_items: 1, max_chars: 2000 };
        let printed = |configured: &str, caller: &str| {
            let g = Guard::new(vec![configured.into()], DetectionMode::Mask, bounds);
            let c = g.for_call(vec![caller.into()]);
            // Build the lazy automata too: their states spell their patterns.
            let _ = c.guard.scan.get();
            let _ = c.redactor.occurs_in(b"");
            format!("{c:?}")
        };
        let one = printed("Zq9Xw7Vk-configured", "Callersecret-77");
        for s in ["Zq9Xw7Vk", "Callersecret"] {
            assert!(!one.contains(s), "{s} in {one}");
        }
        // Nothing that depends on the secrets' text: other secrets of the same shape print alike.
        assert_eq!(one, printed("Ab1Cd2Ef-configured", "Otherssecret-42"));
    }

    #[test]
    fn secrets_are_found_by_the_calls_redactor_and_the_scan_holds_only_anchors() {
        // The scan is built from the rules' anchors and field names alone, whatever the
        // secrets (their automata, NFAs when long or of one call, are the redactor's).
        let long = "A".repeat(1 << 20);
        let bounds = Bounds { max_items: 1, max_chars: 2000 };
        let g = Guard::new(vec![long.clone()], DetectionMode::Mask, bounds);
        assert_eq!(g.scan.get().unwrap().kind(), AhoCorasickKind::DFA);
        assert!(Guard::new(vec![long.clone()], DetectionMode::Off, bounds).scan.get().is_none());
        let c = g.for_call(vec!["Ca11er-t0ken-9".into()]);
        let percent: String = "Ca11er-t0ken-9".bytes().map(|b| format!("%{b:02x}")).collect();
        for text in [format!("x{long}y"), "a Ca11er-t0ken-9 b".to_owned(), percent] {
            assert!(c.hit(&text), "{}", &text[..20]);
        }
        assert!(!Guard::new(vec![long], DetectionMode::Off, bounds).for_call(Vec::new()).hit("plain words"));
    }

    #[test]
    fn the_envelope_itself_does_not_trigger_the_walk() {
        let g = guard(DetectionMode::Mask, 100, 100_000);
        let s = success(json!([{"title": "plain words"}]));
        let text = s.to_text();
        let from = text.find(",\"data\":").unwrap();
        assert!(text[..from].contains("\"mode\":\"token\""));
        assert!(!g.hit(&text[from..]));
    }

    #[test]
    fn block_mode_names_kinds_not_values() {
        let g = guard(DetectionMode::Block, 100, 100_000);
        let mut s = success(
            json!({"body": "key AKIAIOSFODNN7EXAMPLE", "sha": "0123456789abcdef0123456789abcdef01234567"}),
        );
        let e = g.success(&mut s, false, &Elided::default()).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::SecretBlocked));
        let msg = e.to_string();
        assert!(msg.contains("aws_access_key_id") && !msg.contains("AKIAIOSFODNN7EXAMPLE"), "{msg}");
        let mut clean = success(json!({"sha": "0123456789abcdef0123456789abcdef01234567"}));
        g.success(&mut clean, false, &Elided::default()).unwrap();
    }
}
