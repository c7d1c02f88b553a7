//! Keyed hashes of secret values: enough to tell that a write-only or
//! opaque input changed, useless to recover it.

use hmac::{Hmac, Mac};
use orrery_schema::{PropertyMap, Value};
use sha2::Sha256;

use orrery_stack::{Catalog, Stack, TargetDecl};

/// HMAC-SHA256 under a key kept in the state store.
#[derive(Clone)]
pub struct SecretHasher {
    key: Vec<u8>,
}

impl std::fmt::Debug for SecretHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHasher(..)")
    }
}

impl SecretHasher {
    /// A hasher under `key`.
    pub fn new(key: Vec<u8>) -> Self {
        SecretHasher { key }
    }

    /// The hash of `field`'s value, as hex.
    pub fn hash(&self, field: &str, value: &Value) -> String {
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(mac) => mac,
            // HMAC accepts keys of any length; this arm cannot be taken.
            Err(_) => return String::new(),
        };
        mac.update(field.as_bytes());
        mac.update(&[0]);
        mac.update(&orrery_schema::encode(value).unwrap_or_default());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Whether `stack` gives a value to a write-only or opaque field (or to a
/// field of a type the catalog does not know), or declares a secret
/// parameter: then its document holds secrets and must not be stored,
/// since secrets are never stored in clear.
pub fn declares_secrets(stack: &Stack, catalog: &Catalog) -> bool {
    stack.parameters.values().any(|p| p.secret)
        || stack.resources.iter().any(|r| !r.secret.is_empty())
        || stack.resources.iter().any(|r| {
            let schema = stack
                .targets
                .iter()
                .find(|t| t.name == r.target)
                .and_then(|t| catalog.schema(&t.plugin, &r.resource_type));
            match schema {
                Some(schema) => r
                    .properties
                    .keys()
                    .any(|k| schema.field(k).is_none_or(|f| f.hints.is_secret())),
                None => !r.properties.is_empty(),
            }
        })
        || stack.targets.iter().any(|t| {
            config_has_secrets(&t.config)
                || t.config
                    .iter()
                    .any(|(k, v)| *v != Value::Null && declared_secret(catalog, &t.plugin, k))
        })
}

/// The secrets of a document as a plan records them ([`super::Plan::secrets`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Secrets {
    /// The names of its `type: secret` parameters.
    pub parameters: Vec<String>,
    /// A keyed hash (hex) of those parameters' values: an apply of a saved
    /// plan, given them again, tells by it that they are the ones planned
    /// with. Empty without secret parameters.
    pub digest: String,
    /// Each place where the document itself (its text, a file it reads, a
    /// parameter that is not secret) gives a secret, e.g. "resource `db`:
    /// field `password`": a saved plan, which keeps the document, would keep
    /// those in clear.
    pub in_text: Vec<String>,
}

/// [`Secrets`] of `stack`, its parameters' values hashed under `hasher`.
///
/// A resource's write-only or opaque field (or any field of a type the
/// catalog does not know) is in the text unless a secret parameter gave
/// it. Target configuration carries no such mark, so a secret-looking
/// value there counts as given by a secret parameter only when it contains
/// one's value (`${token}`, `Bearer ${token}`, a URL's password); anything
/// else is taken as written in the document.
pub fn secrets_of(stack: &Stack, catalog: &Catalog, hasher: &SecretHasher) -> Secrets {
    let secret_params: Vec<(&String, &Value)> = stack
        .parameters
        .iter()
        .filter(|(_, known)| known.secret)
        .map(|(name, known)| (name, &known.value))
        .collect();
    let digest = if secret_params.is_empty() {
        String::new()
    } else {
        use sha2::Digest;
        let mut hash = Sha256::new();
        for (name, value) in &secret_params {
            hash.update(name.as_bytes());
            hash.update([0]);
            hash.update(hasher.hash(&format!("parameter {name}"), value).as_bytes());
            hash.update([0]);
        }
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    };
    let texts: Vec<&str> = secret_params
        .iter()
        .filter_map(|(_, v)| match v {
            Value::String(s) if !s.is_empty() => Some(s.as_str()),
            _ => None,
        })
        .collect();
    let from_parameter =
        |v: &Value| matches!(v, Value::String(s) if texts.iter().any(|t| s.contains(t)));
    let mut in_text = Vec::new();
    for r in &stack.resources {
        let schema = stack
            .targets
            .iter()
            .find(|t| t.name == r.target)
            .and_then(|t| catalog.schema(&t.plugin, &r.resource_type));
        for key in r.properties.keys() {
            let secret = schema.is_none_or(|s| s.field(key).is_none_or(|f| f.hints.is_secret()));
            if secret && !r.secret.contains(key) {
                in_text.push(format!("resource `{}`: field `{key}`", r.label));
            }
        }
    }
    for t in &stack.targets {
        for (key, value) in &t.config {
            let keyed = *value != Value::Null
                && (secret_looking_key(key) || declared_secret(catalog, &t.plugin, key));
            if literal_secret(value, keyed, &from_parameter) {
                in_text.push(format!("target `{}`: config `{key}`", t.name));
            }
        }
    }
    Secrets {
        parameters: secret_params.iter().map(|(n, _)| (*n).clone()).collect(),
        digest,
        in_text,
    }
}

/// Whether `value` (under a secret-looking key when `keyed`) holds a
/// secret that `from_parameter` does not account for, at any depth.
fn literal_secret(value: &Value, keyed: bool, from_parameter: &dyn Fn(&Value) -> bool) -> bool {
    if keyed {
        return !from_parameter(value);
    }
    match value {
        Value::String(s) => {
            (redact_url(s).is_some() || redact_dsn(s).is_some()) && !from_parameter(value)
        }
        Value::List(items) => items
            .iter()
            .any(|i| literal_secret(i, false, from_parameter)),
        Value::Map(m) => m.iter().any(|(k, v)| {
            literal_secret(
                v,
                secret_looking_key(k) && *v != Value::Null,
                from_parameter,
            )
        }),
        _ => false,
    }
}

/// Whether `plugin` declares its target-configuration field `key` secret
/// ([`orrery_schema::Announcement::target_config`]).
pub fn declared_secret(catalog: &Catalog, plugin: &str, key: &str) -> bool {
    catalog
        .plugin(plugin)
        .and_then(|a| a.target_field(key))
        .is_some_and(|f| f.hints.is_secret())
}

/// What a secret-looking value is shown as.
pub const REDACTED: &str = "<redacted>";

/// What the password of a URL is shown as.
const URL_PASSWORD: &str = "***";

/// Whether a configuration key's name says its value may be a secret
/// (the stack language's rule, which also keeps secret parameters out of
/// other target config keys).
pub use orrery_stack::secret_looking_key;

/// `text` with the password of its URL userinfo replaced by `***`
/// (`postgres://u:***@h/db`); `None` when it is not a URL with a password
/// (or its password is `***` already).
pub fn redact_url(text: &str) -> Option<String> {
    let scheme_end = text.find("://")? + 3;
    let scheme = &text[..scheme_end - 3];
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let rest = &text[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let at = authority.rfind('@')?;
    let userinfo = &authority[..at];
    let colon = userinfo.find(':')?;
    if &userinfo[colon + 1..] == URL_PASSWORD {
        return None; // hidden already
    }
    Some(format!(
        "{}{}:{URL_PASSWORD}{}",
        &text[..scheme_end],
        &userinfo[..colon],
        &text[scheme_end + at..]
    ))
}

/// Keywords of a libpq keyword/value connection string whose values are
/// secrets.
const DSN_SECRETS: [&str; 2] = ["password", "sslpassword"];

/// `text`, a libpq keyword/value connection string
/// (`host=h password='p w' dbname=d`), with its passwords replaced by
/// `***`; `None` when it is not one or holds none (or `***` already).
/// Values are read as libpq reads them: single-quoted with `\` escapes,
/// or up to the next white space; an unterminated quote runs to the end.
pub fn redact_dsn(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut found = false;
    loop {
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        if chars.peek().is_none() {
            break;
        }
        let mut keyword = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            keyword.push(c);
        }
        out.push_str(&keyword);
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        // Not `keyword=`: not a connection string.
        out.push(chars.next_if_eq(&'=')?);
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        let mut value = String::new();
        let quoted = chars.next_if_eq(&'\'').is_some();
        if quoted {
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        value.push(c);
                        value.extend(chars.next());
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
                if c == '\\' {
                    value.extend(chars.next());
                }
            }
        }
        let secret = DSN_SECRETS.contains(&keyword.as_str()) && value != URL_PASSWORD;
        found |= secret;
        let shown = if secret { URL_PASSWORD } else { value.as_str() };
        if quoted {
            out.push('\'');
            out.push_str(shown);
            out.push('\'');
        } else {
            out.push_str(shown);
        }
    }
    found.then_some(out)
}

/// Whether `config` holds a secret-looking value at any depth: under a
/// secret-looking key, a URL with a password, or a libpq connection
/// string with one.
pub fn config_has_secrets(config: &PropertyMap) -> bool {
    fn value_has(v: &Value) -> bool {
        match v {
            Value::String(s) => redact_url(s).is_some() || redact_dsn(s).is_some(),
            Value::List(items) => items.iter().any(value_has),
            Value::Map(m) => config_has_secrets(m),
            _ => false,
        }
    }
    config
        .iter()
        .any(|(k, v)| (secret_looking_key(k) && *v != Value::Null) || value_has(v))
}

/// What to do with a secret-looking key's value.
#[derive(Clone, Copy)]
enum Keyed {
    /// Replace it with [`REDACTED`] (for display).
    Redact,
    /// Leave the key out (for storage).
    Drop,
}

fn scrub_map(config: &PropertyMap, keyed: Keyed) -> PropertyMap {
    config
        .iter()
        .filter_map(|(k, v)| match (secret_looking_key(k), keyed) {
            (true, Keyed::Drop) => None,
            (true, Keyed::Redact) => Some((k.clone(), Value::String(REDACTED.into()))),
            (false, _) => Some((k.clone(), scrub_value(v, keyed))),
        })
        .collect()
}

fn scrub_value(v: &Value, keyed: Keyed) -> Value {
    match v {
        Value::String(s) => redact_url(s)
            .or_else(|| redact_dsn(s))
            .map_or_else(|| v.clone(), Value::String),
        Value::List(items) => Value::List(items.iter().map(|i| scrub_value(i, keyed)).collect()),
        Value::Map(m) => Value::Map(scrub_map(m, keyed)),
        _ => v.clone(),
    }
}

/// `config` for display: values under secret-looking keys (at any depth,
/// in maps and lists) replaced by [`REDACTED`], URL and connection-string
/// passwords by `***`.
pub fn redact_config(config: &PropertyMap) -> PropertyMap {
    scrub_map(config, Keyed::Redact)
}

/// `config` as it may be stored: secret-looking keys left out (at any
/// depth), URL and connection-string passwords replaced by `***`. A plugin that needs a
/// credential from its target configuration gets it only from a document,
/// never from the recorded targets.
pub fn storable_config(config: &PropertyMap) -> PropertyMap {
    scrub_map(config, Keyed::Drop)
}

/// `targets` as they may be stored: fields their plugins declare secret
/// left out, then [`storable_config`].
pub fn storable_targets(targets: &[TargetDecl], catalog: &Catalog) -> Vec<TargetDecl> {
    targets
        .iter()
        .map(|t| {
            let mut config = t.config.clone();
            config.retain(|k, _| !declared_secret(catalog, &t.plugin, k));
            TargetDecl {
                config: storable_config(&config),
                ..t.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_plugin_sdk::{field, resource};
    use orrery_schema::Announcement;

    fn stack(fields: &str) -> Stack {
        let doc = format!(
            "stack: s\ntargets:\n  - name: t\n    plugin: p\nresources:\n  - label: a\n    type: T\n    target: t\n    properties: {{ {fields} }}\n"
        );
        orrery_stack::parse("s.yaml", &doc, "/").unwrap()
    }

    #[test]
    fn a_document_declaring_a_write_only_or_opaque_value_holds_secrets() {
        let mut catalog = Catalog::new();
        catalog.insert(Announcement {
            name: "p".into(),
            resources: vec![resource("T")
                .field(field::string("path").required())
                .field(field::string("password").write_only())
                .field(field::string("token").opaque())
                .build()],
            ..Default::default()
        });
        assert!(!declares_secrets(&stack("path: x"), &catalog));
        assert!(declares_secrets(
            &stack("path: x, password: hunter2"),
            &catalog
        ));
        assert!(declares_secrets(&stack("path: x, token: t"), &catalog));
        assert!(
            declares_secrets(&stack("path: x"), &Catalog::new()),
            "an unknown type may have secrets"
        );
    }

    fn config(yaml: &str) -> PropertyMap {
        orrery_stack::yaml::read(yaml, &Default::default()).unwrap()
    }

    #[test]
    fn a_document_whose_target_config_looks_secret_holds_secrets() {
        let mut catalog = Catalog::new();
        catalog.insert(Announcement {
            name: "p".into(),
            resources: vec![resource("T").field(field::string("path")).build()],
            ..Default::default()
        });
        let with_target = |cfg: &str| {
            let doc = format!(
                "stack: s\ntargets:\n  - name: t\n    plugin: p\n    config: {cfg}\nresources:\n  - label: a\n    type: T\n    target: t\n    properties: {{ path: x }}\n"
            );
            orrery_stack::parse("s.yaml", &doc, "/").unwrap()
        };
        assert!(!declares_secrets(&with_target("{ root: /srv }"), &catalog));
        assert!(declares_secrets(
            &with_target("{ db: { password: pw } }"),
            &catalog
        ));
        assert!(declares_secrets(
            &with_target("{ dsn: 'postgres://u:pw@h/db' }"),
            &catalog
        ));
    }

    #[test]
    fn secrets_of_names_secrets_the_text_gives_and_hashes_the_parameters() {
        let mut catalog = Catalog::new();
        catalog.insert(Announcement {
            name: "p".into(),
            resources: vec![resource("T")
                .field(field::string("path"))
                .field(field::string("password").write_only())
                .build()],
            ..Default::default()
        });
        let of = |default: &str, cfg: &str, props: &str| {
            let doc = format!(
                "stack: s\nparameters:\n  pw: {{ type: secret, default: {default} }}\ntargets:\n  - name: t\n    plugin: p\n    config: {cfg}\nresources:\n  - label: a\n    type: T\n    target: t\n    properties: {props}\n"
            );
            let stack = orrery_stack::parse("s.yaml", &doc, "/").unwrap();
            secrets_of(&stack, &catalog, &SecretHasher::new(b"k".to_vec()))
        };
        let given = of(
            "param-secret-1",
            "{ token: '${param.pw}', api_key: 'Bearer ${param.pw}' }",
            "{ path: x, password: '${param.pw}' }",
        );
        assert_eq!(given.parameters, ["pw"]);
        assert_eq!(given.in_text, Vec::<String>::new());
        assert_eq!(given.digest.len(), 64);
        assert!(!given.digest.contains("param-secret-1"));
        let other = of(
            "param-secret-2",
            "{ token: '${param.pw}' }",
            "{ path: x, password: '${param.pw}' }",
        );
        assert_ne!(other.digest, given.digest, "another value, another hash");
        let written = of(
            "param-secret-1",
            "{ token: written-out, url: 'postgres://u:pw@h/db', root: /srv }",
            "{ path: x, password: hunter2 }",
        );
        assert_eq!(
            written.in_text,
            [
                "resource `a`: field `password`",
                "target `t`: config `token`",
                "target `t`: config `url`"
            ]
        );
    }

    #[test]
    fn connection_strings_lose_their_passwords_and_only_them() {
        assert_eq!(
            redact_dsn("host=db port=5432 password=s3cret dbname=app").as_deref(),
            Some("host=db port=5432 password=*** dbname=app")
        );
        assert_eq!(
            redact_dsn("user = u password = 'a b\\' c' sslpassword=k").as_deref(),
            Some("user = u password = '***' sslpassword=***")
        );
        assert_eq!(
            redact_dsn("password=x\\ y host=h").as_deref(),
            Some("password=*** host=h")
        );
        assert_eq!(
            redact_dsn("password='unterminated").as_deref(),
            Some("password='***'")
        );
        assert_eq!(redact_dsn("host=db dbname=app"), None, "no password");
        assert_eq!(redact_dsn("password=***"), None, "hidden already");
        assert_eq!(redact_dsn("not a connection string"), None);
        assert_eq!(
            redact_dsn("ünïcode=é password=é€"),
            Some("ünïcode=é password=***".into())
        );
        assert_eq!(redact_dsn(""), None);
        assert_eq!(redact_dsn("=\\"), None);
        let config: PropertyMap = [(
            "database".to_owned(),
            Value::Map(
                [("dsn".to_owned(), Value::from("host=h password=s3cret"))]
                    .into_iter()
                    .collect(),
            ),
        )]
        .into_iter()
        .collect();
        assert!(config_has_secrets(&config));
        assert!(!format!("{:?}", storable_config(&config)).contains("s3cret"));
        assert!(!format!("{:?}", redact_config(&config)).contains("s3cret"));
    }

    #[test]
    fn urls_lose_their_password_and_only_it() {
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db?x=1").as_deref(),
            Some("postgres://u:***@h:5432/db?x=1")
        );
        assert_eq!(
            redact_url("https://u:p@ss:w@h/a@b").as_deref(),
            Some("https://u:***@h/a@b")
        );
        assert_eq!(redact_url("postgres://u@h/db"), None, "no password");
        assert_eq!(redact_url("https://h/a:b@c"), None, "@ in the path");
        assert_eq!(redact_url("not a url: a:b@c"), None);
    }

    #[test]
    fn configs_are_redacted_at_any_depth_and_stored_without_secret_keys() {
        let c = config(
            "root: /srv\nnested: { password: p1, host: h }\naws: { secret_access_key: s1, region: r }\n\
             passphrase: p2\ndsn: 'postgres://u:p3@h/db'\nlist: [ { token: t1 }, 'mysql://a:p4@h' ]\n",
        );
        let shown = format!("{:?}", redact_config(&c));
        let stored = storable_config(&c);
        let kept = format!("{stored:?}");
        for secret in ["p1", "s1", "p2", "p3", "t1", "p4"] {
            assert!(!shown.contains(secret), "{secret} shown: {shown}");
            assert!(!kept.contains(secret), "{secret} stored: {kept}");
        }
        assert!(shown.contains("postgres://u:***@h/db"), "{shown}");
        assert!(shown.contains(REDACTED));
        assert_eq!(stored["root"], Value::from("/srv"));
        assert!(!stored.contains_key("passphrase"), "left out, not redacted");
        assert!(!config_has_secrets(&stored), "what is stored holds none");
        assert!(config_has_secrets(&c));
    }

    #[test]
    fn target_fields_a_plugin_declares_secret_are_secret_whatever_their_name() {
        let mut catalog = Catalog::new();
        catalog.insert(Announcement {
            name: "p".into(),
            resources: vec![resource("T").field(field::string("path")).build()],
            target_config: vec![
                field::string("host").build(),
                field::string("creds").opaque().build(),
                field::string("seed").write_only().build(),
            ],
            ..Default::default()
        });
        let doc = |cfg: &str| {
            orrery_stack::parse(
                "s.yaml",
                &format!(
                    "stack: s\ntargets:\n  - name: t\n    plugin: p\n    config: {cfg}\nresources: []\n"
                ),
                "/",
            )
            .unwrap()
        };
        assert!(!declares_secrets(&doc("{ host: h }"), &catalog));
        assert!(declares_secrets(&doc("{ host: h, creds: c1 }"), &catalog));
        let stack = doc("{ host: h, creds: c1, seed: s1 }");
        let stored = storable_targets(&stack.targets, &catalog);
        let kept = format!("{stored:?}");
        assert!(!kept.contains("c1") && !kept.contains("s1"), "{kept}");
        assert_eq!(stored[0].config["host"], Value::from("h"));
        // The same names under a plugin that declares nothing are kept: the
        // schema, not the name, says they are secret.
        let mut other = Catalog::new();
        other.insert(Announcement {
            name: "p".into(),
            ..Default::default()
        });
        let kept = storable_targets(&stack.targets, &other);
        assert_eq!(kept[0].config["creds"], Value::from("c1"));
    }
}
