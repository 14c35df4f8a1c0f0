//! Effect lists as JSON (what cap.request and stored plans carry): parsed,
//! decided under a scoped policy, named and reported.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::leash::{effect, plan, policy, Effect};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Some(items) = v.as_array() else {
        return;
    };
    let effects: Vec<Effect> = items.iter().filter_map(Effect::from_json).collect();
    let p: policy::PrincipalPolicy = toml_policy();
    let _ = p.decide(&effects, Some("/home/u"));
    let _ = policy::local_default().decide(&effects, None);
    let _ = effect::wire_reversibility(&effects);
    let _ = effect::auto_reversible(&effects);
    let _ = plan::plan_ref("s", "agent", "src", &effects);
    for e in &effects {
        let _ = effect::normalize_kind(e.kind());
        let _ = e.to_json();
    }
});

fn toml_policy() -> policy::PrincipalPolicy {
    let c = shoal::config::parse(
        "[policy.principal.\"a\"]\nopaque = \"ask\"\nnet = [\"*.example.org:*\"]\nenv_read = [\"HOME\"]\nfs.write = [\"~/p/**\"]\nfs.read = [\"/**\"]\n",
        std::path::Path::new("f.toml"),
    )
    .expect("fixed policy parses");
    c.policy.principal["a"].clone()
}
