//! The `portcullis` command: run, check, explain, demo, demo-upstream, listings, healthcheck.

use std::io::IsTerminal;
#[cfg(feature = "demo")]
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use portcullis::config::{ConfigErrors, GatewayConfig, LogConfig, LogFormat};
use portcullis::server::{shutdown_signal, RunningGateway};

/// jemalloc instead of glibc's malloc: fewer cycles per request, and with its
/// background thread, memory freed by closed connections goes back to the
/// system within seconds (see bench/README.md for the measurements).
/// `_RJEM_MALLOC_CONF` in the environment adds settings.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's built-in settings (a C string it reads at start): the
/// background thread purges freed pages; dirty pages are returned after 1 s
/// instead of 10 s and skip the "muzzy" stage, so the memory of a burst of
/// connections that went idle or closed is back within seconds (bench/README.md).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &u8 = &b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0"[0];

#[derive(Parser)]
#[command(
    name = "portcullis",
    version,
    about = "An elicitation-aware reverse proxy for MCP (protocol 2026-07-28)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway with a config file.
    Run {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Log (and report start-up errors) in this format, whatever `[log] format` says.
        #[arg(long, value_enum)]
        log_format: Option<LogFormatArg>,
    },
    /// Validate a config file (and the files it names): print every problem, exit 2 if any.
    Check {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Report problems as JSON lines instead of text.
        #[arg(long, value_enum)]
        log_format: Option<LogFormatArg>,
        /// Refuse the config (exit 2) on a warning too (a plain http://
        /// upstream off this machine).
        #[arg(long)]
        strict: bool,
        /// A reviewed config to hold this one against: print every
        /// security control this one weakens, exit 1 if any.
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
    },
    /// Dry-run the policy on one message: every rule's verdict, what the client
    /// would receive; exit 0 if it would be delivered, 1 if refused, 2 on usage errors.
    Explain(portcullis::explain::ExplainArgs),
    #[cfg(feature = "demo")]
    /// Start the built-in example MCP server and the gateway in front of it
    /// (with --flow: perform the booking example's book_room exchange through a running demo).
    Demo {
        /// Use this config instead of the shipped demo config.
        #[arg(short, long, value_name = "FILE", conflicts_with = "flow")]
        config: Option<PathBuf>,
        /// Where the gateway listens (its MCP endpoint is /mcp/rooms there).
        #[arg(long, default_value = portcullis::demo::LISTEN, conflicts_with_all = ["flow", "config"])]
        listen: SocketAddr,
        /// Where the gateway's admin listener (metrics, health) listens.
        #[arg(long, default_value = portcullis::demo::ADMIN, conflicts_with_all = ["flow", "config"])]
        admin: SocketAddr,
        /// Where the example MCP server listens (the demo config routes to it).
        #[arg(long, default_value = portcullis::demo::UPSTREAM, conflicts_with = "flow")]
        upstream: SocketAddr,
        /// Send the booking example's book_room request and its retry through a running
        /// demo gateway, printing every message; then exit.
        #[arg(long)]
        flow: bool,
        /// The gateway endpoint for --flow [default: http://127.0.0.1:8080/mcp/rooms].
        #[arg(long, value_name = "URL", requires = "flow")]
        url: Option<String>,
    },
    /// Hash an API key for `[[auth.key]] hash = ...` (reads the key from stdin;
    /// with --generate, makes a new key and prints both).
    HashKey {
        #[arg(long)]
        generate: bool,
    },
    /// Print a new requestState sealing key (KID:BASE64URL) for [state] keys_file / keys_env.
    Keygen {
        /// The key id (1-32 of A-Z a-z 0-9 - _); rotate by putting the new key first.
        #[arg(long, default_value = "k1")]
        id: String,
    },
    #[cfg(feature = "demo")]
    /// Run only the built-in example MCP server (for benchmarks and compose).
    DemoUpstream {
        #[arg(long, default_value = "127.0.0.1:9100")]
        listen: SocketAddr,
    },
    /// What a running gateway pinned of each upstream's lists, and the
    /// operator's acceptance of a changed definition (rug pulls).
    Listings(portcullis::listings_command::ListingsArgs),
    /// A token the operator pastes into the approval page's sign-in form
    /// (made with the config's [state] keys; good for five minutes).
    ApprovalToken {
        /// The gateway's config file (its [state] keys_file or keys_env).
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// (internal) The supervisor of one stdio program: see dataplane::stdio::supervise.
    #[command(hide = true)]
    StdioSupervise {
        /// The gateway's pid: when it is gone, so is everything below.
        #[arg(long)]
        watch: u32,
        /// How long a stopped program has between SIGTERM and SIGKILL.
        #[arg(long)]
        grace_ms: u64,
        #[arg(last = true, required = true)]
        target: Vec<std::ffi::OsString>,
    },
    /// (internal) A stdio program's last step before its exec.
    #[command(hide = true)]
    StdioConfine {
        #[arg(long)]
        max_tasks: Option<u64>,
        #[arg(long)]
        report_pid: bool,
        #[arg(last = true, required = true)]
        program: Vec<std::ffi::OsString>,
    },
    /// Probe a running gateway's /healthz (Docker HEALTHCHECK): exit 0 on 200.
    Healthcheck {
        /// Probe the [admin] address of this config file.
        #[arg(short, long, value_name = "FILE", conflicts_with = "url")]
        config: Option<PathBuf>,
        /// Probe this http:// URL instead.
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

impl From<LogFormatArg> for LogFormat {
    fn from(f: LogFormatArg) -> LogFormat {
        match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }
    }
}

/// Called once the gateway is listening (the demo prints its help then).
type AfterStart = Box<dyn FnOnce(&RunningGateway) + Send>;

/// Logs to stderr; colour only when stderr is a terminal.
fn init_logging(log: &LogConfig) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&log.level));
    init_subscriber(filter, log.format);
}

fn init_subscriber(filter: tracing_subscriber::EnvFilter, format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The format start-up errors are reported in: the flag, else what the
/// file declares (when it can be read that far), else text.
fn error_format(path: &Path, flag: Option<LogFormatArg>) -> LogFormat {
    flag.map(LogFormat::from)
        .or_else(|| {
            let text = std::fs::read_to_string(path).ok()?;
            LogFormat::declared_in(&text)
        })
        .unwrap_or(LogFormat::Text)
}

/// Every problem of a config: `error: FILE:LINE:COLUMN: FIELD: problem`
/// lines, or one JSON log line each.
fn report(errors: &ConfigErrors, format: LogFormat) {
    match format {
        LogFormat::Text => {
            for e in errors {
                eprintln!("error: {e}");
            }
        }
        LogFormat::Json => {
            // Start-up errors are always shown, whatever RUST_LOG says.
            init_subscriber(tracing_subscriber::EnvFilter::new("error"), format);
            for e in errors {
                tracing::error!(
                    file = %e.file,
                    line = e.line,
                    column = e.column,
                    field = %e.field,
                    "{}",
                    e.message
                );
            }
        }
    }
}

fn load(path: &Path, flag: Option<LogFormatArg>) -> Result<GatewayConfig, ExitCode> {
    GatewayConfig::load(path).map_err(|errors| {
        report(&errors, error_format(path, flag));
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A stdio program's steps run before anything of the gateway starts.
    match &cli.command {
        Command::StdioSupervise {
            watch,
            grace_ms,
            target,
        } => {
            let grace = std::time::Duration::from_millis(*grace_ms);
            let code = portcullis_dataplane::stdio::supervise::supervise(*watch, grace, target);
            return ExitCode::from(u8::try_from(code).unwrap_or(255));
        }
        Command::StdioConfine {
            max_tasks,
            report_pid,
            program,
        } => {
            let code =
                portcullis_dataplane::stdio::supervise::confine(*max_tasks, *report_pid, program);
            return ExitCode::from(u8::try_from(code).unwrap_or(255));
        }
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Check {
                config,
                log_format,
                strict,
                baseline,
            } => match check(&config, log_format, strict) {
                Ok(c) => {
                    baseline.map_or(ExitCode::SUCCESS, |b| against_baseline(&c, &b, log_format))
                }
                Err(code) => code,
            },
            Command::Run { config, log_format } => match load(&config, log_format) {
                Ok(mut c) => {
                    if let Some(f) = log_format {
                        c.log.format = f.into();
                    }
                    run(c, None).await
                }
                Err(code) => code,
            },
            Command::Explain(args) => portcullis::explain::run(&args).await,
            #[cfg(feature = "demo")]
            Command::Demo {
                flow: true, url, ..
            } => demo_flow(url.as_deref()).await,
            #[cfg(feature = "demo")]
            Command::Demo {
                config,
                listen,
                admin,
                upstream,
                ..
            } => demo(config, [listen, admin, upstream]).await,
            #[cfg(feature = "demo")]
            Command::DemoUpstream { listen } => demo_upstream(listen).await,
            Command::Keygen { id } => keygen(&id),
            Command::ApprovalToken { config } => portcullis::approval_token::run(&config),
            Command::HashKey { generate } => hash_key(generate),
            Command::Listings(args) => {
                let admin = match (args.admin, &args.config) {
                    (Some(a), _) => Ok(a),
                    (None, Some(path)) => {
                        portcullis::healthcheck::admin_from_config(path).map_err(|e| e.to_string())
                    }
                    (None, None) => {
                        Err("give --config FILE (its [admin] address) or --admin IP:PORT".into())
                    }
                };
                portcullis::listings_command::run(args, admin).await
            }
            Command::Healthcheck { config, url } => {
                portcullis::healthcheck::run(config.as_deref(), url.as_deref()).await
            }
            Command::StdioSupervise { .. } | Command::StdioConfine { .. } => ExitCode::FAILURE,
        }
    })
}

fn hash_key(generate: bool) -> ExitCode {
    use std::io::BufRead;
    if generate {
        let key = portcullis::identify::generate_key();
        println!("key:  {key}");
        println!("hash: {}", portcullis::identify::hash_key(&key));
        return ExitCode::SUCCESS;
    }
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() || line.trim().is_empty() {
        eprintln!("error: give the key on standard input (echo -n KEY | portcullis hash-key), or use --generate");
        return ExitCode::from(2);
    }
    println!(
        "{}",
        portcullis::identify::hash_key(line.trim_end_matches(['\r', '\n']))
    );
    ExitCode::SUCCESS
}

fn keygen(id: &str) -> ExitCode {
    let line = portcullis::mrtr::seal::new_key_line(id);
    match portcullis::mrtr::seal::StateKeys::parse(&line) {
        Ok(_) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(_) => {
            eprintln!("error: the key id must be 1-32 of A-Z a-z 0-9 - _");
            ExitCode::from(2)
        }
    }
}

fn check(
    path: &Path,
    log_format: Option<LogFormatArg>,
    strict: bool,
) -> Result<GatewayConfig, ExitCode> {
    let loaded = GatewayConfig::load(path).map_err(|errors| {
        let format = error_format(path, log_format);
        report(&errors, format);
        if format == LogFormat::Text {
            eprintln!("{}: {} problem(s)", path.display(), errors.len());
        }
        ExitCode::from(2)
    });
    match loaded {
        Ok(c) => {
            let warnings = c.warnings();
            for w in &warnings {
                eprintln!("{}: warning: {w}", path.display());
            }
            if strict && !warnings.is_empty() {
                eprintln!(
                    "{}: {} warning(s), refused under --strict",
                    path.display(),
                    warnings.len()
                );
                return Err(ExitCode::from(2));
            }
            println!(
                "{}: ok ({} listener(s), {} upstream(s), {} route(s))",
                path.display(),
                c.listeners.len(),
                c.upstreams.len(),
                c.routes.len()
            );
            Ok(c)
        }
        Err(code) => Err(code),
    }
}

/// `check --baseline`: the controls `config` weakens against the reviewed
/// file (exit 1 if any; 2 if the baseline itself has problems).
fn against_baseline(
    config: &GatewayConfig,
    baseline: &Path,
    log_format: Option<LogFormatArg>,
) -> ExitCode {
    let reviewed = match GatewayConfig::load(baseline) {
        Ok(b) => b,
        Err(errors) => {
            report(&errors, error_format(baseline, log_format));
            eprintln!(
                "{}: the baseline has {} problem(s)",
                baseline.display(),
                errors.len()
            );
            return ExitCode::from(2);
        }
    };
    let json = error_format(&config.source, log_format) == LogFormat::Json;
    let found = portcullis::weakened::against(&reviewed, config);
    portcullis::weakened::print(&found, config, baseline, json);
    match found.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

fn warn_generated_keys(config: &GatewayConfig) {
    if config.state.keys.is_generated() {
        tracing::warn!(
            "no [state] keys configured: generated a random requestState key for this process; \
             retries must come back to this same instance, and restarts invalidate open operations. \
             Set [state] keys_file or keys_env (see `portcullis keygen`) for a cluster."
        );
    }
}

async fn run(config: GatewayConfig, after_start: Option<AfterStart>) -> ExitCode {
    init_logging(&config.log);
    warn_generated_keys(&config);
    for w in config.warnings() {
        tracing::warn!("{w}");
    }
    let gateway = match RunningGateway::start(config).await {
        Ok(g) => g,
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(f) = after_start {
        f(&gateway);
    }
    let gateway = std::sync::Arc::new(gateway);
    gateway.watch_files(std::time::Duration::from_secs(2));
    tokio::select! {
        _ = shutdown_signal() => {}
        _ = reload_on_sighup(gateway.clone()) => {}
    }
    tracing::info!("shutting down: no new connections; draining in-flight requests");
    gateway.shutdown_shared().await;
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

/// SIGHUP reloads the config and policies (never returns on unix).
async fn reload_on_sighup(gateway: std::sync::Arc<RunningGateway>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            while hup.recv().await.is_some() {
                let _ = gateway.reload().await;
            }
        }
    }
    std::future::pending::<()>().await;
}

#[cfg(feature = "demo")]
async fn demo_upstream(listen: SocketAddr) -> ExitCode {
    portcullis_demo::listen_and_serve(listen, shutdown_signal()).await
}

#[cfg(feature = "demo")]
async fn demo_flow(url: Option<&str>) -> ExitCode {
    let url = url.unwrap_or(portcullis_demo::flow::DEFAULT_URL);
    match portcullis_demo::flow::run(url, &mut std::io::stdout().lock()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "demo")]
async fn demo(config: Option<PathBuf>, [listen, admin, upstream]: [SocketAddr; 3]) -> ExitCode {
    let own = config.is_none();
    let config = match &config {
        Some(path) => load(path, None),
        None => GatewayConfig::parse(
            &portcullis::demo::config_at(listen, admin, upstream),
            Path::new("config/demo.toml"),
        )
        .map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }),
    };
    let config = match config {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(taken) = demo_ports_free(&config, own) {
        eprintln!("error: {taken}");
        return ExitCode::FAILURE;
    }
    let listener = match tokio::net::TcpListener::bind(upstream).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: the example MCP server cannot listen on {upstream}: {e}; another program (an earlier demo?) has the port: stop it, or pass --upstream 127.0.0.1:PORT");
            return ExitCode::FAILURE;
        }
    };
    tokio::spawn(async move {
        if let Err(e) = portcullis_demo::serve(listener, std::future::pending()).await {
            eprintln!("error: {e}");
        }
    });
    let paths: Vec<String> = config.routes.keys().cloned().collect();
    run(
        config,
        Some(Box::new(move |g: &RunningGateway| {
            print_demo_help(g, &paths)
        })),
    )
    .await
}

/// The demo's gateway addresses are free before anything starts: a taken
/// port gets the flag (or, with --config, the file) that moves it.
#[cfg(feature = "demo")]
fn demo_ports_free(config: &GatewayConfig, own_config: bool) -> Result<(), String> {
    let listeners = config.listeners.iter().map(|l| (l.address, "--listen"));
    for (address, flag) in listeners.chain(config.admin.map(|a| (a, "--admin"))) {
        if let Err(e) = std::net::TcpListener::bind(address) {
            let how = if own_config {
                format!("pass {flag} 127.0.0.1:PORT")
            } else {
                "change the address in the config".to_owned()
            };
            return Err(format!(
                "the demo cannot listen on {address}: {e}; another program (an earlier demo?) has the port: stop it, or {how}"
            ));
        }
    }
    Ok(())
}

#[cfg(feature = "demo")]
fn print_demo_help(g: &RunningGateway, paths: &[String]) {
    let Some(addr) = g.addrs.first() else { return };
    let path = paths
        .iter()
        .find(|p| p.contains("rooms"))
        .or(paths.first())
        .cloned()
        .unwrap_or_default();
    let url = format!("http://{addr}{path}");
    println!("\nPortcullis demo: gateway at {url} (example MCP server behind it)");
    if let Some(admin) = g.admin_addr {
        println!("metrics: http://{admin}/metrics   health: http://{admin}/healthz");
    }
    println!("\n# the booking example's book_room exchange, every message printed:");
    println!("{} demo --flow --url {url}", shell_word(&this_program()));
    println!("\n# or by hand with curl: paste these lines into a shell (step 3 needs jq)");
    println!("URL={url}");
    print!("{}", portcullis::demo::TRY_IT);
    println!("\nCtrl-C stops both.");
}

#[cfg(feature = "demo")]
/// The path of this binary, so the printed `--flow` line runs as printed.
fn this_program() -> String {
    std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "portcullis".to_owned())
}

#[cfg(feature = "demo")]
/// `word` quoted for a POSIX shell when it holds anything but plain path characters.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:=@".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
