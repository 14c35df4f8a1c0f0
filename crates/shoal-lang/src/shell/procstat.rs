//! Counts this process reads about itself from Linux `/proc`: open descriptors and zombie
//! children. The leak tests and the benchmarks use them; they never change a process.

/// Number of open file descriptors of this process.
pub fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Children of this process that are zombies (state `Z`).
pub fn zombie_children() -> usize {
    let me = std::process::id().to_string();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{name}/stat")) else {
            continue;
        };
        // "pid (comm) S ppid ..."; comm may contain spaces and parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let state = it.next();
        let ppid = it.next();
        if state == Some("Z") && ppid == Some(me.as_str()) {
            n += 1;
        }
    }
    n
}
