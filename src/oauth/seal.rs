//! Sealed tokens: what the server hands out (client ids, codes, access and refresh tokens,
//! the state it sends through the forge) is its own data, encrypted and authenticated with
//! the key of `MCP_OAUTH_KEY_FILE` (AES-256-GCM, a random 96-bit nonce per token). Nothing
//! is stored: any replica with the same key opens what another sealed, and a token altered
//! by one bit, or sealed as another kind, opens nowhere.
//!
//! A token is `<prefix><base64url(nonce ‖ ciphertext ‖ tag)>`; the prefix names the kind
//! and is also the additional authenticated data, so that a refresh token can never be
//! presented as an access token, nor a client id as a code.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::ExposeSecret;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The kinds of sealed values, by their prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A client registered dynamically: the client id is its registration.
    Client,
    /// A sign-in awaiting the person's answer: the consent page's hidden field, which anyone
    /// who opens `/authorize` sees.
    Pending,
    /// A sign-in the person approved on the consent page, in the browser that holds its
    /// cookie: what travels through the forge as `state`, the only thing the callback opens.
    Approved,
    /// An authorization code handed to the client.
    Code,
    /// An access token for this server.
    Access,
    /// A refresh token.
    Refresh,
    /// The request state of a call that waits for a person's confirmation (protocol
    /// 2026-07-28): which call, by whom, until when.
    Confirmation,
}

impl Kind {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Kind::Client => "aegis-client.",
            Kind::Pending => "aegis-pending.",
            Kind::Approved => "aegis-state.",
            Kind::Code => "aegis-code.",
            Kind::Access => "aegis-at.",
            Kind::Refresh => "aegis-rt.",
            Kind::Confirmation => "aegis-confirm.",
        }
    }
}

/// What a confirmation's request state holds: a hash binding it to one call of one caller
/// (the tool, its exact arguments, the caller's credentials, the target), when it expires
/// (seconds since the Unix epoch), and a random id by which a yes given with it is used
/// once. Nothing of the call itself.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub(crate) struct ConfirmationState {
    #[serde(rename = "b")]
    pub(crate) binding: String,
    #[serde(rename = "e")]
    pub(crate) expires: u64,
    #[serde(rename = "i")]
    pub(crate) id: String,
    /// The generation of the shared store's memory it was issued under (0: none known).
    #[serde(rename = "g", default)]
    pub(crate) generation: u64,
}

/// Longest sealed value opened, in bytes: larger text is refused before any work on it.
pub(crate) const MAX_SEALED_BYTES: usize = 8192;

/// Seals and opens with one key.
pub struct Sealer {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

/// Why a sealed value did not open. Deliberately without detail: a forged, altered,
/// truncated or foreign token all look the same to whoever sent it.
#[derive(Debug, PartialEq, Eq)]
pub struct NotOpened;

impl Sealer {
    pub fn new(key: &secrecy::SecretBox<[u8; 32]>) -> Sealer {
        let unbound = UnboundKey::new(&AES_256_GCM, key.expose_secret()).expect("a 32-byte AES-256 key");
        Sealer { key: LessSafeKey::new(unbound), random: SystemRandom::new() }
    }

    /// `value` as a token of `kind`.
    pub fn seal<T: Serialize>(&self, kind: Kind, value: &T) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).expect("the system's random source works");
        let mut data = serde_json::to_vec(value).expect("sealed payloads serialize");
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(kind.prefix().as_bytes()),
                &mut data,
            )
            .expect("sealing fits in memory");
        let mut out = Vec::with_capacity(NONCE_LEN + data.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&data);
        format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(out))
    }

    /// The value sealed in `text` as `kind`, if this key sealed it unchanged.
    pub fn open<T: DeserializeOwned>(&self, kind: Kind, text: &str) -> Result<T, NotOpened> {
        if text.len() > MAX_SEALED_BYTES {
            return Err(NotOpened);
        }
        let body = text.strip_prefix(kind.prefix()).ok_or(NotOpened)?;
        let mut raw = URL_SAFE_NO_PAD.decode(body).map_err(|_| NotOpened)?;
        if raw.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(NotOpened);
        }
        let nonce = Nonce::try_assume_unique_for_key(&raw[..NONCE_LEN]).map_err(|_| NotOpened)?;
        let plain = self
            .key
            .open_within(nonce, Aad::from(kind.prefix().as_bytes()), &mut raw, NONCE_LEN..)
            .map_err(|_| NotOpened)?;
        serde_json::from_slice(plain).map_err(|_| NotOpened)
    }

    /// `n` random bytes as base64url text (identifiers, PKCE verifiers).
    pub(crate) fn random_text(&self, n: usize) -> String {
        let mut bytes = vec![0u8; n];
        self.random.fill(&mut bytes).expect("the system's random source works");
        URL_SAFE_NO_PAD.encode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(byte: u8) -> Sealer {
        Sealer::new(&secrecy::SecretBox::new(Box::new([byte; 32])))
    }

    #[test]
    fn a_sealed_value_opens_with_the_same_key_and_kind_only() {
        let (a, b) = (sealer(1), sealer(2));
        let t = a.seal(Kind::Access, &vec!["x".to_owned()]);
        assert!(t.starts_with("aegis-at."));
        assert_eq!(a.open::<Vec<String>>(Kind::Access, &t).unwrap(), vec!["x".to_owned()]);
        // Another replica with the same key.
        assert_eq!(sealer(1).open::<Vec<String>>(Kind::Access, &t).unwrap(), vec!["x".to_owned()]);
        assert_eq!(b.open::<Vec<String>>(Kind::Access, &t), Err(NotOpened));
        // The same bytes presented as another kind.
        let as_refresh = t.replacen("aegis-at.", "aegis-rt.", 1);
        assert_eq!(a.open::<Vec<String>>(Kind::Refresh, &as_refresh), Err(NotOpened));
    }

    #[test]
    fn any_change_to_a_sealed_value_makes_it_unopenable() {
        let a = sealer(7);
        let t = a.seal(Kind::Code, &42u32);
        let prefix = Kind::Code.prefix().len();
        for i in prefix..t.len() {
            let mut bytes = t.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            if changed != t {
                assert_eq!(a.open::<u32>(Kind::Code, &changed), Err(NotOpened), "byte {i}");
            }
        }
        assert_eq!(a.open::<u32>(Kind::Code, &t[..t.len() - 1]), Err(NotOpened));
        assert_eq!(a.open::<u32>(Kind::Code, "aegis-code."), Err(NotOpened));
        assert_eq!(a.open::<u32>(Kind::Code, &"aegis-code.A".repeat(2000)), Err(NotOpened));
    }

    #[test]
    fn two_seals_of_one_value_differ() {
        let a = sealer(3);
        assert_ne!(a.seal(Kind::Access, &1u8), a.seal(Kind::Access, &1u8));
    }
}
