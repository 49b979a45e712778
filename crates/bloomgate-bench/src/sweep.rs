//! Accuracy sweep: measured FPR against the model for every Bloom contender across bits per item
//! 4…24 and at power-of-two sizes — where a flaw in how a filter hashes or places its probes shows
//! up as measured rates far above the model.

use crate::contender::{Contender, Plan};
use crate::keys::Key;
use serde::Serialize;

/// One measured point of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// The contender's name.
    pub filter: &'static str,
    /// Keys inserted.
    pub items: u64,
    /// Allocated bits per item.
    pub bits_per_item: f64,
    /// Whether the filter was sized to a power-of-two number of bits.
    pub power_of_two_bits: bool,
    /// The measured false-positive rate.
    pub fpr: f64,
    /// The rate the contender's model predicts, where it has one.
    pub model_fpr: Option<f64>,
    /// Absent keys probed.
    pub probes: u64,
}

impl SweepPoint {
    /// measured / model, and the same ratio allowing 3 standard errors of sampling noise.
    pub fn ratio(&self) -> Option<(f64, f64)> {
        let model = self.model_fpr.filter(|&m| m > 0.0)?;
        let sigma = (model * (1.0 - model) / self.probes as f64).sqrt();
        Some((self.fpr / model, (self.fpr - 3.0 * sigma).max(0.0) / model))
    }
}

/// Builds `C` for `plan` and measures its FPR on `absent`.
pub fn point<C: Contender>(
    plan: &Plan,
    absent: &[Key],
    power_of_two_bits: bool,
) -> Result<SweepPoint, String> {
    let (filter, _) = C::build(plan)?;
    let positives = absent.iter().filter(|k| filter.contains(k)).count();
    Ok(SweepPoint {
        filter: C::NAME,
        items: plan.items,
        bits_per_item: filter.memory_bytes() as f64 * 8.0 / plan.items as f64,
        power_of_two_bits,
        fpr: positives as f64 / absent.len() as f64,
        model_fpr: filter.model_fpr(plan.items),
        probes: absent.len() as u64,
    })
}

/// The plans of a sweep: `items` keys at each of `bits_per_item`, then power-of-two sizes of
/// `pow2_bits` bits at 8, 12, 16, 20 and 24 bits per item.
pub fn plans(items: u64, bits_per_item: &[f64], pow2_bits: u64) -> Vec<(Plan, bool)> {
    let mut plans: Vec<(Plan, bool)> = bits_per_item
        .iter()
        .map(|&c| (Plan::at_bits(items, c), false))
        .collect();
    plans.extend(
        [8u64, 12, 16, 20, 24]
            .iter()
            .map(|&c| (Plan::sized(pow2_bits / c, pow2_bits), true)),
    );
    plans
}

/// Prints the sweep on stderr, flagging points more than 5% above the model beyond 3σ noise.
pub fn print(points: &[SweepPoint]) {
    eprintln!("\n== accuracy sweep: measured FPR vs model");
    eprintln!(
        "{:<20} {:>10} {:>8} {:>5} {:>12} {:>12} {:>8} {:>10}",
        "filter", "items", "bits/it", "pow2", "FPR", "model", "ratio", "ratio-3σ"
    );
    for p in points {
        let (ratio, low) = p.ratio().map_or(("-".into(), "-".into()), |(r, l)| {
            (format!("{r:.3}"), format!("{l:.3}"))
        });
        let flag = p.ratio().is_some_and(|(_, l)| l > 1.05);
        eprintln!(
            "{:<20} {:>10} {:>8.2} {:>5} {:>12.4e} {:>12} {:>8} {:>10}{}",
            p.filter,
            p.items,
            p.bits_per_item,
            if p.power_of_two_bits { "yes" } else { "" },
            p.fpr,
            p.model_fpr.map_or("-".into(), |m| format!("{m:.4e}")),
            ratio,
            low,
            if flag { "  <-- above model" } else { "" }
        );
    }
}
