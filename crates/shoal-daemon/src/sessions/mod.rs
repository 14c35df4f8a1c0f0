//! The session subsystem: each named session's supervisor and the actors it owns (the
//! Session and its worker thread, background Tasks, the PlanStore, PTYs), the handle a
//! connection holds, and the one exec path both protocols use. These actors address one
//! another, so they form one layer: above the daemon's services (`event_bus`,
//! `journal_writer`, `health`, `msg`, `peer`), below the connections that serve them.

pub mod exec;
pub mod handle;
pub mod live_tasks;
pub mod plan_store;
pub mod pty;
pub mod session;
pub mod supervisor;
pub mod task;
