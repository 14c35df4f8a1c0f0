//! The daemon's end of a worker process: starting `shoal worker` with one
//! end of a socketpair as its stdin, in the session's cgroup, sending
//! [`Init`] and waiting for [`Ready`]. What the worker asks afterwards goes
//! to the handler the caller gives (`sessions/session/remote.rs`).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use super::pair::{Incoming, Pair};
use super::proto::{Init, Ready};

/// What every worker of this daemon starts from (set once at start).
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `shoal` binary.
    pub exe: PathBuf,
    /// The text of the daemon's config (what it runs with, whatever the
    /// file holds now).
    pub config: String,
    pub state_dir: PathBuf,
}

static LAUNCH: OnceLock<Launch> = OnceLock::new();

/// Where workers come from: the daemon sets it as it starts.
pub fn configure(launch: Launch) {
    let _ = LAUNCH.set(launch);
}

/// A started worker. A thread of its own reaps it; then whatever it left
/// in its cgroup is killed.
pub struct Started {
    pub pair: Arc<Pair>,
    pub pid: u32,
    /// Its cgroup (removed once it is reaped and empty).
    pub tracked: Arc<shoal_base::procs::Tracked>,
}

/// Start a worker for `principal`, its process (and every program it
/// starts) homed at `home`; `handler` takes what it sends once ready.
pub fn start(
    principal: &str,
    home: shoal_base::procs::Home,
    handler: impl FnMut(&Arc<Pair>, Incoming) + Send + 'static,
) -> Result<Started, String> {
    let launch = LAUNCH
        .get()
        .ok_or("this daemon starts no worker processes (not configured)")?;
    let (ours, theirs) =
        UnixStream::pair().map_err(|e| format!("cannot make the worker's pair: {e}"))?;
    let join = shoal_base::procs::prepare(Some(home), false);
    let mut cmd = Command::new(&launch.exe);
    // None of the daemon's own environment (a user's API keys) reaches a
    // token's process: only where things are and how to log.
    cmd.env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| passes(k)))
        .arg("worker")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own group, as every program of a session (the fallback
        // without cgroups tracks groups).
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            join.abandon();
            return Err(format!(
                "cannot start the worker {}: {e}",
                launch.exe.display()
            ));
        }
    };
    drop(cmd);
    let pid = child.id();
    // Into its cgroup before it is told anything: it starts no program
    // before its init.
    let adopted = join.adopt(pid as i32);
    let tracked = join.started(pid as i32);
    let ready = adopted
        .map_err(|e| format!("cannot move the worker into its cgroup: {e}"))
        .and_then(|()| handshake(&ours, launch, principal, READY_WITHIN));
    if let Err(e) = ready {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let pair = match Pair::start(ours, &format!("shoal-worker-{pid}"), handler) {
        Ok(p) => p,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cannot read the worker's pair: {e}"));
        }
    };
    let tracked = Arc::new(tracked);
    let left = tracked.clone();
    let reaper = std::thread::Builder::new()
        .name(format!("shoal-reap-{pid}"))
        .stack_size(64 << 10)
        .spawn(move || {
            let _ = child.wait();
            // What it left behind (a namespace holder, a program that
            // outlived its session's close) ends with it.
            left.kill();
            tracing::info!(pid, "worker process ended");
        });
    if let Err(e) = reaper {
        pair.close();
        return Err(format!("cannot start the worker's reaper: {e}"));
    }
    Ok(Started { pair, pid, tracked })
}

/// The daemon's variables a worker gets: where the user's files and
/// programs are, the locale, and the daemon's own settings.
fn passes(key: &std::ffi::OsStr) -> bool {
    let k = key.to_string_lossy();
    matches!(
        &*k,
        "HOME" | "PATH" | "USER" | "LOGNAME" | "LANG" | "TMPDIR" | "RUST_LOG" | "RUST_BACKTRACE"
    ) || ["LC_", "XDG_", "SHOAL_"].iter().any(|p| k.starts_with(p)) && !k.starts_with("SHOAL_TOKEN")
}

/// How long a worker may take to confine itself and say it is ready.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Send the init frame and read the worker's answer: ready, or why not.
fn handshake(
    stream: &UnixStream,
    launch: &Launch,
    principal: &str,
    within: std::time::Duration,
) -> Result<(), String> {
    let init = Init {
        principal: principal.to_string(),
        config: launch.config.clone(),
        state_dir: launch.state_dir.clone(),
        protected: shoal_policy::confine::protected(),
    };
    let mut line = serde_json::to_vec(&init).map_err(|e| e.to_string())?;
    line.push(b'\n');
    (&mut &*stream)
        .write_all(&line)
        .map_err(|e| format!("cannot send the worker its init: {e}"))?;
    // One byte at a time: what follows the answer is the pair's. Bounded
    // in time: every principal's new hosting waits for this one.
    let mut answer = Vec::new();
    stream
        .set_read_timeout(Some(within))
        .map_err(|e| e.to_string())?;
    BufReader::with_capacity(1, stream)
        .read_until(b'\n', &mut answer)
        .map_err(|e| format!("no answer from the worker within {within:?}: {e}"))?;
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    let j: serde_json::Value = serde_json::from_slice(&answer)
        .map_err(|_| "the worker ended before it was ready".to_string())?;
    if let Some(e) = j.get("error").and_then(|e| e.as_str()) {
        return Err(format!("the worker could not confine itself: {e}"));
    }
    let ready: Ready = serde_json::from_value(j.get("ready").cloned().unwrap_or_default())
        .map_err(|e| format!("not a ready frame: {e}"))?;
    tracing::debug!(pid = ready.pid, principal, "worker ready");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that never says it is ready fails its start (the caller
    /// kills it) instead of holding every other start back.
    #[test]
    fn a_worker_silent_at_start_fails_it() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let launch = Launch {
            exe: PathBuf::from("/nonexistent"),
            config: String::new(),
            state_dir: PathBuf::from("/nonexistent"),
        };
        let within = std::time::Duration::from_millis(50);
        let e = handshake(&ours, &launch, "agent:t", within).unwrap_err();
        assert!(e.contains("no answer from the worker"), "{e}");
    }
}
