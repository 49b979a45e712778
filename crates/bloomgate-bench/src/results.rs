//! The measured results the rest of the bench passes around: one table line per contender and
//! size ([`Summary`]) and the JSON rows that follow from it ([`Row`], one per operation). The
//! measuring code (`contender`, `ours`) produces them; `report`, `plots` and the binary read them.

use serde::Serialize;

/// One JSON result row: one contender, one size, one operation.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The contender's name.
    pub filter: String,
    /// How the contender was configured (hash, k, layout, notes).
    pub config: String,
    /// The operation: `insert`, `query_hit`, `query_miss` or `query_miss_batch`.
    pub op: &'static str,
    /// Keys inserted.
    pub items: u64,
    /// Memory used per inserted key, in bits.
    pub bits_per_item: f64,
    /// Time per key of the operation.
    pub ns_per_op: f64,
    /// The measured false-positive rate, on the rows of queries of absent keys.
    pub fpr: Option<f64>,
}

/// One table line: everything measured for one contender at one size.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The contender's name.
    pub filter: &'static str,
    /// How the contender was configured (hash, k, layout, notes).
    pub config: String,
    /// Memory the filter uses.
    pub bytes: u64,
    /// Memory used per inserted key, in bits.
    pub bits_per_item: f64,
    /// Seconds the build took.
    pub build_s: f64,
    /// Build time per inserted key.
    pub insert_ns: f64,
    /// Time per query of a present key.
    pub hit_ns: f64,
    /// Time per query of an absent key.
    pub miss_ns: f64,
    /// Time per absent key of the batched query, where the contender has one.
    pub batch_ns: Option<f64>,
    /// The measured false-positive rate.
    pub fpr: f64,
    /// The false-positive rate the contender's model predicts, where it has one.
    pub model_fpr: Option<f64>,
}

impl Summary {
    /// The JSON rows of this line for a filter of `items` keys: insert, query_hit, query_miss
    /// and, where it was measured, query_miss_batch (the miss rows carry the FPR).
    pub fn rows(&self, items: u64) -> Vec<Row> {
        let row = |op: &'static str, ns: f64, fpr: Option<f64>| Row {
            filter: self.filter.to_string(),
            config: self.config.clone(),
            op,
            items,
            bits_per_item: self.bits_per_item,
            ns_per_op: ns,
            fpr,
        };
        let mut rows = vec![
            row("insert", self.insert_ns, None),
            row("query_hit", self.hit_ns, None),
            row("query_miss", self.miss_ns, Some(self.fpr)),
        ];
        if let Some(ns) = self.batch_ns {
            rows.push(row("query_miss_batch", ns, Some(self.fpr)));
        }
        rows
    }
}
