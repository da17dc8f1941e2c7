//! SVG line plots of experiment results (plotters, SVG backend: no system
//! libraries). Every plot keeps its legend below the chart, so no line is hidden;
//! a mode (a completion mode, a path, an implementation) has one colour in every
//! plot of a run; byte axes are powers of two labelled in B, KiB and MiB.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label. Its first word that names a mode (`poll`, `irq`,
    /// `zerocopy`, `dmaflow`, ...) picks the colour.
    pub label: String,
    /// Points `(x, y)`, in increasing `x`.
    pub points: Vec<(f64, f64)>,
    /// Optional interval `(low, high)` around each point, drawn as an error bar
    /// (empty: none; otherwise one per point).
    pub interval: Vec<(f64, f64)>,
}

impl Series {
    /// A line without intervals.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            points,
            interval: Vec::new(),
        }
    }
}

/// How the x axis is scaled and labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Linear, plain numbers.
    Linear,
    /// Sizes in bytes spanning decades: log2 scale, ticks at powers of two
    /// labelled `64 B`, `4 KiB`, `1 MiB`.
    Bytes,
    /// Counts that are powers of two (FFT lengths): log2 scale, ticks at powers
    /// of two labelled as whole numbers.
    PowersOfTwo,
}

/// What to draw.
#[derive(Debug, Clone)]
pub struct LinePlot {
    /// Title above the plot.
    pub title: String,
    /// X-axis label, with its unit.
    pub x_label: String,
    /// Y-axis label, with its unit.
    pub y_label: String,
    /// The x axis.
    pub x: XAxis,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

impl LinePlot {
    /// A plot titled `title` of `series` over `x` (labelled `x_label`)
    /// against `y_label`, its y axis linear.
    pub fn new(
        title: impl Into<String>,
        x: XAxis,
        x_label: &str,
        y_label: &str,
        series: Vec<Series>,
    ) -> Self {
        LinePlot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x,
            log_y: false,
            series,
        }
    }

    /// The same plot with a logarithmic y axis.
    pub fn log_y(mut self) -> Self {
        self.log_y = true;
        self
    }
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

/// Mode words and their colours, the same in every plot. The first word of a
/// label found here picks the colour.
const MODE_COLOURS: [(&str, RGBColor); 21] = [
    ("poll", RGBColor(0x1f, 0x77, 0xb4)),
    ("yield", RGBColor(0x2c, 0xa0, 0x2c)),
    ("irq", RGBColor(0xff, 0x7f, 0x0e)),
    ("proxy", RGBColor(0xd6, 0x27, 0x28)),
    ("adaptive", RGBColor(0x17, 0x8a, 0x7a)),
    ("zerocopy", RGBColor(0x94, 0x67, 0xbd)),
    ("zero-copy", RGBColor(0x94, 0x67, 0xbd)),
    ("copy", RGBColor(0x8c, 0x56, 0x4b)),
    ("bare", RGBColor(0x7f, 0x7f, 0x7f)),
    ("bound", RGBColor(0x7f, 0x7f, 0x7f)),
    ("ideal", RGBColor(0x00, 0x00, 0x00)),
    ("link", RGBColor(0x00, 0x00, 0x00)),
    ("dmaflow", RGBColor(0x17, 0xbe, 0xcf)),
    ("rtrb", RGBColor(0xe3, 0x77, 0xc2)),
    ("ringbuf", RGBColor(0xbc, 0xbd, 0x22)),
    ("vmcircbuffer", RGBColor(0x39, 0x3b, 0x79)),
    ("crossbeam", RGBColor(0xad, 0x49, 0x4a)),
    ("fabric", RGBColor(0x1f, 0x77, 0xb4)),
    ("cpu", RGBColor(0x7f, 0x7f, 0x7f)),
    ("alone", RGBColor(0x7f, 0x7f, 0x7f)),
    ("copying", RGBColor(0x8c, 0x56, 0x4b)),
];

/// Colours for labels that name no known mode, in order of appearance.
const SPARE_COLOURS: [RGBColor; 4] = [
    RGBColor(0x63, 0x79, 0x39),
    RGBColor(0x84, 0x3c, 0x39),
    RGBColor(0x7b, 0x41, 0x73),
    RGBColor(0x31, 0x82, 0xbd),
];

/// The colour a label's mode has in every plot, if it names one.
pub fn mode_colour(label: &str) -> Option<RGBColor> {
    label.split_whitespace().find_map(|w| {
        MODE_COLOURS
            .iter()
            .find(|(m, _)| m.eq_ignore_ascii_case(w))
            .map(|&(_, c)| c)
    })
}

/// How each series is drawn: its colour, and the how-many-th line of that
/// colour it is (see [`draw_line`]).
fn styles(series: &[Series]) -> Vec<(RGBColor, usize)> {
    let mut out: Vec<(RGBColor, usize)> = Vec::new();
    let mut spare = 0;
    for s in series {
        let colour = mode_colour(&s.label).unwrap_or_else(|| {
            spare += 1;
            SPARE_COLOURS[(spare - 1) % SPARE_COLOURS.len()]
        });
        let variant = out.iter().filter(|(c, _)| *c == colour).count();
        out.push((colour, variant));
    }
    out
}

/// A number as a tick label: whole numbers without a decimal point, others to
/// three significant digits.
pub fn tick(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v == v.round() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A power-of-two position (`log2` of the value) as a tick label: `bytes` in B,
/// KiB, MiB; otherwise the whole number. Positions between powers get no label.
fn pow2_tick(x: f64, bytes: bool) -> String {
    if x != x.round() || !(0.0..=62.0).contains(&x) {
        return String::new();
    }
    let v = 1u64 << (x as u32);
    if !bytes {
        return v.to_string();
    }
    if v >= 1 << 30 && v.is_multiple_of(1 << 30) {
        format!("{} GiB", v >> 30)
    } else if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        format!("{} MiB", v >> 20)
    } else if v >= 1 << 10 && v.is_multiple_of(1 << 10) {
        format!("{} KiB", v >> 10)
    } else {
        format!("{v} B")
    }
}

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

/// Plot width and chart height in pixels; the legend adds rows below.
const WIDTH: u32 = 800;
const CHART_HEIGHT: u32 = 440;
const LEGEND_COLUMNS: usize = 3;
const LEGEND_ROW: u32 = 20;

fn legend_height(n: usize) -> u32 {
    n.div_ceil(LEGEND_COLUMNS) as u32 * LEGEND_ROW + 12
}

/// Draws a line and its markers in the style of its variant: solid, dashed or
/// dotted (variant mod 3) with dots, triangles, crosses, squares or rings
/// (variant mod 5), so up to fifteen lines of one colour stay apart.
fn draw_line<DB: DrawingBackend, CT: CoordTranslate<From = C>, C: Clone + 'static>(
    area: &DrawingArea<DB, CT>,
    points: &[C],
    colour: RGBColor,
    variant: usize,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let style = colour.stroke_width(2);
    let line = points.to_vec();
    match variant % 3 {
        0 => area.draw(&PathElement::new(line, style))?,
        1 => area.draw(&DashedPathElement::new(line, 8, 5, style))?,
        _ => area.draw(&DashedPathElement::new(line, 2, 4, style))?,
    }
    for p in points {
        let at = || EmptyElement::at(p.clone());
        match variant % 5 {
            0 => area.draw(&Circle::new(p.clone(), 3, colour.filled()))?,
            1 => area.draw(&TriangleMarker::new(p.clone(), 5, colour.filled()))?,
            2 => area.draw(&Cross::new(p.clone(), 4, colour.stroke_width(2)))?,
            3 => area.draw(&(at() + Rectangle::new([(-3, -3), (3, 3)], colour.filled())))?,
            _ => area.draw(&Circle::new(p.clone(), 4, colour.stroke_width(2)))?,
        }
    }
    Ok(())
}

/// The legend, in rows of [`LEGEND_COLUMNS`] entries, on its own strip below
/// the chart.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[Series],
    styles: &[(RGBColor, usize)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let column = (WIDTH as i32 - 40) / LEGEND_COLUMNS as i32;
    for (i, (s, &(colour, variant))) in series.iter().zip(styles).enumerate() {
        let x = 40 + (i % LEGEND_COLUMNS) as i32 * column;
        let y = 6 + (i / LEGEND_COLUMNS) as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        draw_line(area, &[(x, y), (x + 28, y)], colour, variant)?;
        area.draw(&Text::new(
            s.label.clone(),
            (x + 36, y - 7),
            ("sans-serif", 13).into_font(),
        ))?;
    }
    Ok(())
}

/// Writes `plot` as an SVG file.
pub fn write_svg(path: &Path, plot: &LinePlot) -> Result<(), PlotError> {
    draw(path, plot).map_err(|e| PlotError {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn draw(path: &Path, plot: &LinePlot) -> Result<(), Box<dyn std::error::Error>> {
    // Power-of-two axes are drawn in log2 space, so ticks fall on powers of two.
    let log2 = matches!(plot.x, XAxis::Bytes | XAxis::PowersOfTwo);
    let tx = |x: f64| if log2 { x.log2() } else { x };
    let log_y = plot.log_y
        && plot
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .all(|p| p.1 > 0.0);
    let series: Vec<Series> = plot
        .series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s.points.iter().map(|&(x, y)| (tx(x), y)).collect(),
            interval: s.interval.clone(),
        })
        .collect();
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = bounds(all().map(|p| p.0));
    let (x0, x1) = if log2 {
        (x0.floor(), x1.ceil().max(x0.floor() + 1.0))
    } else {
        (x0, x1)
    };
    let (y0, y1) = bounds(
        all().map(|p| p.1).chain(
            series
                .iter()
                .flat_map(|s| s.interval.iter().flat_map(|i| [i.0, i.1])),
        ),
    );
    let pad = (y1 - y0) * 0.08;
    let (y0, y1) = if log_y {
        (y0 / 1.5, y1 * 1.5)
    } else {
        (if y0 >= 0.0 { 0f64.min(y0) } else { y0 - pad }, y1 + pad)
    };
    let styles = styles(&series);
    let height = CHART_HEIGHT + legend_height(series.len());
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (chart_area, legend_area) = root.split_vertically(CHART_HEIGHT);
    let x_ticks = ((x1 - x0) as usize + 1).clamp(2, 12);
    let x_fmt = |x: &f64| match plot.x {
        XAxis::Linear => tick(*x),
        XAxis::Bytes => pow2_tick(*x, true),
        XAxis::PowersOfTwo => pow2_tick(*x, false),
    };
    let mut builder = ChartBuilder::on(&chart_area);
    builder
        .caption(&plot.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(&plot.x_label)
                .y_desc(&plot.y_label)
                .x_labels(if log2 { x_ticks } else { 10 })
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&|y: &f64| tick(*y))
                .draw()?;
            let area = chart.plotting_area();
            for (s, &(colour, variant)) in series.iter().zip(&styles) {
                draw_line(area, &s.points, colour, variant)?;
                for (&(x, _), &(lo, hi)) in s.points.iter().zip(&s.interval) {
                    let style = colour.stroke_width(1);
                    area.draw(&PathElement::new(vec![(x, lo), (x, hi)], style))?;
                    for y in [lo, hi] {
                        area.draw(&Cross::new((x, y), 3, style))?;
                    }
                }
            }
        }};
    }
    if log_y {
        draw!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?);
    } else {
        draw!(builder.build_cartesian_2d(x0..x1, y0..y1)?);
    }
    draw_legend(&legend_area, &series, &styles)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_the_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let series = vec![Series::new(
            "zero-copy",
            vec![(16.0, 30.0), (1024.0, 10.0), (65536.0, 2.0)],
        )];
        let plot = LinePlot::new("improvement", XAxis::PowersOfTwo, "FFT length", "%", series);
        write_svg(&path, &plot.log_y()).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for needle in ["improvement", "FFT length", "zero-copy", "<polyline"] {
            assert!(svg.contains(needle), "missing {needle}");
        }
    }

    #[test]
    fn ticks_have_no_spurious_decimals() {
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.125), "0.125");
        assert_eq!(tick(33.333_333), "33.3");
        assert_eq!(pow2_tick(12.0, true), "4 KiB");
        assert_eq!(pow2_tick(20.0, true), "1 MiB");
        assert_eq!(pow2_tick(6.0, true), "64 B");
        assert_eq!(pow2_tick(10.0, false), "1024");
        assert_eq!(pow2_tick(10.5, true), "");
    }

    #[test]
    fn a_mode_keeps_its_colour_across_plots_and_variants_differ() {
        assert_eq!(
            mode_colour("poll zerocopy"),
            mode_colour("poll copy single")
        );
        assert_ne!(mode_colour("poll"), mode_colour("irq"));
        assert_eq!(mode_colour("unheard of"), None);
        let s = |l: &str| Series::new(l, vec![(1.0, 1.0)]);
        let st = styles(&[s("irq zerocopy"), s("poll"), s("irq copy")]);
        assert_eq!(st[0].0, st[2].0);
        assert_eq!((st[0].1, st[2].1), (0, 1));
    }

    #[test]
    fn byte_axes_are_labelled_in_binary_units_and_the_legend_is_below() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.svg");
        let series = vec![Series {
            label: "poll".into(),
            points: vec![(64.0, 1.0), (4096.0, 3.0), (1048576.0, 700.0)],
            interval: vec![(0.5, 1.5), (2.0, 4.0), (600.0, 800.0)],
        }];
        let plot = LinePlot::new("t", XAxis::Bytes, "size", "time (us)", series).log_y();
        write_svg(&path, &plot).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap().replace('\n', "");
        for needle in [">64 B<", ">4 KiB<", ">1 MiB<", ">poll<"] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        assert!(!svg.contains(".0<"), "a tick label with a spurious .0");
        // The legend's text sits below the chart area.
        let legend_y: f64 = svg
            .split("<text")
            .find(|t| t.contains(">poll<"))
            .and_then(|t| t.split("y=\"").nth(1))
            .and_then(|t| t.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(legend_y > f64::from(CHART_HEIGHT), "legend at y={legend_y}");
    }

    #[test]
    fn unwritable_path_is_an_error() {
        let series = vec![Series::new("x", vec![(1.0, 1.0)])];
        let plot = LinePlot::new("t", XAxis::Linear, "x", "y", series);
        assert!(write_svg(Path::new("/nonexistent-dir/p.svg"), &plot).is_err());
    }
}
