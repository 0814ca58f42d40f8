//! Reading one JSON-RPC message from the bytes a client sent, and what to answer when they
//! are none: a message is passed on; text that is not JSON gets a parse error (-32700, id
//! null); JSON that is no message an Invalid Request (-32600, with its id when one can be
//! read); a notification that cannot be read nothing, as notifications are never answered.
//! Used by every transport, so that a client always learns why its message was not taken.

use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

/// JSON-RPC's code for text that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;

/// Most JSON values one message may hold. An MCP message holds a few dozen, a tool call's
/// arguments a few thousand at most; parsed, each value costs up to 80 bytes, so without this
/// a 4 MiB body of `[0,0,…]` would take 160 MB.
pub const MAX_VALUES: usize = 100_000;

/// Refuse, before anything parses it, a message that holds more than `MAX_VALUES` JSON values
/// (counted in one pass: openings and separators outside strings); the error to answer.
pub fn check_values(bytes: &[u8]) -> Result<(), Value> {
    let mut count = 0usize;
    let fits = crate::decode::json::structure(bytes, |b| {
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
pub enum Read {
    Message(Box<ClientJsonRpcMessage>),
    /// To be answered with this error response.
    Answer(Value),
    /// Nothing to do (an empty line, a notification we cannot read).
    Nothing,
}

/// Read one message (a line without its newline, or a request body).
pub fn read(line: &[u8]) -> Read {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Read::Nothing;
    }
    if let Ok(m) = serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        return Read::Message(Box::new(m));
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Read::Answer(error(Value::Null, PARSE_ERROR, "Parse error: the message is not JSON"));
    };
    let is_notification = v.get("method").is_some() && v.get("id").is_none();
    if is_notification {
        return Read::Nothing;
    }
    let id = match v.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => Value::Null,
    };
    Read::Answer(error(
        id,
        INVALID_REQUEST,
        "Invalid Request: not a JSON-RPC request, notification or response",
    ))
}

/// A JSON-RPC error response.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
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
}
