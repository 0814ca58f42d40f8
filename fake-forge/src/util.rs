//! Small helpers for the model: timestamps, fake SHAs and UUIDs.
//!
//! The fake needs values that *look* right (RFC 3339 times, 40-hex SHAs, v4-shaped UUIDs) and
//! are unique within a process; none of them has to be cryptographic, so they come from a hash
//! of a counter instead of extra dependencies.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(1);

/// The current time as `2024-05-01T12:34:56Z`.
pub(crate) fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339(secs)
}

/// Formats Unix seconds as RFC 3339 in UTC.
pub(crate) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, (rem / 60) % 60, rem % 60)
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn hash64(seed: &impl Hash, salt: u64) -> u64 {
    let mut h = DefaultHasher::new();
    seed.hash(&mut h);
    salt.hash(&mut h);
    h.finish()
}

/// A fresh 40-hex-digit SHA-like string, unique in this process.
pub(crate) fn fake_sha(seed: &impl Hash) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let words = [hash64(seed, n), hash64(seed, n ^ 0xa5a5), hash64(seed, n ^ 0x5a5a)];
    let hex = format!("{:016x}{:016x}{:016x}", words[0], words[1], words[2]);
    hex[..40].to_string()
}

/// A fresh UUID-v4-shaped string, unique in this process.
pub(crate) fn fake_uuid() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let a = hash64(&"uuid", n);
    let b = hash64(&"uuid-2", n);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// Follows `$ref`s such as `#/responses/Repository` or `#/definitions/Repository`.
pub(crate) fn resolve<'a>(
    spec: &'a serde_json::Value,
    mut v: &'a serde_json::Value,
) -> &'a serde_json::Value {
    for _ in 0..16 {
        let Some(r) = v.get("$ref").and_then(serde_json::Value::as_str) else {
            break;
        };
        let mut target = spec;
        for part in r.trim_start_matches("#/").split('/') {
            target = &target[part];
        }
        v = target;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
        let sha = fake_sha(&"x");
        assert_eq!(sha.len(), 40);
        assert_ne!(sha, fake_sha(&"x"));
        let uuid = fake_uuid();
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
    }
}
