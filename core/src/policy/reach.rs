//! What every operation of both forges can reach, for the repository allowlists: one row per
//! operation id, in one table. `repos.rs` judges a call by its row before anything is sent.
//!
//! Why a table of every operation rather than rules on routes: an operation keyed by an
//! account (`/admin/users/{username}`, `/users/{username}/tokens`) or by nothing at all
//! (`/admin/cron/{task}`) can reach every repository of an account or of the instance, and no
//! route shape says so. Each operation is given one `Reach`; a test fails when an operation of
//! either embedded spec has no row (so a new forge version cannot add one unjudged), and an
//! operation without a row — from a spec given with `--spec` — is refused under any allowlist.

use Reach::*;

/// What an operation reaches, and so what the allowlists must allow for it to run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reach {
    /// Nothing of a repository nor of an account beyond its public profile (the version,
    /// templates, rendering, user profiles and followers, the caller's own profile).
    Harmless,
    /// The repository (or repositories) its route names, and what `Also` names besides.
    Repo(&'static [Also]),
    /// Creates or moves a repository to a place its body (partly) names.
    Places(Moves),
    /// Whole accounts (an organisation, a user), named by these sources: each needs
    /// `owner/*`. A user's tokens, keys, name, existence and admin flag reach every
    /// repository of the account.
    Account(&'static [Source]),
    /// The caller's own account (its hooks, keys, tokens, secrets, runners, settings):
    /// `login/*`, judged once the caller is known.
    Caller,
    /// Every repository of the instance (system hooks, cron, every user and email, the
    /// instance's runners and quota): `*`.
    Instance,
    /// A listing across repositories, or an answer about a repository its route names only
    /// by id: the repositories its route names are judged, and its answer is filtered.
    Filtered(Listing),
    /// Reaches repositories its route does not name, so it cannot be judged before it runs:
    /// `*`, for the reason given.
    Refused(&'static str),
}

/// A repository named besides the route's own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Also {
    /// The body names an issue of another repository (`owner`, `repo`): read, or `write`
    /// when the operation changes it.
    Issue { write: bool },
    /// A body member holds a URL, which may name a repository of this forge: read (a
    /// migration's source), or `write` (a push mirror's target).
    Url { field: &'static str, write: bool },
    /// A pull request's head, `owner:branch` or `owner/repo:branch`, names a fork: read.
    Head(Source),
}

/// How an operation's route is judged when the operation creates or moves a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteUse {
    /// As any operation of its method.
    AsMethod,
    /// Only read (the source of a fork or a template).
    Read,
    /// Not at all: the new place is what matters (an owner's "create a repository").
    Skip,
}

/// Where a name comes from; for a new place, the first that gives a value wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Body(&'static str),
    Route(&'static str),
    /// The user the call runs as: known only once the caller is identified.
    Caller,
    /// A body member that names the owner by id: the place cannot be judged by name.
    ById(&'static str),
}

/// An operation that creates or moves a repository named (partly) in its body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moves {
    pub(crate) route: RouteUse,
    pub(crate) owner: &'static [Source],
    pub(crate) name: &'static [Source],
    /// Repositories it reads or writes besides (a migration's source).
    pub(crate) also: &'static [Also],
}

/// Where a listing's items name their repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    /// The item is a repository (`full_name`, else `owner.login` and `name`).
    Repository,
    /// The item's member holds the repository (a repository or its short form).
    Member(&'static str),
    /// A stopwatch: `repo_owner_name` and `repo_name`.
    Stopwatch,
    /// A tracked time: its issue's repository.
    IssueRepository,
    /// A timeline event: kept unless an issue it refers to (`ref_issue`, `dependent_issue`)
    /// belongs to a repository outside; one that refers to none stays.
    References,
    /// A team: its `organization`, which must be allowed wholly (`org/*`).
    Organization,
}

/// An answer whose route cannot be judged: where its list is (`""`: the data itself), how its
/// items name their repository, and whether it is one item rather than a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listing {
    pub(crate) at: &'static str,
    pub(crate) item: Item,
    pub(crate) single: bool,
}

/// The row of `op_id`, if it has one.
pub(crate) fn of(op_id: &str) -> Option<Reach> {
    static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, Reach>> =
        std::sync::OnceLock::new();
    INDEX.get_or_init(|| TABLE.iter().copied().collect()).get(op_id).copied()
}

/// An operation on the repository its route names, and nothing else.
const REPO: Reach = Repo(&[]);

const fn list(item: Item) -> Listing {
    Listing { at: "", item, single: false }
}
const fn one(item: Item) -> Listing {
    Listing { at: "", item, single: true }
}

const REPOSITORIES: Listing = list(Item::Repository);
const REPO_SEARCH: Listing = Listing { at: "/data", item: Item::Repository, single: false };
const REPO_BY_ID: Listing = one(Item::Repository);
const IN_REPOSITORY: Listing = list(Item::Member("repository"));
const NOTIFICATION: Listing = one(Item::Member("repository"));
const FEEDS: Listing = list(Item::Member("repo"));
const STOPWATCHES: Listing = list(Item::Stopwatch);
const TRACKED_TIMES: Listing = list(Item::IssueRepository);
const TIMELINE: Listing = list(Item::References);
const USER_RUNS: Listing = Listing { at: "/workflow_runs", item: Item::Member("repository"), single: false };
const TEAM: Listing = one(Item::Organization);

const USER_REPO: Moves =
    Moves { route: RouteUse::Skip, owner: &[Source::Caller], name: &[Source::Body("name")], also: &[] };
const ORG_REPO: Moves =
    Moves { route: RouteUse::Skip, owner: &[Source::Route("org")], name: &[Source::Body("name")], also: &[] };
const ADMIN_CREATE_REPO: Moves = Moves {
    route: RouteUse::Skip,
    owner: &[Source::Route("username")],
    name: &[Source::Body("name")],
    also: &[],
};
const MIGRATE: Moves = Moves {
    route: RouteUse::Skip,
    owner: &[Source::Body("repo_owner"), Source::ById("uid"), Source::Caller],
    name: &[Source::Body("repo_name")],
    also: &[Also::Url { field: "clone_addr", write: false }],
};
const GENERATE: Moves = Moves {
    route: RouteUse::Read,
    owner: &[Source::Body("owner")],
    name: &[Source::Body("name")],
    also: &[],
};
const FORK: Moves = Moves {
    route: RouteUse::Read,
    owner: &[Source::Body("organization"), Source::Caller],
    name: &[Source::Body("name"), Source::Route("repo")],
    also: &[],
};
const TRANSFER: Moves = Moves {
    route: RouteUse::AsMethod,
    owner: &[Source::Body("new_owner")],
    name: &[Source::Route("repo")],
    also: &[],
};
/// A rename: only when the body names a new name.
const RENAME: Moves = Moves {
    route: RouteUse::AsMethod,
    owner: &[Source::Route("owner")],
    name: &[Source::Body("name")],
    also: &[],
};

const TEAM_BY_ID: &str = "it names a team by id, and a team reaches its organisation's repositories";
const FORK_PARENT: &str = "it brings in the fork's parent repository, which its route does not name";
const ACTIVITY: &str = "it shows a user's activity in any repository";
const REPO_BY_ID_ONLY: &str = "it names a repository by id";

/// Every operation of both embedded specs, by route.
pub(crate) const TABLE: &[(&str, Reach)] = &[
    // /actions
    ("getActionsRun", Refused("it names a workflow run by the job's own token")),
    // /activitypub
    ("activitypubInstanceActor", Harmless),
    ("activitypubInstanceActorInbox", Instance),
    ("activitypubInstanceActorOutbox", Instance),
    ("activitypubRepository", Refused(REPO_BY_ID_ONLY)),
    ("activitypubRepositoryInbox", Refused(REPO_BY_ID_ONLY)),
    ("activitypubRepositoryOutbox", Refused(REPO_BY_ID_ONLY)),
    ("activitypubPerson", Harmless),
    ("activitypubPersonActivityNote", Refused(ACTIVITY)),
    ("activitypubPersonActivity", Refused(ACTIVITY)),
    ("activitypubPersonInbox", Refused("it names a user by id")),
    ("activitypubPersonFeed", Refused(ACTIVITY)),
    // /admin
    ("listAdminWorkflowJobs", Instance),
    ("getAdminRunners", Instance),
    ("registerAdminRunner", Instance),
    ("adminGetActionRunJobs", Instance),
    ("adminGetRunnerRegistrationToken", Instance),
    ("adminCreateRunnerRegistrationToken", Instance),
    ("deleteAdminRunner", Instance),
    ("getAdminRunner", Instance),
    ("updateAdminRunner", Instance),
    ("listAdminWorkflowRuns", Instance),
    ("adminCronList", Instance),
    ("adminCronRun", Instance),
    ("adminGetAllEmails", Instance),
    ("adminSearchEmails", Instance),
    ("adminListHooks", Instance),
    ("adminCreateHook", Instance),
    ("adminDeleteHook", Instance),
    ("adminGetHook", Instance),
    ("adminEditHook", Instance),
    ("adminGetAllOrgs", Instance),
    ("adminListQuotaGroups", Instance),
    ("adminCreateQuotaGroup", Instance),
    ("adminDeleteQuotaGroup", Instance),
    ("adminGetQuotaGroup", Instance),
    ("adminRemoveRuleFromQuotaGroup", Instance),
    ("adminAddRuleToQuotaGroup", Instance),
    ("adminListUsersInQuotaGroup", Instance),
    ("adminRemoveUserFromQuotaGroup", Instance),
    ("adminAddUserToQuotaGroup", Instance),
    ("adminListQuotaRules", Instance),
    ("adminCreateQuotaRule", Instance),
    ("adminDeleteQuotaRule", Instance),
    ("adminGetQuotaRule", Instance),
    ("adminEditQuotaRule", Instance),
    ("adminSearchRunJobs", Instance),
    ("adminGetRegistrationToken", Instance),
    ("adminUnadoptedList", Instance),
    ("adminDeleteUnadoptedRepository", REPO),
    ("adminAdoptRepository", REPO),
    ("adminSearchUsers", Instance),
    ("adminCreateUser", Account(&[Source::Body("username")])),
    ("adminDeleteUser", Account(&[Source::Route("username")])),
    ("adminEditUser", Account(&[Source::Route("username")])),
    ("adminDeleteUserBadges", Account(&[Source::Route("username")])),
    ("adminListUserBadges", Account(&[Source::Route("username")])),
    ("adminAddUserBadges", Account(&[Source::Route("username")])),
    ("adminDeleteUserEmails", Account(&[Source::Route("username")])),
    ("adminListUserEmails", Account(&[Source::Route("username")])),
    ("adminCreatePublicKey", Account(&[Source::Route("username")])),
    ("adminDeleteUserPublicKey", Account(&[Source::Route("username")])),
    ("adminCreateOrg", Account(&[Source::Route("username"), Source::Body("username")])),
    ("adminGetUserQuota", Account(&[Source::Route("username")])),
    ("adminSetUserQuotaGroups", Account(&[Source::Route("username")])),
    ("adminRenameUser", Account(&[Source::Route("username"), Source::Body("new_username")])),
    ("adminCreateRepo", Places(ADMIN_CREATE_REPO)),
    ("adminListUserAccessTokens", Account(&[Source::Route("username")])),
    ("adminCreateUserAccessToken", Account(&[Source::Route("username")])),
    ("adminDeleteUserAccessToken", Account(&[Source::Route("username")])),
    // /gitignore
    ("listGitignoresTemplates", Harmless),
    ("getGitignoreTemplateInfo", Harmless),
    // /label
    ("listLabelTemplates", Harmless),
    ("getLabelTemplateInfo", Harmless),
    // /licenses
    ("listLicenseTemplates", Harmless),
    ("getLicenseTemplateInfo", Harmless),
    // /markdown
    ("renderMarkdown", Harmless),
    ("renderMarkdownRaw", Harmless),
    // /markup
    ("renderMarkup", Harmless),
    // /nodeinfo
    ("getNodeInfo", Harmless),
    // /notifications
    ("notifyGetList", Filtered(IN_REPOSITORY)),
    (
        "notifyReadList",
        Refused("it marks notifications of every repository; use notifyReadRepoList for one repository"),
    ),
    ("notifyNewAvailable", Harmless),
    ("notifyGetThread", Filtered(NOTIFICATION)),
    ("notifyReadThread", Refused("it names a notification thread by id")),
    // /org
    ("createOrgRepoDeprecated", Places(ORG_REPO)),
    // /orgs
    ("orgGetAll", Harmless),
    ("orgCreate", Account(&[Source::Body("username")])),
    ("orgDelete", Account(&[Source::Route("org")])),
    ("orgGet", Account(&[Source::Route("org")])),
    ("orgEdit", Account(&[Source::Route("org")])),
    ("getOrgWorkflowJobs", Account(&[Source::Route("org")])),
    ("getOrgRunners", Account(&[Source::Route("org")])),
    ("registerOrgRunner", Account(&[Source::Route("org")])),
    ("orgSearchRunJobs", Account(&[Source::Route("org")])),
    ("orgGetRunnerRegistrationToken", Account(&[Source::Route("org")])),
    ("orgCreateRunnerRegistrationToken", Account(&[Source::Route("org")])),
    ("deleteOrgRunner", Account(&[Source::Route("org")])),
    ("getOrgRunner", Account(&[Source::Route("org")])),
    ("updateOrgRunner", Account(&[Source::Route("org")])),
    ("getOrgWorkflowRuns", Account(&[Source::Route("org")])),
    ("orgListActionsSecrets", Account(&[Source::Route("org")])),
    ("deleteOrgSecret", Account(&[Source::Route("org")])),
    ("updateOrgSecret", Account(&[Source::Route("org")])),
    ("getOrgVariablesList", Account(&[Source::Route("org")])),
    ("deleteOrgVariable", Account(&[Source::Route("org")])),
    ("getOrgVariable", Account(&[Source::Route("org")])),
    ("createOrgVariable", Account(&[Source::Route("org")])),
    ("updateOrgVariable", Account(&[Source::Route("org")])),
    ("orgListActivityFeeds", Filtered(FEEDS)),
    ("orgDeleteAvatar", Account(&[Source::Route("org")])),
    ("orgUpdateAvatar", Account(&[Source::Route("org")])),
    ("orgBlockUser", Account(&[Source::Route("org")])),
    ("organizationListBlocks", Account(&[Source::Route("org")])),
    ("organizationUnblockUser", Account(&[Source::Route("org")])),
    ("organizationCheckUserBlock", Account(&[Source::Route("org")])),
    ("organizationBlockUser", Account(&[Source::Route("org")])),
    ("orgListHooks", Account(&[Source::Route("org")])),
    ("orgCreateHook", Account(&[Source::Route("org")])),
    ("orgDeleteHook", Account(&[Source::Route("org")])),
    ("orgGetHook", Account(&[Source::Route("org")])),
    ("orgEditHook", Account(&[Source::Route("org")])),
    ("orgListLabels", Account(&[Source::Route("org")])),
    ("orgCreateLabel", Account(&[Source::Route("org")])),
    ("orgDeleteLabel", Account(&[Source::Route("org")])),
    ("orgGetLabel", Account(&[Source::Route("org")])),
    ("orgEditLabel", Account(&[Source::Route("org")])),
    ("orgListBlockedUsers", Account(&[Source::Route("org")])),
    ("orgListMembers", Account(&[Source::Route("org")])),
    ("orgDeleteMember", Account(&[Source::Route("org")])),
    ("orgIsMember", Account(&[Source::Route("org")])),
    ("orgListPublicMembers", Account(&[Source::Route("org")])),
    ("orgConcealMember", Account(&[Source::Route("org")])),
    ("orgIsPublicMember", Account(&[Source::Route("org")])),
    ("orgPublicizeMember", Account(&[Source::Route("org")])),
    ("orgGetQuota", Account(&[Source::Route("org")])),
    ("orgListQuotaArtifacts", Account(&[Source::Route("org")])),
    ("orgListQuotaAttachments", Account(&[Source::Route("org")])),
    ("orgCheckQuota", Account(&[Source::Route("org")])),
    ("orgListQuotaPackages", Account(&[Source::Route("org")])),
    ("renameOrg", Account(&[Source::Route("org"), Source::Body("new_name")])),
    ("orgDeleteRepos", Account(&[Source::Route("org")])),
    ("orgListRepos", Filtered(REPOSITORIES)),
    ("createOrgRepo", Places(ORG_REPO)),
    ("orgListTeams", Account(&[Source::Route("org")])),
    ("orgCreateTeam", Account(&[Source::Route("org")])),
    ("teamSearch", Account(&[Source::Route("org")])),
    ("orgUnblockUser", Account(&[Source::Route("org")])),
    // /packages
    ("listPackages", Account(&[Source::Route("owner")])),
    ("deletePackage", Account(&[Source::Route("owner")])),
    ("listPackageVersions", Account(&[Source::Route("owner")])),
    ("getLatestPackageVersion", Account(&[Source::Route("owner")])),
    ("linkPackage", Account(&[Source::Route("owner")])),
    ("unlinkPackage", Account(&[Source::Route("owner")])),
    ("deletePackageVersion", Account(&[Source::Route("owner")])),
    ("getPackage", Account(&[Source::Route("owner")])),
    ("listPackageFiles", Account(&[Source::Route("owner")])),
    // /repos
    ("issueSearchIssues", Filtered(IN_REPOSITORY)),
    ("repoMigrate", Places(MIGRATE)),
    ("repoSearch", Filtered(REPO_SEARCH)),
    // /repos/{owner}/{repo}/
    ("repoDelete", REPO),
    ("repoGet", REPO),
    ("repoEdit", Places(RENAME)),
    // /repos/{owner}/{repo}/actions
    ("ListActionArtifacts", REPO),
    ("getArtifacts", REPO),
    ("DeleteActionArtifact", REPO),
    ("deleteArtifact", REPO),
    ("GetActionArtifact", REPO),
    ("getArtifact", REPO),
    ("DownloadActionArtifact", REPO),
    ("downloadArtifact", REPO),
    ("listWorkflowJobs", REPO),
    ("getWorkflowJob", REPO),
    ("downloadActionsRunJobLogs", REPO),
    ("repoGetActionJobLogs", REPO),
    ("getRepoRunners", REPO),
    ("registerRepoRunner", REPO),
    ("repoSearchRunJobs", REPO),
    ("repoGetRunnerRegistrationToken", REPO),
    ("repoCreateRunnerRegistrationToken", REPO),
    ("deleteRepoRunner", REPO),
    ("getRepoRunner", REPO),
    ("updateRepoRunner", REPO),
    ("ListActionRuns", REPO),
    ("getWorkflowRuns", REPO),
    ("DeleteActionRun", REPO),
    ("ActionRun", REPO),
    ("ListActionRunArtifacts", REPO),
    ("CancelActionRun", REPO),
    ("ListActionRunJobs", REPO),
    ("repoGetActionRunLogs", REPO),
    ("deleteActionRun", REPO),
    ("GetWorkflowRun", REPO),
    ("getArtifactsOfRun", REPO),
    ("getWorkflowRunAttempt", REPO),
    ("listWorkflowRunAttemptJobs", REPO),
    ("listWorkflowRunJobs", REPO),
    ("rerunWorkflowJob", REPO),
    ("rerunWorkflowRun", REPO),
    ("rerunFailedWorkflowRun", REPO),
    ("repoListActionsSecrets", REPO),
    ("deleteRepoSecret", REPO),
    ("updateRepoSecret", REPO),
    ("ListActionTasks", REPO),
    ("getRepoVariablesList", REPO),
    ("deleteRepoVariable", REPO),
    ("getRepoVariable", REPO),
    ("createRepoVariable", REPO),
    ("updateRepoVariable", REPO),
    ("ActionsListRepositoryWorkflows", REPO),
    ("ActionsGetWorkflow", REPO),
    ("ActionsDisableWorkflow", REPO),
    ("ActionsDispatchWorkflow", REPO),
    ("ActionsEnableWorkflow", REPO),
    ("ActionsListWorkflowRuns", REPO),
    ("DispatchWorkflow", REPO),
    // /repos/{owner}/{repo}/activities
    ("repoListActivityFeeds", REPO),
    // /repos/{owner}/{repo}/archive
    ("repoGetArchive", REPO),
    // /repos/{owner}/{repo}/assignees
    ("repoGetAssignees", REPO),
    ("repoCheckAssignee", REPO),
    // /repos/{owner}/{repo}/avatar
    ("repoDeleteAvatar", REPO),
    ("repoUpdateAvatar", REPO),
    // /repos/{owner}/{repo}/branch_protections
    ("repoListBranchProtection", REPO),
    ("repoCreateBranchProtection", REPO),
    ("repoUpdateBranchProtectionPriories", REPO),
    ("repoDeleteBranchProtection", REPO),
    ("repoGetBranchProtection", REPO),
    ("repoEditBranchProtection", REPO),
    // /repos/{owner}/{repo}/branches
    ("repoListBranches", REPO),
    ("repoCreateBranch", REPO),
    ("repoDeleteBranch", REPO),
    ("repoGetBranch", REPO),
    ("repoRenameBranch", REPO),
    ("repoUpdateBranch", REPO),
    // /repos/{owner}/{repo}/collaborators
    ("repoListCollaborators", REPO),
    ("repoDeleteCollaborator", REPO),
    ("repoCheckCollaborator", REPO),
    ("repoAddCollaborator", REPO),
    ("repoGetRepoPermissions", REPO),
    // /repos/{owner}/{repo}/commits
    ("repoGetAllCommits", REPO),
    ("repoGetCombinedStatusByRef", REPO),
    ("repoListStatusesByRef", REPO),
    ("repoGetCommitPullRequest", REPO),
    // /repos/{owner}/{repo}/compare
    ("repoCompareDiff", Repo(&[Also::Head(Source::Route("basehead"))])),
    // /repos/{owner}/{repo}/contents
    ("repoGetContentsList", REPO),
    ("repoChangeFiles", REPO),
    // /repos/{owner}/{repo}/contents-ext
    ("repoGetContentsExt", REPO),
    // /repos/{owner}/{repo}/contents
    ("repoDeleteFile", REPO),
    ("repoGetContents", REPO),
    ("repoCreateFile", REPO),
    ("repoUpdateFile", REPO),
    // /repos/{owner}/{repo}/convert
    ("repoConvert", REPO),
    // /repos/{owner}/{repo}/diffpatch
    ("repoApplyDiffPatch", REPO),
    // /repos/{owner}/{repo}/editorconfig
    ("repoGetEditorConfig", REPO),
    // /repos/{owner}/{repo}/file-contents
    ("repoGetFileContents", REPO),
    ("repoGetFileContentsPost", REPO),
    // /repos/{owner}/{repo}/flags
    ("repoDeleteAllFlags", REPO),
    ("repoListFlags", REPO),
    ("repoReplaceAllFlags", REPO),
    ("repoDeleteFlag", REPO),
    ("repoCheckFlag", REPO),
    ("repoAddFlag", REPO),
    // /repos/{owner}/{repo}/forks
    ("listForks", Filtered(REPOSITORIES)),
    ("createFork", Places(FORK)),
    // /repos/{owner}/{repo}/git
    ("GetBlobs", REPO),
    ("GetBlob", REPO),
    ("repoGetSingleCommit", REPO),
    ("repoDownloadCommitDiffOrPatch", REPO),
    ("repoRemoveNote", REPO),
    ("repoGetNote", REPO),
    ("repoSetNote", REPO),
    ("repoListAllGitRefs", REPO),
    ("repoListGitRefs", REPO),
    ("GetAnnotatedTag", REPO),
    ("GetTree", REPO),
    // /repos/{owner}/{repo}/hooks
    ("repoListHooks", REPO),
    ("repoCreateHook", REPO),
    ("repoListGitHooks", REPO),
    ("repoDeleteGitHook", REPO),
    ("repoGetGitHook", REPO),
    ("repoEditGitHook", REPO),
    ("repoDeleteHook", REPO),
    ("repoGetHook", REPO),
    ("repoEditHook", REPO),
    ("repoTestHook", REPO),
    // /repos/{owner}/{repo}/issue_config
    ("repoGetIssueConfig", REPO),
    ("repoValidateIssueConfig", REPO),
    // /repos/{owner}/{repo}/issue_templates
    ("repoGetIssueTemplates", REPO),
    // /repos/{owner}/{repo}/issues
    ("issueListIssues", REPO),
    ("issueCreateIssue", REPO),
    ("issueGetRepoComments", REPO),
    ("issueDeleteComment", REPO),
    ("issueGetComment", REPO),
    ("issueEditComment", REPO),
    ("issueListIssueCommentAttachments", REPO),
    ("issueCreateIssueCommentAttachment", REPO),
    ("issueDeleteIssueCommentAttachment", REPO),
    ("issueGetIssueCommentAttachment", REPO),
    ("issueEditIssueCommentAttachment", REPO),
    ("issueDeleteCommentReaction", REPO),
    ("issueGetCommentReactions", REPO),
    ("issuePostCommentReaction", REPO),
    ("repoListPinnedIssues", REPO),
    ("issueDelete", REPO),
    ("issueGetIssue", REPO),
    ("issueEditIssue", REPO),
    ("issueListIssueAttachments", REPO),
    ("issueCreateIssueAttachment", REPO),
    ("issueDeleteIssueAttachment", REPO),
    ("issueGetIssueAttachment", REPO),
    ("issueEditIssueAttachment", REPO),
    ("issueRemoveAssignees", REPO),
    ("issueAddAssignees", REPO),
    ("issueCheckAssignee", REPO),
    ("issueRemoveIssueBlocking", Repo(&[Also::Issue { write: true }])),
    ("issueListBlocks", Filtered(IN_REPOSITORY)),
    ("issueCreateIssueBlocking", Repo(&[Also::Issue { write: true }])),
    ("issueGetComments", REPO),
    ("issueCreateComment", REPO),
    ("issueDeleteCommentDeprecated", REPO),
    ("issueEditCommentDeprecated", REPO),
    ("issueEditIssueDeadline", REPO),
    ("issueRemoveIssueDependencies", Repo(&[Also::Issue { write: false }])),
    ("issueListIssueDependencies", Filtered(IN_REPOSITORY)),
    ("issueCreateIssueDependencies", Repo(&[Also::Issue { write: false }])),
    ("issueClearLabels", REPO),
    ("issueGetLabels", REPO),
    ("issueAddLabel", REPO),
    ("issueReplaceLabels", REPO),
    ("issueRemoveLabel", REPO),
    ("issueUnlockIssue", REPO),
    ("issueLockIssue", REPO),
    ("unpinIssue", REPO),
    ("pinIssue", REPO),
    ("moveIssuePin", REPO),
    ("issueDeleteIssueReaction", REPO),
    ("issueGetIssueReactions", REPO),
    ("issuePostIssueReaction", REPO),
    ("issueDeleteStopWatch", REPO),
    ("issueStartStopWatch", REPO),
    ("issueStopStopWatch", REPO),
    ("issueSubscriptions", REPO),
    ("issueCheckSubscription", REPO),
    ("issueDeleteSubscription", REPO),
    ("issueAddSubscription", REPO),
    ("issueGetCommentsAndTimeline", Filtered(TIMELINE)),
    ("issueResetTime", REPO),
    ("issueTrackedTimes", REPO),
    ("issueAddTime", REPO),
    ("issueDeleteTime", REPO),
    // /repos/{owner}/{repo}/keys
    ("repoListKeys", REPO),
    ("repoCreateKey", REPO),
    ("repoDeleteKey", REPO),
    ("repoGetKey", REPO),
    // /repos/{owner}/{repo}/labels
    ("issueListLabels", REPO),
    ("issueCreateLabel", REPO),
    ("issueDeleteLabel", REPO),
    ("issueGetLabel", REPO),
    ("issueEditLabel", REPO),
    // /repos/{owner}/{repo}/languages
    ("repoGetLanguages", REPO),
    // /repos/{owner}/{repo}/licenses
    ("repoGetLicenses", REPO),
    // /repos/{owner}/{repo}/media
    ("repoGetRawFileOrLFS", REPO),
    // /repos/{owner}/{repo}/merge-upstream
    ("repoMergeUpstream", Refused(FORK_PARENT)),
    // /repos/{owner}/{repo}/milestones
    ("issueGetMilestonesList", REPO),
    ("issueCreateMilestone", REPO),
    ("issueDeleteMilestone", REPO),
    ("issueGetMilestone", REPO),
    ("issueEditMilestone", REPO),
    // /repos/{owner}/{repo}/mirror-sync
    ("repoMirrorSync", REPO),
    // /repos/{owner}/{repo}/new_pin_allowed
    ("repoNewPinAllowed", REPO),
    // /repos/{owner}/{repo}/notifications
    ("notifyGetRepoList", REPO),
    ("notifyReadRepoList", REPO),
    // /repos/{owner}/{repo}/pulls
    ("repoListPullRequests", REPO),
    ("repoCreatePullRequest", Repo(&[Also::Head(Source::Body("head"))])),
    ("repoResolvePullReviewComment", REPO),
    ("repoUnresolvePullReviewComment", REPO),
    ("repoListPinnedPullRequests", REPO),
    ("repoGetPullRequestByBaseHead", Repo(&[Also::Head(Source::Route("head"))])),
    ("repoGetPullRequest", REPO),
    ("repoEditPullRequest", REPO),
    ("repoDownloadPullDiffOrPatch", REPO),
    ("repoCreatePullReviewCommentReply", REPO),
    ("repoGetPullRequestCommits", REPO),
    ("repoGetPullRequestFiles", REPO),
    ("repoCancelScheduledAutoMerge", REPO),
    ("repoPullRequestIsMerged", REPO),
    ("repoMergePullRequest", REPO),
    ("repoDeletePullReviewRequests", REPO),
    ("repoCreatePullReviewRequests", REPO),
    ("repoListPullReviews", REPO),
    ("repoCreatePullReview", REPO),
    ("repoDeletePullReview", REPO),
    ("repoGetPullReview", REPO),
    ("repoSubmitPullReview", REPO),
    ("repoGetPullReviewComments", REPO),
    ("repoCreatePullReviewComment", REPO),
    ("repoDeletePullReviewComment", REPO),
    ("repoGetPullReviewComment", REPO),
    ("repoDismissPullReview", REPO),
    ("repoUnDismissPullReview", REPO),
    ("repoUpdatePullRequest", REPO),
    // /repos/{owner}/{repo}/push_mirrors
    ("repoListPushMirrors", REPO),
    ("repoAddPushMirror", Repo(&[Also::Url { field: "remote_address", write: true }])),
    // /repos/{owner}/{repo}/push_mirrors-sync
    ("repoPushMirrorSync", REPO),
    // /repos/{owner}/{repo}/push_mirrors
    ("repoDeletePushMirror", REPO),
    ("repoGetPushMirrorByRemoteName", REPO),
    // /repos/{owner}/{repo}/raw
    ("repoGetRawFile", REPO),
    // /repos/{owner}/{repo}/releases
    ("repoListReleases", REPO),
    ("repoCreateRelease", REPO),
    ("repoGetLatestRelease", REPO),
    ("repoDeleteReleaseByTag", REPO),
    ("repoGetReleaseByTag", REPO),
    ("repoDeleteRelease", REPO),
    ("repoGetRelease", REPO),
    ("repoEditRelease", REPO),
    ("repoListReleaseAttachments", REPO),
    ("repoCreateReleaseAttachment", REPO),
    ("repoDeleteReleaseAttachment", REPO),
    ("repoGetReleaseAttachment", REPO),
    ("repoEditReleaseAttachment", REPO),
    // /repos/{owner}/{repo}/reviewers
    ("repoGetReviewers", REPO),
    // /repos/{owner}/{repo}/signing-key.gpg
    ("repoSigningKey", REPO),
    // /repos/{owner}/{repo}/signing-key.pub
    ("repoSigningKeySSH", REPO),
    // /repos/{owner}/{repo}/stargazers
    ("repoListStargazers", REPO),
    // /repos/{owner}/{repo}/statuses
    ("repoListStatuses", REPO),
    ("repoCreateStatus", REPO),
    // /repos/{owner}/{repo}/subscribers
    ("repoListSubscribers", REPO),
    // /repos/{owner}/{repo}/subscription
    ("userCurrentDeleteSubscription", REPO),
    ("userCurrentCheckSubscription", REPO),
    ("userCurrentPutSubscription", REPO),
    // /repos/{owner}/{repo}/sync_fork
    ("repoSyncForkDefaultInfo", Refused(FORK_PARENT)),
    ("repoSyncForkDefault", Refused(FORK_PARENT)),
    ("repoSyncForkBranchInfo", Refused(FORK_PARENT)),
    ("repoSyncForkBranch", Refused(FORK_PARENT)),
    // /repos/{owner}/{repo}/tag_protections
    ("repoListTagProtection", REPO),
    ("repoCreateTagProtection", REPO),
    ("repoDeleteTagProtection", REPO),
    ("repoGetTagProtection", REPO),
    ("repoEditTagProtection", REPO),
    // /repos/{owner}/{repo}/tags
    ("repoListTags", REPO),
    ("repoCreateTag", REPO),
    ("repoDeleteTag", REPO),
    ("repoGetTag", REPO),
    // /repos/{owner}/{repo}/teams
    ("repoListTeams", REPO),
    ("repoDeleteTeam", REPO),
    ("repoCheckTeam", REPO),
    ("repoAddTeam", REPO),
    // /repos/{owner}/{repo}/times
    ("repoTrackedTimes", REPO),
    ("userTrackedTimes", REPO),
    // /repos/{owner}/{repo}/topics
    ("repoListTopics", REPO),
    ("repoUpdateTopics", REPO),
    ("repoDeleteTopic", REPO),
    ("repoAddTopic", REPO),
    // /repos/{owner}/{repo}/transfer
    ("repoTransfer", Places(TRANSFER)),
    ("acceptRepoTransfer", REPO),
    ("rejectRepoTransfer", REPO),
    // /repos/{owner}/{repo}/wiki
    ("repoCreateWikiPage", REPO),
    ("repoDeleteWikiPage", REPO),
    ("repoGetWikiPage", REPO),
    ("repoEditWikiPage", REPO),
    ("repoGetWikiPages", REPO),
    ("repoGetWikiPageRevisions", REPO),
    // /repos
    ("generateRepo", Places(GENERATE)),
    // /repositories
    ("repoGetByID", Filtered(REPO_BY_ID)),
    // /settings
    ("getGeneralAPISettings", Harmless),
    ("getGeneralAttachmentSettings", Harmless),
    ("getGeneralRepositorySettings", Harmless),
    ("getGeneralUISettings", Harmless),
    // /signing-key.gpg
    ("getSigningKey", Harmless),
    // /signing-key.pub
    ("getSigningKeySSH", Harmless),
    // /signing-key.ssh
    ("getSSHSigningKey", Harmless),
    // /teams
    ("orgDeleteTeam", Refused(TEAM_BY_ID)),
    ("orgGetTeam", Filtered(TEAM)),
    ("orgEditTeam", Refused(TEAM_BY_ID)),
    ("orgListTeamActivityFeeds", Filtered(FEEDS)),
    ("orgListTeamMembers", Refused(TEAM_BY_ID)),
    ("orgRemoveTeamMember", Refused(TEAM_BY_ID)),
    ("orgListTeamMember", Refused(TEAM_BY_ID)),
    ("orgAddTeamMember", Refused(TEAM_BY_ID)),
    ("orgListTeamRepos", Filtered(REPOSITORIES)),
    ("orgRemoveTeamRepository", REPO),
    ("orgListTeamRepo", REPO),
    ("orgAddTeamRepository", REPO),
    // /token
    ("deleteCurrentToken", Caller),
    ("getCurrentToken", Harmless),
    // /topics
    ("topicSearch", Harmless),
    // /user
    ("userGetCurrent", Harmless),
    ("getUserWorkflowJobs", Caller),
    ("getUserRunners", Caller),
    ("registerUserRunner", Caller),
    ("userSearchRunJobs", Caller),
    ("userGetRunnerRegistrationToken", Caller),
    ("userCreateRunnerRegistrationToken", Caller),
    ("deleteUserRunner", Caller),
    ("getUserRunner", Caller),
    ("updateUserRunner", Caller),
    ("getUserWorkflowRuns", Filtered(USER_RUNS)),
    ("deleteUserSecret", Caller),
    ("updateUserSecret", Caller),
    ("getUserVariablesList", Caller),
    ("deleteUserVariable", Caller),
    ("getUserVariable", Caller),
    ("createUserVariable", Caller),
    ("updateUserVariable", Caller),
    ("userCurrentActivityPubFollow", Caller),
    ("userGetOAuth2Applications", Caller),
    ("userGetOauth2Application", Caller),
    ("userCreateOAuth2Application", Caller),
    ("userDeleteOAuth2Application", Caller),
    ("userGetOAuth2Application", Caller),
    ("userUpdateOAuth2Application", Caller),
    ("userDeleteAvatar", Caller),
    ("userUpdateAvatar", Caller),
    ("userBlockUser", Caller),
    ("userListBlocks", Caller),
    ("userUnblockUser", Caller),
    ("userCheckUserBlock", Caller),
    ("userDeleteEmail", Caller),
    ("userListEmails", Caller),
    ("userAddEmail", Caller),
    ("userCurrentListFollowers", Harmless),
    ("userCurrentListFollowing", Harmless),
    ("userCurrentDeleteFollow", Caller),
    ("userCurrentCheckFollowing", Harmless),
    ("userCurrentPutFollow", Caller),
    ("getVerificationToken", Caller),
    ("userVerifyGPGKey", Caller),
    ("userCurrentListGPGKeys", Caller),
    ("userCurrentPostGPGKey", Caller),
    ("userCurrentDeleteGPGKey", Caller),
    ("userCurrentGetGPGKey", Caller),
    ("userListHooks", Caller),
    ("userCreateHook", Caller),
    ("userDeleteHook", Caller),
    ("userGetHook", Caller),
    ("userEditHook", Caller),
    ("userCurrentListKeys", Caller),
    ("userCurrentPostKey", Caller),
    ("userCurrentDeleteKey", Caller),
    ("userCurrentGetKey", Caller),
    ("userListBlockedUsers", Caller),
    ("orgListCurrentUserOrgs", Harmless),
    ("userGetQuota", Caller),
    ("userListQuotaArtifacts", Caller),
    ("userListQuotaAttachments", Caller),
    ("userCheckQuota", Caller),
    ("userListQuotaPackages", Caller),
    ("userCurrentListRepos", Filtered(REPOSITORIES)),
    ("createCurrentUserRepo", Places(USER_REPO)),
    ("getUserSettings", Caller),
    ("updateUserSettings", Caller),
    ("userCurrentListStarred", Filtered(REPOSITORIES)),
    ("userCurrentDeleteStar", REPO),
    ("userCurrentCheckStarring", REPO),
    ("userCurrentPutStar", REPO),
    ("userGetStopWatches", Filtered(STOPWATCHES)),
    ("userCurrentListSubscriptions", Filtered(REPOSITORIES)),
    ("userListTeams", Harmless),
    ("userCurrentTrackedTimes", Filtered(TRACKED_TIMES)),
    // /users
    ("userSearch", Harmless),
    ("userGet", Harmless),
    ("userListActivityFeeds", Filtered(FEEDS)),
    ("userListFollowers", Harmless),
    ("userListFollowing", Harmless),
    ("userCheckFollowing", Harmless),
    ("userListGPGKeys", Harmless),
    ("userGetHeatmapData", Harmless),
    ("userListKeys", Harmless),
    ("orgListUserOrgs", Harmless),
    ("orgGetUserPermissions", Account(&[Source::Route("org")])),
    ("userListRepos", Filtered(REPOSITORIES)),
    ("userListStarred", Filtered(REPOSITORIES)),
    ("userListSubscriptions", Filtered(REPOSITORIES)),
    ("userGetTokens", Account(&[Source::Route("username")])),
    ("userCreateToken", Account(&[Source::Route("username")])),
    ("userDeleteAccessToken", Account(&[Source::Route("username")])),
    // /version
    ("getVersion", Harmless),
];
