//! The page shell every dashboard page shares: head, navigation, the
//! signed-in principal and the logout form; and how times, durations and
//! JSON values are written.

use axum::response::Html;
use maud::{html, Markup, DOCTYPE};
use serde_json::Value;

use super::session::Session;

/// The sections of the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Commands,
    Stacks,
    Fleet,
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Orrery" }
            // Else the browser asks the API for `/favicon.ico` (a 401).
            link rel="icon" href="/ui/assets/favicon.svg" type="image/svg+xml";
            link rel="stylesheet" href="/ui/assets/app.css";
            script src="/ui/assets/app.js" defer {}
        }
    }
}

/// A page for a signed-in principal.
pub fn page(title: &str, nav: Nav, session: &Session, body: Markup) -> Html<String> {
    let link = |to: Nav, href: &str, text: &str| {
        html! {
            @if to == nav {
                a href=(href) aria-current="page" { (text) }
            } @else {
                a href=(href) { (text) }
            }
        }
    };
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body {
                    a.skip href="#main" { "Skip to content" }
                    header.top {
                        a.brand href="/ui/commands" { "Orrery" }
                        nav aria-label="Sections" {
                            (link(Nav::Commands, "/ui/commands", "Commands"))
                            (link(Nav::Stacks, "/ui/stacks", "Stacks"))
                            (link(Nav::Fleet, "/ui/fleet", "Fleet"))
                        }
                        form.logout method="post" action="/ui/logout" {
                            span.who { (session.principal.name) }
                            input type="hidden" name="csrf" value=(session.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                    main id="main" { (body) }
                }
            }
        }
        .into_string(),
    )
}

/// A page without navigation (login, errors).
pub fn bare(title: &str, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body { main id="main" .narrow { (body) } }
            }
        }
        .into_string(),
    )
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Milliseconds as `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// A JSON value as text: strings bare, the rest as JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A command or operation status as a CSS class (known names only).
pub fn status_class(status: &str) -> &'static str {
    match status {
        "succeeded" | "completed" => "st-ok",
        "failed" | "error" => "st-failed",
        "dependency_failed" => "st-depfailed",
        "canceled" => "st-canceled",
        "running" | "in_progress" | "started" | "attempt" | "retrying" => "st-running",
        "waiting_for_rate_limit" => "st-waiting",
        _ => "st-pending",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_796_166_342_000), "2026-12-01 23:05:42");
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(12_340), "12.3s");
        assert_eq!(duration(245_000), "4m05s");
        assert_eq!(duration(7_380_000), "2h03m");
        assert_eq!(status_class("<x>"), "st-pending");
    }
}
