//! Reading one JSON-RPC message from the bytes a client sent, and what to answer when they
//! are none: a message is passed on; text that is not JSON gets a parse error (-32700, id
//! null); JSON that is no message an Invalid Request (-32600, with its id when one can be
//! read); a notification that cannot be read nothing, as notifications are never answered.
//! Used by every transport, so that a client always learns why its message was not taken.
//!
//! A message too long to keep is not parsed, but skimmed as it arrives (`Skim`: one pass, a
//! few KiB kept whatever its length) for its `id`, `method`, and a tool call's `name` and
//! `_meta`, so that its answer reaches the request that caused it: a `tools/call` becomes a
//! call of that tool marked `Oversized`, which the handler answers with the tool error
//! `payload_too_large`; another request gets its error with its own id.

use rmcp::model::{ClientJsonRpcMessage, GetExtensions, JsonRpcMessage};
use serde_json::{Value, json};

use crate::mcp::Oversized;

/// JSON-RPC's code for text that is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub(crate) const INVALID_REQUEST: i64 = -32600;

/// Most JSON values one message may hold. An MCP message holds a few dozen, a tool call's
/// arguments a few thousand at most; parsed, each value costs up to 80 bytes, so without this
/// a 4 MiB body of `[0,0,…]` would take 160 MB.
pub(crate) const MAX_VALUES: usize = 100_000;

/// Refuse, before anything parses it, a message that holds more than `MAX_VALUES` JSON values
/// (counted in one pass: openings and separators outside strings); the error to answer.
pub(crate) fn check_values(bytes: &[u8]) -> Result<(), Value> {
    let mut count = 0usize;
    let fits = aegis_core::decode::json::structure(bytes, |b| {
        count += usize::from(matches!(b, b'[' | b'{' | b','));
        count <= MAX_VALUES
    });
    if fits {
        return Ok(());
    }
    Err(error(
        Value::Null,
        INVALID_REQUEST,
        &format!("Invalid Request: the message holds more than {MAX_VALUES} JSON values"),
    ))
}

/// What a client's bytes are.
#[derive(Debug)]
pub(crate) enum Read {
    Message(Box<ClientJsonRpcMessage>),
    /// To be answered with this error response.
    Answer(Value),
    /// Nothing to do (an empty line, a notification we cannot read).
    Nothing,
}

/// Read one message (a line without its newline, or a request body).
pub(crate) fn read(line: &[u8]) -> Read {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Read::Nothing;
    }
    // A key given twice would be read by one reader as its first value and by another as
    // its last (the typed reading then takes the whole message for another kind).
    if let Some((v, why)) = twice(line) {
        return if is_notification(&v) { Read::Nothing } else { Read::Answer(why) };
    }
    if let Ok(m) = serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        return Read::Message(Box::new(m));
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Read::Answer(error(Value::Null, PARSE_ERROR, "Parse error: the message is not JSON"));
    };
    if is_notification(&v) {
        return Read::Nothing;
    }
    Read::Answer(error(
        id_of(&v),
        INVALID_REQUEST,
        "Invalid Request: not a JSON-RPC request, notification or response",
    ))
}

fn is_notification(v: &Value) -> bool {
    v.get("method").is_some() && v.get("id").is_none()
}

/// The id to answer a message that is not taken with: its own when it is one an id can be.
fn id_of(v: &Value) -> Value {
    match v.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => Value::Null,
    }
}

/// Refuse a message in which one object has a key twice (for the transports that hand the
/// bytes on to another reader); the error to answer. Bytes that are not JSON pass: the
/// reader after says so.
pub(crate) fn check_distinct(bytes: &[u8]) -> Result<(), Value> {
    twice(bytes).map_or(Ok(()), |(_, why)| Err(why))
}

/// When an object of `bytes` has a key twice: the message as `serde_json` reads it (the last
/// of each) and the error to answer, with the message's id unless that is the key given twice.
/// One pass that keeps only the keys of the objects open.
fn twice(bytes: &[u8]) -> Option<(Value, Value)> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let e = serde::de::DeserializeSeed::deserialize(Distinct { root: true }, &mut reader).err()?;
    if !e.is_data() {
        return None;
    }
    let v = serde_json::from_slice::<Value>(bytes).ok()?;
    // serde_json's words and where: the key and its place are ours, the line is not needed.
    let why = e.to_string();
    let why = why.split(" at line ").next().unwrap_or_default();
    let id = if why == ROOT_ID_TWICE { Value::Null } else { id_of(&v) };
    let answer =
        error(id, INVALID_REQUEST, &format!("Invalid Request: {why} (a key may appear once in an object)"));
    Some((v, answer))
}

/// The error of a message whose own `id` is given twice: which one to answer is not known.
const ROOT_ID_TWICE: &str = "the key \"id\" appears twice in the message";

/// Reads past any JSON value, failing at an object that has a key twice (`serde_json` keeps
/// the last); the error names the key and whether it is one of the message's own members.
#[derive(Clone, Copy)]
struct Distinct {
    root: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for Distinct {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Distinct {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Distinct { root: false })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key_seed(Key)? {
            map.next_value_seed(Distinct { root: false })?;
            if seen.contains(&key) {
                let message = if self.root && key == "id" {
                    ROOT_ID_TWICE.to_owned()
                } else {
                    let key = Value::String(key.chars().take(64).collect());
                    let place = if self.root { "the message" } else { "one of its objects" };
                    format!("the key {key} appears twice in {place}")
                };
                return Err(serde::de::Error::custom(message));
            }
            seen.insert(key);
        }
        Ok(())
    }
}

/// An object's key, borrowed from the bytes unless it has escapes.
struct Key;

impl<'de> serde::de::DeserializeSeed<'de> for Key {
    type Value = std::borrow::Cow<'de, str>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Key {
    type Value = std::borrow::Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(s.to_owned()))
    }
}

/// A JSON-RPC error response.
pub(crate) fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Longest values a skim keeps: an id, a method and a tool name are short; a request's
/// `_meta` carries a protocol version and capabilities.
const MAX_ID: usize = 128;
const MAX_METHOD: usize = 128;
const MAX_NAME: usize = 512;
const MAX_META: usize = 8192;

/// Which member a kept value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Id,
    Method,
    Name,
    Meta,
}

impl Target {
    fn max(self) -> usize {
        match self {
            Target::Id => MAX_ID,
            Target::Method => MAX_METHOD,
            Target::Name => MAX_NAME,
            Target::Meta => MAX_META,
        }
    }
}

/// How a kept value ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Text,
    Container,
    Scalar,
}

/// A value being kept: its member, how it ends, the depth it started at, and its bytes.
#[derive(Debug)]
struct Keeping {
    target: Target,
    shape: Shape,
    depth: usize,
    bytes: Vec<u8>,
}

/// One pass over a JSON-RPC message's bytes, fed in pieces of any size, that keeps only the
/// members an answer needs: `id` and `method` of the root object, `name` and `_meta` of its
/// `params`, each when small (the first of each). Nothing recurses and nothing grows with
/// the input; bytes that are not JSON end nothing, they only make the skim find less.
#[derive(Debug, Default)]
pub(crate) struct Skim {
    started: bool,
    /// The root is not an object: nothing to find.
    not_an_object: bool,
    /// Containers open now, and for the first two whether each is an object.
    depth: usize,
    objects: [bool; 2],
    in_string: bool,
    escaped: bool,
    /// In an object at depth 1 or 2, the next string is a key.
    want_key: bool,
    /// The key being read (at most 64 bytes kept, its closing quote included).
    key: Option<Vec<u8>>,
    /// The last key read at depth 1 and at depth 2.
    members: [Option<String>; 2],
    /// After a `:` at depth 1 or 2: the next value belongs to `members`.
    value_next: bool,
    keeping: Option<Keeping>,
    found: [Option<Vec<u8>>; 4],
    /// Members seen, kept or not (a too-long id is still an id: the message is a request).
    seen: [bool; 4],
}

/// What a skim found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Head {
    /// The id, when it is a string or an integer (the ids the server can answer to).
    pub(crate) id: Option<Value>,
    /// Whether the message has an `id` member at all (a request), readable or not.
    pub(crate) has_id: bool,
    pub(crate) method: Option<String>,
    /// A `tools/call`'s tool name.
    pub(crate) name: Option<String>,
    /// The request's `_meta` (protocol version and capabilities of a stateless request).
    pub(crate) meta: Option<Value>,
}

impl Skim {
    /// Skim more bytes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.not_an_object {
            return;
        }
        for &b in bytes {
            self.byte(b);
            if self.not_an_object {
                return;
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if !self.started {
            if b.is_ascii_whitespace() || matches!(b, 0xEF | 0xBB | 0xBF) {
                return;
            }
            self.started = true;
            if b != b'{' {
                self.not_an_object = true;
                return;
            }
        }
        if self.in_string {
            self.keep(b);
            if let Some(key) = &mut self.key {
                if key.len() < 64 {
                    key.push(b);
                }
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.member_read(&key);
                } else if self
                    .keeping
                    .as_ref()
                    .is_some_and(|k| k.shape == Shape::Text && k.depth == self.depth)
                {
                    self.finish();
                }
            }
            return;
        }
        let delimiter = matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace();
        if delimiter && self.keeping.as_ref().is_some_and(|k| k.shape == Shape::Scalar) {
            self.finish();
        }
        if b.is_ascii_whitespace() {
            self.keep(b);
            return;
        }
        if std::mem::take(&mut self.value_next) {
            self.start(b);
        }
        self.keep(b);
        match b {
            b'"' => {
                self.in_string = true;
                if std::mem::take(&mut self.want_key) {
                    self.key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if let Some(i) = self.depth.checked_sub(1).filter(|i| *i < 2) {
                    self.objects[i] = b == b'{';
                    self.members[i] = None;
                }
                self.want_key = b == b'{' && self.depth <= 2;
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                self.want_key = false;
                if self.keeping.as_ref().is_some_and(|k| k.shape == Shape::Container && k.depth == self.depth)
                {
                    self.finish();
                }
            }
            b':' => {
                self.value_next = (1..=2).contains(&self.depth);
                self.want_key = false;
            }
            b',' => self.want_key = (1..=2).contains(&self.depth) && self.objects[self.depth - 1],
            _ => {}
        }
    }

    /// A key at depth 1 or 2 was read (`raw`: its bytes after the opening quote).
    fn member_read(&mut self, raw: &[u8]) {
        let mut quoted = Vec::with_capacity(raw.len() + 1);
        quoted.push(b'"');
        quoted.extend_from_slice(raw);
        let key = serde_json::from_slice::<String>(&quoted).ok();
        if let Some(i) = self.depth.checked_sub(1).filter(|i| *i < 2) {
            self.members[i] = key;
        }
    }

    /// A value begins with `b`: kept when it is one of the members looked for.
    fn start(&mut self, b: u8) {
        let member = |i: usize| self.members[i].as_deref();
        let target = match self.depth {
            1 => match member(0) {
                Some("id") => Some(Target::Id),
                Some("method") => Some(Target::Method),
                _ => None,
            },
            2 if self.objects[1] && member(0) == Some("params") => match member(1) {
                Some("name") => Some(Target::Name),
                Some("_meta") => Some(Target::Meta),
                _ => None,
            },
            _ => None,
        };
        let Some(target) = target else { return };
        let first_time = !std::mem::replace(&mut self.seen[target as usize], true);
        if !first_time {
            return;
        }
        let shape = match b {
            b'"' => Shape::Text,
            b'{' | b'[' => Shape::Container,
            _ => Shape::Scalar,
        };
        self.keeping = Some(Keeping { target, shape, depth: self.depth, bytes: Vec::new() });
    }

    fn keep(&mut self, b: u8) {
        if let Some(k) = &mut self.keeping {
            if k.bytes.len() >= k.target.max() {
                // Too long to answer with: the member was there, its value is not kept.
                self.keeping = None;
            } else {
                k.bytes.push(b);
            }
        }
    }

    fn finish(&mut self) {
        if let Some(k) = self.keeping.take() {
            self.found[k.target as usize] = Some(k.bytes);
        }
    }

    /// What the message said about itself.
    pub(crate) fn head(mut self) -> Head {
        self.finish();
        let value = |t: Target| -> Option<Value> {
            self.found[t as usize].as_deref().and_then(|b| serde_json::from_slice(b).ok())
        };
        let text = |t: Target| match value(t) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let id = match value(Target::Id) {
            Some(id @ Value::String(_)) => Some(id),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
            _ => None,
        };
        Head {
            id,
            has_id: self.seen[Target::Id as usize],
            method: text(Target::Method),
            name: text(Target::Name),
            meta: value(Target::Meta).filter(Value::is_object),
        }
    }
}

/// What to do with a message longer than `limit` bytes, from what a skim found: a
/// `tools/call` becomes a call of its tool marked `Oversized` (answered with the tool error
/// `payload_too_large`); another request gets an Invalid Request error with its id; a
/// notification nothing; what is no readable request a parse error with a null id.
pub(crate) fn oversized(head: Head, limit: usize) -> Read {
    let too_long = format!("the message is longer than {limit} bytes (MCP_MAX_BODY_BYTES)");
    let Some(id) = head.id else {
        if head.method.is_some() && !head.has_id {
            return Read::Nothing;
        }
        return Read::Answer(error(Value::Null, PARSE_ERROR, &format!("Parse error: {too_long}")));
    };
    if head.method.as_deref() == Some("tools/call") {
        if let Some(name) = &head.name {
            let mut params = json!({"name": name, "arguments": {}});
            if let Some(meta) = head.meta {
                params["_meta"] = meta;
            }
            let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
            if let Ok(mut m) = serde_json::from_value::<ClientJsonRpcMessage>(message) {
                if let JsonRpcMessage::Request(r) = &mut m {
                    r.request.extensions_mut().insert(Oversized { limit });
                    return Read::Message(Box::new(m));
                }
            }
        }
    }
    Read::Answer(error(id, INVALID_REQUEST, &format!("Invalid Request: {too_long}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_with_too_many_values_are_refused_before_parsing() {
        let many = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert_eq!(check_values(many.as_bytes()).unwrap_err()["error"]["code"], INVALID_REQUEST);
        // Separators inside strings do not count.
        let text = format!(r#"{{"a": "{}"}}"#, ",[{".repeat(MAX_VALUES));
        assert!(check_values(text.as_bytes()).is_ok());
        assert!(check_values(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1,2,3]}}"#).is_ok());
    }

    fn answer(line: &[u8]) -> Value {
        match read(line) {
            Read::Answer(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lines_that_are_not_json_get_a_parse_error_with_a_null_id() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{}1{},\"method\":\"ping\"}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":1{},\"method\":\"ping\"}}", "0".repeat(100_000));
        for line in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}"[..],
            deep.as_bytes(),
            big.as_bytes(),
            b"{oops",
        ] {
            let a = answer(line);
            assert_eq!((a["id"].clone(), a["error"]["code"].as_i64()), (Value::Null, Some(-32700)), "{a}");
        }
    }

    #[test]
    fn json_that_is_no_message_is_an_invalid_request_with_its_id() {
        assert_eq!(answer(br#"{"jsonrpc":"2.0","id":7,"method":42}"#)["id"], 7);
        assert_eq!(answer(br#"{"jsonrpc":"2.0","id":"a","params":1}"#)["id"], "a");
        assert_eq!(answer(br#"[1,2]"#)["error"]["code"], -32600);
        assert_eq!(answer(br#"{"id":1.5,"x":1}"#)["id"], Value::Null);
    }

    /// A key given twice is read differently by different readers (and by the typed reading,
    /// which took such an `initialize` for a custom request): refused anywhere in a request,
    /// answered with the request's id unless that is the key given twice.
    #[test]
    fn a_key_given_twice_anywhere_is_an_invalid_request_naming_it() {
        let init = br#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
        let a = answer(init);
        assert_eq!((a["id"].clone(), a["error"]["code"].as_i64()), (json!(4), Some(INVALID_REQUEST)), "{a}");
        let why = a["error"]["message"].as_str().unwrap();
        assert_eq!(
            why,
            r#"Invalid Request: the key "capabilities" appears twice in one of its objects (a key may appear once in an object)"#
        );
        let call = br#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"repoDelete","arguments":{"owner":"a","repo":"x","repo":"y"}}}"#;
        assert_eq!(answer(call)["id"], "c");
        let ids = answer(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
        assert_eq!(ids["id"], Value::Null, "{ids}");
        assert!(
            ids["error"]["message"]
                .as_str()
                .unwrap()
                .contains(r#"the key "id" appears twice in the message"#)
        );
        let method = answer(br#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"}"#);
        assert_eq!(method["id"], 3);
        // A notification is never answered; the same message without the second key passes.
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized","method":"x"}"#;
        assert!(matches!(read(note), Read::Nothing));
        let once = br#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
        assert!(matches!(read(once), Read::Message(_)));
        // Same keys in different objects are not twice.
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"id":1,"x":{"id":2}}}"#),
            Read::Message(_)
        ));
    }

    #[test]
    fn messages_pass_and_unreadable_notifications_and_blank_lines_do_nothing() {
        assert!(matches!(read(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Read::Message(_)));
        assert!(matches!(
            read(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
            Read::Message(_)
        ));
        assert!(matches!(
            read(br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":7}"#),
            Read::Nothing
        ));
        assert!(matches!(read(b"   "), Read::Nothing));
    }

    fn skim(bytes: &[u8], piece: usize) -> Head {
        let mut s = Skim::default();
        for chunk in bytes.chunks(piece.max(1)) {
            s.feed(chunk);
        }
        s.head()
    }

    #[test]
    fn a_skim_finds_the_id_method_name_and_meta_anywhere_in_pieces_of_any_size() {
        let big = "A".repeat(100_000);
        let messages = [
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"repoCreateFile","arguments":{{"body":{{"content":"{big}"}}}}}}}}"#
            ),
            format!(
                r#"{{"params":{{"arguments":{{"x":["{big}",{{"id":9,"name":"no"}}]}},"_meta":{{"v":"2026-07-28"}},"name":"repo\u0043reateFile"}},"method":"tools/call","jsonrpc":"2.0","id":"abc"}}"#
            ),
            format!(
                " \u{FEFF}{{ \"jsonrpc\" : \"2.0\" , \"method\":\"tools/call\", \"params\" : {{ \"name\" : \"t\" , \"arguments\":\"{big}\" }} ,\n \"\\u0069d\" : 42 }}"
            ),
        ];
        let want = [
            (json!(7), "repoCreateFile", None),
            (json!("abc"), "repoCreateFile", Some(json!({"v": "2026-07-28"}))),
            (json!(42), "t", None),
        ];
        for (m, (id, name, meta)) in messages.iter().zip(want) {
            for piece in [1, 7, 4096, usize::MAX] {
                let h = skim(m.as_bytes(), piece);
                assert_eq!(h.id.as_ref(), Some(&id), "{piece}");
                assert_eq!(h.method.as_deref(), Some("tools/call"));
                assert_eq!(h.name.as_deref(), Some(name), "{piece}");
                assert_eq!(h.meta, meta, "{piece}");
            }
        }
    }

    #[test]
    fn a_skim_keeps_little_and_finds_nothing_in_what_is_not_a_request() {
        // A long id, a float id, no id, an array, garbage: nothing to answer to.
        let long = format!(r#"{{"id":"{}","method":"tools/call"}}"#, "i".repeat(1000));
        let h = skim(long.as_bytes(), 100);
        assert_eq!((h.id, h.has_id), (None, true));
        assert_eq!(skim(br#"{"id":1.5,"method":"x"}"#, 3).id, None);
        let note = skim(br#"{"method":"notifications/x","params":{"a":1}}"#, 5);
        assert!(!note.has_id && note.method.is_some());
        assert_eq!(skim(br#"[{"id":1}]"#, 2), Head::default());
        assert_eq!(skim(b"\xff\xfe garbage {\"id\":1}", 4), Head::default());
        // Deep nesting costs nothing: a counter, no recursion.
        let deep = format!(r#"{{"params":{}1{},"id":5}}"#, "[".repeat(1_000_000), "]".repeat(1_000_000));
        assert_eq!(skim(deep.as_bytes(), 65536).id, Some(json!(5)));
    }

    #[test]
    fn an_oversized_tool_call_becomes_a_marked_call_and_other_requests_get_their_id() {
        let head = |m: &str| skim(m.as_bytes(), 1 << 20);
        match oversized(
            head(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{}}}"#),
            10,
        ) {
            Read::Message(m) => {
                let JsonRpcMessage::Request(r) = *m else { panic!() };
                assert_eq!(r.id, rmcp::model::RequestId::Number(3));
                assert!(r.request.extensions().get::<Oversized>().is_some());
            }
            other => panic!("{other:?}"),
        }
        let Read::Answer(a) = oversized(head(r#"{"jsonrpc":"2.0","id":"x","method":"initialize"}"#), 10)
        else {
            panic!()
        };
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (json!("x"), json!(INVALID_REQUEST)));
        assert!(matches!(
            oversized(head(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#), 10),
            Read::Nothing
        ));
        let Read::Answer(a) = oversized(head("nonsense"), 10) else { panic!() };
        assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (Value::Null, json!(PARSE_ERROR)));
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever a message holds and however it is cut, the skim finds what serde finds.
        #[test]
        fn the_skim_agrees_with_a_parser(
            id in prop_oneof![any::<i64>().prop_map(|n| json!(n)), "[a-z\"\\\\]{0,20}".prop_map(|s| json!(s))],
            name in "[A-Za-z\u{e9}\"\\\\ ]{0,30}",
            filler in "[ -~\u{e9}\u{2028}]{0,200}",
            order in 0usize..6,
            piece in 1usize..64,
        ) {
            let members = [
                ("jsonrpc".to_owned(), json!("2.0")),
                ("id".to_owned(), id.clone()),
                ("method".to_owned(), json!("tools/call")),
                ("params".to_owned(), json!({"arguments": {"f": filler, "name": "no", "id": 0}, "name": name})),
            ];
            let mut members = members.to_vec();
            members.rotate_left(order % 4);
            if order >= 4 {
                members.reverse();
            }
            let text = serde_json::to_string(&Value::Object(members.into_iter().collect())).unwrap();
            let h = skim(text.as_bytes(), piece);
            prop_assert_eq!(h.id, Some(id));
            prop_assert_eq!(h.method.as_deref(), Some("tools/call"));
            prop_assert_eq!(h.name, Some(name));
        }
    }
}
