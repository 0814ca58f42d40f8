//! Finding an operation by words ("merge a pull request") among all of a spec's operations.
//!
//! Each operation is indexed once, with the catalog, by the words of its operationId
//! (`repoMergePullRequest` → repo, merge, pull, request), its summary, the literal
//! segments of its path, its toolset and tags. Words are lower-cased and crudely stemmed
//! (merge, merged, merges → `merg`) on both sides. A query word counts by its rarity
//! (inverse document frequency) and by the best field it matches; operations that match
//! every word and have few unmatched words rank first, so `repoMergePullRequest` beats
//! `repoCancelScheduledAutoMerge` for "merge a pull request".

use std::collections::{HashMap, HashSet};

use super::tool::ToolDef;

/// Words that carry no meaning in a query.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "for", "to", "in", "on", "at", "by", "with", "from", "and", "or", "me", "i",
    "all", "some", "any", "its", "it", "this", "that", "is", "are", "be", "how", "do", "does", "can", "what",
    "which", "into", "as", "s", "am",
];

/// Query words that stand for several words of the API. The tables are written in plain
/// words; both sides are stemmed when they are used.
const REPLACEMENTS: &[(&str, &[&str])] = &[
    ("pr", &["pull", "request"]),
    ("mr", &["pull", "request"]),
    ("who", &["current", "user"]),
    ("whoami", &["current", "user"]),
    ("approve", &["create", "review"]),
];

/// Query words that only hint: they add to an operation that matches them, but an operation
/// that does not is not counted as missing a word ("list my repos" still finds a list of
/// repositories, and prefers the current user's).
const HINTS: &[(&str, &[&str])] = &[("my", &["current"]), ("mine", &["current"])];

/// Query words that also mean other words of the API.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("close", &["edit"]),
    ("reopen", &["edit"]),
    ("assign", &["assignees"]),
    ("protect", &["protection"]),
    ("workflow", &["action"]),
    ("action", &["workflow"]),
    ("ci", &["action", "workflow"]),
    ("pipeline", &["action", "workflow"]),
    ("file", &["content"]),
    ("content", &["file"]),
    ("remove", &["delete"]),
    ("delete", &["remove"]),
    ("show", &["get"]),
    ("fetch", &["get"]),
    ("read", &["get"]),
    ("add", &["create"]),
    ("new", &["create"]),
    ("create", &["add"]),
    ("edit", &["update"]),
    ("update", &["edit"]),
    ("change", &["edit", "update"]),
    ("repo", &["repository"]),
    ("repository", &["repo"]),
    ("org", &["organization"]),
    ("organization", &["org"]),
    ("find", &["search"]),
    ("search", &["list"]),
];

/// The row of `table` whose (stemmed) word is `w`, with its words stemmed.
fn lookup(table: &[(&str, &[&str])], w: &str) -> Option<Vec<String>> {
    table.iter().find(|(k, _)| stemmed(k) == w).map(|(_, more)| more.iter().map(|m| stemmed(m)).collect())
}

/// One word as the index holds it.
fn stemmed(word: &str) -> String {
    stem(&word.to_ascii_lowercase())
}

/// How much a match in each field counts.
const ID_WEIGHT: f64 = 1.0;
const SUMMARY_WEIGHT: f64 = 1.0;
const PATH_WEIGHT: f64 = 0.6;
const AREA_WEIGHT: f64 = 0.4;

#[derive(Debug)]
struct Doc {
    id: Vec<String>,
    summary: Vec<String>,
    path: HashSet<String>,
    area: HashSet<String>,
    deprecated: bool,
    admin: bool,
}

/// The search index of one catalog: one document per spec operation, in catalog order.
#[derive(Debug)]
pub(crate) struct Index {
    docs: Vec<Doc>,
    /// In how many documents each stemmed word occurs (any field).
    frequency: HashMap<String, usize>,
}

/// One hit: the position of the operation in the catalog and its score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit {
    pub(crate) position: usize,
    pub(crate) score: f64,
}

impl Index {
    /// Index the operations, in the order the catalog holds them.
    pub(crate) fn build<'a>(tools: impl Iterator<Item = &'a ToolDef>) -> Index {
        let mut docs = Vec::new();
        let mut frequency: HashMap<String, usize> = HashMap::new();
        for t in tools {
            let Some(op) = t.operation() else { continue };
            let literal_path: String = op
                .template
                .segments
                .iter()
                .flatten()
                .filter_map(|p| match p {
                    super::Piece::Lit(l) => Some(l.as_str()),
                    super::Piece::Param(_) => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            let doc = Doc {
                id: words(&op.id),
                summary: words(&t.title),
                path: words(&literal_path).into_iter().collect(),
                area: words(&format!("{} {}", t.toolset, op.tags.join(" "))).into_iter().collect(),
                deprecated: op.deprecated,
                admin: t.toolset == "admin",
            };
            let all: HashSet<&String> =
                doc.id.iter().chain(&doc.summary).chain(&doc.path).chain(&doc.area).collect();
            for w in all {
                *frequency.entry(w.clone()).or_default() += 1;
            }
            docs.push(doc);
        }
        Index { docs, frequency }
    }

    /// The best matches for `query` among the operations `allowed` admits (by position),
    /// best first, at most `limit`.
    pub(crate) fn search(&self, query: &str, limit: usize, allowed: impl Fn(usize) -> bool) -> Vec<Hit> {
        let terms = query_terms(query);
        let needed = terms.iter().filter(|t| !t.hint).count();
        if needed == 0 {
            return Vec::new();
        }
        let n = self.docs.len().max(1) as f64;
        let idf = |w: &str| {
            let df = self.frequency.get(w).copied().unwrap_or(0) as f64;
            (1.0 + n / (df + 1.0)).ln()
        };
        let mut hits: Vec<Hit> = self
            .docs
            .iter()
            .enumerate()
            .filter(|(i, _)| allowed(*i))
            .filter_map(|(i, d)| {
                let mut score = 0.0;
                let mut matched = 0usize;
                let mut used: HashSet<&str> = HashSet::new();
                for term in &terms {
                    let best = term
                        .alternatives
                        .iter()
                        .enumerate()
                        .filter_map(|(k, w)| {
                            let field = d.weight_of(w)?;
                            // The word as typed counts fully; a synonym a little less.
                            let synonym = if k == 0 { 1.0 } else { 0.8 };
                            Some((field * synonym * idf(w), w.as_str()))
                        })
                        .max_by(|a, b| a.0.total_cmp(&b.0));
                    if let Some((s, w)) = best {
                        score += s;
                        matched += usize::from(!term.hint);
                        used.insert(w);
                    }
                }
                if matched == 0 {
                    return None;
                }
                // Prefer documents that match every word, and few words beyond the query.
                let coverage = matched as f64 / needed as f64;
                let extra_id = d.id.iter().filter(|w| !used.contains(w.as_str())).count() as f64;
                let extra_summary = d.summary.iter().filter(|w| !used.contains(w.as_str())).count() as f64;
                let mut s = score * coverage * coverage / (1.0 + 0.12 * extra_id + 0.04 * extra_summary);
                if d.deprecated {
                    s *= 0.6;
                }
                if d.admin {
                    s *= 0.85;
                }
                Some(Hit { position: i, score: s })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.position.cmp(&b.position)));
        hits.truncate(limit);
        hits
    }
}

impl Doc {
    /// How well `w` matches: the best field, plus a little for each other field it is in
    /// (a word in both the name and the summary is what the operation is about).
    fn weight_of(&self, w: &str) -> Option<f64> {
        let has = |v: &Vec<String>| v.iter().any(|x| x == w);
        let fields: Vec<f64> = [
            (has(&self.id), ID_WEIGHT),
            (has(&self.summary), SUMMARY_WEIGHT),
            (self.path.contains(w), PATH_WEIGHT),
            (self.area.contains(w), AREA_WEIGHT),
        ]
        .into_iter()
        .filter(|(hit, _)| *hit)
        .map(|(_, weight)| weight)
        .collect();
        let best = fields.iter().copied().max_by(f64::total_cmp)?;
        Some(best + 0.25 * (fields.iter().sum::<f64>() - best))
    }
}

/// One word of a query: the word and its synonyms (the word itself first); a hint does not
/// count as missing when an operation lacks it.
#[derive(Debug)]
struct Term {
    alternatives: Vec<String>,
    hint: bool,
}

/// The query's words, stop words dropped, replacements and hints applied.
fn query_terms(query: &str) -> Vec<Term> {
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    for w in words(query) {
        if let Some(hinted) = lookup(HINTS, &w) {
            terms.push(Term { alternatives: hinted, hint: true });
            continue;
        }
        for w in lookup(REPLACEMENTS, &w).unwrap_or_else(|| vec![w]) {
            if !seen.insert(w.clone()) {
                continue;
            }
            let mut alternatives = vec![w.clone()];
            alternatives.extend(lookup(SYNONYMS, &w).into_iter().flatten().filter(|m| *m != w));
            terms.push(Term { alternatives, hint: false });
        }
    }
    terms
}

/// Split camelCase, snake_case, paths and prose into stemmed lower-case words.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev: Option<char> = None;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.is_empty() {
            let w = current.to_ascii_lowercase();
            if !STOP_WORDS.contains(&w.as_str()) {
                out.push(stem(&w));
            }
            current.clear();
        }
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            // A capital after a lower-case letter or digit starts a word: repoGetPR → repo get pr.
            if c.is_ascii_uppercase() && prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
                flush(&mut current, &mut out);
            }
            current.push(c);
        } else {
            flush(&mut current, &mut out);
        }
        prev = Some(c);
    }
    flush(&mut current, &mut out);
    out
}

/// A crude English stemmer: enough that list/lists/listing and merge/merged/merges meet.
fn stem(w: &str) -> String {
    let mut s = w.to_owned();
    if s.len() > 4 && s.ends_with("ies") {
        s.truncate(s.len() - 3);
        s.push('y');
    } else if s.len() > 4 && ["ches", "shes", "sses", "xes"].iter().any(|e| s.ends_with(e)) {
        s.truncate(s.len() - 2);
    } else if s.len() > 3 && s.ends_with('s') && !s.ends_with("ss") {
        s.pop();
    }
    if s.len() > 5 && s.ends_with("ing") {
        s.truncate(s.len() - 3);
    } else if s.len() > 4 && s.ends_with("ed") {
        s.truncate(s.len() - 2);
    }
    if s.len() > 3 && s.ends_with('e') {
        s.pop();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_ids_and_prose_and_stem_alike() {
        assert_eq!(words("repoMergePullRequest"), ["repo", "merg", "pull", "request"]);
        assert_eq!(
            words("Check if a pull request has been merged"),
            ["check", "if", "pull", "request", "has", "been", "merg"]
        );
        assert_eq!(words("/repos/{owner}/branch_protections"), ["repo", "owner", "branch", "protection"]);
        assert_eq!(words("releases"), words("release"));
        assert_eq!(words("branches"), words("branch"));
        assert_eq!(words("listing lists"), ["list", "list"]);
        assert_eq!(words("ListActionRuns"), ["list", "action", "run"]);
    }

    /// A word a table row stands for must be one the API uses, or it can never match.
    #[test]
    fn table_words_occur_in_the_api() {
        let c = crate::catalog::Catalog::build(
            crate::catalog::Flavor::Gitea.embedded_spec(),
            crate::catalog::Flavor::Gitea,
            None,
        )
        .unwrap();
        let index = Index::build(c.operations().map(|t| t.as_ref()));
        for (k, more) in SYNONYMS.iter().chain(REPLACEMENTS).chain(HINTS) {
            assert!(!stemmed(k).is_empty(), "{k}");
            for m in *more {
                assert!(index.frequency.contains_key(&stemmed(m)), "{k} → {m}: no operation uses {m:?}");
            }
        }
    }
}

#[cfg(test)]
mod ranking {
    use crate::catalog::{Catalog, Flavor};

    /// What people ask, and an operation that must be among the first three answers.
    const EXPECTED: &[(&str, &str, &str)] = &[
        // (query, Gitea operation, Forgejo operation)
        ("merge a pull request", "repoMergePullRequest", "repoMergePullRequest"),
        ("create a release", "repoCreateRelease", "repoCreateRelease"),
        ("list workflow runs", "getWorkflowRuns", "ListActionRuns"),
        ("add a label to an issue", "issueAddLabel", "issueAddLabel"),
        ("delete a branch", "repoDeleteBranch", "repoDeleteBranch"),
        ("read a file", "repoGetRawFile", "repoGetRawFile"),
        ("comment on an issue", "issueCreateComment", "issueCreateComment"),
        ("who am i", "userGetCurrent", "userGetCurrent"),
        ("list my notifications", "notifyGetList", "notifyGetList"),
        ("create a webhook", "repoCreateHook", "repoCreateHook"),
        ("add a collaborator", "repoAddCollaborator", "repoAddCollaborator"),
        ("request a review on a PR", "repoCreatePullReviewRequests", "repoCreatePullReviewRequests"),
        ("close an issue", "issueEditIssue", "issueEditIssue"),
        ("approve a pull request", "repoCreatePullReview", "repoCreatePullReview"),
        ("protect a branch", "repoCreateBranchProtection", "repoCreateBranchProtection"),
        ("list my repos", "userCurrentListRepos", "userCurrentListRepos"),
        ("list commits", "repoGetAllCommits", "repoGetAllCommits"),
        ("rerun a failed job", "rerunFailedWorkflowRun", "ListActionRunJobs"),
        ("star a repository", "userCurrentPutStar", "userCurrentPutStar"),
        ("repoGetPullRequestFiles", "repoGetPullRequestFiles", "repoGetPullRequestFiles"),
        ("create a wiki page", "repoCreateWikiPage", "repoCreateWikiPage"),
        ("list organization members", "orgListMembers", "orgListMembers"),
        ("edit a milestone", "issueEditMilestone", "issueEditMilestone"),
        ("set a repository secret for actions", "updateRepoSecret", "updateRepoSecret"),
    ];

    #[test]
    fn everyday_questions_find_their_operation_in_the_first_three() {
        for (flavor, column) in [(Flavor::Gitea, 1), (Flavor::Forgejo, 2)] {
            let c = Catalog::build(flavor.embedded_spec(), flavor, None).unwrap();
            let mut misses = Vec::new();
            for row in EXPECTED {
                let want = if column == 1 { row.1 } else { row.2 };
                assert!(c.get(want).is_some(), "{want} is not a {flavor:?} operation");
                let top: Vec<&str> =
                    c.search(row.0, 3, |_| true).into_iter().map(|t| t.name.as_str()).collect();
                if !top.contains(&want) {
                    misses.push(format!("{flavor:?} {:?}: wanted {want}, got {top:?}", row.0));
                }
            }
            assert!(misses.is_empty(), "{}", misses.join("\n"));
        }
    }
}
