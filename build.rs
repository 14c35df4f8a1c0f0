//! Link options for the `shoal` binary only (`rustc-link-arg-bins`: the
//! dependencies, tests and benches are built as before).
//!
//! `-z pack-relative-relocs` (DT_RELR): the ~27,000 relative relocations of a
//! position-independent executable shrink from a 650 KB `.rela.dyn`, which
//! ld.so reads whole at every start, to a bitmap of a few KB. glibc >= 2.36
//! honours it; older loaders refuse to run the binary (`GLIBC_ABI_DT_RELR`
//! not found), so SHOAL_NO_RELR=1 leaves it out.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SHOAL_NO_RELR");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && std::env::var_os("SHOAL_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
