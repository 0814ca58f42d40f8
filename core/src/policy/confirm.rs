//! What cannot be undone: the operations a person confirms before anything is sent.
//!
//! An agent can delete a repository, an organisation or a branch with unmerged work in one
//! call, and the forge asks nobody; a sentence in an issue body is enough to make it try.
//! Tool annotations are advisory and many clients approve every tool, so the server itself
//! asks. Which operations it asks for is one table, `IRREVERSIBLE`: what each destroys, the
//! target a person confirms and the words they read. Every other operation that deletes,
//! transfers or changes another account as an administrator is in `HARMLESS`, with why
//! (a star can be given again). A test over both embedded specs fails when such an
//! operation is in neither table, so a new forge version cannot add a delete that is sent
//! unasked; an operation of a spec given with `--spec` that deletes and has no row is asked
//! for in the generic words of its route.
//!
//! How a person is asked (an elicitation, a sealed state over stateless HTTP, or the
//! `confirm` argument) is the server's; this module says what to ask and checks a `confirm`
//! argument against the exact target.

use serde_json::{Map, Value};

use super::repos::Values;
use crate::catalog::{Method, Operation, Piece, Target, ToolDef};
use crate::error::{CallError, ErrorKind};

pub use crate::catalog::tool::CONFIRM_ARGUMENT;
use crate::catalog::tool::MAX_CONFIRM_BYTES;

/// `CONFIRM_IRREVERSIBLE`: how an irreversible call is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    /// Ask the person through the client (elicitation); a client that cannot be asked sends
    /// `confirm`.
    #[default]
    Ask,
    /// Every such call carries `confirm`, equal to its exact target.
    Argument,
    /// Nothing is asked.
    Off,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Argument => "argument",
            Mode::Off => "off",
        }
    }
}

/// How an irreversible call was confirmed, as its audit line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmed {
    /// The person was asked and accepted.
    Asked,
    /// The call carried `confirm` with its exact target.
    Argument,
    /// `CONFIRM_IRREVERSIBLE=off`: nobody was asked.
    Off,
}

impl Confirmed {
    pub fn as_str(self) -> &'static str {
        match self {
            Confirmed::Asked => "asked",
            Confirmed::Argument => "argument",
            Confirmed::Off => "off",
        }
    }
}

/// What the server looks up before asking, to say what goes with the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum With {
    Nothing,
    /// A repository: its open issues, open pull requests and releases (`repoGet`).
    RepoContents,
    /// An organisation's or a user's repositories (their count).
    Repositories,
    /// A release's assets (`repoGetRelease`).
    ReleaseAssets,
    /// A branch's last commit (`repoGetBranch`).
    BranchHead,
}

/// An operation that destroys what cannot be got back.
#[derive(Debug)]
pub struct Irreversible {
    pub operation: &'static str,
    /// The exact target a person confirms: route and body arguments in braces, e.g.
    /// `{owner}/{repo}#branch/{branch}`.
    target: &'static str,
    /// What happens, in words a person reads: `Delete branch {branch} of {owner}/{repo}`.
    words: &'static str,
    /// The route read (a GET under the caller's identity) to say what goes with the target,
    /// filled like the target; empty: nothing is read.
    look: &'static str,
    pub with: With,
}

/// An operation that deletes, transfers or changes another account but loses nothing that
/// cannot be made again as it was.
#[derive(Debug)]
pub(crate) struct Harmless {
    pub(crate) operation: &'static str,
    pub(crate) why: &'static str,
}

const fn row(
    operation: &'static str,
    target: &'static str,
    words: &'static str,
    look: &'static str,
    with: With,
) -> Irreversible {
    Irreversible { operation, target, words, look, with }
}

const fn harmless(operation: &'static str, why: &'static str) -> Harmless {
    Harmless { operation, why }
}

use With::*;

/// Every operation of both embedded specs that destroys what cannot be got back: its
/// target, its words, and what the server reads first to say what goes with it.
#[rustfmt::skip]
pub static IRREVERSIBLE: &[Irreversible] = &[
    row("adminCronRun", "admin#cron/{task}", "Run the instance task {task} (some tasks delete accounts, archives or logs)", "", Nothing),
    row("adminDeleteHook", "admin#hook/{id}", "Delete system webhook {id} with its settings and secret", "", Nothing),
    row("adminDeleteUnadoptedRepository", "admin#unadopted/{owner}/{repo}", "Delete the unadopted repository files {owner}/{repo} from the server's disk", "", Nothing),
    row("adminDeleteUser", "user/{username}", "Delete user {username}", "/users/{username}/repos?limit=1", Repositories),
    row("adminEditUser", "user/{username}", "Change the account of user {username} as an administrator (its login, email, password, rights or admin flag)", "", Nothing),
    row("adminDeleteUserEmails", "user/{username}#emails", "Delete email addresses of user {username}", "", Nothing),
    row("adminCreatePublicKey", "user/{username}#keys", "Add an SSH key to user {username}'s account, which lets its holder act as {username}", "", Nothing),
    row("adminDeleteUserPublicKey", "user/{username}#key/{id}", "Delete SSH key {id} of user {username}", "", Nothing),
    row("adminRenameUser", "user/{username}", "Rename user {username} to {body.new_username} (links to the old name stop working and it may be taken)", "", Nothing),
    row("adminCreateUserAccessToken", "user/{username}#tokens", "Create an access token for user {username}, which lets its holder act as {username}", "", Nothing),
    row("adminDeleteUserAccessToken", "user/{username}#token/{token}", "Delete access token {token} of user {username}", "", Nothing),
    row("orgDelete", "org/{org}", "Delete organisation {org}", "/orgs/{org}/repos?limit=1", Repositories),
    row("deleteOrgSecret", "org/{org}#secret/{secretname}", "Delete Actions secret {secretname} of organisation {org}", "", Nothing),
    row("deleteOrgVariable", "org/{org}#variable/{variablename}", "Delete Actions variable {variablename} of organisation {org}", "", Nothing),
    row("orgDeleteAvatar", "org/{org}#avatar", "Delete the avatar of organisation {org}", "", Nothing),
    row("orgDeleteHook", "org/{org}#hook/{id}", "Delete webhook {id} of organisation {org} with its settings and secret", "", Nothing),
    row("orgDeleteLabel", "org/{org}#label/{id}", "Delete label {id} of organisation {org} from every issue and pull request that has it", "", Nothing),
    row("orgDeleteMember", "org/{org}#member/{username}", "Remove {username} from organisation {org} and from every one of its teams", "", Nothing),
    row("renameOrg", "org/{org}", "Rename organisation {org} to {body.new_name} (links to the old name stop working and it may be taken)", "", Nothing),
    row("orgDeleteRepos", "org/{org}#repos", "Delete every repository of organisation {org}", "/orgs/{org}/repos?limit=1", Repositories),
    row("deletePackage", "package/{owner}/{type}/{name}{/version}", "Delete package {type}/{name}{/version} of {owner} with its files", "", Nothing),
    row("deletePackageVersion", "package/{owner}/{type}/{name}/{version}", "Delete version {version} of package {type}/{name} of {owner} with its files", "", Nothing),
    row("repoDelete", "{owner}/{repo}", "Delete repository {owner}/{repo}", "/repos/{owner}/{repo}", RepoContents),
    row("DeleteActionArtifact", "{owner}/{repo}#artifact/{artifact_id}", "Delete Actions artifact {artifact_id} of {owner}/{repo}", "", Nothing),
    row("deleteArtifact", "{owner}/{repo}#artifact/{artifact_id}", "Delete Actions artifact {artifact_id} of {owner}/{repo}", "", Nothing),
    row("DeleteActionRun", "{owner}/{repo}#run/{run_id}", "Delete Actions run {run_id} of {owner}/{repo} with its logs and artifacts", "", Nothing),
    row("deleteActionRun", "{owner}/{repo}#run/{run}", "Delete Actions run {run} of {owner}/{repo} with its logs and artifacts", "", Nothing),
    row("deleteRepoSecret", "{owner}/{repo}#secret/{secretname}", "Delete Actions secret {secretname} of {owner}/{repo}", "", Nothing),
    row("deleteRepoVariable", "{owner}/{repo}#variable/{variablename}", "Delete Actions variable {variablename} of {owner}/{repo}", "", Nothing),
    row("repoDeleteAvatar", "{owner}/{repo}#avatar", "Delete the avatar of {owner}/{repo}", "", Nothing),
    row("repoDeleteBranch", "{owner}/{repo}#branch/{branch}", "Delete branch {branch} of {owner}/{repo}", "/repos/{owner}/{repo}/branches/{branch}", BranchHead),
    row("repoDeleteGitHook", "{owner}/{repo}#git-hook/{id}", "Delete the {id} Git hook script of {owner}/{repo}", "", Nothing),
    row("repoDeleteHook", "{owner}/{repo}#hook/{id}", "Delete webhook {id} of {owner}/{repo} with its settings and secret", "", Nothing),
    row("issueDeleteComment", "{owner}/{repo}#comment/{id}", "Delete comment {id} in {owner}/{repo}", "", Nothing),
    row("issueDeleteCommentDeprecated", "{owner}/{repo}#comment/{id}", "Delete comment {id} in {owner}/{repo}", "", Nothing),
    row("issueDeleteIssueCommentAttachment", "{owner}/{repo}#comment/{id}/asset/{attachment_id}", "Delete attachment {attachment_id} of comment {id} in {owner}/{repo}", "", Nothing),
    row("issueDelete", "{owner}/{repo}#issue/{index}", "Delete issue or pull request #{index} of {owner}/{repo} with its comments", "", Nothing),
    row("issueDeleteIssueAttachment", "{owner}/{repo}#issue/{index}/asset/{attachment_id}", "Delete attachment {attachment_id} of #{index} in {owner}/{repo}", "", Nothing),
    row("repoDeleteKey", "{owner}/{repo}#key/{id}", "Delete deploy key {id} of {owner}/{repo}", "", Nothing),
    row("issueDeleteLabel", "{owner}/{repo}#label/{id}", "Delete label {id} of {owner}/{repo} from every issue and pull request that has it", "", Nothing),
    row("issueDeleteMilestone", "{owner}/{repo}#milestone/{id}", "Delete milestone {id} of {owner}/{repo} from every issue and pull request in it", "", Nothing),
    row("repoDeletePullReview", "{owner}/{repo}#pull/{index}/review/{id}", "Delete review {id} of pull request #{index} in {owner}/{repo} with its comments", "", Nothing),
    row("repoDeletePullReviewComment", "{owner}/{repo}#pull/{index}/review/{id}/comment/{comment}", "Delete comment {comment} of review {id} on pull request #{index} in {owner}/{repo}", "", Nothing),
    row("repoDeletePushMirror", "{owner}/{repo}#push-mirror/{name}", "Delete push mirror {name} of {owner}/{repo} with its credentials", "", Nothing),
    row("repoDeleteReleaseByTag", "{owner}/{repo}#release-tag/{tag}", "Delete the release of tag {tag} in {owner}/{repo} with its notes", "/repos/{owner}/{repo}/releases/tags/{tag}", ReleaseAssets),
    row("repoDeleteRelease", "{owner}/{repo}#release/{id}", "Delete release {id} of {owner}/{repo} with its notes", "/repos/{owner}/{repo}/releases/{id}", ReleaseAssets),
    row("repoDeleteReleaseAttachment", "{owner}/{repo}#release/{id}/asset/{attachment_id}", "Delete asset {attachment_id} of release {id} in {owner}/{repo}", "", Nothing),
    row("repoDeleteTag", "{owner}/{repo}#tag/{tag}", "Delete tag {tag} of {owner}/{repo}", "", Nothing),
    row("repoConvert", "{owner}/{repo}#mirror", "Convert the mirror {owner}/{repo} into a normal repository (it stops mirroring and cannot be made a mirror again)", "", Nothing),
    row("repoTransfer", "{owner}/{repo}", "Transfer repository {owner}/{repo} to {body.new_owner}", "/repos/{owner}/{repo}", RepoContents),
    row("acceptRepoTransfer", "{owner}/{repo}#transfer", "Accept the transfer of repository {owner}/{repo}", "", Nothing),
    row("repoDeleteWikiPage", "{owner}/{repo}#wiki/{pageName}", "Delete wiki page {pageName} of {owner}/{repo}", "", Nothing),
    row("orgDeleteTeam", "team/{id}", "Delete team {id} with its members and permissions", "", Nothing),
    row("deleteCurrentToken", "token/current", "Delete the access token this call is made with", "", Nothing),
    row("deleteUserSecret", "me#secret/{secretname}", "Delete your Actions secret {secretname}", "", Nothing),
    row("deleteUserVariable", "me#variable/{variablename}", "Delete your Actions variable {variablename}", "", Nothing),
    row("userDeleteOAuth2Application", "me#oauth2-app/{id}", "Delete OAuth2 application {id} with its secret and every sign-in granted to it", "", Nothing),
    row("userUpdateOAuth2Application", "me#oauth2-app/{id}", "Change OAuth2 application {id}, which replaces its client secret (every client holding the old one stops working)", "", Nothing),
    row("userDeleteAvatar", "me#avatar", "Delete your avatar", "", Nothing),
    row("userCurrentDeleteGPGKey", "me#gpg-key/{id}", "Delete your GPG key {id}", "", Nothing),
    row("userDeleteHook", "me#hook/{id}", "Delete your webhook {id} with its settings and secret", "", Nothing),
    row("userCurrentDeleteKey", "me#key/{id}", "Delete your SSH key {id}", "", Nothing),
    row("userDeleteAccessToken", "user/{username}#token/{token}", "Delete access token {token} of {username}", "", Nothing),
];

/// Every other delete, transfer and administrator change of both embedded specs, and why it
/// loses nothing.
#[rustfmt::skip]
pub(crate) static HARMLESS: &[Harmless] = &[
    harmless("registerAdminRunner", "registers a runner; it can be deleted"),
    harmless("adminCreateRunnerRegistrationToken", "gives a registration token; nothing is removed"),
    harmless("deleteAdminRunner", "a runner can be registered again"),
    harmless("updateAdminRunner", "a runner's settings can be changed back"),
    harmless("adminCreateHook", "creates a system webhook; it can be deleted"),
    harmless("adminEditHook", "a webhook's settings can be changed back"),
    harmless("adminCreateQuotaGroup", "creates a quota group; it can be deleted"),
    harmless("adminDeleteQuotaGroup", "a quota group holds rules and users that can be given again"),
    harmless("adminAddRuleToQuotaGroup", "a rule can be removed again"),
    harmless("adminRemoveRuleFromQuotaGroup", "a rule can be added again"),
    harmless("adminAddUserToQuotaGroup", "a user can be removed again"),
    harmless("adminRemoveUserFromQuotaGroup", "a user can be added again"),
    harmless("adminCreateQuotaRule", "creates a quota rule; it can be deleted"),
    harmless("adminDeleteQuotaRule", "a quota rule can be created again as it was (adminGetQuotaRule shows it)"),
    harmless("adminEditQuotaRule", "a quota rule can be changed back"),
    harmless("adminAdoptRepository", "adopts files already on disk; nothing is removed"),
    harmless("adminCreateUser", "creates an account; it can be deleted"),
    harmless("adminAddUserBadges", "badges can be taken away again"),
    harmless("adminDeleteUserBadges", "badges can be given again"),
    harmless("adminCreateOrg", "creates an organisation; it can be deleted"),
    harmless("adminSetUserQuotaGroups", "quota groups can be set back"),
    harmless("adminCreateRepo", "creates a repository; it can be deleted"),
    harmless("deleteOrgRunner", "a runner can be registered again"),
    harmless("organizationUnblockUser", "a user can be blocked again"),
    harmless("orgConcealMember", "a membership can be made public again"),
    harmless("deleteRepoRunner", "a runner can be registered again"),
    harmless("repoDeleteBranchProtection", "a branch protection can be created again as it was (repoGetBranchProtection shows it)"),
    harmless("repoDeleteCollaborator", "a collaborator can be added again"),
    harmless("repoDeleteFile", "the file stays in the history; a new commit restores it"),
    harmless("repoDeleteAllFlags", "flags can be set again"),
    harmless("repoDeleteFlag", "a flag can be set again"),
    harmless("repoRemoveNote", "the note stays in the history of the notes"),
    harmless("issueDeleteCommentReaction", "a reaction can be given again"),
    harmless("issueRemoveAssignees", "assignees can be added again"),
    harmless("issueRemoveIssueBlocking", "a dependency can be added again"),
    harmless("issueRemoveIssueDependencies", "a dependency can be added again"),
    harmless("issueClearLabels", "labels can be added again"),
    harmless("issueRemoveLabel", "a label can be added again"),
    harmless("issueUnlockIssue", "an issue can be locked again"),
    harmless("unpinIssue", "an issue can be pinned again"),
    harmless("issueDeleteIssueReaction", "a reaction can be given again"),
    harmless("issueDeleteStopWatch", "a stopwatch can be started again"),
    harmless("issueDeleteSubscription", "a subscription can be made again"),
    harmless("issueResetTime", "tracked times can be added again (issueTrackedTimes lists them)"),
    harmless("issueDeleteTime", "a tracked time can be added again"),
    harmless("repoCancelScheduledAutoMerge", "an automatic merge can be scheduled again"),
    harmless("repoDeletePullReviewRequests", "a review can be requested again"),
    harmless("userCurrentDeleteSubscription", "a repository can be watched again"),
    harmless("repoDeleteTagProtection", "a tag protection can be created again as it was (repoGetTagProtection shows it)"),
    harmless("repoDeleteTeam", "a team can be given the repository again"),
    harmless("repoDeleteTopic", "a topic can be added again"),
    harmless("rejectRepoTransfer", "the owner can offer the transfer again"),
    harmless("orgRemoveTeamMember", "a member can be added to the team again"),
    harmless("orgRemoveTeamRepository", "a repository can be added to the team again"),
    harmless("deleteUserRunner", "a runner can be registered again"),
    harmless("userUnblockUser", "a user can be blocked again"),
    harmless("userDeleteEmail", "an address can be added again"),
    harmless("userCurrentDeleteFollow", "a user can be followed again"),
    harmless("userCurrentDeleteStar", "a star can be given again"),
];

/// The row of operation `id`, if it is irreversible.
pub fn row_of(id: &str) -> Option<&'static Irreversible> {
    IRREVERSIBLE.iter().find(|r| r.operation == id)
}

/// Whether `tool` takes the `confirm` argument: an operation that may need a confirmation,
/// the raw tool and the call tool (for the operations they reach).
pub fn offered_by(tool: &ToolDef) -> bool {
    match &tool.target {
        Target::Operation(op) => {
            row_of(&op.id).is_some() || (op.method == Method::Delete && !is_harmless(&op.id))
        }
        Target::Raw | Target::CallOperation => true,
        Target::AttachmentDownload | Target::SearchOperations | Target::OperationSchema => false,
    }
}

/// Take `confirm` out of `args` (it is not the operation's): the target it names, or why it
/// is wrong.
pub(crate) fn take(args: &mut Map<String, Value>) -> Result<Option<String>, CallError> {
    match args.remove(CONFIRM_ARGUMENT) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_CONFIRM_BYTES => Ok(Some(s)),
        Some(_) => Err(CallError::invalid_argument(
            "/confirm",
            format!(
                "`confirm` is the exact target of the call, as text of at most {MAX_CONFIRM_BYTES} bytes"
            ),
        )),
    }
}

fn is_harmless(id: &str) -> bool {
    HARMLESS.iter().any(|h| h.operation == id)
}

/// What the operation schema tool says of `op`'s confirmation: the target a person confirms
/// (with the words they read), or for a delete, transfer or administrator change that needs
/// none, why; nothing for anything else.
pub(crate) fn described(op: &Operation) -> Option<Value> {
    if let Some(r) = row_of(&op.id) {
        return Some(serde_json::json!({"needed": true, "target": r.target, "question": r.words}));
    }
    let h = HARMLESS.iter().find(|h| h.operation == op.id)?;
    Some(serde_json::json!({"needed": false, "why": h.why}))
}

/// What a person confirms for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub operation: String,
    /// The exact target (`alice/webapp#branch/feat-x`): what `confirm` must equal.
    pub target: String,
    /// What happens, in words (`Delete branch feat-x of alice/webapp`).
    pub action: String,
    /// The route to read first, as the raw tool takes it (relative to `/api/v1`, literal,
    /// maybe with a query), and what to take from its answer.
    pub look: Option<String>,
    pub with: With,
}

/// The confirmation `op` needs with these route values and arguments, if it needs one: an
/// irreversible operation's row, or — for an operation of neither table that deletes (a
/// spec given with `--spec`) — the route it deletes.
pub(crate) fn needed(op: &Operation, values: &Values, args: &Map<String, Value>) -> Option<Confirmation> {
    let route = route_values(op, values);
    if let Some(r) = row_of(&op.id) {
        let filled = |template: &str| fill(template, &route, args.get("body"));
        let mut action = filled(r.words);
        // A purge deletes everything the account owns besides.
        if args.get("purge").and_then(Value::as_bool) == Some(true) {
            action.push_str(" and everything the account owns (purge)");
        }
        let look = (!r.look.is_empty()).then(|| fill(r.look, &route, None));
        return Some(Confirmation {
            operation: op.id.clone(),
            target: filled(r.target),
            action,
            look,
            with: r.with,
        });
    }
    if op.method != Method::Delete || is_harmless(&op.id) {
        return None;
    }
    let path = fill(&op.path, &route, None);
    Some(Confirmation {
        operation: op.id.clone(),
        target: path.clone(),
        action: format!("Delete {path} ({})", op.id),
        look: None,
        with: Nothing,
    })
}

/// The confirmation of a raw call whose route reaches no operation of the spec (allowed by
/// `RAW_UNKNOWN_ROUTES`): a DELETE is confirmed by its path.
pub(crate) fn unknown_route(tool: &ToolDef, args: &Map<String, Value>) -> Option<Confirmation> {
    let method = args.get("method").and_then(Value::as_str)?;
    let path = args.get("path").and_then(Value::as_str)?;
    (matches!(tool.target, Target::Raw) && method.eq_ignore_ascii_case("DELETE")).then(|| Confirmation {
        operation: tool.name.clone(),
        target: path.to_owned(),
        action: format!("DELETE {path} (a route no operation of the spec has)"),
        look: None,
        with: Nothing,
    })
}

/// The values of `op`'s whole-segment route parameters (a wildcard's spans the rest).
fn route_values(op: &Operation, values: &Values) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (index, pieces) in op.template.segments.iter().enumerate() {
        let [Piece::Param(name)] = pieces.as_slice() else { continue };
        let wild = op.params.iter().any(|p| &p.name == name && p.wildcard);
        let value = if wild { values.rest(index, name) } else { values.get(index, name) };
        if let Some(v) = value {
            out.push((name.clone(), v));
        }
        if wild {
            break;
        }
    }
    out
}

/// `template` with `{name}` replaced by the route's value and `{body.name}` by the body's
/// member (text, or a number); `{/name}` is `/` and the value, or nothing when the route has
/// none (a parameter one forge's route has and the other's not); a value that is missing
/// stays `?`.
fn fill(template: &str, route: &[(String, String)], body: Option<&Value>) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { break };
        let name = &rest[open + 1..close];
        if let Some(optional) = name.strip_prefix('/') {
            if let Some((_, v)) = route.iter().find(|(n, _)| n == optional) {
                out.push('/');
                out.push_str(v);
            }
            rest = &rest[close + 1..];
            continue;
        }
        let value = match name.strip_prefix("body.") {
            Some(member) => body.and_then(|b| b.get(member)).and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }),
            None => route.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        };
        out.push_str(value.as_deref().unwrap_or("?"));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Longest target or words shown (a route value can be long; a person reads a line).
const MAX_SHOWN_CHARS: usize = 300;

fn shown(text: &str) -> String {
    if text.chars().count() <= MAX_SHOWN_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_SHOWN_CHARS).collect();
    format!("{cut}…")
}

impl Confirmation {
    /// The question a person answers: the action, what goes with it (looked up by the
    /// server, when it could), and that it cannot be undone.
    pub fn question(&self, goes_with: Option<&str>) -> String {
        let with = goes_with.map(|w| format!(" {w}")).unwrap_or_default();
        format!("{}{with}? This cannot be undone.", shown(&self.action))
    }

    /// A `confirm` argument, judged: it must be the exact target. `None` when it is.
    pub fn argument_refusal(&self, given: Option<&str>, asked: bool) -> Option<CallError> {
        if given == Some(self.target.as_str()) {
            return None;
        }
        let how = if asked {
            "This client cannot ask the person (it declared no elicitation support), so"
        } else {
            "This server takes confirmations as an argument (CONFIRM_IRREVERSIBLE=argument), so"
        };
        let wrong = match given {
            Some(g) => format!(" The `confirm` sent, {:?}, is not the exact target.", shown(g)),
            None => String::new(),
        };
        Some(CallError::local(
            ErrorKind::NotConfirmed,
            format!(
                "{} cannot be undone and was not sent.{wrong} {how} ask the person: \"{}\" Only if they agree, call again with the same arguments and \"confirm\": {}.",
                self.operation,
                self.question(None),
                Value::from(self.target.as_str())
            ),
        ))
    }

    /// The error when the person's answer could not be judged for now (`why`); the same
    /// answer may be sent again.
    pub fn not_yet(&self, why: &str) -> CallError {
        CallError::local(
            ErrorKind::NotConfirmed,
            format!("{} of {} was not sent: {why}.", self.operation, shown(&self.target)),
        )
    }

    /// The error when the person was asked and did not agree (`answer`: what they did).
    pub fn refused(&self, answer: &str) -> CallError {
        CallError::local(
            ErrorKind::NotConfirmed,
            format!(
                "{} of {} was not sent: {answer}. Do not retry it unless the person asks for it again.",
                self.operation,
                shown(&self.target)
            ),
        )
    }
}

/// What goes with a target, in words, from what the server looked up: `looked` is the
/// answer of the look-up `with` names, `total` the count a listing's header gave.
pub fn goes_with(with: With, looked: &Value, total: Option<u64>) -> Option<String> {
    let n = |name: &str| looked.get(name).and_then(Value::as_u64);
    let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match with {
        Nothing => None,
        RepoContents => {
            let parts = [
                n("open_issues_count").map(|c| count(c, "open issue", "open issues")),
                n("open_pr_counter").map(|c| count(c, "open pull request", "open pull requests")),
                n("release_counter").map(|c| count(c, "release", "releases")),
            ];
            let parts: Vec<String> = parts.into_iter().flatten().collect();
            (!parts.is_empty()).then(|| format!("with its {}", and_list(&parts)))
        }
        Repositories => total.map(|t| format!("with its {}", count(t, "repository", "repositories"))),
        ReleaseAssets => looked
            .get("assets")
            .and_then(Value::as_array)
            .map(|a| format!("with its {}", count(a.len() as u64, "asset", "assets"))),
        BranchHead => looked
            .get("commit")
            .and_then(|c| c.get("id"))
            .and_then(Value::as_str)
            .filter(|id| id.len() >= 10 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|id| format!("(its last commit {})", &id[..10])),
    }
}

fn and_list(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Admitted, admit};
    use crate::catalog::{Catalog, Flavor};
    use crate::discovery::Discovery;
    use crate::policy::{Narrowing, Policy};
    use serde_json::json;

    /// Whether an operation must be in one of the tables: it deletes, transfers, or is an
    /// administrator's write.
    fn must_be_classified(op: &Operation) -> bool {
        op.method == Method::Delete
            || op.id.to_ascii_lowercase().contains("transfer")
            || op.path.to_ascii_lowercase().contains("transfer")
            || (op.path.starts_with("/admin/") && op.method != Method::Get)
    }

    fn catalogs() -> [(Flavor, &'static Catalog); 2] {
        [Flavor::Gitea, Flavor::Forgejo].map(|f| (f, crate::catalog::embedded(f)))
    }

    #[test]
    fn every_delete_transfer_and_administrator_write_of_both_specs_is_classified_once() {
        let mut unclassified = Vec::new();
        for (flavor, c) in catalogs() {
            for op in c.operations().filter_map(|t| t.operation()) {
                if must_be_classified(op) && row_of(&op.id).is_none() && !is_harmless(&op.id) {
                    unclassified.push(format!("{flavor:?} {} {} {}", op.id, op.method.as_str(), op.path));
                }
            }
        }
        assert!(unclassified.is_empty(), "classify these in IRREVERSIBLE or HARMLESS: {unclassified:#?}");
        for r in IRREVERSIBLE {
            assert!(!is_harmless(r.operation), "{} is in both tables", r.operation);
            assert_eq!(
                IRREVERSIBLE.iter().filter(|o| o.operation == r.operation).count(),
                1,
                "{}",
                r.operation
            );
        }
        for h in HARMLESS {
            assert_eq!(HARMLESS.iter().filter(|o| o.operation == h.operation).count(), 1, "{}", h.operation);
        }
    }

    #[test]
    fn every_row_names_an_operation_of_a_spec_and_fills_from_its_own_parameters() {
        for r in IRREVERSIBLE {
            let mut found = false;
            for (flavor, c) in catalogs() {
                let Some(op) = c.get(r.operation).and_then(|t| t.operation()) else { continue };
                found = true;
                // Every route parameter and the body members the words name get a value.
                let mut args = Map::new();
                for p in op.template.params() {
                    args.insert(p.to_owned(), json!(format!("v-{p}")));
                }
                args.insert(
                    "body".into(),
                    json!({"new_owner": "v-new", "new_username": "v-new", "new_name": "v-new"}),
                );
                let c = needed(op, &Values::Args(&args), &args).expect("a row needs a confirmation");
                let look =
                    c.look.as_deref().map(|l| l.split('?').next().unwrap().to_owned()).unwrap_or_default();
                for text in [&c.target, &c.action, &look] {
                    assert!(!text.contains('?') && !text.contains('{'), "{flavor:?} {}: {text}", r.operation);
                }
                // The target names what is destroyed: each route value of the target's template.
                assert!(!c.target.is_empty() && c.target.len() < 200, "{}: {}", r.operation, c.target);
                assert!(c.action.starts_with(char::is_uppercase), "{}: {}", r.operation, c.action);
                assert_eq!(
                    r.look.is_empty(),
                    r.with == Nothing,
                    "{}: a look-up and what it says go together",
                    r.operation
                );
                if let Some(look) = &c.look {
                    assert!(c.look.is_some() && look.starts_with('/'), "{}: {look}", r.operation);
                    let route = look.split('?').next().unwrap();
                    let reached = c_get(flavor, route);
                    assert!(
                        reached,
                        "{flavor:?} {}: the look-up {route} is not a GET of the spec",
                        r.operation
                    );
                }
            }
            assert!(found, "{} is an operation of neither spec", r.operation);
        }
        for h in HARMLESS {
            assert!(
                catalogs().iter().any(|(_, c)| c.get(h.operation).is_some()),
                "{} is in neither spec",
                h.operation
            );
            assert!(h.why.len() > 10, "{}: say why it loses nothing", h.operation);
        }
    }

    fn c_get(flavor: Flavor, route: &str) -> bool {
        crate::catalog::embedded(flavor).match_path(Method::Get, route).is_some()
    }

    fn admitted(tool: &str, args: Value, mode: Mode) -> Option<(Confirmation, Option<String>)> {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let p = Policy { confirm: mode, ..Policy::default() };
        let n = Narrowing::default();
        let view = Discovery { catalog: c, policy: &p, narrowing: &n };
        match admit(view, tool, args.as_object().unwrap().clone()).outcome {
            Ok(Admitted::Send(call, ask)) => p.confirmation(&call).map(|c| (c, ask.confirm)),
            other => panic!("{tool}: {other:?}"),
        }
    }

    #[test]
    fn a_repository_branch_and_release_are_confirmed_by_their_exact_targets() {
        let (c, confirm) =
            admitted("repoDelete", json!({"owner": "alice", "repo": "webapp"}), Mode::Ask).unwrap();
        assert_eq!(c.target, "alice/webapp");
        assert_eq!(c.action, "Delete repository alice/webapp");
        assert_eq!(c.look.as_deref(), Some("/repos/alice/webapp"));
        assert_eq!(confirm, None);
        let looked = json!({"open_issues_count": 40, "open_pr_counter": 6, "release_counter": 3});
        assert_eq!(
            c.question(goes_with(c.with, &looked, None).as_deref()),
            "Delete repository alice/webapp with its 40 open issues, 6 open pull requests and 3 releases? This cannot be undone."
        );
        let args = json!({"owner": "alice", "repo": "webapp", "branch": "feat/x", "confirm": "alice/webapp#branch/feat/x"});
        let (c, confirm) = admitted("repoDeleteBranch", args, Mode::Argument).unwrap();
        assert_eq!(c.target, "alice/webapp#branch/feat/x");
        assert_eq!(confirm.as_deref(), Some("alice/webapp#branch/feat/x"));
        assert!(c.argument_refusal(confirm.as_deref(), false).is_none());
        // The look-up is a raw route: literal, as its wildcard takes a branch with a slash.
        assert_eq!(c.look.as_deref(), Some("/repos/alice/webapp/branches/feat/x"));
        let head = json!({"commit": {"id": "0123456789abcdef0123456789abcdef01234567"}});
        assert_eq!(goes_with(c.with, &head, None).as_deref(), Some("(its last commit 0123456789)"));
        let (c, _) =
            admitted("repoDeleteRelease", json!({"owner": "a", "repo": "b", "id": 7}), Mode::Ask).unwrap();
        assert_eq!(c.target, "a/b#release/7");
        assert_eq!(
            goes_with(c.with, &json!({"assets": [{}, {}]}), None).as_deref(),
            Some("with its 2 assets")
        );
        let (c, _) = admitted("orgDelete", json!({"org": "acme"}), Mode::Ask).unwrap();
        assert_eq!(goes_with(c.with, &json!([]), Some(1)).as_deref(), Some("with its 1 repository"));
    }

    #[test]
    fn the_raw_and_call_tools_are_judged_by_the_operation_they_reach() {
        let raw = json!({"method": "DELETE", "path": "/repos/alice/webapp", "confirm": "alice/webapp"});
        let (c, confirm) = admitted("gitea_api_request", raw, Mode::Ask).unwrap();
        assert_eq!((c.operation.as_str(), c.target.as_str()), ("repoDelete", "alice/webapp"));
        assert_eq!(confirm.as_deref(), Some("alice/webapp"));
        let raw = json!({"method": "DELETE", "path": "/repos/alice/webapp/branches/feat/x"});
        let (c, _) = admitted("gitea_api_request", raw, Mode::Ask).unwrap();
        assert_eq!(c.target, "alice/webapp#branch/feat/x", "a branch route's wildcard spans the rest");
        // Inside the call tool's arguments or beside them.
        for args in [
            json!({"operation_id": "repoDeleteTag", "arguments": {"owner": "a", "repo": "b", "tag": "v1", "confirm": "a/b#tag/v1"}}),
            json!({"operation_id": "repoDeleteTag", "arguments": {"owner": "a", "repo": "b", "tag": "v1"}, "confirm": "a/b#tag/v1"}),
        ] {
            let (c, confirm) = admitted("gitea_call_operation", args, Mode::Ask).unwrap();
            assert_eq!((c.target.as_str(), confirm.as_deref()), ("a/b#tag/v1", Some("a/b#tag/v1")));
        }
        // Harmless and reading calls need nothing; with the mode off nothing does.
        assert!(admitted("userCurrentDeleteStar", json!({"owner": "a", "repo": "b"}), Mode::Ask).is_none());
        let raw = json!({"method": "GET", "path": "/repos/alice/webapp"});
        assert!(admitted("gitea_api_request", raw, Mode::Ask).is_none());
        // With the mode off the call still names what it destroys (for the audit line), and
        // `confirm` is no argument.
        assert!(admitted("repoDelete", json!({"owner": "a", "repo": "b"}), Mode::Off).is_some());
        let c = crate::catalog::embedded(Flavor::Gitea);
        let (p, n) = (Policy { confirm: Mode::Off, ..Policy::default() }, Narrowing::default());
        let view = Discovery { catalog: c, policy: &p, narrowing: &n };
        let args = json!({"owner": "a", "repo": "b", "confirm": "a/b"});
        assert!(admit(view, "repoDelete", args.as_object().unwrap().clone()).outcome.is_err());
    }

    #[test]
    fn confirm_is_an_argument_only_where_it_applies() {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let p = Policy::default();
        let n = Narrowing::default();
        let view = Discovery { catalog: c, policy: &p, narrowing: &n };
        // A tool that never needs one refuses it as any unknown argument.
        let args = json!({"owner": "a", "repo": "b", "confirm": "a/b"});
        let e = admit(view, "repoGet", args.as_object().unwrap().clone()).outcome.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{e}");
        let args = json!({"owner": "a", "repo": "b", "confirm": 7});
        let view = Discovery { catalog: c, policy: &p, narrowing: &n };
        let e = admit(view, "repoDelete", args.as_object().unwrap().clone()).outcome.unwrap_err();
        let CallError::Result(f) = e else { panic!("an argument error") };
        assert_eq!((f.kind, f.path.as_deref()), (ErrorKind::InvalidArguments, Some("/confirm")));
    }

    #[test]
    fn without_the_exact_target_the_error_says_what_to_ask_and_what_to_send() {
        let (c, _) =
            admitted("repoDelete", json!({"owner": "alice", "repo": "webapp"}), Mode::Argument).unwrap();
        for given in [None, Some("alice/webap"), Some("ALICE/WEBAPP")] {
            let e = c.argument_refusal(given, false).expect("refused");
            assert_eq!(e.kind(), Some(ErrorKind::NotConfirmed));
            let text = e.to_string();
            assert!(text.contains("Delete repository alice/webapp? This cannot be undone."), "{text}");
            assert!(text.contains(r#""confirm": "alice/webapp""#), "{text}");
            assert!(text.contains("CONFIRM_IRREVERSIBLE=argument"), "{text}");
        }
        let text = c.argument_refusal(None, true).unwrap().to_string();
        assert!(text.contains("declared no elicitation support"), "{text}");
        let text = c.refused("the person declined").to_string();
        assert!(text.contains("was not sent: the person declined"), "{text}");
    }

    #[test]
    fn a_delete_of_neither_table_from_another_spec_is_confirmed_by_its_route() {
        let spec = r#"{"swagger":"2.0","info":{"title":"t","version":"1.27.0"},"paths":{
            "/things/{id}":{"delete":{"operationId":"thingDelete","parameters":[{"name":"id","in":"path","required":true,"type":"string"}],"responses":{"204":{"description":"ok"}}}}}}"#;
        let c = Catalog::build(spec.as_bytes(), Flavor::Gitea, None).unwrap();
        let p = Policy::default();
        let n = Narrowing::default();
        let view = Discovery { catalog: &c, policy: &p, narrowing: &n };
        let Ok(Admitted::Send(call, _)) =
            admit(view, "thingDelete", json!({"id": "x"}).as_object().unwrap().clone()).outcome
        else {
            panic!("admitted")
        };
        let conf = p.confirmation(&call).unwrap();
        assert_eq!(
            (conf.target.as_str(), conf.action.as_str()),
            ("/things/x", "Delete /things/x (thingDelete)")
        );
    }

    #[test]
    fn purging_an_account_says_so_and_long_values_are_cut_for_the_person() {
        let (c, _) =
            admitted("adminDeleteUser", json!({"username": "bob", "purge": true}), Mode::Ask).unwrap();
        assert_eq!(c.action, "Delete user bob and everything the account owns (purge)");
        assert_eq!(c.look.as_deref(), Some("/users/bob/repos?limit=1"));
        let long = "b".repeat(400);
        let (c, _) = admitted("repoDelete", json!({"owner": "a", "repo": long}), Mode::Ask).unwrap();
        assert!(c.question(None).chars().count() < 340, "{}", c.question(None));
    }
}
