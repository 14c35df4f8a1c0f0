//! The daemon's own memory footprint: allocator arenas and the resident
//! pages of code only its start-up ran.
//!
//! - [`limit_arenas`]: glibc gives every thread that allocates an arena of its
//!   own (up to 8 per core), each keeping freed memory for its thread. The
//!   daemon's threads (arbiter, journal writer, one worker per session,
//!   blocking readers) allocate little each; two arenas serve them all.
//! - [`release_startup_pages`]: start-up (argument and config parsing, the
//!   journal's inspection, the adapter catalog, logging set-up) touches code
//!   and read-only data scattered over the binary, and the kernel maps each
//!   touched page with its neighbours (fault-around). None of it runs again,
//!   yet it stays in the resident set. Once the daemon is ready, the clean
//!   read-only file mappings drop their page-table entries (`MADV_DONTNEED`):
//!   the pages stay in the page cache, and what the daemon uses again comes
//!   back on first touch as a minor fault. Mappings holding private
//!   (copy-on-write) pages are left alone: dropping those would lose data.

/// At most this many malloc arenas in the daemon process.
const ARENAS: i32 = 2;

/// Cap glibc's malloc arenas (call before any thread is started).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator tunables; M_ARENA_MAX takes a count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// One mapping of `/proc/self/smaps` that is safe to drop from the resident set.
#[derive(Debug, PartialEq, Eq)]
struct Clean {
    start: usize,
    end: usize,
}

/// The read-only (`r--p`, `r-xp`) file-backed mappings of `smaps` text with
/// no private pages (`Anonymous: 0 kB`) and some resident (`Rss` > 0).
fn clean_readonly_mappings(smaps: &str) -> Vec<Clean> {
    let mut out = Vec::new();
    let mut cur: Option<(Clean, bool)> = None;
    let mut rss = 0u64;
    let mut anon = u64::MAX;
    let mut finish = |cur: &mut Option<(Clean, bool)>, rss: u64, anon: u64| {
        if let Some((c, ok)) = cur.take() {
            if ok && rss > 0 && anon == 0 {
                out.push(c);
            }
        }
    };
    for line in smaps.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(first) = it.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                finish(&mut cur, rss, anon);
                let perms = it.next().unwrap_or("");
                let _offset = it.next();
                let _dev = it.next();
                let inode = it.next().unwrap_or("0");
                let path = it.next().unwrap_or("");
                let ok =
                    (perms == "r--p" || perms == "r-xp") && inode != "0" && path.starts_with('/');
                cur = Some((Clean { start, end }, ok));
                rss = 0;
                anon = u64::MAX;
                continue;
            }
        }
        let kb = || it.clone().next().and_then(|n| n.parse::<u64>().ok());
        match first {
            "Rss:" => rss = kb().unwrap_or(0),
            "Anonymous:" => anon = kb().unwrap_or(u64::MAX),
            _ => {}
        }
    }
    finish(&mut cur, rss, anon);
    out
}

/// Drop the resident pages of clean read-only file mappings (see the module
/// docs). Returns how many mappings were released.
pub fn release_startup_pages() -> usize {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    let maps = clean_readonly_mappings(&smaps);
    let mut n = 0;
    for m in &maps {
        // SAFETY: [start, end) is a whole read-only, file-backed private
        // mapping of this process with no copy-on-write pages (smaps says
        // `Anonymous: 0 kB`; being read-only, none can appear meanwhile).
        // MADV_DONTNEED only drops its page-table entries: later reads fault
        // the same file contents back in from the page cache.
        let r = unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            )
        };
        if r == 0 {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 1234 /usr/bin/shoal
Size:               1024 kB
Rss:                 200 kB
Anonymous:             0 kB
55d0c0100000-55d0c0200000 r-xp 00100000 fd:01 1234 /usr/bin/shoal
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
55d0c0200000-55d0c0210000 r--p 00200000 fd:01 1234 /usr/bin/shoal
Size:                 64 kB
Rss:                  64 kB
Anonymous:            64 kB
55d0c0210000-55d0c0220000 rw-p 00210000 fd:01 1234 /usr/bin/shoal
Size:                 64 kB
Rss:                  64 kB
Anonymous:             8 kB
7f0000000000-7f0000100000 r--p 00000000 00:00 0
Size:               1024 kB
Rss:                   4 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 fd:01 99 /usr/lib/libc.so.6
Size:               1024 kB
Rss:                   0 kB
Anonymous:             0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
Rss:                  12 kB
Anonymous:            12 kB
";

    #[test]
    fn only_clean_resident_readonly_file_mappings() {
        assert_eq!(
            clean_readonly_mappings(SMAPS),
            vec![
                Clean {
                    start: 0x55d0c0000000,
                    end: 0x55d0c0100000
                },
                Clean {
                    start: 0x55d0c0100000,
                    end: 0x55d0c0200000
                },
            ]
        );
    }

    #[test]
    fn released_code_still_runs() {
        // Drop this test process's clean code pages, then run code again:
        // it comes back from the page cache.
        assert!(release_startup_pages() > 0);
        let v: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        assert_eq!(v.iter().sum::<u64>(), 1_498_500);
        assert_eq!(format!("{:?}", clean_readonly_mappings("")), "[]");
    }
}
