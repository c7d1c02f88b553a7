//! Who may call the HTTP API, and on which stacks (`docs/security.md`).
//!
//! Every endpoint but `/healthz` and `/readyz` needs a principal: a bearer
//! token from the tokens file (kept there as its SHA-256, never in clear),
//! or a client certificate issued by the configured CA whose subject CN or
//! DNS name the same file maps to a principal. A principal holds grants,
//! each a role on the stacks whose names match a glob (`team-a-*`):
//! `viewer` < `planner` < `operator` < `admin`, each implying the ones
//! before it. `metrics` is a role of its own that only reads `/metrics`.
//!
//! Before that, the request's `Host` (and `Origin`, when a browser sends
//! one) must name this server ([`HostPolicy`]): a web page that rebinds
//! its DNS name to 127.0.0.1 reaches the port, but with its own name.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;

/// A role, in order: each implies the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads: stacks, commands, resources, plugins, `/metrics`.
    Viewer,
    /// Plans.
    Planner,
    /// Applies, destroys, cancels.
    Operator,
    /// Targets (their configuration) and server settings.
    Admin,
}

impl Role {
    /// The name in grants and errors.
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Planner => "planner",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "viewer" => Role::Viewer,
            "planner" => Role::Planner,
            "operator" => Role::Operator,
            "admin" => Role::Admin,
            _ => return None,
        })
    }
}

/// A role on the stacks whose names match `stacks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The role.
    pub role: Role,
    /// A glob of stack names: `*` any run of characters, `?` one.
    pub stacks: String,
}

/// Who a request is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Its name, as recorded in the audit (`token:ci`, `cert:alice`,
    /// `anonymous`).
    pub name: String,
    /// What it may do.
    pub grants: Vec<Grant>,
    /// May read `/metrics` (the scrape role; viewers may too).
    pub metrics: bool,
}

impl Principal {
    /// Whether it holds `role` (or a higher one) on stack `stack`.
    pub fn may(&self, role: Role, stack: &str) -> bool {
        self.grants
            .iter()
            .any(|g| g.role >= role && glob_match(&g.stacks, stack))
    }

    /// Whether it holds `role` (or a higher one) on some stack.
    pub fn may_some(&self, role: Role) -> bool {
        self.grants.iter().any(|g| g.role >= role)
    }

    /// 403 unless it holds `role` on `stack`.
    pub fn require(&self, role: Role, stack: &str) -> Result<(), ApiError> {
        if self.may(role, stack) {
            Ok(())
        } else {
            Err(forbidden(format!(
                "`{}` is not {} of stack `{stack}`",
                self.name,
                article(role)
            ))
            .refusing(&self.name, Some(stack)))
        }
    }

    /// 403 unless it holds `role` on some stack (server-wide reads).
    pub fn require_some(&self, role: Role) -> Result<(), ApiError> {
        if self.may_some(role) {
            Ok(())
        } else {
            Err(forbidden(format!(
                "`{}` is not {} of any stack",
                self.name,
                article(role)
            ))
            .refusing(&self.name, None))
        }
    }

    fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            grants: vec![Grant {
                role: Role::Admin,
                stacks: "*".into(),
            }],
            metrics: true,
        }
    }
}

fn article(role: Role) -> String {
    match role {
        Role::Operator | Role::Admin => format!("an {}", role.name()),
        _ => format!("a {}", role.name()),
    }
}

fn forbidden(message: String) -> ApiError {
    // The message names the principal and what it lacked.
    tracing::info!(target: super::AUDIT, refused = %message, "403");
    ApiError::new(StatusCode::FORBIDDEN, message)
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(unauthorized)
    }
}

/// Whether `name` matches `pattern`: `*` any run of characters, `?` one,
/// anything else itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(name)
}

// ---------------------------------------------------------------- config

/// Why the authentication configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a tokens file.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The token cannot be generated or written.
    #[error("cannot write the API token {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No randomness.
    #[error("cannot generate a token: {0}")]
    Random(String),
}

/// The tokens file: `[[principal]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    principal: Vec<PrincipalEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalEntry {
    name: String,
    /// Hex SHA-256 of the bearer token.
    #[serde(default)]
    token_sha256: Option<String>,
    /// Client certificate names (subject CN or DNS SAN) that are this
    /// principal.
    #[serde(default)]
    certificates: Vec<String>,
    /// `role` (on every stack) or `role:glob`; `metrics` for scraping.
    roles: Vec<String>,
}

struct TokenEntry {
    hash: [u8; 32],
    principal: usize,
}

/// Who may call the API: the principals and how they prove it.
#[derive(Default)]
pub struct Auth {
    principals: Vec<Principal>,
    tokens: Vec<TokenEntry>,
    certificates: Vec<(String, usize)>,
    insecure: bool,
    hosts: HostPolicy,
}

impl fmt::Debug for Auth {
    // Never the hashes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("principals", &self.principals.len())
            .field("tokens", &self.tokens.len())
            .field("certificates", &self.certificates.len())
            .field("insecure", &self.insecure)
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// The hex SHA-256 of `token`, as the tokens file keeps it.
pub fn token_sha256(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Auth {
    /// No authentication: every request is `anonymous`, an admin of every
    /// stack. Only for loopback (`--insecure-no-auth`).
    pub fn insecure() -> Auth {
        Auth {
            insecure: true,
            principals: vec![Principal::anonymous()],
            ..Auth::default()
        }
    }

    /// Nobody yet; add principals with [`Auth::load_file`] or
    /// [`Auth::add_token`].
    pub fn new() -> Auth {
        Auth::default()
    }

    /// Whether every request is let in.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// Whether some principal has a way in.
    pub fn is_configured(&self) -> bool {
        self.insecure || !self.tokens.is_empty() || !self.certificates.is_empty()
    }

    /// Whether some principal is named by client certificates.
    pub fn has_certificates(&self) -> bool {
        !self.certificates.is_empty()
    }

    /// Sets which `Host`s and `Origin`s are this server.
    pub fn with_hosts(mut self, hosts: HostPolicy) -> Auth {
        self.hosts = hosts;
        self
    }

    /// Adds the principals of a tokens file.
    pub fn load_file(&mut self, path: &Path) -> Result<(), AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |message: String| AuthError::Invalid {
            path: path.to_owned(),
            message,
        };
        let file: TokensFile = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        for entry in file.principal {
            let grants = parse_roles(&entry.roles)
                .map_err(|m| invalid(format!("principal `{}`: {m}", entry.name)))?;
            let hash = match &entry.token_sha256 {
                Some(h) => Some(unhex(h).ok_or_else(|| {
                    invalid(format!(
                        "principal `{}`: `token_sha256` must be 64 hex digits",
                        entry.name
                    ))
                })?),
                None => None,
            };
            if hash.is_none() && entry.certificates.is_empty() {
                return Err(invalid(format!(
                    "principal `{}` has neither `token_sha256` nor `certificates`",
                    entry.name
                )));
            }
            let index = self.principals.len();
            self.principals.push(Principal {
                name: entry.name.clone(),
                grants: grants.0,
                metrics: grants.1,
            });
            if let Some(hash) = hash {
                self.tokens.push(TokenEntry {
                    hash,
                    principal: index,
                });
            }
            for name in entry.certificates {
                self.certificates.push((name.to_ascii_lowercase(), index));
            }
        }
        Ok(())
    }

    /// Adds a principal named `name` proven by `token`, with `grants`.
    pub fn add_token(&mut self, name: &str, token: &str, grants: Vec<Grant>) {
        let index = self.principals.len();
        self.principals.push(Principal {
            name: name.to_owned(),
            grants,
            metrics: true,
        });
        self.tokens.push(TokenEntry {
            hash: Sha256::digest(token.as_bytes()).into(),
            principal: index,
        });
    }

    /// The principal `token` proves, if any. Every stored hash is compared,
    /// in constant time.
    fn by_token(&self, token: &str) -> Option<&Principal> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.tokens {
            if bool::from(entry.hash.ct_eq(&presented)) {
                found = Some(entry.principal);
            }
        }
        found.map(|i| &self.principals[i])
    }

    /// The principal a verified client certificate's names map to.
    fn by_certificate(&self, names: &[String]) -> Option<&Principal> {
        names.iter().find_map(|n| {
            let n = n.to_ascii_lowercase();
            self.certificates
                .iter()
                .find(|(name, _)| *name == n)
                .map(|(_, i)| &self.principals[*i])
        })
    }

    /// Who signs in to the dashboard: `token`'s principal when one is
    /// given, else the client certificate's, else `anonymous` when
    /// insecure (401 or 403 as [`Auth::authenticate`]).
    pub(super) fn sign_in(
        &self,
        token: Option<&str>,
        cert: Option<&ClientCertificate>,
    ) -> Result<Principal, ApiError> {
        match token.map(str::trim).filter(|t| !t.is_empty()) {
            Some(token) => self.by_token(token).cloned().ok_or_else(unauthorized),
            None => self.authenticate(&HeaderMap::new(), cert),
        }
    }

    /// Who a request is: the bearer token's principal (a bad token is 401
    /// even with a certificate), else the client certificate's (403 when
    /// no principal names it), else `anonymous` when insecure, else 401.
    fn authenticate(
        &self,
        headers: &HeaderMap,
        cert: Option<&ClientCertificate>,
    ) -> Result<Principal, ApiError> {
        if let Some(value) = headers.get(AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| {
                    let (scheme, rest) = v.split_once(' ')?;
                    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
                })
                .filter(|t| !t.is_empty())
                .ok_or_else(unauthorized)?;
            return self.by_token(token).cloned().ok_or_else(unauthorized);
        }
        if let Some(cert) = cert {
            return match self.by_certificate(&cert.names) {
                Some(p) => Ok(p.clone()),
                None => Err(forbidden(format!(
                    "the client certificate ({}) is no principal of this server",
                    cert.names.join(", ")
                ))),
            };
        }
        if self.insecure {
            return Ok(Principal::anonymous());
        }
        Err(unauthorized())
    }
}

/// `role` or `role:glob` grants; `metrics` for the scrape role.
fn parse_roles(roles: &[String]) -> Result<(Vec<Grant>, bool), String> {
    let mut grants = Vec::new();
    let mut metrics = false;
    for spec in roles {
        let (name, stacks) = spec.split_once(':').unwrap_or((spec, "*"));
        if name == "metrics" {
            metrics = true;
            continue;
        }
        let role = Role::parse(name).ok_or_else(|| {
            format!(
                "unknown role `{name}` (viewer, planner, operator, admin, metrics; `role:glob` for some stacks)"
            )
        })?;
        if stacks.is_empty() {
            return Err(format!("`{spec}`: an empty stack pattern"));
        }
        grants.push(Grant {
            role,
            stacks: stacks.to_owned(),
        });
    }
    let metrics = metrics || !grants.is_empty();
    Ok((grants, metrics))
}

/// 401 with `WWW-Authenticate: Bearer`.
fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication required: `Authorization: Bearer <token>` or a client certificate",
    )
}

/// The names of a verified client certificate (subject CN, DNS SANs), put
/// in the request's extensions by the TLS listener.
#[derive(Clone, Debug)]
pub struct ClientCertificate {
    /// The names.
    pub names: Vec<String>,
}

// ---------------------------------------------------------------- hosts

/// Which `Host` and `Origin` values name this server.
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    /// Host names and IP addresses (no port), lowercase.
    pub names: Vec<String>,
    /// Any IP literal too (a listener on every address, no public name):
    /// a browser only sends an IP as `Host` when it was pointed at it.
    pub any_ip: bool,
}

impl HostPolicy {
    /// The names given, else those of the listen address: its host, plus
    /// `localhost`, `127.0.0.1` and `::1` on loopback; on an unspecified
    /// address (`0.0.0.0`), `localhost` and any IP literal.
    pub fn new(public_names: &[String], listen: IpAddr) -> HostPolicy {
        if !public_names.is_empty() {
            return HostPolicy {
                names: public_names
                    .iter()
                    .map(|n| strip_port(n.trim()).to_ascii_lowercase())
                    .collect(),
                any_ip: false,
            };
        }
        let mut names = vec![listen.to_string()];
        let mut any_ip = false;
        if listen.is_loopback() {
            names.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
        } else if listen.is_unspecified() {
            names.push("localhost".into());
            any_ip = true;
        }
        HostPolicy { names, any_ip }
    }

    fn admits(&self, host: &str) -> bool {
        let host = strip_port(host).to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        self.names.iter().any(|n| n == host) || (self.any_ip && host.parse::<IpAddr>().is_ok())
    }
}

/// `name` without `:port`, and an IPv6 literal without its brackets.
fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

/// The host of an `Origin` (`scheme://host[:port]`).
fn origin_host(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    Some(rest.split('/').next().unwrap_or(rest))
}

// ---------------------------------------------------------------- the layer

/// Checks `Host`, `Origin`, then the credentials of every request but
/// health and readiness; puts the [`Principal`] in its extensions.
pub async fn guard(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    match admit(&auth, req) {
        Ok(req) => next.run(req).await,
        // The request's body was not read: the connection cannot carry
        // another request, and says so.
        Err(refused) => super::error::closing(*refused),
    }
}

/// The request with its principal, or the answer refusing it.
fn admit(auth: &Auth, mut req: Request) -> Result<Request, Box<Response>> {
    check_host(auth, &req)?;
    let cert = req.extensions().get::<ClientCertificate>();
    match auth.authenticate(req.headers(), cert) {
        Ok(principal) => {
            req.extensions_mut().insert(principal);
            Ok(req)
        }
        Err(e) => {
            let status = e.status;
            // Never the credential: what was asked, and why it was refused
            // (a 403 is logged where it is made).
            if status != StatusCode::FORBIDDEN {
                tracing::info!(
                    target: super::AUDIT,
                    method = %req.method(),
                    path = %req.uri().path(),
                    refused = %e.message,
                    "{}",
                    status.as_u16()
                );
            }
            let mut response = e.into_response();
            if status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer realm=\"orrery\""),
                );
            }
            Err(Box::new(response))
        }
    }
}

/// Refuses a request whose `Host`, or `Origin` when there is one, does
/// not name this server. The dashboard (`ui/`) checks it too.
pub(super) fn check_host(auth: &Auth, req: &Request) -> Result<(), Box<Response>> {
    let headers = req.headers();
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
    match host {
        Some(h) if auth.hosts.admits(&h) => {}
        _ => {
            return Err(Box::new(
                ApiError::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "the `Host` of this request does not name this server (see --public-name)",
                )
                .into_response(),
            ))
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let ok = origin
            .to_str()
            .ok()
            .and_then(origin_host)
            .is_some_and(|h| auth.hosts.admits(h));
        if !ok {
            return Err(Box::new(
                forbidden("cross-origin requests are refused".into()).into_response(),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- local token

/// The file `orrery up` writes its generated token to, in its data
/// directory.
pub const LOCAL_TOKEN_FILE: &str = "api-token";

/// A new random token (256 bits, hex, prefixed `orr_`).
pub fn generate_token() -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(format!("orr_{}", hex(&bytes)))
}

/// Writes `token` to `data_dir/api-token`, readable by its owner only
/// (a fresh file: an existing one, or a link in its place, is replaced).
pub fn write_local_token(data_dir: &Path, token: &str) -> Result<PathBuf, AuthError> {
    use std::io::Write;
    let path = data_dir.join(LOCAL_TOKEN_FILE);
    let write_err = |source| AuthError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(data_dir).map_err(write_err)?;
    let tmp = data_dir.join(format!(".{LOCAL_TOKEN_FILE}.{}", std::process::id()));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(write_err(e)),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp).map_err(write_err)?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_err)?;
    std::fs::rename(&tmp, &path).map_err(write_err)?;
    Ok(path)
}

/// The token a client on this machine uses: `$ORRERY_TOKEN`, else the one
/// `orrery up` wrote in `data_dir` (`None` when there is neither).
pub fn find_local_token(data_dir: &Path) -> Result<Option<String>, AuthError> {
    if let Ok(token) = std::env::var("ORRERY_TOKEN") {
        if !token.trim().is_empty() {
            return Ok(Some(token.trim().to_owned()));
        }
    }
    let path = data_dir.join(LOCAL_TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().to_owned()).filter(|t| !t.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AuthError::Read { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("team-a-*", "team-a-web"));
        assert!(!glob_match("team-a-*", "team-b-x"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("*-prod", "web-prod"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
    }

    #[test]
    fn roles_imply_the_ones_before() {
        let (grants, metrics) =
            parse_roles(&["operator:team-a-*".into(), "viewer".into()]).unwrap();
        let p = Principal {
            name: "ci".into(),
            grants,
            metrics,
        };
        assert!(p.may(Role::Operator, "team-a-x"));
        assert!(p.may(Role::Planner, "team-a-x"));
        assert!(!p.may(Role::Admin, "team-a-x"));
        assert!(!p.may(Role::Operator, "team-b-x"));
        assert!(p.may(Role::Viewer, "team-b-x"));
        assert!(parse_roles(&["root".into()]).is_err());
        assert_eq!(parse_roles(&["metrics".into()]).unwrap(), (vec![], true));
    }

    #[test]
    fn hosts() {
        let loopback = HostPolicy::new(&[], "127.0.0.1".parse().unwrap());
        assert!(loopback.admits("127.0.0.1:8080"));
        assert!(loopback.admits("localhost:8080"));
        assert!(loopback.admits("[::1]:8080"));
        assert!(!loopback.admits("evil.example:8080"));
        assert!(!loopback.admits("10.0.0.1"));
        let any = HostPolicy::new(&[], "0.0.0.0".parse().unwrap());
        assert!(any.admits("10.1.2.3:8080"));
        assert!(!any.admits("rebound.example"));
        let named = HostPolicy::new(&["orrery.example.com".into()], "0.0.0.0".parse().unwrap());
        assert!(named.admits("Orrery.Example.Com:443"));
        assert!(!named.admits("10.1.2.3"));
        assert_eq!(origin_host("http://localhost:8080"), Some("localhost:8080"));
        assert_eq!(origin_host("null"), None);
    }

    #[test]
    fn tokens_are_found_by_hash_only() {
        let mut auth = Auth::new();
        auth.add_token("ci", "secret-one", vec![]);
        assert_eq!(auth.by_token("secret-one").unwrap().name, "ci");
        assert!(auth.by_token("secret-two").is_none());
        assert!(!format!("{auth:?}").contains(&token_sha256("secret-one")));
        assert_eq!(
            unhex(&token_sha256("x")).unwrap(),
            <[u8; 32]>::from(Sha256::digest(b"x"))
        );
    }
}
