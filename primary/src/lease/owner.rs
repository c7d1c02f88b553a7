//! Who holds a command's lease: one primary process, named so that another
//! process on the same machine can tell whether the holder still runs.
//!
//! A lease normally ends when its holder releases it or when it expires. A
//! holder killed on this machine (the usual crash: `orrery apply` or
//! `orrery primary` killed and started again) need not be waited out: when
//! both owners share a *scope* (the same boot of the same kernel and the
//! same pid namespace, so pids mean the same process to both) and the
//! holder's process is gone, its lease is free. Owners in different scopes
//! (another host, another container) wait for the expiry.

use std::fmt;

/// A lease holder, written `host/scope/pid/run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerId {
    /// The host name, for people (`/` replaced).
    pub host: String,
    /// Where `pid` names a process: boot id and pid namespace; empty when
    /// unknown (then nobody can tell whether the holder runs).
    pub scope: String,
    /// The process id.
    pub pid: u32,
    /// Unique per process start.
    pub run: String,
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}/{}", self.host, self.scope, self.pid, self.run)
    }
}

/// Keeps a component free of the separator.
fn clean(s: &str) -> String {
    s.trim().replace('/', "_")
}

impl OwnerId {
    /// An owner from its parts (`/` in them is replaced).
    pub fn new(host: &str, scope: &str, pid: u32, run: &str) -> OwnerId {
        OwnerId {
            host: clean(host),
            scope: clean(scope),
            pid,
            run: clean(run),
        }
    }

    /// This process: a fresh `run` each call, so call it once per process
    /// (or per primary) and keep it.
    pub fn current() -> OwnerId {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let host = read("/proc/sys/kernel/hostname")
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown".into());
        let boot = read("/proc/sys/kernel/random/boot_id");
        let pid_ns = std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .map(|p| p.display().to_string());
        let scope = match (boot, pid_ns) {
            (Some(boot), Some(ns)) => {
                let ns: String = ns.chars().filter(char::is_ascii_digit).collect();
                format!("{}:{ns}", boot.trim())
            }
            _ => String::new(),
        };
        let run = uuid::Uuid::now_v7().simple().to_string();
        OwnerId::new(&host, &scope, std::process::id(), &run)
    }

    /// Parses `host/scope/pid/run`; `None` for anything else (an owner
    /// written by something else is never taken to be dead).
    pub fn parse(s: &str) -> Option<OwnerId> {
        let mut parts = s.split('/');
        let (host, scope, pid, run) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(OwnerId {
            host: host.to_owned(),
            scope: scope.to_owned(),
            pid: pid.parse().ok()?,
            run: run.to_owned(),
        })
    }

    /// Whether `holder` is certainly no longer running, as far as `self`
    /// can tell: it shares `self`'s (known) scope, and either its process
    /// is gone (`alive(pid)` is false) or its pid is now `self`'s own (so
    /// that earlier process ended). Anything else: it may run.
    pub fn sees_dead(&self, holder: &OwnerId, alive: impl Fn(u32) -> bool) -> bool {
        if self.scope.is_empty() || holder.scope != self.scope || *holder == *self {
            return false;
        }
        if holder.pid == self.pid {
            return holder.run != self.run;
        }
        !alive(holder.pid)
    }
}

/// Whether a process `pid` exists in this pid namespace (a zombie counts:
/// it may not have finished dying). Where that cannot be checked, every
/// process is taken to be alive.
pub fn process_alive(pid: u32) -> bool {
    if !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(scope: &str, pid: u32, run: &str) -> OwnerId {
        OwnerId::new("web-1", scope, pid, run)
    }

    #[test]
    fn round_trips_and_rejects_other_text() {
        let o = OwnerId::new("a/b", "boot:4026531836", 42, "r1");
        assert_eq!(o.host, "a_b");
        assert_eq!(o.to_string(), "a_b/boot:4026531836/42/r1");
        assert_eq!(OwnerId::parse(&o.to_string()), Some(o));
        assert_eq!(OwnerId::parse("just a name"), None);
        assert_eq!(OwnerId::parse("h/s/notapid/r"), None);
        assert_eq!(OwnerId::parse("h/s/1/r/extra"), None);
    }

    #[test]
    fn a_holder_is_dead_only_in_the_same_scope_when_its_process_is_gone() {
        let me = owner("boot:1", 100, "mine");
        let gone = |_| false;
        let running = |_| true;
        assert!(me.sees_dead(&owner("boot:1", 7, "x"), gone));
        assert!(!me.sees_dead(&owner("boot:1", 7, "x"), running));
        assert!(
            !me.sees_dead(&owner("boot:2", 7, "x"), gone),
            "another machine or namespace: wait for the expiry"
        );
        assert!(
            me.sees_dead(&owner("boot:1", 100, "earlier"), running),
            "my pid, another run: that process ended"
        );
        assert!(!me.sees_dead(&me, gone), "never myself");
        let unknown = owner("", 100, "mine");
        assert!(!unknown.sees_dead(&owner("", 7, "x"), gone));
    }

    #[test]
    fn this_process_is_alive_and_current_owner_is_parsable() {
        assert!(process_alive(std::process::id()));
        let me = OwnerId::current();
        assert_eq!(me.pid, std::process::id());
        assert_eq!(OwnerId::parse(&me.to_string()), Some(me.clone()));
        assert_ne!(OwnerId::current().run, me.run, "a fresh run each time");
    }
}
