//! Packages for tests (feature `testing`): a package of a binary at a
//! version, signed or not, and requirements parsed or panicking.

use std::path::Path;

use crate::package::{self, Package, PackageOptions};
use crate::{PublisherKey, Requirement};

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
