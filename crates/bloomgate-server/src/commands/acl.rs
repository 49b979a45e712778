//! A minimal, correct subset of Redis ACLs, enough for what RedisBloom's `test_acl` and client
//! code exercise: the `default` user plus named users, each on/off with passwords (or
//! `nopass`), allowed commands built from `+@category` / `-@category` / `+cmd` / `-cmd` rules
//! applied in order, and key patterns (`~pattern`, `allkeys`, `resetkeys`). `ACL CAT`,
//! `ACL SETUSER`, `ACL DELUSER`, `ACL USERS`, `ACL WHOAMI`; `AUTH user pass` goes through
//! [`authenticate`]; [`check`] refuses a command with Redis' `NOPERM` wording. Users live in
//! memory (no ACL file), as with a Redis started without `aclfile`.

use std::collections::{BTreeMap, HashSet};

use bloomgate_dialect::commands::{flags, ACL_CATEGORIES};

use super::host::{text, wrong_arity, Args, Ctx, ServerCommand};
use super::state::Store;
use crate::glob::glob_match;
use crate::resp::Reply;

/// Every ACL category: Redis' in its listing order, then the modules' own, in table order.
fn categories(table: &[ServerCommand]) -> Vec<&'static str> {
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

fn commands_in<'t>(
    table: &'t [ServerCommand],
    category: &'t str,
) -> impl Iterator<Item = &'t ServerCommand> + 't {
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
    enabled: bool,
    nopass: bool,
    /// `Some(true)` after `sanitize-payload`, `Some(false)` after `skip-sanitize-payload`
    /// (accepted and shown, as Redis does; RESTORE payloads are always validated here).
    sanitize: Option<bool>,
    /// SHA-256 digests of the passwords, in the order they were added.
    passwords: Vec<[u8; 32]>,
    /// The commands the user may run.
    allowed: CommandSet,
    /// Whether the command rules started from `+@all` (else `-@all`).
    from_all: bool,
    /// The command rules applied since the last `+@all`/`-@all`, lower-case, for display.
    rules: Vec<String>,
    all_keys: bool,
    key_patterns: Vec<Vec<u8>>,
    /// No pub/sub here: channel rules are kept and shown, and govern nothing.
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
fn digest(password: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(password).into()
}

/// A `#<hash>`/`!<hash>` argument: exactly 64 lower-case hex digits.
fn parse_hash(hex: &[u8]) -> Result<[u8; 32], &'static str> {
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

fn to_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `given` hashes to one of `digests`, comparing every digest in constant time.
fn password_in(digests: &[[u8; 32]], given: &[u8]) -> bool {
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
    fn blank() -> Self {
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
    fn apply(&mut self, rule: &[u8], table: &[ServerCommand]) -> Result<(), &'static str> {
        let lower = text(rule).to_ascii_lowercase();
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
    fn command_rule(
        &mut self,
        allow: bool,
        what: &str,
        table: &[ServerCommand],
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

    fn may_access(&self, key: &[u8]) -> bool {
        self.all_keys || self.key_patterns.iter().any(|p| glob_match(p, key, false))
    }

    fn flags(&self) -> Vec<&'static str> {
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

    fn command_description(&self) -> String {
        let mut out = String::from(if self.from_all { "+@all" } else { "-@all" });
        for rule in &self.rules {
            out.push(' ');
            out.push_str(rule);
        }
        out
    }

    fn keys_description(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        join(self.key_patterns.iter().map(|p| [&b"~"[..], p].concat()))
    }

    fn channels_description(&self) -> Vec<u8> {
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
    fn describe(&self, name: &[u8]) -> Vec<u8> {
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

fn join(words: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
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
    users: BTreeMap<Vec<u8>, User>,
}

impl Default for Acl {
    /// Redis' initial state: `default` on, nopass, every command, every key and channel.
    fn default() -> Self {
        let mut default = User::blank();
        for rule in ["on", "nopass", "allcommands", "allkeys", "allchannels"] {
            default.apply(rule.as_bytes(), &[]).expect("a valid rule");
        }
        Self {
            users: BTreeMap::from([(b"default".to_vec(), default)]),
        }
    }
}

/// Whether the default user needs no password (no `requirepass`, no ACL password): Redis then
/// refuses a one-argument `AUTH`.
pub fn default_is_open(store: &Store) -> bool {
    store.config.requirepass.is_none()
        && store
            .acl
            .users
            .get(&b"default"[..])
            .is_some_and(|u| u.passwords.is_empty())
}

/// Whether `pass` opens `user`. `requirepass` is the default user's password, as in Redis.
/// Passwords are compared as SHA-256 digests in constant time.
pub fn authenticate(store: &Store, user: &[u8], pass: &[u8]) -> bool {
    let Some(u) = store.acl.users.get(user).filter(|u| u.enabled) else {
        return false;
    };
    let requirepass = store
        .config
        .requirepass
        .as_deref()
        .filter(|_| user == b"default");
    match requirepass {
        Some(expected) => password_matches(expected, pass) | password_in(&u.passwords, pass),
        None => u.nopass || password_in(&u.passwords, pass),
    }
}

/// The user as the ACL commands show it: the default user with `requirepass` set shows that
/// password's hash and no `nopass`, as Redis (where `requirepass` sets that user's password).
fn shown(store: &Store, name: &[u8]) -> Option<User> {
    let mut user = store.acl.users.get(name)?.clone();
    if let Some(pass) = store
        .config
        .requirepass
        .as_deref()
        .filter(|_| name == b"default")
    {
        user.nopass = false;
        let d = digest(pass.as_bytes());
        if !user.passwords.contains(&d) {
            user.passwords.insert(0, d);
        }
    }
    Some(user)
}

/// Why a user may not run a command.
enum Denied {
    Command,
    Key(Vec<u8>),
}

fn denied<A: AsRef<[u8]>>(user: &User, spec: &ServerCommand, args: &[A]) -> Option<Denied> {
    if !user.allowed.allows(spec.name) {
        return Some(Denied::Command);
    }
    if !user.all_keys && spec.first_key > 0 {
        let last = match spec.last_key {
            n if n < 0 => args.len() as i64 + i64::from(n),
            n => i64::from(n),
        };
        let mut keys = (i64::from(spec.first_key)..=last)
            .step_by(spec.step.max(1) as usize)
            .filter_map(|i| args.get(i as usize));
        if let Some(key) = keys.find(|k| !user.may_access(k.as_ref())) {
            return Some(Denied::Key(key.as_ref().to_vec()));
        }
    }
    None
}

/// Whether the session's user may run `spec` with `args`: Redis' NOPERM refusals. Commands
/// that need no authentication (AUTH, HELLO, QUIT) are always allowed.
pub fn check<A: AsRef<[u8]>>(
    store: &Store,
    user: &[u8],
    spec: &ServerCommand,
    args: &[A],
) -> Result<(), Reply> {
    if spec.flags.contains(flags::NOAUTH) {
        return Ok(());
    }
    let no_command = || {
        Reply::error(format!(
            "NOPERM User {} has no permissions to run the '{}' command",
            text(user),
            spec.name.to_lowercase()
        ))
    };
    let Some(u) = store.acl.users.get(user) else {
        return Err(no_command());
    };
    match denied(u, spec, args) {
        None => Ok(()),
        Some(Denied::Command) => Err(no_command()),
        Some(Denied::Key(_)) => Err(Reply::error("NOPERM No permissions to access a key")),
    }
}

/// `ACL HELP`: Redis' text for the subcommands served here.
const HELP: [&str; 20] = [
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "LIST",
    "    Show users details in config file format.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

/// `ACL CAT [category]`, `ACL SETUSER user rule...`, `ACL DELUSER user...`, `ACL USERS`,
/// `ACL WHOAMI`, `ACL GETUSER user`, `ACL LIST`, `ACL DRYRUN user command [arg...]`,
/// `ACL HELP`.
pub fn acl(ctx: &mut Ctx, args: &Args) -> Reply {
    let sub = text(args[1]).to_ascii_uppercase();
    let (table, lookup) = (ctx.table, ctx.lookup);
    match (sub.as_str(), args.len()) {
        ("CAT", 2) => Reply::Array(categories(table).into_iter().map(Reply::bulk).collect()),
        ("CAT", 3) => {
            let category = text(args[2]).to_ascii_lowercase();
            if !categories(table).contains(&category.as_str()) {
                return Reply::error(format!("ERR Unknown category '{}'", text(args[2])));
            }
            Reply::Array(
                commands_in(table, &category)
                    .map(|c| Reply::bulk(c.name.to_lowercase()))
                    .collect(),
            )
        }
        ("SETUSER", n) if n >= 3 => {
            let users = &mut ctx.store.acl.users;
            let mut user = users.get(args[2]).cloned().unwrap_or_else(User::blank);
            for rule in &args[3..] {
                if let Err(why) = user.apply(rule, table) {
                    return Reply::error(format!(
                        "ERR Error in ACL SETUSER modifier '{}': {why}",
                        text(rule)
                    ));
                }
            }
            users.insert(args[2].to_vec(), user);
            Reply::ok()
        }
        ("DELUSER", n) if n >= 3 => {
            if args[2..].iter().any(|u| u == b"default") {
                return Reply::error("ERR The 'default' user cannot be removed");
            }
            let removed = args[2..]
                .iter()
                .filter(|u| ctx.store.acl.users.remove(**u).is_some())
                .count();
            Reply::Int(removed as i64)
        }
        ("USERS", 2) => Reply::Array(
            ctx.store
                .acl
                .users
                .keys()
                .map(|u| Reply::bulk(u.clone()))
                .collect(),
        ),
        ("WHOAMI", 2) => Reply::bulk(ctx.session.user.clone()),
        ("LIST", 2) => Reply::Array(
            ctx.store
                .acl
                .users
                .keys()
                .filter_map(|name| Some(Reply::bulk(shown(ctx.store, name)?.describe(name))))
                .collect(),
        ),
        ("GETUSER", 3) => {
            let Some(u) = shown(ctx.store, args[2]) else {
                return Reply::Nil;
            };
            let flags = u.flags().into_iter().map(Reply::bulk).collect();
            let passwords = u.passwords.iter().map(|d| Reply::bulk(to_hex(d))).collect();
            Reply::Map(vec![
                (Reply::bulk("flags"), Reply::Array(flags)),
                (Reply::bulk("passwords"), Reply::Array(passwords)),
                (
                    Reply::bulk("commands"),
                    Reply::bulk(u.command_description()),
                ),
                (Reply::bulk("keys"), Reply::bulk(u.keys_description())),
                (
                    Reply::bulk("channels"),
                    Reply::bulk(u.channels_description()),
                ),
                (Reply::bulk("selectors"), Reply::Array(Vec::new())),
            ])
        }
        ("DRYRUN", n) if n >= 4 => {
            let Some(user) = ctx.store.acl.users.get(args[2]) else {
                return Reply::error(format!("ERR User '{}' not found", text(args[2])));
            };
            let Some(spec) = lookup(args[3]) else {
                return Reply::error(format!("ERR Command '{}' not found", text(args[3])));
            };
            let command = &args[3..];
            if !spec.arity_ok(command.len()) {
                return wrong_arity(spec.name);
            }
            match denied(user, spec, command) {
                None => Reply::ok(),
                Some(Denied::Command) => Reply::bulk(format!(
                    "This user has no permissions to run the '{}' command",
                    spec.name.to_lowercase()
                )),
                Some(Denied::Key(key)) => Reply::bulk(format!(
                    "This user has no permissions to access the '{}' key",
                    text(&key)
                )),
            }
        }
        ("HELP", 2) => Reply::Array(HELP.iter().map(|l| Reply::Simple((*l).into())).collect()),
        (
            "CAT" | "SETUSER" | "DELUSER" | "USERS" | "WHOAMI" | "LIST" | "GETUSER" | "DRYRUN"
            | "HELP",
            _,
        ) => wrong_arity(&format!("acl|{}", sub.to_lowercase())),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            text(args[1])
        )),
    }
}

/// Password check in constant time (no early exit on the first differing byte).
fn password_matches(expected: &str, given: &[u8]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::password_matches;
    use crate::commands::dispatch::testing::Harness;
    use crate::resp::Reply;

    #[test]
    fn password_compare() {
        assert!(password_matches("secret", b"secret"));
        assert!(!password_matches("secret", b"secreT"));
        assert!(!password_matches("secret", b"secret1"));
        assert!(!password_matches("secret", b""));
        assert!(!password_matches("", b"x"));
    }

    fn names(reply: Reply) -> Vec<String> {
        let Reply::Array(items) = reply else {
            panic!("{reply:?}")
        };
        let mut out: Vec<String> = items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        out.sort();
        out
    }

    /// RedisBloom's `test_acl`: the categories list the module's commands; a user without
    /// permissions gets NOPERM; `+@read`, `+@write`, `+@bloom` open what they name.
    #[test]
    fn redisbloom_test_acl() {
        let mut h = Harness::new();
        let cats = names(h.run("ACL CAT"));
        assert!(cats.contains(&"bloom".into()) && cats.contains(&"cuckoo".into()));
        let bloom = names(h.run("ACL CAT bloom"));
        assert_eq!(
            bloom,
            [
                "bf.add",
                "bf.card",
                "bf.debug",
                "bf.exists",
                "bf.info",
                "bf.insert",
                "bf.loadchunk",
                "bf.madd",
                "bf.mexists",
                "bf.reserve",
                "bf.scandump"
            ]
        );
        assert_eq!(names(h.run("ACL CAT cuckoo")).len(), 14);
        assert!(names(h.run("ACL CAT read")).contains(&"bf.exists".into()));

        assert_eq!(h.run("ACL SETUSER testusr on >123 ~* &*"), Reply::ok());
        assert_eq!(h.run("AUTH testusr 123"), Reply::ok());
        assert_eq!(
            h.run("BF.EXISTS k a"),
            Reply::error("NOPERM User testusr has no permissions to run the 'bf.exists' command")
        );
        assert_eq!(h.run("AUTH default x"), Reply::ok());
        assert_eq!(h.run("ACL SETUSER testusr +@read"), Reply::ok());
        assert_eq!(h.run("AUTH testusr 123"), Reply::ok());
        for cmd in [
            "BF.EXISTS k a",
            "BF.MEXISTS k a",
            "BF.CARD k",
            "BF.SCANDUMP k 0",
        ] {
            assert!(
                !matches!(h.run(cmd), Reply::Error(e) if e.starts_with("NOPERM")),
                "{cmd}"
            );
        }
        assert_eq!(
            h.run("BF.RESERVE k 0.01 100"),
            Reply::error("NOPERM User testusr has no permissions to run the 'bf.reserve' command")
        );
        assert_eq!(h.session.user, b"testusr");

        h.run("AUTH default x");
        assert_eq!(
            h.run("ACL SETUSER testusr2 on >123 ~* &* +@bloom"),
            Reply::ok()
        );
        assert_eq!(h.run("AUTH testusr2 123"), Reply::ok());
        assert_eq!(h.run("BF.ADD test foo"), Reply::Bool(true));
        assert_eq!(h.run("BF.EXISTS test foo"), Reply::Bool(true));
        assert_eq!(
            h.run("CF.RESERVE c 100"),
            Reply::error("NOPERM User testusr2 has no permissions to run the 'cf.reserve' command")
        );
    }

    /// Redis checks arity before authentication and permissions.
    #[test]
    fn arity_comes_before_auth_and_acl() {
        let mut h = Harness::new();
        h.session.authenticated = false;
        assert_eq!(
            h.run("BF.ADD k"),
            Reply::error("ERR wrong number of arguments for 'bf.add' command")
        );
        assert_eq!(
            h.run("BF.ADD k x"),
            Reply::error("NOAUTH Authentication required.")
        );
        h.session.authenticated = true;
        h.run("ACL SETUSER none on nopass");
        h.run("AUTH none x");
        assert_eq!(
            h.run("BF.EXISTS k"),
            Reply::error("ERR wrong number of arguments for 'bf.exists' command")
        );
        assert_eq!(
            h.run("BF.EXISTS k x"),
            Reply::error("NOPERM User none has no permissions to run the 'bf.exists' command")
        );
    }

    #[test]
    fn passwords_keys_and_errors() {
        let mut h = Harness::new();
        assert_eq!(
            h.run("ACL SETUSER u on >pw +@all -@cuckoo ~bf:*"),
            Reply::ok()
        );
        let wrongpass =
            Reply::error("WRONGPASS invalid username-password pair or user is disabled.");
        assert_eq!(h.run("AUTH u nope"), wrongpass);
        assert_eq!(h.run("AUTH nobody pw"), wrongpass);
        assert_eq!(h.run("AUTH u pw"), Reply::ok());
        assert_eq!(h.run("BF.ADD bf:1 a"), Reply::Bool(true));
        assert_eq!(
            h.run("BF.ADD other a"),
            Reply::error("NOPERM No permissions to access a key")
        );
        assert!(matches!(h.run("CF.ADD bf:2 a"), Reply::Error(e) if e.starts_with("NOPERM")));
        h.run("AUTH default x");
        assert_eq!(h.run("ACL SETUSER u off"), Reply::ok());
        assert_eq!(h.run("AUTH u pw"), wrongpass);
        assert_eq!(
            h.run("ACL SETUSER u +@nosuch"),
            Reply::error(
                "ERR Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL"
            )
        );
        assert_eq!(
            h.run("ACL CAT nosuch"),
            Reply::error("ERR Unknown category 'nosuch'")
        );
        assert_eq!(h.run("ACL WHOAMI"), Reply::bulk("default"));
        assert_eq!(
            h.run("ACL USERS"),
            Reply::Array(vec![Reply::bulk("default"), Reply::bulk("u")])
        );
        assert_eq!(h.run("ACL DELUSER u"), Reply::Int(1));
        assert!(
            h.run("AUTH pw").is_error(),
            "default is nopass: one-argument AUTH refused"
        );
        assert_eq!(h.run("ACL SETUSER default resetpass >pw"), Reply::ok());
        assert_eq!(h.run("AUTH pw"), Reply::ok());
        assert_eq!(h.run("AUTH nope"), wrongpass);
        assert_eq!(
            h.run("ACL DELUSER default"),
            Reply::error("ERR The 'default' user cannot be removed")
        );
    }

    /// A reply as RESP2 shows it, in the rendering of `tests/data/acl_cases.txt`.
    fn render(reply: &Reply) -> String {
        match reply {
            Reply::Simple(s) => s.clone(),
            Reply::Error(e) => format!("(error) {e}"),
            Reply::Int(n) => format!("(integer) {n}"),
            Reply::Bool(b) => format!("(integer) {}", u8::from(*b)),
            Reply::Nil | Reply::NilArray => "(nil)".into(),
            Reply::Bulk(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
            Reply::Double(d) => format!("\"{}\"", bloomgate_dialect::reply::format_double(*d)),
            Reply::Array(items) => {
                let parts: Vec<String> = items.iter().map(render).collect();
                format!("[{}]", parts.join(", "))
            }
            Reply::Map(pairs) => {
                let parts: Vec<String> = pairs
                    .iter()
                    .flat_map(|(k, v)| [render(k), render(v)])
                    .collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }

    /// The answers a live redis-server gives (checked by `tests/redis_oracle.rs`) are ours.
    #[test]
    fn answers_as_redis() {
        let mut h = Harness::new();
        for line in include_str!("../../tests/data/acl_cases.txt").lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (command, want) = line.split_once(" => ").expect("command => reply");
            assert_eq!(render(&h.run(command)), want, "{command}");
        }
    }

    #[test]
    fn help_lists_the_subcommands_served() {
        let mut h = Harness::new();
        let Reply::Array(lines) = h.run("ACL HELP") else {
            panic!()
        };
        assert_eq!(
            lines[0],
            Reply::Simple("ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into())
        );
        for sub in [
            "CAT", "DELUSER", "DRYRUN", "GETUSER", "LIST", "SETUSER", "USERS", "WHOAMI",
        ] {
            assert!(
                lines
                    .iter()
                    .any(|l| matches!(l, Reply::Simple(s) if s.starts_with(sub))),
                "{sub}"
            );
        }
    }

    #[test]
    fn passwords_are_kept_as_sha256() {
        let mut h = Harness::new();
        h.run("ACL SETUSER u on >secret");
        let user = &h.store.acl.users[&b"u"[..]];
        assert_eq!(
            super::to_hex(&user.passwords[0]),
            "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        );
        assert!(!format!("{user:?}").contains("secret"));
    }
}
