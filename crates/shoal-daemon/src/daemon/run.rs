//! `shoal daemon`: load the config, make the private state and log dirs, take
//! the socket (or the one systemd passed), open the journal, start the actor
//! tree (the Daemon, which starts and supervises EventBus, JournalWriter and Listener:
//! `services.rs`) and run it; at exit remove
//! the socket and settle (`shutdown.rs`). Its own output is stderr and the log:
//! stdout carries protocol frames only.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;

use super::services::ServiceSet;
use super::setup::{
    create_private_dir, init_logging, install_panic_hook, register_signals, spawn_signal_handlers,
    take_listen_fd,
};
use super::shutdown::after_stop;
use super::{Daemon, DaemonInfo, DaemonOptions};
use crate::config::{self, Config};
use crate::event_bus::EventBus;
use crate::health::Registry;
use crate::journal_writer::RecordsInFlight;
use crate::listener;
use crate::sessions::live_tasks::TaskRegistry;
use crate::sessions::session::SessionShared;
use shoal_base::paths;
use shoal_journal as journal;

/// `shoal daemon`: returns the process exit code.
pub fn run(opts: DaemonOptions) -> i32 {
    // Socket activation first, before any thread exists.
    let activated = take_listen_fd();

    let (config_path, required) = paths::config_file(opts.config.as_deref());
    let loaded = match config::load(&config_path, required) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("shoal daemon: {e}");
            return 1;
        }
    };
    let config = Arc::new(loaded.config);
    let socket = paths::socket_path(opts.socket.as_deref());
    let state_dir = paths::state_dir(opts.state_dir.as_deref());
    let log_dir = paths::log_dir(&state_dir);
    if let Err(e) = create_private_dir(&state_dir).and_then(|_| create_private_dir(&log_dir)) {
        eprintln!(
            "shoal daemon: cannot create state dir {}: {e}",
            state_dir.display()
        );
        return 1;
    }
    let _guard = match init_logging(&log_dir, &config) {
        Ok(g) => g,
        Err(e) => {
            eprintln!(
                "shoal daemon: cannot set up logging in {}: {e}",
                log_dir.display()
            );
            return 1;
        }
    };
    install_panic_hook();
    super::setup::tighten_state_files(&state_dir);

    // Handlers go in before the socket exists: a client that sees the socket
    // may signal at once, and the default action would skip the cleanup.
    let sys = System::new();
    let signals = sys.block_on(async { register_signals() });

    let socket_activated = activated.is_some();
    let (std_listener, bound) = match activated {
        Some(l) => (l, None),
        None => match listener::prepare_socket(&socket) {
            Ok((l, bound)) => (l, Some(bound)),
            Err(e) => {
                tracing::error!("cannot listen on {}: {e}", socket.display());
                eprintln!("shoal daemon: {e}");
                return 1;
            }
        },
    };
    // The HTTP address is checked and bound before anything starts: a refusal is loud.
    let http_listener = match crate::http::bind(opts.http.as_deref(), &config.http) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("shoal daemon: {e}");
            if let Some(b) = bound {
                b.remove();
            }
            return 1;
        }
    };
    tracing::info!(
        pid = std::process::id(),
        socket = %socket.display(),
        state_dir = %state_dir.display(),
        config = ?loaded.path,
        socket_activated,
        "daemon starting (version {})",
        env!("CARGO_PKG_VERSION")
    );

    // Out of every token principal's reach (docs/leash.md): the state and
    // log dirs, the config, the socket (and its dir when it is ours),
    // the spill dir.
    let mut protected = vec![state_dir.clone(), log_dir.clone(), socket.clone()];
    // The config file given, and the default config dir (adapters, tokens).
    protected.push(config_path.clone());
    protected.extend(
        paths::config_file(None)
            .0
            .parent()
            .map(std::path::Path::to_path_buf),
    );
    protected.extend(
        socket
            .parent()
            .filter(|d| paths::is_default_socket_dir(d))
            .map(std::path::Path::to_path_buf),
    );
    protected.push(shoal_value::output::spill_dir());
    shoal_policy::confine::protect(protected);
    // Token PTY programs in namespaces where bubblewrap is installed,
    // started by a broker process (at the first of them).
    match std::env::current_exe() {
        Ok(exe) => {
            // A token-owned session evaluates in a worker process of this binary.
            crate::worker::launch::configure(crate::worker::launch::Launch {
                exe: exe.clone(),
                config: loaded.text.clone(),
                state_dir: state_dir.clone(),
            });
            shoal_policy::namespaces::init(exe, config.limits.token_tmp)
        }
        Err(e) => tracing::warn!("no namespaces nor workers for token principals: {e}"),
    }
    shoal_policy::install(&config.policy, config.plans.ttl.0, Some(state_dir.clone()));
    // A token's `rm` trashes into its private dir, on its own threads.
    shoal_lang::shell::trash::set_token_cap(config.limits.token_trash);

    // The journal: a corrupt or foreign file stops the start, untouched.
    let journal_path = state_dir.join("journal.redb");
    let opened = open_journal(&journal_path, &config);
    let (writer, start_seqs) = match opened {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("cannot open the journal {}: {e}", journal_path.display());
            eprintln!("shoal daemon: cannot open the journal: {e}");
            if let Some(b) = bound {
                b.remove();
            }
            return 1;
        }
    };
    let shutdown_writer = writer.clone();
    // Programs a dead daemon of this state dir left are killed; ours get a
    // cgroup tree, recorded (docs/processes.md). After the journal: its lock
    // says no other daemon uses this state dir.
    shoal_base::procs::init(&state_dir);

    let info = DaemonInfo {
        pid: std::process::id(),
        socket: socket.clone(),
        state_dir,
        config: loaded.path,
        log_dir,
        socket_activated,
        started: Instant::now(),
        started_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    };

    let draining: Arc<std::sync::Mutex<Vec<Arc<SessionShared>>>> = Arc::default();
    let draining_run = draining.clone();
    // Every task evaluation the sessions start is entered here; shutdown ends
    // what is left of them once the actor system stopped.
    let tasks = TaskRegistry::default();
    let tasks_run = tasks.clone();
    // Acknowledged execs whose journal record is still on its way to the
    // writer: the final flush waits for them.
    let records = Arc::new(RecordsInFlight::default());
    let records_run = records.clone();
    // The bus's subscriptions, seqs and inbox: what is still in the inbox at a clean stop
    // goes to the journal in `after_stop`.
    let book = crate::event_bus::SubscriberBook::default();
    let book_run = book.clone();
    let exit_code = Arc::new(AtomicI32::new(0));
    let exit_code_run = exit_code.clone();
    let http_config = config.clone();
    let started = sys.block_on(async move {
        let registry = Arc::new(Registry::default());
        let dreg = registry.register("daemon", "shoal", None);
        let signal_stats = dreg.stats.clone();
        // The first accept loop's socket; each restart accepts on another dup of it.
        let first = match std_listener.set_nonblocking(true).and_then(|_| {
            std_listener
                .try_clone()
                .and_then(tokio::net::UnixListener::from_std)
        }) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot register the listener: {e}");
                return false;
            }
        };
        let set = ServiceSet::new(
            writer,
            records_run,
            book_run,
            std_listener,
            config.daemon.max_restarts_per_minute,
            exit_code_run,
        );
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        // Served from the System's first turn, as the daemon is: the daemon keeps
        // what `daemon.status` and a token change need of it.
        let http = match http_listener
            .map(|l| crate::http::start(l, socket.clone(), &http_config))
            .transpose()
        {
            Ok(h) => h,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("shoal daemon: {e}");
                return false;
            }
        };
        let daemon = Daemon::create(move |ctx| {
            let mut d = Daemon::new(info, config, registry, dreg, set)
                .with_connections(open)
                .with_http(http)
                .with_draining(draining_run)
                .with_tasks(tasks_run);
            d.start_services(start_seqs, first, ctx);
            d
        });
        spawn_signal_handlers(daemon, signal_stats, signals);
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        tracing::info!(socket = %socket.display(), "daemon ready");
        eprintln!("shoal daemon: ready {}", socket.display());
        true
    });
    let code = if !started {
        1
    } else {
        match sys.run() {
            Ok(()) => exit_code.load(Ordering::Relaxed),
            Err(e) => {
                tracing::error!("actor system failed: {e}");
                1
            }
        }
    };
    if let Some(b) = bound {
        b.remove();
    }
    after_stop(&draining, &shutdown_writer, &book, &tasks, &records);
    tracing::info!(code, "daemon stopped");
    code
}

type OpenedJournal = (Arc<journal::JournalWriter>, Vec<(String, u64)>);

/// The daemon's redb page cache. It fills with the pages the writer commits
/// (~1.5 KB an exec) and stays full, so it is most of what a busy daemon's
/// resident set grows by; reads past it come from the OS page cache.
const JOURNAL_CACHE_BYTES: usize = 8 << 20;

/// Open `<state>/journal.redb` and start its writer thread.
fn open_journal(path: &std::path::Path, config: &Config) -> journal::Result<OpenedJournal> {
    let j = &config.journal;
    let store = Arc::new(journal::Store::open(
        path,
        journal::StoreOptions {
            retention: journal::Retention {
                max_entries: j.max_entries,
                max_bytes: j.max_bytes,
                ..Default::default()
            },
            cache_bytes: JOURNAL_CACHE_BYTES,
            ..Default::default()
        },
    )?);
    let start_seqs = EventBus::start_seqs(&store)?;
    let writer = journal::JournalWriter::start(
        store,
        journal::WriterConfig {
            durability: match j.durability {
                config::JournalDurability::Immediate => journal::Durability::Immediate,
                config::JournalDurability::Batched => journal::Durability::Batched,
            },
            flush_ms: j.flush_ms,
            ..Default::default()
        },
    )?;
    Ok((Arc::new(writer), start_seqs))
}
