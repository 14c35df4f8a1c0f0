//! Replays the checked-in fuzz corpus (`tests/fuzz_corpus/<target>/*`)
//! through the same entry points the cargo-fuzz targets run
//! (`fuzz/entries.rs`), on stable, in `make test`. Every crash `make fuzz`
//! found lands here as a file (named after what it broke), so it stays fixed.
//!
//! Each input runs on a thread with a 2 MiB stack, the size of the daemon's
//! connection threads, so a stack overflow is caught here too.

#[path = "../../fuzz/entries.rs"]
mod entries;

use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(target)
}

#[test]
fn every_corpus_input_replays_cleanly() {
    let mut total = 0;
    for &(target, entry) in entries::TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for {target}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let name = f.display().to_string();
            let r = std::thread::Builder::new()
                .name(format!("fuzz-{target}"))
                .stack_size(2 << 20)
                .spawn(move || entry(&data))
                .unwrap()
                .join();
            assert!(r.is_ok(), "{name} panicked");
            total += 1;
        }
    }
    eprintln!("{total} corpus inputs replayed");
}
