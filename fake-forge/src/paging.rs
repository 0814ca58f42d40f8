//! Gitea's pagination: `page`/`limit` defaults and caps, `X-Total-Count` and the `Link` header.
//!
//! The same behaviour as Gitea's `genAPILinks`/`SetLinkHeader` (`services/context/api.go`) with
//! the default `[api]` settings: `limit` defaults to 30 and is capped at 50, `page` is at
//! least 1, and each link is `ROOT_URL` + the request path + the request query re-encoded the way
//! Go's `url.Values.Encode` does (keys sorted) with `page` replaced. The host comes from
//! `ROOT_URL`, never from the request, which is exactly what a client must cope with.

use crate::recorded::parse_query;
use crate::reply::Reply;

/// Gitea's `DEFAULT_PAGING_NUM`.
pub(crate) const DEFAULT_LIMIT: usize = 30;
/// Gitea's `MAX_RESPONSE_ITEMS`.
pub(crate) const MAX_LIMIT: usize = 50;

/// The requested page, normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    /// 1-based page number.
    pub page: usize,
    /// Items per page.
    pub limit: usize,
}

impl Page {
    /// Reads `page` and `limit` from decoded query pairs.
    pub(crate) fn from_query(query: &[(String, String)]) -> Page {
        let int = |name: &str| {
            query.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.trim().parse::<i64>().ok()).unwrap_or(0)
        };
        let limit = match int("limit") {
            l if l <= 0 => DEFAULT_LIMIT,
            l => (l as usize).min(MAX_LIMIT),
        };
        Page { page: int("page").max(1) as usize, limit }
    }

    /// The items of this page.
    pub(crate) fn slice<'a, T>(&self, items: &'a [T]) -> &'a [T] {
        let start = (self.page - 1).saturating_mul(self.limit).min(items.len());
        let end = start.saturating_add(self.limit).min(items.len());
        &items[start..end]
    }
}

/// Where the request came from, to rebuild its URL in `Link`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestUri<'a> {
    pub raw_path: &'a str,
    pub raw_query: Option<&'a str>,
}

/// Adds `X-Total-Count` (and, when `link`, Gitea's `Link` header) to `reply`.
pub(crate) fn paginate(
    reply: Reply,
    root_url: &str,
    uri: RequestUri<'_>,
    total: usize,
    page: Page,
    link: bool,
) -> Reply {
    let reply = reply.header("x-total-count", total.to_string());
    let links = if link { links(root_url, uri, total, page) } else { Vec::new() };
    if links.is_empty() {
        reply.header("access-control-expose-headers", "X-Total-Count")
    } else {
        reply.header("link", links.join(",")).header("access-control-expose-headers", "X-Total-Count, Link")
    }
}

/// The `Link` entries in Gitea's order: next, last, first, prev.
fn links(root_url: &str, uri: RequestUri<'_>, total: usize, page: Page) -> Vec<String> {
    let per_page = page.limit.max(1);
    let total_pages = if total == 0 { 1 } else { total.div_ceil(per_page) };
    let current = page.page.min(total_pages);
    let has_next = total > current * per_page;
    let mut out = Vec::new();
    let mut add = |target: usize, rel: &str| {
        out.push(format!("<{}>; rel=\"{rel}\"", page_url(root_url, uri, target)));
    };
    if has_next {
        add(current + 1, "next");
        // Gitea tests !IsLast(), which with a clamped current page equals HasNext().
        add(total_pages, "last");
    }
    if current > 1 {
        add(1, "first");
        add(current - 1, "prev");
    }
    out
}

fn page_url(root_url: &str, uri: RequestUri<'_>, page: usize) -> String {
    let mut pairs: Vec<(String, String)> =
        uri.raw_query.map(parse_query).unwrap_or_default().into_iter().filter(|(k, _)| k != "page").collect();
    pairs.push(("page".into(), page.to_string()));
    // Go's Values.Encode: keys sorted, the values of one key in their original order.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let query: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v))).collect();
    let path = uri.raw_path.strip_prefix('/').unwrap_or(uri.raw_path);
    format!("{root_url}{path}?{}", query.join("&"))
}

/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        parse_query(s)
    }

    #[test]
    fn defaults_and_caps() {
        assert_eq!(Page::from_query(&q("")), Page { page: 1, limit: 30 });
        assert_eq!(Page::from_query(&q("page=0&limit=500")), Page { page: 1, limit: 50 });
        assert_eq!(Page::from_query(&q("page=3&limit=-1")), Page { page: 3, limit: 30 });
    }

    #[test]
    fn link_header_like_gitea() {
        let uri = RequestUri {
            raw_path: "/api/v1/repos/o/r/issues",
            raw_query: Some("state=open&limit=20&page=2&q=a+b"),
        };
        let page = Page { page: 2, limit: 20 };
        let r = paginate(Reply::empty(200), "https://h.invalid/", uri, 45, page, true);
        let link = &r.headers.iter().find(|(n, _)| n == "link").unwrap().1;
        let base = "https://h.invalid/api/v1/repos/o/r/issues";
        assert_eq!(
            link,
            &format!(
                "<{base}?limit=20&page=3&q=a+b&state=open>; rel=\"next\",\
                 <{base}?limit=20&page=3&q=a+b&state=open>; rel=\"last\",\
                 <{base}?limit=20&page=1&q=a+b&state=open>; rel=\"first\",\
                 <{base}?limit=20&page=1&q=a+b&state=open>; rel=\"prev\""
            )
        );
    }

    #[test]
    fn single_page_has_no_link() {
        let uri = RequestUri { raw_path: "/x", raw_query: None };
        let r = paginate(Reply::empty(200), "https://h/", uri, 3, Page { page: 1, limit: 30 }, true);
        assert!(r.headers.iter().all(|(n, _)| n != "link"));
        assert!(r.headers.contains(&("x-total-count".into(), "3".into())));
    }
}
