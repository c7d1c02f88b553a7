//! The primary: stacks, plans, scheduling and state (being built).
