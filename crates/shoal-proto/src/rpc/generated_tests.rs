//! The in-place read of a frame ([`classify`], which leaves a request's
//! params raw) against the whole-frame parse ([`classify_whole`]) on
//! generated frames: members in any order, repeated, unknown or of the wrong
//! type, other spellings of the version, responses, junk and frames cut short.

use proptest::prelude::*;

use super::*;

/// One member of a generated frame, as JSON text.
fn member() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        Just("1".to_string()),
        Just("-7".to_string()),
        Just("\"a\\\"b\"".to_string()),
        Just("null".to_string()),
        Just("1.5".to_string()),
        Just("18446744073709551616".to_string()),
        Just("{\"x\":1}".to_string()),
        Just("[1]".to_string()),
    ];
    let version = prop_oneof![
        4 => Just("\"2.0\"".to_string()),
        1 => Just("\"2.00\"".to_string()),
        1 => Just("\"\\u0032.0\"".to_string()),
        1 => Just("2.0".to_string()),
        1 => Just("\"1.0\"".to_string()),
        1 => Just("null".to_string()),
    ];
    let method = prop_oneof![
        4 => Just("\"tools/call\"".to_string()),
        1 => Just("\"\"".to_string()),
        1 => Just("\"\\u00e9x\"".to_string()),
        1 => Just("5".to_string()),
        1 => Just("null".to_string()),
        1 => Just("[\"m\"]".to_string()),
    ];
    let params = prop_oneof![
        3 => Just("{\"name\":\"shoal_exec\",\"arguments\":{\"src\":\"1 + 1\"}}".to_string()),
        1 => Just("{}".to_string()),
        1 => Just("[1,\"2\",null]".to_string()),
        1 => Just("null".to_string()),
        1 => Just("7".to_string()),
        1 => Just("{\"a\":1e400}".to_string()),
        1 => Just("{\"a\":18446744073709551616}".to_string()),
        // Around serde_json's nesting limit of 128, which the frame's parse
        // shares with the envelope.
        2 => prop_oneof![1usize..20, 124usize..132]
            .prop_map(|n| format!("{}1{}", "[".repeat(n), "]".repeat(n))),
    ];
    prop_oneof![
        4 => version.prop_map(|v| format!("\"jsonrpc\":{v}")),
        4 => id.prop_map(|v| format!("\"id\":{v}")),
        4 => method.prop_map(|v| format!("\"method\":{v}")),
        3 => params.prop_map(|v| format!("\"params\":{v}")),
        1 => Just("\"result\":{\"ok\":true}".to_string()),
        1 => Just("\"error\":{\"code\":-1,\"message\":\"no\"}".to_string()),
        1 => Just("\"extra\":[1,{\"b\":2}]".to_string()),
        1 => Just("\"_meta\":{}".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn the_in_place_read_classifies_generated_frames_as_the_whole_parse(
        members in proptest::collection::vec(member(), 0..7),
        spaced in any::<bool>(),
        cut in proptest::option::of(0usize..200),
        junk in prop_oneof![
            8 => Just(""),
            1 => Just("["),
            1 => Just("\"s\""),
            1 => Just(" "),
        ],
    ) {
        let sep = if spaced { " , " } else { "," };
        let mut f = format!("{junk}{{{}}}", members.join(sep));
        if spaced {
            f = format!(" {f}\t");
        }
        if let Some(at) = cut {
            f.truncate(at.min(f.len()));
        }
        let b = f.as_bytes();
        prop_assert_eq!(in_place(b), classify_whole(b), "{}", f);
        // What the in-place read leaves raw is the frame's own params (raw
        // params that do not parse go to the whole parse, as `classify` does).
        if let Classified::Raw(r) = read_in_place(b) {
            if let Some(raw) = params_value(r.params) {
                let Incoming::Request { id, method, params } = classify_whole(b) else {
                    return Err(TestCaseError::fail(format!("not a request: {f}")));
                };
                prop_assert_eq!((r.id, r.method, raw), (id, method, params));
            }
        }
    }
}
