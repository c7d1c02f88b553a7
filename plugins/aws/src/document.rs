//! Policy documents (trust policies, managed and bucket policies). They
//! are JSON objects in the stack document, compared as structures: AWS
//! keeps its own spacing and IAM answers them URL-encoded.

use orrery_plugin_sdk::PluginError;
use serde_json::Value;

/// A desired document as the JSON text AWS takes.
pub fn to_text(what: &str, field: &str, document: &Value) -> Result<String, PluginError> {
    if !document.is_object() {
        return Err(PluginError::invalid(format!(
            "{what}: `{field}` must be a policy document (a map with `Version` and `Statement`)"
        )));
    }
    Ok(document.to_string())
}

/// A document as AWS answered it: JSON text, URL-encoded by IAM.
pub fn parse(what: &str, text: &str) -> Result<Value, PluginError> {
    let text = if text.trim_start().starts_with('{') {
        text.to_owned()
    } else {
        url_decode(text)
    };
    serde_json::from_str(&text).map_err(|e| {
        PluginError::new(
            orrery_plugin_sdk::schema::ErrorCode::GeneralServiceException,
            format!("{what}: AWS answered a policy document that is not JSON: {e}"),
        )
    })
}

/// `%XX` and `+` decoded (RFC 3986 form encoding, as IAM's documents).
fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iam_documents_are_url_decoded_and_plain_ones_kept() {
        let encoded = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%5D%7D";
        let want = serde_json::json!({"Version": "2012-10-17", "Statement": []});
        assert_eq!(parse("t", encoded).unwrap(), want);
        assert_eq!(
            parse("t", r#"{"Version":"2012-10-17","Statement":[]}"#).unwrap(),
            want
        );
        assert!(parse("t", "%7").is_err(), "truncated escapes do not panic");
        assert!(parse("t", "%").is_err());
    }
}
