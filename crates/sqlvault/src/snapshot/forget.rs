//! Which snapshots a retention policy keeps, like `restic forget --keep-*`: pure
//! calendar logic over `(name, created)` pairs, no database.

use jiff::tz::TimeZone;

/// How many snapshots of each kind `forget` keeps, as `restic forget --keep-*`: the
/// newest `last`, and the newest one of each of the most recent `hourly` hours, `daily`
/// days, `weekly` ISO weeks, `monthly` months and `yearly` years that have one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForgetPolicy {
    /// Keep the N newest snapshots.
    pub last: usize,
    /// Keep the newest snapshot of each of the N most recent hours that have one.
    pub hourly: usize,
    /// ... of each of the N most recent days.
    pub daily: usize,
    /// ... of each of the N most recent ISO weeks (Monday to Sunday).
    pub weekly: usize,
    /// ... of each of the N most recent months.
    pub monthly: usize,
    /// ... of each of the N most recent years.
    pub yearly: usize,
}

impl ForgetPolicy {
    /// Whether no rule is set (such a policy would remove everything; `forget` refuses it).
    pub fn is_empty(&self) -> bool {
        *self == ForgetPolicy::default()
    }
}

/// What a policy decides for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ForgetDecision {
    /// The snapshot's name.
    pub name: String,
    /// When it was taken (nanoseconds since the epoch).
    pub created_ns: i64,
    /// Whether some rule keeps it; `false`: `forget` removes it.
    pub keep: bool,
    /// The rules that keep it (`last`, `hourly`, `daily`, `weekly`, `monthly`, `yearly`).
    pub reasons: Vec<&'static str>,
}

/// Applies `policy` to snapshots `(name, created_ns)`; calendar periods are taken in
/// time zone `tz`. Returns one decision per snapshot, newest first.
pub fn forget_plan(snaps: &[(String, i64)], policy: &ForgetPolicy, tz: &TimeZone) -> Vec<ForgetDecision> {
    let mut order: Vec<&(String, i64)> = snaps.iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let mut out: Vec<ForgetDecision> = order
        .iter()
        .map(|(name, ns)| ForgetDecision { name: name.clone(), created_ns: *ns, keep: false, reasons: Vec::new() })
        .collect();
    let period = |ns: i64, rule: &str| -> (i16, i16, i16) {
        let z = jiff::Timestamp::from_nanosecond(i128::from(ns))
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
            .to_zoned(tz.clone());
        let d = z.date();
        match rule {
            "hourly" => (d.year(), d.day_of_year(), i16::from(z.hour())),
            "daily" => (d.year(), d.day_of_year(), 0),
            "weekly" => {
                let w = d.iso_week_date();
                (w.year(), i16::from(w.week()), 0)
            }
            "monthly" => (d.year(), i16::from(d.month()), 0),
            _ => (d.year(), 0, 0),
        }
    };
    for (i, d) in out.iter_mut().enumerate() {
        if i < policy.last {
            d.keep = true;
            d.reasons.push("last");
        }
    }
    let rules = [
        ("hourly", policy.hourly),
        ("daily", policy.daily),
        ("weekly", policy.weekly),
        ("monthly", policy.monthly),
        ("yearly", policy.yearly),
    ];
    for (rule, n) in rules {
        let mut kept = 0;
        let mut last = None;
        for d in out.iter_mut() {
            if kept == n {
                break;
            }
            let p = period(d.created_ns, rule);
            if last != Some(p) {
                d.keep = true;
                d.reasons.push(rule);
                kept += 1;
                last = Some(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000_000_000;
    const D: i64 = 24 * H;

    fn snaps(times: &[i64]) -> Vec<(String, i64)> {
        times.iter().enumerate().map(|(i, t)| (format!("s{i}"), *t)).collect()
    }

    fn kept(plan: &[ForgetDecision]) -> Vec<&str> {
        let mut k: Vec<&str> = plan.iter().filter(|d| d.keep).map(|d| d.name.as_str()).collect();
        k.sort();
        k
    }

    #[test]
    fn keep_last_keeps_the_newest() {
        let s = snaps(&[D, 2 * D, 3 * D, 4 * D]);
        let p = forget_plan(&s, &ForgetPolicy { last: 2, ..Default::default() }, &TimeZone::UTC);
        assert_eq!(kept(&p), ["s2", "s3"]);
        assert_eq!(p[0].name, "s3", "newest first");
    }

    #[test]
    fn keep_daily_keeps_the_newest_of_each_day() {
        // Two a day for three days (1970-01-02..04, UTC).
        let s = snaps(&[D + H, D + 2 * H, 2 * D + H, 2 * D + 2 * H, 3 * D + H, 3 * D + 2 * H]);
        let p = forget_plan(&s, &ForgetPolicy { daily: 2, ..Default::default() }, &TimeZone::UTC);
        assert_eq!(kept(&p), ["s3", "s5"]);
        // The same instants in UTC-5: 01:00 and 02:00 UTC fall on the previous day.
        let tz = TimeZone::fixed(jiff::tz::offset(-5));
        let p = forget_plan(&s, &ForgetPolicy { daily: 2, ..Default::default() }, &tz);
        assert_eq!(kept(&p), ["s3", "s5"]);
        let late = snaps(&[D + 4 * H, D + 6 * H]); // 23:00 the day before and 01:00 in UTC-5
        let p = forget_plan(&late, &ForgetPolicy { daily: 5, ..Default::default() }, &tz);
        assert_eq!(kept(&p), ["s0", "s1"]);
    }

    #[test]
    fn weekly_and_monthly_buckets_and_reasons() {
        // 1970-01-05 is a Monday: days 4..=10 are one ISO week.
        let s = snaps(&[4 * D, 6 * D, 10 * D, 11 * D, 40 * D]);
        let p = forget_plan(&s, &ForgetPolicy { weekly: 3, monthly: 1, ..Default::default() }, &TimeZone::UTC);
        assert_eq!(kept(&p), ["s2", "s3", "s4"]);
        let newest = &p[0];
        assert_eq!(newest.reasons, ["weekly", "monthly"]);
        assert!(ForgetPolicy::default().is_empty());
    }
}
