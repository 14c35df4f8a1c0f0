//! `cd`, `pushd`, `popd`, `dirs`, `j`/`jump`: the session's directory
//! state (docs/rules.md §9), allowed at the top level only.

use std::path::PathBuf;

use crate::eval::{EResult, Interp};
use crate::shell::builtins;
use shoal_value::{ShoalError, Value};

impl Interp {
    pub(super) fn top_level_only(&self, head: &str) -> EResult<()> {
        if self.fn_depth > 0 {
            return Err(ShoalError::custom(format!(
                "`{head}` changes the session directory and is only allowed at the top level"
            ))
            .with_hint("inside a function use `with cwd: DIR { … }`")
            .into());
        }
        Ok(())
    }

    pub(super) fn target_dir(&self, v: &Value, head: &str) -> EResult<PathBuf> {
        let p = match v {
            Value::Str(s) => PathBuf::from(self.expand_home(s)),
            Value::Path(p) => p.as_ref().clone(),
            other => {
                return Err(ShoalError::arg_error(format!(
                    "{head}: expected a directory, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        let abs = builtins::normalize(&self.cwd.join(&p));
        if !abs.is_dir() {
            return Err(ShoalError::arg_error(format!(
                "{head}: {}: no such directory",
                p.display()
            ))
            .into());
        }
        Ok(abs)
    }

    pub(super) fn set_cwd(&mut self, new: PathBuf) {
        self.visit_tick += 1;
        let tick = self.visit_tick;
        match self.visited.iter_mut().find(|(p, _, _)| *p == new) {
            Some(e) => {
                e.1 += 1;
                e.2 = tick;
            }
            None => self.visited.push((new.clone(), 1, tick)),
        }
        let old = std::mem::replace(&mut self.cwd, new);
        self.env
            .insert("OLDPWD".into(), old.to_string_lossy().into_owned());
        self.env
            .insert("PWD".into(), self.cwd.to_string_lossy().into_owned());
        self.oldpwd = Some(old);
    }

    pub(super) fn cd(&mut self, args: Vec<Value>) -> EResult<Value> {
        self.top_level_only("cd")?;
        let target = match args.as_slice() {
            [] => PathBuf::from(self.home()),
            [Value::Str(s)] if s.as_ref() == "-" => match &self.oldpwd {
                Some(p) => p.clone(),
                None => {
                    return Err(ShoalError::custom(
                        "cd -: no previous directory (OLDPWD is not set)",
                    )
                    .into())
                }
            },
            [v] => self.target_dir(v, "cd")?,
            _ => return Err(ShoalError::arg_error("cd expects at most one directory").into()),
        };
        if !target.is_dir() {
            return Err(ShoalError::arg_error(format!(
                "cd: {}: no such directory",
                target.display()
            ))
            .into());
        }
        self.set_cwd(target);
        Ok(Value::path(self.cwd.clone()))
    }

    /// `j` / `jump [query]`: the most frequently and recently visited
    /// directory of this session whose path contains the query.
    pub(super) fn jump(&mut self, head: &str, query: Option<&Value>) -> EResult<Value> {
        let q = match query {
            None => String::new(),
            Some(Value::Str(s)) => s.to_string(),
            Some(Value::Path(p)) => p.to_string_lossy().into_owned(),
            Some(other) => {
                return Err(ShoalError::type_error(format!(
                    "{head}: expected a query, found {}",
                    other.type_name()
                ))
                .into())
            }
        };
        if !q.is_empty() {
            let direct = builtins::normalize(&self.cwd.join(self.expand_home(&q)));
            if direct.is_dir() && (q.contains('/') || q.starts_with('.') || q.starts_with('~')) {
                self.set_cwd(direct);
                return Ok(Value::path(self.cwd.clone()));
            }
        }
        let ql = q.to_lowercase();
        let best = self
            .visited
            .iter()
            .filter(|(p, _, _)| *p != self.cwd && p.is_dir())
            .filter(|(p, _, _)| p.to_string_lossy().to_lowercase().contains(&ql))
            .max_by_key(|(_, n, t)| (*n as u64) * 4 + *t)
            .map(|(p, _, _)| p.clone());
        match best {
            Some(p) => {
                self.set_cwd(p);
                Ok(Value::path(self.cwd.clone()))
            }
            None => Err(ShoalError::not_found(format!(
                "{head}: no remembered directory matches `{q}`"
            ))
            .with_hint("directories are remembered as you `cd` into them")
            .into()),
        }
    }

    pub(super) fn dirs_list(&self) -> Value {
        let mut out = vec![Value::path(self.cwd.clone())];
        out.extend(self.dir_stack.iter().rev().map(|p| Value::path(p.clone())));
        Value::list(out)
    }

    pub(super) fn pushd(&mut self, args: Vec<Value>) -> EResult<Value> {
        self.top_level_only("pushd")?;
        match args.as_slice() {
            [] => {
                let Some(top) = self.dir_stack.pop() else {
                    return Err(ShoalError::custom(
                        "pushd: no other directory to swap with (the directory stack is empty)",
                    )
                    .into());
                };
                let cur = self.cwd.clone();
                self.dir_stack.push(cur);
                self.set_cwd(top);
            }
            [v] => {
                let new = self.target_dir(v, "pushd")?;
                let cur = self.cwd.clone();
                self.dir_stack.push(cur);
                self.set_cwd(new);
            }
            _ => return Err(ShoalError::arg_error("pushd expects at most one directory").into()),
        }
        Ok(self.dirs_list())
    }

    pub(super) fn popd(&mut self) -> EResult<Value> {
        let Some(top) = self.dir_stack.pop() else {
            return Err(ShoalError::custom("popd: the directory stack is empty").into());
        };
        self.set_cwd(top);
        Ok(self.dirs_list())
    }
}
