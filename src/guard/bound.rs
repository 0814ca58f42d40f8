//! Bounds: at most `MAX_TOOL_RESPONSE_ITEMS` items per list and `MAX_TOOL_RESPONSE_CHARS`
//! characters of result text. The text stays valid JSON; what was cut is said in a
//! `truncated` member next to `data`, with the way to get the rest. Binary content is never
//! cut in the middle of its base64: it fails with `payload_too_large` instead.
//!
//! The char bound works on the whole envelope: lists are cut first (`MAX_TOOL_RESPONSE_ITEMS`),
//! then the longest strings are shortened to a common cap (water-filling, so short fields
//! stay whole), then the largest list loses items from its end, until the text fits.

use serde_json::{Map, Value, json};

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

/// Fit a success into the bounds and return its text. `text` is the success as already
/// serialized by the caller (the common case — nothing to cut — serializes only once).
pub fn fit(s: &mut Success, b: Bounds, text: String) -> Result<String, CallError> {
    let mut lists: Vec<Value> = Vec::new();
    let mut text = text;
    if longest_list(&s.data) > b.max_items {
        cut_lists(&mut s.data, b.max_items, &mut lists);
        note(s, &lists, &[], None);
        text = s.to_text();
    }
    // Bytes bound characters from above: most results need no count at all.
    if text.len() <= b.max_chars || chars(&text) <= b.max_chars {
        return Ok(text);
    }
    let mut strings: Vec<Value> = Vec::new();
    let mut extra_cut: Option<Value> = None;
    for _ in 0..12 {
        let n = chars(&text);
        if n <= b.max_chars {
            return Ok(text);
        }
        if is_binary(&s.data) {
            return Err(CallError::from_forge(
                s.status,
                ErrorKind::PayloadTooLarge,
                format!(
                    "the binary content ({} bytes) does not fit in MAX_TOOL_RESPONSE_CHARS ({}) as base64; raise MAX_TOOL_RESPONSE_CHARS or fetch a smaller file",
                    s.data["size"], b.max_chars
                ),
            ));
        }
        let over = n - b.max_chars + NOTE_RESERVE.min(b.max_chars / 4);
        if !shorten_strings(&mut s.data, over, &mut strings)
            && !shrink_largest_list(&mut s.data, n, b.max_chars, &mut extra_cut)
        {
            // Nothing left to cut (a huge object of many keys): keep a prefix of its text.
            let data_text = serde_json::to_string(&s.data).unwrap_or_default();
            let keep = b.max_chars.saturating_sub(NOTE_RESERVE * 2).min(data_text.len());
            let prefix: String = data_text.chars().take(keep).collect();
            s.data = Value::String(prefix);
            s.truncated = Some(json!({
                "data_as_text": {"original_chars": chars(&data_text), "kept_chars": keep},
                "how_to_get_more": "the data was too large to keep as JSON: ask for less (a smaller page, a narrower path, one item)"
            }));
            return Ok(s.to_text());
        }
        note(s, &lists, &strings, extra_cut.as_ref());
        text = s.to_text();
    }
    Ok(text)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn is_binary(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.contains_key("content_base64") && m.contains_key("size") && m.len() == 3)
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

/// A JSON Pointer segment.
fn segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Cut every list longer than `max`, recording JSON Pointers (built only where a list is cut).
fn cut_lists(data: &mut Value, max: usize, out: &mut Vec<Value>) {
    fn go(v: &mut Value, path: &mut Vec<String>, max: usize, out: &mut Vec<Value>) {
        match v {
            Value::Array(a) => {
                if a.len() > max {
                    out.push(
                        json!({"path": format!("/data{}", pointer(path)), "returned": max, "total": a.len()}),
                    );
                    a.truncate(max);
                }
                for (i, x) in a.iter_mut().enumerate() {
                    if x.is_array() || x.is_object() {
                        path.push(i.to_string());
                        go(x, path, max, out);
                        path.pop();
                    }
                }
            }
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if x.is_array() || x.is_object() {
                        path.push(segment(k));
                        go(x, path, max, out);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    // Depth is bounded: decoded JSON is at most 100 levels deep (decode::body).
    go(data, &mut Vec::new(), max, out);
}

fn pointer(path: &[String]) -> String {
    path.iter().map(|p| format!("/{p}")).collect()
}

/// Shorten the longest strings by at least `need` characters in total, each to a common
/// cap. Returns false when strings cannot give that much.
fn shorten_strings(data: &mut Value, need: usize, out: &mut Vec<Value>) -> bool {
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
    let mut stack: Vec<(&mut Value, String)> = vec![(data, "/data".to_owned())];
    while let Some((v, path)) = stack.pop() {
        match v {
            Value::String(s) => {
                let n = s.chars().count();
                if n > cap {
                    let kept: String = s.chars().take(cap).collect();
                    *s = format!("{kept}…");
                    if let Some(prev) = out.iter_mut().find(|e| e["path"] == path) {
                        prev["kept_chars"] = json!(cap);
                    } else {
                        out.push(json!({"path": path, "original_chars": n, "kept_chars": cap}));
                    }
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter_mut().enumerate() {
                    stack.push((x, format!("{path}/{i}")));
                }
            }
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    stack.push((x, format!("{path}/{}", segment(k))));
                }
            }
            _ => {}
        }
    }
    true
}

fn collect_string_lens(v: &Value, out: &mut Vec<usize>) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s.chars().count()),
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
}

/// Drop items from the end of the largest list, in proportion to how much is over.
fn shrink_largest_list(data: &mut Value, text_chars: usize, max: usize, note: &mut Option<Value>) -> bool {
    let mut best: Option<(&mut Vec<Value>, String)> = None;
    let mut stack: Vec<(&mut Value, String)> = vec![(data, "/data".to_owned())];
    while let Some((v, path)) = stack.pop() {
        match v {
            Value::Array(a) => {
                if a.len() > 1 && best.as_ref().is_none_or(|(b, _)| b.len() < a.len()) {
                    best = Some((a, path));
                } else {
                    for (i, x) in a.iter_mut().enumerate() {
                        stack.push((x, format!("{path}/{i}")));
                    }
                }
            }
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    stack.push((x, format!("{path}/{k}")));
                }
            }
            _ => {}
        }
    }
    let Some((list, path)) = best else { return false };
    let before = list.len();
    let keep = ((before as f64) * (max as f64 / text_chars as f64) * 0.9).floor() as usize;
    let keep = keep.clamp(1, before - 1);
    list.truncate(keep);
    let total = note
        .as_ref()
        .filter(|n| n["path"] == path)
        .and_then(|n| n["total"].as_u64())
        .unwrap_or(before as u64);
    *note = Some(json!({"path": path, "returned": keep, "total": total}));
    true
}

/// Write the `truncated` member from what was cut so far.
fn note(s: &mut Success, lists: &[Value], strings: &[Value], extra: Option<&Value>) {
    let mut items: Vec<Value> = lists.to_vec();
    if let Some(e) = extra {
        match items.iter_mut().find(|i| i["path"] == e["path"]) {
            Some(i) => i["returned"] = e["returned"].clone(),
            None => items.push(e.clone()),
        }
    }
    if items.is_empty() && strings.is_empty() {
        s.truncated = None;
        return;
    }
    let mut m = Map::new();
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
    m.insert("how_to_get_more".into(), Value::String(advice(s, &items, !strings.is_empty())));
    s.truncated = Some(Value::Object(m));
}

fn advice(s: &Success, items: &[Value], strings_cut: bool) -> String {
    let mut parts = Vec::new();
    if let Some(top) = items.iter().find(|i| i["path"] == "/data") {
        let returned = top["returned"].as_u64().unwrap_or(0);
        match &s.pagination {
            Some(p) => parts.push(format!(
                "only {returned} items of this page fit: ask again with limit={returned} and page numbers counted in pages of {returned} (this result is page {} of that size when page={})",
                p.page, p.page
            )),
            None => parts.push(format!("only the first {returned} items fit: narrow the request (filters, a more specific path)")),
        }
    } else if !items.is_empty() {
        parts.push("nested lists were cut: fetch the item on its own for the whole list".to_owned());
    }
    if strings_cut {
        parts.push(
            "long strings were shortened (marked …): fetch the single item or file to read it whole"
                .to_owned(),
        );
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use crate::decode::pagination::Pagination;
    use crate::envelope::{RequestInfo, untrusted_notice};
    use crate::identity::{Identity, Mode};

    fn success(data: Value, paged: bool) -> Success {
        Success {
            identity: Identity { login: Some("a".into()), mode: Mode::Token, sudo: None },
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
            data,
            truncated: None,
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
        fit(&mut s, Bounds { max_items: 100, max_chars: 100_000 }, t).unwrap();
        assert_eq!(s.data.as_array().unwrap().len(), 100);
        assert_eq!(
            s.truncated.as_ref().unwrap()["items"][0],
            json!({"path": "/data", "returned": 100, "total": 250})
        );
        assert!(s.truncated.as_ref().unwrap()["how_to_get_more"].as_str().unwrap().contains("limit=100"));
    }

    #[test]
    fn long_strings_are_shortened_and_short_ones_kept() {
        let mut s = success(json!({"name": "readme", "content": "x".repeat(500_000)}), false);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 10_000 }, t).unwrap();
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
        fit(&mut s, Bounds { max_items: 100, max_chars: 2_000 }, t).unwrap();
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
        let e = fit(&mut s, Bounds { max_items: 100, max_chars: 1000 }, t).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::PayloadTooLarge));
        assert!(e.to_string().contains("MAX_TOOL_RESPONSE_CHARS"));
    }

    #[test]
    fn unicode_counts_characters_not_bytes() {
        let mut s = success(json!({"t": "é".repeat(3000)}), false);
        let t = s.to_text();
        fit(&mut s, Bounds { max_items: 100, max_chars: 4_000 }, t).unwrap();
        assert!(s.truncated.is_none(), "3000 é plus the envelope fit in 4000 characters");
    }
}
