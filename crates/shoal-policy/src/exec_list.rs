//! Which files a token principal's children may execute (docs/leash.md,
//! Layers): the binaries its `proc_spawn` grants name, the program each
//! child starts, and what the kernel opens to run them (an ELF program's
//! interpreter, a script's `#!` interpreter). Landlock's execute right is
//! then granted on these files only, so a granted program that runs another
//! (`tar --checkpoint-action=exec=..`, `zip -TT`, `sqlite3 .shell`, a git
//! hook) cannot start one the grants do not name.

use std::io::Read;
use std::path::{Path, PathBuf};

use object::read::elf::{FileHeader, ProgramHeader};
use object::{elf, Endianness};

/// How much of a file is read to find its interpreter (the ELF header and
/// program headers, or a `#!` line, sit at its start).
const HEAD: usize = 4096;

/// `file` and what the kernel opens to execute it, recursively (a script
/// whose interpreter is a script ...), at most a few levels deep.
pub fn with_interpreters(file: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut next = Some(file.to_path_buf());
    while let Some(f) = next.take() {
        if out.contains(&f) || out.len() > 4 {
            break;
        }
        next = interpreter(&f);
        out.push(f);
    }
    out
}

/// `file` and, when it is an ELF program, its loader: what another program
/// needs to execute it. A script's `#!` interpreter is not among them: it
/// goes only to the child that runs the script itself (granting every child
/// the shell a granted script names would grant them all a shell).
pub fn with_loader(file: &Path) -> Vec<PathBuf> {
    let mut out = vec![file.to_path_buf()];
    let mut head = Vec::with_capacity(HEAD);
    let read = std::fs::File::open(file)
        .and_then(|f| f.take(HEAD as u64).read_to_end(&mut head))
        .is_ok();
    if read {
        out.extend(elf_interpreter(&head));
    }
    out
}

/// The interpreter the kernel opens to execute `file`, if it names one.
fn interpreter(file: &Path) -> Option<PathBuf> {
    let mut head = Vec::with_capacity(HEAD);
    std::fs::File::open(file)
        .ok()?
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .ok()?;
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|b| *b == b'\n').next()?;
        let text = std::str::from_utf8(line).ok()?.trim();
        let prog = text.split_whitespace().next()?;
        return Some(PathBuf::from(prog)).filter(|p| p.is_absolute());
    }
    elf_interpreter(&head)
}

fn elf_interpreter(head: &[u8]) -> Option<PathBuf> {
    let interp = |raw: &[u8]| {
        let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        let s = std::str::from_utf8(&raw[..end]).ok()?;
        Some(PathBuf::from(s)).filter(|p| p.is_absolute())
    };
    if let Ok(h) = elf::FileHeader64::<Endianness>::parse(head) {
        let e = h.endian().ok()?;
        for ph in h.program_headers(e, head).ok()? {
            if let Ok(Some(raw)) = ph.interpreter(e, head) {
                return interp(raw);
            }
        }
        return None;
    }
    let h = elf::FileHeader32::<Endianness>::parse(head).ok()?;
    let e = h.endian().ok()?;
    for ph in h.program_headers(e, head).ok()? {
        if let Ok(Some(raw)) = ph.interpreter(e, head) {
            return interp(raw);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_of(p: &Path) -> Vec<PathBuf> {
        with_interpreters(p)
    }

    #[test]
    fn finds_the_elf_interpreter_and_a_scripts_interpreter() {
        // A dynamically linked system program names the loader.
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let chain = with_interpreters(&sh);
        assert_eq!(chain[0], sh);
        if let Some(ld) = chain.get(1) {
            assert!(ld.to_string_lossy().contains("ld"), "{chain:?}");
        }
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        let chain = with_interpreters(&script);
        assert_eq!(chain[..2], [script.clone(), PathBuf::from("/bin/sh")]);
        // Another program executing the script gets the script alone.
        assert_eq!(with_loader(&script), vec![script.clone()]);
        assert_eq!(with_loader(&sh)[..], chain_of(&sh)[..]);
        // Text that names nothing, and a file that is not there.
        std::fs::write(&script, "echo hi\n").unwrap();
        assert_eq!(with_interpreters(&script), vec![script.clone()]);
        assert!(interpreter(&t.path().join("none")).is_none());
    }
}
