//! Link options for the `shoal` binary only (`rustc-link-arg-bins`: the
//! dependencies, tests and benches are built as before).
//!
//! - `-z pack-relative-relocs` (DT_RELR): the ~27,000 relative relocations
//!   of a position-independent executable shrink from a 650 KB `.rela.dyn`,
//!   which ld.so reads whole at every start, to a bitmap of a few KB.
//!   glibc >= 2.36 honours it; older loaders refuse to run the binary
//!   (`GLIBC_ABI_DT_RELR` not found), so SHOAL_NO_RELR=1 leaves it out.
//! - In release builds, `config/link/startup.order` (lld
//!   `--symbol-ordering-file`): the functions that the daemon's start and its
//!   idle wait run, placed side by side at the front of `.text`. The kernel
//!   maps file pages around each fault (fault-around, large folios), so code
//!   scattered over the 13 MB of text makes ~7 MB of it resident at idle;
//!   clustered, about 1 MB. Symbols that no longer exist are skipped
//!   (`--no-warn-symbol-ordering`); `make startup-order` regenerates the file
//!   from a profile of the current build. SHOAL_NO_SYMBOL_ORDER=1 leaves it
//!   out (a linker other than lld, or to measure without it). The file is not
//!   a rerun-if-changed input here (a rerun would rebuild the library too):
//!   `src/main.rs` includes it, so a new order relinks the binary only.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHOAL_NO_RELR");
    println!("cargo:rerun-if-env-changed=SHOAL_NO_SYMBOL_ORDER");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if !linux {
        return;
    }
    if std::env::var_os("SHOAL_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = Path::new(&dir).join("config/link/startup.order");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if release && order.is_file() && std::env::var_os("SHOAL_NO_SYMBOL_ORDER").is_none() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
