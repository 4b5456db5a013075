//! Durations as the project reads them: the one parser of duration text.
//!
//! Rules:
//! - CRD fields (`spec.interval`, …) are Go durations ([`parse_go`]): a sequence of decimal numbers
//!   each with a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`), an optional leading `+`, or `0`;
//!   negative durations and a number without a unit are malformed.
//! - Command-line flags ([`parse_flag`]) take the same text, or a bare number of seconds.
//! - Durations are written as Go writes them ([`format_go`]): `0s`, `500ms`, `1.5s`, `5m0s`,
//!   `1h30m0s` (milliseconds kept, finer parts dropped).

use std::time::Duration;

/// Parses a Go duration (`300ms`, `1.5h`, `1h30m`, `0`); `None` when malformed.
pub fn parse_go(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Formats `d` as Go's `time.Duration.String` does (module rules), to whole milliseconds.
pub fn format_go(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let secs = match rest % 1000 {
        0 => format!("{}s", rest / 1000),
        frac => {
            let f = format!("{frac:03}");
            format!("{}.{}s", rest / 1000, f.trim_end_matches('0'))
        }
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}

/// Parses a command-line duration: a Go duration ([`parse_go`]) or a bare number of seconds.
pub fn parse_flag(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{t:?}: {e}"));
    }
    parse_go(t).ok_or_else(|| format!("{t:?} is not a duration (e.g. 500ms, 5s, 2m, 1h30m)"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn durations_are_written_as_go_writes_them_and_read_back() {
        let f = |ms| format_go(Duration::from_millis(ms));
        assert_eq!(f(0), "0s");
        assert_eq!(f(500), "500ms");
        assert_eq!(f(1500), "1.5s");
        assert_eq!(f(30_000), "30s");
        assert_eq!(f(300_000), "5m0s");
        assert_eq!(f(5_400_250), "1h30m0.25s");
        for ms in [1, 999, 1000, 61_001, 3_600_000, 86_400_123] {
            assert_eq!(parse_go(&f(ms)), Some(Duration::from_millis(ms)));
        }
    }

    #[test]
    fn go_durations_parse() {
        let d = |s| parse_go(s);
        assert_eq!(d("5m"), Some(Duration::from_secs(300)));
        assert_eq!(d("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(d("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(d("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(d("0"), Some(Duration::ZERO));
        assert_eq!(d("5"), None, "a unit is required");
        assert_eq!(d("5x"), None);
        assert_eq!(d("-1s"), None);
        assert_eq!(d(""), None);
    }

    #[test]
    fn flags_take_go_durations_or_bare_seconds() {
        assert_eq!(parse_flag("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_flag("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_flag("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_flag("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_flag("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_flag("0.5").unwrap(), Duration::from_millis(500));
        assert!(parse_flag("5x").is_err());
        assert!(parse_flag("soon").is_err());
        assert!(parse_flag("-1").is_err());
    }
}
