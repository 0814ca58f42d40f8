//! Which call a tool call is, and whether it may run: the first stage of every call, before
//! anyone is asked who the caller is.
//!
//! One pass over the arguments. The tool's name and kind are judged first, so nothing is
//! validated for a call no arguments could make allowed; then the arguments are normalised
//! and validated once (`Prepared`); then the policy judges what validation left, reading the
//! body by the spec's exact names. The discovery tools answer here from the catalog, or — the
//! call tool — name the operation that is admitted instead, its arguments taken out of the
//! call tool's own.

use serde_json::{Map, Value};

use crate::args::{Prepared, validate};
use crate::catalog::{Operation, Target, ToolDef};
use crate::discovery::Discovery;
use crate::error::CallError;
use crate::policy::confirm;
use crate::shape::Ask;

/// What the first stage decided, and how far it got.
#[derive(Debug)]
pub struct Admission<'c> {
    /// The spec operation the call reaches, as far as it is known: the audit line names it,
    /// also when the call is refused.
    pub operation: Option<&'c Operation>,
    pub outcome: Result<Admitted<'c>, CallError>,
}

/// A call the first stage let through.
#[derive(Debug)]
pub enum Admitted<'c> {
    /// A discovery tool's answer: nothing is sent for it.
    Answer(Value),
    /// A call to send, and what its caller asked of its result (`shape`, `fields`).
    Send(Prepared<'c>, Ask),
}

/// Admit the call of tool `name` with `args` for a request that sees the catalog and policy
/// as `view` says. An unknown name is a protocol error; a refusal is a `denied` error in the
/// policy's words; an argument that is wrong says which and why.
pub fn admit<'c>(view: Discovery<'c, '_>, name: &str, args: Map<String, Value>) -> Admission<'c> {
    let mut operation = None;
    let outcome = stages(view, name, args, &mut operation);
    Admission { operation, outcome }
}

fn stages<'c>(
    view: Discovery<'c, '_>,
    name: &str,
    mut args: Map<String, Value>,
    operation: &mut Option<&'c Operation>,
) -> Result<Admitted<'c>, CallError> {
    let Discovery { catalog, policy, narrowing, .. } = view;
    let tool = catalog.get(name).ok_or_else(|| CallError::UnknownTool(name.to_owned()))?;
    *operation = tool.operation();
    if let Some(refusal) = policy.tool_refusal(narrowing, tool) {
        return Err(refusal.into());
    }
    // The result's shape and fields are not the operation's arguments.
    let mut ask = if tool.takes_shape() { Ask::take(&mut args)? } else { Ask::default() };
    // A person's confirmation is not the operation's either (offered where it may apply).
    let confirms = |t: &ToolDef| policy.takes_confirm(t);
    if confirms(tool) {
        ask.confirm = confirm::take(&mut args)?;
    }
    let (tool, args) = match tool.target {
        Target::SearchOperations | Target::OperationSchema => {
            validate::validate(tool, &mut args)?;
            return view.answer(tool, &args).map(Admitted::Answer);
        }
        Target::CallOperation => {
            // The operation's arguments move out (an upload's base64 is not copied); the rest
            // is checked against the call tool's own schema.
            let mut arguments = match args.remove("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => {
                    return Err(CallError::invalid_argument("/arguments", "`arguments` must be an object"));
                }
            };
            validate::validate(tool, &mut args)?;
            let target = view.target(&args)?;
            *operation = target.operation();
            if let Some(refusal) = policy.tool_refusal(narrowing, target) {
                return Err(refusal.into());
            }
            // The operation may be asked for them among its own arguments.
            if target.takes_shape() {
                ask = ask.or(Ask::take(&mut arguments)?);
            }
            if confirms(target) {
                ask.confirm = ask.confirm.or(confirm::take(&mut arguments)?);
            }
            (target.as_ref(), arguments)
        }
        Target::Operation(_) | Target::Raw | Target::AttachmentDownload => (tool.as_ref(), args),
    };
    let call = Prepared::new(catalog, tool, args)?;
    *operation = call.operation();
    match policy.judge(narrowing, &call) {
        Some(refusal) => Err(refusal.into()),
        None => Ok(Admitted::Send(call, ask)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};
    use crate::error::ErrorKind;
    use crate::policy::repos::{ForgeHost, RepoList};
    use crate::policy::{Narrowing, Policy};
    use serde_json::json;
    use std::sync::Arc;

    fn gitea() -> &'static Catalog {
        crate::catalog::embedded(Flavor::Gitea)
    }

    fn fenced() -> Policy {
        let list = Some(Arc::new(RepoList::parse("acme/*").unwrap()));
        Policy {
            repos: list.clone(),
            write_repos: list,
            forge: ForgeHost::new(None, Vec::new()),
            ..Policy::default()
        }
    }

    fn admit_in<'c>(c: &'c Catalog, p: &'c Policy, n: &Narrowing, name: &str, args: Value) -> Admission<'c> {
        let view = Discovery { catalog: c, policy: p, narrowing: n, forges: &[] };
        admit(view, name, args.as_object().unwrap().clone())
    }

    fn kind(a: &Admission) -> Option<ErrorKind> {
        a.outcome.as_ref().err().and_then(CallError::kind)
    }

    #[test]
    fn the_policy_reads_the_body_as_the_forge_will_whatever_the_spelling() {
        let (c, p, n) = (gitea(), fenced(), Narrowing::default());
        // A new repository elsewhere, its owner spelled as Go's decoding would still read it.
        for spelled in ["Organization", "ORGANIZATION"] {
            let body = json!({"owner": "src", "repo": "x", "body": {spelled: "evil", "name": "w"}});
            let a = admit_in(c, &p, &n, "createFork", body);
            assert_eq!(kind(&a), Some(ErrorKind::Denied), "{spelled}");
        }
        // A login with the long s, which Go's folding takes for `s`, is judged as the username.
        let body = json!({"username": "acme", "body": {"new_u\u{17f}ername": "elsewhere"}});
        let writes = Policy { repos: None, ..fenced() };
        let a = admit_in(c, &writes, &n, "adminRenameUser", body);
        assert_eq!(kind(&a), Some(ErrorKind::Denied));
        // Two spellings of one member are an argument error, before the policy could pick one.
        let twice =
            json!({"owner": "src", "repo": "x", "body": {"organization": "acme", "Organization": "evil"}});
        assert_eq!(kind(&admit_in(c, &p, &n, "createFork", twice)), Some(ErrorKind::InvalidArguments));
    }

    #[test]
    fn name_rules_come_before_validation_and_the_fence_after_it() {
        let c = gitea();
        let ro = Policy { read_only: true, ..fenced() };
        let n = Narrowing::default();
        // Read-only refuses a write whatever its arguments, without validating them.
        assert_eq!(kind(&admit_in(c, &ro, &n, "repoDelete", json!({}))), Some(ErrorKind::Denied));
        // The fence reads validated arguments: a call missing them is told which.
        let p = fenced();
        assert_eq!(
            kind(&admit_in(c, &p, &n, "repoGet", json!({"owner": "evil"}))),
            Some(ErrorKind::InvalidArguments)
        );
        assert_eq!(
            kind(&admit_in(c, &p, &n, "repoGet", json!({"owner": "evil", "repo": "r"}))),
            Some(ErrorKind::Denied)
        );
        assert!(admit_in(c, &p, &n, "repoGet", json!({"owner": "acme", "repo": "r"})).outcome.is_ok());
    }

    #[test]
    fn the_call_tool_admits_its_operation_and_the_audit_learns_which_even_when_refused() {
        let (c, p, n) = (gitea(), fenced(), Narrowing::default());
        let call =
            json!({"operation_id": "repoGet", "arguments": {"owner": "evil", "repo": "r", "shape": "full"}});
        let a = admit_in(c, &p, &n, "gitea_call_operation", call);
        assert_eq!(a.operation.map(|o| o.id.as_str()), Some("repoGet"));
        assert_eq!(kind(&a), Some(ErrorKind::Denied));
        let ok = json!({"operation_id": "repoGet", "fields": ["name"], "arguments": {"owner": "acme", "repo": "r"}});
        match admit_in(c, &p, &n, "gitea_call_operation", ok).outcome {
            Ok(Admitted::Send(call, ask)) => {
                assert_eq!(call.tool().name, "repoGet");
                assert_eq!(ask.fields, Some(vec!["name".to_owned()]));
            }
            other => panic!("{other:?}"),
        }
        // A raw call's reached operation is named too.
        let raw = json!({"method": "DELETE", "path": "/repos/evil/r"});
        let a = admit_in(c, &p, &n, "gitea_api_request", raw);
        assert_eq!(
            (a.operation.map(|o| o.id.as_str()), kind(&a)),
            (Some("repoDelete"), Some(ErrorKind::Denied))
        );
        assert!(matches!(admit_in(c, &p, &n, "nope", json!({})).outcome, Err(CallError::UnknownTool(_))));
    }

    #[test]
    fn needs_writes_is_what_a_read_only_request_would_refuse() {
        let (c, p, n) = (gitea(), Policy::default(), Narrowing::default());
        let sent = |name: &str, args: Value| match admit_in(c, &p, &n, name, args).outcome {
            Ok(Admitted::Send(call, _)) => p.needs_writes(&call),
            other => panic!("{other:?}"),
        };
        assert!(sent("repoDelete", json!({"owner": "o", "repo": "r"})));
        assert!(!sent("repoGet", json!({"owner": "o", "repo": "r"})));
        assert!(sent("gitea_api_request", json!({"method": "POST", "path": "/repos/o/r/issues"})));
        assert!(!sent("gitea_api_request", json!({"method": "GET", "path": "/repos/o/r"})));
        let forgejo = crate::catalog::embedded(Flavor::Forgejo);
        let view = Discovery { catalog: forgejo, policy: &p, narrowing: &n, forges: &[] };
        let token = json!({"method": "GET", "path": "/repos/o/r/actions/runners/registration-token"});
        match admit(view, "gitea_api_request", token.as_object().unwrap().clone()).outcome {
            Ok(Admitted::Send(call, _)) => assert!(p.needs_writes(&call), "a credential is a write"),
            other => panic!("{other:?}"),
        }
    }
}
