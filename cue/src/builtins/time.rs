//! Package `time` (upstream `pkg/time`): times are strings in RFC 3339 form, durations are ints
//! of nanoseconds. Go's layout language (`2006-01-02T15:04:05Z07:00`) is implemented here for
//! `Parse`, `Format`, `FormatString` and the `Time` validator.
//!
//! Rules:
//! - `Parse(layout, value)` reads `value` like Go's `time.ParseInLocation(layout, value, nil)`
//!   and returns the instant in UTC as `RFC3339Nano` (`2021-02-19T00:00:00Z`). Missing elements
//!   default to year 0, January, day 1, midnight. A zone abbreviation (`MST`, `CEST`) has offset
//!   zero except `GMT+h`; numeric offsets (`-0700`, `Z07:00`, ...) are applied. Day-of-week names
//!   are checked but ignored. A fractional second may follow the seconds even when the layout has
//!   none.
//! - `Time` validates an `RFC3339Nano` time and `Format(value, layout)` a value in any layout; a
//!   failure is the error `invalid time "..."`.
//! - `FormatString(layout, value)` prints an `RFC3339Nano` time in `layout`, in the time's own
//!   offset (a zone abbreviation prints as `UTC` for offset zero, else as `-0700`).
//! - `Unix(sec, nsec)` is the UTC `RFC3339Nano` text; `Split` gives the parts of a time in its own
//!   offset.
//! - Durations: `ParseDuration`/`Duration` accept Go's syntax (`1h30m`, `-1.5h`, `300ms`, `2us`,
//!   `2µs`); `FormatDuration` prints like Go's `Duration.String` (`3h2m0s`, `600ms`, `0s`).

use super::args::{builtin, fail};
use super::{Builtin, BuiltinError, Package, Val};

const P: &str = "time";

/// The package table.
pub(crate) const PACKAGE: Package = Package {
    path: P,
    funcs: FUNCS,
    consts,
};

const LAYOUTS: &[(&str, &str)] = &[
    ("ANSIC", "Mon Jan _2 15:04:05 2006"),
    ("UnixDate", "Mon Jan _2 15:04:05 MST 2006"),
    ("RubyDate", "Mon Jan 02 15:04:05 -0700 2006"),
    ("RFC822", "02 Jan 06 15:04 MST"),
    ("RFC822Z", "02 Jan 06 15:04 -0700"),
    ("RFC850", "Monday, 02-Jan-06 15:04:05 MST"),
    ("RFC1123", "Mon, 02 Jan 2006 15:04:05 MST"),
    ("RFC1123Z", "Mon, 02 Jan 2006 15:04:05 -0700"),
    ("RFC3339", "2006-01-02T15:04:05Z07:00"),
    ("RFC3339Nano", "2006-01-02T15:04:05.999999999Z07:00"),
    ("RFC3339Date", "2006-01-02"),
    ("Kitchen", "3:04PM"),
    ("Kitchen24", "15:04"),
];

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

fn consts(name: &str) -> Option<Val> {
    if let Some((_, l)) = LAYOUTS.iter().find(|(n, _)| *n == name) {
        return Some(Val::String(l.to_string()));
    }
    let int = |i: i64| Some(Val::Int(i.into()));
    match name {
        "Nanosecond" => int(1),
        "Microsecond" => int(1_000),
        "Millisecond" => int(1_000_000),
        "Second" => int(1_000_000_000),
        "Minute" => int(60_000_000_000),
        "Hour" => int(3_600_000_000_000),
        _ => {
            if let Some(i) = MONTHS.iter().position(|m| *m == name) {
                return int(i as i64 + 1);
            }
            DAYS.iter()
                .position(|d| *d == name)
                .and_then(|i| int(i as i64))
        }
    }
}

static FUNCS: &[Builtin] = &[
    Builtin::v(P, "Duration", 1, duration),
    Builtin::f(P, "FormatDuration", 1, format_duration),
    Builtin::f(P, "ParseDuration", 1, parse_duration),
    Builtin::v(P, "Time", 1, time),
    Builtin::v(P, "Format", 2, format),
    Builtin::f(P, "FormatString", 2, format_string),
    Builtin::f(P, "Parse", 2, parse),
    Builtin::f(P, "Unix", 2, unix),
    Builtin::f(P, "Split", 1, split),
];

/// A point in time as Go's parser sees it: civil fields plus an offset east of UTC.
#[derive(Clone, Debug, PartialEq)]
struct DateTime {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    min: i64,
    sec: i64,
    nsec: i64,
    offset: i64,
    /// A zone abbreviation read from the input (printed by `MST`).
    zone: Option<String>,
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(m: i64, y: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl DateTime {
    fn unix(&self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * 86_400
            + self.hour * 3600
            + self.min * 60
            + self.sec
            - self.offset
    }

    fn from_unix(secs: i64, nsec: i64, offset: i64) -> DateTime {
        let local = secs + offset;
        let days = local.div_euclid(86_400);
        let rem = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        DateTime {
            year,
            month,
            day,
            hour: rem / 3600,
            min: rem % 3600 / 60,
            sec: rem % 60,
            nsec,
            offset,
            zone: None,
        }
    }

    fn utc(&self) -> DateTime {
        DateTime::from_unix(self.unix(), self.nsec, 0)
    }

    fn weekday(&self) -> usize {
        (days_from_civil(self.year, self.month, self.day) + 4).rem_euclid(7) as usize
    }

    fn yday(&self) -> i64 {
        days_from_civil(self.year, self.month, self.day) - days_from_civil(self.year, 1, 1) + 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Pm,
    TZ,
    /// `Z` variants print `Z` for UTC; the number is the Go layout text length class.
    Iso(&'static str),
    Num(&'static str),
    Frac0(usize),
    Frac9(usize),
}

/// Go's `nextStdChunk`: the literal prefix, the element and the rest.
fn next_chunk(layout: &str) -> (&str, Option<(Std, &str)>, &str) {
    let b = layout.as_bytes();
    let starts = |i: usize, s: &str| layout[i..].starts_with(s);
    let mut i = 0;
    while i < b.len() {
        let found: Option<(Std, usize)> = match b[i] {
            b'J' if starts(i, "January") => Some((Std::LongMonth, 7)),
            b'J' if starts(i, "Jan") => Some((Std::Month, 3)),
            b'M' if starts(i, "Monday") => Some((Std::LongWeekDay, 6)),
            b'M' if starts(i, "Mon") => Some((Std::WeekDay, 3)),
            b'M' if starts(i, "MST") => Some((Std::TZ, 3)),
            b'0' if starts(i, "002") => Some((Std::ZeroYearDay, 3)),
            b'0' if b.get(i + 1).is_some_and(|c| (b'1'..=b'6').contains(c)) => Some((
                [
                    Std::ZeroMonth,
                    Std::ZeroDay,
                    Std::ZeroHour12,
                    Std::ZeroMinute,
                    Std::ZeroSecond,
                    Std::Year,
                ][(b[i + 1] - b'1') as usize],
                2,
            )),
            b'1' if starts(i, "15") => Some((Std::Hour, 2)),
            b'1' => Some((Std::NumMonth, 1)),
            b'2' if starts(i, "2006") => Some((Std::LongYear, 4)),
            b'2' => Some((Std::Day, 1)),
            b'_' if starts(i, "_2006") => {
                // A literal underscore followed by the long year.
                return (
                    &layout[..i + 1],
                    Some((Std::LongYear, "2006")),
                    &layout[i + 5..],
                );
            }
            b'_' if starts(i, "__2") => Some((Std::UnderYearDay, 3)),
            b'_' if starts(i, "_2") => Some((Std::UnderDay, 2)),
            b'3' => Some((Std::Hour12, 1)),
            b'4' => Some((Std::Minute, 1)),
            b'5' => Some((Std::Second, 1)),
            b'P' if starts(i, "PM") => Some((Std::PM, 2)),
            b'p' if starts(i, "pm") => Some((Std::Pm, 2)),
            b'-' | b'Z' => {
                let forms = ["070000", "07:00:00", "0700", "07:00", "07"];
                forms.iter().find(|f| starts(i + 1, f)).map(|f| {
                    let name: &'static str = f;
                    (
                        if b[i] == b'Z' {
                            Std::Iso(name)
                        } else {
                            Std::Num(name)
                        },
                        f.len() + 1,
                    )
                })
            }
            b'.' | b',' if b.get(i + 1).is_some_and(|&c| c == b'0' || c == b'9') => {
                let ch = b[i + 1];
                let mut j = i + 1;
                while j < b.len() && b[j] == ch {
                    j += 1;
                }
                if b.get(j).is_some_and(u8::is_ascii_digit) {
                    None
                } else {
                    let n = j - i - 1;
                    Some((
                        if ch == b'0' {
                            Std::Frac0(n)
                        } else {
                            Std::Frac9(n)
                        },
                        j - i,
                    ))
                }
            }
            _ => None,
        };
        if let Some((std, len)) = found {
            return (
                &layout[..i],
                Some((std, &layout[i..i + len])),
                &layout[i + len..],
            );
        }
        i += layout[i..].chars().next().map_or(1, char::len_utf8);
    }
    (layout, None, "")
}

fn pad(out: &mut String, v: i64, width: usize, fill: char) {
    let s = v.abs().to_string();
    if v < 0 {
        out.push('-');
    }
    for _ in s.len()..width {
        out.push(fill);
    }
    out.push_str(&s);
}

/// Go's `Time.Format`.
fn format_time(t: &DateTime, layout: &str) -> String {
    let mut out = String::new();
    let mut rest = layout;
    loop {
        let (prefix, std, tail) = next_chunk(rest);
        out.push_str(prefix);
        let Some((std, _)) = std else { break };
        rest = tail;
        let h12 = if t.hour % 12 == 0 { 12 } else { t.hour % 12 };
        match std {
            Std::Year => pad(&mut out, t.year.rem_euclid(100), 2, '0'),
            Std::LongYear => pad(&mut out, t.year, 4, '0'),
            Std::Month => out.push_str(&MONTHS[(t.month - 1) as usize][..3]),
            Std::LongMonth => out.push_str(MONTHS[(t.month - 1) as usize]),
            Std::NumMonth => pad(&mut out, t.month, 1, '0'),
            Std::ZeroMonth => pad(&mut out, t.month, 2, '0'),
            Std::WeekDay => out.push_str(&DAYS[t.weekday()][..3]),
            Std::LongWeekDay => out.push_str(DAYS[t.weekday()]),
            Std::Day => pad(&mut out, t.day, 1, '0'),
            Std::UnderDay => pad(&mut out, t.day, 2, ' '),
            Std::ZeroDay => pad(&mut out, t.day, 2, '0'),
            Std::UnderYearDay => pad(&mut out, t.yday(), 3, ' '),
            Std::ZeroYearDay => pad(&mut out, t.yday(), 3, '0'),
            Std::Hour => pad(&mut out, t.hour, 2, '0'),
            Std::Hour12 => pad(&mut out, h12, 1, '0'),
            Std::ZeroHour12 => pad(&mut out, h12, 2, '0'),
            Std::Minute => pad(&mut out, t.min, 1, '0'),
            Std::ZeroMinute => pad(&mut out, t.min, 2, '0'),
            Std::Second => pad(&mut out, t.sec, 1, '0'),
            Std::ZeroSecond => pad(&mut out, t.sec, 2, '0'),
            Std::PM => out.push_str(if t.hour >= 12 { "PM" } else { "AM" }),
            Std::Pm => out.push_str(if t.hour >= 12 { "pm" } else { "am" }),
            Std::Iso(form) | Std::Num(form) => {
                if matches!(std, Std::Iso(_)) && t.offset == 0 {
                    out.push('Z');
                    continue;
                }
                let zone = t.offset.abs();
                out.push(if t.offset < 0 { '-' } else { '+' });
                pad(&mut out, zone / 3600, 2, '0');
                let colon = form.contains(':');
                if form.len() > 2 {
                    if colon {
                        out.push(':');
                    }
                    pad(&mut out, zone % 3600 / 60, 2, '0');
                }
                if form == "070000" || form == "07:00:00" {
                    if colon {
                        out.push(':');
                    }
                    pad(&mut out, zone % 60, 2, '0');
                }
            }
            Std::TZ => match (&t.zone, t.offset) {
                (Some(z), _) => out.push_str(z),
                (None, 0) => out.push_str("UTC"),
                (None, off) => {
                    out.push(if off < 0 { '-' } else { '+' });
                    pad(&mut out, off.abs() / 3600, 2, '0');
                    pad(&mut out, off.abs() % 3600 / 60, 2, '0');
                }
            },
            Std::Frac0(n) | Std::Frac9(n) => {
                let digits = format!("{:09}", t.nsec);
                let mut d = digits[..n.min(9)].to_string();
                if matches!(std, Std::Frac9(_)) {
                    while d.ends_with('0') {
                        d.pop();
                    }
                    if d.is_empty() {
                        continue;
                    }
                }
                out.push('.');
                out.push_str(&d);
            }
        }
    }
    out
}

fn go_quote(s: &str) -> String {
    super::strconv::go_quote(s, false)
}

struct Parser<'a> {
    layout: &'a str,
    value: &'a str,
}

impl Parser<'_> {
    fn bad(&self, value_elem: &str, layout_elem: &str) -> BuiltinError {
        BuiltinError::new(format!(
            "parsing time {} as {}: cannot parse {} as {}",
            go_quote(self.value),
            go_quote(self.layout),
            go_quote(value_elem),
            go_quote(layout_elem)
        ))
    }

    fn range(&self, what: &str) -> BuiltinError {
        BuiltinError::new(format!(
            "parsing time {}: {what} out of range",
            go_quote(self.value)
        ))
    }
}

/// Go's `skip`: matches a literal, treating runs of spaces in the layout flexibly.
fn skip<'v>(value: &'v str, prefix: &str) -> Option<&'v str> {
    let mut v = value;
    let mut p = prefix;
    while !p.is_empty() {
        if p.starts_with(' ') {
            if !v.is_empty() && !v.starts_with(' ') {
                return None;
            }
            p = p.trim_start_matches(' ');
            v = v.trim_start_matches(' ');
            continue;
        }
        let c = p.chars().next()?;
        if !v.starts_with(c) {
            return None;
        }
        p = &p[c.len_utf8()..];
        v = &v[c.len_utf8()..];
    }
    Some(v)
}

/// Up to `max` digits (at least one; exactly `max` when `fixed`).
fn getnum(v: &str, fixed: bool, max: usize) -> Option<(i64, &str)> {
    let n = v.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n == 0 || (fixed && n != max) {
        return None;
    }
    Some((v[..n].parse().ok()?, &v[n..]))
}

fn lookup<'v>(v: &'v str, names: &[&str], short: bool) -> Option<(usize, &'v str)> {
    for (i, name) in names.iter().enumerate() {
        let name = if short { &name[..3] } else { name };
        if v.get(..name.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(name))
        {
            return Some((i, &v[name.len()..]));
        }
    }
    None
}

fn tz_name_len(v: &str) -> Option<usize> {
    if v.len() < 3 {
        return None;
    }
    if v.starts_with("ChST") || v.starts_with("MeST") {
        return Some(4);
    }
    if let Some(rest) = v.strip_prefix("GMT") {
        let signed = rest
            .strip_prefix(['+', '-'])
            .map(|r| r.bytes().take_while(u8::is_ascii_digit).count());
        return Some(3 + signed.filter(|&n| n > 0).map_or(0, |n| n + 1));
    }
    let upper = v.bytes().take(6).take_while(u8::is_ascii_uppercase).count();
    let b = v.as_bytes();
    match upper {
        3 => Some(3),
        4 if b[3] == b'T' || v.starts_with("WITA") => Some(4),
        5 if b[4] == b'T' => Some(5),
        _ => None,
    }
}

/// Go's `time.ParseInLocation(layout, value, UTC)`.
fn parse_time(layout: &str, value: &str) -> Result<DateTime, BuiltinError> {
    let p = Parser { layout, value };
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let (mut pm_set, mut am_set) = (false, false);
    let mut offset: Option<i64> = None;
    let mut zone: Option<String> = None;
    let mut lay = layout;
    let mut v = value;
    loop {
        let (prefix, std, tail) = next_chunk(lay);
        let std_text = std.map_or("", |s| s.1);
        v = skip(v, prefix).ok_or_else(|| p.bad(v, prefix))?;
        let Some((std, _)) = std else {
            if !v.is_empty() {
                fail!(
                    "parsing time {}: extra text: {}",
                    go_quote(value),
                    go_quote(v)
                );
            }
            break;
        };
        lay = tail;
        let hold = v;
        let bad = || p.bad(hold, std_text);
        match std {
            Std::Year => {
                let (y, r) = getnum(v, true, 2).ok_or_else(bad)?;
                year = if y >= 69 { 1900 + y } else { 2000 + y };
                v = r;
            }
            Std::LongYear => {
                let (y, r) = getnum(v, true, 4).ok_or_else(bad)?;
                year = y;
                v = r;
            }
            Std::Month | Std::LongMonth => {
                let (m, r) = lookup(v, &MONTHS, std == Std::Month).ok_or_else(bad)?;
                month = m as i64 + 1;
                v = r;
            }
            Std::NumMonth | Std::ZeroMonth => {
                let (m, r) = getnum(v, std == Std::ZeroMonth, 2).ok_or_else(bad)?;
                if !(1..=12).contains(&m) {
                    return Err(p.range("month"));
                }
                month = m;
                v = r;
            }
            Std::WeekDay | Std::LongWeekDay => {
                v = lookup(v, &DAYS, std == Std::WeekDay).ok_or_else(bad)?.1;
            }
            Std::Day | Std::UnderDay | Std::ZeroDay => {
                if std == Std::UnderDay && v.starts_with(' ') {
                    v = &v[1..];
                }
                let (d, r) = getnum(v, std == Std::ZeroDay, 2).ok_or_else(bad)?;
                day = d;
                v = r;
            }
            Std::UnderYearDay | Std::ZeroYearDay => {
                let mut w = v;
                if std == Std::UnderYearDay {
                    w = w.trim_start_matches(' ');
                }
                let (d, r) = getnum(w, std == Std::ZeroYearDay, 3).ok_or_else(bad)?;
                yday = d;
                v = r;
            }
            Std::Hour => {
                let (h, r) = getnum(v, false, 2).ok_or_else(bad)?;
                if h > 23 {
                    return Err(p.range("hour"));
                }
                hour = h;
                v = r;
            }
            Std::Hour12 | Std::ZeroHour12 => {
                let (h, r) = getnum(v, std == Std::ZeroHour12, 2).ok_or_else(bad)?;
                if h > 12 {
                    return Err(p.range("hour"));
                }
                hour = h;
                v = r;
            }
            Std::Minute | Std::ZeroMinute => {
                let (m, r) = getnum(v, std == Std::ZeroMinute, 2).ok_or_else(bad)?;
                if m > 59 {
                    return Err(p.range("minute"));
                }
                min = m;
                v = r;
            }
            Std::Second | Std::ZeroSecond => {
                let (s, r) = getnum(v, std == Std::ZeroSecond, 2).ok_or_else(bad)?;
                if s > 59 {
                    return Err(p.range("second"));
                }
                sec = s;
                v = r;
                // A fractional second the layout does not mention.
                let next_is_frac =
                    matches!(next_chunk(lay).1, Some((Std::Frac0(_) | Std::Frac9(_), _)))
                        && next_chunk(lay).0.is_empty();
                if !next_is_frac
                    && v.len() >= 2
                    && (v.starts_with('.') || v.starts_with(','))
                    && v.as_bytes()[1].is_ascii_digit()
                {
                    let n = v[1..].bytes().take_while(u8::is_ascii_digit).count();
                    nsec = nanos(&v[1..1 + n]);
                    v = &v[1 + n..];
                }
            }
            Std::PM | Std::Pm => {
                let (am, pmw) = if std == Std::PM {
                    ("AM", "PM")
                } else {
                    ("am", "pm")
                };
                if v.starts_with(pmw) {
                    pm_set = true;
                } else if v.starts_with(am) {
                    am_set = true;
                } else {
                    return Err(bad());
                }
                v = &v[2..];
            }
            Std::Iso(form) | Std::Num(form) => {
                if matches!(std, Std::Iso(_)) && v.starts_with('Z') {
                    v = &v[1..];
                    offset = Some(0);
                    continue;
                }
                let sign = match v.as_bytes().first() {
                    Some(b'+') => 1,
                    Some(b'-') => -1,
                    _ => return Err(bad()),
                };
                let body = &v[1..];
                let (hh, rest) = getnum(body, true, 2).ok_or_else(bad)?;
                let mut rest = rest;
                let mut mm = 0;
                let mut ss = 0;
                let colon = form.contains(':');
                if form.len() > 2 {
                    if colon {
                        rest = rest.strip_prefix(':').ok_or_else(bad)?;
                    }
                    let (m, r) = getnum(rest, true, 2).ok_or_else(bad)?;
                    mm = m;
                    rest = r;
                }
                if form == "070000" || form == "07:00:00" {
                    if colon {
                        rest = rest.strip_prefix(':').ok_or_else(bad)?;
                    }
                    let (s, r) = getnum(rest, true, 2).ok_or_else(bad)?;
                    ss = s;
                    rest = r;
                }
                if hh > 24 || mm > 60 || ss > 60 {
                    return Err(p.range("time zone offset"));
                }
                offset = Some(sign * (hh * 3600 + mm * 60 + ss));
                v = rest;
            }
            Std::TZ => {
                if v.starts_with("UTC") {
                    v = &v[3..];
                    offset = Some(0);
                    continue;
                }
                let n = tz_name_len(v).ok_or_else(bad)?;
                let name = &v[..n];
                let mut off = 0;
                if let Some(h) = name.strip_prefix("GMT").filter(|h| !h.is_empty()) {
                    off = h.parse::<i64>().unwrap_or(0) * 3600;
                }
                offset = Some(off);
                zone = Some(name.to_string());
                v = &v[n..];
            }
            Std::Frac0(n) => {
                let digits_ok = v
                    .as_bytes()
                    .get(1..=n)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit));
                if !(v.starts_with('.') || v.starts_with(',')) || !digits_ok {
                    return Err(bad());
                }
                nsec = nanos(&v[1..=n]);
                v = &v[n + 1..];
            }
            Std::Frac9(_) => {
                if v.len() < 2
                    || !(v.starts_with('.') || v.starts_with(','))
                    || !v.as_bytes()[1].is_ascii_digit()
                {
                    continue;
                }
                let n = v[1..].bytes().take_while(u8::is_ascii_digit).count();
                nsec = nanos(&v[1..1 + n]);
                v = &v[1 + n..];
            }
        }
    }
    if pm_set && hour < 12 {
        hour += 12;
    } else if am_set && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let leap = is_leap(year);
        if yday < 1 || yday > 365 + i64::from(leap) {
            return Err(p.range("day-of-year"));
        }
        let base = days_from_civil(year, 1, 1) + yday - 1;
        let (_, m, d) = civil_from_days(base);
        if (month >= 0 && month != m) || (day >= 0 && day != d) {
            return Err(p.range("day-of-year"));
        }
        month = m;
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    if day < 1 || day > days_in(month, year) {
        return Err(p.range("day"));
    }
    Ok(DateTime {
        year,
        month,
        day,
        hour,
        min,
        sec,
        nsec,
        offset: offset.unwrap_or(0),
        zone,
    })
}

/// Nanoseconds from fraction digits (extra digits beyond nine are dropped, as Go truncates).
fn nanos(digits: &str) -> i64 {
    let mut d: String = digits.chars().take(9).collect();
    while d.len() < 9 {
        d.push('0');
    }
    d.parse().unwrap_or(0)
}

const RFC3339_NANO: &str = "2006-01-02T15:04:05.999999999Z07:00";

fn invalid_time(value: &str) -> BuiltinError {
    BuiltinError::new(format!("invalid time {}", go_quote(value)))
}

builtin! {
    /// `Time("1937-01-01T12:00:27.87+00:20")` → `true`; `Time("no time")` is
    /// `invalid time "no time"`.
    fn time(_, "time.Time", s: &str) {
        parse_time(RFC3339_NANO, s).map_err(|_| invalid_time(s))?;
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `Format("2021-02-19", "2006-01-02")` → `true`; as a validator, `time.Format(time.RFC3339Date)`.
    fn format(_, "time.Format", value: &str, layout: &str) {
        parse_time(layout, value).map_err(|_| invalid_time(value))?;
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `FormatString(time.Kitchen, "2021-02-19T15:04:00Z")` → `"3:04PM"`.
    fn format_string(_, "time.FormatString", layout: &str, value: &str) {
        let mut t = parse_time(RFC3339_NANO, value)?;
        t.zone = None;
        Ok(Val::String(format_time(&t, layout)))
    }
}

builtin! {
    /// `Parse(time.RFC822, "01 Jul 21 17:54 CEST")` → `"2021-07-01T17:54:00Z"`.
    fn parse(_, "time.Parse", layout: &str, value: &str) {
        let t = parse_time(layout, value)?.utc();
        Ok(Val::String(format_time(&t, RFC3339_NANO)))
    }
}

builtin! {
    /// `Unix(1500000000, 123456)` → `"2017-07-14T02:40:00.000123456Z"`.
    fn unix(_, "time.Unix", secs: i64, nsec: i64) {
        let total_secs = secs.checked_add(nsec.div_euclid(1_000_000_000));
        let Some(total_secs) = total_secs.filter(|s| s.abs() < 1 << 50) else {
            fail!("time.Unix: value out of range");
        };
        let t = DateTime::from_unix(total_secs, nsec.rem_euclid(1_000_000_000), 0);
        Ok(Val::String(format_time(&t, RFC3339_NANO)))
    }
}

builtin! {
    /// `Split("2017-07-14T02:40:00.000123456Z")` → `{year: 2017, month: 7, day: 14, hour: 2,
    /// minute: 40, second: 0, nanosecond: 123456}`.
    fn split(_, "time.Split", s: &str) {
        let t = parse_time(RFC3339_NANO, s)?;
        let f = |k: &str, v: i64| (k.to_string(), Val::Int(v.into()));
        Ok(Val::Struct(vec![
            f("year", t.year),
            f("month", t.month),
            f("day", t.day),
            f("hour", t.hour),
            f("minute", t.min),
            f("second", t.sec),
            f("nanosecond", t.nsec),
        ]))
    }
}

/// Go's `time.ParseDuration`.
fn go_parse_duration(s: &str) -> Result<i64, BuiltinError> {
    let invalid = || BuiltinError::new(format!("time: invalid duration {}", go_quote(s)));
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            rest = &r[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => fail!("time: missing unit in duration {}", go_quote(s)),
            u => fail!(
                "time: unknown unit {} in duration {}",
                go_quote(u),
                go_quote(s)
            ),
        };
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid())?
        };
        let mut v = whole.checked_mul(scale).ok_or_else(invalid)?;
        if !frac_part.is_empty() {
            let digits: String = frac_part.chars().take(30).collect();
            let f: u128 = digits.parse().map_err(|_| invalid())?;
            let denom = 10u128.pow(digits.len() as u32);
            v += f * scale / denom;
        }
        total = total.checked_add(v).ok_or_else(invalid)?;
        if total > (i64::MAX as u128) + u128::from(neg) {
            return Err(invalid());
        }
    }
    let t = i128::try_from(total).map_err(|_| invalid())?;
    let signed = if neg { -t } else { t };
    i64::try_from(signed).map_err(|_| invalid())
}

fn frac(v: u64, prec: u32) -> (String, u64) {
    let mut print = false;
    let mut digits = String::new();
    let mut v = v;
    for _ in 0..prec {
        let d = v % 10;
        print = print || d != 0;
        if print {
            digits.insert(0, char::from(b'0' + d as u8));
        }
        v /= 10;
    }
    if print {
        digits.insert(0, '.');
    }
    (digits, v)
}

/// Go's `time.Duration.String`.
fn go_format_duration(d: i64) -> String {
    if d == 0 {
        return "0s".into();
    }
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    let mut out;
    if u < 1_000_000_000 {
        let (prec, unit) = if u < 1_000 {
            (0, "ns")
        } else if u < 1_000_000 {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (f, rest) = frac(u, prec);
        out = format!("{rest}{f}{unit}");
    } else {
        let (f, rest) = frac(u, 9);
        u = rest;
        out = format!("{}{f}s", u % 60);
        u /= 60;
        if u > 0 {
            out = format!("{}m{out}", u % 60);
            u /= 60;
            if u > 0 {
                out = format!("{u}h{out}");
            }
        }
    }
    if neg {
        out.insert(0, '-');
    }
    out
}

builtin! {
    /// `Duration("1h30m")` → `true`; as a validator, `time.Duration`.
    fn duration(_, "time.Duration", s: &str) {
        go_parse_duration(s)?;
        Ok(Val::Bool(true))
    }
}

builtin! {
    /// `ParseDuration("1.5h")` → `5400000000000`.
    fn parse_duration(_, "time.ParseDuration", s: &str) {
        Ok(Val::Int(go_parse_duration(s)?.into()))
    }
}

builtin! {
    /// `FormatDuration(10920000000000)` → `"3h2m0s"`.
    fn format_duration(_, "time.FormatDuration", d: i64) {
        Ok(Val::String(go_format_duration(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_const, check_table};

    #[test]
    fn table() {
        // Rows marked (upstream) come from upstream's pkg/time testdata (conformance pkg-time-*).
        check_table(
            "time",
            &[
                (r#"Duration("1h30m")"#, "true"),
                (r#"Duration("1x")"#, r#"!time: unknown unit "x" in duration "1x""#),
                (r#"Duration("1")"#, r#"!time: missing unit in duration "1""#),
                ("FormatDuration(10920000000000)", r#""3h2m0s""#),
                ("FormatDuration(5000000000)", r#""5s""#),
                ("FormatDuration(600000000)", r#""600ms""#),
                ("FormatDuration(1500)", r#""1.5µs""#),
                ("FormatDuration(-90000000000)", r#""-1m30s""#),
                ("FormatDuration(0)", r#""0s""#),
                (r#"ParseDuration("1.5h")"#, "5400000000000"),
                (r#"ParseDuration("-300ms")"#, "-300000000"),
                (r#"ParseDuration("2h45m0.5s")"#, "9900500000000"),
                (r#"ParseDuration("0")"#, "0"),
                (r#"ParseDuration("")"#, "!time: invalid duration"),
                (r#"ParseDuration("9999999999h")"#, "!time: invalid duration"),
                (r#"Time("1937-01-01T12:00:27.87+00:20")"#, "true"),
                (r#"Time("2017-07-14T02:40:00Z")"#, "true"),
                (r#"Time("no time")"#, r#"!invalid time "no time""#),
                (r#"Time("2021-02-30T00:00:00Z")"#, "!invalid time"),
                (r#"Format("2021-02-19", "2006-01-02")"#, "true"),
                (r#"Format("19/02/2021", "2006-01-02")"#, "!invalid time"),
                (r#"FormatString("3:04PM", "2021-02-19T15:04:00Z")"#, r#""3:04PM""#),
                (r#"FormatString("Mon Jan _2 15:04:05 MST 2006", "2021-02-09T15:04:05.5+01:00")"#, r#""Tue Feb  9 15:04:05 +0100 2021""#),
                (r#"FormatString("2006-01-02T15:04:05.000Z07:00 002", "2021-02-19T15:04:05.5Z")"#, r#""2021-02-19T15:04:05.500Z 050""#),
                (r#"Parse("02 Jan 06 15:04 MST", "01 Jul 21 17:54 CEST")"#, r#""2021-07-01T17:54:00Z""#),
                (r#"Parse("02 Jan 06 15:04 MST", "01 Jul 21 17:54 PDT")"#, r#""2021-07-01T17:54:00Z""#),
                (r#"Parse("2006-01-02", "2021-02-19")"#, r#""2021-02-19T00:00:00Z""#),
                (r#"Parse("01/02 03:04:05PM '06 -0700", "01/02 03:04:05PM '06 -0700")"#, r#""2006-01-02T22:04:05Z""#),
                (r#"Parse("2006-01-02T15:04:05Z07:00", "2021-02-19T01:02:03.25+02:00")"#, r#""2021-02-18T23:02:03.25Z""#),
                (r#"Parse("3:04pm", "11:30am")"#, r#""0000-01-01T11:30:00Z""#),
                (r#"Parse("Jan 2 2006", "feb 29 2021")"#, r#"!parsing time "feb 29 2021": day out of range"#),
                (r#"Parse("2006-01-02", "2021-13-01")"#, "!month out of range"),
                (r#"Parse("2006-01-02", "x")"#, r#"!parsing time "x" as "2006-01-02": cannot parse "x" as "2006""#),
                (r#"Parse("2006", "2021 extra")"#, r#"!extra text: " extra""#),
                (r#"Parse("Jan 2006", "Jaé 2021")"#, "!cannot parse"),
                (r#"Parse("05.000", "01.0é")"#, "!cannot parse"),
                ("Unix(1500000000, 123456)", r#""2017-07-14T02:40:00.000123456Z""#),
                ("Unix(0, 0)", r#""1970-01-01T00:00:00Z""#),
                ("Unix(-1, 0)", r#""1969-12-31T23:59:59Z""#),
                (
                    r#"Split("2017-07-14T02:40:00.000123456Z")"#,
                    "{year: 2017, month: 7, day: 14, hour: 2, minute: 40, second: 0, nanosecond: 123456}",
                ),
                (r#"Split("bad")"#, "!parsing time"),
            ],
        );
        check_const("time", "RFC822", r#""02 Jan 06 15:04 MST""#);
        check_const("time", "RFC3339Date", r#""2006-01-02""#);
        check_const("time", "Hour", "3600000000000");
        check_const("time", "December", "12");
        check_const("time", "Saturday", "6");
    }
}
