//! The `a2a-gateway` command: serve, check a config, run the demo or a sample agent, probe a
//! URL, print completions or the man page.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use a2a_gateway::config::{Config, LogFormat};
use a2a_gateway::{Gateway, Signals};
use clap::{CommandFactory, Parser, Subcommand};

mod demo;
mod logs;
mod probe;

/// mimalloc: the gateway allocates small, short-lived buffers per request on every worker
/// thread; glibc malloc cost about 8% more CPU per created task in the load run.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "a2a-gateway",
    version,
    about = "A reverse-proxy gateway for fleets of A2A agents: Clawpedia A2A 1.0 and the official A2A (1.0 and 0.3 over JSON-RPC and HTTP+JSON, 1.0 over gRPC)",
    long_about = "A reverse-proxy gateway for fleets of A2A agents, of two protocols: Clawpedia \
A2A 1.0 (the REST task protocol) and the official A2A of a2aproject, 1.0 and 0.3 over JSON-RPC and \
HTTP+JSON, 1.0 over gRPC (clients speak any of them, whatever their agent's). One endpoint for \
orchestrators; AgentCards fetched, checked and served; requests and answers checked against the \
protocol (Clawpedia inputs against each card's input_schema); a ledger that holds every task's \
final state final; tasks and contexts scoped to the client that made them; webhooks and A2A \
push notifications delivered durably; one upstream stream per task shared by its subscribers; \
Prometheus metrics, OpenTelemetry traces and a live fleet page at /ui.\n\n\
Serve with `a2a-gateway --config FILE`: the in-process store when the file has no [redis] \
table, one of many replicas sharing Redis when it has one. SIGHUP reloads the file; SIGTERM \
drains and stops.",
    after_help = "Examples:\n  \
a2a-gateway demo                                  try it: three sample agents (two Clawpedia, one\n                                                  official A2A), curl commands printed\n  \
a2a-gateway example-config > gateway.toml         every config key, commented, with its default\n  \
a2a-gateway check-config --config gateway.toml    list every problem of a config, with its key\n  \
a2a-gateway --config gateway.toml                 serve\n  \
a2a-gateway probe http://127.0.0.1:8080/readyz    a health check (exit 0 when ready)\n\n\
`a2a-gateway man --dir DIR` writes the man pages; RUST_LOG sets the log filter.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Serve with this config (TOML). See config/gateway.toml for every key.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Check a config: exit 0, or print every problem with its key and exit 1.
    CheckConfig {
        /// The config to check (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Start the gateway on the in-process store with three sample agents (two Clawpedia A2A,
    /// one official A2A 1.0), and print curl commands for both protocols.
    Demo {
        /// Where the gateway listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Require this key: one client, `operator`, with every right (the printed commands
        /// send it; the fleet page at /ui asks for it).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
    },
    /// Run one sample agent on its own, Clawpedia A2A or official A2A (for load runs and
    /// manual testing).
    SampleAgent {
        /// Where the agent listens.
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: String,
        /// Advance tasks to WORKING and COMPLETED by themselves, as the demo agents do.
        #[arg(long)]
        progress: bool,
        /// Start with one task holding a file artifact of this many bytes, and print its
        /// content path (for download load runs).
        #[arg(long, default_value_t = 0)]
        file_bytes: usize,
        /// The card's `agent_id` (a UUID); without it, a new one at each start, as an agent
        /// that keeps no identity would.
        #[arg(long, value_name = "UUID")]
        agent_id: Option<uuid::Uuid>,
        /// Push every status change to this URL, as the demo's agents do (the gateway's
        /// `/agents/{name}/notifications`); needs --ingest-token.
        #[arg(long, value_name = "URL", requires = "ingest_token")]
        push: Option<String>,
        /// The bearer token sent with each push (the agent's `ingest_token` in the gateway).
        #[arg(long, value_name = "T", requires = "push")]
        ingest_token: Option<String>,
        /// The protocol it speaks: `a2a` is the official A2A 1.0 (JSON-RPC at /a2a/jsonrpc,
        /// HTTP+JSON under /a2a/rest, gRPC at /lf.a2a.v1.A2AService/*, the card at
        /// /.well-known/agent-card.json; --file-bytes, --agent-id and --push are Clawpedia's).
        #[arg(long, value_enum, default_value = "clawpedia")]
        protocol: demo::AgentProtocol,
        /// The official protocol's version, with --protocol a2a: `0.3` serves a 0.3 card
        /// (url, preferredTransport, no supportedInterfaces), 0.3's JSON-RPC methods at
        /// /a2a/jsonrpc and 0.3's HTTP+JSON routes under /a2a/rest/v1.
        #[arg(long = "a2a-version", value_enum, default_value = "1.0")]
        a2a_version: demo::AgentVersion,
    },
    /// Health check: exit 0 if URL answers 2xx, 1 otherwise (for a container HEALTHCHECK).
    Probe {
        /// What to ask, e.g. http://127.0.0.1:8080/readyz (https:// is checked like an agent).
        url: String,
        /// Give up after this long, connecting included.
        #[arg(long, default_value_t = 2000, value_name = "MS")]
        timeout_ms: u64,
        /// A PEM file of CA certificates that an https:// URL is checked against, besides the
        /// system roots.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<String>,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the commented example config (config/gateway.toml: every key, with its default)
    /// on stdout: `a2a-gateway example-config > gateway.toml`.
    ExampleConfig,
    /// Print the man page (roff) on stdout: `a2a-gateway man > a2a-gateway.1`; with `--dir`,
    /// write it and one page per subcommand (a2a-gateway-SUBCOMMAND.1) there instead.
    Man {
        /// Write every page into this directory (created if missing) instead of printing the
        /// main page.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// config/gateway.toml, built in: what `example-config` prints (and `check-config` accepts).
const EXAMPLE_CONFIG: &str = include_str!("../config/gateway.toml");

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig { config }) => {
            logs::init(LogFormat::Text);
            check_config(config)
        }
        Some(Command::Demo { listen, key }) => {
            logs::init(LogFormat::Text);
            run(demo::demo(listen, key))
        }
        Some(Command::SampleAgent {
            listen,
            progress,
            file_bytes,
            agent_id,
            push,
            ingest_token,
            protocol,
            a2a_version,
        }) => {
            logs::init(LogFormat::Text);
            let standalone = demo::Standalone {
                listen,
                progress,
                file_bytes,
                agent_id,
                push: push.zip(ingest_token),
                protocol,
                version: a2a_version,
            };
            run(demo::sample_agent(standalone))
        }
        Some(Command::Probe {
            url,
            timeout_ms,
            ca_file,
        }) => probe::probe(&url, Duration::from_millis(timeout_ms), ca_file),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "a2a-gateway",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Some(Command::ExampleConfig) => {
            let mut out = std::io::stdout().lock();
            match out
                .write_all(EXAMPLE_CONFIG.as_bytes())
                .and_then(|()| out.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(Command::Man { dir }) => match man(dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        None => match cli.config {
            Some(path) => match load(&path) {
                // The log format is the config's: read before anything logs.
                Ok(cfg) => {
                    logs::init(cfg.log_format);
                    run(serve(path, cfg))
                }
                Err(msg) => {
                    eprintln!("error: {msg}");
                    ExitCode::FAILURE
                }
            },
            None => {
                eprintln!("error: --config FILE is required to serve (or try `a2a-gateway demo`, or --help)");
                ExitCode::from(2)
            }
        },
    }
}

/// The man pages. On stdout, one page that names no other page: its SUBCOMMANDS section
/// describes each subcommand in place (what clap_mangen would write as a reference to an
/// `a2a-gateway-SUBCOMMAND(1)` page nobody installed). With `dir`, every page: the main one,
/// whose references then all exist, and one per subcommand (`--help` and `help` excluded).
fn man(dir: Option<PathBuf>) -> std::io::Result<()> {
    // Without the `help` subcommand: it has no page of its own worth installing (each page
    // documents -h/--help), and clap_mangen would write one for it and for each of its own.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = dir {
        std::fs::create_dir_all(&dir)?;
        clap_mangen::generate_to(cmd, &dir)?;
        return Ok(());
    }
    let page = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    page.render_title(&mut out)?;
    page.render_name_section(&mut out)?;
    page.render_synopsis_section(&mut out)?;
    page.render_description_section(&mut out)?;
    page.render_options_section(&mut out)?;
    out.extend_from_slice(b".SH SUBCOMMANDS\n");
    for sub in cmd.get_subcommands() {
        let usage = sub
            .clone()
            .bin_name(format!("a2a-gateway {}", sub.get_name()))
            .render_usage()
            .to_string();
        let usage = usage.trim_start_matches("Usage: ");
        out.extend_from_slice(format!(".TP\n\\fB{}\\fR\n", roff(usage)).as_bytes());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            out.extend_from_slice(format!("{}\n", roff(&about.to_string())).as_bytes());
        }
        for arg in sub
            .get_arguments()
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        {
            let flag = matches!(
                arg.get_action(),
                clap::ArgAction::SetTrue | clap::ArgAction::SetFalse | clap::ArgAction::Count
            );
            let value = arg
                .get_value_names()
                .map(|v| v.join(" "))
                .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
            let name = match arg.get_long() {
                Some(l) if flag => format!("--{l}"),
                Some(l) => format!("--{l} {value}"),
                None => format!("<{value}>"),
            };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            out.extend_from_slice(
                format!(".RS\n.TP\n\\fB{}\\fR\n{}\n.RE\n", roff(&name), roff(&help)).as_bytes(),
            );
        }
    }
    page.render_version_section(&mut out)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&out)?;
    stdout.flush()
}

/// Text as roff: backslashes and hyphens escaped, no line starting with a control character.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| match l.chars().next() {
            Some('.' | '\'') => format!("\\&{l}"),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn run(fut: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &std::path::Path) -> Result<Config, String> {
    Config::load_with(path, &a2a_gateway::ConfigRules).map_err(|problems| {
        let mut msg = format!("{} has {} problem(s):", path.display(), problems.len());
        for p in problems {
            msg.push_str(&format!("\n  {p}"));
        }
        msg
    })
}

fn check_config(path: PathBuf) -> ExitCode {
    match load(&path) {
        Ok(cfg) => {
            for w in cfg.warnings() {
                eprintln!("{}: warning: {w}", path.display());
            }
            println!(
                "{}: ok ({} agent(s), {} subscriber(s))",
                path.display(),
                cfg.agents.len(),
                cfg.subscribers.len()
            );
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(path: PathBuf, cfg: Config) -> Result<(), String> {
    let loaded = Loaded::of(&path, &cfg);
    for w in cfg.warnings() {
        tracing::warn!("{w}");
    }
    let gw = Gateway::start(cfg).await.map_err(|e| e.to_string())?;
    // Before the address is announced: whoever reads it may send SIGTERM at once.
    let signals = Signals::register();
    let scheme = if gw.is_tls() { "https" } else { "http" };
    loaded.log(gw.addr());
    announce(&format!("listening on {scheme}://{}", gw.addr()));
    gw.run_with_signals(signals, Some(path)).await;
    Ok(())
}

/// What `serve` says at start about the config it loaded, in one log line (stderr, both log
/// formats): the address, the agents, the store, TLS and the number of clients. No secret: the
/// store's URLs lose their passwords, and nothing else names a credential.
struct Loaded {
    config: String,
    agents: String,
    store: String,
    tls: &'static str,
    clients: usize,
}

/// Agents named in the start-up line; past this, the rest are counted.
const AGENTS_NAMED: usize = 10;

impl Loaded {
    fn of(path: &std::path::Path, cfg: &Config) -> Loaded {
        let mut agents: Vec<&str> = cfg.agents.iter().map(|a| a.name.as_str()).collect();
        let more = agents.len().saturating_sub(AGENTS_NAMED);
        agents.truncate(AGENTS_NAMED);
        let mut agents = format!("{} ({})", cfg.agents.len(), agents.join(", "));
        if more > 0 {
            agents.insert_str(agents.len() - 1, &format!(" and {more} more"));
        }
        let store = match &cfg.redis {
            None => "in-process (state lives as long as the process)".to_owned(),
            Some(r) => {
                let nodes: Vec<String> = r
                    .nodes()
                    .iter()
                    .map(|u| a2a_gateway::config::redact_url(u))
                    .collect();
                let kind = if r.cluster { "redis cluster" } else { "redis" };
                format!("{kind} {} ({} partitions)", nodes.join(","), r.partitions)
            }
        };
        let tls = match &cfg.tls {
            None => "off",
            Some(t) if t.client_ca_file.is_none() => "on",
            Some(t) => match t.client_auth() {
                a2a_gateway::config::ClientAuth::Required => "on, client certificates required",
                a2a_gateway::config::ClientAuth::Optional => "on, client certificates optional",
            },
        };
        Loaded {
            config: path.display().to_string(),
            agents,
            store,
            tls,
            clients: cfg.clients.len(),
        }
    }

    fn log(&self, listen: std::net::SocketAddr) {
        tracing::info!(
            config = %self.config,
            %listen,
            agents = %self.agents,
            store = %self.store,
            tls = self.tls,
            clients = self.clients,
            "started"
        );
    }
}

/// A line on stdout, flushed at once: scripts and tests read the address back from it.
pub fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
