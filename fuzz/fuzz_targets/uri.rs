//! `shoal://` resource URIs and `out:N` refs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::proto::{kernel, uri};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(u) = uri::parse(s) {
        let _ = u.get("path");
        let _ = u.get("since");
    }
    let _ = uri::percent_decode(s);
    if let Some(u) = uri::ref_to_uri(s) {
        assert!(uri::parse(&u).is_ok(), "{u}");
    }
    let _ = kernel::parse_ref(s);
});
