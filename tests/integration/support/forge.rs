//! The fake forge a test starts, said in one place: `Forge::gitea()` (or `forgejo()`) is the
//! forge with its one user alice ([`ALICE_TOKEN`](super::ALICE_TOKEN)) and nothing in it; each
//! option adds what a test needs — users, site administrators, repositories, issues,
//! collaborators, the rest of [`Options`] — and `start` runs it. The HTTP server most tests put in front of it
//! (alice's token as its global token) starts with it: `serve_http` in this process,
//! `spawn_http` as a process of its own. What a test then scripts, holds behind a gate or
//! stops recording stays in the test: that is what it is about.

use std::net::SocketAddr;

use fake_forge::{FakeForge, Flavor, Options, Visibility};

use super::http::HttpServer;
use super::{ALICE_TOKEN, ROOT_TOKEN};

/// How to start a fake forge (see the module's documentation).
#[must_use = "a forge is started by `start`"]
pub struct Forge {
    options: Options,
    /// What is made in it once it runs, in this order (a repository's id is its place).
    seeds: Vec<Seed>,
}

enum Seed {
    Repo(String, String),
    PrivateRepo(String, String),
    Visibility(String, Visibility),
    Issues(String, String, usize),
    /// Owner, repository, collaborator, permission.
    Collaborator(String, String, String, String),
    File(String, String, String, Vec<u8>),
}

/// The token of `userNN`, one of [`Forge::numbered_users`].
pub fn numbered_token(n: usize) -> String {
    format!("tok-user-{n:02}")
}

/// The login of the `n`-th of [`Forge::numbered_users`].
pub fn numbered_login(n: usize) -> String {
    format!("user{n:02}")
}

impl Forge {
    /// Gitea, with alice (`ALICE_TOKEN`, password `ALICE_PASSWORD`) and nothing in it.
    pub fn gitea() -> Forge {
        Forge::of(Flavor::Gitea)
    }

    /// [`Forge::gitea`] as Forgejo.
    pub fn forgejo() -> Forge {
        Forge::of(Flavor::Forgejo)
    }

    /// [`Forge::gitea`] as `flavor`.
    pub fn of(flavor: Flavor) -> Forge {
        Forge { options: Options { flavor, ..Options::default() }, seeds: Vec::new() }
    }

    /// A forge for sudo: `root` (a site administrator, [`ROOT_TOKEN`]), `alice` (not one,
    /// [`ALICE_TOKEN`]) and `bob`, who owns the repository `bob/demo`.
    pub fn sudo() -> Forge {
        Forge::gitea()
            .only_users(&[(ROOT_TOKEN, "root"), (ALICE_TOKEN, "alice"), ("tok-bob-b0b0b0b0b0", "bob")])
            .admin("root")
    }

    /// One more user, after those it has.
    pub fn user(mut self, token: &str, login: &str) -> Forge {
        self.options.users.push((token.to_owned(), login.to_owned()));
        self
    }

    /// These users in place of those it has (alice, unless she is among them).
    pub fn only_users(mut self, users: &[(&str, &str)]) -> Forge {
        self.options.users = users.iter().map(|(t, l)| ((*t).to_owned(), (*l).to_owned())).collect();
        self
    }

    /// `n` users in place of alice: `user00`, `user01`, … with the tokens `tok-user-00`, …
    /// ([`numbered_login`], [`numbered_token`]).
    pub fn numbered_users(mut self, n: usize) -> Forge {
        self.options.users = (0..n).map(|i| (numbered_token(i), numbered_login(i))).collect();
        self
    }

    /// `login` is a site administrator.
    pub fn admin(mut self, login: &str) -> Forge {
        self.options.admins.push(login.to_owned());
        self
    }

    /// The repository `owner/name`, made once the forge runs.
    pub fn repo(mut self, owner: &str, name: &str) -> Forge {
        self.seeds.push(Seed::Repo(owner.to_owned(), name.to_owned()));
        self
    }

    /// The private repository `owner/name`, made once the forge runs: anyone but its owner,
    /// its [`collaborator`](Forge::collaborator)s and site administrators is answered 404
    /// under it.
    pub fn private_repo(mut self, owner: &str, name: &str) -> Forge {
        self.seeds.push(Seed::PrivateRepo(owner.to_owned(), name.to_owned()));
        self
    }

    /// Who sees `login`'s profile and public repositories (public unless said).
    pub fn visibility(mut self, login: &str, visibility: Visibility) -> Forge {
        self.seeds.push(Seed::Visibility(login.to_owned(), visibility));
        self
    }

    /// `n` issues in `owner/repo` (the repository made with them if it is not yet).
    pub fn issues(mut self, owner: &str, repo: &str, n: usize) -> Forge {
        self.seeds.push(Seed::Issues(owner.to_owned(), repo.to_owned(), n));
        self
    }

    /// `login` a collaborator of `owner/repo` with `permission` (`read`, `write` or `admin`),
    /// the repository made with it if it is not yet: it sees the repository, private or not.
    pub fn collaborator(mut self, owner: &str, repo: &str, login: &str, permission: &str) -> Forge {
        let s = |v: &str| v.to_owned();
        self.seeds.push(Seed::Collaborator(s(owner), s(repo), s(login), s(permission)));
        self
    }

    /// The file `path` holding `text` on the default branch of `owner/repo` (the repository
    /// made with it if it is not yet).
    pub fn file(mut self, owner: &str, repo: &str, path: &str, text: &str) -> Forge {
        self.seeds.push(Seed::File(
            owner.to_owned(),
            repo.to_owned(),
            path.to_owned(),
            text.as_bytes().to_vec(),
        ));
        self
    }

    /// Anything else of the forge's [`Options`] (its OAuth2 applications, who is signed in,
    /// its version).
    pub fn options(mut self, change: impl FnOnce(&mut Options)) -> Forge {
        change(&mut self.options);
        self
    }

    /// The forge, running on a loopback port of its own.
    pub async fn start(self) -> FakeForge {
        let (options, seed) = self.split();
        let forge = FakeForge::start(options).await;
        seed(&forge);
        forge
    }

    /// The forge, running at `addr` (an address a balancer's configuration names).
    pub async fn start_on(self, addr: SocketAddr) -> std::io::Result<FakeForge> {
        let (options, seed) = self.split();
        let forge = FakeForge::start_on(options, addr).await?;
        seed(&forge);
        Ok(forge)
    }

    /// The forge, and the server on `transport` in this process with alice's token as its
    /// global token and `env`.
    pub async fn serve_http(self, transport: &str, env: &[(&str, &str)]) -> (FakeForge, HttpServer) {
        let forge = self.start().await;
        let server = HttpServer::in_process(&forge.base_url(), transport, &as_alice(env)).await;
        (forge, server)
    }

    /// [`Forge::serve_http`] with the server a process of its own (for a test of its log, its
    /// pid, a signal or its exit).
    pub async fn spawn_http(self, transport: &str, env: &[(&str, &str)]) -> (FakeForge, HttpServer) {
        let forge = self.start().await;
        let server = HttpServer::spawn(&forge.base_url(), transport, &as_alice(env)).await;
        (forge, server)
    }

    fn split(self) -> (Options, impl FnOnce(&FakeForge)) {
        let Forge { options, seeds } = self;
        let seed = move |forge: &FakeForge| {
            for s in &seeds {
                match s {
                    Seed::Repo(owner, name) => forge.seed_repo(owner, name),
                    Seed::PrivateRepo(owner, name) => forge.seed_private_repo(owner, name),
                    Seed::Visibility(login, v) => forge.set_visibility(login, *v),
                    Seed::Issues(owner, repo, n) => forge.seed_issues(owner, repo, *n),
                    Seed::Collaborator(owner, repo, login, permission) => {
                        forge.seed_collaborator(owner, repo, login, permission)
                    }
                    Seed::File(owner, repo, path, content) => forge.seed_file(owner, repo, path, content),
                }
            }
        };
        (options, seed)
    }
}

/// `env` after alice's token as `GITEA_TOKEN`.
fn as_alice<'a>(env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    std::iter::once(("GITEA_TOKEN", ALICE_TOKEN)).chain(env.iter().copied()).collect()
}
