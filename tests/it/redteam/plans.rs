//! Plans must not reveal what the principal may not read: planning a write to a path
//! outside the token's read grants (`"x".save(P)`, `cp SRC P`) answers the same whether
//! P exists, is a directory or is missing (even a file's existence is a read of it). Judged
//! on the whole reply (text and structuredContent) of kernel `exec mode:"plan"`, `explain`
//! and MCP `shoal_plan`, each in a fresh session, with the file name replaced. Control: the
//! local user's plan does say the existing file is overwritten.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read = pj.clone();
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    // Two principals alike, so that every plan gets a fresh session under the per-principal
    // session limit.
    ["agent:plan-save", "agent:plan-cp"]
        .iter()
        .map(|name| {
            principal(
                name,
                "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true",
                &read,
                &pj,
                &pj,
            )
        })
        .collect()
}

/// The three names an outside target takes (same length, so nothing else shifts).
const NAMES: [&str; 3] = ["tgtfile0", "tgtdir00", "tgtnone0"];

/// `r` as text with every target name (also in the session's name), the plan_ref (a hash of
/// the source) and the expiry made one.
fn normal(r: &Value) -> String {
    let mut s = r.to_string();
    for n in NAMES {
        s = s.replace(n, "TARGET");
    }
    for key in ["plan_ref", "expires"] {
        for v in [
            &r["result"][key],
            &r["result"]["structuredContent"][key],
            &r["result"]["plan"][key],
        ] {
            if let Some(x) = v.as_str() {
                s = s.replace(x, key);
            } else if let Some(x) = v.as_i64() {
                s = s.replace(&x.to_string(), key);
            }
        }
    }
    s
}

/// The source planned for an outside target of this name.
type Source = fn(&Arena, &str) -> String;

/// Plan `src` in a fresh session of `who` by `how` (kernel plan, kernel explain, MCP plan).
fn plan_of(a: &Arena, who: Option<&str>, how: &str, session: &str, src: &str) -> Value {
    match how {
        "mcp" => {
            let mut m = a.mcp(who, session, None);
            m.conn.call(
                "tools/call",
                json!({"name": "shoal_plan", "arguments": {"src": src}}),
            )
        }
        "explain" => {
            let mut k = a.kernel(who, session, None);
            k.conn.call("explain", json!({"src": src}))
        }
        _ => {
            let mut k = a.kernel(who, session, None);
            k.conn.call("exec", json!({"src": src, "mode": "plan"}))
        }
    }
}

#[test]
fn plans_do_not_reveal_outside_paths() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();
    std::fs::write(a.out(NAMES[0]), "keep\n").expect("outside file");
    // A directory holding what `cp` would land on: its plan would say the copy overwrites it.
    std::fs::create_dir(a.out(NAMES[1])).expect("outside dir");
    std::fs::write(a.out(NAMES[1]).join("a"), "keep\n").expect("file in the outside dir");
    std::fs::write(a.p("a"), "a\n").expect("project file");
    let forms: [(&str, Source); 2] = [
        ("save", |a, n| format!("\"x\".save({})", lit(&a.out(n)))),
        ("cp", |a, n| {
            format!("cp {} {}", lit(&a.p("a")), lit(&a.out(n)))
        }),
    ];
    for (form, src) in forms {
        for how in ["plan", "explain", "mcp"] {
            let replies: Vec<Value> = NAMES
                .iter()
                .map(|n| {
                    let who = format!("agent:plan-{form}");
                    plan_of(
                        &a,
                        Some(&who),
                        how,
                        &format!("{form}-{how}-{n}"),
                        &src(&a, n),
                    )
                })
                .collect();
            for r in &replies {
                assert!(r.get("error").is_none(), "{form} via {how}: {r}");
            }
            if how == "explain" {
                // Fail closed: a target the principal may not look at may exist.
                assert_eq!(
                    replies[2]["result"]["reversibility"], "irreversible",
                    "{form}: an unknown target may be overwritten: {}",
                    replies[2]
                );
            }
            let base = normal(&replies[2]);
            let differs: Vec<String> = replies[..2]
                .iter()
                .zip(&NAMES[..2])
                .filter(|(r, _)| normal(r) != base)
                .map(|(r, n)| {
                    format!(
                        "{n} plans as {} but a missing path as {}",
                        clip(&r.to_string()),
                        clip(&replies[2].to_string())
                    )
                })
                .collect();
            let differs = (!differs.is_empty()).then(|| differs.join("; "));
            rep.judge(
                &format!("plan of {form} to an outside path reveals it [{how}]"),
                differs,
            );
        }
    }
    // Control: the local user's plan of the same write names the overwrite.
    let src = format!("\"x\".save({})", lit(&a.out(NAMES[0])));
    let r = plan_of(&a, None, "plan", "local", &src);
    rep.control(
        "the local user's plan says the existing file is overwritten",
        r.to_string().contains("overwrites"),
        &r.to_string(),
    );
    let r = plan_of(&a, None, "plan", "local", &src.replace(NAMES[0], NAMES[2]));
    rep.control(
        "the local user's plan of a new file loses nothing",
        !r.to_string().contains("overwrite"),
        &r.to_string(),
    );
    rep.finish("plans");
}
