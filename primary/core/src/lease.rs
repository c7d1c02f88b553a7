//! Command leases: which primary runs (or resumes) a command, until when.
//!
//! A primary holds the lease of every command it runs and renews it while
//! running, so that another primary sharing the store never resumes a
//! command that is still being run. Times are Unix milliseconds passed in
//! by the caller (from `StateStore::now_ms` in `orrery-state`, the store's clock, in
//! production), so expiry is decided the same way by every primary and
//! tests need no clock.

/// A lease as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The command.
    pub command_id: String,
    /// Who holds it (`lease::OwnerId` as text).
    pub owner: String,
    /// Unix milliseconds after which it is free.
    pub expires_ms: i64,
}

/// What asking for a lease got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseGrant {
    /// The caller holds it now (it was free, expired, or already its own).
    Granted,
    /// Another owner holds it, unexpired.
    HeldBy(Lease),
}

/// The expiry of a lease taken at `now_ms` for `ttl_ms` (saturating).
pub fn expiry(now_ms: i64, ttl_ms: i64) -> i64 {
    now_ms.saturating_add(ttl_ms.max(0))
}
