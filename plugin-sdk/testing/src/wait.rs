//! Waiting on a condition, bounded: what tests do instead of sleeping.
//!
//! Every wait names what it waits for and gives up after a timeout. The
//! free functions look every [`EVERY`]; [`Wait`] sets another interval
//! (a kill point watched every millisecond, a server polled every 50 ms),
//! and [`Wait::poll`] hands the timeout back to a caller that must act
//! before failing (kill a child, collect its output), which then fails
//! with [`Wait::fail`].
//!
//! ```no_run
//! use std::time::Duration;
//! use orrery_testing::wait::{wait_for, wait_until, Wait};
//!
//! # let ready = || true;
//! wait_until("the server listens", Duration::from_secs(10), ready);
//! // A value, and what was last seen when it never came.
//! let n: u32 = wait_for("three lines", Duration::from_secs(10), || {
//!     let lines = 3;
//!     if lines >= 3 { Ok(lines) } else { Err(format!("{lines} lines")) }
//! });
//! Wait::new("the kill point", Duration::from_secs(20))
//!     .every(Duration::from_millis(1))
//!     .until(ready);
//! ```

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is looked at, unless a [`Wait`] says otherwise.
pub const EVERY: Duration = Duration::from_millis(10);

/// A bounded wait: what it waits for, for how long, how often it looks.
#[derive(Clone, Copy, Debug)]
pub struct Wait<'a> {
    what: &'a str,
    timeout: Duration,
    every: Duration,
}

impl<'a> Wait<'a> {
    /// A wait for `what`, at most `timeout`, looking every [`EVERY`].
    pub fn new(what: &'a str, timeout: Duration) -> Wait<'a> {
        Wait {
            what,
            timeout,
            every: EVERY,
        }
    }

    /// Looks every `every` instead.
    pub fn every(self, every: Duration) -> Wait<'a> {
        Wait { every, ..self }
    }

    /// Waits until `ready` holds.
    ///
    /// # Panics
    ///
    /// When the timeout passes first, naming what was waited for.
    pub fn until(&self, mut ready: impl FnMut() -> bool) {
        if self
            .poll(|| if ready() { Ok(()) } else { Err(()) })
            .is_err()
        {
            self.timed_out(None::<&str>)
        }
    }

    /// [`Wait::until`] for a condition that needs `.await`.
    ///
    /// # Panics
    ///
    /// When the timeout passes first, naming what was waited for.
    pub async fn until_async<F, Fut>(&self, mut ready: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let polled = self
            .poll_async(|| {
                let looked = ready();
                async move {
                    if looked.await {
                        Ok(())
                    } else {
                        Err(())
                    }
                }
            })
            .await;
        if polled.is_err() {
            self.timed_out(None::<&str>)
        }
    }

    /// Waits until `check` gives `Ok`, and returns its value; `Err` says
    /// what was seen instead.
    ///
    /// # Panics
    ///
    /// When the timeout passes first, naming what was waited for and what
    /// the last look saw.
    pub fn until_ok<T, E: Display>(&self, check: impl FnMut() -> Result<T, E>) -> T {
        self.poll(check)
            .unwrap_or_else(|last| self.timed_out(Some(last)))
    }

    /// [`Wait::until_ok`] for a check that needs `.await`.
    ///
    /// # Panics
    ///
    /// When the timeout passes first, naming what was waited for and what
    /// the last look saw.
    pub async fn until_ok_async<T, E, F, Fut>(&self, check: F) -> T
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        match self.poll_async(check).await {
            Ok(value) => value,
            Err(last) => self.timed_out(Some(last)),
        }
    }

    /// Looks at `check` until it gives `Ok` or the timeout passes; then
    /// gives back the last `Err`, for a caller that must act before it
    /// fails (and says what it waited for when it does).
    pub fn poll<T, E>(&self, mut check: impl FnMut() -> Result<T, E>) -> Result<T, E> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match check() {
                Ok(value) => return Ok(value),
                Err(last) if Instant::now() >= deadline => return Err(last),
                Err(_) => std::thread::sleep(self.every),
            }
        }
    }

    /// [`Wait::poll`] for a check that needs `.await`.
    pub async fn poll_async<T, E, F, Fut>(&self, mut check: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let deadline = Instant::now() + self.timeout;
        loop {
            match check().await {
                Ok(value) => return Ok(value),
                Err(last) if Instant::now() >= deadline => return Err(last),
                Err(_) => tokio::time::sleep(self.every).await,
            }
        }
    }

    /// Fails the wait: panics naming what was waited for, the timeout
    /// and `detail` (what was seen instead), for a [`Wait::poll`] caller
    /// once it has acted.
    pub fn fail(&self, detail: impl Display) -> ! {
        let Wait { what, timeout, .. } = self;
        panic!("{what}: not within {timeout:?}; {detail}")
    }

    fn timed_out(&self, last: Option<impl Display>) -> ! {
        match last {
            Some(last) => self.fail(format_args!("last seen: {last}")),
            None => {
                let Wait { what, timeout, .. } = self;
                panic!("{what}: not within {timeout:?}")
            }
        }
    }
}

/// Waits until `ready` holds, looking every [`EVERY`].
///
/// # Panics
///
/// When `timeout` passes first, naming `what`.
pub fn wait_until(what: &str, timeout: Duration, ready: impl FnMut() -> bool) {
    Wait::new(what, timeout).until(ready)
}

/// [`wait_until`] for a condition that needs `.await`.
///
/// # Panics
///
/// When `timeout` passes first, naming `what`.
pub async fn wait_until_async<F, Fut>(what: &str, timeout: Duration, ready: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    Wait::new(what, timeout).until_async(ready).await
}

/// Waits until `check` gives `Ok`, looking every [`EVERY`]; returns its
/// value. `Err` says what was seen instead.
///
/// # Panics
///
/// When `timeout` passes first, naming `what` and what the last look saw.
pub fn wait_for<T, E: Display>(
    what: &str,
    timeout: Duration,
    check: impl FnMut() -> Result<T, E>,
) -> T {
    Wait::new(what, timeout).until_ok(check)
}

/// [`wait_for`] for a check that needs `.await`.
///
/// # Panics
///
/// When `timeout` passes first, naming `what` and what the last look saw.
pub async fn wait_for_async<T, E, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    Wait::new(what, timeout).until_ok_async(check).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_comes_true_returns() {
        let mut n = 0;
        wait_until("n reaches 3", Duration::from_secs(5), || {
            n += 1;
            n >= 3
        });
        assert_eq!(n, 3);
    }

    #[test]
    fn a_value_is_returned_once_there() {
        let mut n = 0;
        let got = wait_for("n reaches 3", Duration::from_secs(5), || {
            n += 1;
            if n >= 3 {
                Ok(n)
            } else {
                Err(n)
            }
        });
        assert_eq!(got, 3);
    }

    #[test]
    #[should_panic(expected = "never: not within 20ms; last seen: 7")]
    fn a_timeout_names_what_and_the_last_look() {
        wait_for::<(), _>("never", Duration::from_millis(20), || Err(7));
    }

    #[test]
    #[should_panic(expected = "never: not within 20ms")]
    fn a_condition_that_never_holds_panics_naming_it() {
        Wait::new("never", Duration::from_millis(20))
            .every(Duration::from_millis(1))
            .until(|| false);
    }

    #[test]
    #[should_panic(expected = "the child exits: not within 1s; killed it, its output: x")]
    fn fail_names_what_and_the_detail() {
        Wait::new("the child exits", Duration::from_secs(1)).fail("killed it, its output: x");
    }

    #[test]
    fn poll_gives_the_last_look_back() {
        let mut n = 0;
        let last = Wait::new("never", Duration::from_millis(20)).poll::<(), _>(|| {
            n += 1;
            Err(n)
        });
        assert_eq!(last, Err(n));
    }

    #[tokio::test]
    async fn the_async_shapes_wait_too() {
        let mut n = 0;
        let got = wait_for_async("n reaches 2", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move {
                if n >= 2 {
                    Ok(n)
                } else {
                    Err(n)
                }
            }
        })
        .await;
        assert_eq!(got, 2);
        let mut m = 0;
        wait_until_async("m reaches 2", Duration::from_secs(5), || {
            m += 1;
            let m = m;
            async move { m >= 2 }
        })
        .await;
    }
}
