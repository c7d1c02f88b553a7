//! The chaos soak's parts: the seeded schedule, a pausable TCP relay for
//! partitions, the run's processes, the invariants, and the driver.

pub mod invariants;
pub mod processes;
pub mod proxy;
pub mod run;
pub mod schedule;
