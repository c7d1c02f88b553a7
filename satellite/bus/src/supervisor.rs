//! The plugin supervisor's decisions, as a state machine with time passed in.
//!
//! It knows nothing of processes: the edge (`plugin_host`) reports what
//! happened (`on_started`, `on_exit`) and asks what to do next (`poll`).
//! Restarts back off exponentially; a plugin that fails `max_restarts` times
//! within `window` is marked unhealthy and retried only after `cool_down`.

use std::collections::VecDeque;
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

    /// What to do at `now`.
    pub fn poll(&mut self, now: Instant) -> Action {
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
    /// stopped answering.
    pub fn on_failure(&mut self, now: Instant, reason: impl Into<String>) {
        let reason = reason.into();
        if let State::Running { since } = self.state {
            if now.duration_since(since) >= self.policy.stable_after {
                self.consecutive = 0;
                self.failures.clear();
            }
        }
        self.consecutive += 1;
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
