//! What a command's cancel signal asks of the executor. One signal, one
//! policy: Ctrl-C, `orrery cancel [--force]`, a server shutting down and a
//! lost lease all reach the executor as a [`Stop`] on one watch channel,
//! and it only ever escalates (`Run` < `Graceful` < `Force`).

/// How far a command is asked to stop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Go on.
    #[default]
    Run,
    /// Start nothing new; operations in flight finish and are recorded
    /// (Ctrl-C, `orrery cancel`, a server shutting down, a lost lease).
    Graceful,
    /// Stop waiting for operations in flight, now: they stay recorded as
    /// sent without an outcome (`running`, or `in_progress` with what the
    /// plugin answered), exactly as a crash leaves them, and the next
    /// apply of the stack settles them by reading before it plans
    /// (`Executor::resume`). A second Ctrl-C, `orrery cancel --force`.
    Force,
}

impl Stop {
    /// `self`, or `other` when it asks more.
    pub fn escalate(self, other: Stop) -> Stop {
        self.max(other)
    }
}
