//! Known mistakes of the embedded specs, corrected in one place.
//!
//! Each row says which operation of which flavor the spec gets wrong, what is really
//! returned, and how we know (each row's comment names the router and handler that show it).
//! The generator applies a row by replacing the response kind it would have
//! inferred from `produces` and the declared responses.

use super::{Flavor, ResponseKind};

/// One correction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpecFix {
    pub(crate) flavor: Flavor,
    pub(crate) operation: &'static str,
    pub(crate) response: ResponseKind,
    /// Appended to the tool description, so the model knows where to look.
    pub(crate) note: &'static str,
}

/// The table.
pub(crate) const FIXES: &[SpecFix] = &[
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "repoGetArchive",
        response: ResponseKind::Binary,
        // Why: declares application/json and a 200 without schema, but streams a zip, tar.gz or bundle
        note: "Returns the archive as binary data.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "downloadActionsRunJobLogs",
        response: ResponseKind::Text,
        // Why: declares JSON, but its 200 is the job's log as plain text
        note: "Returns the log as text.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "downloadArtifact",
        response: ResponseKind::Redirect,
        // Why: answers 302 to a signed blob URL; the zip itself is served by that URL
        note: "Answers with a redirect: data.location is the download URL.",
    },
    // Gitea's RegistrationToken response declares the token as a response *header*; the
    // handler (routers/api/v1/shared/runners.go) writes a JSON body {"token": "..."}.
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "adminCreateRunnerRegistrationToken",
        response: ResponseKind::Json,
        // Why: the registration token comes back as a JSON body {"token"}, not as a header
        note: "Returns the new registration token as data.token.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "orgCreateRunnerRegistrationToken",
        response: ResponseKind::Json,
        // Why: the registration token comes back as a JSON body {"token"}, not as a header
        note: "Returns the new registration token as data.token.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "repoCreateRunnerRegistrationToken",
        response: ResponseKind::Json,
        // Why: the registration token comes back as a JSON body {"token"}, not as a header
        note: "Returns the new registration token as data.token.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "userCreateRunnerRegistrationToken",
        response: ResponseKind::Json,
        // Why: the registration token comes back as a JSON body {"token"}, not as a header
        note: "Returns the new registration token as data.token.",
    },
    SpecFix {
        flavor: Flavor::Gitea,
        operation: "repoGetEditorConfig",
        response: ResponseKind::Json,
        // Why: declares a 200 without schema; the handler returns the editorconfig definition as JSON
        note: "",
    },
];

/// The rows for one flavor.
pub(crate) fn for_flavor(flavor: Flavor) -> Vec<SpecFix> {
    FIXES.iter().copied().filter(|f| f.flavor == flavor).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn every_fix_names_an_operation_of_its_spec_and_is_applied() {
        for flavor in [Flavor::Gitea, Flavor::Forgejo] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            for fix in for_flavor(flavor) {
                let tool = c.get(fix.operation).unwrap_or_else(|| panic!("{} not in spec", fix.operation));
                assert_eq!(tool.operation().unwrap().response, fix.response, "{}", fix.operation);
            }
        }
    }

    #[test]
    fn a_fix_of_one_flavor_does_not_describe_the_other_flavors_tool() {
        let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        let mut checked = 0;
        for fix in FIXES.iter().filter(|x| !x.note.is_empty()) {
            let other = if fix.flavor == Flavor::Gitea { &f } else { &g };
            let own_note = |fl: Flavor| FIXES.iter().any(|x| x.flavor == fl && x.operation == fix.operation);
            if let Some(tool) = other.get(fix.operation) {
                if !own_note(other.flavor) {
                    assert!(!tool.description.contains(fix.note), "{}: {}", fix.operation, tool.description);
                    checked += 1;
                }
            }
        }
        assert!(checked > 0, "some fixed operation exists on the other flavor without a fix of its own");
    }

    #[test]
    fn archive_is_binary_and_job_logs_are_text_and_artifact_download_redirects() {
        let c = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        assert_eq!(c.get("repoGetArchive").unwrap().operation().unwrap().response, ResponseKind::Binary);
        assert_eq!(
            c.get("downloadActionsRunJobLogs").unwrap().operation().unwrap().response,
            ResponseKind::Text
        );
        assert_eq!(c.get("downloadArtifact").unwrap().operation().unwrap().response, ResponseKind::Redirect);
        assert_eq!(
            c.get("repoCreateRunnerRegistrationToken").unwrap().operation().unwrap().response,
            ResponseKind::Json
        );
        assert!(c.get("repoCreateRunnerRegistrationToken").unwrap().description.contains("data.token"));
    }

    #[test]
    fn without_the_fix_the_spec_would_say_json_for_the_archive() {
        // Guards the fix against silently becoming a no-op: the Gitea spec really declares JSON.
        let (_, operations) = crate::catalog::spec::Spec::parse(Flavor::Gitea.embedded_spec()).unwrap();
        let op = operations.iter().find(|o| o.id == "repoGetArchive").unwrap();
        assert_eq!(op.produces, ["application/json"]);
    }
}
