//! The real `orrery` binary against the plugin: embedded (the plugin a
//! child of the primary) or through an `orrery-satellite` over a NATS bus
//! that is not the NATS server being managed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use orrery_testing::{binary, target_debug, wait_until};

use crate::common::NatsServer;

/// One run's outcome.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// A scratch state store and, in distributed mode, the bus and a satellite.
pub struct Orrery {
    pub dir: tempfile::TempDir,
    bus: Option<(NatsServer, Satellite)>,
}

struct Satellite(Child);

impl Drop for Satellite {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Orrery {
    /// Plugins run by the primary itself.
    pub fn embedded() -> Orrery {
        Orrery {
            dir: tempfile::tempdir().unwrap(),
            bus: None,
        }
    }

    /// Plugins reached through one satellite on a bus of its own.
    pub async fn through_a_satellite() -> Orrery {
        let bus = NatsServer::start().await;
        let child = Command::new(binary("orrery-satellite"))
            .args(["--nats-url", &bus.url, "--id", "sat-js", "--plugin"])
            .arg(binary("orrery-plugin-jetstream"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let orrery = Orrery {
            dir: tempfile::tempdir().unwrap(),
            bus: Some((bus, Satellite(child))),
        };
        wait_until(
            "the satellite serves jetstream",
            Duration::from_secs(20),
            || {
                let run = orrery.run(&["plugins", "--output", "json"]);
                run.code == 0 && run.stdout.contains("jetstream@")
            },
        );
        orrery
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `orrery ARGS` (plus `--nats-url` in distributed mode), to its end.
    pub fn run(&self, args: &[&str]) -> Run {
        let mut command = Command::new(binary("orrery"));
        command
            .args(args)
            .env("ORRERY_DATA_DIR", self.dir.path().join("state"));
        match &self.bus {
            Some((bus, _)) => {
                // Plugins must come through the satellite, never from here.
                command
                    .args(["--nats-url", &bus.url])
                    .env("ORRERY_PLUGIN_DIR", "/nonexistent");
            }
            None => {
                command.env("ORRERY_PLUGIN_DIR", target_debug());
            }
        }
        let out = command.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn run_file(&self, command: &str, file: &Path, rest: &[&str]) -> Run {
        let mut args = vec![command, file.to_str().unwrap()];
        args.extend_from_slice(rest);
        self.run(&args)
    }
}
