//! SVG line plots of experiment results (plotters, SVG backend: no system libraries).

use std::path::Path;

use plotters::prelude::*;

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points `(x, y)`, in increasing `x`.
    pub points: Vec<(f64, f64)>,
}

/// What to draw.
#[derive(Debug, Clone)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

const COLOURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo - 1.0, hi + 1.0)
    } else {
        (lo, hi)
    }
}

/// Writes `plot` as an SVG file.
pub fn write_svg(path: &Path, plot: &LinePlot) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let all = || plot.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = bounds(all().map(|p| p.0));
    let (y0, y1) = bounds(all().map(|p| p.1));
    let log_x = plot.log_x && x0 > 0.0;
    let log_y = plot.log_y && y0 > 0.0;
    let pad = (y1 - y0) * 0.08;
    let (y0, y1) = if log_y {
        (y0 / 1.5, y1 * 1.5)
    } else {
        (if y0 >= 0.0 { 0f64.min(y0) } else { y0 - pad }, y1 + pad)
    };
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(&plot.x_label)
                .y_desc(&plot.y_label)
                .draw()
                .map_err(|e| err(&e))?;
            for (i, s) in plot.series.iter().enumerate() {
                let c = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                    .map_err(|e| err(&e))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    match (log_x, log_y) {
        (true, true) => draw!(
            builder
                .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(|e| err(&e))?
        ),
        (true, false) => draw!(
            builder
                .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(|e| err(&e))?
        ),
        (false, true) => draw!(
            builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|e| err(&e))?
        ),
        (false, false) => draw!(
            builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| err(&e))?
        ),
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_the_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let series = vec![Series {
            label: "zero-copy".into(),
            points: vec![(16.0, 30.0), (1024.0, 10.0), (65536.0, 2.0)],
        }];
        write_svg(
            &path,
            &LinePlot {
                title: "improvement".into(),
                x_label: "FFT length".into(),
                y_label: "%".into(),
                log_x: true,
                log_y: true,
                series,
            },
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for needle in ["improvement", "FFT length", "zero-copy", "<polyline"] {
            assert!(svg.contains(needle), "missing {needle}");
        }
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let plot = LinePlot {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: false,
            log_y: false,
            series: vec![Series {
                label: "x".into(),
                points: vec![(1.0, 1.0)],
            }],
        };
        assert!(write_svg(Path::new("/nonexistent-dir/p.svg"), &plot).is_err());
    }
}
