//! Process setup for `shoal daemon`: signal handlers (SIGTERM, SIGINT become
//! a `Shutdown` message), the socket-activated listener fd, private
//! directories (0700), logging to daily files and the panic hook that logs
//! panics. Nothing here starts an actor or prints to stdout.

use std::sync::Arc;

use actix::prelude::*;

use super::super::health::ActorStats;
use super::super::msg::Shutdown;
use super::Daemon;
use crate::config::Config;

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

pub(super) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Log lines queued for the appender thread.
const LOG_QUEUE_LINES: usize = 1024;

pub(super) fn init_logging(
    log_dir: &std::path::Path,
    config: &Config,
) -> Result<tracing_appender::non_blocking::WorkerGuard, String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
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
        .finish(appender);
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

pub(super) fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        tracing::error!(thread, "panic: {info}");
        prev(info);
    }));
}
