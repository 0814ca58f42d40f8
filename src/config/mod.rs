//! Flags and environment → resolved `Settings`. The only place that reads the environment.
//!
//! Each setting is defined once, in the table of `args.rs` (clap's derive attributes: flag,
//! environment variable, default, meaning, group, secret or not). Everything else is made
//! from that table or checked against it: `--help`; `docs/SETTINGS.md` and `doctor`'s
//! listing of what was given (`reference.rs`, which reads the table back through clap's
//! introspection); the older environment names (`ALSO_READ`), which `resolve.rs` reads and
//! the reference names.
//!
//! `Cli` is the raw form clap fills in; `Settings` (`settings.rs`) is what the rest of the
//! program uses, built once by `Settings::resolve` (`resolve.rs`) after every check. Secrets
//! are `SecretString` from the moment they are read: `Debug` prints `[REDACTED]`, clap never
//! shows their environment values in `--help` (`hide_env_values`), and `doctor` says only
//! whether they are set.

mod args;
mod profiles;
mod reference;
mod resolve;
mod settings;

pub(crate) use args::{ALSO_READ, StateArgs};
pub use args::{AuditCommand, Cli, Command, CommonArgs, FlavorChoice, StateFail, TransportChoice, command};
pub use profiles::Profiles;
pub(crate) use profiles::{Profile, ProfileCredential};
pub use reference::Given;
#[cfg(test)]
pub(crate) use reference::{REFERENCE, settings};
pub(crate) use resolve::NEVER_REDIRECT_SCHEMES;
pub use resolve::read_audit_key;
pub use settings::Settings;
pub(crate) use settings::{MetricsListen, OAuthSettings, SignInApp, StateSettings};

/// A setting that cannot be used, with the words to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Where the alternative environment names are read from; a function so tests can inject.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The settings of a command line `args` (after the binary's name), for the crate's own tests:
/// parsed with no environment names, so that nothing of a developer's shell (a token, an
/// allowed host) leaks into a test's server.
#[cfg(test)]
pub(crate) fn test_settings(args: &[&str]) -> Settings {
    use clap::FromArgMatches;
    let hermetic = command().mut_args(|a| a.env(None::<&'static str>));
    let line = std::iter::once("aegis-gitea-mcp").chain(args.iter().copied());
    let matches = hermetic.try_get_matches_from(line).expect("flags the server takes");
    let cli = Cli::from_arg_matches(&matches).expect("flags the server takes");
    Settings::resolve(cli.common, &|_| None).expect("settings")
}
