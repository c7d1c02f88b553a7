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

/// The subject of satellite `instance` alone (its service instance id) for
/// operations of `plugin` on `target`: `operation_subject` and the id. Only
/// satellites giving receipts subscribe to it (see `receipts`).
pub fn direct_subject(plugin: &str, target: &str, instance: &str) -> String {
    format!("{SUBJECT_PREFIX}.{plugin}.{target}.{instance}")
}

/// The queue group of every satellite serving `plugin`.
pub fn queue_group(plugin: &str) -> String {
    format!("orrery-{plugin}")
}

/// The plugin-wide subject a plugin's announcement was requested on before
/// describe went per target. Only satellites serving every target of the
/// plugin answer it (and only identities allowed every target of it may
/// subscribe to it): the primary asks it when no satellite answers the
/// per-target subject, for satellites older than per-target describe.
pub fn describe_subject(plugin: &str) -> String {
    format!("orrery.describe.{plugin}")
}

/// The subject the announcement of `plugin` is requested on for planning
/// `target`: answered only by satellites serving that target (and granted
/// only to NATS identities allowed to serve it), so no other site's
/// satellite can describe the plugin for it. `target` `*` is what a
/// satellite serving every target subscribes to.
pub fn target_describe_subject(plugin: &str, target: &str) -> String {
    format!("orrery.describe.{plugin}.{target}")
}
