//! The table of settings read back through clap's introspection (`Command::get_arguments`),
//! so that nothing about a setting is written twice: the settings reference
//! (`docs/SETTINGS.md`, made by `markdown` and kept current by a test that says how to write
//! it again) and `doctor`'s listing of the settings given (`Given`, which never holds a
//! secret's value). The tests here also hold the table to its own rules: a secret hides its
//! value, and `--help` names every older environment name.

use std::fmt;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};

use super::EnvLookup;
use super::args::Cli;

/// One setting as the table describes it.
#[derive(Debug)]
#[cfg_attr(not(test), expect(dead_code, reason = "the reference, which only a test writes, reads it all"))]
pub(crate) struct Setting {
    /// clap's id, to find its value in the matches.
    pub(crate) id: String,
    /// Its environment variable: the setting's name wherever it is named.
    pub(crate) env: String,
    /// `--flag`.
    pub(crate) flag: String,
    /// As `--help` shows it; `None`: unset.
    pub(crate) default: Option<String>,
    /// The doc comment, whole, on one line.
    pub(crate) meaning: String,
    /// The values it takes, if a fixed set: each with what it means, if said.
    pub(crate) values: Vec<(String, Option<String>)>,
    pub(crate) group: String,
    /// Held as a `SecretString`: never shown, only said to be set.
    pub(crate) secret: bool,
}

/// Every setting of the table, in the table's order: the arguments that have an environment
/// variable (the commands' own arguments, `--help` and `--version` have none).
pub(crate) fn settings() -> Vec<Setting> {
    let mut command = Cli::command();
    // Built, so that what clap adds on its own (a flag's "false" default) is there too.
    command.build();
    command
        .get_arguments()
        .filter_map(|arg| {
            let env = arg.get_env()?.to_string_lossy().into_owned();
            let defaults: Vec<String> =
                arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            let meaning = match arg.get_long_help() {
                Some(long) => long.to_string(),
                // The one paragraph, without the period clap takes off `-h`'s line.
                None => arg.get_help().map(|h| format!("{h}.")).unwrap_or_default(),
            };
            Some(Setting {
                id: arg.get_id().to_string(),
                flag: format!("--{}", arg.get_long().unwrap_or_default()),
                default: (!defaults.is_empty()).then(|| defaults.join(",")),
                meaning: meaning.split_whitespace().collect::<Vec<_>>().join(" "),
                values: arg
                    .get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| (v.get_name().to_owned(), v.get_help().map(|h| h.to_string())))
                    .collect(),
                group: arg.get_help_heading().unwrap_or_default().to_owned(),
                secret: arg.get_value_parser().type_id() == std::any::TypeId::of::<secrecy::SecretString>(),
                env,
            })
        })
        .collect()
}

/// Where `docs/SETTINGS.md` is, and the command that writes it again from the table.
#[cfg(test)]
pub(crate) const REFERENCE: &str = "docs/SETTINGS.md";
#[cfg(test)]
pub(crate) const WRITE_IT: &str = "AEGIS_WRITE_SETTINGS=1 cargo test -p aegis-gitea-mcp --lib config::";

/// The settings reference: one table per group, one row per setting.
#[cfg(test)]
pub(crate) fn markdown() -> String {
    let settings = settings();
    let mut out = format!(
        "# Settings\n\n\
         <!-- Made from the table of settings (src/config/args.rs); do not edit: change the table and run\n     {WRITE_IT} -->\n\n\
         Every setting is a flag and an environment variable; a flag beats its variable. `--help` says\n\
         the same, shorter (`-h`, one line each). Secrets are never printed, not even by `--help`;\n\
         `doctor` lists the settings given, a secret only as set, and every secret is redacted from\n\
         results and log lines. A setting that cannot be used stops the server at start, naming it.\n"
    );
    let mut groups: Vec<&str> = Vec::new();
    for s in &settings {
        if !groups.contains(&s.group.as_str()) {
            groups.push(&s.group);
        }
    }
    for group in groups {
        out.push_str(&format!(
            "\n## {group}\n\n| flag | environment | default | meaning |\n|---|---|---|---|\n"
        ));
        for s in settings.iter().filter(|s| s.group == group) {
            out.push_str(&row(s));
        }
    }
    out
}

#[cfg(test)]
fn row(s: &Setting) -> String {
    // Older names are in the meaning (a test holds every help text to naming them).
    let mut env = format!("`{}`", s.env);
    if s.secret {
        env.push_str(", secret");
    }
    let default = s.default.as_deref().map_or("unset".to_owned(), |d| format!("`{d}`"));
    let mut meaning = s.meaning.clone();
    if !s.values.is_empty() {
        let values: Vec<String> = s
            .values
            .iter()
            .map(|(name, help)| match help {
                Some(help) => format!("`{name}`: {help}"),
                None => format!("`{name}`"),
            })
            .collect();
        meaning.push_str(&format!(" Values: {}.", values.join("; ")));
    }
    let cell = |text: &str| text.replace('|', "\\|");
    format!("| `{}` | {} | {} | {} |\n", s.flag, cell(&env), cell(&default), cell(&meaning))
}

/// One setting given by a flag, its variable or an older name, as `doctor` lists it: its
/// value, or for a secret only that it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The setting's environment variable.
    pub(crate) name: String,
    /// `--flag`, `environment`, or the older name it was read from.
    pub(crate) from: String,
    /// `None` for a secret.
    pub(crate) value: Option<String>,
}

impl Given {
    /// The settings given on this command line or in this environment (`env`, for the older
    /// names), in the table's order; those left at their defaults are not listed.
    pub fn list(matches: &ArgMatches, env: EnvLookup<'_>) -> Vec<Given> {
        settings()
            .into_iter()
            .filter_map(|s| {
                let (from, value) = match matches.value_source(&s.id) {
                    Some(ValueSource::CommandLine) => (s.flag.clone(), raw(matches, &s.id)),
                    Some(ValueSource::EnvVariable) => ("environment".to_owned(), raw(matches, &s.id)),
                    _ => {
                        let (old, value) = super::resolve::also_read(&s.env, env)?;
                        (old.to_owned(), value)
                    }
                };
                Some(Given { name: s.env, from, value: (!s.secret).then(|| without_userinfo(value)) })
            })
            .collect()
    }
}

/// `value`, or if it is a URL with a user name or password, the URL with `***` in their
/// place: a URL setting may carry credentials (the settings refuse most such URLs, but
/// `doctor` lists what was given whether the settings accept it or not).
fn without_userinfo(value: String) -> String {
    match url::Url::parse(&value) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            let _ = url.set_password(None);
            let _ = url.set_username("***");
            url.to_string()
        }
        _ => value,
    }
}

/// A setting's values as given, comma-separated.
fn raw(matches: &ArgMatches, id: &str) -> String {
    let values = matches.get_raw(id).into_iter().flatten();
    values.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(",")
}

impl fmt::Display for Given {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {value} ({})", self.name, self.from),
            None => write!(f, "{} is set ({})", self.name, self.from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::args::ALSO_READ;
    use super::*;
    use secrecy::SecretString;

    fn repo_file(path: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
    }

    /// `docs/SETTINGS.md` is what the table says; with AEGIS_WRITE_SETTINGS=1 this test writes
    /// it instead.
    #[test]
    fn the_settings_reference_is_made_from_the_table() {
        let made = markdown();
        // The test's own switch, not a setting of the server.
        #[allow(clippy::disallowed_methods)]
        let write = std::env::var_os("AEGIS_WRITE_SETTINGS").is_some_and(|v| v == "1");
        if write {
            std::fs::write(repo_file(REFERENCE), &made).expect("write the settings reference");
        }
        let file = std::fs::read_to_string(repo_file(REFERENCE)).unwrap_or_default();
        assert!(
            file == made,
            "{REFERENCE} is not what the table of settings (src/config/args.rs) says: run `{WRITE_IT}` and commit it"
        );
    }

    #[test]
    fn every_setting_has_a_flag_a_group_and_a_meaning() {
        let settings = settings();
        assert!(settings.len() > 70, "{}", settings.len());
        for s in &settings {
            assert!(s.flag.len() > 2 && !s.group.is_empty() && s.meaning.len() > 20, "{s:?}");
        }
        let mut names: Vec<&str> = settings.iter().map(|s| s.env.as_str()).collect();
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "an environment variable names two settings");
    }

    /// A secret is a `SecretString` whose value clap never shows, and a setting whose name
    /// ends in TOKEN, PASSWORD, SECRET(S) or KEY holds a secret (`…_FILE`, a file of one, is
    /// a path; `SECRET_DETECTION_MODE` and `MCP_NEW_TOKENS_PER_MINUTE` say what they hold last).
    #[test]
    fn a_secret_is_marked_as_one_and_its_value_is_never_shown() {
        let mut command = Cli::command();
        command.build();
        let secret_type = std::any::TypeId::of::<SecretString>();
        for arg in command.get_arguments() {
            let Some(env) = arg.get_env().map(|e| e.to_string_lossy().into_owned()) else { continue };
            let named = env
                .rsplit('_')
                .next()
                .is_some_and(|w| ["TOKEN", "PASSWORD", "SECRET", "SECRETS", "KEY"].contains(&w));
            let typed = arg.get_value_parser().type_id() == secret_type;
            assert!(
                named == typed && typed == arg.is_hide_env_values_set(),
                "{env}: a setting that holds a secret is an Option<SecretString> with `hide_env_values = true` (named {named}, typed {typed}, hidden {})",
                arg.is_hide_env_values_set()
            );
        }
    }

    #[test]
    fn help_names_every_older_environment_name() {
        for (own, older) in ALSO_READ {
            let s = settings().into_iter().find(|s| s.env == *own).expect("ALSO_READ names a setting");
            for old in *older {
                assert!(s.meaning.contains(old), "{own}'s help should say it also reads {old}");
            }
        }
    }

    #[test]
    fn doctor_lists_what_was_given_and_never_a_secret() {
        let matches = Cli::command()
            .try_get_matches_from([
                "aegis-gitea-mcp",
                "doctor",
                "--token",
                "s3cr3t-flag",
                "--read-only",
                "--state-url",
                "redis://u:s3cr3t-store@store.example:6379",
            ])
            .unwrap();
        let env = |k: &str| match k {
            "GITEA_HOST" => Some("https://old.example".to_owned()),
            "GITEA_ACCESS_TOKEN" => Some("s3cr3t-old".to_owned()),
            _ => None,
        };
        let given = Given::list(&matches, &env);
        let text: Vec<String> = given.iter().map(ToString::to_string).collect();
        assert!(text.contains(&"GITEA_URL = https://old.example (GITEA_HOST)".to_owned()), "{text:?}");
        assert!(text.contains(&"GITEA_TOKEN is set (--token)".to_owned()), "{text:?}");
        assert!(text.contains(&"READ_ONLY = true (--read-only)".to_owned()), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with("MCP_STATE_URL = redis://***@store.example")), "{text:?}");
        assert!(!text.iter().any(|t| t.contains("s3cr3t") || t.contains("MCP_LISTEN")), "{text:?}");
    }
}
