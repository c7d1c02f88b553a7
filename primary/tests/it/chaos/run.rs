//! One soak run: rounds of applies of a shifting stack, each driven over
//! the HTTP API to its end while the schedule's faults are injected, the
//! invariants checked after every round.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::invariants::{self, Desired};
use super::processes::{self, marked, Nats, RunDir, Satellite};
use super::schedule::{schedule, Event, Fault, Shape};
use crate::common::server::Server;

/// The stack and target every round applies.
pub const STACK: &str = "soak";
const TARGET: &str = "lab";
const SATELLITES: usize = 3;

/// Longest a round may take, faults and repairs included.
const ROUND_BOUND: Duration = Duration::from_secs(600);
/// A command `running` that no primary runs for this long is applied
/// again (which resumes it), as an operator would.
const IDLE_NUDGE: Duration = Duration::from_secs(10);
/// Most re-applies of one round after a command ended failed.
const MAX_REPAIRS: u64 = 5;
/// How often the command is polled.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct Settings {
    pub seed: u64,
    /// Apply time (command running) during which faults are injected.
    pub window_s: u64,
    /// Things per round.
    pub resources: usize,
    /// How far the round's window of thing indices moves each round: so
    /// many creates and deletes per round, the rest updated.
    pub shift: usize,
    /// The testbed's announced `RATE:BURST:MAX_IN_FLIGHT`.
    pub rate_limit: String,
    /// The primary's `--request-timeout`.
    pub request_timeout: String,
}

impl Settings {
    pub fn shape(&self) -> Shape {
        Shape {
            satellites: SATELLITES,
            window_ms: self.window_s * 1000,
            gap_ms: (2_000, 7_000),
        }
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Figures {
    pub injected: BTreeMap<&'static str, u64>,
    /// Faults whose victim was already down.
    pub skipped: u64,
    pub rounds: u64,
    pub commands: u64,
    /// Re-applies after a command ended failed or canceled.
    pub repairs: u64,
    /// Re-applies of a command left `running` by a primary that could not
    /// resume it.
    pub nudges: u64,
    /// Operations recorded, by status, over every command.
    pub operations: BTreeMap<String, u64>,
    /// Failed operations' codes.
    pub failure_codes: BTreeMap<String, u64>,
    pub lost: u64,
    pub duplicates: u64,
    pub leftover: u64,
    pub elapsed: Duration,
}

enum Recovery {
    Satellite(usize),
    Nats,
    Primary,
    Heal(usize),
}

pub struct Soak {
    pub settings: Settings,
    pub run: RunDir,
    _dir: tempfile::TempDir,
    nats: Nats,
    sats: Vec<Satellite>,
    primary: Option<Server>,
    /// Killed primaries, kept for their logs.
    gone: Vec<Server>,
    pub events: Vec<Event>,
    next: usize,
    clock_ms: u64,
    pending: Vec<(Instant, Recovery)>,
    pub figures: Figures,
    /// What happened, when (run time), for the report and failures.
    pub journal: Vec<String>,
    started: Instant,
}

impl Soak {
    pub fn start(settings: Settings) -> Soak {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir {
            path: dir.path().to_owned(),
            marker: format!("{}-{}", std::process::id(), settings.seed),
        };
        let nats = Nats::start(&run);
        let sats = (0..SATELLITES)
            .map(|i| Satellite::new(i, &nats, &run, &settings.rate_limit))
            .collect();
        let primary = processes::primary(&run, &nats, &settings.request_timeout);
        let events = schedule(settings.seed, &settings.shape());
        Soak {
            settings,
            run,
            _dir: dir,
            nats,
            sats,
            primary: Some(primary),
            gone: Vec::new(),
            events,
            next: 0,
            clock_ms: 0,
            pending: Vec::new(),
            figures: Figures::default(),
            journal: Vec::new(),
            started: Instant::now(),
        }
    }

    fn note(&mut self, what: String) {
        let line = format!(
            "[{:7.1} s, apply {:6.1} s] {what}",
            self.started.elapsed().as_secs_f64(),
            self.clock_ms as f64 / 1000.0
        );
        eprintln!("soak: {line}");
        self.journal.push(line);
    }

    /// Round `round`'s document and what it must leave.
    fn document(&self, round: usize) -> (String, Desired) {
        let store = self.run.store();
        let mut doc = format!(
            "stack: {STACK}\ntargets:\n  - name: {TARGET}\n    plugin: testbed\n    config: {{ polls: 1, store: \"{}\" }}\nresources:\n",
            store.display()
        );
        let first = round * self.settings.shift;
        let mut names = BTreeSet::new();
        for i in first..first + self.settings.resources {
            doc.push_str(&format!(
                "  - label: t{i}\n    type: Testbed::Async::Thing\n    target: {TARGET}\n    properties: {{ name: thing-{i}, value: {round} }}\n"
            ));
            names.insert(format!("thing-{i}"));
        }
        (
            doc,
            Desired {
                names,
                value: round as i64,
            },
        )
    }

    /// Runs rounds until the fault window has passed (two at least), each
    /// checked; then stops everything and checks nothing of the run is
    /// left.
    pub fn run(&mut self) {
        let mut round = 0;
        loop {
            let (doc, desired) = self.document(round);
            self.note(format!(
                "round {round}: {} things, value {}",
                desired.names.len(),
                desired.value
            ));
            self.apply_round(&doc);
            self.quiesce();
            self.check(round, &desired);
            self.figures.rounds += 1;
            round += 1;
            if round >= 2 && self.clock_ms >= self.settings.window_s * 1000 {
                break;
            }
        }
        self.count_operations();
        self.shutdown();
        self.figures.elapsed = self.started.elapsed();
    }

    /// Applies `doc` until a command of it completes.
    ///
    /// Its own loop, not an `orrery_testing::wait`: every tick also
    /// injects the faults due and brings back what is due, and the round's
    /// bound is shared with [`Soak::post_apply`].
    fn apply_round(&mut self, doc: &str) {
        let deadline = Instant::now() + ROUND_BOUND;
        let mut id = self.post_apply(doc, deadline);
        let mut repairs = 0;
        let mut tick = Instant::now();
        let mut last_poll = tick;
        let mut idle_since: Option<Instant> = None;
        loop {
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                Instant::now() < deadline,
                "round not finished within {ROUND_BOUND:?} (command {id})"
            );
            let now = Instant::now();
            self.clock_ms += (now - tick).as_millis() as u64;
            tick = now;
            self.recover_due(now);
            self.inject_due();
            if now.duration_since(last_poll) >= POLL_EVERY {
                last_poll = now;
                let Some(primary) = &self.primary else {
                    continue;
                };
                let (status, command) = primary.get(&format!("/v1/commands/{id}?limit=1"));
                assert_eq!(status, 200, "command {id}: {command}");
                let active = command["active"] == true;
                match command["status"].as_str().unwrap_or_default() {
                    "running" if active => idle_since = None,
                    "running" => {
                        let since = *idle_since.get_or_insert(now);
                        if now.duration_since(since) >= IDLE_NUDGE {
                            self.note(format!(
                                "command {id} running but not active: applying again"
                            ));
                            self.figures.nudges += 1;
                            idle_since = None;
                            id = self.post_apply(doc, deadline);
                        }
                    }
                    "completed" if !active => {
                        self.note(format!("command {id} completed"));
                        return;
                    }
                    "completed" => {}
                    other => {
                        self.record_failures(&id, other);
                        repairs += 1;
                        self.figures.repairs += 1;
                        assert!(
                            repairs <= MAX_REPAIRS,
                            "round needed more than {MAX_REPAIRS} re-applies"
                        );
                        id = self.post_apply(doc, deadline);
                    }
                }
            }
        }
    }

    /// POSTs the apply (bringing the primary back first if it is down);
    /// returns the command it runs or resumes.
    fn post_apply(&mut self, doc: &str, deadline: Instant) -> String {
        loop {
            assert!(
                Instant::now() < deadline,
                "no apply accepted before the round's deadline"
            );
            self.recover_due(Instant::now());
            let Some(primary) = &self.primary else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let (status, answer) = primary.post("/v1/stacks/apply", &json!({ "document": doc }));
            match (status, answer["command_id"].as_str()) {
                (202 | 409, Some(id)) => {
                    let id = id.to_owned();
                    self.figures.commands += u64::from(status == 202);
                    self.note(format!("apply {status}: command {id}"));
                    return id;
                }
                _ => {
                    // A plugin not described yet (satellites coming back).
                    self.note(format!("apply answered {status}: {answer}; again"));
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    fn record_failures(&mut self, id: &str, status: &str) {
        let Some(primary) = &self.primary else { return };
        let (_, failed) = primary.get(&format!("/v1/commands/{id}?status=failed&limit=20"));
        let ops: Vec<Value> = failed["operations"].as_array().cloned().unwrap_or_default();
        for op in &ops {
            *self
                .figures
                .failure_codes
                .entry(op["error_code"].as_str().unwrap_or("?").to_owned())
                .or_default() += 1;
        }
        let first: Vec<String> = ops
            .iter()
            .take(3)
            .map(|o| {
                format!(
                    "{} {}: {} {}",
                    o["label"], o["operation"], o["error_code"], o["message"]
                )
            })
            .collect();
        self.note(format!(
            "command {id} ended {status}; applying again (first failures: {first:?})"
        ));
    }

    fn inject_due(&mut self) {
        while let Some(event) = self.events.get(self.next).copied() {
            if event.at_ms > self.clock_ms {
                return;
            }
            self.next += 1;
            let injected = self.inject(event.fault);
            if injected {
                *self.figures.injected.entry(event.fault.kind()).or_default() += 1;
                self.note(format!("fault: {}", event.fault));
            } else {
                self.figures.skipped += 1;
                self.note(format!("fault skipped (victim down): {}", event.fault));
            }
        }
    }

    fn inject(&mut self, fault: Fault) -> bool {
        let now = Instant::now();
        let later = |ms: u64| now + Duration::from_millis(ms);
        match fault {
            Fault::KillSatellite { sat, down_ms } => {
                if self.sats[sat].proc.is_none() {
                    return false;
                }
                self.sats[sat].kill();
                self.pending
                    .push((later(down_ms), Recovery::Satellite(sat)));
            }
            Fault::KillPlugin { sat } => {
                let Some(pid) = self.sats[sat].pid() else {
                    return false;
                };
                let plugins = processes::children(&self.run.marker, pid);
                if plugins.is_empty() {
                    return false;
                }
                plugins.into_iter().for_each(processes::sigkill);
            }
            Fault::RestartNats { down_ms } => {
                if self
                    .pending
                    .iter()
                    .any(|(_, r)| matches!(r, Recovery::Nats))
                {
                    return false;
                }
                self.nats.kill();
                self.pending.push((later(down_ms), Recovery::Nats));
            }
            Fault::KillPrimary { down_ms } => {
                let Some(mut primary) = self.primary.take() else {
                    return false;
                };
                let _ = primary.child.kill();
                let _ = primary.child.wait();
                self.gone.push(primary);
                self.pending.push((later(down_ms), Recovery::Primary));
            }
            Fault::Partition { sat, ms } => {
                if self
                    .pending
                    .iter()
                    .any(|(_, r)| matches!(r, Recovery::Heal(s) if *s == sat))
                {
                    return false;
                }
                self.sats[sat].proxy.hold(true);
                self.pending.push((later(ms), Recovery::Heal(sat)));
            }
        }
        true
    }

    fn recover_due(&mut self, now: Instant) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, recovery) in due {
            self.recover(recovery);
        }
    }

    /// Brings everything back now (between rounds).
    fn quiesce(&mut self) {
        for (_, recovery) in std::mem::take(&mut self.pending) {
            self.recover(recovery);
        }
    }

    fn recover(&mut self, recovery: Recovery) {
        match recovery {
            Recovery::Satellite(i) => {
                self.sats[i].start(&self.run, &self.settings.rate_limit);
                self.note(format!("sat-{i} started again"));
            }
            Recovery::Nats => {
                self.nats.restart(&self.run);
                self.note("nats-server started again".into());
            }
            Recovery::Primary => {
                self.primary = Some(processes::primary(
                    &self.run,
                    &self.nats,
                    &self.settings.request_timeout,
                ));
                self.note("primary started again".into());
            }
            Recovery::Heal(i) => {
                self.sats[i].proxy.hold(false);
                self.note(format!("sat-{i} network restored"));
            }
        }
    }

    fn check(&mut self, round: usize, desired: &Desired) {
        let found = invariants::backend(&self.run, TARGET, desired);
        self.figures.lost += found.lost;
        self.figures.duplicates += found.duplicates;
        self.figures.leftover += found.leftover;
        assert_eq!(
            (found.lost, found.duplicates, found.leftover),
            (0, 0, 0),
            "round {round}: the testbed's store: {found:?}"
        );
        let primary = self
            .primary
            .as_ref()
            .expect("the primary is up after quiesce");
        let problems = invariants::inventory_problems(primary, STACK, desired);
        assert!(
            problems.is_empty(),
            "round {round}: inventory: {:?}",
            &problems[..problems.len().min(20)]
        );
        let running: Vec<_> = invariants::commands(primary, STACK)
            .into_iter()
            .filter(|(_, status, _)| status == "running")
            .collect();
        assert!(
            running.is_empty(),
            "round {round}: commands left running: {running:?}"
        );
        self.note(format!(
            "round {round} checked: {} things exactly once, inventory equal",
            desired.names.len()
        ));
    }

    fn count_operations(&mut self) {
        let primary = self.primary.as_ref().expect("the primary is up");
        for (_, _, ops) in invariants::commands(primary, STACK) {
            for (status, n) in ops {
                *self.figures.operations.entry(status).or_default() += n;
            }
        }
    }

    /// Stops every process of the run and waits (bounded) until none that
    /// carries its marker is left: no orphaned satellite or plugin.
    fn shutdown(&mut self) {
        if let Some(mut primary) = self.primary.take() {
            let _ = primary.child.kill();
            let _ = primary.child.wait();
            self.gone.push(primary);
        }
        for sat in &mut self.sats {
            sat.kill();
        }
        self.nats.kill();
        let marker = self.run.marker.clone();
        orrery_testing::wait_until(
            "no process of the run is left",
            Duration::from_secs(20),
            || marked(&marker).is_empty(),
        );
    }

    /// Logs worth reading after a failure.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for p in self.gone.iter().chain(self.primary.iter()) {
            let log = p.log();
            let lines: Vec<&str> = log.lines().collect();
            out.push_str("--- primary log (tail)\n");
            out.push_str(&lines[lines.len().saturating_sub(30)..].join("\n"));
            out.push('\n');
        }
        for sat in &self.sats {
            out.push_str(&format!("--- {} log (tail)\n", sat.id));
            out.push_str(&processes::tail(
                &self.run.path.join(format!("{}.log", sat.id)),
                15,
            ));
            out.push('\n');
        }
        out
    }
}
