//! The guard: every result — success and error, generated tools and built-in ones alike —
//! passes here after decoding and before it is sent, in this order:
//!
//! 1. exact redaction (always on): every secret the server knows, plus the caller's token and
//!    the secrets this call's body carried, become `[REDACTED]` in strings and keys;
//! 2. pattern masking (`SECRET_DETECTION_MODE`): `off` skips it, `mask` shortens
//!    credential-looking strings, `block` withholds the result as `secret_blocked`;
//!    successful results of credential-issuing operations skip this step;
//! 3. bounds (`MAX_TOOL_RESPONSE_ITEMS`, `MAX_TOOL_RESPONSE_CHARS`).
//!
//! Log lines go through steps 1 and 2 as well (`log.rs`).

pub mod bound;
pub mod credential_ops;
pub mod log;
pub mod mask;
pub mod redact;
pub mod rules;
pub mod secrets;

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind};

use secrecy::ExposeSecret;

pub use bound::Bounds;
pub use mask::Masker;
pub use redact::Redactor;

use crate::config::{DetectionMode, Settings};
use crate::envelope::Success;
use crate::error::{CallError, ErrorKind, ToolFailure};

/// Longest forge message kept in an error result, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// The configured secrets: global token, MCP bearer token, OAuth client secret, extra secrets.
pub fn configured_secrets(settings: &Settings) -> Vec<String> {
    let mut out: Vec<String> = [&settings.token, &settings.mcp_bearer_token, &settings.oauth_client_secret]
        .into_iter()
        .flatten()
        .map(|s| s.expose_secret().to_owned())
        .collect();
    out.extend(settings.extra_secrets.iter().map(|s| s.expose_secret().to_owned()));
    out
}

/// The server-wide guard: configured secrets, mode, rules, bounds.
#[derive(Debug, Clone)]
pub struct Guard {
    redactor: Redactor,
    mode: DetectionMode,
    masker: Arc<Masker>,
    bounds: Bounds,
    /// One case-insensitive pass over a result's text that finds everything the walks
    /// below could act on: the configured secrets (also as JSON escapes them), the rules'
    /// anchors and the secret field names. No hit — the common case — means no walk.
    scan: Option<Arc<AhoCorasick>>,
}

/// The literals whose presence in a result's JSON text means the guard must look closer.
fn scan_patterns(secrets: &[String], mode: DetectionMode) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in secrets {
        out.push(s.clone());
        // Inside JSON text a secret with `"`, `\` or control characters appears escaped.
        let escaped = serde_json::to_string(s).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        if escaped != s {
            out.push(escaped.to_owned());
        }
    }
    if mode != DetectionMode::Off {
        out.extend(rules::RULES.iter().flat_map(|r| r.anchors.iter().map(|a| a.to_string())));
        out.extend(secrets::SECRET_FIELDS.iter().map(|k| k.to_string()));
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A case-insensitive scanner for `patterns`; a contiguous NFA, whose construction stays
/// linear in the patterns (see `redact.rs`).
fn scanner(patterns: &[String]) -> Option<Arc<AhoCorasick>> {
    (!patterns.is_empty()).then(|| {
        Arc::new(
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .kind(Some(AhoCorasickKind::ContiguousNFA))
                .build(patterns)
                .expect("literal patterns always build"),
        )
    })
}

impl Guard {
    pub fn new(secrets: Vec<String>, mode: DetectionMode, bounds: Bounds) -> Guard {
        let scan = scanner(&scan_patterns(&secrets, mode));
        Guard { redactor: Redactor::new(secrets), mode, masker: Arc::new(Masker::new()), bounds, scan }
    }

    pub fn from_settings(settings: &Settings) -> Guard {
        Guard::new(
            configured_secrets(settings),
            settings.secret_detection,
            Bounds {
                max_items: settings.max_tool_response_items,
                max_chars: settings.max_tool_response_chars,
            },
        )
    }

    /// Exact redaction of the configured secrets only.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn masker(&self) -> &Arc<Masker> {
        &self.masker
    }

    /// The guard of one call: the configured secrets plus this call's own.
    pub fn for_call(&self, call_secrets: Vec<String>) -> CallGuard {
        let new: Vec<String> = call_secrets
            .into_iter()
            .filter(|s| !s.is_empty() && !self.redactor.secrets().contains(s))
            .collect();
        let extra_scan = scanner(&scan_patterns(&new, DetectionMode::Off));
        CallGuard { redactor: self.redactor.with(new), guard: self.clone(), extra_scan }
    }
}

/// The guard of one call.
#[derive(Debug, Clone)]
pub struct CallGuard {
    redactor: Redactor,
    guard: Guard,
    extra_scan: Option<Arc<AhoCorasick>>,
}

impl CallGuard {
    /// Redact, mask (or block), bound a success, and return its text. `issues_credentials`:
    /// the operation exists to hand out a credential, so masking and blocking are skipped.
    pub fn success(&self, s: &mut Success, issues_credentials: bool) -> Result<String, CallError> {
        // The path as sent can hold argument values; it is ours to redact, never to mask.
        s.request.path = self.redactor.redact_str(&s.request.path);
        let mut text = s.to_text();
        // Only `data` (and `truncated`) come from the forge: scan from the `data` member on,
        // so the envelope's own words (`"mode":"token"`) do not count as hits. A raw `,"data":`
        // cannot occur inside an earlier string, where quotes are escaped.
        let from = text.find(",\"data\":").unwrap_or(0);
        let hit = |t: &str| {
            self.guard.scan.as_ref().is_some_and(|a| a.is_match(t))
                || self.extra_scan.as_ref().is_some_and(|a| a.is_match(t))
        };
        if hit(&text[from..]) {
            self.redactor.redact_value(&mut s.data);
            if !issues_credentials {
                match self.guard.mode {
                    DetectionMode::Off => {}
                    DetectionMode::Mask => {
                        self.guard.masker.mask_value(&mut s.data);
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
        bound::fit(s, self.guard.bounds, text)
    }

    /// Redact and mask an error's message (errors are masked, never blocked: the status and
    /// kind stay useful), then cut it to `MAX_MESSAGE_CHARS`.
    pub fn failure(&self, mut f: ToolFailure) -> ToolFailure {
        let mut msg = self.redactor.redact_str(&f.message);
        if self.guard.mode != DetectionMode::Off {
            if let Some(m) = self.guard.masker.mask_str(&msg) {
                msg = m;
            }
        }
        f.message = redact::truncate_chars(&msg, MAX_MESSAGE_CHARS + 200);
        f
    }

    /// The same for a `CallError` (an unknown tool's name is redacted too).
    pub fn error(&self, e: CallError) -> CallError {
        match e {
            CallError::Result(f) => CallError::Result(self.failure(f)),
            CallError::UnknownTool(name) => CallError::UnknownTool(self.redactor.redact_str(&name)),
        }
    }

    /// Exact redaction with this call's secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
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
            request: RequestInfo { method: "GET", path: "/repos/o/r/issues".into() },
            status: 200,
            pagination: None,
            untrusted_content: untrusted_notice(Flavor::Gitea),
            data,
            truncated: None,
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

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        #[test]
        fn no_secret_survives_and_the_text_is_valid_json_within_bounds(
            data in arb_json(),
            which in 0usize..4,
            how in any::<u8>(),
            path in prop::collection::vec(any::<usize>(), 0..6),
            max_items in 1usize..30,
            max_chars in 2_000usize..30_000,
            mode in prop_oneof![Just(DetectionMode::Off), Just(DetectionMode::Mask), Just(DetectionMode::Block)],
        ) {
            let mut data = data;
            insert(&mut data, SECRETS[which], how, &path);
            let g = guard(mode, max_items, max_chars);
            let mut s = success(data);
            let text = match g.success(&mut s, false) {
                Ok(text) => text,
                Err(e) => match g.error(e) {
                    CallError::Result(f) => crate::envelope::error_text(&f),
                    other => panic!("{other}"),
                },
            };
            for secret in SECRETS {
                prop_assert!(!text.contains(secret), "{secret} in {text}");
            }
            let parsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(parsed.is_object());
            prop_assert!(text.chars().count() <= max_chars, "{} > {max_chars}", text.chars().count());
        }

        #[test]
        fn no_secret_survives_in_error_messages(which in 0usize..4, prefix in ".{0,600}", suffix in ".{0,600}") {
            let g = guard(DetectionMode::Mask, 100, 100_000);
            let f = ToolFailure { status: Some(500), kind: ErrorKind::UpstreamError, message: format!("{prefix}{}{suffix}", SECRETS[which]), path: None };
            let text = crate::envelope::error_text(&g.failure(f));
            for secret in SECRETS {
                prop_assert!(!text.contains(secret));
            }
        }
    }

    #[test]
    fn credential_results_skip_masking_and_blocking_but_not_redaction() {
        for mode in [DetectionMode::Mask, DetectionMode::Block] {
            let g = guard(mode, 100, 100_000);
            let mut s = success(
                json!({"client_secret": "gto_brandnewsecretvalue", "note": format!("by {}", SECRETS[3])}),
            );
            let text = g.success(&mut s, true).unwrap();
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
        let text = g.success(&mut s, false).unwrap();
        assert_eq!(s.data, json!({"a": "x[REDACTED]y", "b": "[REDACTED]"}), "{text}");
    }

    #[test]
    fn scanners_from_secrets_are_nfas() {
        let long = "A".repeat(1 << 20);
        let g = Guard::new(vec![long.clone()], DetectionMode::Mask, Bounds { max_items: 1, max_chars: 2000 });
        assert_eq!(g.scan.as_ref().unwrap().kind(), AhoCorasickKind::ContiguousNFA);
        let c = g.for_call(vec!["C".repeat(1 << 16)]);
        assert_eq!(c.extra_scan.as_ref().unwrap().kind(), AhoCorasickKind::ContiguousNFA);
    }

    #[test]
    fn the_envelope_itself_does_not_trigger_the_walk() {
        let g = guard(DetectionMode::Mask, 100, 100_000);
        let s = success(json!([{"title": "plain words"}]));
        let text = s.to_text();
        let from = text.find(",\"data\":").unwrap();
        assert!(text[..from].contains("\"mode\":\"token\""));
        assert!(!g.guard.scan.as_ref().unwrap().is_match(&text[from..]));
    }

    #[test]
    fn block_mode_names_kinds_not_values() {
        let g = guard(DetectionMode::Block, 100, 100_000);
        let mut s = success(
            json!({"body": "key AKIAIOSFODNN7EXAMPLE", "sha": "0123456789abcdef0123456789abcdef01234567"}),
        );
        let e = g.success(&mut s, false).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::SecretBlocked));
        let msg = e.to_string();
        assert!(msg.contains("aws_access_key_id") && !msg.contains("AKIAIOSFODNN7EXAMPLE"), "{msg}");
        let mut clean = success(json!({"sha": "0123456789abcdef0123456789abcdef01234567"}));
        g.success(&mut clean, false).unwrap();
    }
}
