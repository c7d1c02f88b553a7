//! Durations on the command line and in the configuration file: `90s`,
//! `10m`, `1h`, `500ms`, `1h30m`; a bare number is seconds.

use std::time::Duration;

/// Parses a duration (see the module docs).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration: expected e.g. 30s, 10m, 1h".into());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("`{text}`: expected a number before `{rest}`"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|e| format!("`{text}`: {e}"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            unit => {
                return Err(format!(
                    "`{text}`: unknown unit `{unit}` (use ms, s, m, h or d)"
                ))
            }
        };
        total = total.saturating_add(part);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_combinations() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("90").unwrap(), s(90));
        assert_eq!(parse_duration("90s").unwrap(), s(90));
        assert_eq!(parse_duration("10m").unwrap(), s(600));
        assert_eq!(parse_duration(" 1h30m ").unwrap(), s(5400));
        assert_eq!(parse_duration("2d").unwrap(), s(172_800));
        assert_eq!(
            parse_duration("1s500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            "",
            "m",
            "10x",
            "ten",
            "-5s",
            "1.5h",
            "10 m",
            "s10",
            "99999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration("18446744073709551615h").is_ok(), "saturates");
    }
}
