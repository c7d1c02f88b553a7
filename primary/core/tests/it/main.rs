//! `orrery-core`'s integration tests, one binary (issue 41): the
//! deterministic simulation, the stack fixtures and `docs/stacks.md`.

mod simulation;
mod stack_fixtures;
mod stacks_doc;
