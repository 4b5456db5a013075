//! RFC 3339 timestamps in UTC: second precision (`metav1.Time`) and microseconds
//! (`metav1.MicroTime`, audit events).

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_unix(secs)
}

/// A time as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (the format of `metav1.MicroTime`).
pub fn format_micros(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let base = format_unix(d.as_secs());
    format!("{}.{:06}Z", base.trim_end_matches('Z'), d.subsec_micros())
}

/// Formats seconds since the Unix epoch (civil-from-days algorithm, proleptic Gregorian calendar).
pub fn format_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::format_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::format_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::format_unix(1_700_000_000), "2023-11-14T22:13:20Z");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_000_005);
        assert_eq!(super::format_micros(t), "2023-11-14T22:13:20.000005Z");
    }
}
