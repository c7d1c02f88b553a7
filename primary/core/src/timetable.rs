//! When periodic jobs are due (pure: time passed in). The server's
//! background loop asks which jobs are due now and sleeps until the next.

use std::time::{Duration, Instant};

/// Jobs `J`, each with its interval and the time it is next due.
#[derive(Clone, Debug)]
pub struct Timetable<J> {
    entries: Vec<(J, Duration, Instant)>,
}

impl<J: Clone> Timetable<J> {
    /// Every job with an interval, first due at `first_due` (after that
    /// every interval). A job whose interval is `None` or zero never runs.
    pub fn new(jobs: impl IntoIterator<Item = (J, Option<Duration>)>, first_due: Instant) -> Self {
        Timetable {
            entries: jobs
                .into_iter()
                .filter_map(|(job, every)| {
                    every.filter(|d| !d.is_zero()).map(|d| (job, d, first_due))
                })
                .collect(),
        }
    }

    /// Whether no job will ever run.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// When the next job is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries.iter().map(|(_, _, at)| *at).min()
    }

    /// The jobs due at `now`, in the order given to [`Timetable::new`];
    /// each is next due one interval after `now` (a late run shifts the
    /// later ones rather than bunching them up).
    pub fn take_due(&mut self, now: Instant) -> Vec<J> {
        let mut due = Vec::new();
        for (job, every, at) in &mut self.entries {
            if *at <= now {
                due.push(job.clone());
                *at = now + *every;
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    enum Job {
        A,
        B,
        Off,
    }

    #[test]
    fn jobs_run_first_at_the_start_then_each_on_its_interval() {
        let t0 = crate::test_clock::epoch();
        let s = Duration::from_secs;
        let mut t = Timetable::new(
            [
                (Job::A, Some(s(10))),
                (Job::B, Some(s(4))),
                (Job::Off, None),
                (Job::Off, Some(Duration::ZERO)),
            ],
            t0,
        );
        assert!(!t.is_empty());
        assert_eq!(t.next_due(), Some(t0));
        assert_eq!(t.take_due(t0), [Job::A, Job::B]);
        assert_eq!(t.take_due(t0), [], "nothing twice");
        assert_eq!(t.next_due(), Some(t0 + s(4)));
        assert_eq!(t.take_due(t0 + s(3)), []);
        assert_eq!(t.take_due(t0 + s(4)), [Job::B]);
        // Late: B was due at 8, A at 10; both run at 11, then from there.
        assert_eq!(t.take_due(t0 + s(11)), [Job::A, Job::B]);
        assert_eq!(t.next_due(), Some(t0 + s(15)));
        assert_eq!(t.take_due(t0 + s(15)), [Job::B]);
        assert_eq!(t.take_due(t0 + s(21)), [Job::A, Job::B]);
    }

    #[test]
    fn no_interval_means_nothing_ever_runs() {
        let mut t = Timetable::new([(Job::A, None)], crate::test_clock::epoch());
        assert!(t.is_empty());
        assert_eq!(t.next_due(), None);
        assert!(t
            .take_due(crate::test_clock::epoch() + Duration::from_secs(3600))
            .is_empty());
    }
}
