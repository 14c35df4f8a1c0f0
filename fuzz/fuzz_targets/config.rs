//! The config TOML (`shoal.toml`, strict, with `file:line:column` errors).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = shoal::config::parse(text, std::path::Path::new("f.toml")) {
        let _ = e.to_string();
    }
});
