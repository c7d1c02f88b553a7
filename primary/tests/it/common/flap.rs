//! A TCP relay that can cut every connection through it again and again:
//! a flapping proxy or a failover, as a client of the upstream (the state
//! store's PostgreSQL) sees it.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A relay on its own port to `127.0.0.1:upstream`.
pub struct Flapper {
    pub port: u16,
    open: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    /// While set, new connections are closed at once: the server is down.
    down: Arc<AtomicBool>,
}

impl Flapper {
    pub fn start(upstream: u16) -> Flapper {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let down = Arc::new(AtomicBool::new(false));
        let (o, s, d) = (open.clone(), stop.clone(), down.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                if d.load(Ordering::Relaxed) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let mut held = o.lock().unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
                held.push(client);
                held.push(server);
            }
        });
        Flapper {
            port,
            open,
            stop,
            down,
        }
    }

    /// The server gone for `how_long`: every open connection cut, and
    /// every new one closed at once until then.
    pub fn outage(&self, how_long: Duration) {
        self.down.store(true, Ordering::Relaxed);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // The fault's own length, not a wait for a condition.
        std::thread::sleep(how_long);
        self.down.store(false, Ordering::Relaxed);
    }

    /// Cuts every open connection, every `every`, for `how_long`; returns
    /// how many were cut.
    pub fn flap(&self, how_long: Duration, every: Duration) -> usize {
        let until = Instant::now() + how_long;
        let mut cut = 0;
        while Instant::now() < until {
            for stream in self.open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
                cut += 1;
            }
            // The fault's own rhythm, not a wait for a condition.
            std::thread::sleep(every);
        }
        cut / 2
    }
}

impl Drop for Flapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
