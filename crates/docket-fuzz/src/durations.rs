//! Durations and rates as users type them ("30s", "1h 30m", "10/1s"): within the bounds the
//! caller asked for, and a rate prints as text that parses back to the same rate.

use std::time::Duration;

use docket_core::duration::{parse_bounded, MAX_DELAY};
use docket_core::RateLimit;

/// The bounds callers use: delays and retention, rate periods, an exact value, nothing.
const BOUNDS: [(Duration, Duration); 4] = [
    (Duration::ZERO, MAX_DELAY),
    (Duration::from_millis(1), Duration::from_secs(24 * 3600)),
    (Duration::from_secs(1), Duration::from_secs(1)),
    (Duration::ZERO, Duration::ZERO),
];

/// The body of the `durations` target: the first byte picks the bounds, the text is parsed
/// as a bounded duration and as a rate limit.
pub fn durations(data: &[u8]) {
    let Some((&pick, _)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (min, max) = BOUNDS[usize::from(pick) % BOUNDS.len()];
    if let Ok(d) = parse_bounded("fuzzed", text, min, max) {
        assert!(
            min <= d && d <= max,
            "{text:?} gave {d:?} outside {min:?}..={max:?}"
        );
    }
    if let Ok(rate) = text.parse::<RateLimit>() {
        let again = rate.to_string().parse::<RateLimit>();
        assert_eq!(
            again.as_ref().ok(),
            Some(&rate),
            "{text:?} printed as {rate}"
        );
    }
}
