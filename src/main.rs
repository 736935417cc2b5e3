//! The `a2a-gateway` command: serve, check a config, or run the demo.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use a2a_gateway::config::Config;
use a2a_gateway::Gateway;
use clap::{Parser, Subcommand};

mod demo;

/// mimalloc: the gateway allocates small, short-lived buffers per request on every worker
/// thread; glibc malloc cost about 8% more CPU per created task in the load run.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "a2a-gateway",
    version,
    about = "A reverse-proxy gateway for fleets of A2A 1.0 agents"
)]
struct Cli {
    /// The gateway config (TOML). See config/gateway.toml for every key.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Check a config: exit 0, or print every problem with its key and exit 1.
    CheckConfig,
    /// Start the gateway on the in-process store with two sample agents, and print curl commands.
    Demo {
        /// Where the gateway listens.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
    },
    /// Run one sample A2A agent on its own (for load runs and manual testing).
    SampleAgent {
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "a2a_gateway=info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::CheckConfig) => check_config(cli.config),
        Some(Command::Demo { listen }) => run(demo::demo(listen)),
        Some(Command::SampleAgent {
            listen,
            progress,
            file_bytes,
        }) => run(demo::sample_agent(listen, progress, file_bytes)),
        None => match cli.config {
            Some(path) => run(serve(path)),
            None => {
                eprintln!("error: --config FILE is required to serve (or try `a2a-gateway demo`)");
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

fn check_config(path: Option<PathBuf>) -> ExitCode {
    let Some(path) = path else {
        eprintln!("error: check-config needs --config FILE");
        return ExitCode::from(2);
    };
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

async fn serve(path: PathBuf) -> Result<(), String> {
    let cfg = load(&path)?;
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
