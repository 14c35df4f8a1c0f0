//! Tests of `value::output`: spilling, reading back, quotas and the spill directory.

use super::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn small_stays_in_memory() {
    let mut s = OutputSink::new(16);
    s.push(b"hello ");
    s.push(b"world");
    let (b, dropped) = s.finish();
    assert!(!b.is_spilled());
    assert_eq!(dropped, 0);
    assert_eq!(&b[..], b"hello world");
    assert_eq!(b.len(), 11);
    assert_eq!(&*b.head(5), b"hello");
}

#[test]
fn large_spills_and_reads_back() {
    {
        let mut s = OutputSink::new(1000);
        let mut want = Vec::new();
        for i in 0..500u32 {
            let chunk = format!("line {i}\n");
            want.extend_from_slice(chunk.as_bytes());
            s.push(chunk.as_bytes());
        }
        let (b, dropped) = s.finish();
        assert_eq!(dropped, 0);
        assert!(b.is_spilled());
        let path = b.spill_path().expect("path").to_path_buf();
        assert!(path.exists());
        let mode = fs::metadata(path.parent().expect("dir"))
            .expect("dir")
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let fmode = fs::metadata(&path).expect("file").mode();
        assert_eq!(fmode & 0o777, 0o600);
        assert_eq!(b.len(), want.len());
        assert_eq!(&*b.head(7), b"line 0\n");
        assert_eq!(&*b.head(2000), &want[..2000]);
        let mut r = Vec::new();
        b.reader().read_to_end(&mut r).expect("read");
        assert_eq!(r, want);
        let mut w = Vec::new();
        b.write_to(&mut w).expect("write");
        assert_eq!(w, want);
        assert_eq!(&*b.read_all().expect("all"), &want[..]);
        assert_eq!(&b[..], &want[..]);
        assert!(b == OutputBytes::from(want.clone()));
        let bounded = b.bounded(10);
        assert!(bounded.starts_with(b"line 0\nlin"));
        assert!(String::from_utf8_lossy(&bounded).contains("more not shown"));
        let c = b.clone();
        drop(b);
        assert!(path.exists(), "a clone keeps the file");
        drop(c);
        assert!(!path.exists(), "last drop removes the file");
    }
}

#[test]
fn len_does_not_load() {
    let mut s = OutputSink::new(10);
    s.push(&[1u8; 100]);
    let (b, _) = s.finish();
    assert_eq!(b.len(), 100);
    match &b.0 {
        Repr::Spilled(sp) => assert!(sp.loaded.get().is_none()),
        Repr::Mem(_) => panic!("not spilled"),
    }
}

#[test]
fn the_tail_keeps_the_last_bytes_of_each_stream() {
    let t = OutputTail::new();
    t.push(false, b"hello ");
    t.push(true, b"oops");
    t.push(false, b"world");
    assert_eq!(t.snapshot(), ("hello world".into(), "oops".into()));
    let big = vec![b'x'; TAIL_BYTES * 3];
    t.push(false, &big);
    t.push(false, b"end");
    let (out, _) = t.snapshot();
    assert_eq!(out.len(), TAIL_BYTES);
    assert!(out.ends_with("xend"));
    // A multi-byte character cut at the front is dropped, not mangled.
    let t = OutputTail::new();
    let mut s = "é".repeat(TAIL_BYTES / 2).into_bytes();
    s.push(b'z');
    t.push(false, &s);
    let (out, _) = t.snapshot();
    assert!(out.ends_with("éz") && !out.contains('\u{fffd}'), "{out:?}");
}
