//! Message ids: UUID v7 (RFC 9562), made per thread without a lock.
//!
//! Every request and every answer gets one. `Uuid::now_v7` shares one
//! context behind a mutex and draws fresh random bytes each time: about
//! 570 instructions, twice per relayed operation (BENCHMARKS.md, relay
//! round 12). Here each thread keeps its own millisecond, counter and
//! generator, as RFC 9562 §6.2 method 1 describes: the 48-bit Unix
//! millisecond, a 42-bit counter (started at a random value each new
//! millisecond, its top bit clear so it has room to count), then 32 random
//! bits. Ids from one thread increase; ids from different threads and
//! processes differ by their random bits. They are unique, not secret:
//! nothing trusts an id it did not make.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use uuid::Uuid;

const COUNTER_BITS: u32 = 42;
const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;

/// One thread's id state; `next` takes the time, so it is tested as a
/// plain state machine.
#[derive(Debug)]
pub(super) struct Ids {
    millis: u64,
    counter: u64,
    random: u64,
}

impl Ids {
    /// A state whose random stream starts at `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Ids {
            millis: 0,
            counter: 0,
            random: seed,
        }
    }

    /// The next id at `now_ms` (Unix milliseconds). A clock that steps
    /// back, or a counter that runs out, keeps the thread's ids increasing
    /// by staying on (or moving past) the last millisecond used.
    pub(super) fn next(&mut self, now_ms: u64) -> Uuid {
        if now_ms > self.millis {
            self.millis = now_ms;
            self.counter = self.draw() & (COUNTER_MAX >> 1);
        } else if self.counter < COUNTER_MAX {
            self.counter += 1;
        } else {
            self.millis += 1;
            self.counter = self.draw() & (COUNTER_MAX >> 1);
        }
        let millis = u128::from(self.millis & ((1 << 48) - 1));
        let rand_a = u128::from(self.counter >> 30);
        let counter_low = u128::from(self.counter & ((1 << 30) - 1));
        let random = u128::from(self.draw() as u32);
        Uuid::from_u128(
            millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | counter_low << 32 | random,
        )
    }

    /// wyrand: a fast generator with a full 2^64 period.
    fn draw(&mut self) -> u64 {
        self.random = self.random.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.random) * u128::from(self.random ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }
}

/// A fresh UUID v7 from this thread's state, seeded from the operating
/// system's randomness the first time a thread asks.
pub(super) fn new_id() -> Uuid {
    thread_local! {
        static IDS: RefCell<Ids> = RefCell::new(Ids::new(seed()));
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    IDS.with(|ids| ids.borrow_mut().next(now_ms))
}

fn seed() -> u64 {
    let random = Uuid::new_v4().as_u64_pair();
    random.0 ^ random.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn millis_of(id: Uuid) -> u64 {
        (id.as_u128() >> 80) as u64
    }

    #[test]
    fn ids_are_version_7_with_the_time_given() {
        let mut ids = Ids::new(1);
        let id = ids.next(1_700_000_000_123);
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(millis_of(id), 1_700_000_000_123);
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        assert_eq!((secs, nanos), (1_700_000_000, 123_000_000));
    }

    #[test]
    fn a_threads_ids_increase_within_a_millisecond_and_when_the_clock_steps_back() {
        let mut ids = Ids::new(7);
        let mut last = ids.next(1_000);
        for now in [1_000, 1_000, 999, 500, 1_001, 1_001, 0] {
            for _ in 0..1_000 {
                let id = ids.next(now);
                assert!(id > last, "{id} after {last} at {now}");
                last = id;
            }
        }
        assert_eq!(
            millis_of(last),
            1_001,
            "a clock stepping back does not move ids back"
        );
    }

    #[test]
    fn a_counter_that_runs_out_moves_to_the_next_millisecond() {
        let mut ids = Ids::new(3);
        let first = ids.next(5_000);
        ids.counter = COUNTER_MAX;
        let next = ids.next(5_000);
        assert!(next > first);
        assert_eq!(millis_of(next), 5_001);
    }

    #[test]
    fn ids_from_many_threads_are_unique_and_each_threads_increase() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    let ids: Vec<Uuid> = (0..50_000).map(|_| new_id()).collect();
                    assert!(ids.windows(2).all(|w| w[0] < w[1]));
                    ids
                })
            })
            .collect();
        let mut all = HashSet::new();
        for t in threads {
            for id in t.join().unwrap() {
                assert!(all.insert(id), "{id} made twice");
            }
        }
        assert_eq!(all.len(), 200_000);
    }

    #[test]
    fn two_generators_seeded_apart_do_not_collide_in_the_same_millisecond() {
        let (mut a, mut b) = (Ids::new(seed()), Ids::new(seed()));
        let from_a: HashSet<Uuid> = (0..10_000).map(|_| a.next(42)).collect();
        assert!((0..10_000).all(|_| !from_a.contains(&b.next(42))));
    }
}
