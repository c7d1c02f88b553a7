//! `orrery-stack`'s integration tests, one binary: the stack fixtures and
//! `docs/stacks.md` kept honest.

mod stack_fixtures;
mod stacks_doc;
