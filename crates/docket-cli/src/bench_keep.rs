//! `docket bench --scenario keep`: what keeping succeeded jobs costs against the deleting
//! default, on PostgreSQL. One default worker process drains N no-op jobs with
//! `WorkerConfig::keep_succeeded(false)` (the default: a success deletes its row) and then with
//! `keep_succeeded(true)` (a success moves its row to the packed history `jobs_succeeded`,
//! migration 0035, kept for the retention),
//! alternating, at each of `--levels`; reported per level: the kept drain's rate over the
//! deleting one's and the database server's CPU per job of each (the target an operator
//! would hold it to: at most 15 % more).

use serde_json::json;

use crate::bench::BenchResult;
use crate::bench_concurrency::{alternating, median, median_of_all};
use crate::cli::BenchArgs;
use crate::fail::CliError;
use crate::Ctx;

/// The scenario (see the module doc).
pub async fn keep(ctx: &Ctx, a: &BenchArgs) -> anyhow::Result<Vec<BenchResult>> {
    let n = a.counts.first().copied().unwrap_or(20_000);
    if a.runs == 0 || a.levels.is_empty() {
        return Err(CliError::invalid("--runs and --levels must not be empty").into());
    }
    if !(1..=100_000_000).contains(&n) {
        return Err(CliError::invalid("--counts must be 1..=100000000").into());
    }
    if a.levels.iter().any(|w| !(1..=10_000).contains(w)) {
        return Err(CliError::invalid("--levels must each be 1..=10000").into());
    }
    let mut out = Vec::new();
    for &w in &a.levels {
        let cases = [vec![], vec!["--keep-succeeded".to_string()]];
        let (rates, cpu) = alternating(ctx, n, w, a.runs, &cases).await?;
        let (deleted, kept) = (median(rates[0].clone()), median(rates[1].clone()));
        let (cpu_deleted, cpu_kept) = (
            median_of_all(&cpu[0], a.runs),
            median_of_all(&cpu[1], a.runs),
        );
        out.push(BenchResult {
            scenario: "keep_succeeded".into(),
            jobs: Some(n),
            workers: Some(1),
            concurrency: Some(w),
            jobs_per_s: Some(kept),
            seconds: Some(n as f64 / kept),
            ratio: Some(kept / deleted),
            note: Some(format!(
                "kept drain's rate over the deleting default's (target >= 0.85); one process, \
                 library defaults; median of {} runs, alternating",
                rates[0].len()
            )),
            extra: Some(json!({
                "deleted_jobs_per_s": deleted,
                "runs_deleted": rates[0],
                "runs_kept": rates[1],
                "server_cpu_us_per_job_deleted": cpu_deleted,
                "server_cpu_us_per_job_kept": cpu_kept,
                "server_cpu_kept_over_deleted": cpu_kept.zip(cpu_deleted).map(|(k, d)| k / d),
            })),
            ..Default::default()
        });
    }
    Ok(out)
}
