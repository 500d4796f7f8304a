//! Numbers and times as people read them on the page (`/api/status` keeps
//! the raw numbers), and HTML escaping.

use std::fmt::Write as _;
use std::time::Duration;

/// `text` safe inside HTML element content and quoted attribute values.
/// Every string that comes from the network (worker addresses, dataset
/// ids, job names, paths, error texts) goes through here.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newline have no place
            // on the page (and some are not allowed in HTML).
            c if c.is_control() && c != '\t' && c != '\n' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// At most `max_chars` characters of `text`, with an ellipsis if cut: a
/// megabyte-long job name or error text must not blow up the page.
pub fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// A count or rate with an SI suffix: `950`, `7.2`, `12.3k`, `4.56M`.
pub fn count(value: f64) -> String {
    if !value.is_finite() {
        return "–".into();
    }
    for (scale, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if value.abs() >= scale {
            return format!("{}{suffix}", three_digits(value / scale));
        }
    }
    if value.abs() >= 100.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Bytes in SI units: `512 B`, `45.6 kB`, `3.20 MB`.
pub fn bytes(value: f64) -> String {
    if !value.is_finite() {
        return "–".into();
    }
    for (scale, unit) in [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")] {
        if value.abs() >= scale {
            return format!("{} {unit}", three_digits(value / scale));
        }
    }
    format!("{value:.0} B")
}

/// `x` (1 to 999) with three significant digits.
fn three_digits(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A fraction as a percentage: `83%`, `2.5%`, `0%`.
pub fn percent(ratio: f64) -> String {
    if !ratio.is_finite() {
        return "–".into();
    }
    let p = ratio * 100.0;
    if p == 0.0 || p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A time per element from nanoseconds: `850 ns`, `12.5 µs`, `20.1 ms`, `1.50 s`.
pub fn nanos(ns: f64) -> String {
    if !ns.is_finite() {
        return "–".into();
    }
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// An age: `0.4 s`, `12 s`, `5 min`, `3 h`, `2 d`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 2.0 * 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 2.0 * 86400.0 {
        format!("{:.0} h", s / 3600.0)
    } else {
        format!("{:.0} d", s / 86400.0)
    }
}

/// `micros` since the Unix epoch as `2026-12-01 13:04:05 UTC`.
pub fn utc(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let mut out = String::new();
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    out
}

/// Year, month, day of `days` since 1970-01-01 (proleptic Gregorian), by
/// Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("a\u{0}b\u{1b}c\td"), "a\u{FFFD}b\u{FFFD}c\td");
        assert_eq!(escape("plain:5050"), "plain:5050");
    }

    #[test]
    fn truncates_on_characters() {
        assert_eq!(truncate("ééééé", 3), "ééé…");
        assert_eq!(truncate("abc", 3), "abc");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(7.25), "7.2");
        assert_eq!(count(950.0), "950");
        assert_eq!(count(12_345.0), "12.3k");
        assert_eq!(count(4_560_000.0), "4.56M");
        assert_eq!(count(f64::NAN), "–");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(3_200_000.0), "3.20 MB");
        assert_eq!(bytes(45_600.0), "45.6 kB");
        assert_eq!(percent(0.831), "83%");
        assert_eq!(percent(0.025), "2.5%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(nanos(850.0), "850 ns");
        assert_eq!(nanos(20_100_000.0), "20.1 ms");
        assert_eq!(age(Duration::from_millis(400)), "0.4 s");
        assert_eq!(age(Duration::from_secs(300)), "5 min");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_130_245_000_000), "2026-12-01 13:04:05 UTC");
    }
}
