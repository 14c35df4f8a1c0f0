//! Client-side commands of the `shoal` binary (everything but the daemon).

pub mod adapter;
pub mod attach;
pub mod client;
pub mod exec;
pub mod history;
pub mod leash;
pub mod live;
pub mod output;
pub mod shim;
pub mod status;
pub mod takeover;
pub mod watch;

use std::path::PathBuf;

/// `shoal config check [F]`.
pub fn config_check(file: Option<PathBuf>) -> i32 {
    let (path, required) = shoal_base::paths::config_file(file.as_deref());
    match shoal_daemon::config::load(&path, required) {
        Ok(l) if l.path.is_none() => {
            output::line(&format!(
                "{}: no config file; defaults apply",
                path.display()
            ));
            0
        }
        Ok(_) => {
            output::line(&format!("{}: ok", path.display()));
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}
