//! Leash approvals asked of the user in the MCP client (contract §5),
//! through the official Python SDK 2.x: `elicitation/create` as a
//! server-to-client request in the handshake era and as an input_required
//! round at 2026-07-28; accept, decline, cancel, a client error, and a
//! client without the capability (tests/leash_elicit_checks.py).

mod common;

use common::*;

#[test]
fn cap_request_asks_the_user_through_elicitation() {
    run_sdk_checks(
        ".venv",
        "leash_elicit_checks.py",
        &[
            "legacy_accept",
            "legacy_decline",
            "legacy_cancel",
            "legacy_error",
            "legacy_no_capability",
            "auto_accept",
            "auto_decline",
            "auto_no_capability",
            "journal_records_decisions",
        ],
    );
}
