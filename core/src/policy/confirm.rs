//! What cannot be undone: the operations a person confirms before anything is sent.
//!
//! An agent can delete a repository, an organisation or a branch with unmerged work in one
//! call, and the forge asks nobody; a sentence in an issue body is enough to make it try.
//! Tool annotations are advisory and many clients approve every tool, so the server itself
//! asks. What it asks for is decided by effect, not by method: a force update of a branch,
//! a secret written over and a push mirror are PATCH, PUT and POST. Every operation of both
//! embedded specs that is not a GET is in exactly one of three tables:
//!
//! - `IRREVERSIBLE`: it always destroys (or exposes, or hands out) what cannot be got back —
//!   the target a person confirms, the words they read, what to read first to say what goes;
//! - `IRREVERSIBLE_WITH`: it does only with some arguments (`When`, a predicate on the
//!   prepared arguments: `force`, a webhook's new secret), or only when what it replaces
//!   exists (`Clause::only_if_lost`: a secret of that name, a collaborator's assignments,
//!   commits a force update drops — the look-up says), each row with why it loses nothing
//!   otherwise;
//! - `HARMLESS`: it loses nothing that cannot be made again as it was, with why (a star can
//!   be given again; a setting can be read first and set back; the history keeps a file).
//!
//! A test over both specs fails when a non-GET operation is in none or in two, so a new forge
//! version cannot add a write that is sent unasked; an operation of a spec given with
//! `--spec` that deletes and has no row is asked for in the generic words of its route.
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

/// Why a call's `confirm` argument is what confirms it, rather than the person's answer to a
/// question: the error of a call without it says which, so that whoever reads it knows what
/// to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByArgument {
    /// `CONFIRM_IRREVERSIBLE=argument`: nobody is asked.
    Setting,
    /// The client declared no elicitation support (or the request has no way back to it).
    Undeclared,
    /// The client declared it but answered the question with "Method not found", as some do
    /// that have no way to show a form.
    Unanswerable,
}

/// What the server looks up before asking, to say what goes with the target — or, for a
/// clause asked only when something is lost, whether anything is.
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
    /// The commits a comparison `new...branch` lists: those only the branch has, which moving
    /// it to `new` drops (`repoCompareDiff`).
    DroppedCommits,
    /// Whether a listing of Actions secrets names the one of this route parameter (a secret's
    /// value cannot be read, only whether it exists).
    SecretNamed(&'static str),
    /// How many issues and pull requests the listing (`assigned_by`) counts.
    Assigned,
    /// Whether what is about to be shown is hidden now.
    Hidden(Hidden),
}

/// What a change makes visible, and how a look-up tells it is hidden now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// A repository (`repoGet`): `private`.
    PrivateRepo,
    /// An organisation (`orgGet`): `visibility` other than `public`.
    NonPublicOrg,
    /// The caller's settings (`getUserSettings`): `hide_email`.
    HiddenEmail,
}

/// When an operation of `IRREVERSIBLE_WITH` destroys: a predicate on its prepared arguments.
/// Body members are named by dotted paths and matched in any letter case (the forges spell
/// some differently: Forgejo's `Do`, Gitea's `do`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum When {
    /// Whatever its arguments (the look-up decides).
    Always,
    /// A body member is `true`.
    True(&'static str),
    /// A body member is `false`.
    False(&'static str),
    /// A body member is given: not null, not an empty string or object.
    Given(&'static str),
    /// A body member is given and is not the route parameter's value (letter case aside).
    Differs(&'static str, &'static str),
    /// A body member is one of these texts (letter case aside).
    OneOf(&'static str, &'static [&'static str]),
    /// A body member is a URL that carries a user name or password.
    Userinfo(&'static str),
    All(&'static [When]),
    Any(&'static [When]),
    Not(&'static When),
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

/// An operation that destroys only with some arguments, or only when what it replaces
/// exists (one row of several an operation may have; every row of one operation names the
/// same target).
#[derive(Debug)]
pub struct IrreversibleWith {
    pub operation: &'static str,
    pub(crate) when: When,
    row: Irreversible,
    /// Asked only when the look-up says something is lost (a secret of that name exists,
    /// commits are dropped); when it cannot say, asked.
    only_if_lost: bool,
    /// Why it loses nothing otherwise.
    pub(crate) otherwise: &'static str,
}

/// An operation that loses nothing that cannot be made again as it was.
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

/// A row of `IRREVERSIBLE_WITH`: `operation` destroys as `words` say `when` its arguments
/// say so, asked always (`Ask`) or only when `with`'s look-up finds something lost
/// (`IfLost`); `otherwise` says why it loses nothing else.
#[allow(clippy::too_many_arguments)]
const fn with(
    operation: &'static str,
    when: When,
    target: &'static str,
    words: &'static str,
    (look, with): (&'static str, With),
    asked: Asked,
    otherwise: &'static str,
) -> IrreversibleWith {
    IrreversibleWith {
        operation,
        when,
        row: Irreversible { operation, target, words, look, with },
        only_if_lost: matches!(asked, Asked::IfLost),
        otherwise,
    }
}

/// Whether a row of `IRREVERSIBLE_WITH` is asked whenever it applies, or only when its
/// look-up finds something lost.
#[derive(Debug, Clone, Copy)]
enum Asked {
    Ask,
    IfLost,
}

use Asked::*;
use When::*;

const NOTHING: (&str, With) = ("", With::Nothing);

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
    row("userCreateToken", "user/{username}#tokens", "Create an access token for {username}, which lets its holder act as {username}", "", Nothing),
    row("userCurrentPostKey", "me#keys", "Add an SSH key to your account, which lets its holder act as you (push, and read every repository you can)", "", Nothing),
    row("updateUserSecret", "me#secret/{secretname}", "Set your Actions secret {secretname}, replacing its value if it has one (a secret's value cannot be read back)", "", Nothing),
    row("userBlockUser", "me#block/{username}", "Block {username}: you and they stop following each other, and their stars, watches, issue assignments and collaborator access on your repositories (and yours on theirs) are removed; unblocking brings none of it back", "", Nothing),
    row("organizationBlockUser", "org/{org}#block/{username}", "Block {username} from organisation {org}: their stars, watches, issue assignments and collaborator access on its repositories are removed, and unblocking brings none of it back", "", Nothing),
    row("orgBlockUser", "org/{org}#block/{username}", "Block {username} from organisation {org}: their stars, watches, issue assignments and collaborator access on its repositories are removed, and unblocking brings none of it back", "", Nothing),
    row("orgRemoveTeamMember", "team/{id}#member/{username}", "Remove {username} from team {id}: they lose the team's access, and their issue and pull request assignments in its repositories they can no longer reach are removed (adding them back restores none)", "", Nothing),
    row("repoEditGitHook", "{owner}/{repo}#git-hook/{id}", "Replace the {id} Git hook script of {owner}/{repo}: code the forge's server runs at every push, with the server's rights", "", Nothing),
    row("orgAddTeamMember", "team/{id}#member/{username}", "Add {username} to team {id}: they get the team's access to its repositories, and what they read there cannot be taken back", "", Nothing),
    row("orgCreateHook", "org/{org}#hooks", "Send the events of organisation {org}'s repositories (commits, issues, pull requests) to {body.config.url}: what it is sent cannot be taken back", "", Nothing),
    row("userCreateHook", "me#hooks", "Send the events of your repositories (commits, issues, pull requests) to {body.config.url}: what it is sent cannot be taken back", "", Nothing),
    row("adminCreateHook", "admin#hooks", "Send the events of every repository of the instance (commits, issues, pull requests) to {body.config.url}: what it is sent cannot be taken back", "", Nothing),
    row("repoAddPushMirror", "{owner}/{repo}#push-mirror", "Push {owner}/{repo} to {body.remote_address} as a mirror: every branch and tag, force-pushed from then on (the remote's own history is replaced, and whoever can read it reads this repository)", "", Nothing),
];

/// A write that creates a branch of this name, or replaces it when it exists (`force_push`
/// on Gitea, `force_overwrite_new_branch` on Forgejo).
const FORCED: When =
    All(&[Given("new_branch"), Any(&[True("force_push"), True("force_overwrite_new_branch")])]);
const FORCED_WORDS: &str = "Force-push branch {body.new_branch} of {owner}/{repo} with a new commit on {body.branch|the default branch}, replacing what the branch holds now";
const FORCED_LOOK: (&str, With) = ("/repos/{owner}/{repo}/branches/{body.new_branch}", BranchHead);
const A_COMMIT: &str = "a commit on a branch: the history keeps what it changes, and a new commit restores it (a `new_branch` that exists is refused unless forced)";
const REPO_SETTINGS: &str = "a repository's settings can be read first (repoGet) and set back; archiving it, or turning its issues, wiki or other units off, deletes nothing";
const HOOK_SETTINGS: &str = "a webhook's other settings can be read first and set back (neither forge changes a webhook's secret when it is edited)";
const PRIVATE_REPO: (&str, With) = ("/repos/{owner}/{repo}", With::Hidden(Hidden::PrivateRepo));
const OPEN_ALREADY: &str =
    "a public repository can be read by anyone already; access given can be taken away again";
const A_NEW_SECRET: &str = "a secret of a name not in use is created, and can be deleted";

/// Every operation of both embedded specs that destroys only with some arguments, or only
/// when what it replaces exists: when, what, and why it loses nothing otherwise.
#[rustfmt::skip]
pub static IRREVERSIBLE_WITH: &[IrreversibleWith] = &[
    with("repoUpdateBranch", True("force"), "{owner}/{repo}#branch/{branch}@{body.new_commit_id}", "Force branch {branch} of {owner}/{repo} to {body.new_commit_id}", ("/repos/{owner}/{repo}/compare/{body.new_commit_id}...{branch}", DroppedCommits), IfLost, "without `force` a branch only moves ahead (a fast-forward) and keeps every commit; Forgejo's operation of this name renames a branch, which can be renamed back"),
    with("repoCreateFile", FORCED, "{owner}/{repo}#branch/{body.new_branch}", FORCED_WORDS, FORCED_LOOK, Ask, A_COMMIT),
    with("repoUpdateFile", FORCED, "{owner}/{repo}#branch/{body.new_branch}", FORCED_WORDS, FORCED_LOOK, Ask, A_COMMIT),
    with("repoDeleteFile", FORCED, "{owner}/{repo}#branch/{body.new_branch}", FORCED_WORDS, FORCED_LOOK, Ask, A_COMMIT),
    with("repoChangeFiles", FORCED, "{owner}/{repo}#branch/{body.new_branch}", FORCED_WORDS, FORCED_LOOK, Ask, A_COMMIT),
    with("repoApplyDiffPatch", FORCED, "{owner}/{repo}#branch/{body.new_branch}", FORCED_WORDS, FORCED_LOOK, Ask, A_COMMIT),
    with("updateRepoSecret", Always, "{owner}/{repo}#secret/{secretname}", "Replace the value of Actions secret {secretname} of {owner}/{repo} (a secret's value cannot be read back)", ("/repos/{owner}/{repo}/actions/secrets?limit=50", SecretNamed("secretname")), IfLost, A_NEW_SECRET),
    with("updateOrgSecret", Always, "org/{org}#secret/{secretname}", "Replace the value of Actions secret {secretname} of organisation {org} (a secret's value cannot be read back)", ("/orgs/{org}/actions/secrets?limit=50", SecretNamed("secretname")), IfLost, A_NEW_SECRET),
    with("repoCreateHook", Always, "{owner}/{repo}#hooks", "Send the events of the private repository {owner}/{repo} (commits, issues, pull requests) to {body.config.url}: what it is sent cannot be taken back", PRIVATE_REPO, IfLost, "a public repository's events tell nothing its readers cannot see; a webhook can be deleted"),
    with("repoEditHook", Given("config.url"), "{owner}/{repo}#hook/{id}", "Send the events of the private repository {owner}/{repo} to {body.config.url} from now on: what it is sent cannot be taken back", PRIVATE_REPO, IfLost, HOOK_SETTINGS),
    with("orgEditHook", Given("config.url"), "org/{org}#hook/{id}", "Send the events of organisation {org}'s repositories to {body.config.url} from now on: what it is sent cannot be taken back", NOTHING, Ask, HOOK_SETTINGS),
    with("userEditHook", Given("config.url"), "me#hook/{id}", "Send the events of your repositories to {body.config.url} from now on: what it is sent cannot be taken back", NOTHING, Ask, HOOK_SETTINGS),
    with("adminEditHook", Given("config.url"), "admin#hook/{id}", "Send the events of every repository of the instance to {body.config.url} from now on: what it is sent cannot be taken back", NOTHING, Ask, HOOK_SETTINGS),
    with("repoAddCollaborator", Always, "{owner}/{repo}#collaborator/{collaborator}", "Give {collaborator} access to the private repository {owner}/{repo}: what they read or clone cannot be taken back", PRIVATE_REPO, IfLost, OPEN_ALREADY),
    with("repoCreateKey", Always, "{owner}/{repo}#deploy-key", "Give the holder of a new deploy key access to the private repository {owner}/{repo}: what it reads or clones cannot be taken back", PRIVATE_REPO, IfLost, OPEN_ALREADY),
    with("repoAddTeam", Always, "{owner}/{repo}#team/{team}", "Give team {team} access to the private repository {owner}/{repo}: what its members read cannot be taken back", PRIVATE_REPO, IfLost, OPEN_ALREADY),
    with("orgAddTeamRepository", Always, "team/{id}#repo/{org}/{repo}", "Give team {id} access to the private repository {org}/{repo}: what its members read cannot be taken back", ("/repos/{org}/{repo}", With::Hidden(Hidden::PrivateRepo)), IfLost, OPEN_ALREADY),
    with("repoDeleteCollaborator", Always, "{owner}/{repo}#collaborator/{collaborator}", "Remove collaborator {collaborator} from {owner}/{repo}, which also unassigns them from its issues and pull requests (adding them back assigns them to nothing)", ("/repos/{owner}/{repo}/issues?state=all&assigned_by={collaborator}&limit=1", Assigned), IfLost, "a collaborator assigned to nothing loses only access, which adding them again gives back as it was"),
    with("repoEdit", Differs("name", "repo"), "{owner}/{repo}#rename/{body.name}", "Rename {owner}/{repo} to {body.name} (links to the old name stop working once it is taken)", NOTHING, Ask, REPO_SETTINGS),
    with("repoEdit", False("private"), "{owner}/{repo}#public", "Make {owner}/{repo} public: its code, issues and history can be read and copied by anyone from then on", ("/repos/{owner}/{repo}", With::Hidden(Hidden::PrivateRepo)), IfLost, REPO_SETTINGS),
    with("repoEdit", Any(&[Given("mirror_password"), Given("mirror_token"), Given("mirror_username")]), "{owner}/{repo}#mirror-credentials", "Replace the credentials the mirror {owner}/{repo} pulls with (the old ones cannot be read back)", NOTHING, Ask, REPO_SETTINGS),
    with("orgEdit", OneOf("visibility", &["public", "limited"]), "org/{org}#visibility/{body.visibility}", "Make organisation {org} {body.visibility}: it, its members and its public repositories can be seen from then on by anyone (limited: anyone signed in)", ("/orgs/{org}", With::Hidden(Hidden::NonPublicOrg)), IfLost, "an organisation's settings can be read first (orgGet) and set back"),
    with("updateUserSettings", False("hide_email"), "me#settings", "Show your email address on your profile: anyone can read it from then on", ("/user/settings", With::Hidden(Hidden::HiddenEmail)), IfLost, "your settings can be read first (getUserSettings) and set back"),
    with("repoMigrate", All(&[Any(&[Given("auth_token"), Given("auth_password"), Given("auth_username"), Given("aws_secret_access_key"), Userinfo("clone_addr")]), Not(&True("private"))]), "migrate/{body.repo_owner|you}/{body.repo_name}", "Copy {body.clone_addr}, read with the credentials given, into the public repository {body.repo_owner|of yours} {body.repo_name}: what those credentials could read becomes readable by anyone", NOTHING, Ask, "a migration creates a repository (a copy of its source), which can be deleted; a private one, or one read without credentials, exposes nothing"),
    with("generateRepo", Not(&True("private")), "{template_owner}/{template_repo}#generate/{body.owner}/{body.name}", "Generate the public repository {body.owner}/{body.name} from the template {template_owner}/{template_repo}, which makes what it copies readable by anyone", ("/repos/{template_owner}/{template_repo}", With::Hidden(Hidden::PrivateRepo)), IfLost, "a new repository can be deleted; one made private, or from a public template, exposes nothing"),
];

/// Every other delete, transfer and administrator change of both embedded specs, and why it
/// loses nothing.
#[rustfmt::skip]
pub(crate) static HARMLESS: &[Harmless] = &[
    harmless("registerAdminRunner", "registers a runner; it can be deleted"),
    harmless("adminCreateRunnerRegistrationToken", "gives a registration token; nothing is removed"),
    harmless("deleteAdminRunner", "a runner can be registered again"),
    harmless("updateAdminRunner", "a runner's settings can be changed back"),
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
    harmless("orgRemoveTeamRepository", "a repository can be added to the team again"),
    harmless("deleteUserRunner", "a runner can be registered again"),
    harmless("userUnblockUser", "a user can be blocked again"),
    harmless("userDeleteEmail", "an address can be added again"),
    harmless("userCurrentDeleteFollow", "a user can be followed again"),
    harmless("userCurrentDeleteStar", "a star can be given again"),
    // Reading, rendering, marking read: nothing is stored or nothing lost.
    harmless("renderMarkdown", "renders text; nothing is stored"),
    harmless("renderMarkdownRaw", "renders text; nothing is stored"),
    harmless("renderMarkup", "renders text; nothing is stored"),
    harmless("repoGetFileContentsPost", "reads files (a POST only for its long list of paths); nothing changes"),
    harmless("notifyReadList", "notifications marked read can be marked unread again"),
    harmless("notifyReadThread", "a notification marked read can be marked unread again"),
    harmless("notifyReadRepoList", "notifications marked read can be marked unread again"),
    // Federation (Forgejo): an activity that another undoes.
    harmless("activitypubInstanceActorInbox", "delivers a federation activity (a follow, a like) to this instance; another activity undoes it"),
    harmless("activitypubInstanceActorOutbox", "publishes a federation activity of this instance; another activity undoes it"),
    harmless("activitypubRepositoryInbox", "delivers a federation activity (a like) to a repository; another activity undoes it"),
    harmless("activitypubRepositoryOutbox", "publishes a federation activity of a repository; another activity undoes it"),
    harmless("activitypubPersonInbox", "delivers a federation activity (a follow) to a user; another activity undoes it"),
    harmless("userCurrentActivityPubFollow", "a follow of a remote user can be undone"),
    // Created: what is made can be deleted.
    harmless("orgCreate", "creates an organisation; it can be deleted"),
    harmless("createOrgRepoDeprecated", "creates a repository; it can be deleted"),
    harmless("createOrgRepo", "creates a repository; it can be deleted"),
    harmless("createCurrentUserRepo", "creates a repository; it can be deleted"),
    harmless("createFork", "creates a fork (of a private repository, a private one); it can be deleted"),
    harmless("registerOrgRunner", "registers a runner; it can be deleted"),
    harmless("registerRepoRunner", "registers a runner; it can be deleted"),
    harmless("registerUserRunner", "registers a runner; it can be deleted"),
    harmless("orgCreateRunnerRegistrationToken", "gives a new registration token, which replaces the old one that runners already registered no longer need"),
    harmless("repoCreateRunnerRegistrationToken", "gives a new registration token, which replaces the old one that runners already registered no longer need"),
    harmless("userCreateRunnerRegistrationToken", "gives a new registration token, which replaces the old one that runners already registered no longer need"),
    harmless("createOrgVariable", "creates an Actions variable; it can be deleted"),
    harmless("createRepoVariable", "creates an Actions variable; it can be deleted"),
    harmless("createUserVariable", "creates an Actions variable; it can be deleted"),
    harmless("orgCreateLabel", "creates a label; it can be deleted"),
    harmless("issueCreateLabel", "creates a label; it can be deleted"),
    harmless("orgCreateTeam", "creates a team; it can be deleted"),
    harmless("repoCreateBranch", "creates a branch; it can be deleted"),
    harmless("repoCreateBranchProtection", "creates a branch protection; it can be deleted"),
    harmless("repoCreateTag", "creates a tag; it can be deleted"),
    harmless("repoCreateTagProtection", "creates a tag protection; it can be deleted"),
    harmless("repoCreateRelease", "creates a release; it can be deleted"),
    harmless("repoCreateReleaseAttachment", "adds an asset to a release; it can be deleted"),
    harmless("repoCreateWikiPage", "creates a wiki page; it can be deleted, and the wiki's history keeps it"),
    harmless("repoCreateStatus", "adds a commit status; a newer one of its context replaces it"),
    harmless("issueCreateIssue", "opens an issue; it can be closed or deleted"),
    harmless("issueCreateComment", "adds a comment; it can be deleted"),
    harmless("issueCreateIssueAttachment", "adds an attachment; it can be deleted"),
    harmless("issueCreateIssueCommentAttachment", "adds an attachment; it can be deleted"),
    harmless("issueCreateMilestone", "creates a milestone; it can be deleted"),
    harmless("issueAddTime", "adds a tracked time; it can be deleted"),
    harmless("repoCreatePullRequest", "opens a pull request; it can be closed"),
    harmless("repoCreatePullReview", "adds a review; it can be dismissed or deleted"),
    harmless("repoCreatePullReviewComment", "adds a review comment; it can be deleted"),
    harmless("repoCreatePullReviewCommentReply", "adds a review comment; it can be deleted"),
    harmless("userCreateOAuth2Application", "creates an OAuth2 application; it can be deleted"),
    harmless("userAddEmail", "adds an email address; it can be deleted"),
    harmless("userCurrentPostGPGKey", "adds a GPG key (commits it signs show as yours); it can be deleted"),
    harmless("userVerifyGPGKey", "marks a key of yours verified by a signature you give; nothing is lost"),
    // Changed: the values before can be read first and set back (or a history keeps them).
    harmless("orgEditLabel", "a label's name, colour and description can be read first and set back"),
    harmless("issueEditLabel", "a label's name, colour and description can be read first and set back"),
    harmless("issueEditMilestone", "a milestone can be read first and set back"),
    harmless("orgEditTeam", "a team's settings can be read first (orgGetTeam) and set back"),
    harmless("updateOrgRunner", "a runner's settings can be changed back"),
    harmless("updateRepoRunner", "a runner's settings can be changed back"),
    harmless("updateUserRunner", "a runner's settings can be changed back"),
    harmless("updateOrgVariable", "a variable's value can be read first (getOrgVariable) and set back"),
    harmless("updateRepoVariable", "a variable's value can be read first (getRepoVariable) and set back"),
    harmless("updateUserVariable", "a variable's value can be read first (getUserVariable) and set back"),
    harmless("orgUpdateAvatar", "the avatar before can be downloaded first (its avatar_url) and set again"),
    harmless("repoUpdateAvatar", "the avatar before can be downloaded first (its avatar_url) and set again"),
    harmless("userUpdateAvatar", "the avatar before can be downloaded first (its avatar_url) and set again"),
    harmless("repoEditBranchProtection", "a branch protection can be read first and set back"),
    harmless("repoUpdateBranchProtectionPriories", "the protections' order can be read first and set back"),
    harmless("repoEditTagProtection", "a tag protection can be read first and set back"),
    harmless("repoRenameBranch", "a branch can be renamed back (pull requests and protections follow it)"),
    harmless("repoEditRelease", "a release can be read first and set back"),
    harmless("repoEditReleaseAttachment", "an asset's name can be changed back"),
    harmless("issueEditIssueAttachment", "an attachment's name can be changed back"),
    harmless("issueEditIssueCommentAttachment", "an attachment's name can be changed back"),
    harmless("repoEditWikiPage", "the wiki's history keeps what the edit replaced"),
    harmless("repoSetNote", "the history of the notes keeps what it replaced"),
    harmless("issueEditIssue", "the issue's edit history keeps its earlier text, and its other fields (state, labels, assignees) can be set back"),
    harmless("issueEditComment", "the comment's edit history keeps its earlier text"),
    harmless("issueEditCommentDeprecated", "the comment's edit history keeps its earlier text"),
    harmless("repoEditPullRequest", "the pull request's edit history keeps its earlier text, and its other fields (state, base, labels) can be set back"),
    harmless("issueEditIssueDeadline", "a deadline can be set back"),
    harmless("issueReplaceLabels", "the labels before can be read first and set back"),
    harmless("repoUpdateTopics", "the topics before can be read first and set back"),
    harmless("repoReplaceAllFlags", "the flags before can be read first and set back"),
    // Added, switched, joined: undone by its opposite.
    harmless("issueAddLabel", "a label can be removed again"),
    harmless("issueAddAssignees", "assignees can be removed again"),
    harmless("issueCreateIssueBlocking", "a dependency can be removed again"),
    harmless("issueCreateIssueDependencies", "a dependency can be removed again"),
    harmless("issueLockIssue", "an issue can be unlocked again"),
    harmless("pinIssue", "an issue can be unpinned again"),
    harmless("moveIssuePin", "a pin can be moved back"),
    harmless("issuePostIssueReaction", "a reaction can be taken back"),
    harmless("issuePostCommentReaction", "a reaction can be taken back"),
    harmless("issueStartStopWatch", "a stopwatch can be cancelled"),
    harmless("issueStopStopWatch", "stopping adds a tracked time, which can be deleted"),
    harmless("issueAddSubscription", "a subscription can be ended again"),
    harmless("userCurrentPutSubscription", "a repository can be unwatched again"),
    harmless("userCurrentPutStar", "a star can be taken back"),
    harmless("userCurrentPutFollow", "a user can be unfollowed again"),
    harmless("repoAddTopic", "a topic can be removed again"),
    harmless("repoAddFlag", "a flag can be removed again"),
    harmless("orgPublicizeMember", "a membership can be concealed again"),
    harmless("orgUnblockUser", "a user can be blocked again"),
    harmless("linkPackage", "a package can be unlinked again"),
    harmless("unlinkPackage", "a package can be linked again"),
    harmless("ActionsDisableWorkflow", "a workflow can be enabled again"),
    harmless("ActionsEnableWorkflow", "a workflow can be disabled again"),
    harmless("repoCreatePullReviewRequests", "a review request can be withdrawn"),
    harmless("repoResolvePullReviewComment", "a conversation can be unresolved again"),
    harmless("repoUnresolvePullReviewComment", "a conversation can be resolved again"),
    harmless("repoSubmitPullReview", "a review can be dismissed or deleted"),
    harmless("repoDismissPullReview", "a review can be undismissed"),
    harmless("repoUnDismissPullReview", "a review can be dismissed again"),
    // Run: the forge does what it was set up to do; nothing of the repository is lost.
    harmless("ActionsDispatchWorkflow", "runs one of the repository's workflows as its authors made it to be run; the run can be cancelled"),
    harmless("DispatchWorkflow", "runs one of the repository's workflows as its authors made it to be run; the run can be cancelled"),
    harmless("rerunWorkflowJob", "runs a job again; nothing of the repository changes"),
    harmless("rerunWorkflowRun", "runs a workflow's jobs again; nothing of the repository changes"),
    harmless("rerunFailedWorkflowRun", "runs the failed jobs again; nothing of the repository changes"),
    harmless("CancelActionRun", "the workflow can be run again"),
    harmless("repoTestHook", "sends the webhook's test delivery; nothing on the forge changes"),
    harmless("repoMirrorSync", "pulls now what the mirror pulls at its interval anyway: a mirror follows its source, which keeps it"),
    harmless("repoPushMirrorSync", "pushes now what the push mirrors push at their interval anyway"),
    // Git history that only grows.
    harmless("repoMergePullRequest", "every style only adds to the base (a merge, squash or rebase commit, or a fast-forward) and rewrites none of its commits; a revert undoes it, and the head stays at refs/pull/N/head, so a branch deleted after the merge can be restored"),
    harmless("repoUpdatePullRequest", "updating by merge adds a commit, and by rebase re-applies every commit of the head branch onto the base: each change stays, only the rebased commits get new ids"),
    harmless("repoMergeUpstream", "merges or fast-forwards the fork's branch with its base: it only gains commits"),
    harmless("repoSyncForkDefault", "brings the fork's default branch up to its base: it only gains commits"),
    harmless("repoSyncForkBranch", "brings the fork's branch up to its base: it only gains commits"),
];

/// The row of operation `id`, if it is irreversible.
pub fn row_of(id: &str) -> Option<&'static Irreversible> {
    IRREVERSIBLE.iter().find(|r| r.operation == id)
}

/// The rows of operation `id` in `IRREVERSIBLE_WITH` (none when it has none).
fn rows_with(id: &str) -> impl Iterator<Item = &'static IrreversibleWith> + '_ {
    IRREVERSIBLE_WITH.iter().filter(move |r| r.operation == id)
}

/// Whether `tool` takes the `confirm` argument: an operation that may need a confirmation,
/// the raw tool and the call tool (for the operations they reach).
pub fn offered_by(tool: &ToolDef) -> bool {
    match &tool.target {
        Target::Operation(op) => {
            row_of(&op.id).is_some()
                || rows_with(&op.id).next().is_some()
                || (op.method == Method::Delete && !is_harmless(&op.id))
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
/// (with the words they read); for one that needs it only with some arguments, each case
/// and why it needs none otherwise; for any other write, why it needs none.
pub(crate) fn described(op: &Operation) -> Option<Value> {
    if let Some(r) = row_of(&op.id) {
        return Some(serde_json::json!({"needed": true, "target": r.target, "question": r.words}));
    }
    let cases: Vec<Value> = rows_with(&op.id)
        .map(|r| {
            serde_json::json!({
                "when": r.when.describe(),
                "target": r.row.target,
                "question": r.row.words,
                "only_if_lost": r.only_if_lost,
            })
        })
        .collect();
    if let Some(first) = rows_with(&op.id).next() {
        return Some(
            serde_json::json!({"needed": "with some arguments", "cases": cases, "otherwise": first.otherwise}),
        );
    }
    let h = HARMLESS.iter().find(|h| h.operation == op.id)?;
    Some(serde_json::json!({"needed": false, "why": h.why}))
}

impl When {
    /// Whether the prepared arguments `args` (body members in any letter case) say so.
    fn holds(&self, args: &Map<String, Value>, route: &[(String, String)]) -> bool {
        let body = args.get("body");
        match self {
            Always => true,
            True(m) => member(body, m).and_then(Value::as_bool) == Some(true),
            False(m) => member(body, m).and_then(Value::as_bool) == Some(false),
            Given(m) => member(body, m).is_some_and(|v| match v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Object(o) => !o.is_empty(),
                _ => true,
            }),
            Differs(m, param) => {
                let given = member(body, m).and_then(Value::as_str).filter(|s| !s.is_empty());
                let now = route.iter().find(|(n, _)| n == param).map(|(_, v)| v.as_str());
                given.is_some_and(|g| now.is_none_or(|n| !g.eq_ignore_ascii_case(n)))
            }
            OneOf(m, texts) => member(body, m)
                .and_then(Value::as_str)
                .is_some_and(|v| texts.iter().any(|t| t.eq_ignore_ascii_case(v))),
            Userinfo(m) => member(body, m).and_then(Value::as_str).is_some_and(has_userinfo),
            All(all) => all.iter().all(|w| w.holds(args, route)),
            Any(any) => any.iter().any(|w| w.holds(args, route)),
            Not(w) => !w.holds(args, route),
        }
    }

    /// The predicate in words, for the schema tool.
    fn describe(&self) -> String {
        match self {
            Always => "always (asked only when the look-up finds what it replaces)".to_owned(),
            True(m) => format!("body.{m} is true"),
            False(m) => format!("body.{m} is false"),
            Given(m) => format!("body.{m} is given"),
            Differs(m, p) => format!("body.{m} is given and is not {{{p}}}"),
            OneOf(m, texts) => format!("body.{m} is one of {}", texts.join(", ")),
            Userinfo(m) => format!("body.{m} is a URL with a user name or password"),
            All(all) => all.iter().map(|w| w.describe()).collect::<Vec<_>>().join(" and "),
            Any(any) => format!("({})", any.iter().map(|w| w.describe()).collect::<Vec<_>>().join(" or ")),
            Not(w) => format!("not ({})", w.describe()),
        }
    }
}

/// Whether `text` is a URL that carries credentials (`https://user:token@host/…`, or
/// `user@host:path` with a password before the `@`), as git and the forges read them.
fn has_userinfo(text: &str) -> bool {
    match url::Url::parse(text.trim()) {
        Ok(u) => !u.username().is_empty() || u.password().is_some(),
        // scp-like `git@host:path`: a user name alone is how ssh says who, not a secret.
        Err(_) => text.split_once('@').is_some_and(|(user, _)| user.contains(':')),
    }
}

/// The member of `body` at a dotted `path`, each name matched in any letter case (the exact
/// spelling first).
pub(super) fn member<'v>(body: Option<&'v Value>, path: &str) -> Option<&'v Value> {
    let mut at = body?;
    for name in path.split('.') {
        let map = at.as_object()?;
        at = match map.get(name) {
            Some(v) => v,
            None => map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)?,
        };
    }
    Some(at)
}

/// What a person confirms for one call: one target, and what each part of the call destroys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub operation: String,
    /// The exact target (`alice/webapp#branch/feat-x`): what `confirm` must equal.
    pub target: String,
    /// What happens, each part in words (`Delete branch feat-x of alice/webapp`).
    pub clauses: Vec<Clause>,
}

/// One thing a call destroys, in words, and what to read first to say what goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    pub words: String,
    /// The route to read first, as the raw tool takes it (relative to `/api/v1`, literal,
    /// maybe with a query), and what to take from its answer.
    pub look: Option<String>,
    pub with: With,
    /// Asked only when the look-up says something is lost; when it cannot say, asked.
    pub only_if_lost: bool,
    /// For `With::SecretNamed`: the name looked for.
    pub subject: Option<String>,
    /// What the server found goes with it (set once it looked), in words.
    pub found: Option<String>,
    /// A write that widens what the session read (`FLOW_GUARD`), not one that destroys: asked
    /// whatever `CONFIRM_IRREVERSIBLE` says.
    pub flow: bool,
}

impl Confirmation {
    /// What happens, in words: every part.
    pub fn action(&self) -> String {
        self.clauses.iter().map(|c| c.words.as_str()).collect::<Vec<_>>().join("; ")
    }

    /// The same confirmation on the forge `forge` of several: the target is `forge:target`
    /// (a yes on one forge confirms nothing on another) and each part says where.
    pub fn on_forge(mut self, forge: &str) -> Confirmation {
        self.target = format!("{forge}:{}", self.target);
        for c in &mut self.clauses {
            c.words = format!("{} on the forge {forge}", c.words);
        }
        self
    }

    /// Whether the look-ups may show that nothing is lost, and nobody need be asked.
    pub fn may_lose_nothing(&self) -> bool {
        self.clauses.iter().any(|c| c.only_if_lost)
    }
}

/// The clause of `row` for these route values and body.
fn clause_of(
    row: &Irreversible,
    route: &[(String, String)],
    body: Option<&Value>,
    only_if_lost: bool,
) -> Clause {
    let look = (!row.look.is_empty()).then(|| fill(row.look, route, body));
    let subject = match row.with {
        SecretNamed(param) => route.iter().find(|(n, _)| n == param).map(|(_, v)| v.clone()),
        // The visibility asked for, against the one the organisation has now.
        With::Hidden(Hidden::NonPublicOrg) => {
            member(body, "visibility").and_then(Value::as_str).map(str::to_owned)
        }
        _ => None,
    };
    Clause {
        words: fill(row.words, route, body),
        look,
        with: row.with,
        only_if_lost,
        subject,
        found: None,
        flow: false,
    }
}

/// The confirmation `op` needs with these route values and arguments, if it needs one: an
/// irreversible operation's row, the rows of `IRREVERSIBLE_WITH` its arguments meet, or — for
/// an operation of no table that deletes (a spec given with `--spec`) — the route it deletes.
pub(crate) fn needed(op: &Operation, values: &Values, args: &Map<String, Value>) -> Option<Confirmation> {
    let route = route_values(op, values);
    let body = args.get("body");
    if let Some(r) = row_of(&op.id) {
        let mut clause = clause_of(r, &route, body, false);
        // A purge deletes everything the account owns besides (through the raw tool the
        // parameter is in its `query`).
        let purge = args.get("purge").or_else(|| args.get("query").and_then(|q| q.get("purge")));
        if purge.is_some_and(|p| {
            p.as_bool() == Some(true) || p.as_str().is_some_and(|t| t.eq_ignore_ascii_case("true"))
        }) {
            clause.words.push_str(" and everything the account owns (purge)");
        }
        return Some(Confirmation {
            operation: op.id.clone(),
            target: fill(r.target, &route, body),
            clauses: vec![clause],
        });
    }
    let met: Vec<&IrreversibleWith> = rows_with(&op.id).filter(|r| r.when.holds(args, &route)).collect();
    if !met.is_empty() {
        // Each part its own target: a yes for one part confirms no other.
        let targets: Vec<String> = met.iter().map(|r| fill(r.row.target, &route, body)).collect();
        return Some(Confirmation {
            operation: op.id.clone(),
            target: targets.join(" + "),
            clauses: met.iter().map(|r| clause_of(&r.row, &route, body, r.only_if_lost)).collect(),
        });
    }
    if op.method != Method::Delete || is_harmless(&op.id) || rows_with(&op.id).next().is_some() {
        return None;
    }
    let path = fill(&op.path, &route, None);
    Some(Confirmation {
        operation: op.id.clone(),
        target: path.clone(),
        clauses: vec![Clause {
            words: format!("Delete {path} ({})", op.id),
            look: None,
            with: Nothing,
            only_if_lost: false,
            subject: None,
            found: None,
            flow: false,
        }],
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
        clauses: vec![Clause {
            words: format!("DELETE {path} (a route no operation of the spec has)"),
            look: None,
            with: Nothing,
            only_if_lost: false,
            subject: None,
            found: None,
            flow: false,
        }],
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

/// `template` with `{name}` replaced by the route's value and `{body.path}` by the body's
/// member at a dotted path, in any letter case (text, or a number); `{body.path|words}` is
/// `words` when the body has none; `{/name}` is `/` and the value, or nothing when the route
/// has none (a parameter one forge's route has and the other's not); a value that is missing
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
        let (name, otherwise) = name.split_once('|').map_or((name, None), |(n, o)| (n, Some(o)));
        let value = match name.strip_prefix("body.") {
            Some(path) => member(body, path).and_then(|v| match v {
                Value::String(s) if !s.is_empty() => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            }),
            None => route.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        };
        match value {
            // The caller's text, read by a person: no line breaks, control or invisible and
            // bidirectional formatting characters, which could make it say something else.
            Some(v) => {
                out.extend(v.chars().map(|c| if c.is_control() || is_format(c) { '\u{FFFD}' } else { c }))
            }
            None => out.push_str(otherwise.unwrap_or("?")),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Whether `c` is an invisible formatting character (Unicode's category Cf: bidirectional
/// controls, zero-width characters, the byte-order mark).
pub(super) fn is_format(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// Longest target or words shown (a route value can be long; a person reads a line).
const MAX_SHOWN_CHARS: usize = 300;

/// `text` as a person reads it: no control or invisible formatting characters (which could
/// make it say something else), at most `MAX_SHOWN_CHARS`.
pub(super) fn shown(text: &str) -> String {
    let clean = |c: char| if c.is_control() || is_format(c) { '\u{FFFD}' } else { c };
    if text.chars().count() <= MAX_SHOWN_CHARS {
        return text.chars().map(clean).collect();
    }
    let cut: String = text.chars().take(MAX_SHOWN_CHARS).map(clean).collect();
    format!("{cut}…")
}

/// What an agent is told to do about a write that widens what its session read, besides
/// asking the person (the question already says what was read).
pub(super) const FRESH_SESSION: &str =
    "For unrelated public work, start a fresh session (over stateless HTTP: after FLOW_WINDOW).";

impl Confirmation {
    /// The question a person answers: each part of the action with what goes with it (what
    /// the server looked up, when it could: `Clause::found`), and that it cannot be undone.
    pub fn question(&self) -> String {
        let parts: Vec<String> = self
            .clauses
            .iter()
            .map(|c| match &c.found {
                Some(found) if found.starts_with(',') => format!("{}{found}", shown(&c.words)),
                Some(found) => format!("{} {found}", shown(&c.words)),
                None => shown(&c.words),
            })
            .collect();
        format!("{}? This cannot be undone.", parts.join("; "))
    }

    /// A `confirm` argument, judged: it must be the exact target. `None` when it is.
    pub fn argument_refusal(&self, given: Option<&str>, why: ByArgument) -> Option<CallError> {
        if given == Some(self.target.as_str()) {
            return None;
        }
        let how = match why {
            ByArgument::Undeclared => {
                "This client cannot ask the person (it declared no elicitation support), so"
            }
            ByArgument::Unanswerable => {
                "This client cannot ask the person (it answered the server's question with \"Method not found\"), so"
            }
            ByArgument::Setting => {
                "This server takes confirmations as an argument (CONFIRM_IRREVERSIBLE=argument), so"
            }
        };
        let wrong = match given {
            Some(g) => format!(" The `confirm` sent, {:?}, is not the exact target.", shown(g)),
            None => String::new(),
        };
        let what = if self.clauses.iter().all(|c| c.flow) {
            "would write what this session read where more people see it, which cannot be undone, and it"
        } else {
            "cannot be undone and"
        };
        Some(CallError::local(
            ErrorKind::NotConfirmed,
            format!(
                "{} {what} was not sent.{wrong} {how} ask the person the question below; only if they agree, call again with the same arguments and \"confirm\": {}. The question: \"{}\"{}",
                self.operation,
                Value::from(self.target.as_str()),
                self.question(),
                self.go_on()
            ),
        ))
    }

    /// What an agent may do besides asking, when the call widens what the session read.
    fn go_on(&self) -> String {
        if self.clauses.iter().any(|c| c.flow) { format!(" {FRESH_SESSION}") } else { String::new() }
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
                "{} of {} was not sent: {answer}. Do not retry it unless the person asks for it again.{}",
                self.operation,
                shown(&self.target),
                self.go_on()
            ),
        )
    }
}

/// What a look-up says is lost with a clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// The look-up could not say (it failed, or the answer did not tell).
    Unknown,
    /// Nothing: what the call replaces does not exist, or it drops nothing.
    Nothing,
    /// Something, with words that say what (or none beyond the clause's own).
    Some(Option<String>),
}

/// What is lost with a clause, from what the server looked up: `looked` is the answer of the
/// look-up `with` names, `total` the count a listing's header gave, `subject` the name a
/// listing is searched for.
pub fn lost(with: With, looked: &Value, total: Option<u64>, subject: Option<&str>) -> Lost {
    let n = |name: &str| looked.get(name).and_then(Value::as_u64);
    let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let said = |words: Option<String>| words.map_or(Lost::Unknown, |w| Lost::Some(Some(w)));
    let flag = |name: &str, hidden: &str| match looked.get(name).and_then(Value::as_bool) {
        Some(true) => Lost::Some(Some(hidden.to_owned())),
        Some(false) => Lost::Nothing,
        None => Lost::Unknown,
    };
    match with {
        Nothing => Lost::Unknown,
        RepoContents => {
            let parts = [
                n("open_issues_count").map(|c| count(c, "open issue", "open issues")),
                n("open_pr_counter").map(|c| count(c, "open pull request", "open pull requests")),
                n("release_counter").map(|c| count(c, "release", "releases")),
            ];
            let parts: Vec<String> = parts.into_iter().flatten().collect();
            said((!parts.is_empty()).then(|| format!("with its {}", and_list(&parts))))
        }
        Repositories => said(total.map(|t| format!("with its {}", count(t, "repository", "repositories")))),
        ReleaseAssets => said(
            looked
                .get("assets")
                .and_then(Value::as_array)
                .map(|a| format!("with its {}", count(a.len() as u64, "asset", "assets"))),
        ),
        BranchHead => said(
            short_id(looked.get("commit").and_then(|c| c.get("id")))
                .map(|id| format!("(its last commit {id})")),
        ),
        DroppedCommits => {
            let Some(dropped) = n("total_commits") else { return Lost::Unknown };
            if dropped == 0 {
                return Lost::Nothing;
            }
            let ids: Vec<String> = looked
                .get("commits")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter_map(|c| short_id(c.get("sha"))).take(3).collect())
                .unwrap_or_default();
            let more = dropped.saturating_sub(ids.len() as u64);
            let mut listed = ids;
            if more > 0 && !listed.is_empty() {
                listed.push(count(more, "more", "more"));
            }
            let which = if listed.is_empty() { String::new() } else { format!(" ({})", and_list(&listed)) };
            Lost::Some(Some(format!(", dropping {} only it has{which}", count(dropped, "commit", "commits"))))
        }
        SecretNamed(_) => {
            let (Some(items), Some(name)) = (looked.as_array(), subject) else { return Lost::Unknown };
            let named = |i: &Value| {
                i.get("name").and_then(Value::as_str).is_some_and(|n| n.eq_ignore_ascii_case(name))
            };
            if items.iter().any(named) {
                return Lost::Some(None);
            }
            // The whole listing, or only its first page? Without the forge's count, it cannot
            // be said.
            if total.is_some_and(|t| items.len() as u64 >= t) { Lost::Nothing } else { Lost::Unknown }
        }
        Assigned => match total {
            Some(0) => Lost::Nothing,
            Some(t) => Lost::Some(Some(format!("(they are assigned to {t} now)"))),
            None => Lost::Unknown,
        },
        With::Hidden(Hidden::PrivateRepo) => flag("private", "(it is private now)"),
        With::Hidden(Hidden::HiddenEmail) => flag("hide_email", "(it is hidden now)"),
        // Seen by more than now: private to limited or public, limited to public.
        With::Hidden(Hidden::NonPublicOrg) => {
            let rank =
                |v: &str| ["private", "limited", "public"].iter().position(|r| r.eq_ignore_ascii_case(v));
            match (looked.get("visibility").and_then(Value::as_str), subject) {
                (Some(now), Some(asked)) => match (rank(now), rank(asked)) {
                    (Some(n), Some(a)) if a <= n => Lost::Nothing,
                    (Some(_), Some(_)) => Lost::Some(Some(format!("(it is {} now)", shown(now)))),
                    _ => Lost::Unknown,
                },
                _ => Lost::Unknown,
            }
        }
    }
}

/// The first ten digits of a commit id, when it is one.
fn short_id(id: Option<&Value>) -> Option<String> {
    id.and_then(Value::as_str)
        .filter(|id| id.len() >= 10 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(|id| id[..10].to_owned())
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

    fn catalogs() -> [(Flavor, &'static Catalog); 2] {
        [Flavor::Gitea, Flavor::Forgejo].map(|f| (f, crate::catalog::embedded(f)))
    }

    /// How many of the tables hold operation `id`.
    fn tables_of(id: &str) -> usize {
        usize::from(row_of(id).is_some())
            + usize::from(rows_with(id).next().is_some())
            + usize::from(is_harmless(id))
    }

    #[test]
    fn every_write_of_both_specs_is_classified_by_its_effect_in_exactly_one_table() {
        let mut unclassified = Vec::new();
        let mut writes = std::collections::BTreeSet::new();
        for (flavor, c) in catalogs() {
            for op in c.operations().filter_map(|t| t.operation()) {
                if op.method == Method::Get {
                    continue;
                }
                writes.insert(op.id.clone());
                match tables_of(&op.id) {
                    1 => {}
                    n => unclassified.push(format!(
                        "{flavor:?} {} {} {} (in {n} tables)",
                        op.id,
                        op.method.as_str(),
                        op.path
                    )),
                }
            }
        }
        assert!(
            unclassified.is_empty(),
            "classify each in exactly one of IRREVERSIBLE, IRREVERSIBLE_WITH or HARMLESS: {unclassified:#?}"
        );
        // Every row names a write of a spec, once per table.
        for id in IRREVERSIBLE.iter().map(|r| r.operation).chain(HARMLESS.iter().map(|h| h.operation)) {
            assert!(writes.contains(id), "{id} is no write of either spec");
        }
        for r in IRREVERSIBLE_WITH {
            assert!(writes.contains(r.operation), "{} is no write of either spec", r.operation);
        }
        for r in IRREVERSIBLE {
            assert_eq!(
                IRREVERSIBLE.iter().filter(|o| o.operation == r.operation).count(),
                1,
                "{}",
                r.operation
            );
        }
        for h in HARMLESS {
            assert_eq!(HARMLESS.iter().filter(|o| o.operation == h.operation).count(), 1, "{}", h.operation);
            assert!(h.why.len() > 10, "{}: say why it loses nothing", h.operation);
        }
        for r in IRREVERSIBLE_WITH {
            assert!(r.otherwise.len() > 10, "{}: say why it loses nothing otherwise", r.operation);
            assert_eq!(r.only_if_lost, r.row.with != Nothing && r.only_if_lost, "{}", r.operation);
            if matches!(r.when, Always) {
                assert!(
                    r.only_if_lost,
                    "{}: a row for any arguments is asked only when a look-up finds a loss",
                    r.operation
                );
            }
        }
        // The README's count of operations that may need a person's confirmation.
        let readme = include_str!("../../../README.md");
        let always = IRREVERSIBLE.len();
        let sometimes: std::collections::BTreeSet<&str> =
            IRREVERSIBLE_WITH.iter().map(|r| r.operation).collect();
        let said = format!("{always} operations always, and {} with some arguments", sometimes.len());
        assert!(readme.contains(&said), "the README should say \"{said}\"");
    }

    /// Arguments that meet every predicate of `when`'s kind, for the row test: each body
    /// member a predicate names, as it wants it.
    fn meeting(when: &When, body: &mut Map<String, Value>) {
        let mut put = |path: &str, v: Value| {
            let mut at = &mut *body;
            let names: Vec<&str> = path.split('.').collect();
            for name in &names[..names.len() - 1] {
                at = at.entry(*name).or_insert_with(|| json!({})).as_object_mut().unwrap();
            }
            at.insert(names[names.len() - 1].to_owned(), v);
        };
        match when {
            Always => {}
            True(m) => put(m, json!(true)),
            False(m) => put(m, json!(false)),
            Given(m) => put(m, json!("v-given")),
            Differs(m, _) => put(m, json!("v-other")),
            OneOf(m, texts) => put(m, json!(texts[0])),
            Userinfo(m) => put(m, json!("https://user:t0k3n@git.example/v-new.git")),
            All(all) => all.iter().for_each(|w| meeting(w, body)),
            Any(any) => meeting(&any[0], body),
            Not(_) => {}
        }
    }

    #[test]
    fn every_row_names_an_operation_of_a_spec_and_fills_from_its_own_parameters() {
        let rows =
            IRREVERSIBLE.iter().map(|r| (r, None)).chain(IRREVERSIBLE_WITH.iter().map(|r| (&r.row, Some(r))));
        for (r, conditional) in rows {
            let mut found = false;
            for (flavor, c) in catalogs() {
                let Some(op) = c.get(r.operation).and_then(|t| t.operation()) else { continue };
                found = true;
                // Every route parameter and the body members the words name get a value.
                let mut args = Map::new();
                for p in op.template.params() {
                    args.insert(p.to_owned(), json!(format!("v-{p}")));
                }
                let mut body = Map::new();
                for m in [
                    "new_owner",
                    "new_username",
                    "new_name",
                    "remote_address",
                    "new_commit_id",
                    "new_branch",
                    "branch",
                    "clone_addr",
                    "repo_name",
                    "owner",
                ] {
                    body.insert(m.into(), json!("v-new"));
                }
                body.insert("name".into(), json!("v-name"));
                body.insert("config".into(), json!({"url": "https://hooks.example/v"}));
                if let Some(cond) = conditional {
                    meeting(&cond.when, &mut body);
                    args.insert("body".into(), Value::Object(body));
                    assert!(
                        cond.when.holds(&args, &route_values(op, &Values::Args(&args))),
                        "{}: {:?}",
                        r.operation,
                        cond.when
                    );
                } else {
                    args.insert("body".into(), Value::Object(body));
                }
                let c = needed(op, &Values::Args(&args), &args).expect("a row needs a confirmation");
                for clause in &c.clauses {
                    let look = clause
                        .look
                        .as_deref()
                        .map(|l| l.split('?').next().unwrap().to_owned())
                        .unwrap_or_default();
                    for text in [&c.target, &clause.words, &look] {
                        assert!(
                            !text.contains('?') && !text.contains('{'),
                            "{flavor:?} {}: {text}",
                            r.operation
                        );
                    }
                    assert!(
                        clause.words.starts_with(char::is_uppercase),
                        "{}: {}",
                        r.operation,
                        clause.words
                    );
                    if let Some(look) = &clause.look {
                        let route = look.split('?').next().unwrap();
                        assert!(
                            c_get(flavor, route),
                            "{flavor:?} {}: the look-up {route} is not a GET of the spec",
                            r.operation
                        );
                    }
                }
                assert!(!c.target.is_empty() && c.target.len() < 200, "{}: {}", r.operation, c.target);
                assert_eq!(
                    r.look.is_empty(),
                    r.with == Nothing,
                    "{}: a look-up and what it says go together",
                    r.operation
                );
            }
            assert!(found, "{} is an operation of neither spec", r.operation);
        }
    }

    fn c_get(flavor: Flavor, route: &str) -> bool {
        crate::catalog::embedded(flavor).match_path(Method::Get, route).is_some()
    }

    fn admitted_in(
        flavor: Flavor,
        tool: &str,
        args: Value,
        mode: Mode,
    ) -> Option<(Confirmation, Option<String>)> {
        let c = crate::catalog::embedded(flavor);
        let p = Policy { confirm: mode, ..Policy::default() };
        let n = Narrowing::default();
        let view = Discovery { catalog: c, policy: &p, narrowing: &n, forges: &[] };
        match admit(view, tool, args.as_object().unwrap().clone()).outcome {
            Ok(Admitted::Send(call, ask)) => p.confirmation(&call).map(|c| (c, ask.confirm)),
            other => panic!("{tool}: {other:?}"),
        }
    }

    fn admitted(tool: &str, args: Value, mode: Mode) -> Option<(Confirmation, Option<String>)> {
        admitted_in(Flavor::Gitea, tool, args, mode)
    }

    /// The one clause of a confirmation, with what a look-up found.
    fn with_found(mut c: Confirmation, found: Lost) -> Confirmation {
        if let Lost::Some(words) = found {
            c.clauses[0].found = words;
        }
        c
    }

    #[test]
    fn a_repository_branch_and_release_are_confirmed_by_their_exact_targets() {
        let (c, confirm) =
            admitted("repoDelete", json!({"owner": "alice", "repo": "webapp"}), Mode::Ask).unwrap();
        assert_eq!(c.target, "alice/webapp");
        assert_eq!(c.action(), "Delete repository alice/webapp");
        assert_eq!(c.clauses[0].look.as_deref(), Some("/repos/alice/webapp"));
        assert_eq!(confirm, None);
        let looked = json!({"open_issues_count": 40, "open_pr_counter": 6, "release_counter": 3});
        let found = lost(c.clauses[0].with, &looked, None, None);
        assert_eq!(
            with_found(c, found).question(),
            "Delete repository alice/webapp with its 40 open issues, 6 open pull requests and 3 releases? This cannot be undone."
        );
        let args = json!({"owner": "alice", "repo": "webapp", "branch": "feat/x", "confirm": "alice/webapp#branch/feat/x"});
        let (c, confirm) = admitted("repoDeleteBranch", args, Mode::Argument).unwrap();
        assert_eq!(c.target, "alice/webapp#branch/feat/x");
        assert_eq!(confirm.as_deref(), Some("alice/webapp#branch/feat/x"));
        assert!(c.argument_refusal(confirm.as_deref(), ByArgument::Setting).is_none());
        // The look-up is a raw route: literal, as its wildcard takes a branch with a slash.
        assert_eq!(c.clauses[0].look.as_deref(), Some("/repos/alice/webapp/branches/feat/x"));
        let head = json!({"commit": {"id": "0123456789abcdef0123456789abcdef01234567"}});
        assert_eq!(
            lost(c.clauses[0].with, &head, None, None),
            Lost::Some(Some("(its last commit 0123456789)".into()))
        );
        let (c, _) =
            admitted("repoDeleteRelease", json!({"owner": "a", "repo": "b", "id": 7}), Mode::Ask).unwrap();
        assert_eq!(c.target, "a/b#release/7");
        assert_eq!(
            lost(c.clauses[0].with, &json!({"assets": [{}, {}]}), None, None),
            Lost::Some(Some("with its 2 assets".into()))
        );
        let (c, _) = admitted("orgDelete", json!({"org": "acme"}), Mode::Ask).unwrap();
        assert_eq!(
            lost(c.clauses[0].with, &json!([]), Some(1), None),
            Lost::Some(Some("with its 1 repository".into()))
        );
        // A look-up that says nothing says so: the question is asked without it.
        assert_eq!(lost(BranchHead, &json!({"message": "x"}), None, None), Lost::Unknown);
    }

    #[test]
    fn a_force_update_of_a_branch_names_the_commits_it_drops_and_a_fast_forward_is_not_asked() {
        let body = json!({"new_commit_id": "0123abcd", "force": true});
        let (c, _) = admitted(
            "repoUpdateBranch",
            json!({"owner": "alice", "repo": "webapp", "branch": "feat/x", "body": body}),
            Mode::Ask,
        )
        .unwrap();
        // The target names the commit: a yes for one commit confirms no other.
        assert_eq!(c.target, "alice/webapp#branch/feat/x@0123abcd");
        let clause = &c.clauses[0];
        assert!(clause.only_if_lost);
        assert_eq!(clause.look.as_deref(), Some("/repos/alice/webapp/compare/0123abcd...feat/x"));
        assert!(c_get(Flavor::Gitea, "/repos/alice/webapp/compare/0123abcd...feat/x"));
        let compare = json!({"total_commits": 5, "commits": [
            {"sha": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"},
            {"sha": "b1b2c3d4e5f60718293a4b5c6d7e8f9012345678"},
            {"sha": "c1b2c3d4e5f60718293a4b5c6d7e8f9012345678"},
            {"sha": "d1b2c3d4e5f60718293a4b5c6d7e8f9012345678"}]});
        let found = lost(clause.with, &compare, None, None);
        assert_eq!(
            with_found(c.clone(), found).question(),
            "Force branch feat/x of alice/webapp to 0123abcd, dropping 5 commits only it has (a1b2c3d4e5, b1b2c3d4e5, c1b2c3d4e5 and 2 more)? This cannot be undone."
        );
        assert_eq!(lost(clause.with, &json!({"total_commits": 0, "commits": []}), None, None), Lost::Nothing);
        // Without `force` only a fast-forward is possible: nothing to ask. On Forgejo the
        // operation of this name renames a branch.
        let body = json!({"new_commit_id": "0123abcd"});
        assert!(
            admitted(
                "repoUpdateBranch",
                json!({"owner": "a", "repo": "b", "branch": "x", "body": body}),
                Mode::Ask
            )
            .is_none()
        );
        let rename = json!({"owner": "a", "repo": "b", "branch": "x", "body": {"name": "y"}});
        assert!(admitted_in(Flavor::Forgejo, "repoUpdateBranch", rename, Mode::Ask).is_none());
    }

    #[test]
    fn writes_that_force_push_replace_a_secret_or_expose_are_asked_and_the_same_writes_otherwise_not() {
        let repo = |body: Value| json!({"owner": "o", "repo": "r", "filepath": "a.txt", "body": body});
        let forced = json!({"content": "eA==", "new_branch": "release", "force_push": true});
        let (c, _) = admitted("repoCreateFile", repo(forced), Mode::Ask).unwrap();
        assert_eq!(c.target, "o/r#branch/release");
        assert_eq!(
            c.action(),
            "Force-push branch release of o/r with a new commit on the default branch, replacing what the branch holds now"
        );
        assert_eq!(c.clauses[0].look.as_deref(), Some("/repos/o/r/branches/release"));
        // Forgejo spells the flag otherwise; any letter case of a member counts.
        let forced = json!({"content": "eA==", "sha": "abc", "New_Branch": "release", "branch": "main", "force_overwrite_new_branch": true});
        let (c, _) = admitted_in(Flavor::Forgejo, "repoUpdateFile", repo(forced), Mode::Ask).unwrap();
        assert!(c.action().contains("new commit on main"), "{}", c.action());
        for plain in [
            json!({"content": "eA=="}),
            json!({"content": "eA==", "new_branch": "b"}),
            json!({"content": "eA==", "force_push": true}),
        ] {
            assert!(admitted("repoCreateFile", repo(plain.clone()), Mode::Ask).is_none(), "{plain}");
        }
        // A secret: asked only when one of that name exists (the look-up decides).
        let (c, _) = admitted(
            "updateRepoSecret",
            json!({"owner": "o", "repo": "r", "secretname": "DEPLOY_KEY", "body": {"data": "x"}}),
            Mode::Ask,
        )
        .unwrap();
        let clause = &c.clauses[0];
        assert!(clause.only_if_lost && clause.subject.as_deref() == Some("DEPLOY_KEY"));
        let listed = json!([{"name": "OTHER"}, {"name": "deploy_key"}]);
        assert_eq!(lost(clause.with, &listed, Some(2), clause.subject.as_deref()), Lost::Some(None));
        assert_eq!(
            lost(clause.with, &json!([{"name": "OTHER"}]), Some(1), clause.subject.as_deref()),
            Lost::Nothing
        );
        // Not on the first page of many: cannot say, so asked.
        assert_eq!(
            lost(clause.with, &json!([{"name": "OTHER"}]), Some(80), clause.subject.as_deref()),
            Lost::Unknown
        );
        // A webhook sent elsewhere (asked while the repository is private), not its other
        // settings: neither forge changes a secret on an edit.
        let hook = |body: Value| json!({"owner": "o", "repo": "r", "id": 3, "body": body});
        let (c, _) =
            admitted("repoEditHook", hook(json!({"config": {"url": "https://x.example/h"}})), Mode::Ask)
                .unwrap();
        assert_eq!(c.target, "o/r#hook/3");
        assert!(c.clauses[0].only_if_lost);
        let secret = hook(json!({"config": {"secret": "s3"}, "active": false}));
        assert!(admitted("repoEditHook", secret, Mode::Ask).is_none());
        // Values a person reads lose their line breaks and invisible formatting.
        let sneaky = hook(json!({"config": {"url": "https://x\n\u{202e}evil"}}));
        let (c, _) = admitted("repoEditHook", sneaky, Mode::Ask).unwrap();
        assert!(c.action().contains("https://x\u{fffd}\u{fffd}evil"), "{}", c.action());
        // A repository: renamed, made public, its mirror's credentials replaced — one
        // question with each part; other settings are not asked.
        let edit = |body: Value| json!({"owner": "o", "repo": "r", "body": body});
        let (c, _) = admitted("repoEdit", edit(json!({"name": "r2", "private": false})), Mode::Ask).unwrap();
        assert_eq!(c.target, "o/r#rename/r2 + o/r#public");
        assert_eq!(c.clauses.len(), 2, "{c:?}");
        assert!(c.clauses[1].only_if_lost);
        assert_eq!(lost(c.clauses[1].with, &json!({"private": false}), None, None), Lost::Nothing);
        for harmless in [
            json!({"name": "R"}),
            json!({"description": "d", "archived": true, "has_wiki": false}),
            json!({"private": true}),
        ] {
            assert!(admitted("repoEdit", edit(harmless.clone()), Mode::Ask).is_none(), "{harmless}");
        }
        // A collaborator removed: asked only when assigned to something.
        let (c, _) = admitted(
            "repoDeleteCollaborator",
            json!({"owner": "o", "repo": "r", "collaborator": "bob"}),
            Mode::Ask,
        )
        .unwrap();
        assert_eq!(c.clauses[0].look.as_deref(), Some("/repos/o/r/issues?state=all&assigned_by=bob&limit=1"));
        assert_eq!(lost(c.clauses[0].with, &json!([]), Some(0), None), Lost::Nothing);
        assert_eq!(
            lost(c.clauses[0].with, &json!([{}]), Some(4), None),
            Lost::Some(Some("(they are assigned to 4 now)".into()))
        );
        // A migration with credentials into a public repository.
        let migrate = |body: Value| json!({"body": body});
        let creds = json!({"clone_addr": "https://git.example/x.git", "repo_name": "x", "auth_token": "t0k"});
        assert!(admitted("repoMigrate", migrate(creds.clone()), Mode::Ask).is_some());
        let mut private = creds.clone();
        private["private"] = json!(true);
        assert!(admitted("repoMigrate", migrate(private), Mode::Ask).is_none());
        // Credentials in the URL itself, or a token as the user name, are credentials too.
        for creds in [
            json!({"clone_addr": "https://bob:ghp_x@github.com/org/private.git", "repo_name": "x"}),
            json!({"clone_addr": "https://github.com/org/private.git", "repo_name": "x", "auth_username": "ghp_x"}),
        ] {
            assert!(admitted("repoMigrate", migrate(creds.clone()), Mode::Ask).is_some(), "{creds}");
        }
        // An organisation seen by more than now: private to limited, limited to public.
        let (c, _) =
            admitted("orgEdit", json!({"org": "acme", "body": {"visibility": "limited"}}), Mode::Ask)
                .unwrap();
        let clause = &c.clauses[0];
        let now = |v: &str| lost(clause.with, &json!({"visibility": v}), None, clause.subject.as_deref());
        assert_eq!(now("private"), Lost::Some(Some("(it is private now)".into())));
        assert_eq!((now("limited"), now("public")), (Lost::Nothing, Lost::Nothing));
        assert!(
            admitted(
                "repoMigrate",
                migrate(json!({"clone_addr": "https://git.example/x.git", "repo_name": "x"})),
                Mode::Ask
            )
            .is_none()
        );
    }

    #[test]
    fn the_schema_tool_says_when_an_operation_is_asked_for_and_why_not_otherwise() {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let op = |id: &str| c.get(id).unwrap().operation().unwrap().clone();
        let d = described(&op("repoUpdateBranch")).unwrap();
        assert_eq!(d["needed"], "with some arguments");
        assert_eq!(d["cases"][0]["when"], "body.force is true");
        assert!(d["otherwise"].as_str().unwrap().contains("fast-forward"), "{d}");
        assert_eq!(described(&op("repoDelete")).unwrap()["needed"], true);
        assert_eq!(described(&op("issueCreateIssue")).unwrap()["needed"], false);
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
        // A write that destroys under another method, through the raw tool too.
        let raw = json!({"method": "PUT", "path": "/repos/alice/webapp/branches/main", "body": {"new_commit_id": "abc", "force": true}});
        let (c, _) = admitted("gitea_api_request", raw, Mode::Ask).unwrap();
        assert_eq!(
            (c.operation.as_str(), c.target.as_str()),
            ("repoUpdateBranch", "alice/webapp#branch/main@abc")
        );
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
        let view = Discovery { catalog: c, policy: &p, narrowing: &n, forges: &[] };
        let args = json!({"owner": "a", "repo": "b", "confirm": "a/b"});
        assert!(admit(view, "repoDelete", args.as_object().unwrap().clone()).outcome.is_err());
    }

    #[test]
    fn confirm_is_an_argument_only_where_it_applies() {
        let c = crate::catalog::embedded(Flavor::Gitea);
        let p = Policy::default();
        let n = Narrowing::default();
        let view = Discovery { catalog: c, policy: &p, narrowing: &n, forges: &[] };
        // A tool that never needs one refuses it as any unknown argument.
        let args = json!({"owner": "a", "repo": "b", "confirm": "a/b"});
        let e = admit(view, "repoGet", args.as_object().unwrap().clone()).outcome.unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidArguments), "{e}");
        let args = json!({"owner": "a", "repo": "b", "confirm": 7});
        let view = Discovery { catalog: c, policy: &p, narrowing: &n, forges: &[] };
        let e = admit(view, "repoDelete", args.as_object().unwrap().clone()).outcome.unwrap_err();
        let CallError::Result(f) = e else { panic!("an argument error") };
        assert_eq!((f.kind, f.path.as_deref()), (ErrorKind::InvalidArguments, Some("/confirm")));
        // A write that needs one only with some arguments offers it.
        assert!(offered_by(c.get("repoUpdateBranch").unwrap()));
        assert!(offered_by(c.get("updateRepoSecret").unwrap()));
        assert!(!offered_by(c.get("issueCreateIssue").unwrap()));
    }

    #[test]
    fn without_the_exact_target_the_error_says_what_to_ask_and_what_to_send() {
        let (c, _) =
            admitted("repoDelete", json!({"owner": "alice", "repo": "webapp"}), Mode::Argument).unwrap();
        for given in [None, Some("alice/webap"), Some("ALICE/WEBAPP")] {
            let e = c.argument_refusal(given, ByArgument::Setting).expect("refused");
            assert_eq!(e.kind(), Some(ErrorKind::NotConfirmed));
            let text = e.to_string();
            assert!(text.contains("Delete repository alice/webapp? This cannot be undone."), "{text}");
            assert!(text.contains(r#""confirm": "alice/webapp""#), "{text}");
            assert!(text.contains("CONFIRM_IRREVERSIBLE=argument"), "{text}");
        }
        let text = c.argument_refusal(None, ByArgument::Undeclared).unwrap().to_string();
        assert!(text.contains("declared no elicitation support"), "{text}");
        let text = c.argument_refusal(None, ByArgument::Unanswerable).unwrap().to_string();
        assert!(text.contains(r#"answered the server's question with "Method not found""#), "{text}");
        assert!(text.contains(r#""confirm": "alice/webapp""#), "{text}");
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
        let view = Discovery { catalog: &c, policy: &p, narrowing: &n, forges: &[] };
        let Ok(Admitted::Send(call, _)) =
            admit(view, "thingDelete", json!({"id": "x"}).as_object().unwrap().clone()).outcome
        else {
            panic!("admitted")
        };
        let conf = p.confirmation(&call).unwrap();
        assert_eq!(
            (conf.target.as_str(), conf.action().as_str()),
            ("/things/x", "Delete /things/x (thingDelete)")
        );
    }

    #[test]
    fn purging_an_account_says_so_and_long_values_are_cut_for_the_person() {
        let (c, _) =
            admitted("adminDeleteUser", json!({"username": "bob", "purge": true}), Mode::Ask).unwrap();
        assert_eq!(c.action(), "Delete user bob and everything the account owns (purge)");
        assert_eq!(c.clauses[0].look.as_deref(), Some("/users/bob/repos?limit=1"));
        let long = "b".repeat(400);
        let (c, _) = admitted("repoDelete", json!({"owner": "a", "repo": long}), Mode::Ask).unwrap();
        assert!(c.question().chars().count() < 340, "{}", c.question());
    }
}
