//! The simulated service's world: users with Pareto activity and their starting histories, the
//! request stream (identical for every mode), article popularity, and the ground truth of what
//! each user has seen, kept outside the gate.

use std::collections::{HashMap, HashSet, VecDeque};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{FeedConfig, CATALOGUE, CLOCK_START_MS, RETENTION_MS, RUN_RETENTIONS};
use crate::Seen;

/// The users, their starting histories and the request stream: identical for every mode.
pub(super) struct Workload {
    /// Cumulative activity weights (heavy users request more).
    cumulative_weight: Vec<f64>,
    /// Items each user starts with (a deterministic function of user and seed).
    history_len: Vec<u64>,
    /// (user, time) per request, in time order.
    pub requests: Vec<(u64, u64)>,
    seed: u64,
}

impl Workload {
    pub fn new(config: &FeedConfig) -> Self {
        let mut rng = SmallRng::seed_from_u64(config.seed);
        // Activity ~ Pareto(α = 1.5), capped at 100× the minimum: a few heavy users, a long tail
        // of light ones. Histories follow activity with log-normal noise (σ ≈ 0.5), so some users
        // outgrow the filter their history sized and get rebuilt.
        let weights: Vec<f64> = (0..config.users)
            .map(|_| (1.0 - rng.random::<f64>()).powf(-1.0 / 1.5).min(100.0))
            .collect();
        let mean_weight = weights.iter().sum::<f64>() / weights.len() as f64;
        let history_len = weights
            .iter()
            .map(|w| {
                let noise = (0.5 * standard_normal(&mut rng) - 0.125).exp();
                (config.history as f64 * w / mean_weight * noise).round() as u64
            })
            .collect();
        let mut total = 0.0;
        let cumulative_weight = weights
            .iter()
            .map(|w| {
                total += w;
                total
            })
            .collect();
        let span = RETENTION_MS * RUN_RETENTIONS;
        let mut requests: Vec<(u64, u64)> = (0..config.requests)
            .map(|i| (0, CLOCK_START_MS + i * span / config.requests))
            .collect();
        let mut workload = Workload {
            cumulative_weight,
            history_len,
            requests: Vec::new(),
            seed: config.seed,
        };
        for request in &mut requests {
            request.0 = workload.pick_user(&mut rng);
        }
        workload.requests = requests;
        workload
    }

    fn pick_user(&self, rng: &mut SmallRng) -> u64 {
        let total = *self.cumulative_weight.last().expect("at least one user");
        let target = rng.random::<f64>() * total;
        self.cumulative_weight
            .partition_point(|&c| c < target)
            .min(self.cumulative_weight.len() - 1) as u64
    }

    /// The user's starting history: distinct popular items at times spread over the last R.
    pub fn history(&self, user: u64) -> Vec<Seen> {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ user.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut items = HashSet::new();
        let want = self.history_len[user as usize].min(CATALOGUE / 10);
        while (items.len() as u64) < want {
            items.insert(popular_item(&mut rng));
        }
        let mut seen: Vec<Seen> = items
            .into_iter()
            .map(|item| Seen {
                item,
                at_ms: CLOCK_START_MS - 1 - rng.random_range(0..RETENTION_MS - 1),
            })
            .collect();
        seen.sort_unstable_by_key(|s| (s.at_ms, s.item));
        seen
    }
}

fn standard_normal(rng: &mut SmallRng) -> f64 {
    // Box–Muller.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Article popularity: id = ⌊N·u²⌋ puts density ∝ 1/√id on the catalogue, so popular articles
/// come back as candidates (and as cache hits) while the tail stays long.
pub(super) fn popular_item(rng: &mut SmallRng) -> u64 {
    let u = rng.random::<f64>();
    ((CATALOGUE as f64) * u * u) as u64
}

/// Ground truth for one user, outside the gate.
#[derive(Default)]
pub(super) struct UserTruth {
    last_seen: HashMap<u64, u64>,
    /// Sightings in time order, for sampling a seen item (entries may be superseded).
    sightings: VecDeque<(u64, u64)>,
}

impl UserTruth {
    pub fn is_seen(&self, item: u64, since_ms: u64) -> bool {
        self.last_seen.get(&item).is_some_and(|&at| at >= since_ms)
    }

    pub fn record(&mut self, item: u64, at_ms: u64) {
        self.last_seen.insert(item, at_ms);
        self.sightings.push_back((item, at_ms));
    }

    pub fn sample_seen(&mut self, rng: &mut SmallRng, since_ms: u64) -> Option<u64> {
        while self.sightings.front().is_some_and(|&(_, at)| at < since_ms) {
            self.sightings.pop_front();
        }
        if self.sightings.is_empty() {
            return None;
        }
        Some(self.sightings[rng.random_range(0..self.sightings.len())].0)
    }
}
