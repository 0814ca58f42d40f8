//! JSON text → `Value`, keeping only what a result can show.
//!
//! A parsed `Value` costs up to 80 bytes per element (a number, an empty list), so a 14 MiB
//! array of small numbers grew to 630 MB. A result never shows more than
//! `MAX_TOOL_RESPONSE_ITEMS` items of a list, nor more values than it has characters, so the
//! parser keeps at most that many items per list and that many values in all; the rest is
//! read and counted, never stored. Lists that lost items are reported (`Cut`) so that the
//! bounds can say what was cut, exactly as if the whole list had been parsed and then cut.
//! Memory is then the body plus a bounded number of values.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// How much of a document to keep.
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    /// Items kept per list (`MAX_TOOL_RESPONSE_ITEMS`).
    pub items: usize,
    /// Values kept in all (`MAX_TOOL_RESPONSE_CHARS`: each shown value takes a character).
    pub values: usize,
}

/// A list that lost items while parsing: its JSON Pointer (below the document), how many
/// items were kept and how many it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub pointer: String,
    pub kept: usize,
    pub total: usize,
}

/// Most cut lists recorded (the note shows ten); more are only counted.
pub const MAX_CUTS: usize = 100;
/// Longest JSON Pointer recorded, in characters (keys can be as long as the body).
pub const MAX_POINTER_CHARS: usize = 300;

/// What the parser did not keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elided {
    /// Lists that lost items (the first `MAX_CUTS`).
    pub cuts: Vec<Cut>,
    /// Values were dropped once the overall budget ran out: the document is larger than any
    /// result can show.
    pub budget_spent: bool,
}

impl Elided {
    /// The same, for a document placed at `pointer` within a larger one.
    pub fn under(mut self, pointer: &str) -> Elided {
        for c in &mut self.cuts {
            c.pointer.insert_str(0, pointer);
        }
        self
    }

    /// Add what another part of the same document lost.
    pub fn merge(&mut self, other: Elided) {
        self.cuts.extend(other.cuts);
        self.budget_spent |= other.budget_spent;
    }
}

/// The kept document, and what was not kept.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) value: Value,
    pub(crate) elided: Elided,
}

/// Call `f` with each byte of JSON text that is outside strings (a quote opens a string, but
/// is not passed on) until it returns false; whether it went to the end. One pass, no
/// allocation: the cheap look at a body's shape before anything parses it.
pub fn structure(bytes: &[u8], mut f: impl FnMut(u8) -> bool) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if !f(b) {
            return false;
        }
    }
    true
}

/// Parse `text`, keeping what `keep` allows. Errors are serde_json's (the caller keeps the
/// text instead). Depth is bounded by serde_json's recursion limit (and checked before).
pub(crate) fn parse(text: &str, keep: Keep) -> Result<Parsed, serde_json::Error> {
    let mut state =
        State { keep, left: keep.values.max(1), path: Vec::new(), cuts: Vec::new(), spent: false };
    // The limit is on what is kept; serde_json's own recursion limit bounds the depth.
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Seed(&mut state).deserialize(&mut de)?;
    de.end()?;
    Ok(Parsed { value, elided: Elided { cuts: state.cuts, budget_spent: state.spent } })
}

/// One step of the path to where the parser is.
enum Step {
    Index(usize),
    Key(String),
}

struct State {
    keep: Keep,
    /// Values that may still be kept.
    left: usize,
    path: Vec<Step>,
    cuts: Vec<Cut>,
    spent: bool,
}

impl State {
    /// The pointer of where the parser is, cut to `MAX_POINTER_CHARS` (marked `…`): a key
    /// may be megabytes long, and a pointer is for a person to read.
    fn pointer(&self) -> String {
        let mut out = String::new();
        for s in &self.path {
            out.push('/');
            match s {
                Step::Index(i) => out.push_str(&i.to_string()),
                Step::Key(k) => {
                    let room = MAX_POINTER_CHARS.saturating_sub(out.len());
                    let escaped =
                        crate::error::pointer_segment(&k.chars().take(room + 1).collect::<String>());
                    out.push_str(&escaped);
                }
            }
            if out.chars().count() > MAX_POINTER_CHARS {
                let kept: String = out.chars().take(MAX_POINTER_CHARS).collect();
                return format!("{kept}…");
            }
        }
        out
    }
}

struct Seed<'a>(&'a mut State);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        // Every kept value costs one, a list or an object before its contents.
        self.0.left = self.0.left.saturating_sub(1);
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let st = self.0;
        let mut items = Vec::new();
        let mut total = 0;
        loop {
            if items.len() < st.keep.items && st.left > 0 {
                st.path.push(Step::Index(total));
                let next = seq.next_element_seed(Seed(st));
                st.path.pop();
                match next? {
                    Some(v) => items.push(v),
                    None => break,
                }
            } else {
                if seq.next_element::<IgnoredAny>()?.is_none() {
                    break;
                }
                // Skipped for the overall budget, not for this list's own cap.
                st.spent |= items.len() < st.keep.items;
            }
            total += 1;
        }
        if total > items.len() {
            if st.cuts.len() < MAX_CUTS {
                st.cuts.push(Cut { pointer: st.pointer(), kept: items.len(), total });
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let st = self.0;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if st.left == 0 {
                map.next_value::<IgnoredAny>()?;
                st.spent = true;
                continue;
            }
            // The key travels in the path while its value is parsed, then into the map.
            st.path.push(Step::Key(key));
            let value = map.next_value_seed(Seed(st));
            let Some(Step::Key(key)) = st.path.pop() else { unreachable!("pushed above") };
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WIDE: Keep = Keep { items: 3, values: 1_000 };

    #[test]
    fn small_documents_are_parsed_as_serde_json_would() {
        for text in [r#"{"a":[1,2.5,"x",null,true],"b":{"c":-3}}"#, "[]", "{}", "\"s\"", "12", "1e300"] {
            let got = parse(text, Keep { items: 100, values: 100 }).unwrap();
            let want: Value = serde_json::from_str(text).unwrap();
            assert_eq!(got.value, want, "{text}");
            assert_eq!(got.elided, Elided::default());
        }
    }

    #[test]
    fn what_is_left_out_is_only_read_past() {
        // A number out of f64's range fails serde_json's parse of the whole (fuzzing found
        // the difference); in items that are not kept it is read past, like any value.
        let text = "[0,1,40E3070,0]";
        assert!(serde_json::from_str::<Value>(text).is_err());
        let got = parse(text, Keep { items: 1, values: 10 }).unwrap();
        assert_eq!(got.value, json!([0]));
        assert_eq!(got.elided.cuts, [Cut { pointer: String::new(), kept: 1, total: 4 }]);
        assert!(parse(text, Keep { items: 10, values: 10 }).is_err(), "kept, it does not parse");
    }

    #[test]
    fn long_lists_keep_their_first_items_and_report_their_length() {
        let text = r#"{"a/b": [1,2,3,4,5], "n": [[1,2,3,4], {"x": [9,9,9,9,9,9]}]}"#;
        let got = parse(text, WIDE).unwrap();
        assert_eq!(got.value, json!({"a/b": [1, 2, 3], "n": [[1, 2, 3], {"x": [9, 9, 9]}]}));
        let cuts: Vec<(&str, usize, usize)> =
            got.elided.cuts.iter().map(|c| (c.pointer.as_str(), c.kept, c.total)).collect();
        assert_eq!(cuts, [("/a~1b", 3, 5), ("/n/0", 3, 4), ("/n/1/x", 3, 6)]);
    }

    #[test]
    fn the_overall_budget_keeps_the_first_values_and_says_it_ran_out() {
        let members: Vec<String> = (0..50).map(|i| format!("\"k{i}\": [{i}]")).collect();
        let text = format!("{{{}}}", members.join(","));
        let got = parse(&text, Keep { items: 10, values: 21 }).unwrap();
        assert!(got.elided.budget_spent);
        let m = got.value.as_object().unwrap();
        assert_eq!(m.len(), 10, "the object costs one, each member and its one item two");
        assert_eq!(m["k0"], json!([0]));
    }

    #[test]
    fn cuts_are_bounded_in_number_and_pointer_length() {
        let key = "k".repeat(100_000);
        let lists: Vec<String> = (0..500).map(|i| format!("\"{key}{i}\": [1,2,3,4]")).collect();
        let got = parse(&format!("{{{}}}", lists.join(",")), Keep { items: 2, values: 1_000_000 }).unwrap();
        assert_eq!(got.elided.cuts.len(), MAX_CUTS);
        assert!(got.elided.cuts.iter().all(|c| c.pointer.chars().count() <= MAX_POINTER_CHARS + 1));
        assert!(got.elided.cuts[0].pointer.ends_with('…'));
    }

    #[test]
    fn malformed_text_is_an_error() {
        assert!(parse("1e400", WIDE).is_err() && serde_json::from_str::<Value>("1e400").is_err());
        assert!(parse("[1,2", WIDE).is_err());
        assert!(parse("[1] x", WIDE).is_err());
        assert!(parse(r#"{"a":}"#, WIDE).is_err());
    }
}
