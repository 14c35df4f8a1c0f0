//! `value.get` paths and slices against a value with every container kind.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use shoal::proto::valpath;
use shoal::value::{Record, Value};

fn sample() -> Value {
    let mut row = Record::new();
    row.insert("name".into(), Value::str("a"));
    row.insert("n".into(), Value::Int(1));
    let table = Value::Table(Arc::new(vec![Arc::new(row.clone()), Arc::new(row.clone())]));
    let mut r = Record::new();
    r.insert("rows".into(), table);
    r.insert("xs".into(), Value::list((0..10).map(Value::Int).collect()));
    r.insert("s".into(), Value::str("héllo wörld"));
    r.insert("b".into(), Value::bytes(b"bytes".to_vec()));
    r.insert("rec".into(), Value::record(row));
    Value::record(r)
}

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let v = sample();
    if let Ok(segs) = valpath::parse(path) {
        if let Ok(x) = valpath::apply(&v, &segs) {
            let n = path.len();
            let _ = valpath::slice(&x, n % 7, n % 13);
            let _ = valpath::slice(&x, usize::MAX - n, usize::MAX);
        }
    }
});
