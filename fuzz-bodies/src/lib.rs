//! The bodies of the fuzz targets: every parser that reads what a client or the forge sent,
//! driven from arbitrary bytes, with the properties each must keep written as asserts.
//!
//! They are a crate of their own, a member of the root workspace and outside the product
//! crate, so that the same functions replay the committed corpus (`fuzz/corpus/<target>/`,
//! and the crash inputs kept in `fuzz/regressions/<target>/`) in an ordinary unit test, on
//! stable Rust, in every `cargo test --workspace` — so CI runs each input ever found
//! interesting, with no fuzzing. `fuzz/fuzz_targets/<target>.rs` only hands libFuzzer's bytes
//! to one of these; `scripts/fuzz` runs them. The parsers the server keeps to itself are
//! reached through its `fuzzing` feature's entry points (`aegis_gitea_mcp::fuzzing`), which
//! call them as the server does; the properties are all here. A target never fails on input
//! the code is allowed to refuse: a panic here is a defect of the code under test, or of a
//! property.
//!
//! Each target cuts its input the same way every time (documented on the target), so that
//! the seed files stay readable: a header, a line, a path, `tool name` + newline + JSON.

use std::sync::OnceLock;

use serde_json::{Value, json};

use aegis_core::args::plan::{CallPlan, PageRequest, Root};
use aegis_core::catalog::{Catalog, Flavor, Method, ResponseKind, Target, ToolDef};
use aegis_core::decode::body::{self, Decoded, Media};
use aegis_core::decode::json::{self as bounded, Keep};
use aegis_core::decode::{pagination, status};
use aegis_core::envelope::{self, RequestInfo, Success};
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::{Bounds, Guard, unescape};
use aegis_core::guard::{ContentHygiene, DetectionMode};
use aegis_core::identity::{Identity, MAX_TOKEN_BYTES, Mode};
use aegis_core::path;
use aegis_gitea_mcp::audit::AuditKey;
use aegis_gitea_mcp::fuzzing::{self as entry, AuthHeader, Read};
use aegis_gitea_mcp::oauth::seal::{Kind, Sealer};

/// A target's body: bytes in, a panic for a defect.
pub type Body = fn(&[u8]);

/// Every target: its name (the file in `fuzz/fuzz_targets/`, the folders of its corpus) and
/// its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("auth_header", auth_header),
    ("jsonrpc", jsonrpc),
    ("sse_message", sse_message),
    ("raw_path", raw_path),
    ("arguments", arguments),
    ("decode", decode),
    ("guard", guard),
    ("pagination", pagination),
    ("oauth", oauth),
    ("audit_verify", audit_verify),
    ("skim", skim),
    ("forge_url", forge_url),
    ("shape", shape),
    ("resource_uri", resource_uri),
];

/// The `Authorization` header parser (`identity/header.rs`). The input is the header value.
///
/// A token comes only from a recognised scheme followed by white space, is not empty, has no
/// white space around it, is within `MAX_TOKEN_BYTES` and is a part of the value; a value
/// whose scheme is recognised and that has text after it is never "no header"; a token read
/// back behind `Bearer ` is the same token. The constant-time comparison agrees with `==`.
pub fn auth_header(data: &[u8]) {
    let text = data.trim_ascii();
    let scheme_end = text.iter().position(|&b| b == b' ' || b == b'\t');
    let recognised = scheme_end.is_some_and(|at| {
        text[..at].eq_ignore_ascii_case(b"token") || text[..at].eq_ignore_ascii_case(b"bearer")
    });
    let value = scheme_end.map_or(&[][..], |at| text[at..].trim_ascii());
    match entry::auth_header(Some(data)) {
        AuthHeader::Token(t) => {
            let t = secrecy::ExposeSecret::expose_secret(&t).as_bytes().to_vec();
            assert!(recognised, "a token without a recognised scheme");
            assert!(!t.is_empty() && t.len() <= MAX_TOKEN_BYTES);
            assert_eq!(t, value, "the token is the value after the scheme");
            assert_eq!(t.trim_ascii(), &t[..]);
            let mut again = b"Bearer ".to_vec();
            again.extend_from_slice(&t);
            match entry::auth_header(Some(&again)) {
                AuthHeader::Token(u) => {
                    assert_eq!(secrecy::ExposeSecret::expose_secret(&u).as_bytes(), &t[..])
                }
                other => panic!("a token read back is {other:?}"),
            }
        }
        AuthHeader::TooLong => assert!(recognised && value.len() > MAX_TOKEN_BYTES),
        AuthHeader::NotText => {
            assert!(recognised && value.len() <= MAX_TOKEN_BYTES && std::str::from_utf8(value).is_err())
        }
        AuthHeader::None => assert!(!recognised || value.is_empty(), "a credential read as no header"),
    }
    let (a, b) = data.split_at(data.len() / 2);
    assert_eq!(entry::constant_time_eq(a, b), a == b);
}

/// JSON-RPC framing (`transport/jsonrpc.rs`, `transport/stdio.rs`). The input is one HTTP
/// body, and also what a client writes on stdin, read by the stdio line reader with a line
/// bound of 16 to 526 bytes and a buffer of 1 to 256 bytes (both chosen by the first byte).
///
/// A body is a message, nothing, or a JSON-RPC error (parse error or invalid request) with
/// a valid id. The line reader answers each line as `check_values` then `read` answer it
/// alone, a line longer than the bound with a parse error, in order, however the bytes
/// arrive; it never passes on more than one message per line.
pub fn jsonrpc(data: &[u8]) {
    let body = match entry::check_values(data) {
        Err(answer) => Expected::Answer(answer),
        Ok(()) => expected_read(data),
    };
    if let Expected::Answer(a) = &body {
        assert_jsonrpc_error(a);
    }
    let first = data.first().copied().unwrap_or(0) as usize;
    let (max, capacity) = (16 + first * 2, 1 + first);
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    // The bytes after the last newline are not a line yet (the stream ended inside it).
    let complete = &lines[..lines.len() - 1];
    let mut messages = Vec::new();
    let mut answers = Vec::new();
    for line in complete {
        let what = if line.len() > max {
            match entry::oversized(entry::skim([&line[..]]), max) {
                Read::Message(m) => {
                    Expected::Message(serde_json::to_value(&m).expect("a message serializes"))
                }
                Read::Answer(a) => {
                    assert_jsonrpc_error(&a);
                    Expected::Answer(a)
                }
                Read::Nothing => Expected::Nothing,
            }
        } else if let Err(a) = entry::check_values(line) {
            Expected::Answer(a)
        } else {
            expected_read(line)
        };
        match what {
            Expected::Message(m) => messages.push(m),
            Expected::Answer(a) => answers.push(a.to_string().into_bytes()),
            Expected::Nothing => {}
        }
    }
    let (got_messages, got_answers) = runtime().block_on(async {
        let room = complete.len() + 1;
        let input = tokio::io::BufReader::with_capacity(capacity, data);
        let (ms, as_) = entry::read_lines(input, max, room).await;
        let ms: Vec<Value> =
            ms.iter().map(|m| serde_json::to_value(m).expect("a message serializes")).collect();
        (ms, as_)
    });
    assert_eq!(got_messages, messages, "the messages the line reader passed on");
    assert_eq!(got_answers, answers, "the answers the line reader wrote");
}

/// What one message's bytes should become, messages as JSON for comparison.
enum Expected {
    Message(Value),
    Answer(Value),
    Nothing,
}

fn expected_read(bytes: &[u8]) -> Expected {
    match entry::read(bytes) {
        Read::Message(m) => Expected::Message(serde_json::to_value(&m).expect("a message serializes")),
        Read::Answer(a) => Expected::Answer(a),
        Read::Nothing => Expected::Nothing,
    }
}

/// A JSON-RPC error response as `transport/jsonrpc.rs`'s `error` makes them: version, an id that is a
/// string, an integer or null, and one of the two codes the readers answer with.
fn assert_jsonrpc_error(a: &Value) {
    assert_eq!(a["jsonrpc"], "2.0");
    assert!(matches!(a["id"], Value::Null | Value::String(_)) || a["id"].is_i64() || a["id"].is_u64(), "{a}");
    let code = a["error"]["code"].as_i64();
    assert!(code == Some(entry::PARSE_ERROR) || code == Some(entry::INVALID_REQUEST), "{a}");
    assert!(a["error"]["message"].is_string());
}

/// The legacy SSE `POST /message` (`transport/sse.rs`). The input is the query (up to the
/// first newline) and the body (the rest), read as the route reads them: the session from
/// the query, the body counted by the body layer, then read.
///
/// A session id comes only from a `sessionId` pair of the query, decoded; anything refused
/// is a 400. A body becomes a message that reads back the same from its own JSON, nothing,
/// or a JSON-RPC error to answer.
pub fn sse_message(data: &[u8]) {
    let (query, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let mut target = b"/message?".to_vec();
    target.extend_from_slice(query);
    // What hyper would not take as a request target never reaches the route.
    if let Ok(uri) = http::Uri::builder().path_and_query(target).build() {
        match entry::session_of(&uri) {
            Ok(id) => {
                let raw = uri.query().unwrap_or_default();
                let named: Vec<String> = url::form_urlencoded::parse(raw.as_bytes())
                    .filter(|(k, _)| k == "sessionId")
                    .map(|(_, v)| v.into_owned())
                    .collect();
                assert_eq!(named, [id], "the session id is the query's one sessionId");
            }
            Err(status) => assert_eq!(status, http::StatusCode::BAD_REQUEST),
        }
    }
    if let Err(answer) = entry::check_values(body) {
        assert_jsonrpc_error(&answer);
        return;
    }
    match entry::message_of(body) {
        Ok(Some(m)) => {
            let text = serde_json::to_vec(&m).expect("a message serializes");
            match entry::message_of(&text) {
                Ok(Some(again)) => {
                    assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(&m).unwrap())
                }
                other => panic!("a message written back does not read as one: {other:?}"),
            }
        }
        Ok(None) => {}
        Err(answer) => assert_jsonrpc_error(&answer),
    }
}

/// The raw tool's path rules and the path encoder (`args/raw.rs`, `core/src/path.rs`,
/// `Catalog::reached_by_raw`). The first byte picks the method, the rest (as text) is the
/// path; the same text is also encoded as one segment and as a catch-all value.
///
/// An accepted path plans, and its plan's path stays under `/api/v1` (the executor's own
/// check passes and the URL's path is the API's followed by the plan's, unresolved), has no
/// empty, `.` or `..` segment, no `%2E` (a dot is never encoded) and decodes back to the
/// path given. The operation a path reaches has its method and a route that matches the
/// path. A segment encodes to unreserved characters and escapes only, without `/`, and
/// decodes back; a catch-all value is refused exactly when it has an empty or dot segment.
pub fn raw_path(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let method = Method::ALL[first as usize % Method::ALL.len()];
    let p = String::from_utf8_lossy(rest).into_owned();
    let catalog = &catalogs()[usize::from(first >= 128)];
    let args = json!({"method": method.as_str(), "path": p});
    let args = args.as_object().expect("an object");

    let reached = catalog.reached_by_raw(args);
    if let Some(op) = reached.and_then(|t| t.operation()) {
        assert_eq!(op.method, method);
        assert!(op.template.matches(&aegis_core::catalog::segments(&p), &op.params), "{} for {p:?}", op.id);
    }
    match aegis_core::args::raw::check_path(&p) {
        Ok(()) => {
            assert!(p.starts_with('/') && !p.contains(['%', '?', '#']) && !p.chars().any(char::is_control));
            assert!(p != "/api/v1" && !p.starts_with("/api/v1/"));
            let raw = catalog.get(aegis_core::catalog::raw_tool::NAME).expect("the raw tool");
            let plan = aegis_core::args::Prepared::new(catalog, raw, args.clone())
                .and_then(|call| call.plan(1 << 20))
                .unwrap_or_else(|e| panic!("an accepted path does not plan: {e}"));
            assert_stays_in_api(&plan);
            let decoded: Vec<String> = plan.path().split('/').skip(1).map(percent_decoded).collect();
            let given: Vec<&str> = p.split('/').skip(1).collect();
            assert_eq!(decoded, given, "the plan's path decodes back to the path given");
        }
        Err(why) => assert!(!why.is_empty()),
    }

    let segment = path::encode_segment(&p);
    assert!(segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{segment}");
    assert_eq!(percent_decoded(&segment), p);
    let dotted = p.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    match path::encode_wildcard(&p) {
        Ok(encoded) => {
            assert!(!dotted);
            let back: Vec<String> = encoded.split('/').map(percent_decoded).collect();
            assert_eq!(back, p.split('/').collect::<Vec<_>>());
        }
        Err(_) => assert!(dotted, "a catch-all value refused without an empty or dot segment: {p:?}"),
    }
}

/// Argument preparation and plan building (`args/prepared.rs`, `args/fields.rs`,
/// `args/validate.rs`, `args/plan.rs`, `args/raw.rs`) against the tools of the embedded catalogs. The first line
/// is `gitea NAME` or `forgejo NAME` (an unknown name picks a tool by its hash), the rest the
/// arguments as JSON.
///
/// Normalising twice changes nothing more; every refusal is a tool error of its kind, never
/// a panic; a plan is built only for arguments the schema accepted, and its path stays under
/// `/api/v1` (attachments: under `/attachments/`).
pub fn arguments(data: &[u8]) {
    let (head, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let (flavor, name) = head.split_once(' ').unwrap_or(("", &head));
    let catalog = &catalogs()[usize::from(flavor == "forgejo")];
    let Ok(Value::Object(args)) = serde_json::from_slice::<Value>(rest) else { return };
    let tools: Vec<&ToolDef> = catalog
        .all_tools()
        .map(|t| t.as_ref())
        .filter(|t| matches!(t.target, Target::Operation(_) | Target::Raw | Target::AttachmentDownload))
        .collect();
    let tool = match catalog.get(name).map(|t| t.as_ref()).filter(|t| tools.iter().any(|u| u.name == t.name))
    {
        Some(t) => t,
        None => tools[fnv(name.as_bytes()) as usize % tools.len()],
    };
    let mut twice = args.clone();
    if let Err(e) = aegis_core::args::fields::normalize(tool, &mut twice) {
        assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{e}");
        return;
    }
    let once = twice.clone();
    aegis_core::args::fields::normalize(tool, &mut twice).expect("normalised arguments normalise again");
    assert_eq!(twice, once, "normalising is done in one pass");
    let call = match aegis_core::args::Prepared::new(catalog, tool, args) {
        Ok(call) => call,
        Err(e) => {
            assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{e}");
            return;
        }
    };
    let plan = call.plan(1 << 20);
    match plan {
        Ok(plan) => assert_stays_in_api(&plan),
        Err(CallError::Result(f)) => assert!(
            matches!(f.kind, ErrorKind::InvalidArguments | ErrorKind::Denied | ErrorKind::PayloadTooLarge),
            "{} refused valid arguments as {:?}: {}",
            tool.name,
            f.kind,
            f.message
        ),
        Err(e) => panic!("{e}"),
    }
}

/// A plan's path: rooted, no empty or dot segment in any spelling, only unreserved
/// characters and escapes, and the executor's URL has exactly that path under its root.
fn assert_stays_in_api(plan: &CallPlan) {
    let p = plan.path();
    assert!(p.starts_with('/'), "{p}");
    for segment in p.split('/').skip(1) {
        let decoded = percent_decoded(segment);
        assert!(!decoded.is_empty() && decoded != "." && decoded != "..", "{p}");
        assert!(segment.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)), "{p}");
    }
    assert!(!p.to_ascii_lowercase().contains("%2e"), "a dot is never encoded: {p}");
    let url = forge().url_of(plan).unwrap_or_else(|e| panic!("{p}: {e}"));
    match plan.root() {
        Root::Api => assert_eq!(url.path(), format!("/api/v1{p}")),
        Root::Site => {
            assert_eq!(url.path(), p);
            assert!(p.starts_with("/attachments/"), "{p}");
        }
    }
}

/// Response decoding (`decode/body.rs`, `decode/json.rs`, `decode/status.rs`). The first
/// byte picks the expected kind, the media type and the bounds; with the media type
/// "from the input" the second line is the `Content-Type` value; the rest is the body.
///
/// An empty body is empty; binary bytes and text are the body as sent (text made valid
/// UTF-8); JSON within the depth limit is parsed, with at most `items` per list and `values`
/// in all, and is the whole document when nothing was left out; the cuts recorded are
/// bounded. What the read limit calls binary is never parsed.
pub fn decode(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let expect = [ResponseKind::Json, ResponseKind::Text, ResponseKind::Binary, ResponseKind::Redirect]
        [usize::from(first & 3)];
    let (content_type, bytes) = match MEDIA_TYPES[usize::from(first >> 2) % MEDIA_TYPES.len()] {
        Some(FROM_INPUT) => match rest.iter().position(|&b| b == b'\n') {
            Some(at) => (Some(String::from_utf8_lossy(&rest[..at]).into_owned()), &rest[at + 1..]),
            None => (None, rest),
        },
        other => (other.map(str::to_owned), rest),
    };
    let keep = Keep { items: 1 + usize::from(first % 7) * 3, values: 1 + usize::from(first) * 8 };
    let ct = content_type.as_deref();
    let limits = body::Limits { max_binary: 1, max_response: 2 };
    let limit = body::read_limit(expect, ct, limits);
    let (decoded, elided) = body::decode(expect, ct, bytes.to_vec(), keep);
    assert!(elided.cuts.len() <= bounded::MAX_CUTS);
    for cut in &elided.cuts {
        assert!(cut.kept < cut.total && cut.kept <= keep.items, "{cut:?}");
        assert!(cut.pointer.chars().count() <= bounded::MAX_POINTER_CHARS + 1, "{}", cut.pointer);
    }
    match &decoded {
        Decoded::Empty => assert!(bytes.is_empty()),
        Decoded::Binary { bytes: b, content_type: t } => {
            assert_eq!(b, bytes);
            assert!(!t.is_empty());
        }
        Decoded::Text(t) => {
            assert_eq!(t, &String::from_utf8_lossy(bytes));
            assert_ne!(limit.setting, "MAX_BINARY_BYTES", "bytes read as binary were decoded as text");
        }
        Decoded::Json(v) => {
            assert_ne!(limit.setting, "MAX_BINARY_BYTES", "bytes read as binary were parsed");
            assert!(!body::too_deep(bytes, body::MAX_JSON_DEPTH));
            let (lists, values) = list_and_value_counts(v);
            assert!(lists <= keep.items, "a list longer than kept: {lists} > {}", keep.items);
            assert!(values <= keep.values.max(1), "{values} values kept of {}", keep.values);
            // JSON is read from the text the bytes make (stray bytes become U+FFFD). What was
            // left out was only read past: a number out of f64's range there does not count.
            if elided.cuts.is_empty() && !elided.budget_spent {
                let whole: Value =
                    serde_json::from_str(&String::from_utf8_lossy(bytes)).expect("JSON the decoder parsed");
                assert_eq!(v, &whole, "nothing was left out, yet the value differs");
            }
        }
    }
    if body::media(ct) == Media::Json && !bytes.is_empty() && std::str::from_utf8(bytes).is_ok() {
        let parsed = serde_json::from_slice::<Value>(bytes).is_ok();
        let deep = body::too_deep(bytes, body::MAX_JSON_DEPTH);
        if parsed && !deep {
            assert!(matches!(decoded, Decoded::Json(_)), "JSON within the depth limit was not parsed");
        }
    }
    // The parts of an error answer: its status, message and Retry-After.
    let code = u16::from_le_bytes([first, bytes.first().copied().unwrap_or(0)]);
    let kind = status::kind_for(code);
    let message = status::forge_message(bytes);
    if let Some(kind) = kind {
        let _ = status::hint(code, kind, &message);
    }
    let _ = status::retry_after(ct, std::time::SystemTime::now());
}

/// A media type the decode target takes its `Content-Type` from the input.
const FROM_INPUT: &str = "\0from the input";

/// The media types the decode and guard targets choose among.
const MEDIA_TYPES: &[Option<&str>] = &[
    None,
    Some("application/json"),
    Some("application/json; charset=utf-8"),
    Some("text/plain; charset=utf-8"),
    Some("text/html"),
    Some("application/octet-stream"),
    Some("application/zip"),
    Some("application/vnd.github+json"),
    Some(""),
    Some(FROM_INPUT),
];

/// The longest list and the number of values in `v` (without recursion).
fn list_and_value_counts(v: &Value) -> (usize, usize) {
    let (mut longest, mut count) = (0, 0);
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            Value::Array(items) => {
                longest = longest.max(items.len());
                stack.extend(items);
            }
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    (longest, count)
}

/// The secrets the guard target's server knows (configured) and its call adds (the
/// caller's token, a body secret). None is a part of the envelope's own words; one has the
/// characters JSON escapes, one is not ASCII.
const SECRETS: [&str; 4] =
    ["Zq7GLOBALtok3n0x", "pa\"ss\\w\u{f6}rd-7Kq", "Ac2CALLERtokenQz", "Pw4BODYfield99Kk"];

/// One spelling of a known secret that must not come out, and the readings of the
/// guarded text it must not be found in. Extend `SPELLINGS` when the guard learns one.
struct Spelling {
    name: &'static str,
    spell: fn(&str) -> Vec<String>,
    readings: &'static [Reading],
}

/// A way a reader (a model, a person) may read the guarded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// The text as it leaves.
    Text,
    /// Every string and key of the parsed text, with its JSON escapes read (`\u0041` is
    /// `A`): forge text the decoder kept as text can hold escapes a reader decodes.
    Unescaped,
    /// Base64 file content (the members `guard::encoded` decodes), decoded.
    Base64Content,
    /// Every string and key with its percent-escapes read (`%2f` is `/`), as a URL decoder
    /// reads them: any mixture of escaped bytes and hex cases.
    PercentDecoded,
}

/// What the guard claims to handle: a secret as it is, in every reading; spelled with JSON's
/// escapes of `"`, `\` and control characters; and every spelling `guard::spellings` lists
/// (percent-encoded, base64 at each alignment in both alphabets), in the text as it leaves.
const SPELLINGS: &[Spelling] = &[
    Spelling {
        name: "plain",
        spell: plain,
        readings: &[Reading::Text, Reading::Unescaped, Reading::Base64Content, Reading::PercentDecoded],
    },
    Spelling { name: "JSON-escaped", spell: json_escaped, readings: &[Reading::Text] },
    Spelling { name: "percent or base64", spell: aegis_core::guard::spellings, readings: &[Reading::Text] },
];

fn plain(secret: &str) -> Vec<String> {
    vec![secret.to_owned()]
}

fn json_escaped(secret: &str) -> Vec<String> {
    let quoted = serde_json::to_string(secret).expect("a string serializes");
    vec![quoted[1..quoted.len() - 1].to_owned()]
}

/// How the guard target writes secret `k` into its input: byte 1 + k as it is, byte 5 + k
/// with every character as a `\u` escape (a JSON string's spelling a reader decodes), byte
/// 9 + k with every byte percent-encoded, byte 13 + k in base64 (at whatever alignment the
/// bytes before it give, when they are base64 too), byte 17 + k with its bytes percent-encoded
/// or not and in either hex case as the bits of the byte after say.
fn with_secrets(data: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let mut out = Vec::with_capacity(data.len() + 64);
    for (i, &b) in data.iter().enumerate() {
        match b {
            1..=4 => out.extend_from_slice(SECRETS[usize::from(b - 1)].as_bytes()),
            5..=8 => {
                for c in SECRETS[usize::from(b - 5)].encode_utf16() {
                    out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                }
            }
            9..=12 => {
                for byte in SECRETS[usize::from(b - 9)].bytes() {
                    out.extend_from_slice(format!("%{byte:02X}").as_bytes());
                }
            }
            13..=16 => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(SECRETS[usize::from(b - 13)]);
                out.extend_from_slice(encoded.as_bytes());
            }
            17..=20 => {
                let bits = data.get(i + 1).copied().unwrap_or(0x55);
                for (j, byte) in SECRETS[usize::from(b - 17)].bytes().enumerate() {
                    match (bits >> (j % 4 * 2)) & 3 {
                        0 => out.extend_from_slice(format!("%{byte:02X}").as_bytes()),
                        1 => out.extend_from_slice(format!("%{byte:02x}").as_bytes()),
                        _ if byte.is_ascii_alphanumeric() => out.push(byte),
                        _ => out.extend_from_slice(format!("%{byte:02x}").as_bytes()),
                    }
                }
            }
            _ => out.push(b),
        }
    }
    out
}

/// The guard (`guard/`): a forge answer through the whole pass of a call — decoding, the
/// binary check, `CallGuard::success` — and, read as an error body, through
/// `executor::forge_error` and `CallGuard::error`. The first byte picks the detection mode, the
/// content hygiene, whether the operation issues credentials and the media type; the second
/// the bounds; the rest is the body, in which bytes 1–8 stand for a secret (`with_secrets`).
/// The forge's login and the path as sent carry a secret too.
///
/// What leaves is valid JSON within the character bound, and no known secret survives in
/// any of `SPELLINGS`.
pub fn guard(data: &[u8]) {
    let [first, second, rest @ ..] = data else { return };
    let mode = [DetectionMode::Off, DetectionMode::Mask, DetectionMode::Block][usize::from(first % 3)];
    let hygiene =
        [ContentHygiene::Mark, ContentHygiene::Strip, ContentHygiene::Off][usize::from(first / 3 % 3)];
    let issues_credentials = first & 0x80 != 0;
    let media = MEDIA_TYPES[usize::from(first / 9 % 9)];
    let bounds =
        Bounds { max_items: 1 + usize::from(second % 16), max_chars: 2_000 + usize::from(*second) * 40 };
    let call = server_guard(first % 9, *second, || {
        Guard::new(vec![SECRETS[0].into(), SECRETS[1].into()], mode, bounds).with_hygiene(hygiene)
    })
    .for_call(vec![SECRETS[2].into()])
    .with(vec![SECRETS[3].into()]);
    let body = with_secrets(rest);
    let keep = Keep { items: bounds.max_items, values: bounds.max_chars };
    let expect = if second & 0x80 != 0 { ResponseKind::Text } else { ResponseKind::Json };

    let (decoded, elided) = body::decode(expect, media, body.clone(), keep);
    let text = match &decoded {
        Decoded::Binary { bytes, .. } => call.binary(200, bytes).err(),
        _ => None,
    }
    .map(|e| call.error(e))
    .map_or_else(
        || {
            let mut s = Success {
                identity: Identity {
                    login: Some(format!("al{}ce", SECRETS[2])),
                    mode: Mode::Token,
                    sudo: None,
                },
                forge: None,
                request: RequestInfo { method: "GET", path: format!("/repos/o/{}/issues", SECRETS[3]) },
                status: 200,
                pagination: None,
                untrusted_content: envelope::untrusted_notice(Flavor::Gitea),
                shape: None,
                data: decoded.into_data(),
                link: None,
                truncated: None,
                hidden_content: None,
                filtered: None,
                withheld: None,
            };
            match call.success(&mut s, issues_credentials, &elided) {
                Ok(t) => t.into_string(),
                Err(e) => error_text(e.into_error()),
            }
        },
        |e| error_text(e.into_error()),
    );
    assert_no_secret(&text);
    assert!(text.chars().count() <= bounds.max_chars, "{} > {}", text.chars().count(), bounds.max_chars);

    let status = 400 + u16::from(second % 200);
    let mut headers = http::HeaderMap::new();
    if let Some(ct) = media.filter(|m| !m.is_empty() && *m != FROM_INPUT) {
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(ct));
    }
    let kind = status::kind_for(status).unwrap_or(ErrorKind::UpstreamError);
    let error = entry::forge_error(status, headers, body, kind, call.redactor());
    assert_no_secret(&error_text(call.error(error).into_error()));
}

fn error_text(e: CallError) -> String {
    match e {
        CallError::Result(f) => envelope::error_text(&f),
        CallError::UnknownTool(name) => panic!("the guard made a forge answer an unknown tool {name}"),
    }
}

/// `s` with its percent-escapes read, as a URL decoder reads them (the bytes that do not make
/// UTF-8 as U+FFFD).
fn percent_read(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The property of the guard target: `text` is JSON, and no spelling of a known secret is
/// found in any of its readings.
fn assert_no_secret(text: &str) {
    let parsed: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let mut readings: Vec<(Reading, String)> = vec![(Reading::Text, text.to_owned())];
    let mut stack = vec![&parsed];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => {
                readings.push((Reading::Unescaped, unescape::read(s)));
                readings.push((Reading::PercentDecoded, percent_read(s)));
            }
            Value::Array(items) => stack.extend(items),
            Value::Object(m) => {
                readings.extend(m.keys().map(|k| (Reading::Unescaped, unescape::read(k))));
                readings.extend(m.keys().map(|k| (Reading::PercentDecoded, percent_read(k))));
                let encoded = [
                    (m.get("encoding").and_then(Value::as_str) == Some("base64")).then(|| m.get("content")),
                    Some(m.get("content_base64")),
                ];
                for s in encoded.into_iter().flatten().flatten().filter_map(Value::as_str) {
                    let compact: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                    let lenient = base64::engine::GeneralPurpose::new(
                        &base64::alphabet::STANDARD,
                        base64::engine::GeneralPurposeConfig::new()
                            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
                    );
                    if let Ok(bytes) = base64::Engine::decode(&lenient, compact) {
                        readings.push((Reading::Base64Content, String::from_utf8_lossy(&bytes).into_owned()));
                    }
                }
                stack.extend(m.values());
            }
            _ => {}
        }
    }
    for secret in SECRETS {
        for spelling in SPELLINGS {
            for spelled in (spelling.spell)(secret) {
                for (reading, read) in &readings {
                    if spelling.readings.contains(reading) {
                        assert!(
                            !read.contains(&spelled),
                            "secret {secret:?} survives {} in the {reading:?} reading {read:?} of {text}",
                            spelling.name
                        );
                    }
                }
            }
        }
    }
}

/// The `Link` and `X-Total-Count` parser (`decode/pagination.rs`). The input's lines are
/// the total, the `Link` value, the page asked for and the limit (numbers as text); the
/// bytes of the first line also choose a Gitea-style `Link` to read back.
///
/// Relations are lower case words, one per page number; the page asked for is the page
/// reported; a next page computed from the total follows the page; a `Link` written as
/// Gitea writes it reads back to exactly its relations and pages.
pub fn pagination(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let total = lines.next();
    let link = lines.next();
    let page = lines.next().and_then(|p| p.trim().parse::<u64>().ok()).unwrap_or(1);
    let limit = lines.next().and_then(|l| l.trim().parse::<u64>().ok());
    let req = PageRequest { page, limit };
    let links = link.map(pagination::parse_link).unwrap_or_default();
    for (rel, _) in &links {
        assert!(!rel.is_empty() && !rel.contains(char::is_whitespace) && *rel == rel.to_ascii_lowercase());
    }
    let p = pagination::paginate(req, total, link, &Value::Null);
    assert_eq!((p.page, p.limit), (page, limit));
    let said = |name: &str| links.iter().any(|(r, _)| r == name);
    if !said("next") {
        if let Some(next) = p.next_page {
            assert_eq!(next, page + 1, "a computed next page");
            assert!(p.last_page.is_some_and(|last| next <= last));
        }
    }
    if let (Some(t), Some(l)) = (p.total_count, limit) {
        if l > 0 && !said("last") {
            assert_eq!(p.last_page, Some(t.div_ceil(l).max(1)));
        }
    }
    let rels = ["next", "last", "first", "prev"];
    let written: Vec<(String, u64)> = total
        .unwrap_or("")
        .bytes()
        .map(|b| (rels[usize::from(b % 4)].to_owned(), u64::from(b) * 977 + 1))
        .collect();
    let header = written
        .iter()
        .map(|(rel, n)| {
            format!("<https://git.example/api/v1/repos/o/r/issues?page={n}&limit=30>; rel=\"{rel}\"")
        })
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(pagination::parse_link(&header), written, "{header}");
}

/// OAuth (`oauth/`): the first byte picks the part, the rest is its input.
/// - 0: a form body or query, read as each request's typed form (`oauth/form.rs`): a
///   parameter the request reads holds the one value sent (an empty one as none), or the
///   whole form is refused as `invalid_request` naming a parameter it reads that was sent
///   more than once; nothing else refuses a form.
/// - 1: redirect URIs, the registered one and the one asked for on two lines
///   (`valid_redirect_uri`, `same_redirect`): an accepted URI is absolute, without a
///   fragment, https or http to a loopback host or an app's scheme; a URI is the same as
///   itself, sameness is symmetric, and a URI taken as the registered one differs from it at
///   most in the port of an http loopback address.
/// - 2 and up: sealed tokens (`seal.rs`): text this key did not seal never opens as any
///   kind, nor verifies as an access token; text sealed as one kind opens as that kind
///   only (when within `MAX_SEALED_BYTES`), and changed in one byte opens nowhere.
pub fn oauth(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    match first {
        0 => {
            let pairs: Vec<(String, String)> = url::form_urlencoded::parse(rest).into_owned().collect();
            for form in entry::forms(rest) {
                match &form.read {
                    Ok(values) => {
                        assert_eq!(values.len(), form.fields.len(), "{}", form.name);
                        for (name, got) in form.fields.iter().zip(values) {
                            form_field(&pairs, name, got.as_deref());
                        }
                    }
                    Err(e) => form_refused(&pairs, form.fields, e),
                }
            }
        }
        1 => {
            let text = String::from_utf8_lossy(rest);
            let (registered, asked) = text.split_once('\n').unwrap_or((&text, ""));
            redirect_uri(registered);
            redirect_uri(asked);
            assert!(entry::same_redirect(registered, registered));
            let same = entry::same_redirect(registered, asked);
            assert_eq!(same, entry::same_redirect(asked, registered), "sameness is symmetric");
            if same && registered != asked {
                let (mut a, mut b) = (url::Url::parse(registered).unwrap(), url::Url::parse(asked).unwrap());
                assert_eq!(a.scheme(), "http");
                assert!(a.host().is_some_and(|h| loopback_ip(&h)), "{a}");
                let _ = (a.set_port(None), b.set_port(None));
                assert_eq!(a, b);
            }
        }
        _ => {
            let text = String::from_utf8_lossy(rest);
            let kinds = [
                Kind::Client,
                Kind::Pending,
                Kind::Approved,
                Kind::Code,
                Kind::Access,
                Kind::Refresh,
                Kind::Confirmation,
            ];
            for kind in kinds {
                assert!(!entry::opens_as(sealer(), kind, &text), "{kind:?} opened {text:?}");
                assert!(sealer().open::<Value>(kind, &text).is_err(), "{kind:?} opened {text:?}");
            }
            let token = secrecy::SecretString::from(text.clone().into_owned());
            assert!(!entry::verifies(server_oauth(), &token));
            let kind = kinds[usize::from(first) % kinds.len()];
            let sealed = sealer().seal(kind, &text);
            // Longer sealed text is refused unread, whatever it holds.
            let fits = sealed.len() <= entry::MAX_SEALED_BYTES;
            for other in kinds {
                let opened = sealer().open::<String>(other, &sealed);
                assert_eq!(opened.ok().as_deref(), (other == kind && fits).then_some(&*text), "{other:?}");
            }
            let mut changed = sealed.clone().into_bytes();
            let at = fnv(rest) as usize % changed.len();
            changed[at] = if changed[at] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(changed).expect("sealed text is ASCII");
            for other in kinds {
                assert!(sealer().open::<String>(other, &changed).is_err(), "byte {at} changed: {changed}");
            }
        }
    }
}

/// A field of a form that was read: the one value sent as `name`, none for an empty one.
fn form_field(pairs: &[(String, String)], name: &str, got: Option<&str>) {
    let sent: Vec<&str> = pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect();
    assert!(sent.len() <= 1, "{name} was sent {} times, yet read", sent.len());
    assert_eq!(got, sent.first().copied().filter(|v| !v.is_empty()), "{name}");
}

/// A form refused: for one of its `fields`, sent more than once, and named.
fn form_refused(pairs: &[(String, String)], fields: &[&str], e: &entry::OAuthError) {
    assert_eq!((e.status, e.code), (400, "invalid_request"), "{e:?}");
    let name = e.description.strip_prefix("the parameter ").and_then(|d| d.strip_suffix(" is repeated"));
    let name = name.unwrap_or_else(|| panic!("a form refused for another reason: {e:?}"));
    assert!(fields.contains(&name), "{name} is not a field of the form");
    assert!(pairs.iter().filter(|(k, _)| k == name).count() >= 2, "{name} was not repeated");
}

/// The redirect URI rules, checked from the parsed URL.
fn redirect_uri(uri: &str) {
    let Ok(()) = entry::valid_redirect_uri(uri) else { return };
    let url = url::Url::parse(uri).expect("an accepted redirect URI is a URL");
    assert!(url.fragment().is_none() && uri.chars().count() <= 512);
    let forbidden = ["javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"];
    assert!(!forbidden.contains(&url.scheme()), "{uri}");
    if url.scheme() == "http" {
        let loopback = match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(h) => loopback_ip(&h),
            None => false,
        };
        assert!(loopback, "http to a host that is not loopback: {uri}");
    }
}

fn loopback_ip<S>(host: &url::Host<S>) -> bool {
    match host {
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
        url::Host::Domain(_) => false,
    }
}

/// `audit verify`'s reader (`audit.rs`). The input is a file's contents, with one help so that
/// the fuzzer reaches past the first line, whose MAC it cannot compute: a line `!{...}` is
/// replaced by that object sealed as the server seals a line, with a `prev` of `"@"` first
/// replaced by the mac of the line sealed before (so chains that verify can be written, then
/// broken). Split at its first form feed, it is also two files checked one after the other.
///
/// Lines counted are lines of the file; in a file found whole every line ends with a line
/// end but for a torn tail after the last, which a note names, and its last mac is its last
/// whole line's; the break named is a line of the file; the report of two files is "ok" only
/// when each is whole; nothing verifies with another key.
pub fn audit_verify(data: &[u8]) {
    let key = audit_key(7);
    let data = sealed_lines(data, &key);
    let data = &data[..];
    let report = entry::verify_reader(data, &key).expect("bytes in memory read");
    let newlines = data.iter().filter(|&&b| b == b'\n').count() as u64;
    assert!(report.lines <= newlines);
    match &report.broken {
        None => {
            assert_eq!(report.lines, newlines);
            // What follows the last line end is a torn tail, named by a note.
            let whole = data.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
            if whole < data.len() {
                assert!(report.notes.iter().any(|n| n.contains("without a line end")), "{:?}", report.notes);
            }
            if let Some((_, mac)) = &report.last {
                let last = data[..whole - 1].rsplit(|&b| b == b'\n').next().unwrap_or_default();
                let end = &last[last.len() - 66..last.len() - 2];
                assert_eq!(mac.as_bytes(), end, "the last mac is the last whole line's");
            }
        }
        Some((n, why)) => assert!(*n >= 1 && *n <= newlines + 1 && !why.is_empty(), "line {n}: {why}"),
    }
    if report.lines > 0 {
        let other = entry::verify_reader(data, &audit_key(8)).expect("bytes in memory read");
        assert_eq!(other.lines, 0, "a line verified with another key");
    }
    let (a, b) = match data.iter().position(|&b| b == b'\x0c') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let files = [("a".to_owned(), Ok(a)), ("b".to_owned(), Ok(b))];
    let (out, ok) = entry::verify_each(files, &key);
    let whole = |f: &[u8]| entry::verify_reader(f, &key).is_ok_and(|r| r.broken.is_none());
    if ok {
        assert!(whole(a) && whole(b), "{out}");
    }
    assert!(out.lines().count() >= 2, "one line or more per file: {out}");
}

/// The audit key made of 32 bytes of `byte`.
fn audit_key(byte: u8) -> AuditKey {
    AuditKey::new(&secrecy::SecretBox::new(Box::new([byte; 32])))
}

/// `data` with each line `!{...}` sealed as the server seals a line (`audit_verify`).
fn sealed_lines(data: &[u8], key: &AuditKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut last_mac = entry::GENESIS.to_owned();
    let mut lines = data.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        match line
            .strip_prefix(b"!")
            .and_then(|rest| serde_json::from_slice::<serde_json::Map<String, Value>>(rest).ok())
        {
            Some(mut object) => {
                if object.get("prev").and_then(Value::as_str) == Some("@") {
                    object.insert("prev".into(), last_mac.clone().into());
                }
                let (bytes, mac) = entry::seal(key, &object);
                out.extend_from_slice(&bytes);
                last_mac = mac;
            }
            None => out.extend_from_slice(line),
        }
        if lines.peek().is_some() {
            out.push(b'\n');
        }
    }
    out
}

/// The skim of a message too long to keep (`transport/jsonrpc.rs`, `Skim`). The input is a
/// message; its first byte says into what pieces it arrives.
///
/// However the bytes are cut, the skim finds the same. What it finds agrees with a parser
/// (the message read, then written back as a parser writes it, so that no member is there
/// twice): the id when it is a string or an integer, the method, the tool name and `_meta`,
/// each when small enough to keep. `oversized` makes of it a tool call marked `Oversized`, an
/// error with a valid id, or nothing.
pub fn skim(data: &[u8]) {
    let Some((&first, message)) = data.split_first() else { return };
    let skim_in = |bytes: &[u8], piece: usize| entry::skim(bytes.chunks(piece.max(1)));
    let whole = skim_in(message, usize::MAX);
    assert_eq!(skim_in(message, 1 + usize::from(first)), whole, "the same however cut");
    match entry::oversized(whole, 100) {
        Read::Message(m) => {
            let Some(marked) = m.oversized_mark() else { panic!("not a request: {m:?}") };
            assert!(marked);
        }
        Read::Answer(a) => assert_jsonrpc_error(&a),
        Read::Nothing => {}
    }
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(message) else { return };
    let written = serde_json::to_vec(&m).expect("a value serializes");
    let head = skim_in(&written, 1 + usize::from(first));
    let small = |v: &Value, max: usize| serde_json::to_string(v).is_ok_and(|t| t.len() <= max);
    let id =
        m.get("id").filter(|id| id.is_string() || id.is_i64() || id.is_u64()).filter(|id| small(id, 128));
    assert_eq!(head.id(), id, "the id of {m:?}");
    assert_eq!(head.has_id(), m.contains_key("id"));
    let text = |v: Option<&Value>, max: usize| {
        v.filter(|v| small(v, max)).and_then(Value::as_str).map(str::to_owned)
    };
    assert_eq!(head.method(), text(m.get("method"), 128).as_deref(), "the method of {m:?}");
    let params = m.get("params").and_then(Value::as_object);
    assert_eq!(head.name(), text(params.and_then(|p| p.get("name")), 512).as_deref(), "the name of {m:?}");
    let meta = params.and_then(|p| p.get("_meta")).filter(|v| v.is_object() && small(v, 8192));
    assert_eq!(head.meta(), meta, "the _meta of {m:?}");
}

/// This forge as a URL in an argument names it (`policy/repos.rs`, `ForgeHost::repository`):
/// a migration's `clone_addr`, a push mirror's address. The input is the text, judged
/// against a forge at `https://git.example.com/` whose host had the address 203.0.113.5.
///
/// A repository it names has an owner and a name, neither empty; the same repository, written in other spellings (the host in capitals or as its address,
/// userinfo, another scheme or port, `.git`, a trailing `/`, every byte of the names
/// percent-encoded), is named again; another host names none.
pub fn forge_url(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let forge = forge_host();
    let Ok(Some((owner, repo))) = forge.repository(&text) else { return };
    assert!(!owner.is_empty() && !repo.is_empty(), "{text:?}");
    let enc =
        |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
    let (o, r) = (enc(&owner), enc(&repo));
    for spelled in [
        format!("https://GIT.EXAMPLE.COM/{o}/{r}"),
        format!("http://someone:pw@git.example.com:3000/{o}/{r}.git/"),
        format!("ssh://git@203.0.113.5:2222/{o}/{r}.git"),
        format!("git://git.example.com./{o}/{r}"),
    ] {
        let again = forge.repository(&spelled);
        assert_eq!(again, Ok(Some((owner.clone(), repo.clone()))), "{text:?} spelled {spelled:?}");
    }
    assert_eq!(forge.repository(&format!("https://elsewhere.example/{o}/{r}")), Ok(None));
}

/// The resource URI parser (`resources.rs`): a client's `resources/read` URI, as text.
///
/// A URI it accepts reads at least one operation the Gitea catalog has (whose schema then
/// judges the arguments, as for a call); a file or attachment read, written back as the URI
/// of its link (`envelope::link::uri_of`), is read again the same way.
pub fn resource_uri(data: &[u8]) {
    let uri = String::from_utf8_lossy(data);
    let Ok(reads) = entry::reads_of(&uri) else { return };
    assert!(!reads.is_empty(), "{uri:?}");
    let catalog = gitea_catalog();
    for read in &reads {
        let tool = catalog.get(read.operation).unwrap_or_else(|| panic!("{uri:?}: {}", read.operation));
        let _ = aegis_core::args::validate::validate(tool, &mut read.args.clone());
        if let Some(again) = aegis_core::envelope::link::uri_of(None, read.operation, &read.args) {
            let back = entry::reads_of(&again).unwrap_or_else(|e| panic!("{uri:?} → {again:?}: {e}"));
            assert_eq!(
                (back[0].operation, &back[0].args),
                (read.operation, &read.args),
                "{uri:?} → {again:?}"
            );
        }
    }
}

/// The Gitea catalog, built once per process.
fn gitea_catalog() -> &'static aegis_core::catalog::Catalog {
    static CATALOG: std::sync::OnceLock<aegis_core::catalog::Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        let f = aegis_core::catalog::Flavor::Gitea;
        aegis_core::catalog::Catalog::build(f.embedded_spec(), f, None).expect("the embedded spec builds")
    })
}

/// The shape stage (`shape/`) on any forge answer: bytes 0–1 pick an operation of either
/// catalog (its result type), byte 2 the shape and whether `fields` are given; the first line
/// after them is `fields` as JSON (through `Ask::take`), the rest the answer as JSON.
///
/// `Ask::take` gives only valid member paths, or an `invalid_arguments` error; the full shape
/// without `fields` is the answer itself; the compact one leaves, at any depth, no derivable
/// link not asked for and no member empty or default, and rendering it again changes nothing;
/// with `fields`, each object item of a listing keeps only members the paths begin with.
pub fn shape(data: &[u8]) {
    use aegis_core::shape::{self as stage, Ask, Shape};
    let [a, b, mode, rest @ ..] = data else { return };
    let text = String::from_utf8_lossy(rest);
    let (fields_line, answer) = text.split_once('\n').unwrap_or(("", &text));
    let Ok(answer) = serde_json::from_str::<Value>(answer) else { return };
    let catalog = &catalogs()[usize::from(a & 1)];
    let ops: Vec<&ToolDef> = catalog.operations().map(|t| t.as_ref()).collect();
    let op =
        ops[usize::from(u16::from_le_bytes([*a, *b]) >> 1) % ops.len()].operation().expect("an operation");
    let result = op.result.as_ref();
    let shape = if mode & 1 == 0 { Shape::Compact } else { Shape::Full };
    let fields = if mode & 2 == 0 {
        None
    } else {
        let Ok(v) = serde_json::from_str::<Value>(fields_line) else { return };
        let mut args = serde_json::Map::new();
        args.insert("fields".into(), v);
        match Ask::take(&mut args) {
            Ok(ask) => {
                for p in ask.fields.iter().flatten() {
                    assert!(!p.is_empty() && p.split('.').all(|s| !s.is_empty()), "{p:?}");
                }
                ask.fields
            }
            Err(e) => {
                assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments));
                return;
            }
        }
    };
    let defs = catalog.definitions();
    if let Some(f) = &fields
        && stage::check_fields(defs, result, f).is_err()
    {
        return;
    }
    let mut out = answer.clone();
    if stage::render(defs, result, shape, fields.as_deref(), &mut out).is_err() {
        assert!(
            fields.is_some() && result.is_none(),
            "only an untyped result checks fields against the data"
        );
        return;
    }
    if let Some(f) = &fields {
        let firsts: Vec<&str> = f.iter().map(|p| p.split('.').next().unwrap_or(p)).collect();
        if let (Value::Array(items), false) = (&out, result.is_some_and(|t| !t.list)) {
            for item in items.iter().filter_map(Value::as_object) {
                assert!(item.keys().all(|k| firsts.contains(&k.as_str())), "{item:?} beyond {f:?}");
            }
        }
    }
    match shape {
        Shape::Full if fields.is_none() => assert_eq!(out, answer),
        Shape::Full => {}
        Shape::Compact => {
            let asked: Vec<&str> = fields.iter().flatten().filter_map(|p| p.rsplit('.').next()).collect();
            compact_holds(&out, &asked);
            if fields.is_none() {
                let mut again = out.clone();
                stage::render(defs, result, Shape::Compact, None, &mut again).expect("no fields, no refusal");
                assert_eq!(again, out, "compact twice differs from once");
            }
        }
    }
}

/// No derivable link not `asked` for and no empty or default member, at any depth: what
/// the compact shape promises (the sweep over every operation checks it too).
pub fn compact_holds(v: &Value, asked: &[&str]) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| compact_holds(i, asked)),
        Value::Object(m) => {
            for (k, v) in m {
                let link = aegis_core::shape::entities::DERIVABLE_URLS.contains(&k.as_str());
                assert!(!link || asked.contains(&k.as_str()), "{k} left in {m:?}");
                let empty = match v {
                    Value::Null => true,
                    Value::Bool(b) => !b,
                    Value::Number(n) => n.as_f64() == Some(0.0),
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty(),
                };
                assert!(!empty, "{k} empty in {m:?}");
                compact_holds(v, asked);
            }
        }
        _ => {}
    }
}

/// The forge `forge_url` judges against.
fn forge_host() -> &'static aegis_core::policy::repos::ForgeHost {
    static FORGE: OnceLock<aegis_core::policy::repos::ForgeHost> = OnceLock::new();
    FORGE.get_or_init(|| {
        aegis_core::policy::repos::ForgeHost::new(
            url::Url::parse("https://git.example.com/").ok(),
            vec![std::net::IpAddr::from([203, 0, 113, 5])],
        )
    })
}

/// The server's guard for one choice of mode, hygiene and bounds, built once (as a server
/// builds it once): building its scanners for every input would be most of the work.
fn server_guard(mode: u8, bounds: u8, build: impl FnOnce() -> Guard) -> Guard {
    static GUARDS: OnceLock<std::sync::Mutex<std::collections::HashMap<(u8, u8), Guard>>> = OnceLock::new();
    let mut guards = GUARDS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    guards.entry((mode, bounds)).or_insert_with(build).clone()
}

/// The embedded Gitea and Forgejo catalogs, built once.
fn catalogs() -> &'static [Catalog; 2] {
    static CATALOGS: OnceLock<[Catalog; 2]> = OnceLock::new();
    CATALOGS.get_or_init(|| {
        [Flavor::Gitea, Flavor::Forgejo]
            .map(|f| Catalog::build(f.embedded_spec(), f, None).expect("the embedded specs build"))
    })
}

/// A forge client nothing is sent with: its URL check is the executor's own.
fn forge() -> &'static entry::Forge {
    static FORGE: OnceLock<entry::Forge> = OnceLock::new();
    FORGE.get_or_init(|| {
        let limits = body::Limits { max_binary: 1 << 20, max_response: 1 << 20 };
        let s = std::time::Duration::from_secs(1);
        entry::Forge::new(url::Url::parse("http://forge.invalid/").unwrap(), limits, s)
            .expect("a client for a fixed URL builds")
    })
}

/// The sealing key of the OAuth part (the bytes of no real key).
fn sealer() -> &'static Sealer {
    static SEALER: OnceLock<Sealer> = OnceLock::new();
    SEALER.get_or_init(|| Sealer::new(&secrecy::SecretBox::new(Box::new([0x5a; 32]))))
}

/// An authorization server with the same key.
fn server_oauth() -> &'static aegis_gitea_mcp::oauth::OAuth {
    static OAUTH: OnceLock<aegis_gitea_mcp::oauth::OAuth> = OnceLock::new();
    OAUTH.get_or_init(|| {
        entry::oauth_server("forge-app", "forge-app-secret", "http://127.0.0.1:8080", [0x5a; 32])
    })
}

/// A single-threaded runtime for the async readers.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().build().expect("a runtime without I/O builds")
    })
}

/// Percent-decoding of a path segment, as text (lossy: the tests compare text).
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// FNV-1a: a stable choice from bytes.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Every file of the committed corpus and every kept crash input, through its target:
    /// what fuzzing found once is checked in every test run.
    #[test]
    fn the_committed_corpus_and_every_crash_input_pass_their_targets() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
        let mut failed = Vec::new();
        let mut counts = BTreeMap::new();
        for (name, target) in TARGETS {
            for dir in ["corpus", "regressions"] {
                let Ok(entries) = std::fs::read_dir(root.join(dir).join(name)) else { continue };
                for entry in entries {
                    let path = entry.unwrap().path();
                    let bytes = std::fs::read(&path).unwrap();
                    *counts.entry(*name).or_insert(0usize) += 1;
                    if std::panic::catch_unwind(|| target(&bytes)).is_err() {
                        failed.push(path.display().to_string());
                    }
                }
            }
        }
        assert!(failed.is_empty(), "inputs that fail their target: {failed:#?}");
        for (name, _) in TARGETS {
            assert!(counts.get(name).is_some_and(|&n| n > 0), "no corpus for {name}");
        }
    }

    /// The committed corpus is the minimised one (`scripts/fuzz` keeps the fewest inputs
    /// that reach every edge reached): a few hundred files a target, not the thousands a
    /// run leaves behind.
    #[test]
    fn the_committed_corpus_is_minimised() {
        const MOST_FILES: usize = 600;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        for (name, _) in TARGETS {
            let files = std::fs::read_dir(root.join(name)).map_or(0, Iterator::count);
            assert!(files <= MOST_FILES, "{name}: {files} files; run scripts/fuzz to minimise it");
        }
    }

    #[test]
    fn every_target_has_its_fuzz_target_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/fuzz_targets");
        for (name, _) in TARGETS {
            let text = std::fs::read_to_string(dir.join(format!("{name}.rs"))).unwrap();
            assert!(text.contains(&format!("fuzzing::{name}(")), "{name}");
        }
    }

    #[test]
    fn secrets_are_spelled_as_the_guard_target_writes_them() {
        assert_eq!(with_secrets(b"<\x01>"), b"<Zq7GLOBALtok3n0x>");
        assert_eq!(&with_secrets(b"\x06")[..12], br"\u0070\u0061");
        assert_eq!(json_escaped(SECRETS[1]), ["pa\\\"ss\\\\w\u{f6}rd-7Kq"]);
    }
}
