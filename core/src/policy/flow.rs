//! What a session read bounds where it may write without a person (`FLOW_GUARD`).
//!
//! The attack this answers is a flow, not a call: an issue in a public repository tells the
//! agent to read the owner's private repositories and publish what it finds, and every call
//! it makes is ordinary (a read, then a comment). So the server remembers which non-public
//! repositories' content a session has read (its *sources*), and judges each write by its
//! *audience*: who can see what it writes. A write is *widening* when the session has a
//! source and the audience is wider than the sources' own owner — a public or limited
//! repository or profile, another owner's private repository, a new public repository, or an
//! address outside the forge (a webhook's URL, a push mirror, a migration's source). Such a
//! write is asked of the person like a call that cannot be undone (publication cannot be).
//!
//! This module says *what* a call read and *where* a write goes, from the operation and its
//! arguments; the server looks up visibility (it needs the forge) and keeps the sources (it
//! needs the session). Where a write goes is one table, `AUDIENCES`, with a row for every
//! operation of both embedded specs that is not a GET: a test fails when one has none, so a
//! new forge version cannot add a write that is judged by nothing.
//!
//! What counts as read: the content of a repository its route names (files, issues, pull
//! requests, comments, reviews, commits, releases, wiki pages, Actions logs), and each item's
//! repository in a listing across repositories (an issue search, notifications). A listing
//! that only names repositories (a search, a user's repositories) is not content: a name is
//! what the agent needs to find its way, and counting it would make every session that looks
//! around a private one. Content whose repository the call does not name (an attachment by
//! its id, a raw route no operation has) counts as read from an unknown private repository.

use serde_json::Value;

use super::Route as Routed;
use super::confirm::{Clause, Confirmation, FRESH_SESSION, With, member, shown};
use super::reach::{self, Item, Listing, Reach, Source};
use super::repos::{self, Named};
use crate::args::Prepared;
use crate::catalog::{Method, Target, ToolDef};
use crate::error::{CallError, ErrorKind};

/// `FLOW_GUARD`: what happens to a widening write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FlowGuard {
    /// Ask the person, as for a call that cannot be undone (or its `confirm` argument).
    #[default]
    Ask,
    /// Refuse it without asking (error kind `private_flow`).
    Refuse,
    /// Judge nothing.
    Off,
}

impl FlowGuard {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowGuard::Ask => "ask",
            FlowGuard::Refuse => "refuse",
            FlowGuard::Off => "off",
        }
    }
}

/// The most distinct repositories a listing's items are counted as read from; past it, the
/// rest count as an unknown private repository (no per-call cost grows with the listing).
pub const MAX_LISTED_SOURCES: usize = 32;

/// What a call read, as far as the call says (the server learns which of them are private).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// No repository's content (a profile, a listing of names, a write).
    Nothing,
    /// The content of these repositories (owner, name), named by the route.
    Repos(Vec<(String, String)>),
    /// A listing across repositories: the route's repositories and each item's (`items_read`).
    Items(Vec<(String, String)>, Items),
    /// Content of a repository the call does not name.
    Unknown,
}

/// Where a listing's items say their repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Items(Listing);

/// Operations sent with another method than GET that only read.
const READS_BY_OTHER_METHODS: [&str; 1] = ["repoGetFileContentsPost"];

/// What `call` reads.
pub fn read_of(call: &Prepared) -> Read {
    if matches!(call.tool().target, Target::AttachmentDownload) {
        return Read::Unknown;
    }
    let Some((op, route)) = Routed::of(call) else {
        let method = call.args().get("method").and_then(Value::as_str).unwrap_or("");
        let raw = matches!(call.tool().target, Target::Raw);
        return if raw && method.eq_ignore_ascii_case("GET") { Read::Unknown } else { Read::Nothing };
    };
    if op.method != Method::Get && !READS_BY_OTHER_METHODS.contains(&op.id.as_str()) {
        return Read::Nothing;
    }
    let named: Vec<(String, String)> = repos::named(op, &route.values())
        .into_iter()
        .filter_map(|n| match n {
            Named::Repo(o, r) => Some((o, r)),
            Named::Owner(_) => None,
        })
        .collect();
    match reach::of(&op.id) {
        // Names of repositories, teams and organisations are not content.
        Some(Reach::Filtered(l)) if matches!(l.item, Item::Repository | Item::Organization) => Read::Nothing,
        Some(Reach::Filtered(l)) => Read::Items(named, Items(l)),
        _ if named.is_empty() => Read::Nothing,
        _ => Read::Repos(named),
    }
}

/// The repositories a listing's items are in (the forge's answer `data`), at most
/// `MAX_LISTED_SOURCES` distinct ones; `true` when there were more, or an item did not say.
pub fn items_read(Items(listing): Items, data: &Value) -> (Vec<(String, String)>, bool) {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut more = false;
    let items: Vec<&Value> = match data.pointer(listing.at) {
        Some(Value::Array(items)) if !listing.single => items.iter().collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(one) => vec![one],
    };
    for item in items {
        let names = match listing.item {
            Item::References => ["ref_issue", "dependent_issue"]
                .iter()
                .filter_map(|k| item.get(*k).filter(|v| !v.is_null()))
                .map(|issue| issue.get("repository").and_then(repos::repo_name))
                .collect(),
            kind => vec![repos::item_repo(item, kind)],
        };
        for name in names {
            let Some((o, r)) = name.as_deref().and_then(|n| n.split_once('/')) else {
                more = true;
                continue;
            };
            if out.iter().any(|(a, b)| a.eq_ignore_ascii_case(o) && b.eq_ignore_ascii_case(r)) {
                continue;
            }
            if out.len() == MAX_LISTED_SOURCES {
                more = true;
                continue;
            }
            out.push((o.to_owned(), r.to_owned()));
        }
    }
    (out, more)
}

/// Where a write goes, as far as the call says; the server looks up what it does not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Audience {
    /// A repository of this forge: its visibility decides.
    Repo { owner: String, repo: String },
    /// An account's profile, a user's or an organisation's (`None`: the caller's own).
    Account(Option<String>),
    /// A new repository of `owner` (`None`: the caller), private or public as the call says.
    NewRepo { owner: Option<String>, name: String, private: bool },
    /// A repository made from `from` (a fork, a transfer), as private as `from` is, of `owner`.
    Like { from: (String, String), owner: Option<String>, name: String },
    /// An address outside the forge that the forge sends to or fetches from.
    Outside(String),
    /// Whom it reaches the call does not say (an instance-wide change, an account named by
    /// id, a route no operation has): judged as everyone.
    Anyone(String),
}

/// How far an audience reaches, once the server has looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Everyone, signed in or not.
    Public,
    /// Every signed-in user of the forge (a limited owner, an internal repository).
    Limited,
    /// The people `owner` lets in.
    Private { owner: String },
    /// An address outside the forge.
    Outside,
}

/// An owner on the forge `forge`, when one server serves several: `forge:owner`. Owners
/// hold no `:`, so the name is never ambiguous; two forges' owners of one name are two
/// owners, and what is read on one forge and written to another is written elsewhere.
pub fn on_forge(forge: &str, owner: &str) -> String {
    format!("{forge}:{owner}")
}

impl Audience {
    /// The same audience on the forge `forge` of several: each owner it names as `on_forge`.
    pub fn on_forge(self, forge: &str) -> Audience {
        let q = |o: String| on_forge(forge, &o);
        match self {
            Audience::Repo { owner, repo } => Audience::Repo { owner: q(owner), repo },
            Audience::Account(login) => Audience::Account(login.map(q)),
            Audience::NewRepo { owner, name, private } => {
                Audience::NewRepo { owner: owner.map(q), name, private }
            }
            Audience::Like { from: (o, r), owner, name } => {
                Audience::Like { from: (q(o), r), owner: owner.map(q), name }
            }
            other @ (Audience::Outside(_) | Audience::Anyone(_)) => other,
        }
    }
}

impl Seen {
    /// The same reach on the forge `forge` of several: a private owner as `on_forge`.
    pub fn on_forge(self, forge: &str) -> Seen {
        match self {
            Seen::Private { owner } => Seen::Private { owner: on_forge(forge, &owner) },
            other => other,
        }
    }
}

/// One row of `AUDIENCES`: where an operation's write goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum To {
    /// The repositories and owners its route names.
    Route,
    /// The repository its body names (`owner`, `repo`): an issue of another repository.
    BodyRepo,
    /// The route's repository made public when the body sets this member to false.
    Becomes(&'static str),
    /// An account's profile.
    Account(Source),
    /// A new repository.
    New(New),
    /// The address a body member holds (a dotted path; an array of addresses too); an edit
    /// without it sends to the address the forge keeps.
    Outside(&'static str),
    /// An address the forge keeps, which the call does not name.
    Stored(&'static str),
    /// Every user of the instance, or its administrators: judged as everyone.
    Instance,
    /// Cannot be told (federation, a server-side git hook): judged as everyone.
    Unclear,
}

/// Where a new repository goes and how private it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct New {
    owner: &'static [Source],
    name: &'static [Source],
    private: Private,
}

#[derive(Debug, Clone, Copy)]
enum Private {
    /// The body's `private` (absent: public, as the forges make it).
    Body,
    /// Always private.
    Yes,
    /// As private as the route's repository.
    Like,
}

use Source::{Body, ById, Caller};
use To::*;

const NOWHERE: &[To] = &[];
const ROUTE: &[To] = &[Route];
const INSTANCE: &[To] = &[Instance];
const UNCLEAR: &[To] = &[Unclear];

const fn new(owner: &'static [Source], name: &'static [Source], private: Private) -> New {
    New { owner, name, private }
}
const USER_REPO: New = new(&[Caller], &[Body("name")], Private::Body);
const ORG_REPO: New = new(&[Source::Route("org")], &[Body("name")], Private::Body);
const ADMIN_REPO: New = new(&[Source::Route("username")], &[Body("name")], Private::Body);
const GENERATE: New = new(&[Body("owner")], &[Body("name")], Private::Body);
const MIGRATE: New = new(&[Body("repo_owner"), Caller], &[Body("repo_name")], Private::Body);
const FORK: New = new(&[Body("organization"), Caller], &[Body("name"), Source::Route("repo")], Private::Like);
const TRANSFER: New = new(&[Body("new_owner")], &[Source::Route("repo")], Private::Like);
const ADOPT: New = new(&[Source::Route("owner")], &[Source::Route("repo")], Private::Yes);

/// Where each write of both embedded specs goes: every operation that is not a GET, once.
/// `NOWHERE`: nobody reads what it writes (it removes, marks, renders or hands a token back
/// to the caller). `ROUTE`: the repository its route names.
const AUDIENCES: &[(&str, &[To])] = &[
    ("ActionsDisableWorkflow", ROUTE),
    ("ActionsDispatchWorkflow", ROUTE),
    ("ActionsEnableWorkflow", ROUTE),
    ("CancelActionRun", ROUTE),
    ("DeleteActionArtifact", NOWHERE),
    ("DeleteActionRun", NOWHERE),
    ("DispatchWorkflow", ROUTE),
    ("acceptRepoTransfer", UNCLEAR),
    ("activitypubInstanceActorInbox", UNCLEAR),
    ("activitypubInstanceActorOutbox", NOWHERE),
    ("activitypubPersonInbox", UNCLEAR),
    ("activitypubRepositoryInbox", UNCLEAR),
    ("activitypubRepositoryOutbox", NOWHERE),
    ("adminAddRuleToQuotaGroup", INSTANCE),
    ("adminAddUserBadges", &[Account(Source::Route("username"))]),
    ("adminAddUserToQuotaGroup", INSTANCE),
    ("adminAdoptRepository", &[New(ADOPT)]),
    ("adminCreateHook", &[Outside("config.url")]),
    ("adminCreateOrg", &[Account(Body("username"))]),
    ("adminCreatePublicKey", INSTANCE),
    ("adminCreateQuotaGroup", INSTANCE),
    ("adminCreateQuotaRule", INSTANCE),
    ("adminCreateRepo", &[New(ADMIN_REPO)]),
    ("adminCreateRunnerRegistrationToken", INSTANCE),
    ("adminCreateUser", INSTANCE),
    ("adminCreateUserAccessToken", INSTANCE),
    ("adminCronRun", INSTANCE),
    ("adminDeleteHook", NOWHERE),
    ("adminDeleteQuotaGroup", NOWHERE),
    ("adminDeleteQuotaRule", NOWHERE),
    ("adminDeleteUnadoptedRepository", NOWHERE),
    ("adminDeleteUser", NOWHERE),
    ("adminDeleteUserAccessToken", NOWHERE),
    ("adminDeleteUserBadges", NOWHERE),
    ("adminDeleteUserEmails", NOWHERE),
    ("adminDeleteUserPublicKey", NOWHERE),
    ("adminEditHook", &[Outside("config.url")]),
    ("adminEditQuotaRule", INSTANCE),
    ("adminEditUser", INSTANCE),
    ("adminRemoveRuleFromQuotaGroup", NOWHERE),
    ("adminRemoveUserFromQuotaGroup", NOWHERE),
    ("adminRenameUser", INSTANCE),
    ("adminSetUserQuotaGroups", INSTANCE),
    ("createCurrentUserRepo", &[New(USER_REPO)]),
    ("createFork", &[New(FORK)]),
    ("createOrgRepo", &[New(ORG_REPO)]),
    ("createOrgRepoDeprecated", &[New(ORG_REPO)]),
    ("createOrgVariable", &[Account(Source::Route("org"))]),
    ("createRepoVariable", ROUTE),
    ("createUserVariable", &[Account(Caller)]),
    ("deleteActionRun", NOWHERE),
    ("deleteAdminRunner", NOWHERE),
    ("deleteArtifact", NOWHERE),
    ("deleteCurrentToken", NOWHERE),
    ("deleteOrgRunner", NOWHERE),
    ("deleteOrgSecret", NOWHERE),
    ("deleteOrgVariable", NOWHERE),
    ("deletePackage", NOWHERE),
    ("deletePackageVersion", NOWHERE),
    ("deleteRepoRunner", NOWHERE),
    ("deleteRepoSecret", NOWHERE),
    ("deleteRepoVariable", NOWHERE),
    ("deleteUserRunner", NOWHERE),
    ("deleteUserSecret", NOWHERE),
    ("deleteUserVariable", NOWHERE),
    ("generateRepo", &[New(GENERATE)]),
    ("issueAddAssignees", ROUTE),
    ("issueAddLabel", ROUTE),
    ("issueAddSubscription", NOWHERE),
    ("issueAddTime", ROUTE),
    ("issueClearLabels", NOWHERE),
    ("issueCreateComment", ROUTE),
    ("issueCreateIssue", ROUTE),
    ("issueCreateIssueAttachment", ROUTE),
    ("issueCreateIssueBlocking", &[Route, BodyRepo]),
    ("issueCreateIssueCommentAttachment", ROUTE),
    ("issueCreateIssueDependencies", &[Route, BodyRepo]),
    ("issueCreateLabel", ROUTE),
    ("issueCreateMilestone", ROUTE),
    ("issueDelete", NOWHERE),
    ("issueDeleteComment", NOWHERE),
    ("issueDeleteCommentDeprecated", NOWHERE),
    ("issueDeleteCommentReaction", NOWHERE),
    ("issueDeleteIssueAttachment", NOWHERE),
    ("issueDeleteIssueCommentAttachment", NOWHERE),
    ("issueDeleteIssueReaction", NOWHERE),
    ("issueDeleteLabel", NOWHERE),
    ("issueDeleteMilestone", NOWHERE),
    ("issueDeleteStopWatch", NOWHERE),
    ("issueDeleteSubscription", NOWHERE),
    ("issueDeleteTime", NOWHERE),
    ("issueEditComment", ROUTE),
    ("issueEditCommentDeprecated", ROUTE),
    ("issueEditIssue", ROUTE),
    ("issueEditIssueAttachment", ROUTE),
    ("issueEditIssueCommentAttachment", ROUTE),
    ("issueEditIssueDeadline", ROUTE),
    ("issueEditLabel", ROUTE),
    ("issueEditMilestone", ROUTE),
    ("issueLockIssue", ROUTE),
    ("issuePostCommentReaction", ROUTE),
    ("issuePostIssueReaction", ROUTE),
    ("issueRemoveAssignees", NOWHERE),
    ("issueRemoveIssueBlocking", NOWHERE),
    ("issueRemoveIssueDependencies", NOWHERE),
    ("issueRemoveLabel", NOWHERE),
    ("issueReplaceLabels", ROUTE),
    ("issueResetTime", NOWHERE),
    ("issueStartStopWatch", ROUTE),
    ("issueStopStopWatch", ROUTE),
    ("issueUnlockIssue", NOWHERE),
    ("linkPackage", &[Account(Source::Route("owner"))]),
    ("moveIssuePin", ROUTE),
    ("notifyReadList", NOWHERE),
    ("notifyReadRepoList", NOWHERE),
    ("notifyReadThread", NOWHERE),
    ("orgAddTeamMember", &[Account(ById("id"))]),
    ("orgAddTeamRepository", ROUTE),
    ("orgBlockUser", NOWHERE),
    ("orgConcealMember", NOWHERE),
    ("orgCreate", &[Account(Body("username"))]),
    ("orgCreateHook", &[Outside("config.url")]),
    ("orgCreateLabel", &[Account(Source::Route("org"))]),
    ("orgCreateRunnerRegistrationToken", NOWHERE),
    ("orgCreateTeam", &[Account(Source::Route("org"))]),
    ("orgDelete", NOWHERE),
    ("orgDeleteAvatar", NOWHERE),
    ("orgDeleteHook", NOWHERE),
    ("orgDeleteLabel", NOWHERE),
    ("orgDeleteMember", NOWHERE),
    ("orgDeleteRepos", NOWHERE),
    ("orgDeleteTeam", NOWHERE),
    ("orgEdit", &[Account(Source::Route("org"))]),
    ("orgEditHook", &[Outside("config.url")]),
    ("orgEditLabel", &[Account(Source::Route("org"))]),
    ("orgEditTeam", &[Account(ById("id"))]),
    ("orgPublicizeMember", &[Account(Source::Route("org"))]),
    ("orgRemoveTeamMember", NOWHERE),
    ("orgRemoveTeamRepository", NOWHERE),
    ("orgUnblockUser", NOWHERE),
    ("orgUpdateAvatar", &[Account(Source::Route("org"))]),
    ("organizationBlockUser", NOWHERE),
    ("organizationUnblockUser", NOWHERE),
    ("pinIssue", ROUTE),
    ("registerAdminRunner", INSTANCE),
    ("registerOrgRunner", NOWHERE),
    ("registerRepoRunner", NOWHERE),
    ("registerUserRunner", NOWHERE),
    ("rejectRepoTransfer", NOWHERE),
    ("renameOrg", &[Account(Source::Route("org"))]),
    ("renderMarkdown", NOWHERE),
    ("renderMarkdownRaw", NOWHERE),
    ("renderMarkup", NOWHERE),
    ("repoAddCollaborator", ROUTE),
    ("repoAddFlag", INSTANCE),
    ("repoAddPushMirror", &[Outside("remote_address")]),
    ("repoAddTeam", ROUTE),
    ("repoAddTopic", ROUTE),
    ("repoApplyDiffPatch", ROUTE),
    ("repoCancelScheduledAutoMerge", NOWHERE),
    ("repoChangeFiles", ROUTE),
    ("repoConvert", ROUTE),
    ("repoCreateBranch", ROUTE),
    ("repoCreateBranchProtection", ROUTE),
    ("repoCreateFile", ROUTE),
    ("repoCreateHook", &[Outside("config.url")]),
    ("repoCreateKey", ROUTE),
    ("repoCreatePullRequest", ROUTE),
    ("repoCreatePullReview", ROUTE),
    ("repoCreatePullReviewComment", ROUTE),
    ("repoCreatePullReviewCommentReply", ROUTE),
    ("repoCreatePullReviewRequests", ROUTE),
    ("repoCreateRelease", ROUTE),
    ("repoCreateReleaseAttachment", ROUTE),
    ("repoCreateRunnerRegistrationToken", NOWHERE),
    ("repoCreateStatus", ROUTE),
    ("repoCreateTag", ROUTE),
    ("repoCreateTagProtection", ROUTE),
    ("repoCreateWikiPage", ROUTE),
    ("repoDelete", NOWHERE),
    ("repoDeleteAllFlags", NOWHERE),
    ("repoDeleteAvatar", NOWHERE),
    ("repoDeleteBranch", NOWHERE),
    ("repoDeleteBranchProtection", NOWHERE),
    ("repoDeleteCollaborator", NOWHERE),
    ("repoDeleteFile", ROUTE),
    ("repoDeleteFlag", NOWHERE),
    ("repoDeleteGitHook", NOWHERE),
    ("repoDeleteHook", NOWHERE),
    ("repoDeleteKey", NOWHERE),
    ("repoDeletePullReview", NOWHERE),
    ("repoDeletePullReviewComment", NOWHERE),
    ("repoDeletePullReviewRequests", NOWHERE),
    ("repoDeletePushMirror", NOWHERE),
    ("repoDeleteRelease", NOWHERE),
    ("repoDeleteReleaseAttachment", NOWHERE),
    ("repoDeleteReleaseByTag", NOWHERE),
    ("repoDeleteTag", NOWHERE),
    ("repoDeleteTagProtection", NOWHERE),
    ("repoDeleteTeam", NOWHERE),
    ("repoDeleteTopic", NOWHERE),
    ("repoDeleteWikiPage", NOWHERE),
    ("repoDismissPullReview", ROUTE),
    ("repoEdit", &[Route, Becomes("private")]),
    ("repoEditBranchProtection", ROUTE),
    ("repoEditGitHook", UNCLEAR),
    ("repoEditHook", &[Outside("config.url")]),
    ("repoEditPullRequest", ROUTE),
    ("repoEditRelease", ROUTE),
    ("repoEditReleaseAttachment", ROUTE),
    ("repoEditTagProtection", ROUTE),
    ("repoEditWikiPage", ROUTE),
    ("repoGetFileContentsPost", NOWHERE),
    ("repoMergePullRequest", ROUTE),
    ("repoMergeUpstream", ROUTE),
    ("repoMigrate", &[New(MIGRATE), Outside("clone_addr"), Outside("lfs_endpoint")]),
    ("repoMirrorSync", ROUTE),
    ("repoPushMirrorSync", &[Stored("the addresses of its push mirrors")]),
    ("repoRemoveNote", NOWHERE),
    ("repoRenameBranch", ROUTE),
    ("repoReplaceAllFlags", INSTANCE),
    ("repoResolvePullReviewComment", ROUTE),
    ("repoSetNote", ROUTE),
    ("repoSubmitPullReview", ROUTE),
    ("repoSyncForkBranch", ROUTE),
    ("repoSyncForkDefault", ROUTE),
    ("repoTestHook", &[Stored("the address of the hook")]),
    ("repoTransfer", &[New(TRANSFER)]),
    ("repoUnDismissPullReview", ROUTE),
    ("repoUnresolvePullReviewComment", ROUTE),
    ("repoUpdateAvatar", ROUTE),
    ("repoUpdateBranch", ROUTE),
    ("repoUpdateBranchProtectionPriories", ROUTE),
    ("repoUpdateFile", ROUTE),
    ("repoUpdatePullRequest", ROUTE),
    ("repoUpdateTopics", ROUTE),
    ("rerunFailedWorkflowRun", ROUTE),
    ("rerunWorkflowJob", ROUTE),
    ("rerunWorkflowRun", ROUTE),
    ("unlinkPackage", NOWHERE),
    ("unpinIssue", NOWHERE),
    ("updateAdminRunner", INSTANCE),
    ("updateOrgRunner", NOWHERE),
    ("updateOrgSecret", &[Account(Source::Route("org"))]),
    ("updateOrgVariable", &[Account(Source::Route("org"))]),
    ("updateRepoRunner", NOWHERE),
    ("updateRepoSecret", ROUTE),
    ("updateRepoVariable", ROUTE),
    ("updateUserRunner", NOWHERE),
    ("updateUserSecret", &[Account(Caller)]),
    ("updateUserSettings", &[Account(Caller)]),
    ("updateUserVariable", &[Account(Caller)]),
    ("userAddEmail", &[Account(Caller)]),
    ("userBlockUser", NOWHERE),
    ("userCreateHook", &[Outside("config.url")]),
    ("userCreateOAuth2Application", &[Outside("redirect_uris")]),
    ("userCreateRunnerRegistrationToken", NOWHERE),
    ("userCreateToken", NOWHERE),
    ("userCurrentActivityPubFollow", &[Outside("target")]),
    ("userCurrentDeleteFollow", NOWHERE),
    ("userCurrentDeleteGPGKey", NOWHERE),
    ("userCurrentDeleteKey", NOWHERE),
    ("userCurrentDeleteStar", NOWHERE),
    ("userCurrentDeleteSubscription", NOWHERE),
    ("userCurrentPostGPGKey", &[Account(Caller)]),
    ("userCurrentPostKey", &[Account(Caller)]),
    ("userCurrentPutFollow", &[Account(Caller)]),
    ("userCurrentPutStar", ROUTE),
    ("userCurrentPutSubscription", ROUTE),
    ("userDeleteAccessToken", NOWHERE),
    ("userDeleteAvatar", NOWHERE),
    ("userDeleteEmail", NOWHERE),
    ("userDeleteHook", NOWHERE),
    ("userDeleteOAuth2Application", NOWHERE),
    ("userEditHook", &[Outside("config.url")]),
    ("userUnblockUser", NOWHERE),
    ("userUpdateAvatar", &[Account(Caller)]),
    ("userUpdateOAuth2Application", &[Outside("redirect_uris")]),
    ("userVerifyGPGKey", &[Account(Caller)]),
];

/// The row of operation `id`, if it has one.
fn row_of(id: &str) -> Option<&'static [To]> {
    static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, &'static [To]>> =
        std::sync::OnceLock::new();
    INDEX.get_or_init(|| AUDIENCES.iter().copied().collect()).get(id).copied()
}

/// Whether a call of `tool` may write where someone reads it (and so may need the person
/// when the session has read private content): an operation whose row says so, one of a
/// spec given with `--spec` that is not a GET, the raw tool and the call tool.
pub fn may_widen(tool: &ToolDef) -> bool {
    match &tool.target {
        Target::Operation(op) => match row_of(&op.id) {
            Some(row) => !row.is_empty(),
            None => op.method != Method::Get,
        },
        Target::Raw | Target::CallOperation => true,
        Target::AttachmentDownload | Target::SearchOperations | Target::OperationSchema => false,
    }
}

/// Where `call` writes: none for a read, or for a write nobody else reads.
pub fn audiences(call: &Prepared) -> Vec<Audience> {
    let Some((op, route)) = Routed::of(call) else {
        let method = call.args().get("method").and_then(Value::as_str).unwrap_or("GET");
        let raw = matches!(call.tool().target, Target::Raw);
        return if raw && !method.eq_ignore_ascii_case("GET") {
            vec![Audience::Anyone(format!(
                "{} {} (a route no operation of the spec has)",
                method.to_uppercase(),
                path_of(call)
            ))]
        } else {
            Vec::new()
        };
    };
    if op.method == Method::Get {
        return Vec::new();
    }
    let Some(row) = row_of(&op.id) else {
        return vec![Audience::Anyone(format!("{} (an operation of no table)", op.id))];
    };
    let values = route.values();
    let body = call.args().get("body");
    let source = |s: Source| repos::from_source(s, op, &values, body);
    let first = |sources: &[Source]| sources.iter().find_map(|s| source(*s));
    let mut out = Vec::new();
    for to in row {
        match *to {
            Route => out.extend(repos::named(op, &values).into_iter().map(|n| match n {
                Named::Repo(owner, repo) => Audience::Repo { owner, repo },
                Named::Owner(owner) => Audience::Account(Some(owner)),
            })),
            BodyRepo => {
                let get = |k: &str| body.and_then(|b| b.get(k)).and_then(Value::as_str).map(str::to_owned);
                if let (Some(owner), Some(repo)) = (get("owner"), get("repo")) {
                    out.push(Audience::Repo { owner, repo });
                }
            }
            Becomes(member_name) => {
                if member(body, member_name).and_then(Value::as_bool) == Some(false) {
                    let (owner, repo) = (source(Source::Route("owner")), source(Source::Route("repo")));
                    out.push(Audience::Anyone(format!(
                        "the repository {}/{} made public",
                        owner.unwrap_or_default(),
                        repo.unwrap_or_default()
                    )));
                }
            }
            Account(ById(_)) => out.push(Audience::Anyone(format!("an account {} names by id", op.id))),
            Account(s) => {
                let login = if s == Caller { None } else { source(s) };
                if s != Caller && login.is_none() {
                    continue;
                }
                // An organisation or user made public or limited reaches more than it did.
                if let Some(v) = member(body, "visibility").and_then(Value::as_str) {
                    if !v.eq_ignore_ascii_case("private") {
                        out.push(Audience::Anyone(format!(
                            "the account {} made {v}",
                            login.clone().unwrap_or_else(|| "of the caller".into())
                        )));
                    }
                }
                out.push(Audience::Account(login));
            }
            New(n) => {
                let owner =
                    n.owner.iter().find_map(|s| if *s == Caller { Some(None) } else { source(*s).map(Some) });
                let owner = owner.unwrap_or(None);
                let name = first(n.name).unwrap_or_else(|| "?".into());
                out.push(match n.private {
                    Private::Body => {
                        let private = member(body, "private").and_then(Value::as_bool) == Some(true);
                        Audience::NewRepo { owner, name, private }
                    }
                    Private::Yes => Audience::NewRepo { owner, name, private: true },
                    Private::Like => {
                        let from = (source(Source::Route("owner")), source(Source::Route("repo")));
                        match from {
                            (Some(o), Some(r)) => Audience::Like { from: (o, r), owner, name },
                            _ => Audience::Anyone(format!("a repository {} makes", op.id)),
                        }
                    }
                });
            }
            Outside(path) => {
                let addresses: Vec<String> = match member(body, path) {
                    Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
                    Some(Value::Array(items)) => {
                        items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                    }
                    _ if op.method == Method::Patch => vec![format!("the address {} keeps", op.id)],
                    _ => Vec::new(),
                };
                out.extend(addresses.iter().map(|a| Audience::Outside(address(a))));
            }
            Stored(what) => out.push(Audience::Outside(what.to_owned())),
            Instance => out.push(Audience::Anyone(format!("what {} changes for the whole instance", op.id))),
            Unclear => out.push(Audience::Anyone(format!("whoever {} reaches", op.id))),
        }
    }
    out
}

/// An address as a person is shown it, and as its target is confirmed: a URL without its user,
/// password, query and fragment (where a webhook's token may be), anything else after its last
/// `@` (an scp-like `user@host:path`).
fn address(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut url) if url.has_host() => {
            let _ = (url.set_username(""), url.set_password(None));
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        _ => text.rsplit('@').next().unwrap_or(text).to_owned(),
    }
}

fn path_of<'a>(call: &'a Prepared) -> &'a str {
    call.args().get("path").and_then(Value::as_str).unwrap_or("?")
}

/// What a session has read, as the rule needs it: the private repositories it read (the
/// first ones kept), whether it read more or from a repository it could not name, and what
/// other replicas noted that this one cannot name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    pub repos: Vec<(String, String)>,
    /// Past the bound, or content of a repository whose owner is unknown: every owner may be.
    pub unknown: bool,
    /// Read through another replica (stateless HTTP): each one's owner when it is known to
    /// be the owner of a private place the write goes to, else `None`.
    pub elsewhere: Vec<Option<String>>,
}

impl Sources {
    pub fn is_empty(&self) -> bool {
        self.repos.is_empty() && !self.unknown && self.elsewhere.is_empty()
    }

    /// Whether content of another owner than `owner` may be among them.
    fn beyond(&self, owner: &str) -> bool {
        self.unknown
            || self.repos.iter().any(|(o, _)| !o.eq_ignore_ascii_case(owner))
            || self.elsewhere.iter().any(|o| !o.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(owner)))
    }

    /// The sources in words: the first few and how many more.
    pub fn words(&self) -> String {
        const SHOWN: usize = 3;
        let mut parts: Vec<String> = self.repos.iter().take(SHOWN).map(|(o, r)| format!("{o}/{r}")).collect();
        let more = self.repos.len().saturating_sub(SHOWN);
        if more > 0 {
            parts.push(format!("{more} more"));
        }
        match self.elsewhere.len() {
            0 => {}
            1 => parts.push("a repository read through another replica".into()),
            n => parts.push(format!("{n} repositories read through other replicas")),
        }
        if self.unknown {
            parts.push("private content whose repository it cannot name".into());
        }
        match parts.len() {
            0 => "nothing".into(),
            1 => parts.remove(0),
            n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
        }
    }
}

/// A write that would carry what the session read where more people see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    pub operation: String,
    /// What a person confirms (`publish:bob/site`): what `confirm` must hold.
    pub target: String,
    /// Where it goes, in words.
    pub to: String,
    /// What the session read, in words.
    pub read: String,
}

/// Whether `operation`'s write to these audiences (as the server saw them) widens what the
/// session read: each audience that does, named. `None` when the session read nothing
/// private, or every audience is the sources' own owner's private place.
pub fn widening(operation: &str, sources: &Sources, seen: &[(Audience, Seen)]) -> Option<Widening> {
    if sources.is_empty() {
        return None;
    }
    let wide: Vec<&(Audience, Seen)> = seen
        .iter()
        .filter(|(_, s)| match s {
            Seen::Public | Seen::Limited | Seen::Outside => true,
            Seen::Private { owner } => sources.beyond(owner),
        })
        .collect();
    if wide.is_empty() {
        return None;
    }
    let target = wide.iter().map(|(a, s)| key(a, s)).collect::<Vec<_>>().join(" + ");
    let to = wide.iter().map(|(a, s)| described(a, s)).collect::<Vec<_>>().join(" and ");
    Some(Widening {
        operation: operation.to_owned(),
        target: shown(&target),
        to: shown(&to),
        read: sources.words(),
    })
}

/// The part of a target a person confirms for one audience.
fn key(a: &Audience, s: &Seen) -> String {
    let verb = if matches!(s, Seen::Private { .. }) { "share" } else { "publish" };
    match a {
        Audience::Repo { owner, repo } => format!("{verb}:{owner}/{repo}"),
        Audience::Account(Some(login)) => format!("{verb}:profile/{login}"),
        Audience::Account(None) => format!("{verb}:profile"),
        Audience::NewRepo { owner, name, .. } | Audience::Like { owner, name, .. } => {
            format!("{verb}:new/{}/{name}", owner.as_deref().unwrap_or("me"))
        }
        Audience::Outside(address) => format!("send:{address}"),
        Audience::Anyone(words) => format!("publish:{words}"),
    }
}

/// Where a write goes, in words.
fn described(a: &Audience, s: &Seen) -> String {
    let reach = match s {
        Seen::Public => "public".to_owned(),
        Seen::Limited => "visible to every signed-in user".to_owned(),
        Seen::Private { owner } => format!("private to {owner}, another owner"),
        Seen::Outside => "outside the forge".to_owned(),
    };
    match a {
        Audience::Repo { owner, repo } => format!("the repository {owner}/{repo} ({reach})"),
        Audience::Account(Some(login)) => format!("the profile of {login} ({reach})"),
        Audience::Account(None) => format!("the caller's own profile ({reach})"),
        Audience::NewRepo { owner, name, .. } | Audience::Like { owner, name, .. } => {
            format!("a new repository {}/{name} ({reach})", owner.as_deref().unwrap_or("of the caller"))
        }
        Audience::Outside(address) => format!("{address} ({reach})"),
        Audience::Anyone(words) => format!("{words} (whom it reaches cannot be told)"),
    }
}

impl Widening {
    /// The clause a person confirms.
    pub fn clause(&self) -> Clause {
        Clause {
            words: format!(
                "Write to {} ({}) after this session read private content of {}: what it writes may carry that content",
                self.to, self.operation, self.read
            ),
            look: None,
            with: With::Nothing,
            only_if_lost: false,
            subject: None,
            found: None,
            flow: true,
        }
    }

    /// The refusal under `FLOW_GUARD=refuse`.
    pub fn refusal(&self) -> CallError {
        CallError::local(
            ErrorKind::PrivateFlow,
            format!(
                "{} was not sent: it writes to {}, and this session read private content of {} (FLOW_GUARD=refuse: such a write is not asked, it is refused). {FRESH_SESSION}",
                self.operation, self.to, self.read
            ),
        )
    }

    /// `c` (what the call destroys, if anything) with this write's clause: one question, one
    /// target (`a + publish:o/r`), one yes for both.
    pub fn joined(&self, c: Option<Confirmation>) -> Confirmation {
        match c {
            None => Confirmation {
                operation: self.operation.clone(),
                target: self.target.clone(),
                clauses: vec![self.clause()],
            },
            Some(mut c) => {
                c.target = format!("{} + {}", c.target, self.target);
                // First in the question: what was read is what a long question must not lose.
                c.clauses.insert(0, self.clause());
                c
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Admitted, admit};
    use crate::catalog::{Catalog, Flavor};
    use crate::discovery::Discovery;
    use crate::policy::confirm::ByArgument;
    use crate::policy::{Narrowing, Policy};
    use serde_json::json;

    fn catalogs() -> [(Flavor, &'static Catalog); 2] {
        [Flavor::Gitea, Flavor::Forgejo].map(|f| (f, crate::catalog::embedded(f)))
    }

    /// `f` on the call `name` with `args` makes, as the server prepares it.
    fn prepared<T>(name: &str, args: Value, f: impl FnOnce(&Prepared) -> T) -> T {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let (p, n) = (Policy { unknown_routes: true, ..Policy::default() }, Narrowing::default());
        let view = Discovery { catalog: c, policy: &p, narrowing: &n, forges: &[] };
        match admit(view, name, args.as_object().unwrap().clone()).outcome {
            Ok(Admitted::Send(call, _)) => f(&call),
            other => panic!("{name} {args} is not admitted: {other:?}"),
        }
    }

    fn repo(o: &str, r: &str) -> (String, String) {
        (o.into(), r.into())
    }

    #[test]
    fn every_write_of_both_specs_has_an_audience_row_and_every_row_names_one() {
        let mut missing = Vec::new();
        let mut writes = std::collections::BTreeSet::new();
        for (flavor, c) in catalogs() {
            for op in c.operations().filter_map(|t| t.operation()) {
                if op.method == Method::Get {
                    assert!(row_of(&op.id).is_none(), "{} is a GET: it writes nowhere", op.id);
                    continue;
                }
                writes.insert(op.id.clone());
                if row_of(&op.id).is_none() {
                    missing.push(format!("{flavor:?} {} {} {}", op.id, op.method.as_str(), op.path));
                }
            }
        }
        assert!(missing.is_empty(), "say where each of these writes goes in AUDIENCES: {missing:#?}");
        for (id, _) in AUDIENCES {
            assert!(writes.contains(*id), "{id} is no write of either spec");
            assert_eq!(AUDIENCES.iter().filter(|(o, _)| o == id).count(), 1, "{id} has two rows");
        }
    }

    #[test]
    fn content_is_read_by_every_path_to_an_operation_and_names_are_not() {
        let file = json!({"owner": "alice", "repo": "secret", "filepath": "a.txt"});
        assert_eq!(
            prepared("repoGetRawFile", file.clone(), read_of),
            Read::Repos(vec![repo("alice", "secret")])
        );
        let call = json!({"operation_id": "repoGetRawFile", "arguments": file});
        assert_eq!(
            prepared("gitea_call_operation", call, read_of),
            Read::Repos(vec![repo("alice", "secret")])
        );
        let raw = json!({"method": "GET", "path": "/repos/alice/secret/raw/a.txt"});
        assert_eq!(prepared("gitea_api_request", raw, read_of), Read::Repos(vec![repo("alice", "secret")]));
        let comments = json!({"owner": "alice", "repo": "secret", "index": 1});
        assert_eq!(
            prepared("issueGetComments", comments, read_of),
            Read::Repos(vec![repo("alice", "secret")])
        );
        // A listing of names is no content; an issue search's items are.
        assert_eq!(prepared("repoSearch", json!({"q": "x"}), read_of), Read::Nothing);
        assert_eq!(prepared("userCurrentListRepos", json!({}), read_of), Read::Nothing);
        assert!(matches!(prepared("issueSearchIssues", json!({}), read_of), Read::Items(..)));
        // What the call cannot name the repository of counts as unknown.
        let unknown = json!({"method": "GET", "path": "/some/route/no/operation/has"});
        assert_eq!(prepared("gitea_api_request", unknown, read_of), Read::Unknown);
        // A write reads nothing (what it answers, the session wrote).
        let comment = json!({"owner": "alice", "repo": "secret", "index": 1, "body": {"body": "x"}});
        assert_eq!(prepared("issueCreateComment", comment, read_of), Read::Nothing);
    }

    #[test]
    fn a_listings_items_name_their_repositories_within_a_bound() {
        let Read::Items(_, listing) = prepared("issueSearchIssues", json!({}), read_of) else { panic!() };
        let items: Vec<Value> = (0..40)
            .map(|i| json!({"repository": {"full_name": format!("o{}/r", i % 35)}, "title": "t"}))
            .collect();
        let (repos, more) = items_read(listing, &Value::Array(items));
        assert_eq!(repos.len(), MAX_LISTED_SOURCES);
        assert!(more, "past the bound the rest count as unknown");
        let (repos, more) = items_read(
            listing,
            &json!([{"repository": {"full_name": "a/b"}}, {"repository": {"full_name": "A/B"}}]),
        );
        assert_eq!((repos, more), (vec![repo("a", "b")], false));
        let (_, more) = items_read(listing, &json!([{"title": "says no repository"}]));
        assert!(more, "an item that does not say counts as unknown");
    }

    #[test]
    fn a_write_goes_where_its_route_body_or_address_says() {
        let comment = json!({"owner": "bob", "repo": "site", "index": 1, "body": {"body": "x"}});
        let to_site = vec![Audience::Repo { owner: "bob".into(), repo: "site".into() }];
        assert_eq!(prepared("issueCreateComment", comment.clone(), audiences), to_site);
        let call = json!({"operation_id": "issueCreateComment", "arguments": comment});
        assert_eq!(prepared("gitea_call_operation", call, audiences), to_site);
        let raw =
            json!({"method": "POST", "path": "/repos/bob/site/issues/1/comments", "body": {"body": "x"}});
        assert_eq!(prepared("gitea_api_request", raw, audiences), to_site);
        // A new repository: public unless the body says private.
        let public = prepared("createCurrentUserRepo", json!({"body": {"name": "leak"}}), audiences);
        assert_eq!(public, vec![Audience::NewRepo { owner: None, name: "leak".into(), private: false }]);
        let private = prepared(
            "createOrgRepo",
            json!({"org": "acme", "body": {"name": "x", "private": true}}),
            audiences,
        );
        assert_eq!(
            private,
            vec![Audience::NewRepo { owner: Some("acme".into()), name: "x".into(), private: true }]
        );
        // Addresses outside: a webhook's URL, a migration's source.
        let hook = json!({"owner": "a", "repo": "b", "body": {"type": "gitea", "config": {"url": "https://evil.example/h", "content_type": "json"}}});
        assert_eq!(
            prepared("repoCreateHook", hook, audiences),
            vec![Audience::Outside("https://evil.example/h".into())]
        );
        // Its user, password and query (a token) are neither shown nor part of the target.
        let secret = json!({"owner": "a", "repo": "b", "body": {"type": "gitea", "config": {"url": "https://u:pw-9f3@evil.example/h?token=tk-77a", "content_type": "json"}}});
        assert_eq!(
            prepared("repoCreateHook", secret, audiences),
            vec![Audience::Outside("https://evil.example/h".into())]
        );
        let migrate = prepared(
            "repoMigrate",
            json!({"body": {"clone_addr": "https://evil.example/x.git", "repo_name": "x", "private": true}}),
            audiences,
        );
        assert!(migrate.contains(&Audience::Outside("https://evil.example/x.git".into())), "{migrate:?}");
        // A profile; a repository made public; a fork as private as its source.
        let settings = prepared("updateUserSettings", json!({"body": {"description": "x"}}), audiences);
        assert_eq!(settings, vec![Audience::Account(None)]);
        let edit =
            prepared("repoEdit", json!({"owner": "a", "repo": "b", "body": {"private": false}}), audiences);
        assert!(
            edit.iter().any(|a| matches!(a, Audience::Anyone(w) if w.contains("made public"))),
            "{edit:?}"
        );
        let fork = prepared(
            "createFork",
            json!({"owner": "a", "repo": "b", "body": {"organization": "c"}}),
            audiences,
        );
        assert_eq!(
            fork,
            vec![Audience::Like { from: repo("a", "b"), owner: Some("c".into()), name: "b".into() }]
        );
        // Nowhere: a star, a rendering, a delete.
        assert!(prepared("userCurrentDeleteStar", json!({"owner": "a", "repo": "b"}), audiences).is_empty());
        assert!(prepared("renderMarkdown", json!({"body": {"text": "x"}}), audiences).is_empty());
        assert!(prepared("repoGet", json!({"owner": "a", "repo": "b"}), audiences).is_empty());
        // A raw route no operation has is judged as reaching anyone.
        let unknown = json!({"method": "POST", "path": "/some/unknown/route"});
        assert!(matches!(
            prepared("gitea_api_request", unknown, audiences).as_slice(),
            [Audience::Anyone(_)]
        ));
    }

    fn sources(repos: &[(&str, &str)], unknown: bool) -> Sources {
        Sources { repos: repos.iter().map(|(o, r)| repo(o, r)).collect(), unknown, elsewhere: Vec::new() }
    }

    #[test]
    fn a_write_widens_what_was_read_only_beyond_the_sources_own_owner() {
        let site = Audience::Repo { owner: "bob".into(), repo: "site".into() };
        let alice = sources(&[("alice", "secret")], false);
        let private = |o: &str| Seen::Private { owner: o.into() };
        let judged = |s: &Sources, seen: Seen| widening("op", s, &[(site.clone(), seen)]);
        // Nothing private read: nothing asked, wherever it goes.
        for seen in [Seen::Public, Seen::Limited, Seen::Outside, private("bob")] {
            assert_eq!(judged(&Sources::default(), seen), None);
        }
        // Public, limited, outside, another owner's private: asked.
        for seen in [Seen::Public, Seen::Limited, Seen::Outside, private("bob")] {
            let w = judged(&alice, seen.clone()).unwrap_or_else(|| panic!("{seen:?}"));
            assert!(w.read.contains("alice/secret"), "{w:?}");
        }
        // The same owner's private repositories (in any letter case): not asked.
        assert_eq!(judged(&alice, private("Alice")), None);
        // Past the bound (or an unknown owner) even the same owner's are asked.
        assert!(judged(&sources(&[("alice", "secret")], true), private("alice")).is_some());
        // Read through another replica: the same owner's, or another's.
        let mut far = sources(&[], false);
        far.elsewhere = vec![Some("alice".into())];
        assert_eq!(judged(&far, private("alice")), None);
        far.elsewhere.push(None);
        assert!(judged(&far, private("alice")).is_some());
        // Two owners read: a write into either's private repository may carry the other's.
        assert!(judged(&sources(&[("alice", "a"), ("bob", "b")], false), private("alice")).is_some());
    }

    #[test]
    fn a_widening_is_one_question_with_what_the_call_destroys() {
        let site = Audience::Repo { owner: "bob".into(), repo: "site".into() };
        let read = sources(&[("alice", "a"), ("alice", "b"), ("alice", "c"), ("alice", "d")], false);
        let w = widening("repoEdit", &read, &[(site, Seen::Public)]).unwrap();
        assert_eq!(w.target, "publish:bob/site");
        assert_eq!(w.read, "alice/a, alice/b, alice/c and 1 more");
        let alone = w.joined(None);
        assert_eq!(alone.target, "publish:bob/site");
        assert!(alone.question().contains("the repository bob/site (public)"), "{}", alone.question());
        let destroys =
            Confirmation { operation: "repoEdit".into(), target: "bob/site#name".into(), clauses: vec![] };
        let both = w.joined(Some(destroys));
        assert_eq!(both.target, "bob/site#name + publish:bob/site");
        assert!(
            both.argument_refusal(Some("publish:bob/site"), ByArgument::Setting).is_some(),
            "only the whole target confirms"
        );
        assert!(
            both.argument_refusal(Some("bob/site#name + publish:bob/site"), ByArgument::Setting).is_none()
        );
        let e = alone.argument_refusal(None, ByArgument::Undeclared).unwrap().to_string();
        assert!(e.contains("alice/a") && e.contains("fresh session"), "{e}");
        let e = w.refusal();
        assert_eq!(e.kind(), Some(ErrorKind::PrivateFlow));
    }

    #[test]
    fn every_write_takes_confirm_while_the_guard_is_on() {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let on = Policy::default();
        let off = Policy { flow: FlowGuard::Off, ..Policy::default() };
        let comment = c.get("issueCreateComment").unwrap();
        assert!(on.takes_confirm(comment));
        assert!(!off.takes_confirm(comment), "a write that destroys nothing takes none with the guard off");
        assert!(!on.takes_confirm(c.get("repoGet").unwrap()));
        assert!(
            !on.takes_confirm(c.get("notifyReadList").unwrap()),
            "marking one's notifications is seen by nobody"
        );
    }
}
