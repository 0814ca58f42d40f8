//! Bounds: at most `MAX_TOOL_RESPONSE_ITEMS` items per list and `MAX_TOOL_RESPONSE_CHARS`
//! characters of result text. The text stays valid JSON; what was cut is said in a
//! `truncated` member next to `data`, with the way to get the rest. Binary content is never
//! cut in the middle of its base64: it fails with `payload_too_large` instead.
//!
//! The char bound works on the whole document: lists are cut first (`MAX_TOOL_RESPONSE_ITEMS`),
//! then the longest strings are shortened to a common cap (water-filling, so short fields
//! stay whole), then the largest list loses items from its end. When that does not get
//! under the bound in a few rounds (deep nests of short lists, an object of very many keys),
//! the data is kept as a prefix of its JSON text, sized so that the result fits: the bound
//! always holds. Every pass is linear in the size of the data; JSON Pointers are built only
//! for the places that are cut.

use serde_json::{Map, Value, json};

use crate::decode::json::Elided;
use crate::decode::pagination::Pagination;
use crate::envelope::Success;
use crate::error::{CallError, ErrorKind};

/// The limits.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_items: usize,
    pub max_chars: usize,
}

/// Room kept for the `truncated` note itself.
const NOTE_RESERVE: usize = 1200;
/// Most cut places listed in the note.
const MAX_LISTED: usize = 10;
/// Rounds of shortening before the data is kept as text.
const ROUNDS: usize = 12;
/// What the document's own strings (a login, a request path) are cut to when even an
/// empty `data` would not fit.
const OWN_FIELD_CAP: usize = 200;

/// A document the bounds apply to: the success envelope, or a built-in tool's answer.
pub(crate) trait Bounded {
    /// The part that may be cut.
    fn data(&self) -> &Value;
    fn data_mut(&mut self) -> &mut Value;
    /// Say what was cut (`None`: nothing).
    fn set_truncated(&mut self, note: Option<Value>);
    /// The page this document is, for the advice on how to get the rest.
    fn pagination(&self) -> Option<&Pagination>;
    /// The forge's status, when the forge answered (for an error the bounds end in).
    fn status(&self) -> Option<u16>;
    /// The JSON Pointer of `data` in the text (`/data`, or `` when data is the document).
    fn data_pointer(&self) -> &'static str;
    /// The whole text.
    fn text(&self) -> String;
    /// Cut the document's own strings outside `data` to `cap` characters (a forge login or a
    /// path can be as long as anyone made it).
    fn shorten_own_fields(&mut self, cap: usize);
}

impl Bounded for Success {
    fn data(&self) -> &Value {
        &self.data
    }
    fn data_mut(&mut self) -> &mut Value {
        &mut self.data
    }
    fn set_truncated(&mut self, note: Option<Value>) {
        self.truncated = note;
    }
    fn pagination(&self) -> Option<&Pagination> {
        self.pagination.as_ref()
    }
    fn status(&self) -> Option<u16> {
        Some(self.status)
    }
    fn data_pointer(&self) -> &'static str {
        "/data"
    }
    fn text(&self) -> String {
        self.to_text()
    }
    fn shorten_own_fields(&mut self, cap: usize) {
        let cut = |s: &mut String| {
            if chars(s) > cap {
                *s = format!("{}…", s.chars().take(cap).collect::<String>());
            }
        };
        if let Some(login) = &mut self.identity.login {
            cut(login);
        }
        cut(&mut self.request.path);
    }
}

/// The answer of a built-in tool: a JSON value, and what was cut from it. Its text is the
/// value with a `truncated` member added (or, when the value had to become text,
/// `{"text", "truncated"}`).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) value: Value,
    pub(crate) truncated: Option<Value>,
}

impl Answer {
    /// The text as it stands.
    pub(crate) fn text_now(&self) -> String {
        match (&self.value, &self.truncated) {
            (v, None) => v.to_string(),
            (Value::Object(m), Some(t)) => {
                let mut m = m.clone();
                m.insert("truncated".into(), t.clone());
                Value::Object(m).to_string()
            }
            (v, Some(t)) => json!({"text": v, "truncated": t}).to_string(),
        }
    }
}

impl Bounded for Answer {
    fn data(&self) -> &Value {
        &self.value
    }
    fn data_mut(&mut self) -> &mut Value {
        &mut self.value
    }
    fn set_truncated(&mut self, note: Option<Value>) {
        self.truncated = note;
    }
    fn pagination(&self) -> Option<&Pagination> {
        None
    }
    fn status(&self) -> Option<u16> {
        None
    }
    fn data_pointer(&self) -> &'static str {
        ""
    }
    fn text(&self) -> String {
        self.text_now()
    }
    fn shorten_own_fields(&mut self, _cap: usize) {}
}

/// Fit a document into the bounds and return its text. `text` is the document as already
/// serialized by the caller (the common case — nothing to cut — serializes only once).
/// `elided`: what the parser already left out of the data (lists it cut while reading, values
/// past its budget), reported like the cuts made here.
pub(crate) fn fit(
    s: &mut dyn Bounded,
    b: Bounds,
    text: String,
    elided: &Elided,
) -> Result<String, CallError> {
    let root = s.data_pointer();
    let mut lists: Vec<Value> = elided
        .cuts
        .iter()
        .map(|c| json!({"path": format!("{root}{}", c.pointer), "returned": c.kept, "total": c.total}))
        .collect();
    let spent = elided.budget_spent;
    let mut text = text;
    if longest_list(s.data()) > b.max_items {
        cut_lists(s.data_mut(), root, b.max_items, &mut lists);
    }
    if !lists.is_empty() || spent {
        let n = note(&*s, &lists, &[], None, spent);
        s.set_truncated(n);
        text = s.text();
    }
    // Bytes bound characters from above: most results need no count at all.
    if text.len() <= b.max_chars || chars(&text) <= b.max_chars {
        return Ok(text);
    }
    if let Some(size) = binary_size(s.data()) {
        let message = format!(
            "the binary content ({size} bytes) does not fit in MAX_TOOL_RESPONSE_CHARS ({}) as base64; raise MAX_TOOL_RESPONSE_CHARS or fetch a smaller file",
            b.max_chars
        );
        return Err(match s.status() {
            Some(status) => CallError::from_forge(status, ErrorKind::PayloadTooLarge, message),
            None => CallError::local(ErrorKind::PayloadTooLarge, message),
        });
    }
    let mut strings: Vec<Value> = Vec::new();
    let mut extra_cut: Option<Value> = None;
    for _ in 0..ROUNDS {
        let n = chars(&text);
        if n <= b.max_chars {
            return Ok(text);
        }
        let over = n - b.max_chars + NOTE_RESERVE.min(b.max_chars / 4);
        if !shorten_strings(s.data_mut(), root, over, &mut strings)
            && !shrink_largest_list(s.data_mut(), root, n, b.max_chars, &mut extra_cut)
        {
            break;
        }
        let n = note(&*s, &lists, &strings, extra_cut.as_ref(), spent);
        s.set_truncated(n);
        text = s.text();
    }
    if chars(&text) <= b.max_chars {
        return Ok(text);
    }
    Ok(keep_as_text(s, b, spent))
}

/// The data as a prefix of its JSON text, as long as fits: the last resort, which always
/// fits (the envelope without data is a few hundred characters, `MAX_TOOL_RESPONSE_CHARS`
/// at least 2,000, and the document's own strings are cut when they are what is too long).
fn keep_as_text(s: &mut dyn Bounded, b: Bounds, spent: bool) -> String {
    let data_text = serde_json::to_string(s.data()).unwrap_or_default();
    let original = chars(&data_text);
    let note = |kept: usize| {
        let mut n = json!({
            "data_as_text": {"original_chars": original, "kept_chars": kept},
            "how_to_get_more": "the data was too large to keep as JSON: ask for less (a smaller page, a narrower path, one item)"
        });
        if spent {
            // `original_chars` counts only what was read.
            n["values_dropped"] = Value::Bool(true);
        }
        n
    };
    // The text without data, with the note's number at its widest.
    *s.data_mut() = Value::String(String::new());
    s.set_truncated(Some(note(original)));
    let mut base = chars(&s.text());
    if base > b.max_chars {
        s.shorten_own_fields(OWN_FIELD_CAP);
        base = chars(&s.text());
    }
    let room = b.max_chars.saturating_sub(base);
    let mut kept = String::new();
    let mut used = 0;
    for c in data_text.chars() {
        let width = escaped_width(c);
        if used + width > room {
            break;
        }
        used += width;
        kept.push(c);
    }
    let kept_chars = chars(&kept);
    *s.data_mut() = Value::String(kept);
    s.set_truncated(Some(note(kept_chars)));
    s.text()
}

/// How many characters `c` takes inside a JSON string as serde_json writes it.
fn escaped_width(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{08}' | '\u{0c}' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The size of binary content (`{content_base64, content_type, size}`), if that is the data.
pub(crate) fn binary_size(v: &Value) -> Option<&Value> {
    let m = v.as_object()?;
    (m.len() == 3 && m.contains_key("content_base64") && m.contains_key("content_type"))
        .then(|| m.get("size"))
        .flatten()
}

/// The length of the longest list anywhere in `v` (no allocation per node).
fn longest_list(v: &Value) -> usize {
    let mut longest = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(a) => {
                longest = longest.max(a.len());
                stack.extend(a.iter().filter(|x| x.is_array() || x.is_object()));
            }
            Value::Object(m) => stack.extend(m.values().filter(|x| x.is_array() || x.is_object())),
            _ => {}
        }
    }
    longest
}

/// The pointer of the place `path` names, below `root`.
fn pointer(root: &str, path: &[String]) -> String {
    let mut out = root.to_owned();
    for p in path {
        out.push('/');
        out.push_str(p);
    }
    out
}

/// Visit every value with the path to it kept as a stack of segments (built as the walk goes
/// down, so a pointer costs only where one is wanted). Depth is bounded: decoded JSON is at
/// most 100 levels deep (`decode::body`), and our own documents are shallow.
fn walk(v: &mut Value, path: &mut Vec<String>, f: &mut dyn FnMut(&mut Value, &[String]) -> bool) {
    if !f(v, path) {
        return;
    }
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                path.push(i.to_string());
                walk(x, path, f);
                path.pop();
            }
        }
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                path.push(crate::error::pointer_segment(k));
                walk(x, path, f);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Cut every list longer than `max`, recording where.
fn cut_lists(data: &mut Value, root: &str, max: usize, out: &mut Vec<Value>) {
    walk(data, &mut Vec::new(), &mut |v, path| match v {
        Value::Array(a) => {
            if a.len() > max {
                out.push(json!({"path": pointer(root, path), "returned": max, "total": a.len()}));
                a.truncate(max);
            }
            true
        }
        Value::Object(_) => true,
        _ => false,
    });
}

/// Shorten the longest strings by at least `need` characters in total, each to a common
/// cap. Returns false when strings cannot give that much.
fn shorten_strings(data: &mut Value, root: &str, need: usize, out: &mut Vec<Value>) -> bool {
    let mut lens: Vec<usize> = Vec::new();
    collect_string_lens(data, &mut lens);
    let total: usize = lens.iter().sum();
    if total < need || lens.is_empty() {
        return false;
    }
    let removed = |cap: usize| lens.iter().map(|&l| l.saturating_sub(cap)).sum::<usize>();
    let (mut lo, mut hi) = (0usize, *lens.iter().max().unwrap_or(&0));
    if removed(0) < need {
        return false;
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if removed(mid) >= need { lo = mid } else { hi = mid - 1 }
    }
    let cap = lo.max(16);
    if removed(cap) == 0 {
        return false;
    }
    // Where each cut string is in `out`, so that a later round updates it in place.
    let mut seen: std::collections::HashMap<String, usize> =
        out.iter().enumerate().filter_map(|(i, e)| Some((e["path"].as_str()?.to_owned(), i))).collect();
    walk(data, &mut Vec::new(), &mut |v, path| match v {
        Value::String(s) => {
            let n = chars(s);
            if n > cap {
                let kept: String = s.chars().take(cap).collect();
                *s = format!("{kept}…");
                let at = pointer(root, path);
                match seen.get(&at) {
                    Some(&i) => out[i]["kept_chars"] = json!(cap),
                    None => {
                        seen.insert(at.clone(), out.len());
                        out.push(json!({"path": at, "original_chars": n, "kept_chars": cap}));
                    }
                }
            }
            false
        }
        Value::Array(_) | Value::Object(_) => true,
        _ => false,
    });
    true
}

fn collect_string_lens(v: &Value, out: &mut Vec<usize>) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(chars(s)),
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
}

/// Drop items from the end of the largest list, in proportion to how much is over.
fn shrink_largest_list(
    data: &mut Value,
    root: &str,
    text_chars: usize,
    max: usize,
    note: &mut Option<Value>,
) -> bool {
    // The largest list of two or more items, then the first list of that length.
    let mut largest = 0;
    walk(data, &mut Vec::new(), &mut |v, _| match v {
        Value::Array(a) => {
            largest = largest.max(a.len());
            true
        }
        Value::Object(_) => true,
        _ => false,
    });
    if largest < 2 {
        return false;
    }
    let mut done: Option<(String, usize, usize)> = None;
    walk(data, &mut Vec::new(), &mut |v, path| {
        if done.is_some() {
            return false;
        }
        match v {
            Value::Array(a) if a.len() == largest => {
                let keep = ((largest as f64) * (max as f64 / text_chars as f64) * 0.9).floor() as usize;
                let keep = keep.clamp(1, largest - 1);
                a.truncate(keep);
                done = Some((pointer(root, path), keep, largest));
                false
            }
            Value::Array(_) | Value::Object(_) => true,
            _ => false,
        }
    });
    let Some((path, keep, before)) = done else { return false };
    let total = note
        .as_ref()
        .filter(|n| n["path"] == path.as_str())
        .and_then(|n| n["total"].as_u64())
        .unwrap_or(before as u64);
    *note = Some(json!({"path": path, "returned": keep, "total": total}));
    true
}

/// The `truncated` member from what was cut so far (`None`: nothing was). `spent`: the
/// parser stopped keeping values, so more than the listed cuts is missing.
fn note(
    s: &dyn Bounded,
    lists: &[Value],
    strings: &[Value],
    extra: Option<&Value>,
    spent: bool,
) -> Option<Value> {
    let mut items: Vec<Value> = lists.to_vec();
    if let Some(e) = extra {
        match items.iter_mut().find(|i| i["path"] == e["path"]) {
            Some(i) => i["returned"] = e["returned"].clone(),
            None => items.push(e.clone()),
        }
    }
    if items.is_empty() && strings.is_empty() && !spent {
        return None;
    }
    let mut m = Map::new();
    if spent {
        m.insert("values_dropped".into(), Value::Bool(true));
    }
    if !items.is_empty() {
        let listed: Vec<Value> = items.iter().take(MAX_LISTED).cloned().collect();
        m.insert("items".into(), Value::Array(listed));
    }
    if !strings.is_empty() {
        let mut listed: Vec<Value> = strings.to_vec();
        listed.sort_by_key(|e| std::cmp::Reverse(e["original_chars"].as_u64().unwrap_or(0)));
        listed.truncate(MAX_LISTED);
        m.insert("strings".into(), Value::Array(listed));
    }
    let top = items.iter().find(|i| i["path"] == s.data_pointer());
    m.insert(
        "how_to_get_more".into(),
        Value::String(advice(s.pagination(), top, &items, !strings.is_empty())),
    );
    Some(Value::Object(m))
}

/// The other way to fit more: fewer members per item.
pub(crate) const FIELDS_ADVICE: &str = "or keep only the members you need with fields (e.g. fields: [\"number\", \"title\"]), so that more items fit";

fn advice(page: Option<&Pagination>, top: Option<&Value>, items: &[Value], strings_cut: bool) -> String {
    let mut parts = Vec::new();
    if let Some(top) = top {
        let returned = top["returned"].as_u64().unwrap_or(0).max(1);
        let had = top["total"].as_u64().unwrap_or(returned);
        parts.push(match page {
            Some(p) => page_advice(p, returned, had),
            None => format!(
                "only the first {returned} items fit: narrow the request (filters, a more specific path)"
            ),
        });
    } else if !items.is_empty() {
        parts.push("nested lists were cut: fetch the item on its own for the whole list".to_owned());
    }
    if strings_cut {
        parts.push(
            "long strings were shortened (marked …): fetch the single item or file to read it whole"
                .to_owned(),
        );
    }
    if !parts.is_empty() {
        parts.push(FIELDS_ADVICE.to_owned());
    }
    parts.join("; ")
}

/// How to read a page of which only the first `returned` of its `had` items fit: in pages of
/// a smaller size that start exactly where this page starts.
fn page_advice(p: &Pagination, returned: u64, had: u64) -> String {
    if p.page <= 1 {
        return format!(
            "only {returned} of the {had} items of this page fit: ask again with limit={returned} (page=1, 2, … in pages of that size)"
        );
    }
    // A page followed by another one is full; the last page is as long as the limit asked.
    let size = if p.next_page.is_some() { Some(had) } else { p.limit };
    let start = size.filter(|&s| s > 0).and_then(|size| (p.page - 1).checked_mul(size));
    let Some(start) = start else {
        return format!(
            "only {returned} of the {had} items of this page fit: ask again with an explicit limit of at most {returned}"
        );
    };
    // The largest page size that fits and divides `start`: its pages start where this one did.
    let smaller = (1..=returned).rev().find(|d| start.is_multiple_of(*d)).unwrap_or(1);
    let first = (start / smaller).saturating_add(1);
    format!(
        "only {returned} of the {had} items of this page fit: this page starts at item {}; ask again with limit={smaller} and page={first} (then {}, …) to read it all",
        start.saturating_add(1),
        first.saturating_add(1)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use crate::decode::json::Elided;
    use crate::decode::pagination::Pagination;
    use crate::envelope::{RequestInfo, untrusted_notice};
    use crate::identity::{Identity, Mode};

    fn success(data: Value, paged: bool) -> Success {
        Success {
            identity: Identity { login: Some("a".into()), mode: Mode::Token, sudo: None },
            forge: None,
            request: RequestInfo { method: "GET", path: "/x".into() },
            status: 200,
            pagination: paged.then_some(Pagination {
                page: 1,
                limit: Some(50),
                total_count: None,
                next_page: None,
                last_page: None,
            }),
            untrusted_content: untrusted_notice(Flavor::Gitea),
            shape: None,
            data,
            link: None,
            truncated: None,
            hidden_content: None,
            filtered: None,
            withheld: None,
        }
    }

    fn fits(s: &Success, max: usize) {
        let t = s.to_text();
        assert!(t.chars().count() <= max, "{} > {max}", t.chars().count());
        let _: Value = serde_json::from_str(&t).unwrap();
    }

    #[test]
    fn lists_are_cut_to_max_items_and_said_so() {
        let mut s = success(json!((0..250).collect::<Vec<_>>()), true);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 100_000 }, t, &Elided::default()).unwrap();
        assert_eq!(s.data.as_array().unwrap().len(), 100);
        assert_eq!(
            s.truncated.as_ref().unwrap()["items"][0],
            json!({"path": "/data", "returned": 100, "total": 250})
        );
        let advice = s.truncated.as_ref().unwrap()["how_to_get_more"].as_str().unwrap().to_owned();
        assert!(advice.contains("limit=100"), "{advice}");
        assert!(advice.ends_with(FIELDS_ADVICE), "{advice}");
    }

    #[test]
    fn long_strings_are_shortened_and_short_ones_kept() {
        let mut s = success(json!({"name": "readme", "content": "x".repeat(500_000)}), false);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 10_000 }, t, &Elided::default()).unwrap();
        fits(&s, 10_000);
        assert_eq!(s.data["name"], "readme");
        assert_eq!(s.truncated.as_ref().unwrap()["strings"][0]["path"], "/data/content");
        assert_eq!(s.truncated.as_ref().unwrap()["strings"][0]["original_chars"], 500_000);
    }

    #[test]
    fn many_small_items_lose_items_from_the_end() {
        let items: Vec<Value> = (0..100).map(|i| json!({"id": i, "title": format!("issue {i}")})).collect();
        let mut s = success(Value::Array(items), true);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 2_000 }, t, &Elided::default()).unwrap();
        fits(&s, 2_000);
        let n = s.data.as_array().unwrap().len();
        assert!(n > 0 && n < 100);
        assert_eq!(s.data[0]["id"], 0);
    }

    #[test]
    fn binary_is_never_cut() {
        let mut s =
            success(json!({"content_base64": "A".repeat(5000), "content_type": "x", "size": 3750}), false);
        let t = s.to_text();
        let e = fit(&mut s, Bounds { max_items: 100, max_chars: 1000 }, t, &Elided::default()).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::PayloadTooLarge));
        assert!(e.to_string().contains("MAX_TOOL_RESPONSE_CHARS"));
    }

    #[test]
    fn deep_nests_of_short_lists_fit_the_bound() {
        // Each round of shrinking takes one item off one list; with many two-item lists of
        // numbers (nothing to shorten) the result came back at twice the bound.
        let big = 1.234_567_890_123_456_7e300;
        let mut chain = json!([big, big]);
        for _ in 0..30 {
            chain = json!([chain, [big, big]]);
        }
        let wide: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!([big, big]))).collect();
        for (v, max) in [(chain.clone(), 2_000), (chain, 3_000), (Value::Object(wide), 2_000)] {
            let mut s = success(v, false);
            let t = s.to_text();
            fit(&mut s, Bounds { max_items: 100, max_chars: max }, t, &Elided::default()).unwrap();
            fits(&s, max);
        }
    }

    #[test]
    fn the_bound_holds_for_text_that_doubles_when_escaped_and_for_huge_own_fields() {
        let quotes: Vec<Value> = (0..3000).map(|i| json!({format!("k{i}"): "\"\"\"\\"})).collect();
        let mut s = success(json!({"m": quotes}), true);
        s.identity.login = Some("l".repeat(50_000));
        s.request.path = format!("/repos/{}", "p".repeat(50_000));
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 5_000, max_chars: 2_000 }, t, &Elided::default()).unwrap();
        fits(&s, 2_000);
        assert!(s.truncated.is_some());
    }

    #[test]
    fn pointers_in_the_note_are_escaped() {
        let items: Vec<Value> = (0..200).map(|i| json!({"id": i, "title": format!("issue {i}")})).collect();
        let mut s = success(json!({"a/b": items, "c~d": "x".repeat(5_000)}), false);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 1_000, max_chars: 3_000 }, t, &Elided::default()).unwrap();
        fits(&s, 3_000);
        let note = s.truncated.as_ref().unwrap().to_string();
        assert!(note.contains("/data/a~1b") && note.contains("/data/c~0d"), "{note}");
        assert!(!note.contains("/data/a/b"), "{note}");
    }

    #[test]
    fn advice_for_a_later_page_names_a_page_that_starts_where_this_one_did() {
        let page = |page, limit, next| Pagination {
            page,
            limit,
            total_count: None,
            next_page: next,
            last_page: None,
        };
        // Page 3 of 50: items 101…150; pages of 25 from page 5 start at item 101.
        let a = page_advice(&page(3, Some(50), Some(4)), 30, 50);
        assert!(a.contains("starts at item 101") && a.contains("limit=25 and page=5"), "{a}");
        // Page 2 of 30 (the forge capped a larger limit): items 31…60 = page 2 of 30, 3 of 15…
        let a = page_advice(&page(2, Some(100), Some(3)), 20, 30);
        assert!(a.contains("starts at item 31") && a.contains("limit=15 and page=3"), "{a}");
        // The last page is as long as the limit asked.
        let a = page_advice(&page(4, Some(10), None), 7, 3);
        assert!(a.contains("starts at item 31") && a.contains("limit=6 and page=6"), "{a}");
        // First pages keep it simple; without a known page size, say what to set.
        assert!(page_advice(&page(1, Some(50), Some(2)), 30, 50).contains("limit=30"));
        assert!(page_advice(&page(2, None, None), 30, 40).contains("explicit limit"));
        // A page number no forge has does not overflow.
        assert!(page_advice(&page(u64::MAX, Some(u64::MAX), None), 30, 40).contains("explicit limit"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]

        /// Whatever the shape — deep, wide, escaped, with long keys and own fields — the text
        /// is valid JSON within the bound.
        #[test]
        fn every_document_fits(
            depth in 0usize..40,
            width in 1usize..6,
            key in "[a-z/~\"\\\\]{0,30}",
            leaf in "[a-z\"\\\\\n\u{1}é]{0,50}",
            login_len in 0usize..5_000,
            max_items in 1usize..50,
            max_chars in 2_000usize..6_000,
        ) {
            // A chain `depth` deep, each level holding the rest and `width` leaves.
            let mut v = json!(leaf);
            for level in 0..depth {
                v = if level % 2 == 0 {
                    let mut a = vec![json!(leaf); width];
                    a.push(v);
                    Value::Array(a)
                } else {
                    let mut m = Map::new();
                    for i in 0..width {
                        m.insert(format!("{key}{i}"), json!(leaf));
                    }
                    m.insert(format!("{key}rest"), v);
                    Value::Object(m)
                };
            }
            let mut s = success(v, level_paged(depth));
            s.identity.login = Some("x".repeat(login_len));
            let t = s.to_text();
            if fit(&mut s, Bounds { max_items, max_chars }, t, &Elided::default()).is_ok() {
                let text = s.to_text();
                proptest::prop_assert!(chars(&text) <= max_chars, "{} > {max_chars}", chars(&text));
                let _: Value = serde_json::from_str(&text).unwrap();
            }
        }
    }

    fn level_paged(depth: usize) -> bool {
        depth.is_multiple_of(3)
    }

    #[test]
    fn unicode_counts_characters_not_bytes() {
        let mut s = success(json!({"t": "é".repeat(3000)}), false);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 4_000 }, t, &Elided::default()).unwrap();
        assert!(s.truncated.is_none(), "3000 é plus the envelope fit in 4000 characters");
    }
}
