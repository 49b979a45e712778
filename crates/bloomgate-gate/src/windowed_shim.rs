//! TEMPORARY stand-in for `bloomgate::WindowedBloomFilter` (same API contract) until the core's
//! filters/windowed.rs lands; deleted then.

use bloomgate::bits::BitArray;
use bloomgate::{KeyHash, Layout, Params, Result};

#[derive(Clone, Debug)]
pub struct WindowConfig {
    pub generations: usize,
    pub items_per_generation: u64,
    pub fpr: f64,
    pub generation_window_ms: Option<u64>,
}

struct Generation {
    bits: BitArray,
    len: u64,
}

pub struct WindowedBloomFilter {
    config: WindowConfig,
    params: Params,
    gens: Vec<Generation>, // gens[0] newest
    started_ms: u64,
}

impl WindowedBloomFilter {
    pub fn new(config: WindowConfig, now_ms: u64) -> Result<Self> {
        let per_gen = 1.0 - (1.0 - config.fpr).powf(1.0 / config.generations as f64);
        let params = Params::for_items(Layout::Classic, config.items_per_generation, per_gen)?;
        let gens = (0..config.generations)
            .map(|_| Generation {
                bits: BitArray::zeroed(params.words()),
                len: 0,
            })
            .collect();
        Ok(WindowedBloomFilter {
            config,
            params,
            gens,
            started_ms: now_ms,
        })
    }
    pub fn insert(&mut self, key: impl AsRef<[u8]>, now_ms: u64) -> bool {
        self.rotate_if_due(now_ms);
        self.insert_hash(KeyHash::of(key.as_ref(), 0), now_ms)
    }
    pub fn insert_hash(&mut self, h: KeyHash, now_ms: u64) -> bool {
        self.rotate_if_due(now_ms);
        let was = self.contains_hash(h);
        let g = &mut self.gens[0];
        for p in h.classic_probes(self.params.bits, self.params.hashes) {
            g.bits.set(p);
        }
        g.len += 1;
        was
    }
    pub fn contains(&self, key: impl AsRef<[u8]>) -> bool {
        self.contains_hash(KeyHash::of(key.as_ref(), 0))
    }
    pub fn contains_hash(&self, h: KeyHash) -> bool {
        self.gens.iter().any(|g| {
            h.classic_probes(self.params.bits, self.params.hashes)
                .all(|p| g.bits.get(p))
        })
    }
    pub fn rotate(&mut self, now_ms: u64) {
        let _ = now_ms;
        let mut oldest = self.gens.pop().expect("generations >= 1");
        oldest.bits = BitArray::zeroed(self.params.words());
        oldest.len = 0;
        self.gens.insert(0, oldest);
    }
    pub fn rotate_if_due(&mut self, now_ms: u64) -> bool {
        let Some(w) = self.config.generation_window_ms else {
            return false;
        };
        let mut rotated = false;
        let mut steps = 0;
        while now_ms >= self.started_ms + w && steps < self.config.generations {
            self.started_ms += w;
            self.rotate(now_ms);
            rotated = true;
            steps += 1;
        }
        if now_ms >= self.started_ms + w {
            self.started_ms = now_ms - (now_ms - self.started_ms) % w;
        }
        rotated
    }
    pub fn estimated_fpr(&self) -> f64 {
        let miss: f64 = self
            .gens
            .iter()
            .map(|g| 1.0 - self.params.fpr_at(g.len))
            .product();
        1.0 - miss
    }
    pub fn memory_bytes(&self) -> usize {
        self.gens.len() * self.params.bytes() as usize
    }
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }
}
