//! A future that is polled only after it asked to be.
//!
//! A `select!` loop polls every branch each time any branch wakes it. A
//! branch that almost never completes, such as a shutdown signal, is then
//! polled once or twice per request, and polling a `watch` or a signal
//! receiver takes a lock to re-register its waker: measured at 850
//! instructions per request in the satellite's relay and 1,700 in a plugin
//! (BENCHMARKS.md, relay round 10). Wrapped in [`WhenWoken`], such a branch
//! costs an atomic swap per poll until it is really woken.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// `future`, polled only when it has been woken since its last poll (and
/// on the first poll). Its output is `future`'s.
///
/// Correct for any future that follows the `Future` contract: one that
/// returns `Pending` has arranged to be woken when it can make progress,
/// so skipping the polls in between loses nothing.
pub struct WhenWoken<F> {
    future: Pin<Box<F>>,
    gate: Arc<Gate>,
    /// The waker `future` sees: it raises the gate and wakes the caller.
    waker: Waker,
}

struct Gate {
    woken: AtomicBool,
    caller: AtomicWaker,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.caller.wake();
    }
}

impl<F: Future> WhenWoken<F> {
    /// Wraps `future`.
    pub fn new(future: F) -> Self {
        let gate = Arc::new(Gate {
            woken: AtomicBool::new(true),
            caller: AtomicWaker::new(),
        });
        WhenWoken {
            future: Box::pin(future),
            waker: Waker::from(gate.clone()),
            gate,
        }
    }
}

impl<F: Future> Future for WhenWoken<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Registered before the flag is read: a wake in between is seen
        // either by the swap or by the caller's next poll.
        self.gate.caller.register(cx.waker());
        if !self.gate.woken.swap(false, Ordering::Acquire) {
            return Poll::Pending;
        }
        let this = &mut *self;
        this.future
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker))
    }
}

impl<F> std::fmt::Debug for WhenWoken<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhenWoken")
            .field("woken", &self.gate.woken.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// Pending until `ready`; counts its polls and keeps the last waker.
    struct Probe {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Future for Probe {
        type Output = &'static str;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            if self.ready.load(Ordering::SeqCst) {
                return Poll::Ready("done");
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    /// A caller's waker that counts its wakes.
    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_inner_future_is_polled_only_after_a_wake_and_its_wake_reaches_the_caller() {
        let polls = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(AtomicBool::new(false));
        let inner_waker = Arc::new(Mutex::new(None));
        let mut gated = WhenWoken::new(Probe {
            polls: polls.clone(),
            ready: ready.clone(),
            waker: inner_waker.clone(),
        });
        let caller = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(caller.clone());
        let mut cx = Context::from_waker(&waker);

        assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 1, "the first poll reaches it");
        for _ in 0..10 {
            assert!(Pin::new(&mut gated).poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1, "no wake, no poll");

        ready.store(true, Ordering::SeqCst);
        let wake = inner_waker.lock().unwrap().take().expect("it kept a waker");
        wake.wake();
        assert_eq!(caller.0.load(Ordering::SeqCst), 1, "the caller is woken");
        assert_eq!(Pin::new(&mut gated).poll(&mut cx), Poll::Ready("done"));
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_gated_watch_completes_in_a_select_loop() {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let stop = WhenWoken::new(async move {
            let _ = rx.wait_for(|s| *s).await;
        });
        tokio::pin!(stop);
        let mut ticks = 0;
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(1));
        loop {
            tokio::select! {
                () = &mut stop => break,
                _ = tick.tick() => {
                    ticks += 1;
                    if ticks == 5 {
                        tx.send(true).unwrap();
                    }
                }
            }
        }
        assert!(ticks >= 5);
    }
}
