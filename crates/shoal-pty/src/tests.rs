//! PTYs with real children: spawn, read, wait, exit, close, resize.

use std::time::Duration;

use super::*;

fn spec(cmd: &str, args: &[&str]) -> SpawnSpec {
    SpawnSpec {
        cmd: cmd.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        cwd: std::env::temp_dir(),
        env: child_env(std::env::vars().collect(), &[]),
        rows: 10,
        cols: 40,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn wait_text(t: &str, ms: u64) -> ReadOpts {
    ReadOpts {
        wait_for: Some(Matcher::parse(t).unwrap()),
        timeout: Some(Duration::from_millis(ms)),
        ..ReadOpts::default()
    }
}

fn gone(pid: i32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn echo_then_exit_is_reaped_with_status() {
    rt().block_on(async {
        let h = PtyHandle::open(
            &spec("sh", &["-c", "echo hi-there; exit 3"]),
            "t",
            &OpenPtys::default(),
        )
        .unwrap();
        let r = h.read(wait_text("hi-there", 5000)).await;
        assert_eq!(r.matched, Some(true), "{:?}", r.snapshot.screen.rows);
        assert_eq!(r.snapshot.screen.rows.len(), 10);
        // Event driven: once the child is gone a text wait returns at once.
        let r = h.read(wait_text("never-there", 10_000)).await;
        assert_eq!(r.matched, Some(false));
        assert!(!r.alive);
        assert_eq!(
            r.exit,
            Some(Exit {
                status: Some(3),
                signal: None
            })
        );
        assert!(gone(h.pid), "reaped");
    });
}

#[test]
fn close_kills_the_group_and_reports_sigkill() {
    rt().block_on(async {
        let h = PtyHandle::open(
            &spec("sh", &["-c", "sleep 100 & sleep 100; echo"]),
            "t",
            &OpenPtys::default(),
        )
        .unwrap();
        let pid = h.pid;
        assert!(h.alive());
        let exit = h.close().await;
        assert_eq!(
            exit.and_then(|e| e.signal_name()).as_deref(),
            Some("SIGKILL")
        );
        assert!(gone(pid));
        assert!(!h.alive());
        assert!(h.write(b"x".to_vec()).await.is_err());
        // A second close answers what is known.
        assert_eq!(h.close().await, exit);
    });
}

#[test]
fn input_echoes_and_cursor_tracks() {
    rt().block_on(async {
        let h = PtyHandle::open(&spec("cat", &[]), "t", &OpenPtys::default()).unwrap();
        let n = h.write(b"hello-pty\r".to_vec()).await.unwrap();
        assert_eq!(n, 10);
        let r = h.read(wait_text("re:hello-pty\\s+hello-pty", 5000)).await;
        assert_eq!(r.matched, Some(true), "{:?}", r.snapshot.screen.rows);
        assert!(r.snapshot.screen.cursor_row >= 1);
        assert!(r.snapshot.changed);
        let again = h.read(ReadOpts::default()).await;
        assert!(!again.snapshot.changed);
        assert_eq!(again.matched, None);
        h.close().await;
    });
}

#[test]
fn resize_reaches_the_child() {
    rt().block_on(async {
        let h = PtyHandle::open(
            &spec(
                "sh",
                &[
                    "-c",
                    "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done",
                ],
            ),
            "t",
            &OpenPtys::default(),
        )
        .unwrap();
        assert_eq!(h.read(wait_text("ready", 5000)).await.matched, Some(true));
        assert_eq!(h.resize(30, 100).await.unwrap(), (30, 100));
        let r = h.read(wait_text("30 100", 5000)).await;
        assert_eq!(r.matched, Some(true), "{:?}", r.snapshot.screen.rows);
        assert_eq!(r.snapshot.screen.rows.len(), 30);
        assert_eq!(h.info().cols, 100);
        h.close().await;
    });
}

#[test]
fn stable_waits_for_quiet() {
    rt().block_on(async {
        let h = PtyHandle::open(
            &spec("sh", &["-c", "echo a; sleep 0.2; echo b; sleep 100"]),
            "t",
            &OpenPtys::default(),
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        let r = h
            .read(ReadOpts {
                wait_for: Some(Matcher::parse("b").unwrap()),
                stable: Some(Duration::from_millis(100)),
                timeout: Some(Duration::from_secs(5)),
                ..ReadOpts::default()
            })
            .await;
        assert_eq!(r.matched, Some(true));
        assert!(t0.elapsed() >= Duration::from_millis(250));
        assert!(r.snapshot.screen.rows.iter().any(|l| l == "b"));
        // Quiet already: returns at once.
        let t0 = std::time::Instant::now();
        let r = h
            .read(ReadOpts {
                stable: Some(Duration::from_millis(50)),
                ..ReadOpts::default()
            })
            .await;
        assert_eq!(r.matched, Some(true));
        assert!(t0.elapsed() < Duration::from_secs(1));
        h.close().await;
    });
}

#[test]
fn timeout_answers_false() {
    rt().block_on(async {
        let h = PtyHandle::open(&spec("cat", &[]), "t", &OpenPtys::default()).unwrap();
        let t0 = std::time::Instant::now();
        let r = h.read(wait_text("nothing", 100)).await;
        assert_eq!(r.matched, Some(false));
        assert!(t0.elapsed() >= Duration::from_millis(100));
        assert!(r.alive);
        h.close().await;
    });
}

#[test]
fn spawn_failures_and_environment() {
    let e = PtyHandle::open(
        &spec("definitely-not-a-program-xyz", &[]),
        "t",
        &OpenPtys::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("not found"), "{e}");
    let env = child_env(
        vec![("A".into(), "1".into()), ("LISTEN_FDS".into(), "3".into())],
        &[("A".into(), "2".into())],
    );
    assert!(env.contains(&("A".into(), "2".into())));
    assert!(env.contains(&("TERM".into(), DEFAULT_TERM.into())));
    assert!(!env.iter().any(|(k, _)| k == "LISTEN_FDS"));
    rt().block_on(async {
        let mut s = spec(
            "sh",
            &["-c", "echo T=$TERM; tty; ps -o pid=,pgid=,sid= -p $$"],
        );
        s.env = child_env(vec![("PATH".into(), "/usr/bin:/bin".into())], &[]);
        let h = PtyHandle::open(&s, "t", &OpenPtys::default()).unwrap();
        let r = h.read(wait_text("re:/dev/pts/\\d+", 5000)).await;
        assert_eq!(r.matched, Some(true), "{:?}", r.snapshot.screen.rows);
        let text = r.snapshot.screen.text();
        assert!(text.contains("T=xterm-256color"), "{text}");
        h.close().await;
    });
}

#[test]
fn dropping_the_handle_kills() {
    rt().block_on(async {
        let table = OpenPtys::default();
        let h = PtyHandle::open(&spec("sleep", &["100"]), "t", &table).unwrap();
        let pid = h.pid;
        assert!(table.list().iter().any(|i| i.pid == pid));
        drop(h);
        assert!(table.list().is_empty());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !gone(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} still there"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
}

#[test]
fn scrollback_survives_the_exit() {
    rt().block_on(async {
        let mut s = spec("seq", &["1", "50"]);
        s.rows = 5;
        s.cols = 20;
        let h = PtyHandle::open(&s, "t", &OpenPtys::default()).unwrap();
        let r = h.read(wait_text("50", 5000)).await;
        assert_eq!(r.matched, Some(true));
        let r = h
            .read(ReadOpts {
                scrollback: Some(3),
                ..ReadOpts::default()
            })
            .await;
        let first: u32 = r.snapshot.screen.rows[0].parse().unwrap();
        let want: Vec<String> = (first - 3..first).map(|n| n.to_string()).collect();
        assert_eq!(r.snapshot.scrollback.unwrap(), want);
    });
}
