//! Which definitions are entities, and what identifies one: a nested `User` is its login, a
//! nested `Repository` its `full_name`. Every definition that some member of another holds
//! has a row here (a test over both specs checks it): an entity is reduced to its identity
//! when nested, every other definition is kept, compacted member by member.

/// What a nested value of a definition becomes in the compact shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nested {
    /// Reduced to these members: to the value itself when there is one, else to an object
    /// of them.
    Identify(&'static [&'static str]),
    /// Kept, compacted member by member.
    Kept,
}

use Nested::{Identify, Kept};

/// Every definition a member of another holds, in either spec.
pub(crate) const NESTED: &[(&str, Nested)] = &[
    ("ActionArtifact", Identify(&["id", "name"])),
    ("ActionRun", Identify(&["id", "index_in_repo"])),
    ("ActionRunner", Identify(&["id", "name"])),
    ("ActionRunnerLabel", Identify(&["name"])),
    ("ActionTask", Kept),
    ("ActionWorkflow", Identify(&["id", "name"])),
    ("ActionWorkflowJob", Kept),
    ("ActionWorkflowRun", Identify(&["id"])),
    ("ActionWorkflowStep", Kept),
    ("AnnotatedTagObject", Identify(&["sha"])),
    ("Attachment", Kept),
    ("ChangeFileOperation", Kept),
    ("Comment", Kept),
    ("Commit", Identify(&["sha"])),
    ("CommitAffectedFiles", Kept),
    ("CommitDateOptions", Kept),
    ("CommitMeta", Identify(&["sha"])),
    ("CommitStats", Kept),
    ("CommitStatus", Kept),
    ("CommitStatusState", Kept),
    ("CommitUser", Kept),
    ("ContentsResponse", Kept),
    ("CreateHookOptionConfig", Kept),
    ("CreatePullReviewComment", Kept),
    ("CreateQuotaRuleOptions", Kept),
    ("Duration", Kept),
    ("ExternalTracker", Kept),
    ("ExternalWiki", Kept),
    ("FileCommitResponse", Kept),
    ("FileLinksResponse", Kept),
    ("GPGKey", Identify(&["id", "key_id"])),
    ("GPGKeyEmail", Kept),
    ("GitEntry", Kept),
    ("GitObject", Identify(&["sha"])),
    ("Identity", Kept),
    ("InternalTracker", Kept),
    ("Issue", Identify(&["number", "title"])),
    ("IssueConfigContactLink", Kept),
    ("IssueFormField", Kept),
    ("IssueFormFieldType", Kept),
    ("IssueFormFieldVisible", Kept),
    ("IssueTemplateLabels", Kept),
    ("IssueTemplateStringSlice", Kept),
    ("Label", Identify(&["name"])),
    ("Milestone", Identify(&["id", "title"])),
    ("NodeInfoServices", Kept),
    ("NodeInfoSoftware", Kept),
    ("NodeInfoUsage", Kept),
    ("NodeInfoUsageUsers", Kept),
    ("NotificationSubject", Kept),
    ("NotifySubjectType", Kept),
    ("Organization", Identify(&["name"])),
    ("PRBranchInfo", Kept),
    ("PayloadCommit", Identify(&["id", "message"])),
    ("PayloadCommitVerification", Kept),
    ("PayloadUser", Kept),
    ("Permission", Kept),
    ("Project", Identify(&["id", "title"])),
    ("PullRequestMeta", Kept),
    ("PullRequestMinimal", Identify(&["number"])),
    ("PullRequestMinimalHead", Kept),
    ("PullRequestMinimalHeadRepo", Identify(&["name"])),
    ("QuotaGroupList", Kept),
    ("QuotaRuleInfo", Kept),
    ("QuotaUsed", Kept),
    ("QuotaUsedSize", Kept),
    ("QuotaUsedSizeAssets", Kept),
    ("QuotaUsedSizeAssetsAttachments", Kept),
    ("QuotaUsedSizeAssetsPackages", Kept),
    ("QuotaUsedSizeGit", Kept),
    ("QuotaUsedSizeRepos", Kept),
    ("RepoCommit", Kept),
    ("RepoTargetOption", Kept),
    ("RepoTransfer", Kept),
    ("Repository", Identify(&["full_name"])),
    ("RepositoryMeta", Identify(&["full_name"])),
    ("ReviewStateType", Kept),
    ("StateType", Kept),
    ("TagArchiveDownloadCount", Kept),
    ("Team", Identify(&["id", "name"])),
    ("TimeStamp", Kept),
    ("TrackedTime", Kept),
    ("User", Identify(&["login"])),
    ("UserMeta", Identify(&["login"])),
    ("WikiCommit", Kept),
];

/// The row of definition `name`, if it has one (the rows are in name order: a test says so).
pub(crate) fn nested(name: &str) -> Option<Nested> {
    NESTED.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| NESTED[i].1)
}

/// Members that hold a URL the agent can rebuild from what the result keeps (ids, names,
/// SHAs) or never needs (API self links, avatars): left out at every level. The top-level
/// item keeps its own `html_url`, the link a person opens.
pub const DERIVABLE_URLS: &[&str] = &[
    "url",
    "_links",
    "api_url",
    "avatar_url",
    "badge_url",
    "clone_url",
    "commit_url",
    "contents_url",
    "diff_url",
    "git_url",
    "issue_url",
    "languages_url",
    "latest_comment_url",
    "patch_url",
    "previous_attempt_url",
    "pull_request_url",
    "repository_url",
    "run_url",
    "ssh_url",
    "tarball_url",
    "upload_url",
    "wiki_clone_url",
    "wiki_ssh_url",
    "zipball_url",
];

/// The definitions whose items have an author (`user`, and `original_author` when migrated):
/// in the compact shape each carries `author_relation` (`trust`), and under
/// `CONTENT_TRUST=withhold` their title and body may be withheld.
pub(crate) const AUTHORED: &[&str] =
    &["Comment", "Issue", "PullRequest", "PullReview", "PullReviewComment", "TimelineComment"];

/// A member left out when the other is present: it repeats what the other holds
/// (`assignee` is the first of `assignees`).
pub(crate) const DUPLICATES: &[(&str, &str)] = &[("assignee", "assignees")];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};

    fn catalogs() -> [Catalog; 2] {
        [Flavor::Gitea, Flavor::Forgejo].map(|f| Catalog::build(f.embedded_spec(), f, None).unwrap())
    }

    #[test]
    fn every_definition_either_spec_nests_has_a_row_and_every_row_names_one() {
        let catalogs = catalogs();
        let mut nested: Vec<&str> = catalogs.iter().flat_map(|c| c.definitions().nested()).collect();
        nested.sort_unstable();
        nested.dedup();
        let missing: Vec<&&str> = nested.iter().filter(|n| super::nested(n).is_none()).collect();
        assert!(missing.is_empty(), "nested definitions without a row in NESTED: {missing:?}");
        let unknown: Vec<&str> = NESTED.iter().map(|(n, _)| *n).filter(|n| !nested.contains(n)).collect();
        assert!(unknown.is_empty(), "rows naming no nested definition of either spec: {unknown:?}");
        let mut names: Vec<&str> = NESTED.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        assert_eq!(names, NESTED.iter().map(|(n, _)| *n).collect::<Vec<_>>(), "rows in name order, once");
    }

    #[test]
    fn every_identifying_member_is_a_member_of_its_definition_in_each_spec_that_has_it() {
        for c in catalogs() {
            for (name, row) in NESTED {
                let (Identify(members), Some(def)) = (row, c.definitions().get(name)) else { continue };
                for m in *members {
                    assert!(def.has(m), "{:?}: {name} has no member {m}", c.flavor);
                }
            }
        }
    }

    #[test]
    fn every_authored_definition_has_a_user_and_a_body_in_each_spec() {
        for c in catalogs() {
            for name in AUTHORED {
                let def = c.definitions().get(name).unwrap_or_else(|| panic!("{:?}: no {name}", c.flavor));
                assert!(def.has("user") && def.has("body"), "{:?}: {name}", c.flavor);
                assert!(
                    !def.has(crate::shape::trust::RELATION),
                    "{:?}: {name} has its own relation",
                    c.flavor
                );
            }
        }
    }

    #[test]
    fn derivable_urls_and_duplicates_are_members_of_definitions_of_either_spec() {
        let catalogs = catalogs();
        let has = |m: &str| {
            catalogs
                .iter()
                .any(|c| c.definitions().names().any(|n| c.definitions().get(n).is_some_and(|d| d.has(m))))
        };
        for m in DERIVABLE_URLS {
            assert!(has(m), "no definition has {m}");
        }
        for (dup, of) in DUPLICATES {
            assert!(has(dup) && has(of), "{dup} / {of}");
        }
    }
}
