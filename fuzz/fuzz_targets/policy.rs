//! Policy files: `[policy.principal."NAME"]` sections through the strict
//! config loader, and a parsed policy deciding a fixed set of effects.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::leash::{Effect, Policy};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let effects = [
        Effect::Opaque,
        Effect::FsWrite {
            paths: vec!["/tmp/x/../y".into()],
        },
        Effect::NetConnect {
            host: "github.com".into(),
            port: 443,
        },
        Effect::ProcSpawn {
            bin_hash: String::new(),
            argv0: "git".into(),
        },
    ];
    match shoal::config::parse(text, std::path::Path::new("f.toml")) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(c) => {
            let p = Policy::from_config(&c.policy, "uid:0");
            for name in p.principals.keys() {
                let _ = p.decide(name, &effects, Some("/home/u"));
                if let Some(pp) = p.get(name) {
                    let _ = shoal::leash::landlock::Rules::lower(pp, Some("/home/u"));
                }
            }
        }
    }
});
