//! `aegis-gitea-mcp`: serve | tools | call | doctor | audit verify | audit args-hmac | ready. Exit codes: 0 ok,
//! 1 an error result or a problem found by `doctor` or `audit verify`, 2 bad settings or usage. Nothing else
//! lives here. The audit log is closed (its head logged) when `serve` or `call` ends.

use std::process::ExitCode;
use std::sync::Arc;

use clap::FromArgMatches;

use aegis_core::catalog;
use aegis_core::guard::Outcome;
use aegis_gitea_mcp::config::{
    self, AuditCommand, Cli, Command, FlavorChoice, Given, Settings, TransportChoice,
};
use aegis_gitea_mcp::mcp::{McpHandler, tool_list};
use aegis_gitea_mcp::server::{Server, catalog_for};
use aegis_gitea_mcp::{audit, call, doctor, transport};

/// jemalloc rather than the system's malloc: under load it costs half the CPU per call and less
/// memory at the peak (its settings: `.cargo/config.toml`).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // `Cli::parse`, with no environment value in `--help`, keeping the matches: they tell
    // `doctor` where each setting came from.
    let matches = config::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut config::command()).exit());
    // Needs no settings and no forge: only the files and the key.
    if let Some(Command::Audit { action }) = &cli.command {
        return audit_command(action, cli.common.audit_key_file.as_deref());
    }
    // Needs no forge either: only the address of a running server.
    if let Some(Command::Ready) = &cli.command {
        return transport::ready::probe(&cli.common.listen);
    }
    let log_level = cli.common.log_level.clone();
    // The one place the environment is read: handed to the settings, which read it all.
    #[allow(clippy::disallowed_methods)]
    let env = |k: &str| std::env::var(k).ok();
    // Only `doctor` lists the settings given; no other command pays for reading the table.
    let doctor = matches!(cli.command, Some(Command::Doctor));
    let given = if doctor { Given::list(&matches, &env) } else { Vec::new() };
    let settings = match Settings::resolve(cli.common, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("aegis-gitea-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    // Every command talks to the forge but `tools` with an explicit flavor; with a profiles
    // file, each profile names its own.
    let offline = matches!(command, Command::Tools { .. }) && settings.flavor != FlavorChoice::Auto;
    let profiled = settings.has_profiles();
    if let (false, false, Err(e)) = (offline, profiled, settings.forge_url()) {
        eprintln!("aegis-gitea-mcp: {e}");
        return ExitCode::from(2);
    }
    init_logging(&log_level, &settings);
    // One person's stdio session (and every one-shot command) is served on this thread: its
    // messages come one at a time, and handing each to a pool of workers would only add
    // wake-ups. The HTTP transports serve many clients at once, on a worker per core.
    let serves_many = matches!(command, Command::Serve) && settings.transport != TransportChoice::Stdio;
    let runtime = if serves_many {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    }
    .expect("tokio runtime");
    let code = runtime.block_on(run(command, settings, given));
    // Everything the run owed was done before it returned (the answers written, the audit
    // chain's head logged). What may still run is a read of stdin blocked in the runtime's
    // pool, which a client that stops its server with a signal keeps open: dropping the
    // runtime would wait for that read until the client gave up and killed the process.
    runtime.shutdown_background();
    code
}

async fn run(command: Command, settings: Settings, given: Vec<Given>) -> ExitCode {
    match command {
        Command::Doctor => return doctor::run(settings, &given).await,
        Command::Tools { json, list_toolsets } => return tools(settings, json, list_toolsets).await,
        _ => {}
    }
    let server = match Server::start(settings).await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("aegis-gitea-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    let code = serve_or_call(command, &server).await;
    // The head of the audit chain goes to the log, and nothing is written after it.
    if let Some(log) = &server.audit {
        log.close();
    }
    code
}

/// `serve` or `call` on a started server.
async fn serve_or_call(command: Command, server: &Arc<Server>) -> ExitCode {
    for p in server.forges.all() {
        tracing::info!(
            forge = p.name(),
            flavor = p.catalog.flavor.as_str(),
            version = %p.catalog.version.text,
            tools = p.catalog.all_tools().count(),
            catalog_ms = server.catalog_build.as_secs_f64() * 1000.0,
            "catalog ready"
        );
    }
    match command {
        Command::Serve => match server.settings.transport {
            TransportChoice::Stdio => {
                if server.oauth.is_some() {
                    tracing::warn!(
                        "sign-in with the forge (MCP_PUBLIC_URL, MCP_OAUTH_KEY_FILE) is served only by the http and sse transports; over stdio every call runs as the global identity"
                    );
                }
                // Over stdio only a listener of its own serves /metrics (METRICS_LISTEN=address).
                if let Err(e) = transport::metrics::serve_own(server).await {
                    eprintln!("aegis-gitea-mcp: {e}");
                    return ExitCode::from(2);
                }
                match transport::stdio::serve(McpHandler::new(server.clone()), server.settings.max_body_bytes)
                    .await
                {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("aegis-gitea-mcp: {e}");
                        ExitCode::FAILURE
                    }
                }
            }
            other => match transport::http::serve(server.clone(), other).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("aegis-gitea-mcp: {e}");
                    ExitCode::FAILURE
                }
            },
        },
        Command::Call { tool, args } => {
            let args = match serde_json::from_str::<serde_json::Value>(&args) {
                Ok(serde_json::Value::Object(m)) => m,
                Ok(_) => {
                    eprintln!(
                        "aegis-gitea-mcp: --args must be a JSON object, e.g. '{{\"owner\":\"alice\",\"repo\":\"demo\"}}'"
                    );
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("aegis-gitea-mcp: --args is not valid JSON: {e}");
                    return ExitCode::from(2);
                }
            };
            let origin = audit::Origin { transport: "cli", client: None };
            let result = call::recorded(server, origin, &tool, Some(args), |args, mut trace| {
                let tool = &tool;
                async move {
                    let caller = aegis_gitea_mcp::identity::Caller::Global;
                    let result = call::run(server, caller, &Default::default(), tool, args, &mut trace).await;
                    (result, trace)
                }
            })
            .await;
            match Outcome::from_result(result) {
                Outcome::Success(text) => {
                    println!("{}", text.as_str());
                    ExitCode::SUCCESS
                }
                Outcome::Error(text) => {
                    println!("{}", text.as_str());
                    ExitCode::FAILURE
                }
                Outcome::UnknownTool(message) => {
                    eprintln!(
                        "aegis-gitea-mcp: {}; `aegis-gitea-mcp tools` lists the tools",
                        message.as_str()
                    );
                    ExitCode::from(2)
                }
            }
        }
        Command::Doctor | Command::Tools { .. } | Command::Audit { .. } | Command::Ready => {
            unreachable!("handled above")
        }
    }
}

/// `audit verify` and `audit args-hmac`, with the key of `--key-file` or else of
/// `AUDIT_KEY_FILE` (`--audit-key-file`): exit 2 without one.
fn audit_command(action: &AuditCommand, common_key: Option<&std::path::Path>) -> ExitCode {
    let (AuditCommand::Verify { key_file, .. } | AuditCommand::ArgsHmac { key_file, .. }) = action;
    let Some(path) = key_file.as_deref().or(common_key) else {
        eprintln!(
            "aegis-gitea-mcp: the audit trail is keyed: pass the server's key with --key-file FILE (or set AUDIT_KEY_FILE)"
        );
        return ExitCode::from(2);
    };
    let key = match aegis_gitea_mcp::config::read_audit_key(path) {
        Ok(k) => audit::AuditKey::new(&k),
        Err(e) => {
            eprintln!("aegis-gitea-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    match action {
        AuditCommand::Verify { files, .. } => {
            let (report, ok) = audit::verify(files, &key);
            print!("{report}");
            if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        AuditCommand::ArgsHmac { args, .. } => match serde_json::from_str::<serde_json::Value>(args) {
            Ok(serde_json::Value::Object(m)) => {
                println!("{}", key.args_hmac(&m));
                ExitCode::SUCCESS
            }
            _ => {
                eprintln!(
                    "aegis-gitea-mcp: the arguments must be a JSON object, e.g. '{{\"owner\":\"alice\",\"repo\":\"demo\"}}'"
                );
                ExitCode::from(2)
            }
        },
    }
}

/// `tools`: what `serve` would list, or the toolsets. With `--flavor gitea|forgejo` no forge
/// is asked, so neither a URL nor a token is needed.
async fn tools(settings: Settings, json: bool, list_toolsets: bool) -> ExitCode {
    let typed = settings.structured_content_from.is_some();
    let asks = settings.flavor == FlavorChoice::Auto;
    let built = match asks {
        true => Server::start(settings.clone()).await.map(|s| {
            let catalogs = s.forges.all().map(|p| p.catalog.clone()).collect::<Vec<_>>();
            (catalogs, tool_list::listed_on(&s.forges, &Default::default(), typed))
        }),
        false => catalog_for(&settings, None).map(|c| {
            let listed = tool_list::listed(&c, &settings.policy(), &Default::default(), typed);
            (vec![Arc::new(c)], listed)
        }),
    };
    let (catalogs, listed) = match built {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aegis-gitea-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    if list_toolsets {
        let catalogs: Vec<&catalog::Catalog> = catalogs.iter().map(|c| &**c).collect();
        print!("{}", catalog::toolsets::table(&catalogs));
    } else {
        print!("{}", tool_list::printout(&listed, json));
    }
    ExitCode::SUCCESS
}

/// Logs go to stderr (stdout is the protocol channel over stdio), through exact redaction
/// and pattern masking, with third-party debug output capped (it prints raw messages).
fn init_logging(filter: &str, settings: &Settings) {
    use aegis_core::guard::{Masker, Redactor};
    use aegis_gitea_mcp::log;
    use tracing_subscriber::prelude::*;
    let cap = log::third_party_cap(filter);
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Log lines are short: the automaton cheapest to build does, and start-up pays no more.
    let writer = log::RedactingStderr::new(Redactor::once(settings.secrets()), Masker::shared());
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(cap)
        .with_filter(filter);
    tracing_subscriber::registry().with(layer).init();
}
