//! The scheduler: which operation of a command to send next, and when.
//!
//! This is a pure state machine in the style of `quinn-proto`. It does no
//! I/O, never reads the clock and never sleeps: every method that depends on
//! time takes `now: Instant`, and randomness (retry jitter) comes from a
//! generator seeded by [`Config::seed`], so the same inputs (the tokens
//! other runs take from the shared [`RateRegistry`] among them) always give
//! the same schedule. An async executor drives it:
//!
//! 1. call [`Scheduler::poll`] and send every [`Action`] it returns;
//! 2. feed each answer back with [`Scheduler::on_outcome`];
//! 3. sleep until [`Scheduler::next_wakeup`] or the next answer, whichever
//!    comes first, and go back to 1, until [`Scheduler::is_finished`].
//!
//! What it decides:
//!
//! - **Order.** A task starts only once every dependency has succeeded. A task
//!   that fails for good fails its transitive dependents
//!   ([`TaskState::DependencyFailed`]) and nothing else.
//! - **Concurrency.** At most [`Config::max_concurrency`] requests are in
//!   flight: starts and polls both count; tasks waiting between two polls do
//!   not.
//! - **Concurrency groups.** A task may name a [`Group`]: at most its
//!   limit of the group's tasks hold a slot at once. A ready task whose
//!   group is full leaves its bucket's queue and waits in the group's, in
//!   the same order, so other groups and buckets carry on.
//! - **Rate limits.** Every task names a bucket (plugin namespace and
//!   target). Every request takes a token from its bucket (a `verify_first`
//!   start takes two: the read and the operation); a bucket without tokens
//!   holds its requests until it refills, while other buckets carry on.
//!   The tokens are the process's, not the command's: they come from a
//!   [`RateRegistry`] every run of the process shares, so two commands on
//!   one target share its rate (the queues and waits stay per scheduler).
//! - **Retries.** Retryable codes back off exponentially with jitter
//!   ([`RetryPolicy`]); `Throttling` backs off harder; a retry after an
//!   ambiguous outcome must read the resource first.
//! - **Long operations.** `InProgress` answers are polled until they finish or
//!   exceed [`Config::poll_timeout`] (then `NotStabilized`).
//! - **Cancellation.** [`Scheduler::cancel`] stops new starts; requests in
//!   flight and operations being polled are left to finish.
//!
//! Among requests ready at the same time, polls go first (an operation in
//! flight should finish before another begins), then retries, then first
//! starts; within each class, earliest due first, then lowest task id. Every
//! operation in [`Scheduler::poll`], [`Scheduler::on_outcome`] and
//! [`Scheduler::next_wakeup`] is logarithmic in the number of tasks
//! (ready queues per bucket, dependency counters, a heap of wake-ups).

mod limiter;
mod retry;
mod shares;
mod token_bucket;

#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

use orrery_schema::ErrorCode;

pub use limiter::{LocalRateLimiter, RateLimiter, RateRegistry};
pub use retry::RetryPolicy;
pub use retry::{Jitter, SplitMix64};
pub use shares::{SharedRateLimiter, SHARE_PERIOD, SHARE_WINDOW};
pub use token_bucket::TokenBucket;

/// A task's index in the vector given to [`Scheduler::new`].
pub type TaskId = usize;

/// One operation to schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Tasks that must succeed before this one starts (duplicates are
    /// ignored).
    pub deps: Vec<TaskId>,
    /// The rate-limit key, e.g. `"Local/target-a"`: plugin namespace and
    /// target. Tasks with the same key share one token bucket.
    pub bucket: String,
    /// A concurrency group the task belongs to, if any.
    pub group: Option<Group>,
}

/// Tasks that must not run more than `limit` at once, e.g. the grants of
/// one database (a plugin's [`orrery_schema::ConcurrencyKey`], expanded).
/// A task holds one of its group's slots from its start until it succeeds,
/// fails or backs off; polls of an operation in progress keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group's name; tasks with equal names share its slots.
    pub key: String,
    /// Slots of the group (0 is taken as 1). Tasks of one group should
    /// agree; the first task seen sets it.
    pub limit: u32,
}

/// A bucket's rate limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketLimit {
    /// Tokens earned per second, continuously. 0 (or a negative or non-finite
    /// value) means unlimited.
    pub rate_per_sec: f64,
    /// Capacity of the bucket, and so the largest burst (0 is taken as 1).
    /// A bucket starts full.
    pub burst: u32,
}

impl BucketLimit {
    /// No limit at all.
    pub const UNLIMITED: BucketLimit = BucketLimit {
        rate_per_sec: 0.0,
        burst: 1,
    };

    /// Whether the limit lets everything through: a rate of 0, or a
    /// negative or non-finite one.
    pub fn is_unlimited(&self) -> bool {
        !(self.rate_per_sec > 0.0 && self.rate_per_sec.is_finite())
    }
}

/// The scheduler's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Requests (starts and polls) in flight at once; 0 means unlimited.
    pub max_concurrency: usize,
    /// How failed attempts are retried.
    pub retry: RetryPolicy,
    /// An attempt that is still `InProgress` this long after its first
    /// `InProgress` answer fails with `NotStabilized` (not retried).
    pub poll_timeout: Duration,
    /// How long to wait before polling when `InProgress` gives no
    /// `retry_after`.
    pub default_poll_interval: Duration,
    /// Seed of the jitter generator.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_concurrency: 64,
            retry: RetryPolicy::default(),
            poll_timeout: Duration::from_secs(30 * 60),
            default_poll_interval: Duration::from_secs(2),
            seed: 0,
        }
    }
}

impl Config {
    /// How long to wait before polling an operation still in progress:
    /// the plugin's `retry_after`, else the default interval.
    pub fn poll_delay(&self, retry_after: Option<Duration>) -> Duration {
        retry_after.unwrap_or(self.default_poll_interval)
    }
}

/// What the executor should send now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send the operation. `attempt` starts at 1. `verify_first` is true when
    /// an earlier attempt's outcome was ambiguous
    /// ([`ErrorCode::is_ambiguous`]): the executor must read the resource
    /// before acting again. Once set it stays set for the later attempts of
    /// the task, since the ambiguous attempt may still land after a read.
    Start {
        /// The task.
        task: TaskId,
        /// Which attempt this is, from 1.
        attempt: u32,
        /// Read the resource before acting.
        verify_first: bool,
    },
    /// Send a `status` request for a task that answered `InProgress`.
    Poll {
        /// The task.
        task: TaskId,
    },
}

impl Action {
    /// The task the action is for.
    pub fn task(&self) -> TaskId {
        match *self {
            Action::Start { task, .. } | Action::Poll { task } => task,
        }
    }
}

/// The answer to the last [`Action`] issued for a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The operation finished and took effect.
    Success,
    /// The operation continues; poll it, after `retry_after` if given.
    InProgress {
        /// The plugin's requested poll interval.
        retry_after: Option<Duration>,
    },
    /// The operation (or the request) failed. Retryable codes are retried;
    /// `Canceled` after [`Scheduler::cancel`] makes the task
    /// [`TaskState::Canceled`].
    Failed {
        /// Why.
        code: ErrorCode,
        /// Wait at least this long before retrying (e.g. from `Throttling`).
        retry_after: Option<Duration>,
    },
}

/// Where a task stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Some dependency has not succeeded yet.
    Blocked,
    /// Dependencies done; waiting for a free concurrency slot (or for its turn).
    Ready,
    /// Ready, but its bucket has no token; it waits for the refill.
    WaitingForToken,
    /// A start is in flight.
    Running {
        /// The attempt in flight, from 1.
        attempt: u32,
    },
    /// A retryable failure; the next attempt becomes ready at `until`.
    BackingOff {
        /// When the next attempt becomes ready.
        until: Instant,
        /// The number of that next attempt.
        attempt: u32,
    },
    /// The operation answered `InProgress`; it is polled at `next_poll` (a
    /// poll that is due but waits for a slot or a token keeps this state).
    InProgress {
        /// When the next poll is due.
        next_poll: Instant,
    },
    /// A poll (`status` request) is in flight. (An addition to the original
    /// brief: it tells an executor which tasks have a request in flight.)
    Polling {
        /// The attempt being polled.
        attempt: u32,
    },
    /// Done and took effect.
    Succeeded,
    /// Failed for good: a terminal code, retries exhausted, a poll timeout
    /// (`NotStabilized`), or any failure after [`Scheduler::cancel`].
    Failed {
        /// The last failure's code.
        code: ErrorCode,
        /// Attempts made.
        attempts: u32,
    },
    /// Not attempted because a task it depends on (directly or not) failed.
    DependencyFailed {
        /// The task whose failure caused this.
        root: TaskId,
    },
    /// Not attempted (or stopped by the plugin) because the command was
    /// canceled.
    Canceled,
}

impl TaskState {
    /// Whether the task will not change any more.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            TaskState::Succeeded
                | TaskState::Failed { .. }
                | TaskState::DependencyFailed { .. }
                | TaskState::Canceled
        )
    }

    /// Whether a request for the task is in flight.
    pub fn is_in_flight(&self) -> bool {
        matches!(self, TaskState::Running { .. } | TaskState::Polling { .. })
    }
}

/// The tasks' dependencies form a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleError {
    /// The tasks of one cycle, each depending on the next and the last on
    /// the first, starting at the lowest id.
    pub members: Vec<TaskId>,
}

impl fmt::Display for CycleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("dependency cycle: ")?;
        for id in &self.members {
            write!(f, "{id} -> ")?;
        }
        match self.members.first() {
            Some(first) => write!(f, "{first}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for CycleError {}

/// Counts for progress and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tasks in all.
    pub total: usize,
    /// Tasks that succeeded.
    pub succeeded: usize,
    /// Tasks that failed.
    pub failed: usize,
    /// Tasks not attempted because a dependency failed.
    pub dependency_failed: usize,
    /// Tasks canceled.
    pub canceled: usize,
    /// Tasks not yet in a final state.
    pub unfinished: usize,
    /// Start actions issued (first attempts and retries).
    pub starts: u64,
    /// Poll actions issued.
    pub polls: u64,
    /// Start actions that were retries (attempt > 1).
    pub retries: u64,
    /// `Throttling` failures received.
    pub throttled: u64,
    /// Time requests spent waiting for a token, summed over requests: a
    /// request counts while it is queued in a bucket that has run dry.
    pub rate_limit_wait: Duration,
}

/// Request classes, in the order they are served.
const POLL: u8 = 0;
const RETRY: u8 = 1;
const FIRST: u8 = 2;

/// Order of a queued request: class, due instant, task.
type Key = (u8, Instant, TaskId);

/// A wake-up in the timer heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// A backoff ends (task, generation).
    Backoff(TaskId, u64),
    /// A poll is due (task, generation).
    Poll(TaskId, u64),
    /// A starved bucket has a token again.
    Refill(usize),
}

/// Counters of stored states, indexed by [`kind`].
const KINDS: usize = 10;
const BLOCKED: usize = 0;
const SUCCEEDED: usize = 6;
const FAILED: usize = 7;
const DEPENDENCY_FAILED: usize = 8;
const CANCELED: usize = 9;

fn kind(state: &TaskState) -> usize {
    match state {
        TaskState::Blocked => BLOCKED,
        TaskState::Ready | TaskState::WaitingForToken => 1,
        TaskState::Running { .. } => 2,
        TaskState::Polling { .. } => 3,
        TaskState::BackingOff { .. } => 4,
        TaskState::InProgress { .. } => 5,
        TaskState::Succeeded => SUCCEEDED,
        TaskState::Failed { .. } => FAILED,
        TaskState::DependencyFailed { .. } => DEPENDENCY_FAILED,
        TaskState::Canceled => CANCELED,
    }
}

/// What [`Scheduler::state`] shows for a ready task in a starved bucket.
static WAITING_FOR_TOKEN: TaskState = TaskState::WaitingForToken;

#[derive(Debug)]
struct Node {
    dependents: Vec<TaskId>,
    bucket: usize,
    /// Dependencies not yet succeeded.
    pending_deps: usize,
    /// The stored state; never `WaitingForToken` (derived in `state`).
    state: TaskState,
    /// Starts issued so far.
    attempt: u32,
    /// The next start must read first.
    verify_first: bool,
    /// First `InProgress` answer of the current attempt.
    in_progress_since: Option<Instant>,
    /// The request queued in the bucket, if any.
    queued: Option<Key>,
    /// Set when the task's request, first in its bucket, found no token.
    rate_limited: bool,
    /// Generation of the task's timer; older timers are stale.
    generation: u64,
    /// The task's concurrency group, an index into `groups`.
    group: Option<usize>,
    /// Whether the task holds a slot of its group.
    holds_slot: bool,
}

#[derive(Debug)]
struct GroupSlots {
    limit: u32,
    held: u32,
    /// Requests parked until a slot frees, in service order.
    waiting: BTreeSet<Key>,
}

#[derive(Debug)]
struct Bucket {
    name: String,
    /// Its limit; the tokens are the registry's.
    limit: BucketLimit,
    /// Requests due, in service order.
    queue: BTreeSet<Key>,
    /// Set while the bucket has no token for its head request: until then
    /// its queue is not served (and it is not in `active`).
    starved_until: Option<Instant>,
    /// Wait accounted up to this instant while starved.
    mark: Instant,
    /// Rate-limit wait accounted so far.
    wait: Duration,
}

impl Bucket {
    /// Accounts the wait of the queued requests up to `t`.
    fn accrue(&mut self, t: Instant) {
        if self.starved_until.is_some() {
            let waited = t.saturating_duration_since(self.mark);
            let len = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
            self.wait = self.wait.saturating_add(waited.saturating_mul(len));
            self.mark = self.mark.max(t);
        }
    }

    /// Wait accounted so far plus what accrues until `now`.
    fn wait_until(&self, now: Instant) -> Duration {
        let mut wait = self.wait;
        if self.starved_until.is_some() {
            let len = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
            wait =
                wait.saturating_add(now.saturating_duration_since(self.mark).saturating_mul(len));
        }
        wait
    }
}

/// The scheduler of one command's tasks. See the [module docs](self).
#[derive(Debug)]
pub struct Scheduler {
    nodes: Vec<Node>,
    buckets: Vec<Bucket>,
    groups: Vec<GroupSlots>,
    /// Where the buckets' tokens come from, shared with the process's
    /// other runs.
    rates: RateRegistry,
    /// Buckets with queued requests that are not starved, by head request.
    active: BTreeSet<(Key, usize)>,
    /// Wake-ups: (instant, sequence, what). Stale entries are skipped.
    timers: BinaryHeap<Reverse<(Instant, u64, Timer)>>,
    timer_seq: u64,
    config: Config,
    rng: SplitMix64,
    /// The latest `now` seen; time never goes back.
    now: Instant,
    /// The instant of `new`, the due time of first starts.
    epoch: Instant,
    in_flight: usize,
    canceled: bool,
    counts: [usize; KINDS],
    starts: u64,
    polls: u64,
    retries: u64,
    throttled: u64,
    /// Tasks whose request started waiting for a token since the last
    /// [`Scheduler::take_newly_rate_limited`].
    newly_rate_limited: Vec<TaskId>,
}

impl Scheduler {
    /// A scheduler for `tasks`, with rate limits per bucket name (buckets
    /// absent from `limits` are unlimited), taking its tokens from `rates`:
    /// the process's one registry, shared by every run, so that another
    /// run on the same bucket spends the same tokens. Tasks without
    /// dependencies are ready at once.
    ///
    /// # Errors
    ///
    /// [`CycleError`] naming the members of one cycle if the dependencies
    /// are not a DAG (a task depending on itself is a cycle of one).
    ///
    /// # Panics
    ///
    /// If a dependency is not the index of a task.
    pub fn new(
        tasks: Vec<Task>,
        limits: HashMap<String, BucketLimit>,
        rates: RateRegistry,
        config: Config,
        now: Instant,
    ) -> Result<Scheduler, CycleError> {
        let n = tasks.len();
        let mut bucket_ids: HashMap<String, usize> = HashMap::new();
        let mut buckets = Vec::new();
        let mut deps_of = Vec::with_capacity(n);
        let mut task_bucket = Vec::with_capacity(n);
        let mut group_ids: HashMap<String, usize> = HashMap::new();
        let mut groups = Vec::new();
        let mut task_group = Vec::with_capacity(n);
        for (id, task) in tasks.into_iter().enumerate() {
            let mut deps = task.deps;
            deps.sort_unstable();
            deps.dedup();
            if let Some(&bad) = deps.iter().find(|&&d| d >= n) {
                panic!("task {id} depends on {bad}, but there are only {n} tasks");
            }
            let b = *bucket_ids.entry(task.bucket).or_insert_with_key(|name| {
                let limit = limits.get(name).copied().unwrap_or(BucketLimit::UNLIMITED);
                buckets.push(Bucket {
                    name: name.clone(),
                    limit,
                    queue: BTreeSet::new(),
                    starved_until: None,
                    mark: now,
                    wait: Duration::ZERO,
                });
                buckets.len() - 1
            });
            deps_of.push(deps);
            task_bucket.push(b);
            task_group.push(task.group.map(|g| {
                *group_ids.entry(g.key).or_insert_with(|| {
                    groups.push(GroupSlots {
                        limit: g.limit.max(1),
                        held: 0,
                        waiting: BTreeSet::new(),
                    });
                    groups.len() - 1
                })
            }));
        }

        let mut dependents = vec![Vec::new(); n];
        for (id, deps) in deps_of.iter().enumerate() {
            for &d in deps {
                dependents[d].push(id);
            }
        }
        check_acyclic(&deps_of, &dependents)?;

        let nodes = dependents
            .into_iter()
            .zip(task_bucket)
            .zip(&deps_of)
            .zip(task_group)
            .map(|(((dependents, bucket), deps), group)| Node {
                dependents,
                bucket,
                pending_deps: deps.len(),
                state: TaskState::Blocked,
                attempt: 0,
                verify_first: false,
                in_progress_since: None,
                rate_limited: false,
                queued: None,
                generation: 0,
                group,
                holds_slot: false,
            })
            .collect();
        let mut counts = [0; KINDS];
        counts[BLOCKED] = n;
        let mut scheduler = Scheduler {
            nodes,
            buckets,
            groups,
            rates,
            active: BTreeSet::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            rng: SplitMix64::new(config.seed),
            config,
            now,
            epoch: now,
            in_flight: 0,
            canceled: false,
            counts,
            starts: 0,
            polls: 0,
            retries: 0,
            throttled: 0,
            newly_rate_limited: Vec::new(),
        };
        for id in 0..n {
            if scheduler.nodes[id].pending_deps == 0 {
                scheduler.make_ready(id, FIRST, now, now);
            }
        }
        Ok(scheduler)
    }

    /// Everything to send at `now`: starts (dependencies done, a concurrency
    /// slot free, a token in the bucket) and polls that are due.
    pub fn poll(&mut self, now: Instant) -> Vec<Action> {
        let now = self.advance(now);
        self.fire_timers(now);
        let mut actions = Vec::new();
        while self.has_slot() {
            let Some((key, b)) = self.active.pop_first() else {
                break;
            };
            let task = key.2;
            if key.0 != POLL && !self.slot_free(task) {
                self.park(task, key, b);
                continue;
            }
            let cost = if key.0 != POLL && self.nodes[task].verify_first {
                2
            } else {
                1
            };
            let bucket = &mut self.buckets[b];
            // Another run may have taken the tokens this bucket's refill
            // timer waited for: a failed take simply re-arms it.
            match self.rates.try_take(&bucket.name, bucket.limit, now, cost) {
                Ok(()) => {
                    bucket.queue.pop_first();
                    if let Some(&next) = bucket.queue.first() {
                        self.active.insert((next, b));
                    }
                    actions.push(self.issue(task, key.0));
                }
                Err(refill) => {
                    let node = &mut self.nodes[task];
                    if !node.rate_limited {
                        node.rate_limited = true;
                        self.newly_rate_limited.push(task);
                    }
                    let bucket = &mut self.buckets[b];
                    bucket.starved_until = Some(refill);
                    bucket.mark = now;
                    self.arm(refill, Timer::Refill(b));
                }
            }
        }
        self.prune();
        actions
    }

    /// When [`poll`](Self::poll) next has something to do if no outcome
    /// arrives: now if a request could go out at once, else the earliest
    /// token refill, backoff end or due poll. `None` when only outcomes can
    /// unblock it, or when all is done.
    pub fn next_wakeup(&self) -> Option<Instant> {
        if self.has_slot() && !self.active.is_empty() {
            return Some(self.now);
        }
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The answer to the start or poll last issued for `task`, received at
    /// `now`. An outcome for a task with no request in flight is ignored.
    pub fn on_outcome(&mut self, task: TaskId, outcome: Outcome, now: Instant) {
        let now = self.advance(now);
        let Some(node) = self.nodes.get(task) else {
            return;
        };
        if !node.state.is_in_flight() {
            return;
        }
        self.in_flight -= 1;
        match outcome {
            Outcome::Success => self.succeed(task),
            Outcome::InProgress { retry_after } => self.in_progress(task, retry_after, now),
            Outcome::Failed { code, retry_after } => self.failed(task, code, retry_after, now),
        }
        self.prune();
    }

    /// Cancels the command: nothing new starts. Tasks blocked, ready,
    /// waiting for a token or backing off become [`TaskState::Canceled`].
    /// Requests in flight and operations being polled are left to finish
    /// (the executor decides whether to send a `cancel`); from now on any
    /// failure is final, and a `Canceled` failure makes the task `Canceled`.
    pub fn cancel(&mut self, now: Instant) {
        let now = self.advance(now);
        if self.canceled {
            return;
        }
        self.canceled = true;
        for bucket in &mut self.buckets {
            bucket.accrue(now);
        }
        for id in 0..self.nodes.len() {
            if matches!(
                self.nodes[id].state,
                TaskState::Blocked | TaskState::Ready | TaskState::BackingOff { .. }
            ) {
                self.set_state(id, TaskState::Canceled);
                self.nodes[id].queued = None;
            }
        }
        self.active.clear();
        for group in &mut self.groups {
            group.waiting.clear();
        }
        for (b, bucket) in self.buckets.iter_mut().enumerate() {
            bucket.queue.retain(|key| key.0 == POLL);
            match bucket.queue.first() {
                None => bucket.starved_until = None,
                Some(&head) if bucket.starved_until.is_none() => {
                    self.active.insert((head, b));
                }
                Some(_) => {}
            }
        }
        self.prune();
    }

    /// Where `task` stands.
    ///
    /// # Panics
    ///
    /// If `task` is not a task id.
    pub fn state(&self, task: TaskId) -> &TaskState {
        let node = &self.nodes[task];
        if node.state == TaskState::Ready && self.buckets[node.bucket].starved_until.is_some() {
            return &WAITING_FOR_TOKEN;
        }
        &node.state
    }

    /// Starts issued for `task` so far.
    pub fn attempts(&self, task: TaskId) -> u32 {
        self.nodes[task].attempt
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Requests (starts and polls) in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_canceled(&self) -> bool {
        self.canceled
    }

    /// Whether every task is in a final state: nothing in flight, being
    /// polled, backing off or waiting.
    pub fn is_finished(&self) -> bool {
        self.unfinished() == 0
    }

    /// Counts per final state and request metrics.
    pub fn summary(&self) -> Summary {
        Summary {
            total: self.nodes.len(),
            succeeded: self.counts[SUCCEEDED],
            failed: self.counts[FAILED],
            dependency_failed: self.counts[DEPENDENCY_FAILED],
            canceled: self.counts[CANCELED],
            unfinished: self.unfinished(),
            starts: self.starts,
            polls: self.polls,
            retries: self.retries,
            throttled: self.throttled,
            rate_limit_wait: self.rate_limit_waits().map(|(_, wait)| wait).sum(),
        }
    }

    /// Tasks whose next request began waiting for a rate-limit token since
    /// the last call; the wait ends when the task's next action is issued.
    /// The executor opens a span per wait with it.
    pub fn take_newly_rate_limited(&mut self) -> Vec<TaskId> {
        std::mem::take(&mut self.newly_rate_limited)
    }

    /// Rate-limit wait per bucket (see [`Summary::rate_limit_wait`]), in the
    /// order the buckets first appear among the tasks.
    pub fn rate_limit_waits(&self) -> impl Iterator<Item = (&str, Duration)> + '_ {
        self.buckets
            .iter()
            .map(|b| (b.name.as_str(), b.wait_until(self.now)))
    }

    fn unfinished(&self) -> usize {
        self.nodes.len()
            - self.counts[SUCCEEDED]
            - self.counts[FAILED]
            - self.counts[DEPENDENCY_FAILED]
            - self.counts[CANCELED]
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    fn has_slot(&self) -> bool {
        self.config.max_concurrency == 0 || self.in_flight < self.config.max_concurrency
    }

    fn set_state(&mut self, task: TaskId, state: TaskState) {
        let node = &mut self.nodes[task];
        self.counts[kind(&node.state)] -= 1;
        self.counts[kind(&state)] += 1;
        let keeps_slot = matches!(
            state,
            TaskState::Running { .. } | TaskState::Polling { .. } | TaskState::InProgress { .. }
        );
        node.state = state;
        if node.holds_slot && !keeps_slot {
            node.holds_slot = false;
            self.release_slot(task);
        }
    }

    /// Whether a start of `task` may take a slot of its group now.
    fn slot_free(&self, task: TaskId) -> bool {
        self.nodes[task]
            .group
            .is_none_or(|g| self.groups[g].held < self.groups[g].limit)
    }

    /// Moves the head request `key` of bucket `b` to its group's queue.
    fn park(&mut self, task: TaskId, key: Key, b: usize) {
        let bucket = &mut self.buckets[b];
        bucket.queue.pop_first();
        if let Some(&next) = bucket.queue.first() {
            self.active.insert((next, b));
        }
        if let Some(g) = self.nodes[task].group {
            self.groups[g].waiting.insert(key);
        }
    }

    /// Frees a slot of `task`'s group and requeues the first parked request.
    fn release_slot(&mut self, task: TaskId) {
        let Some(g) = self.nodes[task].group else {
            return;
        };
        let group = &mut self.groups[g];
        group.held -= 1;
        if let Some(key) = group.waiting.pop_first() {
            let now = self.now;
            self.enqueue(key.2, key, now);
        }
    }

    fn arm(&mut self, at: Instant, timer: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, timer)));
    }

    /// Arms the task's timer, making any older one stale.
    fn arm_task(&mut self, task: TaskId, at: Instant, poll: bool) {
        let node = &mut self.nodes[task];
        node.generation += 1;
        let timer = if poll {
            Timer::Poll(task, node.generation)
        } else {
            Timer::Backoff(task, node.generation)
        };
        self.arm(at, timer);
    }

    fn is_live(&self, at: Instant, timer: Timer) -> bool {
        match timer {
            Timer::Backoff(task, generation) => {
                let node = &self.nodes[task];
                node.generation == generation && matches!(node.state, TaskState::BackingOff { .. })
            }
            Timer::Poll(task, generation) => {
                let node = &self.nodes[task];
                node.generation == generation
                    && node.queued.is_none()
                    && matches!(node.state, TaskState::InProgress { .. })
            }
            Timer::Refill(b) => self.buckets[b].starved_until == Some(at),
        }
    }

    /// Drops stale timers from the top of the heap, so that `next_wakeup`
    /// sees a live one.
    fn prune(&mut self) {
        while let Some(&Reverse((at, _, timer))) = self.timers.peek() {
            if self.is_live(at, timer) {
                break;
            }
            self.timers.pop();
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(&Reverse((at, _, timer))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if !self.is_live(at, timer) {
                continue;
            }
            match timer {
                Timer::Backoff(task, _) => self.make_ready(task, RETRY, at, at),
                Timer::Poll(task, _) => self.enqueue(task, (POLL, at, task), at),
                Timer::Refill(b) => {
                    let bucket = &mut self.buckets[b];
                    bucket.accrue(at);
                    bucket.starved_until = None;
                    if let Some(&head) = bucket.queue.first() {
                        self.active.insert((head, b));
                    }
                }
            }
        }
    }

    /// Makes the task ready: its start is queued with due time `due`, at
    /// event time `at`.
    fn make_ready(&mut self, task: TaskId, class: u8, due: Instant, at: Instant) {
        self.set_state(task, TaskState::Ready);
        self.enqueue(task, (class, due, task), at);
    }

    /// Queues a request in the task's bucket at event time `at`.
    fn enqueue(&mut self, task: TaskId, key: Key, at: Instant) {
        let b = self.nodes[task].bucket;
        self.nodes[task].queued = Some(key);
        let bucket = &mut self.buckets[b];
        bucket.accrue(at);
        let old_head = bucket.queue.first().copied();
        bucket.queue.insert(key);
        if bucket.starved_until.is_none() && old_head.is_none_or(|head| key < head) {
            if let Some(head) = old_head {
                self.active.remove(&(head, b));
            }
            self.active.insert((key, b));
        }
    }

    fn issue(&mut self, task: TaskId, class: u8) -> Action {
        self.in_flight += 1;
        let node = &mut self.nodes[task];
        node.queued = None;
        node.rate_limited = false;
        if class == POLL {
            self.polls += 1;
            let attempt = node.attempt;
            self.set_state(task, TaskState::Polling { attempt });
            Action::Poll { task }
        } else {
            node.attempt += 1;
            let attempt = node.attempt;
            let verify_first = node.verify_first;
            if let Some(g) = node.group {
                node.holds_slot = true;
                self.groups[g].held += 1;
            }
            self.starts += 1;
            if attempt > 1 {
                self.retries += 1;
            }
            self.set_state(task, TaskState::Running { attempt });
            Action::Start {
                task,
                attempt,
                verify_first,
            }
        }
    }

    fn succeed(&mut self, task: TaskId) {
        self.set_state(task, TaskState::Succeeded);
        for i in 0..self.nodes[task].dependents.len() {
            let d = self.nodes[task].dependents[i];
            let node = &mut self.nodes[d];
            node.pending_deps -= 1;
            if node.pending_deps == 0 && node.state == TaskState::Blocked {
                // First starts are due at the epoch: they go by task id.
                let (epoch, now) = (self.epoch, self.now);
                self.make_ready(d, FIRST, epoch, now);
            }
        }
    }

    fn in_progress(&mut self, task: TaskId, retry_after: Option<Duration>, now: Instant) {
        let since = *self.nodes[task].in_progress_since.get_or_insert(now);
        let deadline = later(since, self.config.poll_timeout);
        if now >= deadline {
            self.fail(task, ErrorCode::NotStabilized);
            return;
        }
        let interval = self.config.poll_delay(retry_after);
        let next_poll = later(now, interval).min(deadline);
        self.set_state(task, TaskState::InProgress { next_poll });
        self.arm_task(task, next_poll, true);
    }

    fn failed(
        &mut self,
        task: TaskId,
        code: ErrorCode,
        retry_after: Option<Duration>,
        now: Instant,
    ) {
        let throttled = code == ErrorCode::Throttling;
        if throttled {
            self.throttled += 1;
        }
        if self.canceled && code == ErrorCode::Canceled {
            self.set_state(task, TaskState::Canceled);
            self.fail_dependents(task);
            return;
        }
        let attempt = self.nodes[task].attempt;
        let delay = match self.canceled {
            true => None,
            false => {
                self.config
                    .retry
                    .retry_after_failure(attempt, &code, retry_after, &mut self.rng)
            }
        };
        let Some(delay) = delay else {
            self.fail(task, code);
            return;
        };
        let until = later(now, delay);
        let node = &mut self.nodes[task];
        node.verify_first |= code.is_ambiguous();
        node.in_progress_since = None;
        self.set_state(
            task,
            TaskState::BackingOff {
                until,
                attempt: attempt + 1,
            },
        );
        self.arm_task(task, until, false);
    }

    fn fail(&mut self, task: TaskId, code: ErrorCode) {
        let attempts = self.nodes[task].attempt;
        self.set_state(task, TaskState::Failed { code, attempts });
        self.fail_dependents(task);
    }

    /// Marks every blocked transitive dependent of `root` as failed by it.
    fn fail_dependents(&mut self, root: TaskId) {
        let mut stack = vec![root];
        while let Some(task) = stack.pop() {
            for i in 0..self.nodes[task].dependents.len() {
                let d = self.nodes[task].dependents[i];
                if self.nodes[d].state == TaskState::Blocked {
                    self.set_state(d, TaskState::DependencyFailed { root });
                    stack.push(d);
                }
            }
        }
    }
}

/// `t + d`, or a far-away instant instead of overflowing.
pub(crate) fn later(t: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    t.checked_add(d).or_else(|| t.checked_add(FAR)).unwrap_or(t)
}

/// Kahn's algorithm; on failure, walks the leftover graph to one cycle.
fn check_acyclic(deps: &[Vec<TaskId>], dependents: &[Vec<TaskId>]) -> Result<(), CycleError> {
    let n = deps.len();
    let mut indegree: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut stack: Vec<TaskId> = (0..n).filter(|&id| indegree[id] == 0).collect();
    let mut done = 0;
    while let Some(id) = stack.pop() {
        done += 1;
        for &d in &dependents[id] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                stack.push(d);
            }
        }
    }
    if done == n {
        return Ok(());
    }
    // Every leftover task has a leftover dependency: follow them from the
    // lowest leftover id until a task repeats.
    let start = (0..n).find(|&id| indegree[id] > 0).unwrap_or(0);
    let mut position = HashMap::new();
    let mut path = Vec::new();
    let mut current = start;
    loop {
        if let Some(&at) = position.get(&current) {
            let mut members: Vec<TaskId> = path[at..].to_vec();
            let lowest = (0..members.len()).min_by_key(|&i| members[i]).unwrap_or(0);
            members.rotate_left(lowest);
            return Err(CycleError { members });
        }
        position.insert(current, path.len());
        path.push(current);
        current = deps[current]
            .iter()
            .copied()
            .find(|&d| indegree[d] > 0)
            .unwrap_or(start);
    }
}
