//! Per-minute histograms of queue waits and run times, so the dashboard can say p50, p95 and
//! p99 instead of a mean (a mean hides the slow tail an operator is asked about).
//!
//! Fixed buckets, the same for every worker and engine: samples from any number of workers
//! add up bucket by bucket (a stored count per queue, minute, metric and bucket), and a
//! percentile read from the merged counts is the upper bound of the bucket it falls in — at
//! most one bucket's width above the truth, never below it.

/// Upper bounds of the buckets, in milliseconds; one more bucket holds everything above the
/// last.
pub const BOUNDS_MS: [i64; 15] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
];

/// Buckets of a histogram (the bounds' and one above them).
pub const BUCKETS: usize = BOUNDS_MS.len() + 1;

/// The bucket of a duration of `ms` milliseconds (negative counts as 0).
pub fn bucket(ms: i64) -> usize {
    BOUNDS_MS
        .iter()
        .position(|&b| ms.max(0) <= b)
        .unwrap_or(BOUNDS_MS.len())
}

/// The `q`-quantile (0 < q ≤ 1) of `counts` (one per bucket), as its bucket's upper bound in
/// milliseconds; `f64::INFINITY` when it lies above the last bound; `None` when empty.
pub fn quantile(counts: &[i64], q: f64) -> Option<f64> {
    let total: i64 = counts.iter().map(|c| c.max(&0)).sum();
    if total == 0 {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as i64;
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c.max(&0);
        if seen >= rank {
            return Some(BOUNDS_MS.get(i).map(|&b| b as f64).unwrap_or(f64::INFINITY));
        }
    }
    Some(f64::INFINITY)
}

/// Adds `b` into `a` bucket by bucket (`a` grows to [`BUCKETS`] when empty).
pub fn add(a: &mut Vec<i64>, b: &[i64]) {
    if b.is_empty() {
        return;
    }
    if a.len() < BUCKETS {
        a.resize(BUCKETS, 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// The non-empty buckets of a sample's histograms, as stored rows:
/// `(queue, minute, metric, bucket, count)` with metric `'w'` (wait) or `'r'` (run).
pub fn rows(s: &crate::Sample) -> Vec<(&str, chrono::DateTime<chrono::Utc>, char, i16, i64)> {
    let mut out = Vec::new();
    for (metric, h) in [('w', &s.wait_hist), ('r', &s.run_hist)] {
        for (i, &n) in h.iter().enumerate().take(BUCKETS) {
            if n > 0 {
                out.push((s.queue.as_str(), s.minute, metric, i as i16, n));
            }
        }
    }
    out
}

/// Puts stored bucket rows back into the samples of their queue and minute (a row whose
/// sample is not in `samples` is dropped: the two reads raced a minute boundary).
pub fn merge(
    samples: &mut [crate::Sample],
    buckets: impl IntoIterator<Item = (String, chrono::DateTime<chrono::Utc>, char, i16, i64)>,
) {
    let mut at: std::collections::HashMap<(String, chrono::DateTime<chrono::Utc>), usize> =
        std::collections::HashMap::new();
    for (i, s) in samples.iter().enumerate() {
        at.insert((s.queue.clone(), s.minute), i);
    }
    for (queue, minute, metric, bucket, n) in buckets {
        let (Some(&i), Ok(b)) = (at.get(&(queue, minute)), usize::try_from(bucket)) else {
            continue;
        };
        if b >= BUCKETS {
            continue;
        }
        let h = match metric {
            'w' => &mut samples[i].wait_hist,
            'r' => &mut samples[i].run_hist,
            _ => continue,
        };
        if h.len() < BUCKETS {
            h.resize(BUCKETS, 0);
        }
        h[b] += n.max(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantile_is_the_upper_bound_of_its_bucket() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(60_000), 14);
        assert_eq!(bucket(60_001), 15);
        assert_eq!(bucket(-5), 0);
        let mut h = vec![0; BUCKETS];
        for ms in (1..=100).map(|i| i * 10) {
            h[bucket(ms)] += 1; // 10 ms .. 1 s, evenly
        }
        assert_eq!(quantile(&h, 0.5), Some(500.0));
        assert_eq!(quantile(&h, 0.95), Some(1_000.0));
        assert_eq!(quantile(&h, 0.01), Some(10.0));
        h[BUCKETS - 1] += 1000;
        assert_eq!(quantile(&h, 0.99), Some(f64::INFINITY));
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
        assert_eq!(quantile(&[], 0.5), None);
        let mut sum = Vec::new();
        add(&mut sum, &h);
        add(&mut sum, &h);
        assert_eq!(sum[BUCKETS - 1], 2000);
    }
}
