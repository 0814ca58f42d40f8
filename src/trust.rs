//! Author trust's look-ups (`CONTENT_TRUST`): what the forge says of a repository's
//! authors, asked as the caller and cached per identity and repository.
//!
//! Neither forge has GitHub's `author_association`, and the permission route
//! (`…/collaborators/{user}/permission`) answers only administrators and the user asked
//! about. So three reads that any reader of a repository with a token may make:
//! `GET /repos/{owner}/{repo}` (private or not, and its owner's visibility),
//! `GET …/assignees` (everyone who may write: the owner, collaborators with write, members of
//! teams with write — one list, not paged) and `GET …/collaborators` (direct collaborators,
//! at most `COLLABORATOR_PAGES` pages of `PAGE`). The core's `shape::trust` judges the items
//! by what they said.
//!
//! A repository's answer is kept `TTL` for the identity that asked (another identity may see
//! other repositories), at most `CAPACITY` of them; a look-up that failed (the forge refused
//! it, did not answer within `LOOKUP_TIMEOUT`, or answered what the spec does not say) is
//! remembered `FAILED_FOR` and not asked again meanwhile: its items are `unknown`, and
//! withheld. Callers asking about the same repository at once wait for one look-up.
//!
//! The repositories looked up are those of a result the caller has just received: its route's
//! (admitted by the policy) or those its items name (a listing across repositories, already
//! kept to the repository allowlists by the filter stage). The reads are the server's own, as
//! a login look-up is: not audited, not judged by the tool-name rules (an `ENABLED_TOOLS`
//! without `repoGetAssignees` does not make every author unknown).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Map;

use crate::executor::Forge;
use crate::identity::Credential;
use aegis_core::catalog::Catalog;
use aegis_core::shape::trust::Authors;

/// How long what the forge said of a repository's authors is used without asking again.
pub(crate) const TTL: Duration = Duration::from_secs(300);
/// How long a failed look-up is not tried again (its items stay unknown meanwhile).
pub(crate) const FAILED_FOR: Duration = Duration::from_secs(60);
/// Most repositories remembered, over every identity.
pub(crate) const CAPACITY: u64 = 1024;
/// How long one repository's look-up may take, whatever `GITEA_TIMEOUT` allows: it delays a
/// result that is already here.
pub(crate) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Collaborators read: at most this many pages of `PAGE`. Past them a collaborator is judged
/// by the assignees alone (`member` if they may write, else `none`): never more than they are.
pub(crate) const COLLABORATOR_PAGES: usize = 2;
pub(crate) const PAGE: usize = 50;

/// Who asked, and which repository (`owner/name` in lower case).
type Key = (String, String);

/// What the forge said of repositories' authors, per identity.
#[derive(Debug)]
pub struct AuthorCache {
    known: moka::future::Cache<Key, Arc<Authors>>,
    failed: moka::sync::Cache<Key, ()>,
}

impl Default for AuthorCache {
    fn default() -> AuthorCache {
        AuthorCache {
            known: moka::future::Cache::builder().max_capacity(CAPACITY).time_to_live(TTL).build(),
            failed: moka::sync::Cache::builder().max_capacity(CAPACITY).time_to_live(FAILED_FOR).build(),
        }
    }
}

impl AuthorCache {
    /// What the forge says to `who` (the effective login; empty for an identity without one)
    /// through `credential` of each of `repos`' authors: those it could say, by key.
    pub(crate) async fn look_up(
        &self,
        forge: &Forge,
        catalog: &Catalog,
        credential: &Credential,
        who: &str,
        repos: Vec<String>,
    ) -> HashMap<String, Arc<Authors>> {
        let each = repos.into_iter().map(|repo| async move {
            let found = self.one(forge, catalog, credential, who, &repo).await;
            found.map(|a| (repo, a))
        });
        futures::future::join_all(each).await.into_iter().flatten().collect()
    }

    async fn one(
        &self,
        forge: &Forge,
        catalog: &Catalog,
        credential: &Credential,
        who: &str,
        repo: &str,
    ) -> Option<Arc<Authors>> {
        let key = (who.to_owned(), repo.to_owned());
        if self.failed.contains_key(&key) {
            return None;
        }
        let asked = async {
            match tokio::time::timeout(LOOKUP_TIMEOUT, read(forge, catalog, credential, repo)).await {
                Ok(read) => read.map(Arc::new),
                Err(_) => Err(format!("no answer within {} s", LOOKUP_TIMEOUT.as_secs())),
            }
        };
        match self.known.try_get_with(key.clone(), asked).await {
            Ok(authors) => Some(authors),
            Err(why) => {
                tracing::debug!(repository = repo, why = %why, "who may write could not be looked up");
                self.failed.insert(key, ());
                None
            }
        }
    }
}

/// The three reads of `repo` (`owner/name`), and what they say.
async fn read(
    forge: &Forge,
    catalog: &Catalog,
    credential: &Credential,
    repo: &str,
) -> Result<Authors, String> {
    let (owner, name) = repo.split_once('/').ok_or("not owner/name")?;
    let get = |op: &'static str, page: Option<usize>| {
        let mut args = Map::new();
        args.insert("owner".into(), owner.into());
        args.insert("repo".into(), name.into());
        if let Some(page) = page {
            args.insert("page".into(), page.into());
            args.insert("limit".into(), PAGE.into());
        }
        crate::executor::own_read(forge, catalog, credential, op, args)
    };
    let (about, assignees, first) = tokio::join!(
        get("repoGet", None),
        get("repoGetAssignees", None),
        get("repoListCollaborators", Some(1))
    );
    let (about, assignees) = (about?, assignees?);
    let mut pages = vec![first?];
    while pages.len() < COLLABORATOR_PAGES && items(pages.last().expect("one page")) >= PAGE {
        pages.push(get("repoListCollaborators", Some(pages.len() + 1)).await?);
    }
    let pages: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
    Authors::read(&about, &assignees, &pages).ok_or_else(|| "an answer is not what the spec says".to_owned())
}

/// How many items a page of a listing holds (0 when it is not one).
fn items(page: &[u8]) -> usize {
    serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(page).map_or(0, |v| v.len())
}
