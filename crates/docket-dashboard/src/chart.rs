//! Inline SVG line charts, built from numbers only (no JavaScript charting library: the page
//! works without a build step and a chart is one small element).

use std::fmt::Write;

/// Line colours of a chart's series, in order (AA contrast on white and on the dark scheme).
const COLOURS: [&str; 2] = ["#3b5bdb", "#c2255c"];

/// A chart of `points` (x: minutes ago as labels, y: values), `w`×`h` pixels, with a title
/// and a unit for the axis label. Empty or all-zero data draws a flat line.
pub fn line(title: &str, unit: &str, points: &[f64], w: u32, h: u32) -> String {
    lines(title, unit, &[("", points)], "-60 min", w, h)
}

/// A chart of one or two series on one scale (the first blue, the second red, each named in
/// a legend when named), the x axis spanning `span` (its left label) to now.
pub fn lines(
    title: &str,
    unit: &str,
    series: &[(&str, &[f64])],
    span: &str,
    w: u32,
    h: u32,
) -> String {
    let (pad_l, pad_r, pad_t, pad_b) = (44.0, 8.0, 18.0, 18.0);
    let (wf, hf) = (w as f64, h as f64);
    let max = series
        .iter()
        .flat_map(|(_, p)| p.iter())
        .cloned()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top = if max <= 0.0 { 1.0 } else { max * 1.1 };
    let n = series
        .iter()
        .map(|(_, p)| p.len())
        .max()
        .unwrap_or(0)
        .max(2) as f64
        - 1.0;
    let x = |i: usize| pad_l + (wf - pad_l - pad_r) * i as f64 / n;
    let y = |v: f64| pad_t + (hf - pad_t - pad_b) * (1.0 - v.clamp(0.0, top) / top);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{title}">"#
    );
    let _ = write!(s, r#"<text x="{pad_l}" y="12">{title}</text>"#);
    let _ = write!(
        s,
        r#"<text x="2" y="{}">{}</text><text x="2" y="{}">0</text>"#,
        pad_t + 8.0,
        short(top),
        hf - pad_b
    );
    let _ = write!(
        s,
        r#"<text x="{pad_l}" y="{}">{span}</text><text x="{}" y="{}" text-anchor="end">now ({unit})</text>"#,
        hf - 4.0,
        wf - pad_r,
        hf - 4.0
    );
    let _ = write!(
        s,
        r##"<line x1="{pad_l}" y1="{0}" x2="{1}" y2="{0}" stroke="#e3e6ec"/>"##,
        hf - pad_b,
        wf - pad_r
    );
    let mut legend_x = wf - pad_r;
    for (k, (name, points)) in series.iter().enumerate().rev() {
        let colour = COLOURS[k % COLOURS.len()];
        let mut d = String::new();
        for (i, v) in points.iter().enumerate() {
            let v = if v.is_finite() { *v } else { 0.0 };
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if i == 0 { "M" } else { "L" },
                x(i),
                y(v)
            );
        }
        if !d.is_empty() {
            let _ = write!(
                s,
                r##"<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.5"/>"##
            );
        }
        if !name.is_empty() {
            // Names come from code, not from users; escaped all the same.
            let name = maud::html! { (name) }.into_string();
            let _ = write!(
                s,
                r##"<text x="{legend_x:.0}" y="12" text-anchor="end" fill="{colour}">{name}</text>"##
            );
            legend_x -= 8.0 * name.len() as f64 + 12.0;
        }
    }
    s.push_str("</svg>");
    s
}

/// A sparkline: the line alone, `w`×`h` pixels.
pub fn spark(points: &[f64], w: u32, h: u32) -> String {
    let max = points
        .iter()
        .cloned()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top = if max <= 0.0 { 1.0 } else { max };
    let n = points.len().max(2) as f64 - 1.0;
    let mut d = String::new();
    for (i, v) in points.iter().enumerate() {
        let v = if v.is_finite() {
            v.clamp(0.0, top)
        } else {
            0.0
        };
        let x = w as f64 * i as f64 / n;
        let y = 1.0 + (h as f64 - 2.0) * (1.0 - v / top);
        let _ = write!(d, "{}{x:.1},{y:.1} ", if i == 0 { "M" } else { "L" });
    }
    format!(
        r##"<svg class="spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><path d="{d}" fill="none" stroke="#3b5bdb" stroke-width="1"/></svg>"##
    )
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn charts_are_svg_of_numbers() {
        let s = super::line("jobs/min", "jobs", &[0.0, 5.0, f64::NAN, 2.0], 300, 100);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("M44.0,"), "{s}");
        assert!(!s.contains("NaN"));
    }

    #[test]
    fn two_series_share_a_scale_and_a_legend() {
        let s = super::lines(
            "in and out",
            "jobs",
            &[("enqueued", &[0.0, 10.0]), ("done", &[0.0, 5.0])],
            "-3 h",
            300,
            100,
        );
        assert!(s.contains("#3b5bdb") && s.contains("#c2255c"), "{s}");
        assert!(s.contains(">enqueued<") && s.contains(">done<") && s.contains(">-3 h<"));
        // One scale: the first series' peak is the top (11 with headroom), the second's half.
        assert!(s.contains(">11<"), "{s}");
    }
}
