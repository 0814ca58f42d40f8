//! Pattern masking: credential-looking strings found by the rules of `rules.rs`.
//!
//! One case-insensitive literal automaton over the rules' anchors decides which rules can
//! match a string at all; only those rules' regexes run. Strings without an anchor — almost
//! all of them — cost one automaton pass. A rule's regex is compiled when its anchor is
//! first seen, so a process that never meets a credential-looking string never compiles one.

use std::collections::BTreeSet;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Captures, Regex};
use serde_json::{Map, Value};

use super::rules::{RULES, Rule, SECRET_FIELD_MIN_LEN, SECRET_FIELD_RULE};
use super::secrets::is_secret_key;

/// The compiled rules.
#[derive(Debug)]
pub struct Masker {
    rules: Vec<(Rule, OnceLock<Regex>)>,
    anchors: AhoCorasick,
    /// anchor pattern index → rule index
    anchor_rule: Vec<usize>,
}

impl Default for Masker {
    fn default() -> Self {
        Masker::new()
    }
}

impl Masker {
    /// The masker of this process: the rules are a constant table, compiled once.
    pub fn shared() -> &'static Masker {
        static SHARED: LazyLock<Masker> = LazyLock::new(Masker::new);
        &SHARED
    }

    /// Build the anchors of the table; each rule's regex waits for its first candidate.
    pub(crate) fn new() -> Masker {
        let rules = RULES.iter().map(|r| (*r, OnceLock::new())).collect();
        let mut anchor_rule = Vec::new();
        let mut anchors = Vec::new();
        for (i, r) in RULES.iter().enumerate() {
            for a in r.anchors {
                anchors.push(*a);
                anchor_rule.push(i);
            }
        }
        let anchors = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&anchors)
            .expect("anchors build");
        Masker { rules, anchors, anchor_rule }
    }

    /// Rule `i` and its regex, compiled at its first use.
    fn rule(&self, i: usize) -> (&Rule, &Regex) {
        let (rule, re) = &self.rules[i];
        (rule, re.get_or_init(|| Regex::new(rule.pattern).expect("rules compile (tested)")))
    }

    /// The rules whose anchors occur in `s`, in table order.
    fn candidates(&self, s: &str) -> Vec<usize> {
        let mut hit = vec![false; self.rules.len()];
        let mut any = false;
        for m in self.anchors.find_overlapping_iter(s) {
            hit[self.anchor_rule[m.pattern().as_usize()]] = true;
            any = true;
        }
        if !any {
            return Vec::new();
        }
        hit.iter().enumerate().filter(|(_, h)| **h).map(|(i, _)| i).collect()
    }

    /// Mask every match in `s`; `None` when nothing matched.
    pub fn mask_str(&self, s: &str) -> Option<String> {
        let candidates = self.candidates(s);
        if candidates.is_empty() {
            return None;
        }
        let mut out: Option<String> = None;
        for i in candidates {
            let (rule, re) = self.rule(i);
            let cur = out.as_deref().unwrap_or(s);
            if !re.is_match(cur) {
                continue;
            }
            let replaced = re.replace_all(cur, |c: &Captures| masked_match(c, rule)).into_owned();
            out = Some(replaced);
        }
        out
    }

    /// The kinds of secret found in `s`.
    pub(crate) fn kinds_in(&self, s: &str, found: &mut BTreeSet<&'static str>) {
        for i in self.candidates(s) {
            let (rule, re) = self.rule(i);
            if re.is_match(s) {
                found.insert(rule.name);
            }
        }
    }

    /// Mask every string and key of a value, in place. Returns how many strings changed.
    pub(crate) fn mask_value(&self, v: &mut Value) -> usize {
        let mut changed = 0;
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => {
                    if let Some(m) = self.mask_str(s) {
                        *s = m;
                        changed += 1;
                    }
                }
                Value::Array(a) => stack.extend(a.iter_mut()),
                Value::Object(m) => {
                    for (k, x) in m.iter_mut() {
                        if let Value::String(s) = x {
                            if is_secret_field(k, s) {
                                *s = masked_field(s);
                                changed += 1;
                            }
                        }
                    }
                    if m.keys().any(|k| !self.candidates(k).is_empty()) {
                        let old = std::mem::take(m);
                        *m = old
                            .into_iter()
                            .map(|(k, v)| match self.mask_str(&k) {
                                Some(masked) => {
                                    changed += 1;
                                    (masked, v)
                                }
                                None => (k, v),
                            })
                            .collect::<Map<_, _>>();
                    }
                    stack.extend(m.values_mut());
                }
                _ => {}
            }
        }
        changed
    }

    /// The kinds of secret anywhere in a value (strings and keys).
    pub(crate) fn kinds_in_value(&self, v: &Value) -> BTreeSet<&'static str> {
        let mut found = BTreeSet::new();
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => self.kinds_in(s, &mut found),
                Value::Array(a) => stack.extend(a.iter()),
                Value::Object(m) => {
                    for (k, x) in m {
                        self.kinds_in(k, &mut found);
                        if x.as_str().is_some_and(|s| is_secret_field(k, s)) {
                            found.insert(SECRET_FIELD_RULE);
                        }
                        stack.push(x);
                    }
                }
                _ => {}
            }
        }
        found
    }
}

/// Whether a JSON member holds a secret by its key.
fn is_secret_field(key: &str, value: &str) -> bool {
    value.chars().count() >= SECRET_FIELD_MIN_LEN
        && !value.contains("…[masked:")
        && value != super::redact::REDACTED
        && is_secret_key(key)
}

fn masked_field(value: &str) -> String {
    let keep = (value.chars().count() / 4).min(4);
    let prefix: String = value.chars().take(keep).collect();
    format!("{prefix}…[masked:{SECRET_FIELD_RULE}]")
}

/// The replacement of one match: the text around the secret kept, the secret shortened to
/// at most 4 leading characters (fewer for short secrets) and labelled.
fn masked_match(c: &Captures, rule: &Rule) -> String {
    let whole = c.get(0).expect("match");
    let Some(secret) = c.get(rule.group) else { return whole.as_str().to_owned() };
    let keep = (secret.as_str().chars().count() / 4).min(4);
    let prefix: String = secret.as_str().chars().take(keep).collect();
    let start = secret.start() - whole.start();
    let end = secret.end() - whole.start();
    let w = whole.as_str();
    format!("{}{prefix}…[masked:{}]{}", &w[..start], rule.name, &w[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_keep_at_most_four_characters_and_name_the_rule() {
        let m = Masker::new();
        let s = m.mask_str("token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB end").unwrap();
        assert_eq!(s, "token ghp_…[masked:github_token] end");
        let s = m.mask_str("password=hunter2hunter2").unwrap();
        assert_eq!(s, "password=hun…[masked:generic_secret_assignment]");
    }

    #[test]
    fn commit_ids_survive_and_clean_text_is_untouched() {
        let m = Masker::new();
        let sha = "commit 0123456789abcdef0123456789abcdef01234567 fixes the token refresh";
        assert_eq!(m.mask_str(sha), None);
        let mut v = json!({"sha": "0123456789abcdef0123456789abcdef01234567", "message": "ordinary words"});
        assert_eq!(m.mask_value(&mut v), 0);
    }

    #[test]
    fn masking_is_idempotent() {
        let m = Masker::new();
        let once = m
            .mask_str("key AKIAIOSFODNN7EXAMPLE and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijklmn")
            .unwrap();
        assert_eq!(m.mask_str(&once), None, "{once}");
    }

    #[test]
    fn secret_fields_are_masked_by_their_key_only() {
        let m = Masker::new();
        let mut v = json!({"config": {"secret": "webhook-hmac-key", "url": "https://x"}, "client_secret": "gto_abcdefghijkl",
                           "token_last_eight": "abcdefgh", "sha1": "0123456789abcdef0123456789abcdef01234567", "password": "short"});
        assert_eq!(m.mask_value(&mut v), 2);
        assert_eq!(v["config"]["secret"], "webh…[masked:secret_field]");
        assert_eq!(v["client_secret"], "gto_…[masked:secret_field]");
        assert_eq!(v["token_last_eight"], "abcdefgh");
        assert_eq!(v["password"], "short");
        assert!(
            m.kinds_in_value(&json!({"authorization_header": "Bearer abcdefgh"})).contains("secret_field")
        );
    }

    #[test]
    fn keys_are_masked_and_kinds_are_reported() {
        let m = Masker::new();
        let mut v = json!({"AKIAIOSFODNN7EXAMPLE": 1, "list": ["xoxb-1234567890-abcdefghij"]});
        assert_eq!(m.mask_value(&mut v), 2);
        assert!(v.get("AKIAIOSFODNN7EXAMPLE").is_none());
        let kinds = m
            .kinds_in_value(&json!({"a": "AKIAIOSFODNN7EXAMPLE", "b": ["sk_live_0123456789abcdefghijABCD"]}));
        assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["aws_access_key_id", "stripe_key"]);
    }
}
