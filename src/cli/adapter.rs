//! `shoal adapter list [--json]` and `shoal adapter check FILE`: the
//! adapters a session loads (built-ins plus user files in
//! `$XDG_CONFIG_HOME/shoal/adapters/`) and validation of one file.

use std::path::Path;

use serde_json::{json, Value as Json};
use shoal_lang::adapters::{self, Adapter, Catalog, Form, Source};

use super::output;

fn source(a: &Adapter) -> String {
    match &a.source {
        Source::Builtin => "built-in".into(),
        Source::User(p) => p.display().to_string(),
    }
}

fn form_json(f: &Form) -> Json {
    json!({
        "sub": f.words.join(" "),
        "invoke": f.invoke,
        "parse": f.output.as_ref().map(|o| o.parser.name()),
        "type": f.output.as_ref().map(|o| o.ty.to_string()),
        "effects": f.effects.iter().map(|t| t.text.clone()).collect::<Vec<_>>(),
        "ok_codes": f.ok_codes,
        "about": f.about,
    })
}

fn forms(a: &Adapter) -> Vec<&Form> {
    a.root.iter().chain(a.subs.iter()).collect()
}

/// `shoal adapter list`.
pub fn list(json_out: bool) -> i32 {
    let cat = Catalog::load(adapters::user_dir().as_deref());
    if json_out {
        let v = json!({
            "adapters": cat.list().iter().map(|a| json!({
                "name": a.name,
                "bin": a.bin,
                "class": a.class,
                "source": source(a),
                "forms": forms(a).into_iter().map(form_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "warnings": cat.warnings,
        });
        output::line(&v.to_string());
        return 0;
    }
    let mut out = format!(
        "{:<16} {:<12} {:<9} SUB-COMMANDS\n",
        "NAME", "CLASS", "SOURCE"
    );
    for a in cat.list() {
        let subs: Vec<String> = forms(a)
            .iter()
            .map(|f| {
                if f.words.is_empty() {
                    "(alone)".to_string()
                } else {
                    f.words.join(" ")
                }
            })
            .collect();
        let src = match &a.source {
            Source::Builtin => "built-in".to_string(),
            Source::User(_) => "user".to_string(),
        };
        out.push_str(&format!(
            "{:<16} {:<12} {:<9} {}\n",
            a.name,
            a.class,
            src,
            subs.join(", ")
        ));
    }
    out.push_str(&format!("{} adapters\n", cat.len()));
    output::text(&out);
    for w in &cat.warnings {
        eprintln!("warning: {w}");
    }
    0
}

/// `shoal adapter check FILE`: exit 0 when the file is a valid adapter.
pub fn check(file: &Path) -> i32 {
    match adapters::load_user_file(file) {
        Ok(a) => {
            let n = forms(&a).len();
            let shadow = Catalog::builtin().get(&a.name).is_some();
            output::line(&format!(
                "{}: ok (adapter `{}`, {n} form{}{})",
                file.display(),
                a.name,
                if n == 1 { "" } else { "s" },
                if shadow {
                    ", overrides the built-in"
                } else {
                    ""
                }
            ));
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}
