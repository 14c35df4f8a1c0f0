//! Granted tools told by a flag to read their options from a file or to run a program
//! (report rt3-b rows 4 and 6): `curl -K cfg` whose file says `connect-to` another host
//! (the kernel confines TCP by port only, so the host part of `net_connect` rests on the
//! plan), and `git push --receive-pack=CMD` / `git fetch --upload-pack=CMD` to a local
//! repository, which run CMD. Under `opaque = "deny"` they must not run, under `"ask"`
//! not without a human. Judged by a TCP accept on a loopback listener and by a marker
//! file. Controls: the local user's same call connects or creates the file, and the
//! `"ask"` principal's plan approved by a human does connect.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::approvals::{apply, human_approves, plan};
use super::*;

/// The host the grants name: it never resolves, so only a redirect reaches the listener.
const HOST: &str = "granted.invalid";

/// A listener on 127.0.0.1 that counts the connections it accepts (and drops each at once,
/// so a client gets an empty reply and ends).
fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(c);
        }
    });
    (port, n)
}

/// agent:cfg-deny (`opaque = "deny"`) and agent:cfg-ask (`"ask"`): the project, the system
/// dirs, `curl` and `git`, and TCP to `HOST:port` only.
fn config(port: u16) -> impl Fn(&Path, &Path) -> String {
    move |proj, _root| {
        let pj = Arena::proj_grant(proj);
        let mut sys = pj.clone();
        sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
        ["deny", "ask"]
            .iter()
            .map(|mode| {
                principal(
                    &format!("agent:cfg-{mode}"),
                    &format!(
                        "opaque = \"{mode}\"\nauto_apply = \"in-grant\"\nsession_write = true\n\
                         proc_spawn = [\"curl\", \"git\"]\nnet_connect = [\"{HOST}:{port}\"]"
                    ),
                    &sys,
                    &pj,
                    &pj,
                )
            })
            .collect()
    }
}

/// `git` in `dir` with a fixed identity; it must succeed.
fn git(dir: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .args(["-c", "user.name=rt", "-c", "user.email=rt@invalid"])
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?}");
}

#[test]
fn option_files_and_program_flags_are_opaque() {
    if !have_tools(
        "option_files_and_program_flags_are_opaque",
        &["curl", "git"],
    ) {
        return;
    }
    let (port, accepted) = listener();
    let a = Arena::start(config(port), &[]);
    let mut rep = Report::default();
    let cfg = a.p("c.cfg");
    std::fs::write(
        &cfg,
        format!("connect-to = \"{HOST}:{port}:127.0.0.1:{port}\"\nsilent\n"),
    )
    .expect("config file");
    let url = format!("http://{HOST}:{port}/");
    let connects = [
        format!("curl -K {} {url}", cfg.display()),
        format!("curl --conf {} {url}", cfg.display()),
        format!("curl -sK {} {url}", cfg.display()),
    ];
    // A repository to push from and one to push to, both in the project.
    let work = a.p("work");
    std::fs::create_dir(&work).expect("work");
    git(&work, &["init", "-q"]);
    git(&work, &["commit", "-q", "--allow-empty", "-m", "x"]);
    git(a.proj.as_path(), &["init", "-q", "--bare", "r.git"]);
    let ran = a.p("pack-ran");
    let runs = [
        format!(
            "cd {}\ngit push \"--receive-pack=: > {};\" {} HEAD",
            lit(&work),
            ran.display(),
            lit(&a.p("r.git"))
        ),
        format!(
            "cd {}\ngit fetch \"--upload-pack=: > {};\" {}",
            lit(&work),
            ran.display(),
            lit(&a.p("r.git"))
        ),
    ];
    let mut agents: Vec<Agent> = ["deny", "ask"]
        .iter()
        .flat_map(|mode| {
            let who = format!("agent:cfg-{mode}");
            [
                a.kernel(Some(&who), &format!("{mode}-k"), None),
                a.mcp(Some(&who), &format!("{mode}-m"), None),
            ]
        })
        .collect();
    let mut local = a.kernel(None, "local", None);
    for src in &connects {
        for ag in agents.iter_mut() {
            ag.home();
            let before = accepted.load(Ordering::SeqCst);
            let r = ag.exec(src);
            let after = accepted.load(Ordering::SeqCst);
            rep.judge(
                &format!("4 {src} [{}]", ag.label()),
                (after > before)
                    .then(|| format!("the listener accepted: {}", clip(&r.to_string()))),
            );
        }
        let before = accepted.load(Ordering::SeqCst);
        let r = local.exec(src);
        rep.control(
            &format!("4 the local user's {src} connects"),
            accepted.load(Ordering::SeqCst) > before,
            &r.to_string(),
        );
    }
    for src in &runs {
        let judge = Judge::Absent(ran.clone());
        let mut attackers: Vec<&mut Agent> = agents.iter_mut().collect();
        rep.run_with(
            &format!("6 {}", src.lines().last().unwrap_or("")),
            &judge,
            &mut attackers,
            Some(&mut local),
            |ag| vec![ag.exec(src)],
        );
    }
    // Control: under "ask", a human's approval lets the same call run.
    let ask = agents
        .iter_mut()
        .find(|ag| ag.who == "agent:cfg-ask" && !ag.mcp)
        .expect("the ask agent");
    ask.home();
    let pr = plan(ask, &connects[0]);
    human_approves(&a, &pr);
    let before = accepted.load(Ordering::SeqCst);
    let r = apply(ask, &pr);
    rep.control(
        "4 a human-approved curl -K applies under opaque = \"ask\"",
        accepted.load(Ordering::SeqCst) > before,
        &r.to_string(),
    );
    rep.finish("option files and program flags");
}
