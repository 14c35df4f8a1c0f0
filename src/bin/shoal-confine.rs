//! `shoal-confine`: the small program a token principal's children start
//! through inside their namespaces (docs/leash.md, "Layers"). `run FD RULES
//! PROGRAM ARGV0 ARGS..` confines itself to the principal's rules, runs the
//! program and reports its status on FD; `hold` keeps a principal's
//! namespaces alive for the daemon. Small on purpose: every namespaced
//! child execs it, so its start is part of each spawn.

use std::process::ExitCode;

use shoal_policy::namespaces::{confine_main, hold_main, CONFINE_ARG, HOLD_ARG};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let code = match args.next() {
        Some(a) if a == CONFINE_ARG => confine_main(args.collect()),
        Some(a) if a == HOLD_ARG => hold_main(),
        _ => {
            eprintln!("shoal-confine: started by the shoal daemon only (run FD RULES PROGRAM ARGV0 ARGS.. | hold)");
            2
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
