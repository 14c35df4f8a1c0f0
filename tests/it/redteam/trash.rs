//! Hiding data in the trash (rt3-b #16): a token that writes files in its project and
//! `rm`s them (without `--permanent`) used to keep every byte in its private trash
//! (`$TMPDIR/shoal-<uid>/principal/<hex>/trash`), unbounded, out of the project and past
//! the daemon's end. `[limits] token_trash` bounds it: the oldest entries are purged, and
//! what alone is larger than the cap is deleted for good. Judged on disk after every
//! removal; the local user's trash, not bounded, keeps everything (the control).

use std::os::unix::fs::MetadataExt;

use super::*;

/// The cap the daemon runs with: 1 MiB.
const CAP: u64 = 1 << 20;
/// The files removed: four of 400 KiB, one of 2 MiB (more than the cap alone), one more
/// of 400 KiB.
const FILES: &[(&str, u32)] = &[
    ("f0.bin", 400),
    ("f1.bin", 400),
    ("f2.bin", 400),
    ("f3.bin", 400),
    ("big.bin", 2048),
    ("f4.bin", 400),
];

/// A source that saves `kib` KiB of `x` to `name` (a 16 KiB block, appended).
fn write(name: &str, kib: u32) -> String {
    format!(
        "var k = \"xxxxxxxxxxxxxxxx\"; for i in 0..10 {{ k = k + k }}; var s = \"\"; \
         for i in 0..{} {{ s = s + k }}; s.save(\"{name}\"); s.len()",
        kib / 16
    )
}

/// Every file under `dir` (links not followed): its path and length.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path(), m.len()));
            }
        }
    }
    out
}

fn bytes(dir: &Path) -> u64 {
    files(dir).iter().map(|f| f.1).sum()
}

/// The names of the files under `dir` that end in `name` (the trash prefixes a timestamp).
fn holds(dir: &Path, name: &str) -> bool {
    files(dir).iter().any(|(p, _)| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(&format!("-{name}")))
    })
}

/// A daemon whose `TMPDIR` is its own (so the trash dirs are this test's alone), with
/// `token_trash = 1 MiB` and agent:t confined to the project.
fn arena() -> (Arena, PathBuf) {
    let root = Root::new();
    let proj = root.path().join("proj");
    let outside = root.path().join("outside");
    let tmp = root.path().join("tmp");
    for d in [&proj, &outside, &tmp] {
        std::fs::create_dir(d).expect("arena dir");
    }
    let secret = root.path().join("secret");
    let marker = marker("T");
    std::fs::write(&secret, &marker).expect("secret");
    let cfg = root.path().join("shoal.toml");
    let text = format!("[limits]\ntoken_trash = {CAP}\n") + &project_only("agent:t", &proj);
    std::fs::write(&cfg, text).expect("config");
    let cfg = cfg.to_string_lossy().into_owned();
    let t = tmp.to_string_lossy().into_owned();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", &cfg],
        &[("TMPDIR", &t)],
    );
    let arena = Arena {
        root,
        d,
        proj,
        outside,
        secret,
        marker,
    };
    (arena, tmp)
}

/// A token writes and removes 400 KiB files and one of 2 MiB; its trash never holds more
/// than `token_trash`, the 2 MiB file is deleted for good (its `rm` says so, and so did
/// its plan), and the newest files stay in the trash. The local user's same removals
/// keep every byte.
#[test]
fn a_tokens_trash_holds_at_most_token_trash() {
    let (a, tmp) = arena();
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0);
    let base = tmp.join(format!("shoal-{uid}"));
    let hex: String = "agent:t".bytes().map(|b| format!("{b:02x}")).collect();
    let token_trash = base.join("principal").join(hex).join("trash");
    let local_trash = base.join("trash");
    let mut token = a.kernel(Some("agent:t"), "trash-t", None);
    let mut local = a.kernel(None, "trash-local", None);
    let mut rep = Report::default();

    for (name, kib) in FILES {
        for ag in [&mut token, &mut local] {
            let r = ag.exec(&write(name, *kib));
            assert!(
                r["result"]["value"] == json!({"$": "int", "v": kib * 1024}),
                "{} writes {name}: {}",
                ag.who,
                clip(&r.to_string())
            );
            let plan = ag.conn.ok("explain", json!({"src": format!("rm {name}")}));
            let r = ag.exec(&format!("(rm {name}).out[0]"));
            assert!(!a.p(name).exists(), "{} removed {name}: {r}", ag.who);
            if ag.who == "local" {
                continue;
            }
            let held = bytes(&token_trash);
            rep.judge(
                &format!("the token's trash after rm {name} ({kib} KiB)"),
                (held > CAP).then(|| format!("it holds {held} bytes, past {CAP}")),
            );
            if *name == "big.bin" {
                rep.judge(
                    "rm of more than token_trash keeps nothing",
                    holds(&token_trash, name).then(|| {
                        format!("{name} is in the trash; rm said {}", clip(&r.to_string()))
                    }),
                );
                rep.judge(
                    "rm of more than token_trash says it is permanent",
                    (r["result"]["value"]["v"]["permanent"]["v"] != json!(true))
                        .then(|| format!("rm said {}", clip(&r.to_string()))),
                );
                rep.judge(
                    "the plan of rm of more than token_trash is irreversible",
                    (plan["reversibility"] != json!("irreversible"))
                        .then(|| format!("explain said {}", clip(&plan.to_string()))),
                );
            } else {
                rep.control(
                    &format!("the token's {name} is trashed"),
                    holds(&token_trash, name),
                    &clip(&r.to_string()),
                );
            }
        }
    }
    // The oldest went first: the newest two are kept.
    rep.control(
        "the token's trash keeps the newest files",
        holds(&token_trash, "f3.bin") && holds(&token_trash, "f4.bin"),
        &format!("{:?}", files(&token_trash)),
    );
    rep.judge(
        "the token's oldest trash is purged",
        ["f0.bin", "f1.bin", "f2.bin"]
            .iter()
            .find(|n| holds(&token_trash, n))
            .map(|n| format!("{n} is still in the trash")),
    );
    // The control: the local user's trash keeps every file, 3.6 MiB in all.
    let kept = bytes(&local_trash);
    rep.control(
        "the local user's trash is not bounded",
        FILES.iter().all(|(n, _)| holds(&local_trash, n)) && kept > 3 * CAP,
        &format!("{kept} bytes: {:?}", files(&local_trash)),
    );
    rep.finish("trash");
}
