//! Human durations ("30s", "1h 30m", "7d") with explicit bounds, for every entry point that
//! takes a duration. Parsing is delegated to `humantime`; this module only adds the bounds and
//! a typed error naming the field.

use std::time::Duration;

use crate::ValidationError;

/// Parses `s` as a duration between `min` and `max` inclusive.
pub fn parse_bounded(
    what: &'static str,
    s: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration, ValidationError> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(ValidationError::Duration {
            what,
            reason: format!("{s:?} is negative"),
        });
    }
    let d = humantime::parse_duration(s).map_err(|e| ValidationError::Duration {
        what,
        reason: format!("{s:?}: {e} (examples: 500ms, 30s, 5m, 2h, 7d)"),
    })?;
    check_bounds(what, d, min, max)
}

/// Checks that `d` lies within `min..=max`.
pub fn check_bounds(
    what: &'static str,
    d: Duration,
    min: Duration,
    max: Duration,
) -> Result<Duration, ValidationError> {
    if d < min || d > max {
        return Err(ValidationError::Duration {
            what,
            reason: format!(
                "{} is outside {}..={}",
                humantime::format_duration(d),
                humantime::format_duration(min),
                humantime::format_duration(max)
            ),
        });
    }
    Ok(d)
}

/// Ten years: the longest delay or retention Docket accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_bounds() {
        let max = Duration::from_secs(3600);
        assert_eq!(
            parse_bounded("lease", "30s", Duration::ZERO, max).unwrap(),
            Duration::from_secs(30)
        );
        assert!(parse_bounded("lease", "-5s", Duration::ZERO, max).is_err());
        assert!(parse_bounded("lease", "2h", Duration::ZERO, max).is_err());
        assert!(parse_bounded("lease", "soon", Duration::ZERO, max).is_err());
        let e = parse_bounded("lease", "", Duration::ZERO, max).unwrap_err();
        assert!(e.to_string().contains("lease"), "{e}");
    }
}
