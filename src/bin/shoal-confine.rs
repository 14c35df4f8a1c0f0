//! `shoal-confine`: the small program a token principal's children start
//! through inside their namespaces (docs/leash.md, "Layers"). `run FD RULES
//! PROGRAM ARGV0 ARGS..` confines itself to the principal's rules, runs the
//! program and reports its status on FD; `hold` keeps a principal's
//! namespaces alive; `broker` starts children in them for a process that
//! may not (a token's worker). Small on purpose: every namespaced
//! child execs it, so its start is part of each spawn.

use std::process::ExitCode;

use shoal_policy::namespaces::{
    broker_main, confine_main, hold_main, BROKER_ARG, CONFINE_ARG, HOLD_ARG,
};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let code = match args.next() {
        Some(a) if a == CONFINE_ARG => confine_main(args.collect()),
        Some(a) if a == HOLD_ARG => hold_main(),
        Some(a) if a == BROKER_ARG => broker_main(args.collect()),
        _ => {
            eprintln!("shoal-confine: started by the shoal daemon only (run FD RULES PROGRAM ARGV0 ARGS.. | hold | broker [BWRAP])");
            2
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
