//! MCP resources: a file at a ref, an issue with its comments, a pull request.
//!
//! Each template is a row of `TEMPLATES` (its RFC 6570 URI template, for clients). `parse`
//! turns a concrete URI (percent-decoding each part) into the spec operations it reads, then
//! `call::run_reads` runs them under the request's identity, policy and guard,
//! so a resource is exactly as safe as the tools it stands for, and comes back in the same
//! envelope.

use serde_json::{Map, Value, json};

use crate::call::{self, Read};
use crate::identity::Caller;
use crate::server::Server;
use aegis_core::catalog::attachment_tool;
use aegis_core::error::{CallError, ErrorKind};
use aegis_core::guard::{Guarded, GuardedError};
use aegis_core::policy::Narrowing;

use aegis_core::envelope::link::SCHEME;

/// One resource template.
#[derive(Debug)]
pub(crate) struct Template {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) uri_template: &'static str,
    pub(crate) description: &'static str,
}

/// The templates, in the order `resources/templates/list` shows them.
pub(crate) const TEMPLATES: &[Template] = &[
    Template {
        name: "file",
        title: "File at a ref",
        uri_template: "gitea://repos/{owner}/{repo}/contents/{+path}{?ref}",
        description: "A file's contents at a branch, tag or commit (default branch without ref): text as a string, other content as a blob.",
    },
    Template {
        name: "issue",
        title: "Issue with comments",
        uri_template: "gitea://repos/{owner}/{repo}/issues/{index}",
        description: "An issue and its comments, as {issue, comments}.",
    },
    Template {
        name: "pull_request",
        title: "Pull request",
        uri_template: "gitea://repos/{owner}/{repo}/pulls/{index}",
        description: "A pull request: title, body, state, head and base, mergeability.",
    },
    Template {
        name: "attachment",
        title: "Attachment",
        uri_template: "gitea://attachments/{uuid}",
        description: "The bytes of an issue, comment or release attachment: text as a string, other content as a blob.",
    },
];

/// Read the resource at `uri` as `caller`: the envelope text, or why not (`trace`: as for
/// `call::run`).
pub(crate) async fn read(
    server: &Server,
    caller: Caller,
    (narrowing, session): (&Narrowing, &crate::reads::Session),
    uri: &str,
    trace: &mut crate::audit::Trace,
) -> Result<Guarded, GuardedError> {
    let refused = |e| server.guard.for_call(caller.secrets()).error(e);
    let (forge, reads, shape) = parse(uri).map_err(refused)?;
    if forge.is_some() && !server.forges.named() {
        return Err(refused(CallError::local(
            ErrorKind::InvalidArguments,
            "this server serves one forge: its resource URIs name none (gitea://repos/…, gitea://attachments/…)",
        )));
    }
    let combine = move |mut datas: Vec<Value>| match shape {
        Shape::One => datas.pop().unwrap_or(Value::Null),
        Shape::IssueWithComments => {
            let comments = datas.pop().unwrap_or(Value::Null);
            let issue = datas.pop().unwrap_or(Value::Null);
            json!({"issue": issue, "comments": comments})
        }
    };
    call::run_reads(server, caller, (narrowing, session), (forge, reads), combine, trace).await
}

/// How the data of a resource's reads become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    One,
    IssueWithComments,
}

/// The reads a concrete URI stands for, for the fuzz target.
#[cfg(feature = "fuzzing")]
pub(crate) fn reads_of(uri: &str) -> Result<Vec<Read>, CallError> {
    parse(uri).map(|(_, reads, _)| reads)
}

/// The first part of a URI that names a resource, not a forge.
const KINDS: [&str; 2] = ["repos", "attachments"];

/// A concrete URI → the forge it names (`gitea://{forge}/…`, with several forges) and the
/// reads it stands for.
fn parse(uri: &str) -> Result<(Option<String>, Vec<Read>, Shape), CallError> {
    let rest = uri.strip_prefix(SCHEME).unwrap_or_default();
    let first = rest.split(['/', '?']).next().unwrap_or_default();
    let named = !first.is_empty() && !KINDS.contains(&first) && rest[first.len()..].starts_with('/');
    let (forge, uri) = match named {
        true => (Some(first.to_owned()), format!("{SCHEME}{}", &rest[first.len() + 1..])),
        false => (None, uri.to_owned()),
    };
    let (reads, shape) = parse_on_one_forge(&uri)?;
    Ok((forge, reads, shape))
}

/// A URI without a forge → the reads it stands for.
fn parse_on_one_forge(uri: &str) -> Result<(Vec<Read>, Shape), CallError> {
    let bad = |why: &str| {
        CallError::local(
            ErrorKind::InvalidArguments,
            format!(
                "{why}; resource URIs look like {}",
                TEMPLATES.iter().map(|t| t.uri_template).collect::<Vec<_>>().join(", ")
            ),
        )
    };
    let rest = uri.strip_prefix(SCHEME).ok_or_else(|| bad("the URI does not start with gitea://"))?;
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let raw: Vec<&str> = path.split('/').collect();
    let segments: Vec<String> = raw
        .iter()
        .map(|s| decode(s))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("a part of the URI is not valid percent-encoded UTF-8"))?;
    if let [kind, uuid] = &segments[..]
        && kind == "attachments"
        && !uuid.is_empty()
        && query.is_none()
    {
        let mut args = Map::new();
        args.insert("uuid".into(), uuid.clone().into());
        return Ok((vec![Read { operation: attachment_tool::NAME, args, at: "" }], Shape::One));
    }
    if segments.len() < 5 || segments[0] != "repos" || segments[1..].iter().any(String::is_empty) {
        return Err(bad("the URI names no repository resource"));
    }
    let mut args = Map::new();
    args.insert("owner".into(), segments[1].clone().into());
    args.insert("repo".into(), segments[2].clone().into());
    let index = |s: &str| s.parse::<u64>().map_err(|_| bad("an issue or pull request index is a number"));
    match (segments[3].as_str(), segments.len()) {
        ("contents", _) => {
            // `%2F` is a `/` here too: an empty segment is refused however it is written.
            let filepath = segments[4..].join("/");
            if filepath.split('/').any(str::is_empty) {
                return Err(bad("a file path has no empty segment"));
            }
            args.insert("filepath".into(), filepath.into());
            for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
                match pair.split_once('=') {
                    Some(("ref", v)) if !v.is_empty() => {
                        let v = decode(v).ok_or_else(|| bad("the ref is not valid percent-encoded UTF-8"))?;
                        args.insert("ref".into(), v.into());
                    }
                    _ => return Err(bad("the only query parameter of a file URI is ref")),
                }
            }
            Ok((vec![Read { operation: "repoGetRawFile", args, at: "" }], Shape::One))
        }
        ("issues", 5) if query.is_none() => {
            args.insert("index".into(), index(&segments[4])?.into());
            let comments = args.clone();
            Ok((
                vec![
                    Read { operation: "issueGetIssue", args, at: "/issue" },
                    Read { operation: "issueGetComments", args: comments, at: "/comments" },
                ],
                Shape::IssueWithComments,
            ))
        }
        ("pulls", 5) if query.is_none() => {
            args.insert("index".into(), index(&segments[4])?.into());
            Ok((vec![Read { operation: "repoGetPullRequest", args, at: "" }], Shape::One))
        }
        _ => Err(bad("the URI names no resource this server offers")),
    }
}

/// Percent-decode one URI part; `None` when it is not UTF-8 afterwards or a `%` is broken.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aegis_core::catalog::{Catalog, Flavor};
    use aegis_core::envelope::link::uri_of;

    fn args_of(uri: &str) -> Vec<(&'static str, Value)> {
        let (_, reads, _) = parse(uri).unwrap();
        reads.into_iter().map(|r| (r.operation, Value::Object(r.args))).collect()
    }

    #[test]
    fn file_uris_keep_slashes_in_the_path_and_decode_the_ref() {
        assert_eq!(
            args_of("gitea://repos/alice/demo/contents/docs/a%20b.md?ref=feature%2Fx"),
            [(
                "repoGetRawFile",
                json!({"owner": "alice", "repo": "demo", "filepath": "docs/a b.md", "ref": "feature/x"})
            )]
        );
        assert_eq!(
            args_of("gitea://repos/alice/demo/contents/README.md"),
            [("repoGetRawFile", json!({"owner": "alice", "repo": "demo", "filepath": "README.md"}))]
        );
    }

    #[test]
    fn a_file_path_with_an_empty_segment_is_refused_and_never_linked() {
        for uri in ["gitea://repos/o/r/contents/a%2F%2Fb", "gitea://repos/o/r/contents/a%2F"] {
            assert!(parse(uri).is_err(), "{uri}");
        }
        let Value::Object(args) = json!({"owner": "o", "repo": "r", "filepath": "a//b"}) else {
            unreachable!()
        };
        assert_eq!(uri_of(None, "repoGetRawFile", &args), None);
    }

    #[test]
    fn the_uri_of_a_raw_file_or_an_attachment_reads_it_again() {
        for (tool, args) in [
            (
                "repoGetRawFile",
                json!({"owner": "alice", "repo": "demo", "filepath": "img/a b#1.png", "ref": "feature/x"}),
            ),
            ("repoGetRawFile", json!({"owner": "alice", "repo": "demo", "filepath": "logo.png"})),
            (attachment_tool::NAME, json!({"uuid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"})),
        ] {
            let Value::Object(args) = args else { unreachable!() };
            let uri = uri_of(None, tool, &args).unwrap();
            let (_, reads, _) = parse(&uri).unwrap();
            assert_eq!((reads[0].operation, &reads[0].args), (tool, &args), "{uri}");
        }
        let Value::Object(args) = json!({"owner": "alice", "repo": "demo", "filepath": "a b#1.png"}) else {
            unreachable!()
        };
        assert_eq!(
            uri_of(None, "repoGetRawFile", &args).unwrap(),
            "gitea://repos/alice/demo/contents/a%20b%231.png"
        );
        assert_eq!(uri_of(None, "repoGetContents", &args), None);
    }

    /// With several forges a URI names its forge first; its link names the forge of the call,
    /// and reads the same again there.
    #[test]
    fn a_uri_may_name_its_forge_and_a_link_names_the_call_s() {
        let (forge, reads, _) = parse("gitea://home/repos/o/r/issues/7").unwrap();
        assert_eq!(forge.as_deref(), Some("home"));
        assert_eq!(reads[0].args, parse("gitea://repos/o/r/issues/7").unwrap().1[0].args);
        assert_eq!(parse("gitea://repos/o/r/issues/7").unwrap().0, None);
        let Value::Object(args) = json!({"owner": "o", "repo": "r", "filepath": "a.png", "ref": "v1"}) else {
            unreachable!()
        };
        let uri = uri_of(Some("home"), "repoGetRawFile", &args).unwrap();
        assert_eq!(uri, "gitea://home/repos/o/r/contents/a.png?ref=v1");
        let (forge, reads, _) = parse(&uri).unwrap();
        assert_eq!((forge.as_deref(), &reads[0].args), (Some("home"), &args));
        let (forge, reads, _) = parse("gitea://work/attachments/0f1e").unwrap();
        assert_eq!((forge.as_deref(), reads[0].args["uuid"].as_str()), (Some("work"), Some("0f1e")));
    }

    #[test]
    fn issue_and_pull_uris_name_their_operations() {
        let issue = args_of("gitea://repos/o/r/issues/7");
        assert_eq!(issue[0], ("issueGetIssue", json!({"owner": "o", "repo": "r", "index": 7})));
        assert_eq!(issue[1].0, "issueGetComments");
        assert_eq!(
            args_of("gitea://repos/o/r/pulls/3"),
            [("repoGetPullRequest", json!({"owner": "o", "repo": "r", "index": 3}))]
        );
    }

    #[test]
    fn malformed_uris_are_refused_with_the_templates() {
        for uri in [
            "https://x/repos/o/r/pulls/3",
            "gitea://repos/o/r/pulls/x",
            "gitea://repos/o/r/pulls/3/files",
            "gitea://repos/o//issues/1",
            "gitea://repos/o/r/contents/a?token=x",
            "gitea://repos/o/r/contents/%ZZ",
            "gitea://repos/o/r/contents/%+1",
            "gitea://repos/o/r/contents/a%2",
            "gitea://repos/o/r/wiki/x",
            "gitea://users/o",
        ] {
            let Err(CallError::Result(f)) = parse(uri) else { panic!("{uri} parsed") };
            assert_eq!(f.kind, ErrorKind::InvalidArguments, "{uri}");
            assert!(
                f.message.contains("gitea://repos/{owner}/{repo}/issues/{index}"),
                "{uri}: {}",
                f.message
            );
        }
    }

    /// One URI per template: every operation it reads exists in both flavors, and its
    /// arguments pass that operation's own schema.
    #[test]
    fn every_template_reads_operations_of_both_flavors_with_valid_arguments() {
        let samples = [
            "gitea://repos/o/r/contents/a/b.md?ref=main",
            "gitea://repos/o/r/issues/1",
            "gitea://repos/o/r/pulls/2",
            "gitea://attachments/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        ];
        assert_eq!(samples.len(), TEMPLATES.len());
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            for uri in samples {
                for read in parse(uri).unwrap().1 {
                    let tool = c
                        .get(read.operation)
                        .unwrap_or_else(|| panic!("{flavor:?} lacks {}", read.operation));
                    assert!(
                        aegis_core::args::validate::validate(tool, &mut read.args.clone()).is_ok(),
                        "{uri}: {}",
                        read.operation
                    );
                }
            }
        }
    }
}
