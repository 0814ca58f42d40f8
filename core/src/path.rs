//! Path values on the wire (README, "Results": how path values are encoded).
//!
//! Every path value is percent-encoded with `/` as `%2F`, because the forges route on the
//! escaped path and a single-segment `{param}` only matches up to a literal `/`. Parameters
//! served through a catch-all route (`Param::wildcard`, from the wildcard table) keep their
//! `/` literal: each segment is encoded on its own and the segments are joined with `/`.
//! A literal `/` there survives reverse proxies that mangle `%2F`.
//!
//! Values that would change the route instead of naming something are refused: empty
//! values or segments (routers collapse `//`), and `.` / `..` (URL libraries resolve them,
//! even as `%2E%2E`, which would send the request to another route).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::catalog::{Param, PathTemplate, Piece};
use crate::error::Shown;

/// Everything but RFC 3986 unreserved characters is encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Why a value cannot be put in a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathError {
    pub(crate) param: String,
    pub(crate) message: String,
}

/// Encode one value that must stay within one segment: `/` becomes `%2F`.
pub fn encode_segment(value: &str) -> String {
    utf8_percent_encode(value, SEGMENT).to_string()
}

/// Render a template with its values. `value_of` gives the string form of each parameter.
pub(crate) fn render<'a>(
    template: &PathTemplate,
    params: &[Param],
    value_of: impl Fn(&str) -> Option<&'a str>,
) -> Result<String, PathError> {
    let mut out = String::with_capacity(64);
    for segment in &template.segments {
        out.push('/');
        for piece in segment {
            match piece {
                Piece::Lit(l) => out.push_str(l),
                Piece::Param(name) => {
                    let err = |message: &str| PathError { param: name.clone(), message: message.to_owned() };
                    let value = value_of(name).ok_or_else(|| err("is required"))?;
                    let wildcard = params.iter().any(|p| &p.name == name && p.wildcard);
                    if wildcard {
                        out.push_str(&encode_wildcard(value).map_err(|m| err(&m))?);
                    } else {
                        check_segment(value).map_err(|m| err(&m))?;
                        out.push_str(&encode_segment(value));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A catch-all value: each `/`-separated segment encoded, joined by literal `/`.
pub fn encode_wildcard(value: &str) -> Result<String, Shown> {
    let mut out = String::with_capacity(value.len() + 8);
    for (i, seg) in value.split('/').enumerate() {
        if seg.is_empty() {
            return Err(format!(
                "has an empty segment in {value:?}: no leading, trailing or doubled '/' (the forge would collapse them)"
            ));
        }
        check_segment(seg)?;
        if i > 0 {
            out.push('/');
        }
        out.push_str(&encode_segment(seg));
    }
    Ok(out)
}

fn check_segment(seg: &str) -> Result<(), Shown> {
    match seg {
        "" => Err("must not be empty".into()),
        "." | ".." => Err(format!("must not be {seg:?}: it would point the request at another route")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Location;

    fn params(wild: &[&str], names: &[&str]) -> Vec<Param> {
        names
            .iter()
            .map(|n| Param {
                name: n.to_string(),
                location: Location::Path,
                required: true,
                collection: None,
                wildcard: wild.contains(n),
            })
            .collect()
    }

    fn render_with(path: &str, wild: &[&str], vals: &[(&str, &str)]) -> Result<String, PathError> {
        let t = PathTemplate::parse(path);
        let names: Vec<&str> = t.params().collect();
        render(&t, &params(wild, &names), |n| vals.iter().find(|(k, _)| *k == n).map(|(_, v)| *v))
    }

    #[test]
    fn single_segment_values_encode_the_slash() {
        let p = render_with(
            "/repos/{owner}/{repo}/releases/tags/{tag}",
            &[],
            &[("owner", "o"), ("repo", "r"), ("tag", "rel/1.0")],
        );
        assert_eq!(p.unwrap(), "/repos/o/r/releases/tags/rel%2F1.0");
    }

    #[test]
    fn wildcard_values_keep_the_slash_and_encode_each_segment() {
        let p = render_with(
            "/repos/{owner}/{repo}/contents/{filepath}",
            &["filepath"],
            &[("owner", "o"), ("repo", "r"), ("filepath", "docs/a b.md")],
        );
        assert_eq!(p.unwrap(), "/repos/o/r/contents/docs/a%20b.md");
    }

    #[test]
    fn unicode_and_reserved_characters_are_encoded() {
        assert_eq!(encode_segment("ä?#%&+ x"), "%C3%A4%3F%23%25%26%2B%20x");
        assert_eq!(encode_segment("v1.0-rc_1~x"), "v1.0-rc_1~x");
    }

    #[test]
    fn empty_and_dot_segments_are_refused_with_the_parameter_named() {
        for bad in ["/docs", "docs/", "a//b", "a/../b", "..", "./x"] {
            let e = render_with(
                "/repos/{owner}/{repo}/contents/{filepath}",
                &["filepath"],
                &[("owner", "o"), ("repo", "r"), ("filepath", bad)],
            );
            assert_eq!(e.unwrap_err().param, "filepath", "{bad}");
        }
        let e = render_with("/repos/{owner}/{repo}", &[], &[("owner", ".."), ("repo", "r")]).unwrap_err();
        assert_eq!(e.param, "owner");
        // A single-segment value may contain '/' and dots inside: it is one encoded segment.
        let ok = render_with(
            "/repos/{owner}/{repo}/releases/tags/{tag}",
            &[],
            &[("owner", "o"), ("repo", "r"), ("tag", "../x")],
        );
        assert_eq!(ok.unwrap(), "/repos/o/r/releases/tags/..%2Fx");
    }

    #[test]
    fn two_parameters_in_one_segment() {
        let p = render_with(
            "/repos/{owner}/{repo}/git/commits/{sha}.{diffType}",
            &[],
            &[("owner", "o"), ("repo", "r"), ("sha", "abc"), ("diffType", "diff")],
        );
        assert_eq!(p.unwrap(), "/repos/o/r/git/commits/abc.diff");
    }
}
