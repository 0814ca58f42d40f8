//! A call's arguments made ready once: body field names in the spec's spelling, checked
//! against the tool's schema, and for the raw tool its path checked and the operation its
//! route reaches found. The policy judges this value and the plan is built from it, so
//! nothing after it looks at the arguments as the client spelled them, and nothing checks
//! them twice.

use serde_json::{Map, Value};

use super::plan::CallPlan;
use super::{fields, plan, raw, validate};
use crate::catalog::{Catalog, Operation, Target, ToolDef};
use crate::error::CallError;

/// The validated arguments of one call of `tool`. Made only by `Prepared::new`.
#[derive(Debug)]
pub struct Prepared<'c> {
    tool: &'c ToolDef,
    reached: Option<&'c ToolDef>,
    args: Map<String, Value>,
}

impl<'c> Prepared<'c> {
    /// Normalise and validate `args` for `tool`, or say which argument is wrong and why. A
    /// raw call's body is spelled as the operation its route reaches spells it (the forges
    /// read either), so that the policy reads its members by their exact names.
    pub fn new(
        catalog: &'c Catalog,
        tool: &'c ToolDef,
        mut args: Map<String, Value>,
    ) -> Result<Self, CallError> {
        fields::normalize(tool, &mut args)?;
        validate::validate(tool, &mut args)?;
        let reached = match tool.target {
            Target::Raw => {
                if let Some(path) = args.get("path").and_then(Value::as_str) {
                    raw::check_path(path).map_err(|m| CallError::invalid_argument("/path", m))?;
                }
                catalog.reached_by_raw(&args).map(AsRef::as_ref)
            }
            Target::Operation(_) | Target::AttachmentDownload => None,
            Target::SearchOperations | Target::OperationSchema | Target::CallOperation => {
                unreachable!("the discovery tools are answered or resolved, never sent")
            }
        };
        if let Some(reached) = reached {
            fields::normalize(reached, &mut args)?;
        }
        Ok(Prepared { tool, reached, args })
    }

    /// The tool that runs.
    pub fn tool(&self) -> &'c ToolDef {
        self.tool
    }

    /// For the raw tool, the spec operation its method and path reach, if any.
    pub(crate) fn reached(&self) -> Option<&'c ToolDef> {
        self.reached
    }

    /// The spec operation the call runs: the tool's, or the one a raw call reaches.
    pub fn operation(&self) -> Option<&'c Operation> {
        self.tool.operation().or(self.reached.and_then(ToolDef::operation))
    }

    /// The arguments, normalised and validated.
    pub fn args(&self) -> &Map<String, Value> {
        &self.args
    }

    /// The request to send: encoded path, query, body or multipart parts (`max_upload`: the
    /// most bytes an uploaded file may have).
    pub fn plan(&self, max_upload: u64) -> Result<CallPlan, CallError> {
        match &self.tool.target {
            Target::Operation(op) => plan::for_operation(op, &self.args, max_upload),
            Target::Raw => raw::plan(&self.args, self.reached.and_then(ToolDef::operation)),
            Target::AttachmentDownload => Ok(plan::attachment_download(&self.args)),
            Target::SearchOperations | Target::OperationSchema | Target::CallOperation => {
                unreachable!("never prepared")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Flavor;
    use crate::error::ErrorKind;
    use serde_json::json;

    fn gitea() -> &'static Catalog {
        crate::catalog::embedded(Flavor::Gitea)
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_raw_body_is_spelled_as_the_operation_it_reaches_and_collisions_are_refused() {
        let c = gitea();
        let raw = c.get("gitea_api_request").unwrap();
        let p = Prepared::new(
            c,
            raw,
            args(json!({"method": "POST", "path": "/repos/o/r/pulls/1/merge", "body": {"DO": "merge"}})),
        )
        .unwrap();
        assert_eq!(p.reached().unwrap().name, "repoMergePullRequest");
        assert_eq!(p.args()["body"], json!({"do": "merge"}));
        let twice = args(
            json!({"method": "POST", "path": "/repos/o/r/pulls/1/merge", "body": {"Do": "a", "do": "b"}}),
        );
        let e = Prepared::new(c, raw, twice).unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{e}");
    }

    #[test]
    fn a_raw_path_the_raw_rules_refuse_is_an_argument_error_before_any_route_is_looked_up() {
        let c = gitea();
        let raw = c.get("gitea_api_request").unwrap();
        for path in ["/a%2Fb", "/repos/o/../r", "/repos?x=1", "repos"] {
            let e = Prepared::new(c, raw, args(json!({"method": "GET", "path": path}))).unwrap_err();
            assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{path}: {e}");
        }
    }

    #[test]
    fn an_operation_is_validated_once_and_planned_from_what_was_validated() {
        let c = gitea();
        let tool = c.get("issueCreateIssue").unwrap();
        let missing = Prepared::new(c, tool, args(json!({"owner": "o", "repo": "r"}))).unwrap_err();
        assert_eq!(missing.kind(), Some(ErrorKind::InvalidArguments));
        let p =
            Prepared::new(c, tool, args(json!({"owner": "o", "repo": "r", "body": {"TITLE": "t"}}))).unwrap();
        assert_eq!(p.operation().unwrap().id, "issueCreateIssue");
        assert_eq!(p.args()["body"], json!({"title": "t"}));
        assert_eq!(p.plan(1 << 20).unwrap().path(), "/repos/o/r/issues");
    }
}
