//! `shoal mcp`: a byte pipe between stdio and the daemon socket.
//!
//! It writes one frame of its own, the `shoal/attach` notification carrying
//! `{session, token, cwd, env}`, then copies bytes both ways. The token comes
//! from `SHOAL_TOKEN` or `--token-file` (a file only its owner may read);
//! `--token` still works but warns, since argv is public. The token never
//! goes into the forwarded environment. It never prints to
//! stdout itself. Exit 0 when the client closes stdin (after the daemon has
//! answered what was sent); non-zero with one line on stderr when the daemon
//! cannot be reached or drops the connection.
//!
//! Two threads copy, one per direction, each blocked in a plain read until
//! its side has bytes.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shoal_proto::kernel::{AttachParams, EnvVars};

/// The warning `--token` prints.
pub const ARGV_WARNING: &str =
    "shoal mcp: warning: --token puts the token in the process list; use SHOAL_TOKEN or --token-file";

/// The bearer token of `shoal mcp`: `--token` (with a warning on stderr),
/// else `--token-file`, else `SHOAL_TOKEN` (`from_env`).
pub fn bearer(
    arg: Option<String>,
    file: Option<&std::path::Path>,
    from_env: Option<String>,
) -> Result<Option<String>, String> {
    if let Some(t) = arg {
        eprintln!("{ARGV_WARNING}");
        return Ok(Some(t));
    }
    match file {
        Some(p) => read_token_file(p).map(Some),
        None => Ok(from_env),
    }
}

/// The token in `path`: a regular file no group or other user may access
/// (refused otherwise, before it is read), trimmed.
pub fn read_token_file(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let md = f
        .metadata()
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    if !md.is_file() {
        return Err(format!(
            "--token-file {}: not a regular file",
            path.display()
        ));
    }
    if md.mode() & 0o077 != 0 {
        return Err(format!(
            "--token-file {}: mode {:04o} lets group or others read it; run `chmod 600 {}`",
            path.display(),
            md.mode() & 0o7777,
            path.display()
        ));
    }
    let mut text = String::new();
    f.take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let t = text.trim();
    if t.is_empty() {
        return Err(format!(
            "--token-file {}: the file is empty",
            path.display()
        ));
    }
    Ok(t.to_string())
}

pub fn run(socket: Option<PathBuf>, session: Option<String>, token: Option<String>) -> i32 {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let stream = match super::client::connect_or_start(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal mcp: cannot reach the daemon: {e}");
            return 1;
        }
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let attach = shoal_proto::rpc::Notification {
        jsonrpc: "2.0",
        method: "shoal/attach",
        // The client's environment and directory: a session this creates
        // starts with exactly these (docs/protocol.md §9).
        params: AttachParams {
            session,
            token,
            cwd,
            env: Some(forwarded_env()),
            ..AttachParams::default()
        },
    };
    let mut first = serde_json::to_vec(&attach).unwrap_or_default();
    first.push(b'\n');
    let mut to_daemon = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal mcp: {e}");
            return 1;
        }
    };
    if let Err(e) = to_daemon.write_all(&first) {
        eprintln!("shoal mcp: cannot write to the daemon: {e}");
        return 1;
    }

    let stdin_closed = Arc::new(AtomicBool::new(false));
    let closed = stdin_closed.clone();
    std::thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_daemon.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        closed.store(true, Ordering::SeqCst);
        let _ = to_daemon.shutdown(Shutdown::Write);
    });

    match copy_replies(&stream) {
        Ok(()) => {}
        // The client went away.
        Err(Lost::Client) => return 0,
        Err(Lost::Daemon(e)) => {
            eprintln!("shoal mcp: lost the daemon connection: {e}");
            return 1;
        }
    }
    if stdin_closed.load(Ordering::SeqCst) {
        0
    } else {
        eprintln!("shoal mcp: the daemon closed the connection");
        1
    }
}

/// The environment a session this attach creates starts with: the
/// client's, without the bearer token.
fn forwarded_env() -> EnvVars {
    let mut env = super::client::client_env();
    env.0.retain(|(k, _)| k != "SHOAL_TOKEN");
    env
}

enum Lost {
    Client,
    Daemon(io::Error),
}

/// Copy what the daemon writes to stdout until it closes the connection.
fn copy_replies(mut from_daemon: &UnixStream) -> Result<(), Lost> {
    let mut stdout = io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from_daemon.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => stdout
                .write_all(&buf[..n])
                .and_then(|_| stdout.flush())
                .map_err(|_| Lost::Client)?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Lost::Daemon(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn token_files_must_be_private() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tok");
        std::fs::write(&p, "  secret-token\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "secret-token");
        assert_eq!(
            bearer(None, Some(&p), Some("env".into()))
                .unwrap()
                .as_deref(),
            Some("secret-token")
        );
        assert_eq!(
            bearer(None, None, Some("env".into())).unwrap().as_deref(),
            Some("env")
        );
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = read_token_file(&p).unwrap_err();
            assert!(e.contains("chmod 600"), "{mode:o}: {e}");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, "\n").unwrap();
        assert!(read_token_file(&p).unwrap_err().contains("empty"));
        assert!(read_token_file(d.path()).is_err());
        assert!(read_token_file(&d.path().join("missing")).is_err());
    }
}
