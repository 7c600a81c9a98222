//! PNG charts for `docs/benchmarks.md`: drain throughput against concurrency (with the SQL
//! floor), and the pickup-latency distribution. Drawn with plotters; text uses a system
//! TrueType font when one is found (DejaVu Sans on Debian), otherwise the charts are drawn
//! without labels rather than not at all.

use std::path::Path;

use plotters::prelude::*;

pub(crate) fn register_font() -> bool {
    for path in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ] {
        if let Ok(bytes) = std::fs::read(path) {
            // plotters keeps registered fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            return plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok();
        }
    }
    false
}

/// Throughput (jobs/s) against concurrency per worker, with the floor as a line.
pub fn throughput(path: &Path, points: &[(usize, f64)], floor: f64) -> anyhow::Result<()> {
    throughput_titled(
        path,
        points,
        floor,
        "Docket drain throughput vs concurrency (2 worker processes)",
    )
}

/// [`throughput`] with its own caption.
pub fn throughput_titled(
    path: &Path,
    points: &[(usize, f64)],
    floor: f64,
    caption: &str,
) -> anyhow::Result<()> {
    let labels = register_font();
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_x = points.iter().map(|p| p.0).max().unwrap_or(1) as f64 * 1.05;
    let max_y = points.iter().map(|p| p.1).fold(floor, f64::max) * 1.15;
    let mut b = ChartBuilder::on(&root);
    b.margin(20).x_label_area_size(45).y_label_area_size(80);
    if labels {
        b.caption(caption, ("sans-serif", 22));
    }
    let mut chart = b.build_cartesian_2d(0f64..max_x, 0f64..max_y)?;
    let mut mesh = chart.configure_mesh();
    if labels {
        mesh.x_desc("concurrency per worker process")
            .y_desc("jobs/s");
    } else {
        mesh.disable_x_mesh()
            .disable_y_mesh()
            .x_labels(0)
            .y_labels(0);
    }
    mesh.draw()?;
    let s = chart.draw_series(LineSeries::new(
        points.iter().map(|(x, y)| (*x as f64, *y)),
        BLUE.stroke_width(3),
    ))?;
    if labels {
        s.label("Docket")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    }
    chart.draw_series(
        points
            .iter()
            .map(|(x, y)| Circle::new((*x as f64, *y), 5, BLUE.filled())),
    )?;
    let f = chart.draw_series(LineSeries::new(
        vec![(0.0, floor), (max_x, floor)],
        RED.stroke_width(2),
    ))?;
    if labels {
        f.label("SQL floor (sql-floor.sh, B=100, 4 clients)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart
            .configure_series_labels()
            // Below the lines: the curves sit in the upper half of the plot.
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Cumulative distribution of pickup latencies (ms), LISTEN/NOTIFY.
pub fn latency(path: &Path, mut ms: Vec<f64>) -> anyhow::Result<()> {
    let labels = register_font();
    ms.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_x = ms.last().copied().unwrap_or(1.0).max(1.0) * 1.05;
    let mut b = ChartBuilder::on(&root);
    b.margin(20).x_label_area_size(45).y_label_area_size(60);
    if labels {
        b.caption(
            "Pickup latency, enqueue commit to handler start (LISTEN/NOTIFY)",
            ("sans-serif", 22),
        );
    }
    let mut chart = b.build_cartesian_2d(0f64..max_x, 0f64..1.0)?;
    let mut mesh = chart.configure_mesh();
    if labels {
        mesh.x_desc("milliseconds")
            .y_desc("fraction of jobs picked up");
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw()?;
    let n = ms.len().max(1) as f64;
    chart.draw_series(LineSeries::new(
        ms.iter().enumerate().map(|(i, v)| (*v, (i + 1) as f64 / n)),
        BLUE.stroke_width(3),
    ))?;
    root.present()?;
    Ok(())
}
