//! SVG plots (plotters): FPR vs bits per item — measured points over the model curve of each
//! layout — and ns per absent-key query vs filter size, with the memory floor as a line.

use crate::floor::Floor;
use crate::model;
use crate::report::Group;
use crate::sweep::SweepPoint;
use plotters::prelude::*;
use std::path::Path;

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// Writes `fpr_vs_bits.svg` and `query_vs_size.svg` into `dir`.
pub fn write(dir: &Path, groups: &[Group], floors: &[Floor], sweep: &[SweepPoint]) -> PlotResult {
    std::fs::create_dir_all(dir)?;
    fpr_vs_bits(&dir.join("fpr_vs_bits.svg"), groups, sweep)?;
    query_vs_size(&dir.join("query_vs_size.svg"), groups, floors)?;
    Ok(())
}

fn fpr_vs_bits(path: &Path, groups: &[Group], sweep: &[SweepPoint]) -> PlotResult {
    // Measured points: the sweep when it ran, else every measured size of every Bloom contender.
    let mut points: Vec<(String, f64, f64)> = sweep
        .iter()
        .filter(|p| !p.power_of_two_bits && p.fpr > 0.0)
        .map(|p| (p.filter.to_string(), p.bits_per_item, p.fpr))
        .collect();
    if points.is_empty() {
        points = groups
            .iter()
            .flat_map(|g| g.summaries.iter())
            .filter(|s| s.fpr > 0.0)
            .map(|s| (s.filter.to_string(), s.bits_per_item, s.fpr))
            .collect();
    }
    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "False-positive rate vs bits per item (points measured, lines model)",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(3.5f64..24.5f64, (1e-6f64..0.3f64).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("bits per item")
        .y_desc("false-positive rate")
        .draw()?;

    let curve = |f: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        (35..=245)
            .map(|t| t as f64 / 10.0)
            .map(|c| (c, f(c).max(1e-7)))
            .collect()
    };
    let models: [(&str, Vec<(f64, f64)>); 3] = [
        (
            "model: classic, best k",
            curve(&|c| model::classic(c, model::classic_best_k(c), 1.0)),
        ),
        (
            "model: blocked 512-bit, best k",
            curve(&|c| model::blocked(512.0, c, model::blocked512_best_k(c), 1.0)),
        ),
        (
            "model: split block 256-bit, k=8",
            curve(&|c| model::split_block(c, 1.0)),
        ),
    ];
    for (i, (label, data)) in models.into_iter().enumerate() {
        let style = ShapeStyle::from(&BLACK.mix(0.4 + 0.2 * i as f64)).stroke_width(1 + i as u32);
        chart
            .draw_series(LineSeries::new(data, style))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 20, y)],
                    ShapeStyle::from(&BLACK.mix(0.4 + 0.2 * i as f64)).stroke_width(1 + i as u32),
                )
            });
    }
    let mut names: Vec<&str> = points.iter().map(|p| p.0.as_str()).collect();
    names.dedup();
    names.sort_unstable();
    names.dedup();
    for (i, name) in names.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let data: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.0 == *name)
            .map(|p| (p.1, p.2))
            .collect();
        chart
            .draw_series(
                data.into_iter()
                    .map(|(x, y)| Circle::new((x, y), 4, color.filled())),
            )?
            .label(*name)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn query_vs_size(path: &Path, groups: &[Group], floors: &[Floor]) -> PlotResult {
    let summaries: Vec<_> = groups.iter().flat_map(|g| g.summaries.iter()).collect();
    let min_bytes = summaries
        .iter()
        .map(|s| s.bytes)
        .chain(floors.iter().map(|f| f.bytes))
        .min()
        .unwrap_or(1 << 20);
    let max_bytes = summaries
        .iter()
        .map(|s| s.bytes)
        .chain(floors.iter().map(|f| f.bytes))
        .max()
        .unwrap_or(1 << 30);
    let max_ns = summaries
        .iter()
        .map(|s| s.miss_ns)
        .chain(
            floors
                .iter()
                .filter(|f| f.pattern == "independent")
                .map(|f| f.ns_per_line),
        )
        .fold(1.0f64, f64::max);
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Absent-key query cost vs filter size (same run)",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (mib(min_bytes) * 0.7..mib(max_bytes) * 1.4).log_scale(),
            (0.5f64..max_ns * 1.5).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("filter size (MiB)")
        .y_desc("ns per query (absent keys)")
        .draw()?;

    let mut floor: Vec<(f64, f64)> = floors
        .iter()
        .filter(|f| f.pattern == "independent")
        .map(|f| (mib(f.bytes), f.ns_per_line))
        .collect();
    floor.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The single-query floor: hash the key, then one random line read.
    let hash_ns = groups
        .iter()
        .map(|g| g.hash_ns)
        .fold(f64::INFINITY, f64::min);
    let hash_and_floor: Vec<(f64, f64)> = floor.iter().map(|&(x, y)| (x, y + hash_ns)).collect();
    chart
        .draw_series(LineSeries::new(
            floor,
            ShapeStyle::from(&BLACK).stroke_width(3),
        ))?
        .label("floor: independent random 64-byte line reads")
        .legend(|(x, y)| {
            PathElement::new(
                vec![(x, y), (x + 20, y)],
                ShapeStyle::from(&BLACK).stroke_width(3),
            )
        });
    if hash_ns.is_finite() {
        let style = ShapeStyle::from(&BLACK.mix(0.5)).stroke_width(2);
        chart
            .draw_series(LineSeries::new(hash_and_floor, style))?
            .label("hash-only + floor")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }

    let mut names: Vec<&str> = summaries.iter().map(|s| s.filter).collect();
    names.sort_unstable();
    names.dedup();
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for name in &names {
        let mut single: Vec<(f64, f64)> = summaries
            .iter()
            .filter(|s| s.filter == *name)
            .map(|s| (mib(s.bytes), s.miss_ns))
            .collect();
        single.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push((name.to_string(), single));
        let mut batch: Vec<(f64, f64)> = summaries
            .iter()
            .filter(|s| s.filter == *name)
            .filter_map(|s| s.batch_ns.map(|b| (mib(s.bytes), b)))
            .collect();
        if !batch.is_empty() {
            batch.sort_by(|a, b| a.0.total_cmp(&b.0));
            series.push((format!("{name} (batch)"), batch));
        }
    }
    for (i, (label, data)) in series.into_iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart.draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))?;
        chart
            .draw_series(
                data.into_iter()
                    .map(|(x, y)| Circle::new((x, y), 4, color.filled())),
            )?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Summary;

    fn summary(filter: &'static str, bytes: u64, miss_ns: f64, batch_ns: Option<f64>) -> Summary {
        Summary {
            filter,
            config: String::new(),
            bytes,
            bits_per_item: 10.0,
            build_s: 0.1,
            insert_ns: 10.0,
            hit_ns: 5.0,
            miss_ns,
            batch_ns,
            fpr: 0.01,
            model_fpr: Some(0.01),
        }
    }

    #[test]
    fn writes_both_svgs() {
        let dir =
            std::env::temp_dir().join(format!("bloomgate-bench-plots-{}", std::process::id()));
        let groups = vec![
            Group {
                summaries: vec![
                    summary("a", 1 << 20, 3.0, Some(2.0)),
                    summary("b", 1 << 20, 5.0, None),
                ],
                hash_ns: 1.5,
            },
            Group {
                summaries: vec![summary("a", 1 << 28, 30.0, Some(12.0))],
                hash_ns: 1.5,
            },
        ];
        let floors = vec![
            Floor {
                bytes: 1 << 20,
                pattern: "independent",
                ns_per_line: 1.8,
            },
            Floor {
                bytes: 1 << 28,
                pattern: "independent",
                ns_per_line: 10.0,
            },
            Floor {
                bytes: 1 << 28,
                pattern: "dependent",
                ns_per_line: 250.0,
            },
        ];
        let sweep = vec![SweepPoint {
            filter: "a",
            items: 1000,
            bits_per_item: 10.0,
            power_of_two_bits: false,
            fpr: 0.009,
            model_fpr: Some(0.0082),
            probes: 1_000_000,
        }];
        write(&dir, &groups, &floors, &sweep).expect("plots");
        for name in ["fpr_vs_bits.svg", "query_vs_size.svg"] {
            let svg = std::fs::read_to_string(dir.join(name)).expect("svg written");
            assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{name}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
