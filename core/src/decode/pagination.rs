//! `pagination` of the envelope, from `X-Total-Count` and `Link`.
//!
//! Page numbers come from the `page` query parameter of the `Link` URLs; their host is the
//! forge's ROOT_URL, which may differ from the address we call, so it is never used.
//! What the forge did not say stays `null`: a total is never guessed.

use serde::Serialize;
use serde_json::Value;

use crate::args::PageRequest;

/// The envelope's `pagination` member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pagination {
    pub page: u64,
    pub limit: Option<u64>,
    pub total_count: Option<u64>,
    pub next_page: Option<u64>,
    pub last_page: Option<u64>,
}

/// Build the pagination of a paged call from its response headers and body.
pub fn paginate(
    req: PageRequest,
    total_header: Option<&str>,
    link_header: Option<&str>,
    data: &Value,
) -> Pagination {
    let total = total_header
        .and_then(|t| t.trim().parse::<u64>().ok())
        // Actions lists and combined statuses carry their total in the body instead.
        .or_else(|| data.get("total_count").and_then(Value::as_u64));
    let links = link_header.map(parse_link).unwrap_or_default();
    let rel = |name: &str| links.iter().find(|(r, _)| r == name).map(|(_, p)| *p);
    let computed_last = match (total, req.limit) {
        (Some(t), Some(l)) if l > 0 => Some(t.div_ceil(l).max(1)),
        _ => None,
    };
    // A Link header without `next` (Gitea then sends only first/prev) means this is the last page.
    let last_page = rel("last")
        .or(computed_last)
        .or_else(|| (!links.is_empty() && rel("next").is_none()).then_some(req.page));
    // Computed from the total only up to the last page: where the forge's `Link` names a
    // nearer last page than the total, the `Link` wins.
    let next_page = rel("next").or_else(|| match last_page.min(computed_last) {
        Some(last) if req.page < last => Some(req.page + 1),
        _ => None,
    });
    Pagination { page: req.page, limit: req.limit, total_count: total, next_page, last_page }
}

/// `<url>; rel="next", <url>; rel="last"` → `[("next", 2), ("last", 5)]`. Entries without
/// a page number are skipped.
pub fn parse_link(header: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for part in header.split(',') {
        let Some((target, params)) = part.trim().split_once(';') else {
            continue;
        };
        let target = target.trim().trim_start_matches('<').trim_end_matches('>');
        let rel = params.split(';').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            (k.trim().eq_ignore_ascii_case("rel")).then(|| v.trim().trim_matches('"').to_ascii_lowercase())
        });
        let page = target.split_once('?').and_then(|(_, q)| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "page")
                .and_then(|(_, v)| v.parse::<u64>().ok())
        });
        if let (Some(rel), Some(page)) = (rel, page) {
            for r in rel.split_whitespace() {
                out.push((r.to_owned(), page));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LINK: &str = r#"<https://root.example/api/v1/repos/o/r/issues?limit=20&page=2>; rel="next",<https://root.example/api/v1/repos/o/r/issues?limit=20&page=3>; rel="last""#;

    #[test]
    fn link_gives_next_and_last() {
        let p = paginate(PageRequest { page: 1, limit: Some(20) }, Some("45"), Some(LINK), &json!([]));
        assert_eq!(
            p,
            Pagination {
                page: 1,
                limit: Some(20),
                total_count: Some(45),
                next_page: Some(2),
                last_page: Some(3)
            }
        );
    }

    #[test]
    fn without_link_the_total_and_limit_decide() {
        let p = paginate(PageRequest { page: 2, limit: Some(20) }, Some("45"), None, &json!([]));
        assert_eq!((p.next_page, p.last_page), (Some(3), Some(3)));
        let p = paginate(PageRequest { page: 3, limit: Some(20) }, Some("45"), None, &json!([]));
        assert_eq!((p.next_page, p.last_page), (None, Some(3)));
    }

    #[test]
    fn unknown_stays_null_never_zero() {
        let p = paginate(PageRequest { page: 1, limit: None }, None, None, &json!([]));
        assert_eq!(
            p,
            Pagination { page: 1, limit: None, total_count: None, next_page: None, last_page: None }
        );
        let p = paginate(PageRequest { page: 1, limit: None }, Some("45"), None, &json!([]));
        assert_eq!((p.total_count, p.next_page, p.last_page), (Some(45), None, None));
    }

    #[test]
    fn last_page_link_with_only_prev_means_this_is_the_last() {
        let link = r#"<https://x/api/v1/r?page=1>; rel="first",<https://x/api/v1/r?page=2>; rel="prev""#;
        let p = paginate(PageRequest { page: 3, limit: None }, None, Some(link), &json!([]));
        assert_eq!((p.next_page, p.last_page), (None, Some(3)));
    }

    #[test]
    fn body_total_count_is_used_when_the_header_is_absent() {
        let p = paginate(
            PageRequest { page: 1, limit: Some(10) },
            None,
            None,
            &json!({"total_count": 25, "workflow_runs": []}),
        );
        assert_eq!((p.total_count, p.next_page, p.last_page), (Some(25), Some(2), Some(3)));
    }

    #[test]
    fn a_computed_next_page_is_never_past_the_last_page_the_link_names() {
        // The total says four pages, the forge's `Link` says three and names no next page
        // (fuzzing found it): no next page past the last.
        let link = r#"<https://x/api/v1/r?page=3&limit=30>; rel="last",<https://x/api/v1/r?page=2&limit=30>; rel="prev""#;
        let p = paginate(PageRequest { page: 3, limit: Some(30) }, Some("95"), Some(link), &json!([]));
        assert_eq!((p.next_page, p.last_page), (None, Some(3)));
    }

    #[test]
    fn garbage_headers_are_ignored() {
        let p = paginate(
            PageRequest { page: 1, limit: Some(10) },
            Some("many"),
            Some("nonsense, <>; rel=next"),
            &json!(null),
        );
        assert_eq!(p.total_count, None);
        assert_eq!(p.next_page, None);
    }
}
