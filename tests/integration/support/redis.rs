//! A real Redis for the shared-store tests: Debian's `redis-server` (installed by
//! `scripts/setup-test-env`), in the foreground on a port of its own (never 6379, where a
//! system Redis may listen), with a password, no persistence and `noeviction`, as
//! docs/DEPLOYMENT.md runs it. The faults are real ones: killed, restarted empty, paused
//! (`CLIENT PAUSE`: slow), stopped (`SIGSTOP`: hung, or out of reach).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::http::free_port;

const PASSWORD: &str = "store-pass-5e11d0ff";
/// The key of the store's hashes (`MCP_STATE_KEY_FILE`), not the sign-in's.
const STATE_KEY: &str = "7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e7a5e";

fn binary(name: &str) -> PathBuf {
    [format!("/usr/bin/{name}"), format!("/usr/local/bin/{name}")]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("{name} is not installed: run scripts/setup-test-env (it installs Debian's redis-server)")
        })
}

/// One Redis server; killed when dropped.
pub struct Redis {
    child: Option<tokio::process::Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    tls: bool,
}

impl Redis {
    pub async fn start() -> Redis {
        Redis::launch(false).await
    }

    /// One that speaks only TLS, with a certificate of a CA made for it (`ca_file`).
    pub async fn start_tls() -> Redis {
        Redis::launch(true).await
    }

    async fn launch(tls: bool) -> Redis {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("password"), format!("{PASSWORD}\n")).unwrap();
        std::fs::write(dir.path().join("state.key"), format!("{STATE_KEY}\n")).unwrap();
        if tls {
            make_certificates(dir.path());
        }
        let mut r = Redis { child: None, port: free_port(), dir, tls };
        r.run().await;
        r
    }

    async fn run(&mut self) {
        assert!(self.child.is_none());
        let port = self.port.to_string();
        let mut cmd = tokio::process::Command::new(binary("redis-server"));
        cmd.args(["--bind", "127.0.0.1", "--protected-mode", "yes", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--requirepass", PASSWORD, "--loglevel", "warning"])
            .args(["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"])
            .arg("--dir")
            .arg(self.dir.path());
        if self.tls {
            let d = self.dir.path();
            cmd.args(["--port", "0", "--tls-port", &port, "--tls-auth-clients", "no"])
                .arg("--tls-cert-file")
                .arg(d.join("server.pem"))
                .arg("--tls-key-file")
                .arg(d.join("server.key"));
        } else {
            cmd.args(["--port", &port]);
        }
        let log = std::fs::File::create(self.dir.path().join("log")).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start redis-server");
        super::wait_for("redis-server answers", super::WAIT_LIMIT, async || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("redis-server exited ({status}): {}", self.log());
            }
            self.cli(&["PING"]).await.trim() == "PONG"
        })
        .await;
        self.child = Some(child);
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `MCP_STATE_URL` and the files the server reads.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let path = |name: &str| self.dir.path().join(name).to_str().unwrap().to_owned();
        let mut env = vec![
            ("MCP_STATE_URL", format!("{scheme}://127.0.0.1:{}/", self.port)),
            ("MCP_STATE_PASSWORD_FILE", path("password")),
            ("MCP_STATE_KEY_FILE", path("state.key")),
        ];
        if self.tls {
            env.push(("MCP_STATE_CA_FILE", path("ca.pem")));
        }
        env
    }

    /// The password the server is given.
    pub fn password() -> &'static str {
        PASSWORD
    }

    /// The store's password and key, which no log may show.
    pub fn secrets() -> [&'static str; 2] {
        [PASSWORD, STATE_KEY]
    }

    /// One command through `redis-cli`; its output (empty when it could not connect).
    pub async fn cli(&self, args: &[&str]) -> String {
        self.cli_as(PASSWORD, args).await
    }

    /// `cli` with another password (after `CONFIG SET requirepass`).
    pub async fn cli_as(&self, password: &str, args: &[&str]) -> String {
        self.run_cli(password, args).await.map(|(_, out)| out).unwrap_or_default()
    }

    /// One command through `redis-cli`: whether it succeeded, and its output; `None` when it
    /// could not be run.
    async fn run_cli(&self, password: &str, args: &[&str]) -> Option<(bool, String)> {
        let mut cmd = tokio::process::Command::new(binary("redis-cli"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "--no-auth-warning", "-a", password]);
        if self.tls {
            cmd.arg("--tls").arg("--cacert").arg(self.dir.path().join("ca.pem"));
        }
        let run = cmd.args(args).stdin(Stdio::null()).kill_on_drop(true).output();
        let out = tokio::time::timeout(super::WAIT_LIMIT, run)
            .await
            .unwrap_or_else(|_| panic!("redis-cli {args:?} did not end within {:?}", super::WAIT_LIMIT))
            .ok()?;
        Some((out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// Every key in the store (which must answer: an empty list is the store's own).
    pub async fn keys(&self) -> Vec<String> {
        match self.run_cli(PASSWORD, &["--scan"]).await {
            Some((true, out)) => out.lines().map(str::to_owned).collect(),
            other => panic!("the store did not list its keys: {other:?}: {}", self.log()),
        }
    }

    /// Killed (SIGKILL), and waited for.
    pub async fn kill(&mut self) {
        let mut child = self.child.take().expect("a running store");
        child.kill().await.unwrap();
        let _ = child.wait().await;
    }

    /// Started again on its port, empty (it keeps nothing on disk).
    pub async fn restart(&mut self) {
        self.run().await;
    }

    fn signal(&self, signal: &str) {
        super::signal(self.child.as_ref().and_then(|c| c.id()).expect("a running store"), signal);
    }

    /// Hung: it takes connections (the kernel answers) but answers nothing, as a store out of
    /// reach behind a partition looks to a client whose connection was open.
    pub fn stop(&self) {
        self.signal("STOP");
    }

    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// Slow: it answers no client for `ms` milliseconds.
    pub async fn pause(&self, ms: u64) {
        assert_eq!(self.cli(&["CLIENT", "PAUSE", &ms.to_string(), "ALL"]).await.trim(), "OK");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // A stopped process is killed as well, but resume it so that nothing lingers.
        if let Some(pid) = self.child.as_ref().and_then(|c| c.id()) {
            let _ = std::process::Command::new("kill").args(["-s", "CONT", &pid.to_string()]).status();
        }
    }
}

/// A CA and a certificate it signed for 127.0.0.1, by `openssl` (a self-signed CA certificate
/// is not accepted as the server's own).
fn make_certificates(dir: &Path) {
    let openssl = |args: &[&str]| {
        let out =
            std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let steps: &[&[&str]] = &[
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=aegis test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    ];
    for step in steps {
        openssl(step);
    }
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "server.pem",
    ]);
}
