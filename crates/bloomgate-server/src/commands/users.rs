//! ACL users and what they may run: passwords kept as SHA-256 digests and compared in constant
//! time, command rules (`+@category`, `-command`, …) resolved against a command table, key
//! and channel patterns, and Redis' descriptions of a user (`ACL LIST`, `ACL GETUSER`). No
//! command layer here: the `ACL` command and the permission check at dispatch are in `acl`.

use std::collections::{BTreeMap, HashSet};

use bloomgate_dialect::commands::{CommandInfo, ACL_CATEGORIES};

use crate::glob::glob_match;

/// Every ACL category: Redis' in its listing order, then the modules' own, in table order.
pub(super) fn categories<C>(table: &[CommandInfo<C>]) -> Vec<&'static str> {
    let mut all = ACL_CATEGORIES.to_vec();
    for c in table
        .iter()
        .flat_map(|c| c.category.split_ascii_whitespace())
    {
        if !all.contains(&c) {
            all.push(c);
        }
    }
    all
}

pub(super) fn commands_in<'t, C>(
    table: &'t [CommandInfo<C>],
    category: &'t str,
) -> impl Iterator<Item = &'t CommandInfo<C>> + 't {
    table
        .iter()
        .filter(move |c| category == "all" || c.acl_categories().contains(&category))
}

/// The commands a user may run: every command but `except`, or only `except`.
#[derive(Clone, Debug, Default)]
struct CommandSet {
    all: bool,
    /// Upper-case names.
    except: HashSet<&'static str>,
}

impl CommandSet {
    fn allows(&self, name: &str) -> bool {
        self.all != self.except.contains(name)
    }

    fn set(&mut self, name: &'static str, allow: bool) {
        if allow == self.all {
            self.except.remove(name);
        } else {
            self.except.insert(name);
        }
    }

    fn everything(allow: bool) -> Self {
        Self {
            all: allow,
            except: HashSet::new(),
        }
    }
}

/// One user.
#[derive(Clone, Debug)]
pub struct User {
    pub(super) enabled: bool,
    pub(super) nopass: bool,
    /// `Some(true)` after `sanitize-payload`, `Some(false)` after `skip-sanitize-payload`
    /// (accepted and shown, as Redis does; RESTORE payloads are always validated here).
    sanitize: Option<bool>,
    /// SHA-256 digests of the passwords, in the order they were added.
    pub(super) passwords: Vec<[u8; 32]>,
    /// The commands the user may run.
    allowed: CommandSet,
    /// Whether the command rules started from `+@all` (else `-@all`).
    from_all: bool,
    /// The command rules applied since the last `+@all`/`-@all`, lower-case, for display.
    rules: Vec<String>,
    all_keys: bool,
    key_patterns: Vec<Vec<u8>>,
    /// Channel rules: PUBLISH and SUBSCRIBE need a channel matching one of the patterns,
    /// PSUBSCRIBE a pattern equal to one (as Redis checks them).
    all_channels: bool,
    channel_patterns: Vec<Vec<u8>>,
}

/// Redis' reasons for refusing an `ACL SETUSER` rule.
const ERR_UNKNOWN: &str = "Unknown command or category name in ACL";
const ERR_SYNTAX: &str = "Syntax error";
const ERR_KEY_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const ERR_CHANNEL_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
const ERR_NO_SUCH_PASSWORD: &str =
    "The password you are trying to remove from the user does not exist";
const ERR_BAD_HASH: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";

/// SHA-256 of a password, as Redis keeps it.
pub(super) fn digest(password: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(password).into()
}

/// A `#<hash>`/`!<hash>` argument: exactly 64 lower-case hex digits.
pub(super) fn parse_hash(hex: &[u8]) -> Result<[u8; 32], &'static str> {
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    if hex.len() != 64 {
        return Err(ERR_BAD_HASH);
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(hex.chunks(2)) {
        *o = nibble(pair[0])
            .zip(nibble(pair[1]))
            .ok_or(ERR_BAD_HASH)
            .map(|(h, l)| h << 4 | l)?;
    }
    Ok(out)
}

pub(super) fn to_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `given` hashes to one of `digests`, comparing every digest in constant time.
pub(super) fn password_in(digests: &[[u8; 32]], given: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    let given = digest(given);
    digests
        .iter()
        .fold(subtle::Choice::from(0), |found, d| found | d.ct_eq(&given))
        .into()
}

impl User {
    /// What `ACL SETUSER` starts a new user from: off, no password, no commands, no keys, no
    /// channels (Redis' default `acl-pubsub-default resetchannels`).
    pub(super) fn blank() -> Self {
        Self {
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            allowed: CommandSet::default(),
            from_all: false,
            rules: Vec::new(),
            all_keys: false,
            key_patterns: Vec::new(),
            all_channels: false,
            channel_patterns: Vec::new(),
        }
    }

    /// Applies one `ACL SETUSER` rule (command rules resolved in `table`); the error is Redis'
    /// reason.
    pub(super) fn apply<C>(
        &mut self,
        rule: &[u8],
        table: &[CommandInfo<C>],
    ) -> Result<(), &'static str> {
        let lower = String::from_utf8_lossy(rule).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "allcommands" | "+@all" => {
                self.allowed = CommandSet::everything(true);
                self.from_all = true;
                self.rules.clear();
            }
            "nocommands" | "-@all" => {
                self.allowed = CommandSet::everything(false);
                self.from_all = false;
                self.rules.clear();
            }
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.key_patterns.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.key_patterns.clear();
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channel_patterns.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channel_patterns.clear();
            }
            "reset" => {
                *self = Self::blank();
                self.sanitize = Some(true);
            }
            _ => match rule.first() {
                Some(b'>') => self.add_password(digest(&rule[1..])),
                Some(b'#') => self.add_password(parse_hash(&rule[1..])?),
                Some(b'<') => self.remove_password(digest(&rule[1..]))?,
                Some(b'!') => self.remove_password(parse_hash(&rule[1..])?)?,
                Some(b'~') => {
                    if self.all_keys {
                        return Err(ERR_KEY_AFTER_ALL);
                    }
                    if !self.key_patterns.iter().any(|p| p == &rule[1..]) {
                        self.key_patterns.push(rule[1..].to_vec());
                    }
                }
                Some(b'&') => {
                    if self.all_channels {
                        return Err(ERR_CHANNEL_AFTER_ALL);
                    }
                    if !self.channel_patterns.iter().any(|p| p == &rule[1..]) {
                        self.channel_patterns.push(rule[1..].to_vec());
                    }
                }
                Some(&sign @ (b'+' | b'-')) => {
                    self.command_rule(sign == b'+', &lower[1..], table)?
                }
                _ => return Err(ERR_SYNTAX),
            },
        }
        Ok(())
    }

    fn add_password(&mut self, digest: [u8; 32]) {
        self.nopass = false;
        if !self.passwords.contains(&digest) {
            self.passwords.push(digest);
        }
    }

    fn remove_password(&mut self, digest: [u8; 32]) -> Result<(), &'static str> {
        self.nopass = false;
        let before = self.passwords.len();
        self.passwords.retain(|p| p != &digest);
        if self.passwords.len() == before {
            return Err(ERR_NO_SUCH_PASSWORD);
        }
        Ok(())
    }

    /// `+@category`, `-@category`, `+command`, `-command`. A command's rule replaces an
    /// earlier rule for the same command in the description, as Redis 7.2+ shows it.
    fn command_rule<C>(
        &mut self,
        allow: bool,
        what: &str,
        table: &[CommandInfo<C>],
    ) -> Result<(), &'static str> {
        let names: Vec<&'static str> = match what.strip_prefix('@') {
            Some(category) if categories(table).contains(&category) => {
                commands_in(table, category).map(|c| c.name).collect()
            }
            Some(_) => return Err(ERR_UNKNOWN),
            None => {
                let spec = table
                    .iter()
                    .find(|c| c.name.eq_ignore_ascii_case(what))
                    .ok_or(ERR_UNKNOWN)?;
                self.rules.retain(|r| r[1..] != *what);
                vec![spec.name]
            }
        };
        for name in names {
            self.allowed.set(name, allow);
        }
        self.rules
            .push(format!("{}{what}", if allow { '+' } else { '-' }));
        Ok(())
    }

    fn may_use_channel(&self, channel: &[u8], literal: bool) -> bool {
        self.all_channels
            || self.channel_patterns.iter().any(|p| {
                if literal {
                    p == channel
                } else {
                    glob_match(p, channel, false)
                }
            })
    }

    fn may_access(&self, key: &[u8]) -> bool {
        self.all_keys || self.key_patterns.iter().any(|p| glob_match(p, key, false))
    }

    pub(super) fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Some(true) => flags.push("sanitize-payload"),
            Some(false) => flags.push("skip-sanitize-payload"),
            None => {}
        }
        flags
    }

    pub(super) fn command_description(&self) -> String {
        let mut out = String::from(if self.from_all { "+@all" } else { "-@all" });
        for rule in &self.rules {
            out.push(' ');
            out.push_str(rule);
        }
        out
    }

    pub(super) fn keys_description(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        join(self.key_patterns.iter().map(|p| [&b"~"[..], p].concat()))
    }

    pub(super) fn channels_description(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        join(
            self.channel_patterns
                .iter()
                .map(|p| [&b"&"[..], p].concat()),
        )
    }

    /// The user as one `ACL LIST` line (Redis' config-file format).
    pub(super) fn describe(&self, name: &[u8]) -> Vec<u8> {
        let mut words: Vec<Vec<u8>> = vec![b"user".to_vec(), name.to_vec()];
        words.extend(self.flags().iter().map(|f| f.as_bytes().to_vec()));
        words.extend(
            self.passwords
                .iter()
                .map(|d| format!("#{}", to_hex(d)).into_bytes()),
        );
        let keys = self.keys_description();
        if !keys.is_empty() {
            words.push(keys);
        }
        if !self.all_channels {
            words.push(b"resetchannels".to_vec());
        }
        let channels = self.channels_description();
        if !channels.is_empty() {
            words.push(channels);
        }
        words.push(self.command_description().into_bytes());
        join(words.into_iter())
    }
}

pub(super) fn join(words: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for w in words {
        if !out.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(&w);
    }
    out
}

/// The users, `default` always among them.
#[derive(Clone, Debug)]
pub struct Acl {
    pub(super) users: BTreeMap<Vec<u8>, User>,
}

impl Default for Acl {
    /// Redis' initial state: `default` on, nopass, every command, every key and channel.
    fn default() -> Self {
        let mut default = User::blank();
        for rule in ["on", "nopass", "allcommands", "allkeys", "allchannels"] {
            default
                .apply::<()>(rule.as_bytes(), &[])
                .expect("a valid rule");
        }
        Self {
            users: BTreeMap::from([(b"default".to_vec(), default)]),
        }
    }
}

/// Why a user may not run a command.
pub(super) enum Denied {
    Command,
    Key(Vec<u8>),
    Channel(Vec<u8>),
}

pub(super) fn denied<C, A: AsRef<[u8]>>(
    user: &User,
    spec: &CommandInfo<C>,
    args: &[A],
) -> Option<Denied> {
    if !user.allowed.allows(spec.name) {
        return Some(Denied::Command);
    }
    if !user.all_keys {
        // Arguments that do not hold the keys the spec promises fail in the command itself.
        let keys = spec.key_positions(args).unwrap_or_default();
        let mut keys = keys.into_iter().map(|(at, _)| args[at].as_ref());
        if let Some(key) = keys.find(|k| !user.may_access(k)) {
            return Some(Denied::Key(key.to_vec()));
        }
    }
    let channels = match spec.name {
        "PUBLISH" => args.get(1..2),
        "SUBSCRIBE" | "PSUBSCRIBE" => args.get(1..),
        _ => None,
    };
    let literal = spec.name == "PSUBSCRIBE";
    if let Some(c) = channels
        .into_iter()
        .flatten()
        .find(|c| !user.may_use_channel(c.as_ref(), literal))
    {
        return Some(Denied::Channel(c.as_ref().to_vec()));
    }
    None
}

/// Password check in constant time (no early exit on the first differing byte).
pub(super) fn password_matches(expected: &str, given: &[u8]) -> bool {
    let expected = expected.as_bytes();
    let mut diff = (expected.len() ^ given.len()) as u8 | u8::from(expected.len() != given.len());
    for (i, &b) in given.iter().enumerate() {
        diff |= b ^ expected
            .get(i % expected.len().max(1))
            .copied()
            .unwrap_or(0);
    }
    diff == 0
}
