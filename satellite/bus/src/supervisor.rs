//! The plugin supervisor's decisions, as a state machine with time passed in.
//!
//! It knows nothing of processes: the edge (`plugin_host`) reports what
//! happened (`on_started`, `on_exit`) and asks what to do next (`poll`).
//! Restarts back off exponentially; a plugin that fails `max_restarts` times
//! within `window` is marked unhealthy and retried only after `cool_down`.
//!
//! A crash with requests of some targets in flight ([`Supervisor::on_crash`])
//! is laid to those targets instead: the process is restarted with the same
//! backoff, but it is a target that crashed it `max_restarts` times within
//! `window` that is backed off for `cool_down` ([`TargetBackoff`]), its
//! requests refused before they reach the plugin, while the plugin serves
//! every other target. A crash with nothing in flight counts against the
//! plugin as a whole.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Restart policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// First restart delay.
    pub initial_backoff: Duration,
    /// Longest restart delay.
    pub max_backoff: Duration,
    /// Failures within `window` that mark the plugin unhealthy.
    pub max_restarts: usize,
    /// The crash-loop window.
    pub window: Duration,
    /// How long an unhealthy plugin rests before one more attempt.
    pub cool_down: Duration,
    /// Running this long resets the backoff.
    pub stable_after: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            max_restarts: 5,
            window: Duration::from_secs(60),
            cool_down: Duration::from_secs(60),
            stable_after: Duration::from_secs(30),
        }
    }
}

/// Where a plugin stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// A process is being started; nothing is served yet.
    Starting,
    /// The plugin announced itself and serves requests.
    Running {
        /// When it started.
        since: Instant,
    },
    /// It failed; it will be started again at `until`.
    Backoff {
        /// When to start it again.
        until: Instant,
        /// Why it failed last.
        reason: String,
    },
    /// It is crash-looping; requests fail at once with the reason.
    Unhealthy {
        /// When to try once more.
        until: Instant,
        /// Why it is unhealthy.
        reason: String,
    },
}

/// A target whose requests crashed the plugin `max_restarts` times within
/// `window`: its requests are refused until `until`, the other targets'
/// are served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetBackoff {
    /// When its requests are let through again.
    pub until: Instant,
    /// Why it is backed off.
    pub reason: String,
}

impl TargetBackoff {
    /// Whether the target's requests are refused at `now`.
    pub fn refuses(&self, now: Instant) -> bool {
        now < self.until
    }
}

/// What the edge should do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start a process now.
    Start,
    /// Nothing until this instant (or the next event).
    WaitUntil(Instant),
    /// Nothing until the next event.
    Idle,
}

/// One plugin's supervisor.
#[derive(Debug)]
pub struct Supervisor {
    policy: Policy,
    state: State,
    failures: VecDeque<Instant>,
    consecutive: u32,
    restarts: u64,
    /// Crashes laid to each target within `window`.
    target_failures: BTreeMap<String, VecDeque<Instant>>,
    /// Targets backed off, until when and why.
    target_backoffs: BTreeMap<String, TargetBackoff>,
}

impl Supervisor {
    /// A supervisor that wants to start the plugin at once.
    pub fn new(policy: Policy, now: Instant) -> Self {
        Supervisor {
            policy,
            state: State::Backoff {
                until: now,
                reason: "not started yet".into(),
            },
            failures: VecDeque::new(),
            consecutive: 0,
            restarts: 0,
            target_failures: BTreeMap::new(),
            target_backoffs: BTreeMap::new(),
        }
    }

    /// The current state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Processes started after a failure, over the supervisor's life.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Whether requests should be sent to the plugin.
    pub fn is_serving(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    /// The backoff of `target`, when its requests are refused at `now`.
    pub fn target_refusal(&self, target: &str, now: Instant) -> Option<&TargetBackoff> {
        self.target_backoffs
            .get(target)
            .filter(|backoff| backoff.refuses(now))
    }

    /// Every target backed off (some perhaps no longer at a later instant:
    /// see [`TargetBackoff::refuses`]).
    pub fn target_backoffs(&self) -> &BTreeMap<String, TargetBackoff> {
        &self.target_backoffs
    }

    /// What to do at `now`.
    pub fn poll(&mut self, now: Instant) -> Action {
        self.target_backoffs.retain(|_, b| b.refuses(now));
        match &self.state {
            State::Backoff { until, .. } | State::Unhealthy { until, .. } => {
                if now >= *until {
                    if self.consecutive > 0 {
                        self.restarts += 1;
                    }
                    self.state = State::Starting;
                    Action::Start
                } else {
                    Action::WaitUntil(*until)
                }
            }
            State::Starting => Action::Idle,
            State::Running { since } => {
                // A long healthy run forgives earlier failures.
                if self.consecutive > 0 && now.duration_since(*since) >= self.policy.stable_after {
                    self.consecutive = 0;
                    self.failures.clear();
                }
                Action::Idle
            }
        }
    }

    /// The process started and completed its handshake.
    pub fn on_started(&mut self, now: Instant) {
        self.state = State::Running { since: now };
    }

    /// The process failed to start, failed its handshake, exited, or
    /// stopped answering, with no request in flight to lay it to.
    pub fn on_failure(&mut self, now: Instant, reason: impl Into<String>) {
        self.on_crash(now, reason, &[]);
    }

    /// The process failed while requests of `suspects` (targets) were in
    /// flight. With none, as [`Supervisor::on_failure`]: it counts against
    /// the plugin. With some, each suspect is charged the crash, and one
    /// charged `max_restarts` times within `window` is backed off for
    /// `cool_down`; the plugin is restarted with the usual backoff but not
    /// marked unhealthy, so the other targets keep being served.
    pub fn on_crash(&mut self, now: Instant, reason: impl Into<String>, suspects: &[&str]) {
        let reason = reason.into();
        if let State::Running { since } = self.state {
            if now.duration_since(since) >= self.policy.stable_after {
                self.consecutive = 0;
                self.failures.clear();
            }
        }
        self.consecutive += 1;
        if !suspects.is_empty() {
            self.charge(now, &reason, suspects);
            self.back_off(now, reason);
            return;
        }
        self.failures.push_back(now);
        while self
            .failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.policy.window)
        {
            self.failures.pop_front();
        }
        if self.failures.len() >= self.policy.max_restarts {
            self.failures.clear();
            self.state = State::Unhealthy {
                until: now + self.policy.cool_down,
                reason: format!(
                    "crash loop: failed {} times within {:?}; last failure: {reason}",
                    self.policy.max_restarts, self.policy.window
                ),
            };
            return;
        }
        self.back_off(now, reason);
    }

    fn charge(&mut self, now: Instant, reason: &str, suspects: &[&str]) {
        let window = self.policy.window;
        // Those no longer charged within the window are forgotten.
        self.target_failures.retain(|_, failures| {
            failures
                .back()
                .is_some_and(|t| now.duration_since(*t) <= window)
        });
        for target in suspects {
            let failures = self
                .target_failures
                .entry((*target).to_owned())
                .or_default();
            failures.push_back(now);
            while failures
                .front()
                .is_some_and(|t| now.duration_since(*t) > window)
            {
                failures.pop_front();
            }
            if failures.len() >= self.policy.max_restarts {
                self.target_failures.remove(*target);
                self.target_backoffs.insert(
                    (*target).to_owned(),
                    TargetBackoff {
                        until: now + self.policy.cool_down,
                        reason: format!(
                            "crash loop: its requests were in flight each time the plugin failed, {} times within {:?}; refused for {:?} while the plugin serves other targets; last failure: {reason}",
                            self.policy.max_restarts, self.policy.window, self.policy.cool_down
                        ),
                    },
                );
            }
        }
    }

    fn back_off(&mut self, now: Instant, reason: String) {
        let exp = self.consecutive.saturating_sub(1).min(16);
        let backoff = self
            .policy
            .initial_backoff
            .saturating_mul(1 << exp)
            .min(self.policy.max_backoff);
        self.state = State::Backoff {
            until: now + backoff,
            reason,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            max_restarts: 4,
            window: Duration::from_secs(10),
            cool_down: Duration::from_secs(30),
            stable_after: Duration::from_secs(5),
        }
    }

    #[test]
    fn starts_at_once_then_serves() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(), t0);
        assert_eq!(s.poll(t0), Action::Start);
        assert_eq!(s.poll(t0), Action::Idle, "one start at a time");
        s.on_started(t0);
        assert!(s.is_serving());
    }

    #[test]
    fn restarts_back_off_exponentially_up_to_the_cap() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(
            Policy {
                max_restarts: 100,
                ..policy()
            },
            t0,
        );
        let mut now = t0;
        let mut delays = Vec::new();
        for _ in 0..6 {
            assert_eq!(s.poll(now), Action::Start);
            s.on_failure(now, "exit 1");
            let Action::WaitUntil(at) = s.poll(now) else {
                panic!("{:?}", s.state())
            };
            delays.push(at - now);
            now = at;
        }
        let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(s.restarts(), 5);
    }

    #[test]
    fn a_crash_loop_marks_the_plugin_unhealthy_with_the_reason_then_retries_after_cool_down() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(), t0);
        let mut now = t0;
        for i in 0..4 {
            assert_eq!(s.poll(now), Action::Start, "attempt {i}");
            s.on_failure(now, "exit status 101");
            if let Action::WaitUntil(at) = s.poll(now) {
                now = at;
            }
        }
        let State::Unhealthy { until, reason } = s.state().clone() else {
            panic!("{:?}", s.state())
        };
        assert!(
            reason.contains("crash loop") && reason.contains("exit status 101"),
            "{reason}"
        );
        assert!(!s.is_serving());
        assert_eq!(
            s.poll(until - Duration::from_millis(1)),
            Action::WaitUntil(until)
        );
        assert_eq!(s.poll(until), Action::Start);
    }

    #[test]
    fn a_stable_run_resets_the_backoff() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(), t0);
        s.poll(t0);
        s.on_failure(t0, "boom");
        let mut now = t0 + Duration::from_millis(100);
        assert_eq!(s.poll(now), Action::Start);
        s.on_started(now);
        now += Duration::from_secs(6);
        s.poll(now);
        s.on_failure(now, "boom again");
        assert_eq!(
            s.poll(now),
            Action::WaitUntil(now + Duration::from_millis(100))
        );
    }

    #[test]
    fn crashes_with_a_targets_requests_in_flight_back_that_target_off_not_the_plugin() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(), t0);
        let mut now = t0;
        assert_eq!(s.poll(now), Action::Start);
        s.on_started(now);
        for i in 0..4 {
            assert!(s.target_refusal("a", now).is_none(), "crash {i}");
            // `b` was in flight once, at the first crash only.
            let suspects: &[&str] = if i == 0 { &["a", "b"] } else { &["a"] };
            s.on_crash(now, "exit status 101", suspects);
            assert!(
                matches!(s.state(), State::Backoff { .. }),
                "restarted with backoff, never unhealthy: {:?}",
                s.state()
            );
            let Action::WaitUntil(at) = s.poll(now) else {
                panic!("{:?}", s.state())
            };
            now = at;
            assert_eq!(s.poll(now), Action::Start);
            s.on_started(now);
        }
        let backoff = s.target_refusal("a", now).expect("a is backed off").clone();
        assert!(
            backoff.reason.contains("crash loop") && backoff.reason.contains("exit status 101"),
            "{}",
            backoff.reason
        );
        assert_eq!(
            backoff.until - now,
            Duration::from_secs(30) - Duration::from_millis(800)
        );
        assert!(
            s.target_refusal("b", now).is_none(),
            "b crashed it once only"
        );
        assert!(s.is_serving(), "the plugin serves the other targets");
        assert_eq!(s.target_backoffs().len(), 1);
        // After the cool-down, `a` is let through again.
        assert!(s.target_refusal("a", backoff.until).is_none());
        s.poll(backoff.until);
        assert!(s.target_backoffs().is_empty());
    }

    #[test]
    fn a_crash_with_nothing_in_flight_still_counts_against_the_plugin() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(policy(), t0);
        let mut now = t0;
        for _ in 0..4 {
            assert_eq!(s.poll(now), Action::Start);
            s.on_crash(now, "exit 1", &[]);
            if let Action::WaitUntil(at) = s.poll(now) {
                now = at;
            }
        }
        assert!(
            matches!(s.state(), State::Unhealthy { .. }),
            "{:?}",
            s.state()
        );
        assert!(s.target_backoffs().is_empty());
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let t0 = Instant::now();
        let mut s = Supervisor::new(
            Policy {
                stable_after: Duration::from_secs(3600),
                ..policy()
            },
            t0,
        );
        let mut now = t0;
        for _ in 0..10 {
            assert_eq!(s.poll(now), Action::Start);
            s.on_started(now);
            now += Duration::from_secs(4);
            s.on_failure(now, "periodic crash");
            assert!(
                matches!(s.state(), State::Backoff { .. }),
                "{:?}",
                s.state()
            );
            let Action::WaitUntil(at) = s.poll(now) else {
                panic!()
            };
            now = at;
        }
    }
}
