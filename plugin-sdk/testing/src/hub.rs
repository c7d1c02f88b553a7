//! Hub packages for tests (feature `hub`): copies of plugin binaries with
//! bytes of their own, and packages built from them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use orrery_hub::package::{self, Package, PackageOptions};
use orrery_hub::{PublisherKey, Requirement};

/// A copy of a workspace plugin binary, stripped of debug info, with
/// `marker` appended so each copy has its own bytes. An ELF binary ignores
/// trailing bytes, so the copy still runs.
///
/// # Panics
///
/// When the binary cannot be copied or appended to.
pub fn plugin_copy(dir: &Path, name: &str, marker: &str) -> PathBuf {
    let dest = dir.join(format!("{name}-{marker}"));
    std::fs::copy(crate::binary(name), &dest).expect("copy the plugin binary");
    let _ = Command::new("strip")
        .arg(&dest)
        .stderr(Stdio::null())
        .status();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&dest)
        .expect("open the copy");
    file.write_all(marker.as_bytes()).expect("mark the copy");
    dest
}

/// A package of `binary` at `version`, signed with `key` when given.
///
/// # Panics
///
/// When the package cannot be built.
pub async fn build(
    binary: &Path,
    version: &str,
    key: Option<&PublisherKey>,
    out: &Path,
    platform: Option<&str>,
) -> Package {
    let mut options = PackageOptions::new(binary);
    options.version = Some(version.to_owned());
    options.license = "Apache-2.0".into();
    options.summary = "test package".into();
    if let Some(platform) = platform {
        options.platform = platform.to_owned();
    }
    package::build(&options, key, out)
        .await
        .expect("build the package")
}

/// A version requirement, parsed.
///
/// # Panics
///
/// When `s` is not one.
pub fn requirement(s: &str) -> Requirement {
    s.parse().expect("a version requirement")
}
