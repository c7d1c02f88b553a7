//! A TCP relay between one satellite and nats-server that can hold every
//! byte for a while: a network partition as the satellite and the server
//! see it (the connection stays up, nothing arrives), needing no root.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Whether bytes flow; waiters are woken when they may again.
#[derive(Default)]
struct Gate {
    held: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait_open(&self) {
        let mut held = self.held.lock().unwrap();
        while *held {
            held = self.opened.wait(held).unwrap();
        }
    }

    fn set(&self, hold: bool) {
        *self.held.lock().unwrap() = hold;
        if !hold {
            self.opened.notify_all();
        }
    }
}

/// A relay listening on its own port, forwarding to `upstream`.
pub struct Proxy {
    pub port: u16,
    gate: Arc<Gate>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let gate = Arc::new(Gate::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s) = (gate.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                // nats-server down (being restarted): the satellite
                // sees its connection refused and retries.
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                pump(&client, &server, g.clone());
                pump(&server, &client, g.clone());
            }
        });
        Proxy { port, gate, stop }
    }

    /// Holds (true) or releases (false) every connection's bytes.
    pub fn hold(&self, hold: bool) {
        self.gate.set(hold);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.gate.set(false);
        // Wakes the accept loop so it sees `stop`.
        let _ = TcpStream::connect_timeout(
            &([127, 0, 0, 1], self.port).into(),
            Duration::from_millis(200),
        );
    }
}

/// Copies `from` to `to` until either closes, waiting at the gate before
/// each write.
fn pump(from: &TcpStream, to: &TcpStream, gate: Arc<Gate>) {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            gate.wait_open();
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
