//! Every NATS subject and queue group Orrery uses, in one place: the
//! relay serves them, the bus sends to them, deploy/nats/permissions.conf
//! grants them.

/// Subjects of operations start with this.
pub const SUBJECT_PREFIX: &str = "orrery.op";
/// The NATS service name satellites register.
pub const SERVICE_NAME: &str = "orrery-satellite";

/// The subject operations for `plugin` on `target` are sent to.
pub fn operation_subject(plugin: &str, target: &str) -> String {
    // Built once per request on the caller's path: one allocation of the
    // right size, not `format!`'s growing buffer.
    let mut subject = String::with_capacity(SUBJECT_PREFIX.len() + plugin.len() + target.len() + 2);
    for part in [SUBJECT_PREFIX, ".", plugin, ".", target] {
        subject.push_str(part);
    }
    subject
}

/// The queue group of every satellite serving `plugin`.
pub fn queue_group(plugin: &str) -> String {
    format!("orrery-{plugin}")
}

/// The subject a plugin's announcement is requested on.
pub fn describe_subject(plugin: &str) -> String {
    format!("orrery.describe.{plugin}")
}

/// The queue group of every satellite answering describe requests for `plugin`.
pub fn describe_queue_group(plugin: &str) -> String {
    format!("orrery-{plugin}-describe")
}
