//! Running the `orrery` binary in a scratch directory.

#![allow(dead_code)]

pub mod certs;
pub mod cloud;
pub mod crash;
pub mod flap;
pub mod postgres;
pub mod pty;
pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod fleet;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A scratch directory with its own state store.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file under the scratch directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `orrery ARGS` with the scratch state store and this workspace's plugins.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
        cmd.args(args)
            .env("ORRERY_DATA_DIR", self.state())
            .env("ORRERY_PLUGIN_DIR", orrery_testing::target_debug());
        cmd
    }

    /// Runs `orrery ARGS` to its end (see [`Scratch::command`]).
    pub fn orrery(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().unwrap())
    }

    /// The data directory of the scratch state store.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
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

/// A stack `stack` of `n` testbed things on target `lab`, each answered
/// after `delay_ms` and waiting for the one before: an apply that takes
/// about `n * delay_ms`, for tests that act while it runs.
pub fn slow_chain(stack: &str, n: usize, delay_ms: u32) -> String {
    let mut doc = format!(
        "stack: {stack}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {{ polls: 0, delay_ms: {delay_ms} }}\nresources:\n  - label: t0\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: t0, value: 0 }}\n",
    );
    for i in 1..n {
        doc.push_str(&format!(
            "  - label: t{i}\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: \"${{t{}.name}}-{i}\", value: {i} }}\n",
            i - 1
        ));
    }
    doc
}
