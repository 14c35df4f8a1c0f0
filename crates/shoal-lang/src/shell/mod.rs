//! The command layer: external processes, structured builtins, globbing and
//! `PATH` lookup. Pure of evaluator state: everything here takes the cwd and
//! environment it needs as arguments.

#[doc(hidden)]
pub mod builtins;
pub mod glob;
pub use shoal_base::lookup;
mod child;
pub mod process;
#[doc(hidden)]
pub mod procstat;
pub mod reef;
pub mod trash;
pub mod words;

#[cfg(test)]
mod tests;
