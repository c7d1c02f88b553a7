//! Target configuration the host's operator holds, added to each request on
//! the host that runs the plugin: an operator-fixed setting (a `local`
//! root) or a credential never crosses NATS and never reaches the
//! primary's store. Secret references (`${env:NAME}`, `${file:PATH}`) in a
//! target's configuration are resolved here too, at request time, so a
//! recorded target holds the reference and never the value.
//!
//! Two trust levels: what the operator wrote (the held configuration) may
//! name any variable and any file of this host; what came with the request
//! (the stack author's document) only the variables and the secrets
//! directory the operator exposes ([`RefPolicy`]).
//!
//! A held target belongs to the stacks its operator names ([`Access`]): a
//! request made for another stack, or for none, is refused here, on the
//! host that holds the credential, whatever the primary decided. And a
//! held credential goes only where the operator pointed it: while a target
//! holds one, the request may set no field the operator did not hold,
//! except those the operator opened, so a stack cannot send the held
//! password to a `host` of its choosing.
//!
//! Some fields name credentials *of the host itself*: a credential source
//! ([`HOST_FIELDS`], `credentials`) reads a key file, a profile or a web
//! identity token of the host the plugin runs on, or assumes a role from
//! the host's own identity. Only that host's operator may set one; a
//! request that brings its own is refused, else a stack could name the key
//! file of a target held for other stacks and act with it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use orrery_schema::{codec, Envelope, MessageKind, PropertyMap, Value};

/// The most bytes a `${file:…}` reference reads (secrets are small; a
/// reference to a large file is a mistake or an attack on memory).
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// Target config fields only the operator of the host that runs the plugin
/// may set: a credential source (`credentials`) names files, profiles and
/// identities of that host, and so do the JetStream plugin's `creds_file`
/// and its client certificate and key (`tls_cert_file`, `tls_key_file`):
/// a stack naming another target's would act as it on the servers it
/// picks. A request that sets one the operator did not hold is refused
/// ([`HeldError::HostOnly`]) wherever references are
/// [`RefPolicy::Exposed`]; the local CLI, whose user is the operator, may.
pub const HOST_FIELDS: &[&str] = &["credentials", "creds_file", "tls_cert_file", "tls_key_file"];

/// Which references in a request's own target configuration resolve.
#[derive(Clone, Debug, Default)]
pub enum RefPolicy {
    /// Only `${file:NAME}` of a plain file name inside `dir`, and
    /// `${env:NAME}` of a variable listed in `env`. The default for a
    /// satellite and a server: with neither set, no reference resolves.
    #[default]
    Exposed,
    /// Any variable and any path (relative ones from `base`): the local
    /// CLI, where the author of the document is the operator.
    Open {
        /// Where relative paths start.
        base: PathBuf,
    },
}

/// The targets this host's operator configured, and what a request's
/// references may read.
#[derive(Clone, Default)]
pub struct HeldTargets {
    held: BTreeMap<String, PropertyMap>,
    access: BTreeMap<String, Access>,
    policy: RefPolicy,
    secrets_dir: Option<PathBuf>,
    env: BTreeSet<String>,
}

/// Who may use a held target, as its operator configured it
/// (`[target_access.NAME]` in a satellite's configuration).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// Stack name patterns (`team-b-*`; `*` any run of characters, `?`
    /// one) that may use the target. A request for any other stack, or
    /// for none, is refused.
    pub stacks: Vec<String>,
    /// Fields a request may still set while the target holds a credential
    /// (`dbname`): every other field not held is refused then.
    #[serde(default)]
    pub open_fields: Vec<String>,
}

/// Why a request's target configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeldError {
    /// The request sets a field the host's operator fixed.
    #[error(
        "target `{target}`: `{field}` is set by the operator of the host that serves it; leave it out of the stack's target"
    )]
    Fixed {
        /// The target.
        target: String,
        /// The field.
        field: String,
    },
    /// A reference could not be resolved (the message never holds a value).
    #[error("target `{target}`: cannot resolve `{reference}`: {reason}")]
    Reference {
        /// The target.
        target: String,
        /// The reference as written.
        reference: String,
        /// Why.
        reason: String,
    },
    /// The request is for a stack the target's operator did not allow,
    /// or for no stack.
    #[error(
        "target `{target}` is held on this host for other stacks than {}; its operator allows {allowed}",
        .stack.as_deref().map(|s| format!("`{s}`")).unwrap_or_else(|| "a request that names none".into())
    )]
    Stack {
        /// The target.
        target: String,
        /// The stack the request named, if any.
        stack: Option<String>,
        /// The patterns the operator allows, joined.
        allowed: String,
    },
    /// The request sets a field that would decide where a held credential
    /// goes (a host, a port, a URL) or how.
    #[error(
        "target `{target}`: `{field}` cannot be set by a stack, because this host holds a credential for the target and sends it only where its operator said; ask the operator to hold `{field}` or open it"
    )]
    Sealed {
        /// The target.
        target: String,
        /// The field.
        field: String,
    },
    /// The request sets a field that names credentials of this host
    /// ([`HOST_FIELDS`]), which only this host's operator may set.
    #[error(
        "target `{target}`: `{field}` names credentials of the host that runs the plugin; only that host's operator sets it (in its held target config), never a stack"
    )]
    HostOnly {
        /// The target.
        target: String,
        /// The field.
        field: String,
    },
    /// The request body is not a request with a target.
    #[error("the request body cannot be read: {0}")]
    Body(String),
}

impl fmt::Debug for HeldTargets {
    // Names only: the values are credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held: BTreeMap<&String, Vec<&String>> = self
            .held
            .iter()
            .map(|(t, c)| (t, c.keys().collect()))
            .collect();
        f.debug_struct("HeldTargets")
            .field("held", &held)
            .field("policy", &self.policy)
            .field("secrets_dir", &self.secrets_dir)
            .field("env", &self.env)
            .finish()
    }
}

impl HeldTargets {
    /// Holds `config` for `target` (its fields win over nothing: a request
    /// that sets one differently is refused).
    pub fn hold(mut self, target: impl Into<String>, config: PropertyMap) -> Self {
        self.held.insert(target.into(), config);
        self
    }

    /// Sets which references of a request resolve.
    pub fn policy(mut self, policy: RefPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Lets only the stacks `access` names use `target`, and opens its
    /// fields as it says.
    pub fn restrict(mut self, target: impl Into<String>, access: Access) -> Self {
        self.access.insert(target.into(), access);
        self
    }

    /// `${file:NAME}` in a request reads `dir/NAME`.
    pub fn secrets_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.secrets_dir = Some(dir.into());
        self
    }

    /// `${env:NAME}` in a request may read these variables.
    pub fn expose_env(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.env.extend(names);
        self
    }

    /// The stacks (patterns) `target` is restricted to, when its operator
    /// restricted it.
    pub fn stacks_of(&self, target: &str) -> Option<&[String]> {
        self.access.get(target).map(|a| a.stacks.as_slice())
    }

    /// The targets held, by name.
    pub fn targets(&self) -> impl Iterator<Item = &str> {
        self.held.keys().map(String::as_str)
    }

    /// The request with the held configuration added and every reference
    /// resolved; the same envelope, untouched, when there is nothing to do
    /// (the relay's fast path decodes nothing).
    ///
    /// # Errors
    ///
    /// [`HeldError`]: an operator-fixed field set otherwise, a reference
    /// that does not resolve, a body that is not a request.
    pub fn apply(&self, mut envelope: Envelope) -> Result<Envelope, HeldError> {
        // Most requests name no held target and hold no reference: byte
        // scans, not a decode, decide that.
        let names_held = self
            .held
            .keys()
            .chain(self.access.keys())
            .any(|t| memchr::memmem::find(&envelope.body, t.as_bytes()).is_some());
        if !is_request(&envelope.kind)
            || (!names_held
                && !mentions_ref(&envelope.body)
                && !mentions_host_field(&envelope.body))
        {
            return Ok(envelope);
        }
        let mut body: PropertyMap =
            codec::decode(&envelope.body).map_err(|e| HeldError::Body(e.to_string()))?;
        let Some(Value::Map(target)) = body.get_mut("target") else {
            return Ok(envelope);
        };
        let name = target
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let stack = target.get("stack").and_then(Value::as_str);
        let access = self.access.get(&name);
        if let Some(access) = access {
            if !stack.is_some_and(|s| access.stacks.iter().any(|p| glob(p, s))) {
                return Err(HeldError::Stack {
                    target: name,
                    stack: stack.map(|s| s.chars().take(200).collect()),
                    allowed: access.stacks.join(", "),
                });
            }
        }
        let held = self.held.get(&name);
        let exposed = matches!(self.policy, RefPolicy::Exposed);
        if held.is_none() && !mentions_ref(&envelope.body) && !exposed {
            return Ok(envelope);
        }
        let config = match target
            .entry("config".to_owned())
            .or_insert_with(|| Value::Map(PropertyMap::new()))
        {
            Value::Map(config) => config,
            _ => return Err(HeldError::Body("`target.config` is not a map".into())),
        };
        let request = Resolver {
            target: &name,
            open: matches!(self.policy, RefPolicy::Open { .. }),
            base: match &self.policy {
                RefPolicy::Open { base } => Some(base.as_path()),
                RefPolicy::Exposed => None,
            },
            dir: self.secrets_dir.as_deref(),
            env: &self.env,
        };
        if exposed {
            // Checked before a reference is read: a refused request reads
            // nothing.
            if let Some(field) = HOST_FIELDS
                .iter()
                .find(|f| config.contains_key(**f) && !held.is_some_and(|h| h.contains_key(**f)))
            {
                return Err(HeldError::HostOnly {
                    target: name,
                    field: (*field).to_owned(),
                });
            }
            if held.is_none() && !mentions_ref(&envelope.body) {
                return Ok(envelope);
            }
        }
        for value in config.values_mut() {
            request.resolve(value)?;
        }
        if let Some(held) = held {
            if held.keys().any(|k| orrery_schema::secret_looking_key(k)) {
                let open = access.map(|a| a.open_fields.as_slice()).unwrap_or_default();
                if let Some(field) = config
                    .keys()
                    .find(|f| !held.contains_key(*f) && !open.contains(f))
                {
                    return Err(HeldError::Sealed {
                        target: name,
                        field: field.chars().take(200).collect(),
                    });
                }
            }
            let operator = Resolver {
                open: true,
                ..request
            };
            for (field, value) in held {
                if config.get(field).is_some_and(|given| given != value) {
                    return Err(HeldError::Fixed {
                        target: name.clone(),
                        field: field.clone(),
                    });
                }
                let mut value = value.clone();
                operator.resolve(&mut value)?;
                config.insert(field.clone(), value);
            }
        }
        envelope.body = codec::encode(&body).map_err(|e| HeldError::Body(e.to_string()))?;
        Ok(envelope)
    }
}

/// Whether `name` matches `pattern`: `*` any run of characters, `?` one.
fn glob(pattern: &str, name: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(name)
}

fn is_request(kind: &MessageKind) -> bool {
    matches!(
        kind,
        MessageKind::Create
            | MessageKind::Read
            | MessageKind::Update
            | MessageKind::Delete
            | MessageKind::Status
            | MessageKind::List
    )
}

/// Whether `body` may hold a reference: one vectorised scan, so a request
/// without one (nearly all) costs the relay no decode.
fn mentions_ref(body: &[u8]) -> bool {
    // Two bytes: `memmem` would build a searcher per call, which cost more
    // than the scan.
    memchr::memchr_iter(b'$', body).any(|at| body.get(at + 1) == Some(&b'{'))
}

/// Whether `body` may set a [`HOST_FIELDS`] field: one scan per field
/// with a searcher built once.
fn mentions_host_field(body: &[u8]) -> bool {
    static FINDERS: std::sync::LazyLock<Vec<memchr::memmem::Finder<'static>>> =
        std::sync::LazyLock::new(|| {
            HOST_FIELDS
                .iter()
                .map(|f| memchr::memmem::Finder::new(f.as_bytes()))
                .collect()
        });
    FINDERS.iter().any(|f| f.find(body).is_some())
}

#[derive(Clone, Copy)]
struct Resolver<'a> {
    target: &'a str,
    open: bool,
    base: Option<&'a Path>,
    dir: Option<&'a Path>,
    env: &'a BTreeSet<String>,
}

impl Resolver<'_> {
    fn resolve(&self, value: &mut Value) -> Result<(), HeldError> {
        match value {
            Value::String(s) if s.contains("${env:") || s.contains("${file:") => {
                *s = self.substitute(s)?;
            }
            Value::List(items) => items.iter_mut().try_for_each(|v| self.resolve(v))?,
            Value::Map(map) => map.values_mut().try_for_each(|v| self.resolve(v))?,
            _ => {}
        }
        Ok(())
    }

    /// `s` with each `${env:…}` and `${file:…}` replaced by its value.
    fn substitute(&self, s: &str) -> Result<String, HeldError> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(start) = next_ref(rest) {
            out.push_str(&rest[..start]);
            let Some(len) = rest[start..].find('}') else {
                return Err(self.error(&rest[start..], "the reference is not closed with `}`"));
            };
            let reference = &rest[start..start + len + 1];
            out.push_str(&self.value_of(reference)?);
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn value_of(&self, reference: &str) -> Result<String, HeldError> {
        let inner = &reference[2..reference.len() - 1];
        if let Some(name) = inner.strip_prefix("env:") {
            if !self.open && !self.env.contains(name) {
                return Err(self.error(
                    reference,
                    "this host passes only the variables its operator exposes (--secret-env)",
                ));
            }
            return std::env::var(name)
                .map_err(|_| self.error(reference, "the variable is not set on this host"));
        }
        let path = inner.strip_prefix("file:").unwrap_or(inner);
        let path = if self.open {
            let path = Path::new(path);
            match self.base {
                Some(base) if path.is_relative() => base.join(path),
                _ => path.to_path_buf(),
            }
        } else {
            let Some(dir) = self.dir else {
                return Err(self.error(
                    reference,
                    "this host has no secrets directory (--secrets-dir)",
                ));
            };
            let plain = !path.is_empty()
                && !path.starts_with('.')
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !plain {
                return Err(self.error(
                    reference,
                    "a file in the secrets directory is named by a plain file name",
                ));
            }
            dir.join(path)
        };
        read_secret(&path).map_err(|reason| self.error(reference, &reason))
    }

    fn error(&self, reference: &str, reason: &str) -> HeldError {
        HeldError::Reference {
            target: self.target.to_owned(),
            reference: reference.chars().take(200).collect(),
            reason: reason.to_owned(),
        }
    }
}

fn next_ref(s: &str) -> Option<usize> {
    match (s.find("${env:"), s.find("${file:")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The file's text, one trailing newline dropped, at most
/// [`MAX_SECRET_BYTES`].
fn read_secret(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open it: {}", e.kind()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read it as UTF-8 text: {}", e.kind()))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(format!("it is larger than {MAX_SECRET_BYTES} bytes"));
    }
    let trimmed = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests;
