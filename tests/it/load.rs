//! The CI version of `make load`: 100 MCP clients across 10 sessions, mixed
//! tools, for 10 s against the debug daemon. Every call must succeed; the
//! figures go to stderr (the real figures come from `make load`, release).

#[path = "../../benches/load/driver.rs"]
mod driver;

use std::time::Duration;

#[test]
fn hundred_clients_ten_sessions_ten_seconds_no_errors() {
    let o = driver::LoadOptions {
        bin: env!("CARGO_BIN_EXE_shoal").into(),
        clients: 100,
        sessions: 10,
        // SHOAL_LOAD_SECS stretches it (e.g. the full 60 s against the debug build).
        duration: Duration::from_secs(
            std::env::var("SHOAL_LOAD_SECS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(10),
        ),
        max_calls_per_client: 20_000,
    };
    let r = driver::run(&o).expect("load run");
    eprintln!("{r}");
    assert_eq!(r.errors, 0, "{r}");
    for (tool, t) in &r.per_tool {
        assert!(t.calls > 0, "no {tool} calls: {r}");
    }
}
