//! `shoal exec SRC`: run source through the daemon (starting it if needed),
//! print the render (or the JSON result with `--json`), exit 1 on error.

use std::io::IsTerminal;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::client::{connect_or_start, Client};
use super::output;
use shoal_proto::kernel::{AttachParams, ExecParams, KernelRequest, PositionParam};

pub fn run(
    socket: Option<PathBuf>,
    src: &str,
    session: &str,
    as_json: bool,
    value_position: bool,
) -> i32 {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let stream = match connect_or_start(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal exec: cannot reach the daemon: {e}");
            return 1;
        }
    };
    let mut client = match Client::new(stream) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("shoal exec: {e}");
            return 1;
        }
    };
    let tty = std::io::stdout().is_terminal();
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let mut attach = AttachParams::client(Some(session), "cli", tty);
    attach.cwd = cwd;
    attach.env = Some(super::client::client_env());
    let exec = ExecParams {
        position: Some(if value_position {
            PositionParam::Value
        } else {
            PositionParam::Stmt
        }),
        ..ExecParams::of(src)
    };
    let result = client
        .call(&KernelRequest::Attach(attach))
        .and_then(|r| match r {
            Ok(_) => client.call(&KernelRequest::Exec(exec)),
            Err(e) => Ok(Err(e)),
        });
    match result {
        Err(e) => {
            eprintln!("shoal exec: {e}");
            1
        }
        Ok(Ok(v)) => {
            if as_json {
                output::line(&serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                let render = v.get("render").and_then(Value::as_str).unwrap_or("");
                // A statement's null result (a `let`, an assignment) prints nothing.
                let is_null = v.get("value") == Some(&json!({"$": "null"}));
                if !render.is_empty() && !is_null {
                    output::line(render.trim_end_matches('\n'));
                }
                print_warnings(v.get("warnings"));
            }
            0
        }
        Ok(Err(e)) => {
            let e = e.0;
            if as_json {
                output::line(
                    &serde_json::to_string_pretty(&json!({"error": e})).unwrap_or_default(),
                );
            } else {
                print_error(&e);
            }
            1
        }
    }
}

/// A failed exec on stderr: `error[code]: message`, its hint, the program's
/// stderr and the warnings (`shoal attach` prints failures the same way).
pub fn print_error(e: &Value) {
    let msg = e.get("message").and_then(Value::as_str).unwrap_or("error");
    let code = e
        .pointer("/data/code")
        .and_then(Value::as_str)
        .map(|c| format!("[{c}]"))
        .unwrap_or_default();
    eprintln!("error{code}: {msg}");
    if let Some(h) = e.pointer("/data/hint").and_then(Value::as_str) {
        eprintln!("hint: {h}");
    }
    if let Some(s) = e
        .pointer("/data/stderr")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        eprint!("{s}");
    }
    print_warnings(e.pointer("/data/warnings"));
}

/// Likely bash habits the daemon noticed, on stderr (`warning[code]: …`).
pub fn print_warnings(ws: Option<&Value>) {
    for w in ws.and_then(Value::as_array).into_iter().flatten() {
        let field = |k: &str| w.get(k).and_then(Value::as_str).unwrap_or("");
        eprintln!("warning[{}]: {}", field("code"), field("message"));
        eprintln!("  hint: {}", field("hint"));
    }
}
