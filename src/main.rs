//! The `a2a-gateway` command: serve, check a config, run the demo or a sample agent, probe a
//! URL, print completions or the man page.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use a2a_gateway::config::{Config, LogFormat};
use a2a_gateway::Gateway;
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
    about = "A reverse-proxy gateway for fleets of A2A 1.0 agents",
    long_about = "A reverse-proxy gateway for fleets of A2A 1.0 agents: one endpoint for \
orchestrators, AgentCards fetched and checked, task inputs validated against each card's \
input_schema, a ledger that keeps COMPLETED, FAILED and CANCELLED final, webhooks fanned out \
durably, shared event streams, Prometheus metrics and OpenTelemetry traces.\n\n\
Serve with `a2a-gateway --config FILE`: the in-process store when the file has no [redis] \
table, one of many replicas sharing Redis when it has one. SIGHUP reloads the file; SIGTERM \
drains and stops.",
    after_help = "Examples:\n  \
a2a-gateway demo                                  try it: two sample agents, curl commands printed\n  \
a2a-gateway check-config --config gateway.toml    list every problem of a config, with its key\n  \
a2a-gateway --config gateway.toml                 serve\n  \
a2a-gateway probe http://127.0.0.1:8080/readyz    a health check (exit 0 when ready)\n\n\
Every config key is described in config/gateway.toml; RUST_LOG sets the log filter.",
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
    /// Start the gateway on the in-process store with two sample agents, and print curl commands.
    Demo {
        /// Where the gateway listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Require this key: one client, `operator`, with every right (the printed commands
        /// send it; the fleet page at /ui asks for it).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
    },
    /// Run one sample A2A agent on its own (for load runs and manual testing).
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
    /// Print the man page (roff) on stdout: `a2a-gateway man > a2a-gateway.1`.
    Man,
}

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
        }) => {
            logs::init(LogFormat::Text);
            run(demo::sample_agent(listen, progress, file_bytes))
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
        Some(Command::Man) => {
            match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
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
    let gw = Gateway::start(cfg).await.map_err(|e| e.to_string())?;
    let scheme = if gw.is_tls() { "https" } else { "http" };
    announce(&format!("listening on {scheme}://{}", gw.addr()));
    gw.run_with_signals(Some(path)).await;
    Ok(())
}

/// A line on stdout, flushed at once: scripts and tests read the address back from it.
pub fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
