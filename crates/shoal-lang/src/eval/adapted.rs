//! The evaluator's side of adapters (docs/rules.md §8): an adapted
//! head runs through `crate::adapters::run_adapted`, which builds the argv
//! and types the outcome; this file only lends it the spawner.

use std::ffi::OsString;

use super::command::{has_out_redirect, Invocation};
use crate::eval::{EResult, Interp, Pos};
use crate::scope::ScopeRef;
use shoal_value::Value;

impl Interp {
    /// `Some(result)` when `inv` is an adapted command; `None` to run it as
    /// written. `^tool`, a path head, a fed stdin and a redirected stdout
    /// bypass adapters.
    pub(super) fn run_adapter(
        &mut self,
        inv: &Invocation,
        argv: &[OsString],
        display: &str,
        pos: Pos,
        scope: &ScopeRef,
    ) -> Option<EResult<Value>> {
        let catalog = self.adapters.clone()?;
        let bypass = inv.forced
            || inv.head_is_path
            || inv.stdin.is_some()
            || inv.block.is_some()
            || has_out_redirect(&inv.redirects);
        let mut spawn = |bin: &str, args: Vec<OsString>| -> EResult<Value> {
            let path_var = inv
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| self.env.get("PATH").cloned());
            let Some(program) = self.program_for(bin, path_var.as_deref())? else {
                return Err(self.not_found(bin, scope).into());
            };
            self.spawn_program(
                program,
                bin,
                args,
                display.to_string(),
                inv.env.clone(),
                &inv.redirects,
                None,
                Pos::Value,
            )
        };
        crate::adapters::run_adapted(
            Some(&catalog),
            &inv.head,
            argv,
            bypass,
            pos == Pos::Stmt,
            &mut spawn,
        )
    }
}
