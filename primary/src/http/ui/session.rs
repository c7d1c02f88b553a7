//! Dashboard sessions: a random id in an `HttpOnly` cookie, of which the
//! server keeps only the SHA-256, mapped to the principal that signed in,
//! its CSRF token and its expiry.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::super::auth::Principal;

/// The cookie's name.
pub const COOKIE: &str = "orrery_session";
/// How long a session lasts after sign-in (no sliding renewal: a stolen
/// cookie dies on schedule).
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Most sessions one principal keeps at once; beyond, its own oldest is
/// dropped, never another principal's (principals are the tokens file's,
/// so all sessions together stay bounded too).
const MAX_SESSIONS_PER_PRINCIPAL: usize = 256;

/// A signed-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    /// Who signed in.
    pub principal: Principal,
    /// Every state-changing form carries it back.
    pub csrf: String,
    expires: SystemTime,
}

impl Session {
    /// Whether `presented` is this session's CSRF token (constant time).
    pub fn csrf_ok(&self, presented: &str) -> bool {
        presented.len() == self.csrf.len()
            && bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

/// The sessions of this process (a restart signs everyone out).
#[derive(Default)]
pub struct Sessions {
    by_hash: Mutex<HashMap<[u8; 32], Session>>,
}

/// Why no session could be made.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for a session id: {0}")]
pub struct NoRandomness(String);

fn random_hex() -> Result<String, NoRandomness> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| NoRandomness(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn hash(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// A new session for `principal` at `now`; returns the id for the cookie.
    pub fn create(&self, principal: Principal, now: SystemTime) -> Result<String, NoRandomness> {
        let id = random_hex()?;
        let session = Session {
            principal,
            csrf: random_hex()?,
            expires: now + LIFETIME,
        };
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.expires > now);
        let name = &session.principal.name;
        let own = || map.iter().filter(|(_, s)| s.principal.name == *name);
        if own().count() >= MAX_SESSIONS_PER_PRINCIPAL {
            if let Some(oldest) = own().min_by_key(|(_, s)| s.expires).map(|(k, _)| *k) {
                map.remove(&oldest);
            }
        }
        map.insert(hash(&id), session);
        Ok(id)
    }

    /// The live session `id` names at `now`.
    pub fn get(&self, id: &str, now: SystemTime) -> Option<Session> {
        let key = hash(id);
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&key) {
            Some(s) if s.expires > now => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends session `id`.
    pub fn remove(&self, id: &str) {
        let mut map = self.by_hash.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&hash(id));
    }
}

/// The session id the request's `Cookie` headers carry.
pub fn cookie_value(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|v| v.len() == 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn someone() -> Principal {
        Principal {
            name: "token:someone".into(),
            grants: vec![],
            metrics: false,
        }
    }

    #[test]
    fn sessions_are_kept_by_hash_and_expire() {
        let sessions = Sessions::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let id = sessions.create(someone(), now).unwrap();
        let map = sessions.by_hash.lock().unwrap();
        assert!(map.contains_key(&hash(&id)));
        let held = format!("{:?}", map.keys().collect::<Vec<_>>());
        assert!(!held.contains(&id));
        drop(map);
        let s = sessions.get(&id, now + Duration::from_secs(60)).unwrap();
        assert_eq!(s.principal.name, "token:someone");
        assert!(s.csrf_ok(&s.csrf.clone()));
        assert!(!s.csrf_ok("nope"));
        assert!(sessions.get(&id, now + LIFETIME).is_none());
        assert!(sessions.get(&id, now).is_none(), "an expired one is gone");
        let id = sessions.create(someone(), now).unwrap();
        sessions.remove(&id);
        assert!(sessions.get(&id, now).is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = axum::http::HeaderMap::new();
        let id = "a".repeat(64);
        h.insert(
            axum::http::header::COOKIE,
            format!("x=1; {COOKIE}={id}; y=2").parse().unwrap(),
        );
        assert_eq!(cookie_value(&h), Some(id));
        h.insert(
            axum::http::header::COOKIE,
            format!("{COOKIE}=short").parse().unwrap(),
        );
        assert_eq!(cookie_value(&h), None);
    }
}
