//! The `shoal` command line: `daemon`, `mcp`, `status`, `exec`, `history`, `attach`, `config check`,
//! and its own shell completions and man page (generated from this definition).
//!
//! `shoal daemon` hands over to the actor shell; every other command is a
//! small synchronous client of the daemon socket. Only `cli::output` writes to
//! stdout, and `shoal mcp` writes nothing there but the daemon's frames.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "An agent-first structured shell served by a per-user daemon"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground (logs go to <state dir>/logs, never stdout).
    Daemon {
        #[arg(long)]
        socket: Option<PathBuf>,
        #[arg(long = "state-dir")]
        state_dir: Option<PathBuf>,
        #[arg(long)]
        config: Option<PathBuf>,
        /// Serve MCP over Streamable HTTP at ADDR/mcp (overrides `[http] listen`).
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
    },
    /// A token principal's worker process (the daemon starts it; its stdin is the daemon's pair).
    #[command(hide = true)]
    Worker,
    /// The stdio MCP server an MCP client launches: pipes stdio to the daemon, starting it if needed.
    Mcp {
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Session name (env SHOAL_SESSION; default `default`).
        #[arg(long)]
        session: Option<String>,
        /// Bearer token. Prefer env SHOAL_TOKEN or --token-file: arguments are
        /// visible to every user in the process list.
        #[arg(long, conflicts_with = "token_file", allow_hyphen_values = true)]
        token: Option<String>,
        /// Read the bearer token from this file (readable by its owner only).
        #[arg(long = "token-file")]
        token_file: Option<PathBuf>,
    },
    /// Show the daemon and its actor tree.
    Status {
        #[arg(long)]
        json: bool,
        /// Refresh every second until interrupted.
        #[arg(long)]
        watch: bool,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Run source through the daemon and print its render.
    Exec {
        src: String,
        #[arg(long, default_value = "default")]
        session: String,
        #[arg(long)]
        json: bool,
        /// Evaluate the last statement in value position (a failing command yields its outcome).
        #[arg(long)]
        value: bool,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// An interactive Shoal REPL on a live session, beside its agent: the same
    /// bindings, cwd and out:N; what other clients run shows above the prompt,
    /// and a plan that waits for a human is answered with y/n. Tab completes,
    /// Ctrl-C cancels the running exec (or clears the line), Ctrl-D detaches
    /// (the session stays). Creates the session if it does not exist.
    /// `--pty pty:N` takes over one of the session's terminals instead (Ctrl-]
    /// detaches; the program runs on).
    Attach {
        #[arg(default_value = "default")]
        session: String,
        /// No live view of other clients' execs and plans.
        #[arg(long)]
        quiet: bool,
        /// Take over this PTY (`pty:N`): its screen live, your keys typed into it.
        #[arg(long, conflicts_with = "quiet")]
        pty: Option<String>,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The live view alone, read-only: what every client of a session runs, and
    /// y/n answers (a line each) to its plans that wait for a human. Never creates a
    /// session: watching one that does not exist is an error. Ctrl-C ends it.
    Watch {
        /// The session to watch (default: `default`).
        #[arg(conflicts_with = "all")]
        session: Option<String>,
        /// Watch every session, and answer any session's waiting plans.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The journal of execs, newest first (through the daemon, else read from the store).
    History {
        #[command(subcommand)]
        command: Option<HistoryCommand>,
        /// Only entries started at or after this time (ns since the epoch).
        #[arg(long)]
        since: Option<i64>,
        /// Only entries started at or before this time (ns since the epoch).
        #[arg(long)]
        until: Option<i64>,
        #[arg(long)]
        principal: Option<String>,
        /// true: succeeded; false: failed.
        #[arg(long)]
        ok: Option<bool>,
        /// Effect kind the entry must have (repeatable: all of them).
        #[arg(long = "effects")]
        effects: Vec<String>,
        /// First word of the source.
        #[arg(long)]
        head: Option<String>,
        /// At most this many entries (default 100).
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long, global = true)]
        json: bool,
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
        /// State dir holding journal.redb (used when no daemon answers).
        #[arg(long = "state-dir", global = true)]
        state_dir: Option<PathBuf>,
    },
    /// Configuration helpers.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Adapters: typed outputs and effects of everyday tools.
    Adapter {
        #[command(subcommand)]
        command: AdapterCommand,
    },
    /// Bearer tokens for other principals (stored hashed in the state dir).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
        #[arg(long = "state-dir", global = true)]
        state_dir: Option<PathBuf>,
        /// The daemon `revoke` tells (it ends the principal's work when no valid token is left).
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
    },
    /// Plans waiting for a human: list, show, approve, deny.
    Plan {
        #[command(subcommand)]
        command: PlanCommand,
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
    },
    /// Print shell completions (e.g. `shoal completions bash > ~/.local/share/bash-completion/completions/shoal`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `shoal man > shoal.1`.
    Man,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// A new token for PRINCIPAL (or `--local`); the token alone is printed on the last line.
    Create {
        #[arg(required_unless_present = "local", conflicts_with = "local")]
        principal: Option<String>,
        /// A token whose principal is the local user (what the socket grants your own
        /// uid), for MCP clients that connect over HTTP.
        #[arg(long)]
        local: bool,
        /// Lifetime (90s, 30m, 1h, 2d); default: until revoked.
        #[arg(long)]
        ttl: Option<String>,
    },
    /// Tokens with their state (active, expired, revoked); never the secrets.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id or by the token itself; the daemon refuses it at once and,
    /// when its principal holds no other valid token, ends what that principal runs.
    Revoke {
        /// A token may start with `-` (its alphabet is base64url): taken as written.
        #[arg(allow_hyphen_values = true)]
        token: String,
    },
}

#[derive(Subcommand)]
enum PlanCommand {
    /// Live plans of every session (or of --session).
    List {
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One plan: effects, verdict, source.
    Show {
        plan_ref: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve a plan (its owner may then apply it).
    Approve { plan_ref: String },
    /// Deny a plan (it can no longer be approved or applied).
    Deny { plan_ref: String },
}

#[derive(Subcommand)]
enum AdapterCommand {
    /// The adapters sessions load: built-ins and user files.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Validate an adapter file (errors name file:line:column).
    Check { file: PathBuf },
}

#[derive(Subcommand)]
enum HistoryCommand {
    /// One entry in full, with its stored render and streams.
    Show { id: u64 },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file (default: the one the daemon would load).
    Check { file: Option<PathBuf> },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Daemon {
            socket,
            state_dir,
            config,
            http,
        } => {
            // Before any thread exists.
            shoal_base::procmem::limit_arenas();
            shoal_daemon::daemon::run(shoal_daemon::daemon::DaemonOptions {
                socket,
                state_dir,
                config,
                http,
            })
        }
        Command::Worker => {
            // Before any thread exists: the worker confines its only thread.
            shoal_base::procmem::limit_arenas();
            shoal_daemon::worker::main()
        }
        Command::Mcp {
            socket,
            session,
            token,
            token_file,
        } => match cli::shim::bearer(token, token_file.as_deref(), env("SHOAL_TOKEN")) {
            Ok(token) => cli::shim::run(socket, session.or_else(|| env("SHOAL_SESSION")), token),
            Err(e) => {
                eprintln!("shoal mcp: {e}");
                2
            }
        },
        Command::Status {
            json,
            watch,
            socket,
        } => cli::status::run(socket, json, watch),
        Command::Exec {
            src,
            session,
            json,
            value,
            socket,
        } => cli::exec::run(socket, &src, &session, json, value),
        Command::Attach {
            session,
            quiet,
            pty,
            socket,
        } => match pty {
            Some(pty) => cli::takeover::run(socket, &session, &pty),
            None => cli::attach::run(cli::attach::Opts {
                socket,
                session,
                quiet,
            }),
        },
        Command::Watch {
            session,
            all,
            socket,
        } => cli::watch::run(
            socket,
            (!all).then(|| session.unwrap_or_else(|| "default".into())),
        ),
        Command::History {
            command: Some(HistoryCommand::Show { id }),
            json,
            socket,
            state_dir,
            ..
        } => cli::history::show(socket, state_dir, id, json),
        Command::History {
            command: None,
            since,
            until,
            principal,
            ok,
            effects,
            head,
            limit,
            json,
            socket,
            state_dir,
        } => cli::history::run(
            socket,
            state_dir,
            cli::history::Filters {
                since,
                until,
                principal,
                ok,
                effects,
                head,
                limit,
            },
            json,
        ),
        Command::Config {
            command: ConfigCommand::Check { file },
        } => cli::config_check(file),
        Command::Adapter { command } => match command {
            AdapterCommand::List { json } => cli::adapter::list(json),
            AdapterCommand::Check { file } => cli::adapter::check(&file),
        },
        Command::Token {
            command,
            state_dir,
            socket,
        } => match command {
            TokenCommand::Create {
                principal,
                local: _,
                ttl,
            } => cli::leash::token_create(state_dir, principal.as_deref(), ttl),
            TokenCommand::List { json } => cli::leash::token_list(state_dir, json),
            TokenCommand::Revoke { token } => cli::leash::token_revoke(state_dir, socket, &token),
        },
        Command::Plan { command, socket } => match command {
            PlanCommand::List { session, json } => cli::leash::plan_list(socket, session, json),
            PlanCommand::Show { plan_ref, json } => cli::leash::plan_show(socket, &plan_ref, json),
            PlanCommand::Approve { plan_ref } => cli::leash::plan_decide(socket, &plan_ref, true),
            PlanCommand::Deny { plan_ref } => cli::leash::plan_decide(socket, &plan_ref, false),
        },
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "shoal", &mut out);
            cli::output::text(&String::from_utf8_lossy(&out));
            0
        }
        Command::Man => match man_page() {
            Ok(out) => {
                cli::output::text(&String::from_utf8_lossy(&out));
                0
            }
            Err(e) => {
                eprintln!("shoal man: {e}");
                1
            }
        },
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// The man page: `shoal(1)` followed by one page per subcommand (`shoal-exec(1)`, ...), in
/// one roff file that `man -l` shows whole.
fn man_page() -> std::io::Result<Vec<u8>> {
    let mut cli = Cli::command();
    cli.build();
    let mut out = Vec::new();
    clap_mangen::Man::new(cli.clone()).render(&mut out)?;
    for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("shoal-{}", sub.get_name());
        clap_mangen::Man::new(sub.clone().display_name(name)).render(&mut out)?;
    }
    Ok(out)
}

/// A non-empty environment variable.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}
