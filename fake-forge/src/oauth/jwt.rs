//! Gitea-shaped JWTs: the claims of `services/oauth2_provider/token.go`, an `RS256` header with a
//! `kid`, and a signature the fake can check.
//!
//! Gitea signs with an RSA key by default (`JWT_SIGNING_ALGORITHM = RS256`). The fake has no RSA;
//! its "signature" is 256 bytes (the size of an RSA-2048 signature) derived from a per-server
//! random secret and the signed part by SHA-256. Clients only ever treat Gitea's tokens as
//! opaque strings, so what matters is the shape (`eyJ…` three base64url parts), that tokens are
//! unique, and that the forge can tell its own tokens and their claims from anything else.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `tt` of an access token (Gitea's `KindAccessToken`).
pub(super) const KIND_ACCESS: i64 = 0;
/// `tt` of a refresh token (Gitea's `KindRefreshToken`).
pub(super) const KIND_REFRESH: i64 = 1;

/// The claims the provider reads back from a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Claims {
    /// `gnt`: the grant id.
    pub grant: i64,
    /// `tt`: the token kind.
    pub kind: i64,
    /// `cnt`: the grant counter a refresh token was issued at (0 when absent).
    pub counter: i64,
}

/// Signs and checks tokens with a secret that lives as long as the server.
#[derive(Debug)]
pub(super) struct Signer {
    secret: [u8; 32],
    kid: String,
    serial: AtomicU64,
}

impl Signer {
    pub(super) fn new() -> Signer {
        let secret = fresh_bytes(b"jwt-secret");
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest([b"kid".as_slice(), &secret].concat()));
        Signer { secret, kid, serial: AtomicU64::new(1) }
    }

    /// A fresh, unpredictable-enough value for `jti`, codes and the like (not cryptographic, but
    /// unique within the process and not guessable from the outside by counting).
    pub(super) fn nonce(&self) -> [u8; 32] {
        let n = self.serial.fetch_add(1, Ordering::Relaxed);
        let mut h = Sha256::new();
        h.update(self.secret);
        h.update(n.to_le_bytes());
        h.update(fresh_bytes(b"nonce"));
        h.finalize().into()
    }

    /// Gitea's `Token` (`gnt`, `tt`, `cnt` when not zero, `exp`, `iat`) with a unique `jti`.
    pub(super) fn token(&self, grant: i64, kind: i64, counter: i64, now: u64, exp: u64) -> String {
        let mut claims = json!({"gnt": grant, "tt": kind});
        if counter != 0 {
            claims["cnt"] = json!(counter);
        }
        claims["exp"] = json!(exp);
        claims["iat"] = json!(now);
        claims["jti"] = json!(hex(&self.nonce()[..16]));
        self.sign(&claims)
    }

    /// Signs any claims (ID tokens use Gitea's `OIDCToken` claims).
    pub(super) fn sign(&self, claims: &Value) -> String {
        // golang-jwt marshals the header map with sorted keys.
        let header = json!({"alg": "RS256", "kid": self.kid, "typ": "JWT"});
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = URL_SAFE_NO_PAD.encode(self.signature(&signing_input));
        format!("{signing_input}.{signature}")
    }

    fn signature(&self, signing_input: &str) -> Vec<u8> {
        (0u8..8)
            .flat_map(|block| {
                let mut h = Sha256::new();
                h.update(self.secret);
                h.update([block]);
                h.update(signing_input.as_bytes());
                h.finalize()
            })
            .collect()
    }

    /// The claims of a token this signer issued, if its signature holds and, as golang-jwt
    /// checks, it is not expired (`now < exp`) and not issued in the future.
    pub(super) fn verify(&self, token: &str, now: u64) -> Option<Claims> {
        let (signing_input, signature) = token.rsplit_once('.')?;
        let (_, payload) = signing_input.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        if signature != self.signature(signing_input) {
            return None;
        }
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let exp = claims["exp"].as_u64()?;
        let iat = claims["iat"].as_u64().unwrap_or(0);
        if now >= exp || iat > now {
            return None;
        }
        Some(Claims {
            grant: claims["gnt"].as_i64()?,
            kind: claims["tt"].as_i64().unwrap_or(KIND_ACCESS),
            counter: claims["cnt"].as_i64().unwrap_or(0),
        })
    }
}

/// Lower-case hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes that differ between calls and processes: a hash of the time, the process id, a
/// process-wide counter and an address on the stack.
fn fresh_bytes(salt: &[u8]) -> [u8; 32] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let local = 0u8;
    let mut h = Sha256::new();
    h.update(salt);
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    h.update((&local as *const u8 as usize).to_le_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_gitea_shaped_unique_and_checked() {
        let s = Signer::new();
        let a = s.token(7, KIND_ACCESS, 0, 100, 200);
        let b = s.token(7, KIND_ACCESS, 0, 100, 200);
        assert_ne!(a, b);
        assert_eq!(a.split('.').count(), 3);
        assert!(a.starts_with("eyJhbGciOiJSUzI1NiIsImtpZCI6"), "{a}");
        let payload = URL_SAFE_NO_PAD.decode(a.split('.').nth(1).unwrap()).unwrap();
        let claims: Value = serde_json::from_slice(&payload).unwrap();
        let keys: Vec<&String> = claims.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["gnt", "tt", "exp", "iat", "jti"]);
        assert_eq!(s.verify(&a, 150), Some(Claims { grant: 7, kind: KIND_ACCESS, counter: 0 }));
        let r = s.token(7, KIND_REFRESH, 3, 100, 200);
        assert_eq!(s.verify(&r, 150), Some(Claims { grant: 7, kind: KIND_REFRESH, counter: 3 }));
        // Expired, issued in the future, signed by another server, tampered with.
        assert_eq!(s.verify(&a, 200), None);
        assert_eq!(s.verify(&a, 99), None);
        assert_eq!(Signer::new().verify(&a, 150), None);
        let mut parts: Vec<&str> = a.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(r#"{"gnt":8,"tt":0,"exp":200,"iat":100}"#);
        parts[1] = &forged;
        assert_eq!(s.verify(&parts.join("."), 150), None);
        assert_eq!(s.verify("not-a-jwt", 150), None);
    }
}
