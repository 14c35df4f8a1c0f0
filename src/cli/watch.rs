//! `shoal watch [SESSION|--all]`: the live view of `shoal attach` without a
//! prompt: what every client of a session (or of every session) runs, and the
//! plans that wait for a human, answered by a line `y` or `n` on stdin. It
//! never creates a session.

use std::collections::VecDeque;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use shoal_base::sync::Locked;

use super::live::{self, Item, Pending};
use super::output;

/// `session`: one session's view (`None`: every session's).
pub fn run(socket: Option<PathBuf>, session: Option<String>) -> i32 {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    let (mut c, already) = match live::open(&path, session.as_deref(), "watch", true) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("shoal watch: {e}");
            return 1;
        }
    };
    let width = crossterm::terminal::size().map_or(100, |(w, _)| usize::from(w));
    let filter = live::Filter {
        session: session.clone(),
        own_conn: None,
        width,
    };
    output::line(&format!(
        "watching {} · a line y or n answers the plan that waits · Ctrl-C ends",
        session
            .as_deref()
            .map_or("every session".to_string(), |s| format!("session {s}"))
    ));
    let waiting: Arc<Mutex<VecDeque<Pending>>> = Arc::default();
    for p in already {
        output::line(&p.text);
        waiting.locked().push_back(p);
    }
    {
        let waiting = waiting.clone();
        let path = path.clone();
        let answers = std::thread::Builder::new()
            .name("watch-stdin".into())
            .spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    let Some(yes) = live::answer(&line) else {
                        continue;
                    };
                    let first = waiting.locked().pop_front();
                    match first {
                        Some(p) => output::line(&live::decide(&path, &p, yes)),
                        None => output::line("(no plan waits)"),
                    }
                }
            });
        if let Err(e) = answers {
            eprintln!("shoal watch: cannot read answers: {e}");
        }
    }
    loop {
        let ev = match c.next_event() {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!("shoal watch: {e}");
                return 1;
            }
        };
        match filter.item(&ev) {
            None => {}
            Some(Item::Text(t)) => output::line(&t),
            Some(Item::Pending(p)) => {
                output::line(&p.text);
                let mut w = waiting.locked();
                if !w.iter().any(|x| x.plan_ref == p.plan_ref) {
                    w.push_back(p);
                }
            }
            Some(Item::Settled { plan_ref, text }) => {
                waiting.locked().retain(|p| p.plan_ref != plan_ref);
                output::line(&text);
            }
        }
    }
}
