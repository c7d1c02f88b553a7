//! Quoting for the statements that cannot take parameters (DDL, GRANT).
//! Every name and literal from a request goes through one of these.

use orrery_plugin_sdk::PluginError;

/// `name` as a quoted identifier: `"` doubled inside, always quoted so
/// that case and reserved words survive. PostgreSQL refuses NUL in names.
pub fn ident(name: &str) -> Result<String, PluginError> {
    if name.is_empty() || name.contains('\0') {
        return Err(PluginError::invalid(format!(
            "`{}` is not a valid PostgreSQL name (empty or holding NUL)",
            name.escape_debug()
        )));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A grantee: `PUBLIC` is a keyword, not a role (quoted it would name a
/// role called `public`, which cannot exist).
pub fn grantee(role: &str) -> Result<String, PluginError> {
    if role.eq_ignore_ascii_case("public") {
        Ok("PUBLIC".into())
    } else {
        ident(role)
    }
}

/// `schema.name`, both quoted.
pub fn qualified(schema: &str, name: &str) -> Result<String, PluginError> {
    Ok(format!("{}.{}", ident(schema)?, ident(name)?))
}

/// A string literal, as PostgreSQL's `quote_literal`: `'` doubled, and an
/// `E''` string with `\` doubled when there is a backslash, so the result
/// means the same whatever `standard_conforming_strings` is.
pub fn literal(value: &str) -> Result<String, PluginError> {
    if value.contains('\0') {
        return Err(PluginError::invalid("a PostgreSQL string cannot hold NUL"));
    }
    let quoted = value.replace('\'', "''");
    Ok(if quoted.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    })
}

/// A statement built clause by clause, each clause only when its value is
/// set: the options of `CREATE ROLE`, `CREATE DATABASE`, `CREATE SCHEMA`...
#[derive(Default)]
pub struct Clauses(String);

impl Clauses {
    /// Starts with `head` (e.g. `CREATE DATABASE "app"`).
    pub fn new(head: String) -> Self {
        Clauses(head)
    }

    /// ` WORD "name"`.
    pub fn ident(self, word: &str, name: Option<&String>) -> Result<Self, PluginError> {
        self.with(word, name.map(|n| ident(n)).transpose()?)
    }

    /// ` WORD 'value'`.
    pub fn literal(self, word: &str, value: Option<&String>) -> Result<Self, PluginError> {
        self.with(word, value.map(|v| literal(v)).transpose()?)
    }

    /// ` WORD n`.
    pub fn number(self, word: &str, n: Option<i32>) -> Self {
        self.push(n.map(|n| format!(" {word} {n}")))
    }

    /// ` WORD` when on, ` NOWORD` when off.
    pub fn flag(self, word: &str, on: Option<bool>) -> Self {
        self.push(on.map(|on| format!(" {}{word}", if on { "" } else { "NO" })))
    }

    /// ` WORD "a", "b"` for a list that is not empty.
    pub fn idents(self, word: &str, names: Option<&Vec<String>>) -> Result<Self, PluginError> {
        let names = names.filter(|n| !n.is_empty());
        let quoted = names.map(|n| n.iter().map(|n| ident(n)).collect::<Result<Vec<_>, _>>());
        self.with(word, quoted.transpose()?.map(|q| q.join(", ")))
    }

    fn with(self, word: &str, sql: Option<String>) -> Result<Self, PluginError> {
        Ok(self.push(sql.map(|sql| format!(" {word} {sql}"))))
    }

    fn push(mut self, clause: Option<String>) -> Self {
        if let Some(clause) = clause {
            self.0.push_str(&clause);
        }
        self
    }

    /// The statement.
    pub fn sql(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_escapes_what_would_end_the_quote() {
        assert_eq!(ident("app").unwrap(), "\"app\"");
        assert_eq!(
            ident("a\"; DROP ROLE x; --").unwrap(),
            "\"a\"\"; DROP ROLE x; --\""
        );
        assert!(ident("").is_err() && ident("a\0b").is_err());
        assert_eq!(literal("it's").unwrap(), "'it''s'");
        assert_eq!(literal("a\\'b").unwrap(), "E'a\\\\''b'");
        assert_eq!(grantee("PUBLIC").unwrap(), "PUBLIC");
        assert_eq!(qualified("s", "t").unwrap(), "\"s\".\"t\"");
        let none = None::<&String>;
        let sql = Clauses::new("CREATE ROLE r WITH".into())
            .flag("LOGIN", Some(false))
            .number("CONNECTION LIMIT", Some(3))
            .literal("PASSWORD", Some(&"it's".into()))
            .and_then(|c| c.ident("OWNER", none))
            .and_then(|c| c.idents("IN ROLE", Some(&vec!["a".into(), "b".into()])))
            .unwrap()
            .sql();
        assert_eq!(
            sql,
            "CREATE ROLE r WITH NOLOGIN CONNECTION LIMIT 3 PASSWORD 'it''s' IN ROLE \"a\", \"b\""
        );
    }
}
