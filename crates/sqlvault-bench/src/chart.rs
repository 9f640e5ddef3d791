//! PNG charts of the scenarios' results with `plotters` (bitmap backend): one grouped
//! bar chart per [`ChartSpec`], groups along the x axis, one colour per system.
//!
//! Text is rendered with `ab_glyph` from DejaVu Sans, bundled in the binary
//! (`assets/DejaVuSans.ttf`, Bitstream Vera / DejaVu licence), so charts render the
//! same on a machine without fontconfig or any system font.

use std::path::Path;
use std::sync::Once;

use plotters::coord::ranged1d::{IntoSegmentedCoord, SegmentValue};
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::error::{Context, Result};
use crate::harness::{ChartSpec, Row};

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| crate::error::Error::msg("the bundled font is not a valid TrueType font"));
    });
    result
}

const COLOURS: [RGBColor; 8] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0x9c, 0x75, 0x5f),
];

/// Draws `spec` from `rows` into a PNG at `path` (creating its directory).
pub fn grouped_bars(path: &Path, spec: &ChartSpec, rows: &[Row]) -> Result<()> {
    register_font()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let groups: Vec<&String> = spec.groups.iter().filter(|g| rows.iter().any(|r| &r.group == *g)).collect();
    let mut systems: Vec<&String> = Vec::new();
    for r in rows.iter().filter(|r| groups.contains(&&r.group)) {
        if !systems.contains(&&r.system) {
            systems.push(&r.system);
        }
    }
    if groups.is_empty() || systems.is_empty() {
        crate::bail!("no rows to draw for chart {}", spec.name);
    }
    let unit = rows.iter().find(|r| groups.contains(&&r.group)).map(|r| r.unit.label()).unwrap_or("");
    let values: Vec<f64> = rows
        .iter()
        .filter(|r| groups.contains(&&r.group) && r.value.is_finite() && r.value > 0.0)
        .map(|r| r.value)
        .collect();
    // Headroom above the tallest bar for the legend (upper right).
    let top = values.iter().copied().fold(0.0f64, f64::max).max(1e-9);
    let hi = if spec.log_scale { top * 5.0 } else { top * 1.45 };
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min).min(hi) / 2.0;
    let per = systems.len() + 1; // one empty slot between groups
    let slots = groups.len() * per;
    let width = (140 + slots * 26).clamp(900, 2400) as u32;
    let height = 560u32;

    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let caption = format!("{} ({unit}{})", spec.title, if spec.log_scale { ", log scale" } else { "" });
    let x = (0..slots).into_segmented();
    let label_for = |v: &SegmentValue<usize>| -> String {
        match v {
            SegmentValue::CenterOf(i) if i % per == (per - 1) / 2 => {
                groups.get(i / per).map(|g| g.to_string()).unwrap_or_default()
            }
            _ => String::new(),
        }
    };
    macro_rules! draw {
        ($chart:expr, $base:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(slots)
                .x_label_formatter(&label_for)
                .x_label_style((FAMILY, 12))
                .y_desc(unit)
                .y_label_formatter(&|v: &f64| axis_number(*v))
                .y_label_style((FAMILY, 13))
                .draw()
                .map_err(draw_err)?;
            for (si, sys) in systems.iter().enumerate() {
                let colour = COLOURS[si % COLOURS.len()];
                let bars: Vec<Rectangle<(SegmentValue<usize>, f64)>> = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(gi, g)| {
                        let r = rows.iter().find(|r| &r.group == *g && &r.system == *sys)?;
                        if !(r.value.is_finite() && r.value > 0.0) {
                            return None;
                        }
                        let slot = gi * per + si;
                        Some(Rectangle::new(
                            [(SegmentValue::Exact(slot), $base), (SegmentValue::Exact(slot + 1), r.value)],
                            colour.filled(),
                        ))
                    })
                    .collect();
                chart
                    .draw_series(bars)
                    .map_err(draw_err)?
                    .label(sys.as_str())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FAMILY, 13))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(draw_err)?;
        }};
    }
    let mut builder = ChartBuilder::on(&root);
    builder.caption(caption, (FAMILY, 20)).margin(12).x_label_area_size(40).y_label_area_size(70);
    if spec.log_scale {
        draw!(builder.build_cartesian_2d(x, (lo..hi).log_scale()).map_err(draw_err)?, lo);
    } else {
        draw!(builder.build_cartesian_2d(x, 0.0..hi).map_err(draw_err)?, 0.0);
    }
    root.present().map_err(draw_err)?;
    Ok(())
}

/// `2.5M`, `40k`, `120`, `3.5`, `0.25`.
fn axis_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn draw_err(e: impl std::fmt::Display) -> crate::error::Error {
    crate::error::Error::msg(format!("drawing failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Unit;

    fn row(group: &str, system: &str, value: f64) -> Row {
        Row {
            group: group.into(),
            system: system.into(),
            unit: Unit::MBps,
            value,
            min: value,
            max: value,
            reps: 1,
            cpu: 1.0,
            peak_rss_mib: 1.0,
            vs: None,
        }
    }

    #[test]
    fn draws_a_png_with_text() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![row("write", "plain", 100.0), row("write", "sqlvault", 80.0), row("read", "plain", 900.0)];
        for log_scale in [false, true] {
            let spec = ChartSpec {
                name: "t".into(),
                title: "test".into(),
                groups: vec!["write".into(), "read".into()],
                log_scale,
            };
            let p = dir.path().join(format!("t{log_scale}.png"));
            grouped_bars(&p, &spec, &rows).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
        }
        // Text is drawn: a chart with a long title differs from one with a short one.
        let a = dir.path().join("a.png");
        let b = dir.path().join("b.png");
        let mut spec =
            ChartSpec { name: "a".into(), title: "x".into(), groups: vec!["write".into()], log_scale: false };
        grouped_bars(&a, &spec, &rows).unwrap();
        spec.title = "a much longer title".into();
        grouped_bars(&b, &spec, &rows).unwrap();
        assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    }
}
