//! Process setup for `shoal daemon`: signal handlers (SIGTERM, SIGINT become
//! a `Shutdown` message), the socket-activated listener fd, private
//! directories (0700), logging to daily files and the panic hook that logs
//! panics. Nothing here starts an actor or prints to stdout.

use std::sync::Arc;

use actix::prelude::*;

use super::Daemon;
use crate::config::Config;
use crate::health::ActorStats;
use crate::msg::Shutdown;

pub(super) type Signals = Vec<(actix_rt::signal::unix::Signal, &'static str)>;

pub(super) fn register_signals() -> Signals {
    use actix_rt::signal::unix::{signal, SignalKind};
    let mut out = Vec::new();
    for (kind, name) in [
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::interrupt(), "SIGINT"),
    ] {
        match signal(kind) {
            Ok(s) => out.push((s, name)),
            Err(e) => tracing::error!("cannot install the {name} handler: {e}"),
        }
    }
    out
}

pub(super) fn spawn_signal_handlers(
    daemon: Addr<Daemon>,
    stats: Arc<ActorStats>,
    signals: Signals,
) {
    for (mut s, name) in signals {
        let daemon = daemon.clone();
        let stats = stats.clone();
        actix_rt::spawn(async move {
            if s.recv().await.is_some() {
                tracing::info!("received {name}");
                stats.enqueue();
                daemon.do_send(Shutdown {
                    reason: format!("received {name}"),
                });
            }
        });
    }
}

/// The first `LISTEN_FDS` socket, when systemd passed one to this pid.
pub(super) fn take_listen_fd() -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let fd = sd_notify::listen_fds().ok()?.next()?;
    // SAFETY: systemd passed this fd to our pid (LISTEN_PID checked by
    // sd_notify) and nothing else in the process owns it.
    Some(unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) })
}

/// Create `dir` `0700`, or tighten it to `0700` when it exists with a looser
/// mode and belongs to this uid (a directory of someone else's is left as it
/// is: the daemon cannot change it and does not pretend to).
pub(super) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    shoal_base::paths::private_dir(dir)
}

/// Files of the state dir an older daemon (or `shoal token create` under a
/// loose umask) may have left readable: tightened to `0600` at start.
pub(super) fn tighten_state_files(state_dir: &std::path::Path) {
    for name in ["tokens.json", "journal.redb"] {
        let p = state_dir.join(name);
        if let Err(e) = shoal_base::paths::tighten_file(&p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot make {} private: {e}", p.display());
            }
        }
    }
}

/// Log lines queued for the appender thread.
const LOG_QUEUE_LINES: usize = 1024;

pub(super) fn init_logging(
    log_dir: &std::path::Path,
    config: &Config,
) -> Result<tracing_appender::non_blocking::WorkerGuard, String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    private_logs(log_dir);
    let appender = tracing_appender::rolling::RollingFileAppender::builder()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("shoal")
        .filename_suffix("log")
        .max_log_files(config.daemon.log_keep_days)
        .build(log_dir)
        .map_err(|e| e.to_string())?;
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        // The queue is allocated and touched whole at start (32 bytes a line); past it a
        // logging thread waits for the file write (lossy(false)).
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .finish(PrivateLog {
            inner: appender,
            dir: log_dir.to_path_buf(),
            next_check: std::time::Instant::now() + LOG_MODE_CHECK,
        });
    let filter = std::env::var("SHOAL_LOG")
        .ok()
        .filter(|s| !s.is_empty())
        .and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(&config.daemon.log_level));
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(false),
        )
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(guard)
}

/// How often the log writer makes sure every log file is `0600` (a new day's
/// file is created by the appender with the process umask).
const LOG_MODE_CHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// Today's log file created `0600` before the appender opens it (it keeps the
/// mode of a file that exists), and every log file in `dir` made `0600`.
fn private_logs(dir: &std::path::Path) {
    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
    let _ = shoal_base::paths::private_file(&dir.join(format!("shoal.{today}.log")));
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "log") {
                let _ = shoal_base::paths::tighten_file(&p);
            }
        }
    }
}

/// The rolling appender, with the log files' modes kept `0600` (checked on a
/// write at most every [`LOG_MODE_CHECK`]; the log dir is `0700` meanwhile).
struct PrivateLog {
    inner: tracing_appender::rolling::RollingFileAppender,
    dir: std::path::PathBuf,
    next_check: std::time::Instant,
}

impl std::io::Write for PrivateLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let now = std::time::Instant::now();
        if now >= self.next_check {
            self.next_check = now + LOG_MODE_CHECK;
            private_logs(&self.dir);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(super) fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        tracing::error!(thread, "panic: {info}");
        prev(info);
    }));
}
