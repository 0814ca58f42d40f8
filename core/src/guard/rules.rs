//! The secret patterns of pattern masking, as data: one row per kind of credential, each
//! with what it must and must not match (checked by one test over the whole table).
//!
//! Rust `regex` syntax (linear time, no look-around). Where only part of a match is the
//! secret (an assignment such as `password = hunter22`), `group` names the capture group
//! that is masked; the rest stays readable. A bare 40-hex string is a commit id, never a
//! secret by itself: Gitea tokens are only recognised where the context says "token".

/// One kind of secret.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// The kind, as reported by block mode and in masked text.
    pub(crate) name: &'static str,
    pub(crate) pattern: &'static str,
    /// Capture group holding the secret; 0 = the whole match.
    pub(crate) group: usize,
    /// Lower-case literals one of which every match contains: a cheap prefilter.
    pub(crate) anchors: &'static [&'static str],
    /// Texts the rule must find, and must not: its examples, which the tests run.
    #[cfg_attr(not(test), expect(dead_code, reason = "examples that only the tests read"))]
    pub(crate) must_match: &'static [&'static str],
    #[cfg_attr(not(test), expect(dead_code, reason = "examples that only the tests read"))]
    pub(crate) must_not_match: &'static [&'static str],
}

/// The rule name reported for a masked secret field.
pub(crate) const SECRET_FIELD_RULE: &str = "secret_field";

/// Values shorter than this in a secret field are left alone (placeholders, flags).
pub(crate) const SECRET_FIELD_MIN_LEN: usize = 8;

/// The table. Order matters only for overlapping rules: earlier rows win.
pub(crate) const RULES: &[Rule] = &[
    Rule {
        name: "private_key",
        pattern: r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
        group: 0,
        anchors: &["private key"],
        must_match: &[
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (cut)",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
        ],
        must_not_match: &[
            "-----BEGIN PUBLIC KEY-----\nMIIBIj\n-----END PUBLIC KEY-----",
            "a private key is kept offline",
        ],
    },
    Rule {
        name: "github_token",
        pattern: r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        group: 0,
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        must_match: &[
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        ],
        must_not_match: &["ghp_short", "the ghp_ prefix"],
    },
    Rule {
        name: "gitlab_token",
        pattern: r"\b(?:glpat|gldt|glrt|glptt|glcbt)-[A-Za-z0-9_-]{20,}",
        group: 0,
        anchors: &["glpat-", "gldt-", "glrt-", "glptt-", "glcbt-"],
        must_match: &["glpat-abcdefghij0123456789", "token glrt-AbCdEfGhIjKlMnOpQrStUv"],
        must_not_match: &["glpat-short"],
    },
    Rule {
        name: "slack_token",
        pattern: r"\bxox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9_/-]{20,}",
        group: 0,
        anchors: &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "hooks.slack.com/services/"],
        must_match: &[
            "xoxb-1234567890-abcdefghij",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
        ],
        must_not_match: &["xoxb-", "https://hooks.slack.com/"],
    },
    Rule {
        name: "aws_access_key_id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        group: 0,
        anchors: &["akia", "asia", "abia", "acca"],
        must_match: &["AKIAIOSFODNN7EXAMPLE", "key=ASIAY34FZKBOKMUTVV7A;"],
        must_not_match: &["AKIAshortlower", "MAKIAIOSFODNN7EXAMPLEX"],
    },
    Rule {
        name: "aws_secret_access_key",
        pattern: r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+=]{40})"#,
        group: 1,
        anchors: &[
            "aws_secret",
            "awssecret",
            "aws_secret_access_key",
            "secretaccesskey",
            "secret_access_key",
        ],
        must_match: &[
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "\"AWS_SECRET_ACCESS_KEY\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"",
        ],
        must_not_match: &["aws_secret_access_key is required"],
    },
    Rule {
        name: "google_api_key",
        pattern: r"\bAIza[0-9A-Za-z_-]{35}",
        group: 0,
        anchors: &["aiza"],
        must_match: &["AIzaSyA1234567890abcdefghijklmnopqrstuv"],
        must_not_match: &["AIzaShort"],
    },
    Rule {
        name: "stripe_key",
        pattern: r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{20,}",
        group: 0,
        anchors: &["_live_", "_test_"],
        must_match: &["sk_live_0123456789abcdefghijABCD", "rk_test_0123456789abcdefghijABCD"],
        must_not_match: &["sk_live_short", "task_test_runner"],
    },
    Rule {
        name: "anthropic_key",
        pattern: r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        group: 0,
        anchors: &["sk-ant-"],
        must_match: &["sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"],
        must_not_match: &["sk-ant-short"],
    },
    Rule {
        name: "openai_key",
        pattern: r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|[A-Za-z0-9]{48})",
        group: 0,
        anchors: &["sk-"],
        must_match: &[
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "sk-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnopqrst",
        ],
        must_not_match: &["risk-assessment-document", "sk-learn"],
    },
    Rule {
        name: "npm_token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        group: 0,
        anchors: &["npm_"],
        must_match: &["npm_abcdefghijklmnopqrstuvwxyz0123456789"],
        must_not_match: &["npm_install", "npm_config_cache"],
    },
    Rule {
        name: "pypi_token",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        group: 0,
        anchors: &["pypi-ageichlwas5vcmc"],
        must_match: &["pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz"],
        must_not_match: &["pypi-package"],
    },
    Rule {
        name: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}",
        group: 0,
        anchors: &["eyj"],
        must_match: &[
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ],
        must_not_match: &["eyJhbGciOiJIUzI1NiJ9 alone"],
    },
    // Gitea/Forgejo access tokens are 40 hex characters, like commit ids: only the context of
    // an Authorization value or a token assignment makes them secrets.
    Rule {
        name: "gitea_token",
        pattern: r#"(?i)(?:\b(?:token|bearer)\s+|(?:gitea|forgejo)_?(?:access_?)?token["']?\s*[:=]\s*["']?)([0-9a-f]{40})\b"#,
        group: 1,
        anchors: &["token", "bearer"],
        must_match: &[
            "Authorization: token 0123456789abcdef0123456789abcdef01234567",
            "GITEA_TOKEN=0123456789abcdef0123456789abcdef01234567",
            "bearer 0123456789abcdef0123456789abcdef01234567",
        ],
        must_not_match: &[
            "commit 0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef01234567",
            "sha: 0123456789abcdef0123456789abcdef01234567",
        ],
    },
    Rule {
        name: "generic_secret_assignment",
        pattern: r#"(?i)\b(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret|secret[_-]?key|secret|passwd|password|token)["']?\s*[:=]\s*["']?([^\s"',;&\[…]{8,})"#,
        group: 1,
        anchors: &["key", "token", "secret", "passw"],
        must_match: &[
            "password=hunter2hunter2",
            "\"api_key\": \"abcd1234efgh5678\"",
            "export SECRET=s3cr3t-v4lue",
            "token: abcdefgh12345678",
        ],
        must_not_match: &[
            "password is required",
            "the token field",
            "passwords: short",
            "secret_id: 12",
            "commit 0123456789abcdef0123456789abcdef01234567",
            "token=[REDACTED]",
            "password=hun…[masked:generic_secret_assignment]",
        ],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    #[test]
    fn every_rule_compiles_matches_its_examples_and_not_its_counter_examples() {
        for rule in RULES {
            let re = Regex::new(rule.pattern).unwrap_or_else(|e| panic!("{}: {e}", rule.name));
            assert!(!rule.must_match.is_empty(), "{} has examples", rule.name);
            for s in rule.must_match {
                let caps = re.captures(s).unwrap_or_else(|| panic!("{} must match {s:?}", rule.name));
                assert!(
                    caps.get(rule.group).is_some(),
                    "{}: group {} captured in {s:?}",
                    rule.name,
                    rule.group
                );
                let lower = s.to_ascii_lowercase();
                assert!(
                    rule.anchors.iter().any(|a| lower.contains(a)),
                    "{}: an anchor occurs in {s:?}",
                    rule.name
                );
            }
            for s in rule.must_not_match {
                assert!(!re.is_match(s), "{} must not match {s:?}", rule.name);
            }
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RULES.len());
    }
}
