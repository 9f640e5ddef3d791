//! How the CLI talks to a person: `-q/--quiet` and `-v/--verbose`, times, sizes and
//! mode strings.
//!
//! Results go to standard output (`outln!`); what a command did (`created ...`,
//! `imported ...`) goes to standard error through `note!`, which `-q` silences, as it
//! does warnings about single entries (`warning!`), and details through `detail!`,
//! which only `-v` shows. Errors are never silenced.
//!
//! Times are shown in the local time zone (`TZ`, else the system's) with their UTC
//! offset, so `2026-11-24 06:55:33 +01:00` says which zone it is; JSON carries
//! nanoseconds and ISO 8601 UTC strings.

use std::sync::atomic::{AtomicI8, Ordering};

use jiff::{tz::TimeZone, Timestamp};

static VERBOSITY: AtomicI8 = AtomicI8::new(0);

/// Sets the verbosity from `-q` (-1) and `-v` (+1 per v).
pub fn set_verbosity(quiet: bool, verbose: u8) {
    let v = if quiet { -1 } else { verbose.min(2) as i8 };
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// Whether `note!` messages are shown (not `-q`).
pub fn notes() -> bool {
    VERBOSITY.load(Ordering::Relaxed) >= 0
}

/// Whether `detail!` messages are shown (`-v`).
pub fn details() -> bool {
    VERBOSITY.load(Ordering::Relaxed) >= 1
}

/// What a command did, on standard error; silenced by `-q`.
macro_rules! note {
    ($($t:tt)*) => { if $crate::ui::notes() { eprintln!($($t)*) } };
}

/// A warning about one entry of a long command (an unreadable file skipped), on
/// standard error as `sqlvault: ...`; silenced by `-q`, which leaves the command's
/// exit code and its one-line count of warnings to say that something was left out.
macro_rules! warning {
    ($($t:tt)*) => { if $crate::ui::notes() { eprintln!("sqlvault: {}", format_args!($($t)*)) } };
}

/// Details (timings, each command of a batch), on standard error; shown with `-v`.
macro_rules! detail {
    ($($t:tt)*) => { if $crate::ui::details() { eprintln!("sqlvault: {}", format_args!($($t)*)) } };
}

fn timestamp(ns: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(ns)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Local time with its UTC offset, to the second: `2026-11-24 06:55:33 +01:00`.
pub fn local_time(ns: i64) -> String {
    timestamp(ns).to_zoned(TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S %:z").to_string()
}

/// Local time to the minute without the offset, as `ls -l` shows it: `2026-11-24 06:55`.
pub fn local_minute(ns: i64) -> String {
    timestamp(ns).to_zoned(TimeZone::system()).strftime("%Y-%m-%d %H:%M").to_string()
}

/// UTC time in ISO 8601 to the second: `2026-11-23T08:15:00Z`.
pub fn iso_utc(ns: i64) -> String {
    timestamp(ns).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A byte count as a person reads it: `1.50 MiB`.
pub fn human(bytes: u64) -> String {
    indicatif::HumanBytes(bytes).to_string()
}

/// A byte count, human-readable or exact.
pub fn size(bytes: u64, human_readable: bool) -> String {
    if human_readable {
        human(bytes)
    } else {
        bytes.to_string()
    }
}

/// `drwxr-xr-x` from a node's kind and permission bits (setuid, setgid, sticky too).
pub fn mode_string(a: &sqlvault::Attr) -> String {
    unix_mode::to_string(a.kind.mode_bits() | (a.perm & 0o7777))
}

/// A length of time as people write it: `45s`, `500ms`, `90m`, `12h`, `30d`, `2w`, `1y`,
/// `1h 30m` (humantime's units), or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map(std::time::Duration::from_secs).map_err(|_| format!("{s:?} is too long a duration"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}): use a number and a unit (45s, 90m, 12h, 30d, 2w, 1y)"))
}

/// A point in time for `find --newer/--older`: an age (`30m`, `2h`, `7d`, `2w`, `1y`),
/// a date (`2026-11-01`, local midnight), a local date and time (`2026-11-01 08:00`,
/// `2026-11-01T08:00:00`) or an RFC 3339 time (`2026-11-01T08:00:00Z`). Nanoseconds.
pub fn parse_when(s: &str) -> Result<i64, String> {
    let bad = || format!("{s:?} is not a time: use an age (30m, 2h, 7d, 2w) or a date (2026-11-01, 2026-11-01 08:00)");
    let t = s.trim();
    // An age has a unit; a bare number is neither an age nor a date.
    if t.starts_with(|c: char| c.is_ascii_digit()) && t.ends_with(|c: char| c.is_ascii_alphabetic()) {
        if let Ok(age) = humantime::parse_duration(t) {
            let ago = i128::try_from(age.as_nanos()).map_err(|_| bad())?;
            return i64::try_from(Timestamp::now().as_nanosecond() - ago).map_err(|_| bad());
        }
    }
    if let Ok(ts) = t.parse::<Timestamp>() {
        return i64::try_from(ts.as_nanosecond()).map_err(|_| bad());
    }
    let tz = TimeZone::system();
    let civil = t
        .replacen(' ', "T", 1)
        .parse::<jiff::civil::DateTime>()
        .or_else(|_| t.parse::<jiff::civil::Date>().map(|d| d.to_datetime(jiff::civil::Time::midnight())))
        .map_err(|_| bad())?;
    let z = civil.to_zoned(tz).map_err(|_| bad())?;
    i64::try_from(z.timestamp().as_nanosecond()).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "ten", "10 parsecs", "-1s", "99999999999999999999"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let hour_ago = parse_when("1h").unwrap();
        let now = Timestamp::now().as_nanosecond() as i64;
        assert!((now - 3_600_000_000_000 - hour_ago).abs() < 60_000_000_000);
        assert!(parse_when("12").is_err(), "a bare number is not a time");
    }

    #[test]
    fn formats_utc_times() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(1_700_000_000 * 1_000_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn mode_strings() {
        let mut a = sqlvault::Attr {
            ino: sqlvault::InodeId(2),
            kind: sqlvault::FileType::Dir,
            perm: 0o755,
            uid: 0,
            gid: 0,
            size: 0,
            nlink: 1,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            rdev: 0,
        };
        assert_eq!(mode_string(&a), "drwxr-xr-x");
        a.kind = sqlvault::FileType::File;
        a.perm = 0o4640;
        assert_eq!(mode_string(&a), "-rwSr-----");
        for (kind, c) in [
            (sqlvault::FileType::Fifo, 'p'),
            (sqlvault::FileType::Socket, 's'),
            (sqlvault::FileType::CharDevice, 'c'),
            (sqlvault::FileType::BlockDevice, 'b'),
        ] {
            a.kind = kind;
            assert!(mode_string(&a).starts_with(c), "{kind:?}");
        }
    }

    #[test]
    fn parses_ages_and_dates() {
        let now = Timestamp::now().as_nanosecond() as i64;
        let day = parse_when("1d").unwrap();
        assert!((now - day - 86_400_000_000_000).abs() < 5_000_000_000);
        assert_eq!(parse_when("2023-11-14T22:13:20Z").unwrap(), 1_700_000_000 * 1_000_000_000);
        assert!(parse_when("2026-11-01").is_ok());
        assert!(parse_when("2026-11-01 08:00").is_ok());
        assert!(parse_when("yesterday").is_err());
        assert!(parse_when("7q").is_err());
    }
}
