//! The `bf-*` and `cf-*` settings and the per-key cap `bloom-memory-usage-limit`: defaults, ranges and the wording of refusals, shared by the
//! server's CONFIG GET/SET and config file and by the module's configs, so both hosts accept
//! and refuse the same values.

use crate::num::{parse_f64, parse_i64, parse_memory};
pub use crate::types::sbchain::ValkeyFlavour;

/// RedisBloom's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `bf-error-rate`: error rate of filters BF.ADD/BF.MADD/BF.INSERT create.
    pub bf_error_rate: f64,
    /// `bf-initial-size`: capacity of auto-created Bloom filters.
    pub bf_initial_size: u64,
    /// `bf-expansion-factor`: growth of auto-created Bloom filters (0 = non-scaling).
    pub bf_expansion: u32,
    /// `cf-bucket-size`: slots per bucket of auto-created cuckoo filters.
    pub cf_bucket_size: u64,
    /// `cf-initial-size`: capacity of auto-created cuckoo filters.
    pub cf_initial_size: u64,
    /// `cf-max-iterations`: kick chain length of auto-created cuckoo filters.
    pub cf_max_iterations: u64,
    /// `cf-expansion-factor`: growth of auto-created cuckoo filters.
    pub cf_expansion: u64,
    /// `cf-max-expansions`: most sub-filters a cuckoo filter may grow to.
    pub cf_max_expansions: u64,
    /// `bloom-memory-usage-limit`: bytes one value (of any of the dialect's types) may take in
    /// all; 0 = no cap. Checked before a value is created or grows from what a client sends;
    /// never against replayed data (see [`crate::budget::KeyCap`]).
    pub memory_usage_limit: u64,
    /// valkey-bloom 1.0's `bloom-tightening-ratio`: how much each new sub-filter's error rate
    /// shrinks in `bloomfltr` filters created without `TIGHTENING` (0.5).
    pub tightening_ratio: f64,
    /// valkey-bloom 1.0's `bloom-use-random-seed`: new `bloomfltr` filters created without
    /// `SEED` get a random seed (yes) or valkey-bloom's fixed one (no).
    pub use_random_seed: bool,
    /// Whose `BF.*` the commands answer as ([`Dialect`]): a load argument of the module, not a
    /// setting `CONFIG SET` changes.
    pub dialect: Dialect,
}

/// Whose `BF.*` the dialect's commands speak: one command model, with a policy where the
/// projects differ (names, arities, option parsing, replies, errors, defaults, replication).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// RedisBloom 8's (the default on Redis and in `bloomgate serve`).
    #[default]
    RedisBloom,
    /// valkey-bloom's, in one of its two released behaviours.
    ValkeyBloom(ValkeyFlavour),
}

impl Dialect {
    /// The dialect a `DIALECT` load argument names (any case).
    pub fn named(name: &str) -> Option<Dialect> {
        match name.to_ascii_lowercase().as_str() {
            "redisbloom" => Some(Dialect::RedisBloom),
            "valkey-bloom" => Some(Dialect::ValkeyBloom(ValkeyFlavour::V1_0)),
            "valkey-bloom-0.1" => Some(Dialect::ValkeyBloom(ValkeyFlavour::V0_1)),
            _ => None,
        }
    }

    /// The valkey-bloom flavour, if this is valkey-bloom's dialect.
    pub fn valkey(self) -> Option<ValkeyFlavour> {
        match self {
            Dialect::ValkeyBloom(flavour) => Some(flavour),
            Dialect::RedisBloom => None,
        }
    }

    /// valkey-bloom's names for our settings in its dialect (`(theirs, ours)`): 0.1.0's
    /// `bloom-max-item-size` and `bloom-expansion-rate`, 1.0's `bloom-capacity`,
    /// `bloom-expansion` and `bloom-fp-rate` (with our ranges).
    pub fn setting_aliases(self) -> &'static [(&'static str, &'static str)] {
        match self.valkey() {
            Some(ValkeyFlavour::V0_1) => &[
                ("bloom-max-item-size", "bf-initial-size"),
                ("bloom-expansion-rate", "bf-expansion-factor"),
            ],
            Some(ValkeyFlavour::V1_0) => &[
                ("bloom-capacity", "bf-initial-size"),
                ("bloom-expansion", "bf-expansion-factor"),
                ("bloom-fp-rate", "bf-error-rate"),
            ],
            None => &[],
        }
    }

    /// Our setting valkey-bloom's name `alias` stands for in this dialect.
    pub fn setting_named(self, alias: &str) -> Option<&'static str> {
        let found = self.setting_aliases().iter().find(|(a, _)| *a == alias);
        found.map(|&(_, name)| name)
    }

    /// The settings a filter is created with by default in this dialect: valkey-bloom 0.1.0's
    /// error rate 0.001 (an f32, as it stores it) and capacity 100000; 1.0's are RedisBloom's
    /// (0.01, 100) with its per-object limit of 128 MB; expansion 2 in all.
    pub fn defaults(self) -> Config {
        let mut config = Config {
            dialect: self,
            ..Config::DEFAULT
        };
        match self.valkey() {
            Some(ValkeyFlavour::V0_1) => {
                config.bf_error_rate = f64::from(0.001f32);
                config.bf_initial_size = 100_000;
            }
            Some(ValkeyFlavour::V1_0) => config.memory_usage_limit = 128 << 20,
            None => {}
        }
        config
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The greatest `bloom-memory-usage-limit` (bytes): i64::MAX, as valkey-bloom's.
pub const MAX_MEMORY_USAGE_LIMIT: u64 = i64::MAX as u64;

/// The most an error rate may be: larger values are capped to it (RedisBloom 8.x).
pub const MAX_ERROR_RATE: f64 = 0.25;

impl Config {
    /// RedisBloom's defaults (a constant, for statics).
    pub const DEFAULT: Config = Config {
        bf_error_rate: 0.01,
        bf_initial_size: 100,
        bf_expansion: 2,
        cf_bucket_size: 2,
        cf_initial_size: 1024,
        cf_max_iterations: 20,
        cf_expansion: 1,
        cf_max_expansions: 32,
        memory_usage_limit: 0,
        tightening_ratio: 0.5,
        use_random_seed: true,
        dialect: Dialect::RedisBloom,
    };

    /// valkey-bloom 1.0's own settings, which only its dialect registers (after [`Self::NAMES`]).
    pub const VALKEY_1_0_NAMES: [&'static str; 2] =
        ["bloom-tightening-ratio", "bloom-use-random-seed"];

    /// The setting at `index` of [`Self::NAMES`] followed by [`Self::VALKEY_1_0_NAMES`].
    pub fn name_at(index: usize) -> Option<&'static str> {
        Self::NAMES
            .get(index)
            .or_else(|| Self::VALKEY_1_0_NAMES.get(index.checked_sub(Self::NAMES.len())?))
            .copied()
    }

    /// Setting names, in CONFIG GET order.
    pub const NAMES: [&'static str; 9] = [
        "bf-error-rate",
        "bf-initial-size",
        "bf-expansion-factor",
        "cf-bucket-size",
        "cf-initial-size",
        "cf-max-iterations",
        "cf-expansion-factor",
        "cf-max-expansions",
        "bloom-memory-usage-limit",
    ];

    /// The value of setting `name` (lower-case) as CONFIG GET shows it; `None` if not ours.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "bf-error-rate" => self.bf_error_rate.to_string(),
            "bf-initial-size" => self.bf_initial_size.to_string(),
            "bf-expansion-factor" => self.bf_expansion.to_string(),
            "cf-bucket-size" => self.cf_bucket_size.to_string(),
            "cf-initial-size" => self.cf_initial_size.to_string(),
            "cf-max-iterations" => self.cf_max_iterations.to_string(),
            "cf-expansion-factor" => self.cf_expansion.to_string(),
            "cf-max-expansions" => self.cf_max_expansions.to_string(),
            "bloom-memory-usage-limit" => self.memory_usage_limit.to_string(),
            "bloom-tightening-ratio" => self.tightening_ratio.to_string(),
            "bloom-use-random-seed" => match self.use_random_seed {
                true => "yes".into(),
                false => "no".into(),
            },
            _ => return None,
        })
    }

    /// Validates and applies one setting (`name` lower-case). `Ok(false)` if the name is not
    /// one of ours; `Err` carries the reason as RedisBloom's module configs word it (the host
    /// prefixes Redis' `CONFIG SET failed (possibly related to argument '...')`): an integer
    /// that does not parse is Redis' own refusal, anything out of range is
    /// ``Value for `name` must be in the range [lo, hi]``.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let range = |lo: &dyn std::fmt::Display, hi: u64| {
            format!("Value for `{name}` must be in the range [{lo}, {hi}]")
        };
        let int_in = |lo: u64, hi: u64| -> Result<u64, String> {
            let v =
                parse_i64(value.as_bytes()).ok_or("argument couldn't be parsed into an integer")?;
            u64::try_from(v)
                .ok()
                .filter(|v| (lo..=hi).contains(v))
                .ok_or_else(|| range(&lo, hi))
        };
        match name {
            "bf-error-rate" => match parse_f64(value.as_bytes()) {
                // Values above 0.25 are accepted and capped (RedisBloom behaviour); subnormal
                // ones are refused (the first link's error/2 would round to 0).
                Some(v) if (f64::MIN_POSITIVE..1.0).contains(&v) => {
                    self.bf_error_rate = v.min(MAX_ERROR_RATE)
                }
                _ => {
                    return Err(format!(
                        "Value for `{name}` must be in the range (0.000000, 1.000000)"
                    ))
                }
            },
            "bf-initial-size" => self.bf_initial_size = int_in(1, 1 << 30)?,
            "bf-expansion-factor" => self.bf_expansion = int_in(0, 32768)? as u32,
            "cf-bucket-size" => self.cf_bucket_size = int_in(1, 255)?,
            "cf-initial-size" => {
                // At least two buckets' worth of slots.
                let lo = (2 * self.cf_bucket_size).max(4);
                self.cf_initial_size = int_in(lo, 1 << 30)?;
            }
            "cf-max-iterations" => self.cf_max_iterations = int_in(1, 65535)?,
            "cf-expansion-factor" => self.cf_expansion = int_in(0, 32768)?,
            "cf-max-expansions" => self.cf_max_expansions = int_in(1, 65536)?,
            // Bytes, or with Redis' memory units (`1mb`); at most i64::MAX, as valkey-bloom.
            "bloom-memory-usage-limit" => {
                let bytes = parse_memory(value).ok_or("argument must be a memory value")?;
                if bytes > MAX_MEMORY_USAGE_LIMIT {
                    return Err(range(&0, MAX_MEMORY_USAGE_LIMIT));
                }
                self.memory_usage_limit = bytes;
            }
            // valkey-bloom 1.0's wording.
            "bloom-tightening-ratio" => match parse_f64(value.as_bytes()) {
                Some(t) if t > 0.0 && t < 1.0 => self.tightening_ratio = t,
                Some(_) => return Err("ERR (0 < tightening ratio range < 1)".into()),
                None => return Err("Invalid floating-point value".into()),
            },
            "bloom-use-random-seed" => {
                self.use_random_seed = match value.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RedisBloom's module-config wording for every setting (a refusal a client compares
    /// against RedisBloom's).
    #[test]
    fn refusals_use_module_config_wording() {
        let mut c = Config::default();
        let cases = [
            ("bf-error-rate", "0", "(0.000000, 1.000000)"),
            ("bf-error-rate", "1", "(0.000000, 1.000000)"),
            ("bf-initial-size", "0", "[1, 1073741824]"),
            ("bf-initial-size", "4294967296", "[1, 1073741824]"),
            ("bf-expansion-factor", "-1", "[0, 32768]"),
            ("cf-bucket-size", "256", "[1, 255]"),
            ("cf-initial-size", "0", "[4, 1073741824]"),
            ("cf-max-iterations", "65536", "[1, 65535]"),
            ("cf-expansion-factor", "32769", "[0, 32768]"),
            ("cf-max-expansions", "65537", "[1, 65536]"),
        ];
        for (name, value, range) in cases {
            assert_eq!(
                c.set(name, value),
                Err(format!("Value for `{name}` must be in the range {range}")),
                "{name} {value}"
            );
        }
        assert_eq!(
            c.set("cf-max-iterations", "x"),
            Err("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(c.set("bf-error-rate", "0.5"), Ok(true));
        assert_eq!(c.bf_error_rate, MAX_ERROR_RATE);
        assert_eq!(c.set("cf-bucket-size", "4"), Ok(true));
        assert_eq!(
            c.set("cf-initial-size", "7"),
            Err("Value for `cf-initial-size` must be in the range [8, 1073741824]".into())
        );
        assert_eq!(c.set("maxmemory", "1"), Ok(false));
        // valkey-bloom 1.0's two, in its wording.
        assert_eq!(
            c.set("bloom-tightening-ratio", "1"),
            Err("ERR (0 < tightening ratio range < 1)".into())
        );
        assert_eq!(
            c.set("bloom-tightening-ratio", "x"),
            Err("Invalid floating-point value".into())
        );
        assert_eq!(c.set("bloom-tightening-ratio", "0.25"), Ok(true));
        assert_eq!(c.get("bloom-tightening-ratio").as_deref(), Some("0.25"));
        assert_eq!(c.set("bloom-use-random-seed", "NO"), Ok(true));
        assert_eq!(c.get("bloom-use-random-seed").as_deref(), Some("no"));
        assert!(c.set("bloom-use-random-seed", "maybe").is_err());
        assert_eq!(Config::name_at(8), Some("bloom-memory-usage-limit"));
        assert_eq!(Config::name_at(10), Some("bloom-use-random-seed"));
        assert_eq!(Config::name_at(11), None);
    }

    #[test]
    fn the_memory_usage_limit_takes_bytes_or_memory_units() {
        let mut c = Config::default();
        assert_eq!(c.get("bloom-memory-usage-limit").as_deref(), Some("0"));
        assert_eq!(c.set("bloom-memory-usage-limit", "1mb"), Ok(true));
        assert_eq!(c.memory_usage_limit, 1 << 20);
        assert_eq!(c.set("bloom-memory-usage-limit", "5000"), Ok(true));
        assert_eq!(c.get("bloom-memory-usage-limit").as_deref(), Some("5000"));
        assert_eq!(
            c.set("bloom-memory-usage-limit", "-1"),
            Err("argument must be a memory value".into())
        );
        assert_eq!(
            c.set("bloom-memory-usage-limit", "9223372036854775808"),
            Err(
                "Value for `bloom-memory-usage-limit` must be in the range [0, 9223372036854775807]"
                    .into()
            )
        );
        assert_eq!(c.memory_usage_limit, 5000);
        assert_eq!(c.set("bloom-memory-usage-limit", "0"), Ok(true));
    }
}
