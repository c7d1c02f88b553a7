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
    }
}
