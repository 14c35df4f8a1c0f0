//! What a token's child shares with the local user when it runs in the daemon's own
//! namespaces (`namespaces = "off"`): Landlock governs none of SysV shared memory or the
//! terminals under `/dev/pts`, so the child gets neither. The local user's segment holds a
//! marker the child tries to read; the local user's terminal is one the child tries to
//! type into. Judged by the marker in the child's replies and on the local user's screen;
//! the local user's own child does both (control), and the token's PTY program still
//! writes to its own terminal by name.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read = pj.clone();
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    principal(
        "agent:off",
        "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true\nnamespaces = \"off\"",
        &read,
        &pj,
        &pj,
    )
}

/// Python that prints the bytes of the SysV segment with `key` (or the error).
fn read_segment(key: u32) -> String {
    format!(
        "python3 {{\nimport ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         i = libc.shmget({key}, 0, 0)\nprint('id', i, ctypes.get_errno())\n\
         if i >= 0:\n    p = libc.shmat(i, None, 0)\n    print(ctypes.string_at(p, 64))\n}}"
    )
}

#[test]
fn a_child_outside_namespaces_reaches_no_ipc_segment_and_no_other_terminal() {
    let a = Arena::start(config, &[]);
    let mark = marker("M");
    let key: u32 = 0x5ea1_0000 | (std::process::id() & 0xffff);
    let mut local = a.kernel(None, "home", None);
    // The local user's segment, holding the marker.
    let made = local.exec(&format!(
        "python3 {{\nimport ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         libc.shmat.restype = ctypes.c_void_p\n\
         i = libc.shmget({key}, 4096, 0o1600)\np = libc.shmat(i, None, 0)\n\
         ctypes.memmove(p, b'{mark}', {})\nprint('made', i)\n}}",
        mark.len()
    ));
    assert!(made.to_string().contains("made"), "{made}");
    let control = local.exec(&read_segment(key));
    assert!(
        leaks(&control, &mark),
        "control: the local user reads it: {control}"
    );

    let mut agent = a.kernel(Some("agent:off"), "off", None);
    let r = agent.exec(&read_segment(key));
    assert!(r.to_string().contains("id"), "the attack ran: {r}");
    assert!(
        !leaks(&r, &mark),
        "ESCAPED: the child read the segment: {r}"
    );

    // The local user's terminal: a `cat` on a PTY, whose tty the child writes to.
    let open = local
        .conn
        .call("pty.open", json!({"cmd": "cat", "cols": 100, "rows": 10}));
    let id = open["result"]["pty_id"].clone();
    let pid = open["result"]["pid"].as_i64().expect("pid") as i32;
    let tty = std::fs::read_link(format!("/proc/{pid}/fd/0")).expect("the PTY's tty");
    let typed = marker("T");
    let write = |who: &mut Agent, text: &str| {
        who.exec(&format!(
            "python3 {{\nimport os\nfd = os.open('{}', os.O_WRONLY)\nos.write(fd, b'{text}\\n')\n}}",
            tty.display()
        ))
    };
    let r = write(&mut agent, &typed);
    let control_mark = marker("C");
    let c = write(&mut local, &control_mark);
    let screen = local.conn.call(
        "pty.read",
        json!({"pty_id": id, "wait_for": control_mark, "timeout_ms": 10000}),
    );
    assert!(leaks(&screen, &control_mark), "control: {c} {screen}");
    assert!(
        !leaks(&screen, &typed),
        "ESCAPED: the child wrote on the local user's terminal: {r} {screen}"
    );
    local.conn.call("pty.close", json!({"pty_id": id}));

    // The token's own PTY program still reaches its terminal by name.
    let own = marker("O");
    let open = agent.conn.call(
        "pty.open",
        json!({"cmd": "sh", "args": ["-c", format!("echo {own} > $(tty); sleep 30")]}),
    );
    let id = open["result"]["pty_id"].clone();
    let screen = agent.conn.call(
        "pty.read",
        json!({"pty_id": id, "wait_for": own, "timeout_ms": 10000}),
    );
    assert!(leaks(&screen, &own), "its own terminal: {open} {screen}");
    agent.conn.call("pty.close", json!({"pty_id": id}));
    // The segment goes with the local user.
    local.exec(&format!(
        "python3 {{\nimport ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmctl(libc.shmget({key}, 0, 0), 0, None)\n}}"
    ));
}
