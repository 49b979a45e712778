//! The `bf-*` and `cf-*` settings: defaults, ranges and the wording of refusals, shared by the
//! server's CONFIG GET/SET and config file and by the module's configs, so both hosts accept
//! and refuse the same values.

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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            bf_error_rate: 0.01,
            bf_initial_size: 100,
            bf_expansion: 2,
            cf_bucket_size: 2,
            cf_initial_size: 1024,
            cf_max_iterations: 20,
            cf_expansion: 1,
            cf_max_expansions: 32,
        }
    }
}

/// The most an error rate may be: larger values are capped to it (RedisBloom 8.x).
pub const MAX_ERROR_RATE: f64 = 0.25;

impl Config {
    /// Setting names, in CONFIG GET order.
    pub const NAMES: [&'static str; 8] = [
        "bf-error-rate",
        "bf-initial-size",
        "bf-expansion-factor",
        "cf-bucket-size",
        "cf-initial-size",
        "cf-max-iterations",
        "cf-expansion-factor",
        "cf-max-expansions",
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
            _ => return None,
        })
    }

    /// Validates and applies one setting (`name` lower-case). `Ok(false)` if the name is not
    /// one of ours; `Err` carries the reason in Redis' CONFIG SET wording.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let int_in = |lo: u64, hi: u64| -> Result<u64, String> {
            match value.parse::<u64>() {
                Ok(v) if (lo..=hi).contains(&v) => Ok(v),
                Ok(_) => Err(format!("argument must be between {lo} and {hi} inclusive")),
                Err(_) => Err("argument couldn't be parsed into an integer".into()),
            }
        };
        match name {
            "bf-error-rate" => match value.parse::<f64>() {
                // Values above 0.25 are accepted and capped (RedisBloom behaviour); subnormal
                // ones are refused (the first link's error/2 would round to 0).
                Ok(v) if (f64::MIN_POSITIVE..1.0).contains(&v) => {
                    self.bf_error_rate = v.min(MAX_ERROR_RATE)
                }
                _ => return Err("argument must be between 0 and 1 exclusive".into()),
            },
            "bf-initial-size" => self.bf_initial_size = int_in(1, 1 << 30)?,
            "bf-expansion-factor" => self.bf_expansion = int_in(0, 32768)? as u32,
            "cf-bucket-size" => self.cf_bucket_size = int_in(1, 255)?,
            "cf-initial-size" => {
                let v = int_in(4, 1 << 30)?;
                if v < 2 * self.cf_bucket_size {
                    return Err("argument must be at least 2 * cf-bucket-size".into());
                }
                self.cf_initial_size = v;
            }
            "cf-max-iterations" => self.cf_max_iterations = int_in(1, 65535)?,
            "cf-expansion-factor" => self.cf_expansion = int_in(0, 32768)?,
            "cf-max-expansions" => self.cf_max_expansions = int_in(1, 65536)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
