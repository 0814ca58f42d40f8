//! Operations whose purpose is to hand out a fresh credential. Their successful results skip pattern masking and
//! block mode — masking would make the credential useless — while exact redaction still
//! applies and their errors are masked like any other. Names a spec lacks are harmless.
//! Operators who want no credential in the model's context disable these tools.

/// The table: the token operations the design started from, then each flavor's equivalents
/// found in the specs.
pub(crate) const CREDENTIAL_ISSUING_OPERATIONS: &[&str] = &[
    // The design's own list.
    "userCreateToken",
    "adminCreateRunnerRegistrationToken",
    "orgCreateRunnerRegistrationToken",
    "repoCreateRunnerRegistrationToken",
    "userCreateRunnerRegistrationToken",
    "userCreateOAuth2Application",
    "userUpdateOAuth2Application",
    "repoCreateDeployToken",
    // Forgejo 16
    "adminCreateUserAccessToken",
    "registerAdminRunner",
    "registerOrgRunner",
    "registerRepoRunner",
    "registerUserRunner",
    "adminGetRunnerRegistrationToken",
    "adminGetRegistrationToken",
    "orgGetRunnerRegistrationToken",
    "repoGetRunnerRegistrationToken",
    "userGetRunnerRegistrationToken",
];

/// Whether an operation issues credentials.
pub fn issues_credentials(operation_id: Option<&str>) -> bool {
    operation_id.is_some_and(|id| CREDENTIAL_ISSUING_OPERATIONS.contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};

    #[test]
    fn every_row_exists_in_at_least_one_spec_except_deploy_tokens() {
        let g = Catalog::build(Flavor::Gitea.embedded_spec(), Flavor::Gitea, None).unwrap();
        let f = Catalog::build(Flavor::Forgejo.embedded_spec(), Flavor::Forgejo, None).unwrap();
        for op in CREDENTIAL_ISSUING_OPERATIONS {
            // Neither forge has deploy tokens (only deploy keys); the design named it anyway.
            if *op == "repoCreateDeployToken" {
                assert!(g.get(op).is_none() && f.get(op).is_none());
                continue;
            }
            assert!(g.get(op).is_some() || f.get(op).is_some(), "{op} is in no spec");
        }
    }
}
