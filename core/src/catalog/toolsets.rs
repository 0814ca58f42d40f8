//! Toolsets: named groups of operations, so a client can be offered a few dozen tool
//! definitions instead of five hundred.
//!
//! Two tables, both data. `AREAS` partitions every operation of either spec by its route
//! (first matching row wins, `misc` catches the rest), so each operation has exactly one
//! area. `CORE` names the everyday operations of a developer — read and change files, work
//! on issues and pull requests, branches, releases — drawn from those areas; it is the
//! default selection. Toolsets choose what `tools/list` shows, not what may be called:
//! every operation stays reachable through the discovery tools, and only the policy
//! (`READ_ONLY`, `ENABLED_TOOLS`, `DISABLED_TOOLS`) forbids.

use std::collections::BTreeSet;

use crate::error::Shown;

/// One area: its name, what it holds (for people), and the rules that put an operation in
/// it (matched against the spec path, e.g. `/repos/{owner}/{repo}/pulls`; any rule will do).
#[derive(Debug)]
pub(crate) struct Area {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    rules: &'static [Rule],
}

/// How a route is recognised. Plain string tests, not regular expressions: every operation
/// is placed at every start, and compiling patterns for that cost more than the rest of it.
#[derive(Debug)]
enum Rule {
    /// The route starts with this.
    Starts(&'static str),
    /// The route is exactly this.
    Is(&'static str),
    /// The route contains this.
    Contains(&'static str),
    /// One of the names follows the prefix, then `/` or the end of the route.
    Under(&'static str, &'static [&'static str]),
    /// `/` and the name appear anywhere, then `/` or the end of the route.
    Segment(&'static str),
    /// Every route.
    Any,
}

use Rule::{Any, Contains, Is, Segment, Starts, Under};

/// The route prefix of everything in one repository.
const REPO: &str = "/repos/{owner}/{repo}/";

/// Whether `rest` is empty or goes on with a new segment.
fn segment_ends(rest: &str) -> bool {
    rest.is_empty() || rest.starts_with('/')
}

impl Rule {
    fn matches(&self, path: &str) -> bool {
        match *self {
            Starts(p) => path.starts_with(p),
            Is(p) => path == p,
            Contains(p) => path.contains(p),
            Under(prefix, names) => path
                .strip_prefix(prefix)
                .is_some_and(|rest| names.iter().any(|n| rest.strip_prefix(n).is_some_and(segment_ends))),
            Segment(name) => path
                .match_indices('/')
                .any(|(i, _)| path[i + 1..].strip_prefix(name).is_some_and(segment_ends)),
            Any => true,
        }
    }
}

/// Every area, in matching order.
pub(crate) const AREAS: &[Area] = &[
    Area {
        name: "admin",
        description: "Site administration: users, organizations, hooks, cron, quota (site admins only)",
        rules: &[Starts("/admin/")],
    },
    Area { name: "activitypub", description: "ActivityPub federation", rules: &[Starts("/activitypub/")] },
    Area {
        name: "actions",
        description: "Actions: workflow runs, jobs, artifacts, runners, secrets, variables",
        rules: &[Segment("actions")],
    },
    Area {
        name: "webhooks",
        description: "Webhooks of repositories, organizations and the user",
        rules: &[Segment("hooks")],
    },
    Area {
        name: "notifications",
        description: "Notification threads",
        rules: &[Starts("/notifications"), Starts("/repos/{owner}/{repo}/notifications")],
    },
    Area { name: "packages", description: "Packages and their versions", rules: &[Starts("/packages/")] },
    Area { name: "wiki", description: "Wiki pages", rules: &[Contains("/wiki/")] },
    Area { name: "releases", description: "Releases and their attachments", rules: &[Segment("releases")] },
    Area {
        name: "pulls",
        description: "Pull requests, reviews, review comments and reviewers",
        rules: &[Segment("pulls"), Is("/repos/{owner}/{repo}/reviewers")],
    },
    Area {
        name: "issues",
        description: "Issues, comments, labels, milestones, reactions, attachments, time tracking",
        rules: &[
            Under(
                REPO,
                &[
                    "issues",
                    "labels",
                    "milestones",
                    "times",
                    "assignees",
                    "issue_templates",
                    "issue_config",
                    "new_pin_allowed",
                ],
            ),
            Starts("/repos/issues/search"),
            Starts("/orgs/{org}/labels"),
            Starts("/label/"),
            Starts("/user/times"),
            Starts("/user/stopwatches"),
        ],
    },
    Area {
        name: "branches",
        description: "Branches and tags, and their protection rules",
        rules: &[Under(REPO, &["branches", "branch_protections", "tags", "tag_protections"])],
    },
    Area {
        name: "commits",
        description: "Commits, commit statuses, comparisons, git refs, tag objects and notes",
        rules: &[Under(
            REPO,
            &["commits", "statuses", "compare", "git/commits", "git/refs", "git/tags", "git/notes"],
        )],
    },
    Area {
        name: "contents",
        description: "Files: read, create, update, delete; trees, blobs, archives, patches",
        rules: &[Under(
            REPO,
            &[
                "contents",
                "contents-ext",
                "file-contents",
                "raw",
                "media",
                "archive",
                "editorconfig",
                "diffpatch",
                "git/blobs",
                "git/trees",
            ],
        )],
    },
    Area {
        name: "repos",
        description: "Repositories: search, create, fork, settings, collaborators, topics, mirrors, stars",
        rules: &[
            Starts("/repos/"),
            Starts("/repositories/"),
            Is("/user/repos"),
            Is("/users/{username}/repos"),
            Is("/orgs/{org}/repos"),
            Is("/org/{org}/repos"),
            Starts("/topics/"),
            Segment("starred"),
            Segment("subscriptions"),
        ],
    },
    Area {
        name: "orgs",
        description: "Organizations, members and teams",
        rules: &[
            Under("/", &["orgs"]),
            Starts("/org/"),
            Starts("/teams/"),
            Is("/user/orgs"),
            Is("/user/teams"),
            Starts("/users/{username}/orgs"),
        ],
    },
    Area {
        name: "users",
        description: "Users, followers, keys, emails, tokens, OAuth2 apps, blocks, settings",
        rules: &[Under("/", &["user", "users"]), Is("/token")],
    },
    Area {
        name: "misc",
        description: "Version, server settings, markdown rendering, templates, signing keys",
        rules: &[Any],
    },
];

/// The name of the everyday selection, and the default of `TOOLSETS`.
pub(crate) const CORE: &str = "core";

/// What `CORE` holds, for people.
pub(crate) const CORE_DESCRIPTION: &str =
    "The everyday work of a developer: files, branches, commits, issues, pull requests, releases";

/// The everyday operations, by operationId. A name missing from one flavor's spec is
/// simply absent there.
pub(crate) const CORE_OPERATIONS: &[&str] = &[
    // who am I, which repositories
    "userGetCurrent",
    "repoGet",
    "repoSearch",
    "userCurrentListRepos",
    "createCurrentUserRepo",
    "createFork",
    // files
    "repoGetContents",
    "repoGetRawFile",
    "repoCreateFile",
    "repoUpdateFile",
    "repoChangeFiles",
    "GetTree",
    // branches and commits
    "repoListBranches",
    "repoCreateBranch",
    "repoDeleteBranch",
    "repoGetAllCommits",
    // issues
    "issueListIssues",
    "issueGetIssue",
    "issueCreateIssue",
    "issueEditIssue",
    "issueGetComments",
    "issueCreateComment",
    // an issue's labels are given by id
    "issueListLabels",
    // pull requests
    "repoListPullRequests",
    "repoGetPullRequest",
    "repoCreatePullRequest",
    "repoEditPullRequest",
    "repoGetPullRequestFiles",
    "repoDownloadPullDiffOrPatch",
    "repoCreatePullReview",
    "repoMergePullRequest",
    // releases
    "repoListReleases",
    "repoGetLatestRelease",
    "repoCreateRelease",
];

/// The area of a spec route.
pub(crate) fn area_of(path: &str) -> &'static str {
    AREAS.iter().find(|a| a.rules.iter().any(|r| r.matches(path))).map_or("misc", |a| a.name)
}

/// Whether an operation is one of the everyday ones.
pub(crate) fn is_core(operation_id: &str) -> bool {
    CORE_OPERATIONS.contains(&operation_id)
}

/// Every name `TOOLSETS` accepts besides `all`.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    std::iter::once(CORE).chain(AREAS.iter().map(|a| a.name))
}

/// A choice of toolsets: everything, or some named ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Only(BTreeSet<&'static str>),
}

impl Default for Selection {
    fn default() -> Selection {
        Selection::Only(BTreeSet::from([CORE]))
    }
}

impl Selection {
    /// Parse a comma-separated list (`all`, `core`, area names, or `none` for only the
    /// built-in tools; case and spaces ignored). An unknown name is an error that lists the
    /// known ones.
    pub fn parse(list: &str) -> Result<Selection, Shown> {
        let mut chosen = BTreeSet::new();
        let mut all = false;
        // Every word is checked, also after `all`: a typo is an error wherever it stands.
        for word in list.split(',').map(|w| w.trim().to_ascii_lowercase()).filter(|w| !w.is_empty()) {
            if word == "all" {
                all = true;
                continue;
            }
            if word == "none" {
                continue;
            }
            match names().find(|n| *n == word) {
                Some(n) => {
                    chosen.insert(n);
                }
                None => {
                    return Err(format!(
                        "unknown toolset {word:?}; known: all, none, {}",
                        names().collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
        Ok(if all { Selection::All } else { Selection::Only(chosen) })
    }

    /// Whether an operation in `area`, core or not, is selected.
    pub(crate) fn includes(&self, area: &str, core: bool) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(set) => set.contains(area) || (core && set.contains(CORE)),
        }
    }
}

/// The toolsets as a Markdown table: name, operations per catalog (one column each, named
/// by flavor and spec version), what they hold. The README's table is this for both
/// embedded specs (a test keeps it true); `tools --list-toolsets` prints it for one.
pub fn table(catalogs: &[&super::Catalog]) -> String {
    let mut out = String::from("| toolset |");
    for c in catalogs {
        out.push_str(&format!(" {} {} |", c.flavor.display_name(), c.spec_version));
    }
    out.push_str(" holds |\n|---|");
    out.push_str(&"---:|".repeat(catalogs.len()));
    out.push_str("---|\n");
    let mut row = |name: String, pred: &dyn Fn(&super::ToolDef) -> bool, holds: &str| {
        out.push_str(&format!("| {name} |"));
        for c in catalogs {
            out.push_str(&format!(" {} |", c.operations().filter(|t| pred(t)).count()));
        }
        out.push_str(&format!(" {holds} |\n"));
    };
    row(format!("`{CORE}` (default)"), &|t| t.core, CORE_DESCRIPTION);
    for a in AREAS {
        row(format!("`{}`", a.name), &|t| t.toolset == a.name, a.description);
    }
    row("`all`".into(), &|_| true, "Every operation");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, Flavor};

    fn catalogs() -> [Catalog; 2] {
        [Flavor::Gitea, Flavor::Forgejo].map(|f| Catalog::build(f.embedded_spec(), f, None).unwrap())
    }

    #[test]
    fn every_area_row_holds_operations_and_misc_only_the_leftovers() {
        let cats = catalogs();
        for area in AREAS {
            let n: usize =
                cats.iter().map(|c| c.operations().filter(|t| t.toolset == area.name).count()).sum();
            assert!(n > 0, "area {} matches no operation of either spec", area.name);
        }
        // misc is the catch-all: it must not swallow something that belongs to an area.
        for c in &cats {
            for t in c.operations().filter(|t| t.toolset == "misc") {
                let op = t.operation().unwrap();
                let first = op.path.split('/').nth(1).unwrap_or("");
                assert!(
                    [
                        "version",
                        "settings",
                        "markdown",
                        "markup",
                        "gitignore",
                        "licenses",
                        "nodeinfo",
                        "signing-key.gpg",
                        "signing-key.pub",
                        "signing-key.ssh"
                    ]
                    .contains(&first),
                    "{} {} landed in misc",
                    t.name,
                    op.path
                );
            }
        }
    }

    #[test]
    fn areas_put_routes_where_a_person_would_look() {
        for (path, area) in [
            ("/repos/{owner}/{repo}/pulls/{index}/merge", "pulls"),
            ("/repos/{owner}/{repo}/issues/{index}/comments", "issues"),
            ("/repos/{owner}/{repo}/labels", "issues"),
            ("/repos/{owner}/{repo}/actions/runs", "actions"),
            ("/orgs/{org}/actions/secrets", "actions"),
            ("/repos/{owner}/{repo}/hooks", "webhooks"),
            ("/admin/hooks", "admin"),
            ("/repos/{owner}/{repo}/contents/{filepath}", "contents"),
            ("/repos/{owner}/{repo}/git/trees/{sha}", "contents"),
            ("/repos/{owner}/{repo}/git/commits/{sha}", "commits"),
            ("/repos/{owner}/{repo}/branch_protections", "branches"),
            ("/repos/{owner}/{repo}/releases/{id}/assets", "releases"),
            ("/repos/{owner}/{repo}/wiki/page/{pageName}", "wiki"),
            ("/repos/{owner}/{repo}", "repos"),
            ("/repos/{owner}/{repo}/collaborators", "repos"),
            ("/user/starred/{owner}/{repo}", "repos"),
            ("/user/repos", "repos"),
            ("/orgs/{org}/repos", "repos"),
            ("/orgs/{org}/members", "orgs"),
            ("/teams/{id}", "orgs"),
            ("/user/keys", "users"),
            ("/users/{username}/tokens", "users"),
            ("/version", "misc"),
            // Where a name must be a whole segment, a longer word is not it.
            ("/repos/{owner}/{repo}/reviewers", "pulls"),
            ("/repos/{owner}/{repo}/issuesx", "repos"),
            ("/x/actionsy", "misc"),
            ("/a/starredx", "misc"),
            ("/orgsx", "misc"),
            ("/token", "users"),
            ("/tokenx", "misc"),
            ("/user/orgs", "orgs"),
            ("/users/{username}/orgs", "orgs"),
            ("/notifications", "notifications"),
        ] {
            assert_eq!(area_of(path), area, "{path}");
        }
    }

    #[test]
    fn every_core_operation_exists_and_reads_or_writes_everyday_things() {
        let cats = catalogs();
        for id in CORE_OPERATIONS {
            assert!(cats.iter().any(|c| c.get(id).is_some()), "{id} is in neither spec");
        }
        for c in &cats {
            let core: Vec<_> = c.operations().filter(|t| t.core).collect();
            assert!(
                core.iter().all(|t| !t.operation().unwrap().deprecated),
                "a core operation is deprecated"
            );
            assert!(core.iter().all(|t| t.toolset != "admin"), "a core operation needs a site admin");
        }
    }

    #[test]
    fn selections_parse_and_refuse_unknown_names() {
        assert_eq!(Selection::parse("all").unwrap(), Selection::All);
        assert_eq!(
            Selection::parse(" Issues , pulls ").unwrap(),
            Selection::Only(BTreeSet::from(["issues", "pulls"]))
        );
        assert_eq!(Selection::parse("").unwrap(), Selection::Only(BTreeSet::new()));
        assert_eq!(Selection::parse("none").unwrap(), Selection::Only(BTreeSet::new()));
        assert!(Selection::parse("all,bogus").is_err() && Selection::parse("bogus,all").is_err());
        assert_eq!(Selection::parse("issues, all").unwrap(), Selection::All);
        let e = Selection::parse("issues,bogus").unwrap_err();
        assert!(e.contains("\"bogus\"") && e.contains("core") && e.contains("actions"), "{e}");
        let s = Selection::default();
        assert!(s.includes("issues", true) && !s.includes("issues", false));
    }
}
