//! Scheduler tests in virtual time: a harness steps the scheduler and a
//! simulated plugin, jumping the clock straight to the next wake-up or
//! answer. Nothing sleeps and nothing reads the clock except the scale test's
//! stopwatch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use orrery_schema::ErrorCode;
use proptest::prelude::*;

use super::retry::SplitMix64;
use super::*;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// The simulated plugin: given an action, the time it is sent and how many
/// requests this task has seen, says how long the answer takes and what it is.
type Plugin = Box<dyn FnMut(&Action, Instant) -> (Duration, Outcome)>;

/// A scheduler, a virtual clock and a simulated plugin.
struct Sim {
    sched: Scheduler,
    t0: Instant,
    now: Instant,
    plugin: Plugin,
    /// Answers in flight, by (arrival, sequence).
    pending: BTreeMap<(Instant, u64), (TaskId, Outcome)>,
    seq: u64,
    /// Every action issued, with its instant.
    log: Vec<(Instant, Action)>,
    /// Every outcome delivered, with its instant.
    outcomes: Vec<(Instant, TaskId, Outcome)>,
    /// Tasks whose operation succeeded, as seen by the plugin side.
    succeeded: Vec<bool>,
    deps: Vec<Vec<TaskId>>,
    max_in_flight_seen: usize,
}

impl Sim {
    fn new(
        tasks: Vec<Task>,
        limits: HashMap<String, BucketLimit>,
        config: Config,
        plugin: Plugin,
    ) -> Sim {
        let t0 = crate::test_clock::epoch();
        let deps = tasks.iter().map(|t| t.deps.clone()).collect();
        let n = tasks.len();
        let sched =
            Scheduler::new(tasks, limits, RateRegistry::local(), config, t0).expect("a DAG");
        Sim {
            sched,
            t0,
            now: t0,
            plugin,
            pending: BTreeMap::new(),
            seq: 0,
            log: Vec::new(),
            outcomes: Vec::new(),
            succeeded: vec![false; n],
            deps,
            max_in_flight_seen: 0,
        }
    }

    /// One round: poll, send, jump to the next event, deliver answers.
    /// Returns false once there is nothing left to wait for.
    fn step(&mut self) -> bool {
        let actions = self.sched.poll(self.now);
        for action in actions {
            if let Action::Start { task, .. } = action {
                for &d in &self.deps[task] {
                    assert!(
                        self.succeeded[d],
                        "task {task} started before its dependency {d} succeeded"
                    );
                    assert_eq!(self.sched.state(d), &TaskState::Succeeded);
                }
            }
            self.log.push((self.now, action));
            let (latency, outcome) = (self.plugin)(&action, self.now);
            self.seq += 1;
            self.pending
                .insert((self.now + latency, self.seq), (action.task(), outcome));
        }
        self.max_in_flight_seen = self.max_in_flight_seen.max(self.pending.len());
        assert_eq!(self.pending.len(), self.sched.in_flight());

        let next_timer = self.sched.next_wakeup();
        let next_answer = self.pending.keys().next().map(|&(at, _)| at);
        let next = match (next_timer, next_answer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        assert!(next >= self.now, "time went backwards");
        self.now = next;
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let (task, outcome) = entry.remove();
            if outcome == Outcome::Success {
                self.succeeded[task] = true;
            }
            self.outcomes.push((self.now, task, outcome.clone()));
            self.sched.on_outcome(task, outcome, self.now);
        }
        true
    }

    fn run(&mut self) {
        for _ in 0..10_000_000 {
            if !self.step() {
                assert!(self.sched.is_finished(), "stuck: nothing to wait for");
                assert_eq!(self.sched.next_wakeup(), None);
                return;
            }
        }
        panic!("did not finish");
    }

    fn starts(&self) -> impl Iterator<Item = (Instant, TaskId, u32, bool)> + '_ {
        self.log.iter().filter_map(|&(at, a)| match a {
            Action::Start {
                task,
                attempt,
                verify_first,
            } => Some((at, task, attempt, verify_first)),
            Action::Poll { .. } => None,
        })
    }

    fn states(&self) -> Vec<TaskState> {
        (0..self.sched.len())
            .map(|t| self.sched.state(t).clone())
            .collect()
    }
}

fn config(max_concurrency: usize) -> Config {
    Config {
        max_concurrency,
        retry: RetryPolicy {
            max_attempts: 5,
            base: 100 * MS,
            max: 5 * SEC,
            throttle_factor: 4,
            jitter: 0.2,
        },
        poll_timeout: 60 * SEC,
        default_poll_interval: SEC,
        seed: 7,
    }
}

fn task(deps: &[TaskId], bucket: &str) -> Task {
    Task {
        deps: deps.to_vec(),
        bucket: bucket.to_owned(),
        group: None,
    }
}

fn grouped(bucket: &str, key: &str, limit: u32) -> Task {
    Task {
        group: Some(Group {
            key: key.to_owned(),
            limit,
        }),
        ..task(&[], bucket)
    }
}

fn limits(entries: &[(&str, f64, u32)]) -> HashMap<String, BucketLimit> {
    entries
        .iter()
        .map(|&(name, rate_per_sec, burst)| {
            (
                name.to_owned(),
                BucketLimit {
                    rate_per_sec,
                    burst,
                },
            )
        })
        .collect()
}

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    rng.next_u64() % n
}

/// A random DAG over `n` tasks, ids shuffled so that ids are not a
/// topological order; each task depends on up to `max_deps` earlier ones
/// (in the hidden order), in one of `buckets` buckets.
fn random_dag(seed: u64, n: usize, max_deps: u64, buckets: u64) -> Vec<Task> {
    let mut rng = SplitMix64::new(seed);
    let mut label: Vec<TaskId> = (0..n).collect();
    for i in (1..n).rev() {
        let j = below(&mut rng, i as u64 + 1) as usize;
        label.swap(i, j);
    }
    let mut tasks = vec![task(&[], ""); n];
    for rank in 0..n {
        let mut deps = Vec::new();
        if rank > 0 {
            for _ in 0..below(&mut rng, max_deps + 1) {
                deps.push(label[below(&mut rng, rank as u64) as usize]);
            }
        }
        tasks[label[rank]] = Task {
            deps,
            bucket: format!("Local/target-{}", below(&mut rng, buckets)),
            group: None,
        };
    }
    tasks
}

/// Every task transitively depending on `root`.
fn transitive_dependents(tasks: &[Task], root: TaskId) -> HashSet<TaskId> {
    let mut dependents = vec![Vec::new(); tasks.len()];
    for (id, t) in tasks.iter().enumerate() {
        for &d in &t.deps {
            dependents[d].push(id);
        }
    }
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(t) = stack.pop() {
        for &d in &dependents[t] {
            if seen.insert(d) {
                stack.push(d);
            }
        }
    }
    seen
}

/// A plugin with random latency that sometimes answers InProgress (then
/// polls finish after a few rounds) and sometimes fails retryably on the
/// first two attempts, so that every task eventually succeeds.
fn flaky_plugin(seed: u64) -> Plugin {
    let mut rng = SplitMix64::new(seed);
    let mut polls_left: HashMap<TaskId, u32> = HashMap::new();
    Box::new(move |action, _now| {
        let latency = MS * below(&mut rng, 50) as u32;
        let outcome = match *action {
            Action::Start { task, attempt, .. } => {
                let roll = below(&mut rng, 100);
                if attempt <= 2 && roll < 10 {
                    let code = if roll < 5 {
                        ErrorCode::Throttling
                    } else {
                        ErrorCode::ServiceInternalError
                    };
                    Outcome::Failed {
                        code,
                        retry_after: None,
                    }
                } else if roll < 25 {
                    polls_left.insert(task, 1 + below(&mut rng, 3) as u32);
                    Outcome::InProgress {
                        retry_after: Some(MS * below(&mut rng, 200) as u32),
                    }
                } else {
                    Outcome::Success
                }
            }
            Action::Poll { task } => {
                let left = polls_left
                    .get_mut(&task)
                    .expect("polled a task not in progress");
                *left -= 1;
                if *left == 0 {
                    Outcome::Success
                } else {
                    Outcome::InProgress { retry_after: None }
                }
            }
        };
        (latency, outcome)
    })
}

#[test]
fn ordering_on_random_dag_of_1000_nodes() {
    for seed in 0..3 {
        let tasks = random_dag(seed, 1000, 4, 4);
        let lim = limits(&[("Local/target-0", 200.0, 10), ("Local/target-1", 50.0, 5)]);
        let mut sim = Sim::new(tasks.clone(), lim, config(16), flaky_plugin(seed));
        sim.run();
        // Starts checked their dependencies in `step`; check again from the log.
        let mut first_success: HashMap<TaskId, Instant> = HashMap::new();
        for (at, task, outcome) in &sim.outcomes {
            if *outcome == Outcome::Success {
                first_success.entry(*task).or_insert(*at);
            }
        }
        for (at, task, _, _) in sim.starts() {
            for d in &tasks[task].deps {
                assert!(first_success[d] <= at, "{task} started before {d}");
            }
        }
        assert!(sim.states().iter().all(|s| *s == TaskState::Succeeded));
        let summary = sim.sched.summary();
        assert_eq!(summary.succeeded, 1000);
        assert_eq!(summary.unfinished, 0);
        assert!(summary.retries > 0 && summary.throttled > 0 && summary.polls > 0);
        assert_eq!(summary.starts, 1000 + summary.retries);
    }
}

/// Checks that in every window of the recorded instants at most
/// `burst + rate * W` tokens were taken (the windows between two recorded
/// instants are the tightest).
fn assert_within_rate(times: &[Instant], rate: f64, burst: u32) {
    let mut times = times.to_vec();
    times.sort();
    for i in 0..times.len() {
        for j in i..times.len() {
            let width = (times[j] - times[i]).as_secs_f64();
            let count = (j - i + 1) as f64;
            assert!(
                count <= f64::from(burst) + rate * width + 1e-9,
                "{count} requests in {width}s with rate {rate}/s and burst {burst}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn token_bucket_never_exceeds_rate_in_any_window(
        rate_a in 0.5f64..100.0,
        burst_a in 1u32..12,
        rate_b in 0.1f64..20.0,
        burst_b in 2u32..5,
        n in 20usize..150,
        seed in any::<u64>(),
    ) {
        let tasks = random_dag(seed, n, 2, 3);
        // target-2 is unlimited.
        let lim = limits(&[("Local/target-0", rate_a, burst_a), ("Local/target-1", rate_b, burst_b)]);
        // Bucket b also sees ambiguous failures, whose retries cost two tokens.
        let mut inner = flaky_plugin(seed);
        let bucket_of: Vec<String> = tasks.iter().map(|t| t.bucket.clone()).collect();
        let mut rng = SplitMix64::new(seed ^ 1);
        let plugin: Plugin = Box::new(move |action, now| {
            if let Action::Start { task, attempt: 1, .. } = *action {
                if bucket_of[task] == "Local/target-1" && below(&mut rng, 4) == 0 {
                    return (5 * MS, Outcome::Failed { code: ErrorCode::DeadlineExceeded, retry_after: None });
                }
            }
            inner(action, now)
        });
        let mut sim = Sim::new(tasks.clone(), lim, config(8), plugin);
        sim.run();
        let mut per_bucket: HashMap<&str, Vec<Instant>> = HashMap::new();
        for &(at, action) in &sim.log {
            let times = per_bucket.entry(tasks[action.task()].bucket.as_str()).or_default();
            times.push(at);
            if let Action::Start { verify_first: true, .. } = action {
                times.push(at); // the read before the operation
            }
        }
        assert_within_rate(per_bucket.get("Local/target-0").map_or(&[][..], |v| v), rate_a, burst_a);
        assert_within_rate(per_bucket.get("Local/target-1").map_or(&[][..], |v| v), rate_b, burst_b);
        prop_assert!(sim.states().iter().all(|s| *s == TaskState::Succeeded));
    }
}

#[test]
fn token_bucket_wait_is_reported_and_tracked() {
    let tasks = vec![
        task(&[], "a"),
        task(&[], "a"),
        task(&[], "a"),
        task(&[], "b"),
    ];
    let lim = limits(&[("a", 1.0, 1)]);
    let t0 = crate::test_clock::epoch();
    let mut s = Scheduler::new(tasks, lim, RateRegistry::local(), config(10), t0).unwrap();
    let actions = s.poll(t0);
    let started: Vec<TaskId> = actions.iter().map(Action::task).collect();
    assert_eq!(started, vec![0, 3], "bucket b is not held up by bucket a");
    assert_eq!(s.state(1), &TaskState::WaitingForToken);
    assert_eq!(s.state(2), &TaskState::WaitingForToken);
    assert_eq!(s.next_wakeup(), Some(t0 + SEC));
    s.on_outcome(0, Outcome::Success, t0);
    s.on_outcome(3, Outcome::Success, t0);
    assert_eq!(s.poll(t0 + 500 * MS), vec![]);
    assert_eq!(
        s.poll(t0 + SEC)
            .iter()
            .map(Action::task)
            .collect::<Vec<_>>(),
        vec![1]
    );
    s.on_outcome(1, Outcome::Success, t0 + SEC);
    assert_eq!(s.next_wakeup(), Some(t0 + 2 * SEC));
    assert_eq!(
        s.poll(t0 + 2 * SEC)
            .iter()
            .map(Action::task)
            .collect::<Vec<_>>(),
        vec![2]
    );
    s.on_outcome(2, Outcome::Success, t0 + 2 * SEC);
    assert!(s.is_finished());
    assert_eq!(s.next_wakeup(), None);
    // Two requests waited 1 s, then one more waited another 1 s.
    let summary = s.summary();
    assert_eq!(summary.rate_limit_wait, 3 * SEC);
    let waits: Vec<(&str, Duration)> = s.rate_limit_waits().collect();
    assert_eq!(waits, vec![("a", 3 * SEC), ("b", Duration::ZERO)]);
}

#[test]
fn token_bucket_wait_counts_tasks_that_join_a_dry_bucket() {
    // 0 and 1 are ready at once; 2 becomes ready when 0 succeeds at 0.5 s.
    let tasks = vec![task(&[], "a"), task(&[], "a"), task(&[0], "a")];
    let t0 = crate::test_clock::epoch();
    let mut s = Scheduler::new(
        tasks,
        limits(&[("a", 1.0, 1)]),
        RateRegistry::local(),
        config(10),
        t0,
    )
    .unwrap();
    assert_eq!(s.poll(t0).len(), 1);
    s.on_outcome(0, Outcome::Success, t0 + 500 * MS);
    assert_eq!(s.state(2), &TaskState::WaitingForToken);
    assert_eq!(s.summary().rate_limit_wait, 500 * MS);
    for k in 1..=2 {
        let now = t0 + k * SEC;
        assert_eq!(s.next_wakeup(), Some(now));
        let actions = s.poll(now);
        assert_eq!(actions.len(), 1);
        s.on_outcome(actions[0].task(), Outcome::Success, now);
    }
    assert!(s.is_finished());
    // 1 waits 0..1 s, 2 waits 0.5..2 s.
    assert_eq!(s.summary().rate_limit_wait, 2500 * MS);
}

#[test]
fn two_schedulers_on_one_registry_share_a_buckets_tokens() {
    // Two commands of one process on bucket `a` (1/s, burst 2), each with
    // three tasks: together they get 2 at once, then one a second.
    let t0 = crate::test_clock::epoch();
    let rates = RateRegistry::local();
    let lim = limits(&[("a", 1.0, 2)]);
    let three = || vec![task(&[], "a"), task(&[], "a"), task(&[], "a")];
    let mut one = Scheduler::new(three(), lim.clone(), rates.clone(), config(10), t0).unwrap();
    let mut two = Scheduler::new(three(), lim, rates, config(10), t0).unwrap();
    assert_eq!(one.poll(t0).len(), 2);
    assert!(two.poll(t0).is_empty(), "the burst is spent");
    assert_eq!(two.state(0), &TaskState::WaitingForToken);
    // Both wake at 1 s; the first to ask takes the token, the other
    // finds none and re-arms its wake-up for the next one.
    assert_eq!(one.next_wakeup(), Some(t0 + SEC));
    assert_eq!(two.next_wakeup(), Some(t0 + SEC));
    assert_eq!(two.poll(t0 + SEC).len(), 1);
    assert!(one.poll(t0 + SEC).is_empty());
    assert_eq!(one.next_wakeup(), Some(t0 + 2 * SEC));
    let mut sent = 3;
    let mut now = t0 + SEC;
    while sent < 6 {
        now += SEC;
        let got = one.poll(now).len() + two.poll(now).len();
        assert_eq!(got, 1, "one token a second at {:?}", now - t0);
        sent += got;
    }
    assert_eq!(now, t0 + 4 * SEC);
}

#[test]
fn throttled_operations_back_off_longer_and_succeed() {
    // Task 0 is throttled three times, task 1 fails with a plain retryable
    // code three times; then both succeed.
    let tasks = vec![task(&[], "a"), task(&[], "b")];
    let plugin: Plugin = Box::new(|action, _| {
        let Action::Start { task, attempt, .. } = *action else {
            unreachable!()
        };
        let outcome = if attempt <= 3 {
            let code = if task == 0 {
                ErrorCode::Throttling
            } else {
                ErrorCode::ServiceInternalError
            };
            Outcome::Failed {
                code,
                retry_after: None,
            }
        } else {
            Outcome::Success
        };
        (10 * MS, outcome)
    });
    let mut sim = Sim::new(tasks, HashMap::new(), config(10), plugin);
    sim.run();
    assert_eq!(
        sim.states(),
        vec![TaskState::Succeeded, TaskState::Succeeded]
    );
    let gaps = |task: TaskId| -> Vec<Duration> {
        let starts: Vec<Instant> = sim.starts().filter(|s| s.1 == task).map(|s| s.0).collect();
        assert_eq!(starts.len(), 4);
        starts.windows(2).map(|w| w[1] - w[0] - 10 * MS).collect()
    };
    let throttled = gaps(0);
    let plain = gaps(1);
    for (attempt, (t, p)) in throttled.iter().zip(&plain).enumerate() {
        // jitter 0.2 and factor 4: throttled in (3.2, 4] x, plain in (0.8, 1] x.
        let full = 100 * MS * 2u32.pow(attempt as u32);
        assert!(*p > full * 8 / 10 && *p <= full, "{p:?}");
        assert!(*t > full * 32 / 10 && *t <= full * 4, "{t:?}");
        assert!(t > p);
    }
    let summary = sim.sched.summary();
    assert_eq!(summary.throttled, 3);
    assert_eq!(summary.retries, 6);
    assert_eq!(sim.sched.attempts(0), 4);
}

#[test]
fn throttling_retry_after_is_honoured() {
    let tasks = vec![task(&[], "a")];
    let plugin: Plugin = Box::new(|action, _| {
        let Action::Start { attempt, .. } = *action else {
            unreachable!()
        };
        if attempt == 1 {
            let outcome = Outcome::Failed {
                code: ErrorCode::Throttling,
                retry_after: Some(30 * SEC),
            };
            (Duration::ZERO, outcome)
        } else {
            (Duration::ZERO, Outcome::Success)
        }
    });
    let mut sim = Sim::new(tasks, HashMap::new(), config(1), plugin);
    sim.step();
    match sim.sched.state(0) {
        TaskState::BackingOff { until, attempt: 2 } => assert_eq!(*until, sim.t0 + 30 * SEC),
        other => panic!("{other:?}"),
    }
    sim.run();
    let starts: Vec<_> = sim.starts().collect();
    assert_eq!(starts[1].0 - sim.t0, 30 * SEC);
}

#[test]
fn failing_node_fails_exactly_its_transitive_dependents() {
    let tasks = random_dag(11, 400, 3, 2);
    let candidates: Vec<TaskId> = (0..tasks.len())
        .filter(|&t| transitive_dependents(&tasks, t).len() >= 5)
        .collect();
    let failing = candidates[candidates.len() / 2];
    let doomed = transitive_dependents(&tasks, failing);
    assert!(
        doomed.len() < tasks.len() - 1,
        "the test needs independent tasks"
    );
    let plugin: Plugin = Box::new(move |action, _| {
        let outcome = if action.task() == failing {
            Outcome::Failed {
                code: ErrorCode::InvalidRequest,
                retry_after: None,
            }
        } else {
            Outcome::Success
        };
        (MS, outcome)
    });
    let mut sim = Sim::new(tasks.clone(), HashMap::new(), config(4), plugin);
    sim.run();
    for (id, state) in sim.states().into_iter().enumerate() {
        let expected = if id == failing {
            TaskState::Failed {
                code: ErrorCode::InvalidRequest,
                attempts: 1,
            }
        } else if doomed.contains(&id) {
            TaskState::DependencyFailed { root: failing }
        } else {
            TaskState::Succeeded
        };
        assert_eq!(state, expected, "task {id}");
    }
    assert!(sim.starts().all(|s| !doomed.contains(&s.1)));
    let summary = sim.sched.summary();
    assert_eq!(summary.failed, 1);
    assert_eq!(summary.dependency_failed, doomed.len());
    assert_eq!(summary.succeeded, tasks.len() - 1 - doomed.len());
    assert_eq!(summary.retries, 0, "a terminal code is not retried");
}

#[test]
fn retries_exhausted_fail_the_task_and_its_dependents() {
    // 0 <- 1 <- 2, and 3 independent. 0 always fails retryably.
    let tasks = vec![
        task(&[], "a"),
        task(&[0], "a"),
        task(&[1], "a"),
        task(&[], "a"),
    ];
    let plugin: Plugin = Box::new(|action, _| {
        let outcome = if action.task() == 0 {
            Outcome::Failed {
                code: ErrorCode::ServiceTimeout,
                retry_after: None,
            }
        } else {
            Outcome::Success
        };
        (MS, outcome)
    });
    let mut sim = Sim::new(tasks, HashMap::new(), config(4), plugin);
    sim.run();
    assert_eq!(
        sim.states(),
        vec![
            TaskState::Failed {
                code: ErrorCode::ServiceTimeout,
                attempts: 5
            },
            TaskState::DependencyFailed { root: 0 },
            TaskState::DependencyFailed { root: 0 },
            TaskState::Succeeded,
        ]
    );
}

/// One task whose operation answers InProgress to the start and to the
/// first `in_progress_polls - 1` polls.
fn in_progress_plugin(in_progress_polls: u32, retry_after: Option<Duration>) -> Plugin {
    let mut polls = 0;
    Box::new(move |action, _| {
        let outcome = match action {
            Action::Start { .. } => Outcome::InProgress { retry_after },
            Action::Poll { .. } => {
                polls += 1;
                if polls >= in_progress_polls {
                    Outcome::Success
                } else {
                    Outcome::InProgress { retry_after }
                }
            }
        };
        (100 * MS, outcome)
    })
}

#[test]
fn in_progress_is_polled_until_done() {
    let tasks = vec![task(&[], "a"), task(&[0], "a")];
    let mut sim = Sim::new(
        tasks,
        HashMap::new(),
        config(4),
        in_progress_plugin(5, Some(3 * SEC)),
    );
    // The start answers InProgress at 0.1 s: the first poll is due at 3.1 s.
    sim.step();
    sim.step();
    assert_eq!(
        sim.sched.state(0),
        &TaskState::InProgress {
            next_poll: sim.t0 + 3100 * MS
        }
    );
    assert_eq!(
        sim.sched.in_flight(),
        0,
        "waiting between polls is no request"
    );
    assert_eq!(sim.sched.next_wakeup(), Some(sim.t0 + 3100 * MS));
    sim.run();
    let polls: Vec<Duration> = sim
        .log
        .iter()
        .filter(|(_, a)| *a == Action::Poll { task: 0 })
        .map(|(at, _)| *at - sim.t0)
        .collect();
    let expected: Vec<Duration> = (1..=5u32).map(|k| (3100 * k) * MS).collect();
    assert_eq!(polls, expected);
    assert_eq!(
        sim.states(),
        vec![TaskState::Succeeded, TaskState::Succeeded]
    );
    // Task 1 starts after 0 succeeds, and is done after one poll.
    assert_eq!(sim.sched.summary().polls, 6);
    assert_eq!(sim.sched.attempts(0), 1, "polls are not attempts");
}

#[test]
fn polls_take_a_concurrency_slot_but_waiting_between_polls_does_not() {
    let tasks = vec![task(&[], "a"), task(&[], "a")];
    let t0 = crate::test_clock::epoch();
    let mut s =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(1), t0).unwrap();
    let start = |task| Action::Start {
        task,
        attempt: 1,
        verify_first: false,
    };
    assert_eq!(s.poll(t0), vec![start(0)]);
    assert_eq!(s.state(1), &TaskState::Ready);
    s.on_outcome(
        0,
        Outcome::InProgress {
            retry_after: Some(SEC),
        },
        t0,
    );
    assert_eq!(s.next_wakeup(), Some(t0), "a slot is free: poll now");
    assert_eq!(s.poll(t0), vec![start(1)]);
    assert_eq!(s.next_wakeup(), Some(t0 + SEC));
    // The poll is due, but the only slot is taken: only an outcome helps.
    assert_eq!(s.poll(t0 + SEC), vec![]);
    assert_eq!(
        s.state(0),
        &TaskState::InProgress {
            next_poll: t0 + SEC
        }
    );
    assert_eq!(s.next_wakeup(), None);
    s.on_outcome(1, Outcome::Success, t0 + 2 * SEC);
    assert_eq!(s.next_wakeup(), Some(t0 + 2 * SEC));
    assert_eq!(s.poll(t0 + 2 * SEC), vec![Action::Poll { task: 0 }]);
    assert_eq!(s.state(0), &TaskState::Polling { attempt: 1 });
    assert_eq!(s.in_flight(), 1);
    assert!(!s.is_finished());
    s.on_outcome(0, Outcome::Success, t0 + 2 * SEC);
    assert!(s.is_finished());
}

#[test]
fn in_progress_uses_default_poll_interval() {
    let mut sim = Sim::new(
        vec![task(&[], "a")],
        HashMap::new(),
        config(4),
        in_progress_plugin(2, None),
    );
    sim.run();
    let polls: Vec<Duration> = sim
        .log
        .iter()
        .filter(|(_, a)| matches!(a, Action::Poll { .. }))
        .map(|(at, _)| *at - sim.t0)
        .collect();
    // Default interval 1 s after each 0.1 s answer.
    assert_eq!(polls, vec![1100 * MS, 2200 * MS]);
}

#[test]
fn in_progress_times_out_into_not_stabilized() {
    let tasks = vec![task(&[], "a"), task(&[0], "a"), task(&[], "a")];
    let plugin: Plugin = Box::new(|action, _| match action {
        Action::Start { task: 2, .. } => (Duration::ZERO, Outcome::Success),
        _ => (
            Duration::ZERO,
            Outcome::InProgress {
                retry_after: Some(10 * SEC),
            },
        ),
    });
    let mut sim = Sim::new(tasks, HashMap::new(), config(4), plugin);
    sim.run();
    assert_eq!(
        sim.states(),
        vec![
            TaskState::Failed {
                code: ErrorCode::NotStabilized,
                attempts: 1
            },
            TaskState::DependencyFailed { root: 0 },
            TaskState::Succeeded,
        ]
    );
    let polls: Vec<Duration> = sim
        .log
        .iter()
        .filter(|(_, a)| matches!(a, Action::Poll { .. }))
        .map(|(at, _)| *at - sim.t0)
        .collect();
    // poll_timeout is 60 s: polls every 10 s, the last one at the deadline.
    let expected: Vec<Duration> = (1..=6u32).map(|k| 10 * k * SEC).collect();
    assert_eq!(polls, expected);
    assert_eq!(sim.sched.summary().retries, 0, "a poll timeout is final");
}

#[test]
fn cancellation_stops_new_starts_while_in_flight_finish() {
    // 20 independent tasks, 4 at a time, every answer after 1 s.
    // 0: InProgress, polls finish on the 3rd poll. 1: fails retryably and
    // backs off for long. 5: answers Throttling after the cancel.
    // 6: answers Canceled after the cancel.
    let tasks: Vec<Task> = (0..20).map(|_| task(&[], "a")).collect();
    let mut polls = 0;
    let plugin: Plugin = Box::new(move |action, _| {
        let outcome = match *action {
            Action::Start { task: 0, .. } => Outcome::InProgress {
                retry_after: Some(500 * MS),
            },
            Action::Poll { task: 0 } => {
                polls += 1;
                if polls == 3 {
                    Outcome::Success
                } else {
                    Outcome::InProgress {
                        retry_after: Some(500 * MS),
                    }
                }
            }
            Action::Start { task: 1, .. } => Outcome::Failed {
                code: ErrorCode::ServiceInternalError,
                retry_after: Some(60 * SEC),
            },
            Action::Start { task: 5, .. } => Outcome::Failed {
                code: ErrorCode::Throttling,
                retry_after: None,
            },
            Action::Start { task: 6, .. } => Outcome::Failed {
                code: ErrorCode::Canceled,
                retry_after: None,
            },
            _ => Outcome::Success,
        };
        (SEC, outcome)
    });
    let mut sim = Sim::new(tasks, HashMap::new(), config(4), plugin);
    // t=0: 0..4 start. t=1: answers; 4..8 start.
    while sim.now < sim.t0 + 1500 * MS {
        assert!(sim.step());
    }
    let cancel_at = sim.now;
    assert!(matches!(
        sim.sched.state(1),
        TaskState::BackingOff { attempt: 2, .. }
    ));
    sim.sched.cancel(cancel_at);
    assert!(sim.sched.is_canceled());
    assert_eq!(sim.sched.in_flight(), 4, "in-flight starts are left alone");
    assert_eq!(sim.sched.state(1), &TaskState::Canceled);
    assert_eq!(sim.sched.state(10), &TaskState::Canceled);
    assert!(matches!(sim.sched.state(0), TaskState::InProgress { .. }));
    sim.run();

    assert!(
        sim.starts().all(|(at, ..)| at < cancel_at),
        "no start after cancel"
    );
    let polls_after = sim
        .log
        .iter()
        .filter(|(at, a)| *at > cancel_at && matches!(a, Action::Poll { .. }))
        .count();
    assert!(polls_after > 0, "operations in progress are still polled");
    let states = sim.states();
    assert_eq!(states[0], TaskState::Succeeded);
    assert_eq!(states[1], TaskState::Canceled);
    assert_eq!(states[2], TaskState::Succeeded);
    assert_eq!(states[3], TaskState::Succeeded);
    assert_eq!(states[4], TaskState::Succeeded);
    assert_eq!(
        states[5],
        TaskState::Failed {
            code: ErrorCode::Throttling,
            attempts: 1
        },
        "after cancel a retryable failure is final"
    );
    assert_eq!(states[6], TaskState::Canceled);
    assert_eq!(states[7], TaskState::Succeeded);
    assert!(states[8..].iter().all(|s| *s == TaskState::Canceled));
    let summary = sim.sched.summary();
    assert_eq!(summary.starts, 8);
    assert_eq!(summary.canceled, 14);
    assert!(sim.sched.is_finished());
}

#[test]
fn cancel_before_anything_runs_finishes_at_once() {
    let tasks = vec![task(&[], "a"), task(&[0], "a")];
    let t0 = crate::test_clock::epoch();
    let mut s = Scheduler::new(
        tasks,
        limits(&[("a", 1.0, 1)]),
        RateRegistry::local(),
        config(4),
        t0,
    )
    .unwrap();
    s.cancel(t0);
    assert_eq!(s.poll(t0), vec![]);
    assert!(s.is_finished());
    assert_eq!(s.next_wakeup(), None);
    assert_eq!(s.summary().canceled, 2);
}

#[test]
fn concurrency_limit_is_never_exceeded() {
    for (seed, limit) in [(1, 1), (2, 7), (3, 32)] {
        let tasks = random_dag(seed, 500, 3, 3);
        let mut sim = Sim::new(tasks, HashMap::new(), config(limit), flaky_plugin(seed));
        let mut peak = 0;
        while sim.step() {
            // `step` asserts the scheduler's count matches the answers
            // outstanding; here the count stays within the limit.
            assert!(sim.pending.len() <= limit);
            peak = peak.max(sim.max_in_flight_seen);
        }
        assert!(sim.sched.is_finished());
        assert_eq!(peak, limit, "the limit is used in full");
        assert_eq!(sim.sched.summary().succeeded, 500);
    }
}

#[test]
fn ambiguous_failure_gives_verify_first_on_retry() {
    // Task 0: DeadlineExceeded, then Throttling, then success: the 2nd and
    // 3rd attempts both verify. Task 1: a plain retryable failure: no verify.
    let tasks = vec![task(&[], "a"), task(&[], "b")];
    let plugin: Plugin = Box::new(|action, _| {
        let Action::Start { task, attempt, .. } = *action else {
            unreachable!()
        };
        let code = match (task, attempt) {
            (0, 1) => ErrorCode::DeadlineExceeded,
            (0, 2) => ErrorCode::Throttling,
            (1, 1) => ErrorCode::ServiceInternalError,
            _ => return (Duration::ZERO, Outcome::Success),
        };
        let outcome = Outcome::Failed {
            code,
            retry_after: None,
        };
        (Duration::ZERO, outcome)
    });
    let mut cfg = config(4);
    cfg.retry.jitter = 0.0;
    let mut sim = Sim::new(tasks, limits(&[("a", 1.0, 2)]), cfg, plugin);
    sim.run();
    let starts: Vec<(Duration, TaskId, u32, bool)> = sim
        .starts()
        .map(|(at, t, a, v)| (at - sim.t0, t, a, v))
        .collect();
    assert_eq!(
        starts,
        vec![
            (Duration::ZERO, 0, 1, false),
            (Duration::ZERO, 1, 1, false),
            (100 * MS, 1, 2, false),
            // Backoff ends at 0.1 s, but a verifying start takes two tokens
            // (the read and the operation): bucket a has 1.1 until 1 s.
            (SEC, 0, 2, true),
            // Throttled: 200 ms x 4 after 1 s, then two tokens again at 3 s.
            (3 * SEC, 0, 3, true),
        ]
    );
    assert_eq!(
        sim.states(),
        vec![TaskState::Succeeded, TaskState::Succeeded]
    );
}

#[test]
fn cycle_is_refused_naming_its_members() {
    let t0 = crate::test_clock::epoch();
    let tasks = vec![
        task(&[], "a"),
        task(&[0, 3], "a"),
        task(&[1], "a"),
        task(&[2], "a"),
        task(&[3], "a"),
    ];
    let err =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(1), t0).unwrap_err();
    assert_eq!(err.members, vec![1, 3, 2]);
    assert_eq!(err.to_string(), "dependency cycle: 1 -> 3 -> 2 -> 1");

    let tasks = vec![task(&[], "a"), task(&[1], "a")];
    let err =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(1), t0).unwrap_err();
    assert_eq!(err.members, vec![1]);

    // A cycle behind a long chain, ids shuffled.
    let mut tasks: Vec<Task> = (0..100).map(|i| task(&[i + 1], "a")).collect();
    tasks[99] = task(&[57], "a");
    let err =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(1), t0).unwrap_err();
    assert_eq!(err.members, (57..100).collect::<Vec<_>>());
}

#[test]
#[should_panic(expected = "depends on 5")]
fn unknown_dependency_panics() {
    let _ = Scheduler::new(
        vec![task(&[5], "a")],
        HashMap::new(),
        RateRegistry::local(),
        config(1),
        crate::test_clock::epoch(),
    );
}

#[test]
fn same_seed_same_schedule() {
    let run = |seed: u64| {
        let tasks = random_dag(5, 300, 3, 3);
        let mut cfg = config(8);
        cfg.seed = seed;
        cfg.retry.jitter = 1.0;
        let lim = limits(&[("Local/target-0", 20.0, 3)]);
        let mut sim = Sim::new(tasks, lim, cfg, flaky_plugin(99));
        sim.run();
        let t0 = sim.t0;
        sim.log
            .iter()
            .map(|(at, a)| (*at - t0, *a))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2), "the seed drives the jitter");
}

#[test]
fn stale_outcomes_are_ignored() {
    let t0 = crate::test_clock::epoch();
    let mut s = Scheduler::new(
        vec![task(&[], "a")],
        HashMap::new(),
        RateRegistry::local(),
        config(1),
        t0,
    )
    .unwrap();
    s.on_outcome(0, Outcome::Success, t0);
    s.on_outcome(7, Outcome::Success, t0);
    assert_eq!(s.state(0), &TaskState::Ready);
    assert_eq!(s.poll(t0).len(), 1);
    s.on_outcome(0, Outcome::Success, t0);
    s.on_outcome(0, Outcome::Success, t0);
    assert_eq!(s.summary().succeeded, 1);
    assert!(s.is_finished());
}

/// `layers` layers of `width` tasks, each depending on two random tasks of
/// the layer before, spread over 10 unlimited buckets.
fn layered(width: usize, layers: usize, seed: u64) -> Vec<Task> {
    let mut rng = SplitMix64::new(seed);
    let mut tasks = Vec::with_capacity(width * layers);
    for layer in 0..layers {
        for i in 0..width {
            let deps = if layer == 0 {
                vec![]
            } else {
                let base = (layer - 1) * width;
                vec![
                    base + below(&mut rng, width as u64) as usize,
                    base + below(&mut rng, width as u64) as usize,
                ]
            };
            tasks.push(task(&deps, &format!("Local/target-{}", i % 10)));
        }
    }
    tasks
}

/// Drives `tasks` to completion with instant answers; a minimal driver
/// loop as an executor would write it.
fn drive(tasks: Vec<Task>, max_concurrency: usize) -> Scheduler {
    let t0 = crate::test_clock::epoch();
    let n = tasks.len();
    let lim = limits(&[("Local/target-0", 1e6, 1000)]);
    let mut s = Scheduler::new(
        tasks,
        lim,
        RateRegistry::local(),
        config(max_concurrency),
        t0,
    )
    .unwrap();
    let mut now = t0;
    let mut sent = Vec::new();
    while !s.is_finished() {
        sent.clear();
        sent.extend(s.poll(now));
        for action in &sent {
            s.on_outcome(action.task(), Outcome::Success, now);
        }
        if sent.is_empty() {
            now = s.next_wakeup().expect("work left");
        }
    }
    assert_eq!(s.summary().succeeded, n);
    s
}

#[test]
fn scale_100k_tasks_wide_and_layered() {
    // Correctness at scale; speed is measured by the `apply` benchmark,
    // never asserted in a test.
    drive(layered(100_000, 1, 1), 1000);
    drive(layered(10_000, 10, 2), 1000);
}

#[test]
fn a_request_waiting_for_a_token_is_reported_once_until_it_starts() {
    let t0 = crate::test_clock::epoch();
    let tasks = vec![task(&[], "a"), task(&[], "a")];
    let mut s = Scheduler::new(
        tasks,
        limits(&[("a", 1.0, 1)]),
        RateRegistry::local(),
        config(4),
        t0,
    )
    .unwrap();
    let first = s.poll(t0);
    assert_eq!(first.len(), 1);
    let waiting = s.take_newly_rate_limited();
    assert_eq!(waiting.len(), 1);
    assert_ne!(waiting[0], first[0].task());
    assert!(s.poll(t0 + 10 * MS).is_empty());
    assert!(
        s.take_newly_rate_limited().is_empty(),
        "still the same wait"
    );
    let second = s.poll(t0 + SEC);
    assert_eq!(second.iter().map(Action::task).collect::<Vec<_>>(), waiting);
    assert!(s.take_newly_rate_limited().is_empty());
}

/// A plugin answering every request `Success` after `latency`.
fn steady_plugin(latency: Duration) -> Plugin {
    Box::new(move |_, _| (latency, Outcome::Success))
}

/// The most tasks of `members` holding a request in flight at once.
fn peak_overlap(sim: &Sim, members: &[TaskId]) -> usize {
    let mut events: Vec<(Instant, i32)> = Vec::new();
    let mut open: HashMap<TaskId, Instant> = HashMap::new();
    for &(at, action) in &sim.log {
        if members.contains(&action.task()) {
            open.insert(action.task(), at);
        }
    }
    for &(at, task, _) in &sim.outcomes {
        if let Some(start) = open.remove(&task) {
            events.push((start, 1));
            events.push((at, -1));
        }
    }
    // Ends sort before starts at the same instant: an answer frees the slot
    // for a start in the same step.
    events.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        peak = peak.max(now);
    }
    peak as usize
}

#[test]
fn a_concurrency_group_runs_at_most_its_limit_at_once() {
    // 20 grants in database a (limit 1), 20 in database b (limit 2), 20
    // ungrouped, all in one bucket, 64 slots.
    let mut tasks = Vec::new();
    tasks.extend((0..20).map(|_| grouped("Postgres/t", "Postgres/t#database:a", 1)));
    tasks.extend((0..20).map(|_| grouped("Postgres/t", "Postgres/t#database:b", 2)));
    tasks.extend((0..20).map(|_| task(&[], "Postgres/t")));
    let mut sim = Sim::new(tasks, HashMap::new(), config(64), steady_plugin(10 * MS));
    sim.run();
    assert!(sim.states().iter().all(|s| *s == TaskState::Succeeded));
    let a: Vec<TaskId> = (0..20).collect();
    let b: Vec<TaskId> = (20..40).collect();
    let free: Vec<TaskId> = (40..60).collect();
    assert_eq!(peak_overlap(&sim, &a), 1, "group a has one slot");
    assert_eq!(peak_overlap(&sim, &b), 2, "group b has two slots");
    assert_eq!(
        peak_overlap(&sim, &free),
        20,
        "ungrouped tasks all run at once"
    );
    // Group a is serial: 20 answers of 10 ms each, back to back.
    let last_a = sim
        .outcomes
        .iter()
        .filter(|(_, t, _)| a.contains(t))
        .map(|(at, _, _)| *at)
        .max()
        .unwrap();
    assert_eq!(last_a - sim.t0, 200 * MS);
}

#[test]
fn a_group_slot_is_kept_while_in_progress_and_freed_by_a_retry_backoff() {
    let tasks = vec![grouped("a", "g", 1), grouped("a", "g", 1)];
    let t0 = crate::test_clock::epoch();
    let mut s =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(8), t0).unwrap();
    let start = |task, attempt| Action::Start {
        task,
        attempt,
        verify_first: false,
    };
    assert_eq!(s.poll(t0), vec![start(0, 1)], "one slot: task 1 waits");
    assert_eq!(s.state(1), &TaskState::Ready);
    s.on_outcome(
        0,
        Outcome::InProgress {
            retry_after: Some(SEC),
        },
        t0,
    );
    assert_eq!(s.poll(t0), vec![], "in progress keeps the slot");
    assert_eq!(s.poll(t0 + SEC), vec![Action::Poll { task: 0 }]);
    s.on_outcome(
        0,
        Outcome::Failed {
            code: ErrorCode::ServiceInternalError,
            retry_after: None,
        },
        t0 + SEC,
    );
    assert!(matches!(s.state(0), TaskState::BackingOff { .. }));
    assert_eq!(s.poll(t0 + SEC), vec![start(1, 1)], "backing off frees it");
    s.on_outcome(1, Outcome::Success, t0 + SEC);
    let retry_at = s.next_wakeup().unwrap();
    assert_eq!(s.poll(retry_at), vec![start(0, 2)]);
    s.on_outcome(0, Outcome::Success, retry_at);
    assert!(s.is_finished());
}

#[test]
fn cancel_cancels_tasks_waiting_for_a_group_slot() {
    let tasks = vec![
        grouped("a", "g", 1),
        grouped("a", "g", 1),
        grouped("a", "g", 1),
    ];
    let t0 = crate::test_clock::epoch();
    let mut s =
        Scheduler::new(tasks, HashMap::new(), RateRegistry::local(), config(8), t0).unwrap();
    assert_eq!(s.poll(t0).len(), 1);
    s.cancel(t0);
    assert_eq!(s.state(1), &TaskState::Canceled);
    assert_eq!(s.state(2), &TaskState::Canceled);
    s.on_outcome(0, Outcome::Success, t0);
    assert_eq!(
        s.poll(t0),
        vec![],
        "nothing parked comes back after a cancel"
    );
    assert!(s.is_finished());
}
