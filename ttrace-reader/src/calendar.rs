//! Wall-clock time as a calendar date and a time of day (UTC), for the names and columns
//! that show it: the proleptic Gregorian calendar, by Howard Hinnant's `days_from_civil`
//! and `civil_from_days` algorithms (exact for every day a `u64` of nanoseconds reaches).

/// A moment as UTC calendar fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc {
    /// The year (1970 on).
    pub year: i64,
    /// The month, 1 to 12.
    pub month: u32,
    /// The day of the month, 1 to 31.
    pub day: u32,
    /// Hours, minutes and seconds of the day.
    pub hour: u32,
    #[allow(missing_docs)]
    pub minute: u32,
    #[allow(missing_docs)]
    pub second: u32,
    /// Nanoseconds of the second.
    pub nanos: u32,
}

impl Utc {
    /// The moment `realtime_ns` nanoseconds after the Unix epoch.
    ///
    /// ```
    /// let t = ttrace_reader::calendar::Utc::of(951_782_400_000_000_007);
    /// assert_eq!((t.year, t.month, t.day, t.hour, t.nanos), (2000, 2, 29, 0, 7));
    /// ```
    pub fn of(realtime_ns: u64) -> Utc {
        let secs = realtime_ns / 1_000_000_000;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        let (year, month, day) = civil_from_days(days as i64);
        Utc {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
            nanos: (realtime_ns % 1_000_000_000) as u32,
        }
    }
}

/// The date `days` after 1970-01-01: (year, month 1–12, day 1–31).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The days from 1970-01-01 to the date `year`-`month`-`day` (negative before it), for a
/// month 1–12 and a day 1–31 (whether the day exists in the month is the caller's check:
/// [`days_in_month`]).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (m, d) = (i64::from(month), i64::from(day));
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days of `month` (1–12) in `year`; 0 for a month that does not exist.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_go_to_dates_and_back() {
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert!(d >= 1 && d <= days_in_month(y, m), "{days}: {y}-{m}-{d}");
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 13), 0);
    }
}
