//! The seeded fault schedule: computed up front from the seed alone, so a
//! failing run can be replayed with the same faults in the same order.

use std::fmt;

/// splitmix64: small, seedable, and the same on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi` (`lo` when the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo)
    }
}

/// One fault. Durations are how long the thing stays down or cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL satellite `sat`; start it again after `down_ms`.
    KillSatellite { sat: usize, down_ms: u64 },
    /// SIGKILL the testbed process of satellite `sat` (its supervisor
    /// restarts it).
    KillPlugin { sat: usize },
    /// SIGKILL nats-server; start it again on the same port after `down_ms`.
    RestartNats { down_ms: u64 },
    /// SIGKILL `orrery primary`; start it again on the same store after
    /// `down_ms` (it resumes the command on its own).
    KillPrimary { down_ms: u64 },
    /// Hold every byte between satellite `sat` and NATS for `ms`.
    Partition { sat: usize, ms: u64 },
}

/// The kinds, in the order figures are printed.
pub const KINDS: [&str; 5] = [
    "kill-satellite",
    "kill-plugin",
    "restart-nats",
    "kill-primary",
    "partition",
];

impl Fault {
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::KillSatellite { .. } => KINDS[0],
            Fault::KillPlugin { .. } => KINDS[1],
            Fault::RestartNats { .. } => KINDS[2],
            Fault::KillPrimary { .. } => KINDS[3],
            Fault::Partition { .. } => KINDS[4],
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::KillSatellite { sat, down_ms } => {
                write!(f, "kill-satellite sat-{sat} (down {down_ms} ms)")
            }
            Fault::KillPlugin { sat } => write!(f, "kill-plugin of sat-{sat}"),
            Fault::RestartNats { down_ms } => write!(f, "restart-nats (down {down_ms} ms)"),
            Fault::KillPrimary { down_ms } => write!(f, "kill-primary (down {down_ms} ms)"),
            Fault::Partition { sat, ms } => write!(f, "partition sat-{sat} for {ms} ms"),
        }
    }
}

/// A fault and when it happens, in milliseconds of apply time (the clock
/// runs only while a command is running, so every fault lands in one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub at_ms: u64,
    pub fault: Fault,
}

/// How dense the schedule is.
pub struct Shape {
    pub satellites: usize,
    /// Faults happen in `0..window_ms` of apply time.
    pub window_ms: u64,
    /// The gap between two faults is drawn from this range.
    pub gap_ms: (u64, u64),
}

/// A satellite's supervisor marks a plugin that failed 5 times in 60 s
/// unhealthy; the schedule kills one satellite's plugin at most once in
/// this long, so what is tested is recovery, not the crash-loop guard.
const PLUGIN_KILL_SPACING_MS: u64 = 20_000;

/// The schedule of `seed`: the first faults are one of each kind (in an
/// order the seed picks), so even a short run sees them all; after that
/// kinds are drawn at random.
pub fn schedule(seed: u64, shape: &Shape) -> Vec<Event> {
    let mut rng = Rng::new(seed);
    let mut first: Vec<usize> = (0..KINDS.len()).collect();
    for i in (1..first.len()).rev() {
        let j = rng.range(0, i as u64 + 1) as usize;
        first.swap(i, j);
    }
    let mut last_plugin_kill = vec![None::<u64>; shape.satellites];
    let mut events = Vec::new();
    let mut at = rng.range(shape.gap_ms.0 / 2, shape.gap_ms.1 / 2);
    while at < shape.window_ms {
        let kind = match events.len() {
            n if n < first.len() => first[n],
            _ => rng.range(0, KINDS.len() as u64) as usize,
        };
        let sat = rng.range(0, shape.satellites as u64) as usize;
        let fault = match kind {
            0 => Fault::KillSatellite {
                sat,
                down_ms: rng.range(200, 3_000),
            },
            1 if last_plugin_kill[sat].is_none_or(|t| at - t >= PLUGIN_KILL_SPACING_MS) => {
                last_plugin_kill[sat] = Some(at);
                Fault::KillPlugin { sat }
            }
            1 => Fault::KillSatellite {
                sat,
                down_ms: rng.range(200, 3_000),
            },
            2 => Fault::RestartNats {
                down_ms: rng.range(100, 2_000),
            },
            3 => Fault::KillPrimary {
                down_ms: rng.range(100, 1_500),
            },
            _ => Fault::Partition {
                sat,
                ms: rng.range(1_000, 6_000),
            },
        };
        events.push(Event { at_ms: at, fault });
        at += rng.range(shape.gap_ms.0, shape.gap_ms.1);
    }
    events
}
