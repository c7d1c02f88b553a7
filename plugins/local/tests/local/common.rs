//! The local plugin's test environment: a temporary root and the plugin in
//! process (`orrery_testing::PluginEnv`, shared with the other plugins).

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use orrery_plugin_local::LocalPlugin;
pub use orrery_testing::{failed, ok, props, PluginEnv};

pub const DIR: &str = "Local::Fs::Directory";
pub const FILE: &str = "Local::Fs::File";
pub const LINK: &str = "Local::Fs::Symlink";

/// A fresh root directory and a plugin served in-process.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    env: PluginEnv,
}

impl Deref for Env {
    type Target = PluginEnv;

    fn deref(&self) -> &PluginEnv {
        &self.env
    }
}

impl DerefMut for Env {
    fn deref_mut(&mut self) -> &mut PluginEnv {
        &mut self.env
    }
}

impl Env {
    /// The root is a fresh temporary directory.
    pub async fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        Env::at(dir, root).await
    }

    /// The root is `<tmp>/root`, next to an empty `<tmp>/outside` (see
    /// [`Env::outside`]) that `../outside` from the root reaches.
    pub async fn beside_outside() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(dir.path().join("outside")).unwrap();
        Env::at(dir, root).await
    }

    async fn at(dir: tempfile::TempDir, root: PathBuf) -> Env {
        let config = props([("root", root.to_str().unwrap().into())]);
        let env = PluginEnv::start(LocalPlugin, config).await;
        Env { dir, root, env }
    }

    /// The host path of `rel` under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The directory beside the root of [`Env::beside_outside`].
    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }
}
