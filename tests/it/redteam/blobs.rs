//! Attacks on the content store: blobs are addressed by the plain BLAKE3 of their bytes,
//! so a token principal that learns or guesses the hash of the local user's output asks
//! for it directly, through the kernel (`blob.get`), MCP `resources/read` of
//! `shoal://val/HASH` and `shoal_get` with a val ref. It must get nothing, and the refusal
//! must read exactly like the one for a hash nobody stored (no existence oracle: small
//! secrets could otherwise be brute-forced offline and confirmed). The token's own outputs
//! and every blob of the local user's stay readable.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let mut read = pj.clone();
    read.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    let keys = "opaque = \"deny\"\nauto_apply = \"in-grant\"";
    principal("agent:rb", keys, &read, &pj, &pj)
}

/// The output hashes of the caller's newest entry whose source starts with `head`.
fn output_hashes(c: &mut Conn, head: &str) -> Vec<String> {
    let es = c.ok("journal.query", json!({"head": head, "limit": 1}));
    let e = es
        .as_array()
        .and_then(|a| a.first())
        .unwrap_or_else(|| panic!("no {head} entry: {es}"));
    let hs: Vec<String> = e["outputs"]
        .as_array()
        .unwrap_or_else(|| panic!("no outputs: {e}"))
        .iter()
        .filter_map(|o| o["hash"].as_str().map(str::to_string))
        .collect();
    assert!(!hs.is_empty(), "no output hashes: {e}");
    hs
}

/// `(code, message)` of an error reply; `None` if it is not one.
fn error_of(r: &Value) -> Option<(Value, Value)> {
    let e = r.get("error")?;
    Some((e["code"].clone(), e["message"].clone()))
}

/// A hash nobody stored: `h` with its first digit changed.
fn unknown_like(h: &str) -> String {
    let first = if h.starts_with('0') { "1" } else { "0" };
    format!("{first}{}", &h[1..])
}

#[test]
fn another_principals_blobs_read_like_unknown_hashes() {
    let a = Arena::start(config, &[]);
    let mut rep = Report::default();

    // The local user prints the secret (the token may not read the file itself).
    let mut home = a.kernel(None, "home", None);
    let r = home.exec(&format!("cat {}", lit(&a.secret)));
    assert!(leaks(&r, &a.marker), "the user's cat: {r}");
    let theirs = output_hashes(&mut home.conn, "cat");

    // The attacker, on both surfaces, with an output of its own.
    let mut tk = a.kernel(Some("agent:rb"), "tok", None);
    let mut tm = a.mcp(Some("agent:rb"), "tok", None);
    let r = tk.exec(&format!("cat {}", lit(&a.secret)));
    rep.control(
        "the token may not read the secret itself",
        !leaks(&r, &a.marker),
        &clip(&r.to_string()),
    );
    let own = marker("OWN");
    let r = tk.exec(&format!("echo {own}"));
    assert!(leaks(&r, &own), "the token's echo: {r}");
    let mine = output_hashes(&mut tk.conn, "echo");

    // Bytes both printed (an empty stderr) are the token's own as well: it may read them.
    let only_theirs: Vec<&String> = theirs.iter().filter(|h| !mine.contains(h)).collect();
    assert!(!only_theirs.is_empty(), "no output of the user's alone");
    for h in only_theirs {
        for (form, hash) in [("HEX", h.clone()), ("blake3:HEX", format!("blake3:{h}"))] {
            let bad = unknown_like(h);
            let bad = if form == "HEX" {
                bad
            } else {
                format!("blake3:{bad}")
            };

            let r = tk.conn.call("blob.get", json!({"hash": hash}));
            let none = tk.conn.call("blob.get", json!({"hash": bad}));
            rep.judge(
                &format!("blob.get of the user's {form} [kernel]"),
                leaks(&r, &a.marker).then(|| clip(&r.to_string())),
            );
            rep.judge(
                &format!("blob.get of the user's {form} reads like an unknown hash [kernel]"),
                (error_of(&r).is_none() || error_of(&r) != error_of(&none)).then(|| {
                    format!(
                        "{} against {}",
                        clip(&r.to_string()),
                        clip(&none.to_string())
                    )
                }),
            );

            let uri = format!("shoal://val/{hash}");
            let r = tm.conn.call("resources/read", json!({"uri": uri}));
            let none = tm.conn.call(
                "resources/read",
                json!({"uri": format!("shoal://val/{bad}")}),
            );
            rep.judge(
                &format!("resources/read shoal://val/{form} of the user's [mcp]"),
                leaks(&r, &a.marker).then(|| clip(&r.to_string())),
            );
            rep.judge(
                &format!("resources/read shoal://val/{form} reads like an unknown hash [mcp]"),
                (error_of(&r).is_none() || error_of(&r) != error_of(&none)).then(|| {
                    format!(
                        "{} against {}",
                        clip(&r.to_string()),
                        clip(&none.to_string())
                    )
                }),
            );
            for reference in [uri.clone(), format!("val:blake3:{h}")] {
                let r = tm.conn.call(
                    "tools/call",
                    json!({"name": "shoal_get", "arguments": {"ref": reference}}),
                );
                rep.judge(
                    &format!("shoal_get {reference:.24}… of the user's [mcp]"),
                    leaks(&r, &a.marker).then(|| clip(&r.to_string())),
                );
            }
        }
    }

    // Controls: the token reads its own outputs, the user reads its own.
    let read_own = |c: &mut Conn, method: &str, p: Value, m: &str| {
        let r = c.call(method, p);
        (leaks(&r, m), clip(&r.to_string()))
    };
    let (k_ok, k_r) = mine
        .iter()
        .map(|h| read_own(&mut tk.conn, "blob.get", json!({"hash": h}), &own))
        .fold((false, String::new()), |acc, x| {
            (acc.0 || x.0, acc.1 + &x.1)
        });
    rep.control("the token's blob.get of its own output", k_ok, &k_r);
    let (m_ok, m_r) = mine
        .iter()
        .map(|h| {
            let uri = format!("shoal://val/{h}");
            read_own(&mut tm.conn, "resources/read", json!({"uri": uri}), &own)
        })
        .fold((false, String::new()), |acc, x| {
            (acc.0 || x.0, acc.1 + &x.1)
        });
    rep.control("the token's shoal://val of its own output", m_ok, &m_r);
    let (u_ok, u_r) = theirs
        .iter()
        .map(|h| read_own(&mut home.conn, "blob.get", json!({"hash": h}), &a.marker))
        .fold((false, String::new()), |acc, x| {
            (acc.0 || x.0, acc.1 + &x.1)
        });
    rep.control("the user's blob.get of its own output", u_ok, &u_r);
    let mut hm = mcp_conn(&a.d, "home", None, &a.proj, None, false);
    let (hm_ok, hm_r) = theirs
        .iter()
        .map(|h| {
            let uri = format!("shoal://val/{h}");
            read_own(&mut hm, "resources/read", json!({"uri": uri}), &a.marker)
        })
        .fold((false, String::new()), |acc, x| {
            (acc.0 || x.0, acc.1 + &x.1)
        });
    rep.control("the user's shoal://val of its own output", hm_ok, &hm_r);
    // The user also reads the token's output (the local user reads every blob).
    let (x_ok, x_r) = mine
        .iter()
        .map(|h| read_own(&mut home.conn, "blob.get", json!({"hash": h}), &own))
        .fold((false, String::new()), |acc, x| {
            (acc.0 || x.0, acc.1 + &x.1)
        });
    rep.control("the user's blob.get of the token's output", x_ok, &x_r);

    rep.finish("blobs");
}
