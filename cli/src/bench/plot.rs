//! The SVG plot of `mgws bench`: median tasks/s against workers per method, with min-max bars;
//! the sequential rate as a dashed horizontal line.

use std::path::Path;

use plotters::prelude::*;

use super::{Method, Summary};

fn color(m: Method) -> RGBColor {
    match m {
        Method::Mgws => RGBColor(0xd6, 0x27, 0x28),
        Method::Static => RGBColor(0x1f, 0x77, 0xb4),
        Method::Rayon => RGBColor(0x2c, 0xa0, 0x2c),
        Method::Sequential => RGBColor(0x55, 0x55, 0x55),
        Method::Levels => RGBColor(0xff, 0x7f, 0x0e),
    }
}

/// Draws `summary` to `path`.
pub fn tasks_per_s(
    path: &Path,
    title: &str,
    summary: &[Summary],
) -> Result<(), Box<dyn std::error::Error>> {
    let xs: Vec<u32> = summary
        .iter()
        .filter(|s| s.method != Method::Sequential)
        .map(|s| s.workers)
        .collect();
    let (xmin, xmax) = (
        xs.iter().copied().min().unwrap_or(1) as f64,
        xs.iter().copied().max().unwrap_or(1) as f64,
    );
    let pad = ((xmax - xmin) * 0.05).max(0.5);
    let ymax = summary.iter().map(|s| s.max).fold(0.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d((xmin - pad)..(xmax + pad), 0.0..ymax.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("workers")
        .y_desc("tasks/s")
        .x_labels(((xmax - xmin) as usize + 3).clamp(3, 33))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 1.0 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.2e}"))
        .draw()?;
    for method in [Method::Mgws, Method::Static, Method::Rayon] {
        let pts: Vec<&Summary> = summary.iter().filter(|s| s.method == method).collect();
        if pts.is_empty() {
            continue;
        }
        let c = color(method);
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|s| (s.workers as f64, s.median)),
                c.stroke_width(2),
            ))?
            .label(method.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(
            pts.iter()
                .map(|s| Circle::new((s.workers as f64, s.median), 4, c.filled())),
        )?;
        chart.draw_series(pts.iter().map(|s| {
            PathElement::new(
                vec![(s.workers as f64, s.min), (s.workers as f64, s.max)],
                c.stroke_width(1),
            )
        }))?;
    }
    if let Some(seq) = summary.iter().find(|s| s.method == Method::Sequential) {
        let c = color(Method::Sequential);
        // Dashed: short segments along the x range.
        let (a, b) = (xmin - pad, xmax + pad);
        let step = (b - a) / 60.0;
        let segs: Vec<PathElement<(f64, f64)>> = (0..60)
            .step_by(2)
            .map(|i| {
                let x = a + i as f64 * step;
                PathElement::new(vec![(x, seq.median), (x + step, seq.median)], c)
            })
            .collect();
        chart
            .draw_series(segs)?
            .label("sequential")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
