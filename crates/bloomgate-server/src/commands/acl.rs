//! A minimal, correct subset of Redis ACLs, enough for what RedisBloom's `test_acl` and client
//! code exercise: the `default` user plus named users, each on/off with passwords (or
//! `nopass`), allowed commands built from `+@category` / `-@category` / `+cmd` / `-cmd` rules
//! applied in order, and key patterns (`~pattern`, `allkeys`, `resetkeys`). `ACL CAT`,
//! `ACL SETUSER`, `ACL DELUSER`, `ACL USERS`, `ACL WHOAMI`; `AUTH user pass` goes through
//! [`authenticate`]; [`check`] refuses a command with Redis' `NOPERM` wording. Users live in
//! memory (no ACL file), as with a Redis started without `aclfile`.

use std::collections::{BTreeMap, HashSet};

use super::{flags, glob_match, table, text, wrong_arity, Args, CommandSpec, Ctx, Exec, Store};
use crate::resp::Reply;

/// Redis' categories in its listing order; [`categories_listed`] adds the dialect's.
const REDIS_CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Every category `ACL CAT` lists: Redis' own, then the dialect's (`bloom`, `cuckoo`,
/// `windowed`, `cms`, `topk`, ... in table order).
fn categories_listed() -> impl Iterator<Item = &'static str> {
    REDIS_CATEGORIES
        .into_iter()
        .chain(bloomgate_dialect::commands::categories())
}

fn is_category(name: &str) -> bool {
    categories_listed().any(|c| c == name)
}

/// The server's own commands that Redis files under a family category.
const CONNECTION: [&str; 7] = ["PING", "ECHO", "HELLO", "AUTH", "QUIT", "SELECT", "CLIENT"];
const TRANSACTION: [&str; 5] = ["MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"];
const KEYSPACE: [&str; 18] = [
    "DEL",
    "UNLINK",
    "EXISTS",
    "TYPE",
    "KEYS",
    "SCAN",
    "RENAME",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "TTL",
    "PTTL",
    "PERSIST",
    "FLUSHDB",
    "FLUSHALL",
    "DBSIZE",
    "MEMORY",
];

/// A command's ACL categories (without `@`), in [`categories_listed`] order.
pub fn categories(spec: &CommandSpec) -> Vec<&'static str> {
    if let Exec::Dialect(info) = spec.exec {
        return info.acl_categories();
    }
    let name = spec.name;
    let f = |bit: u32| spec.flags & bit != 0;
    let slow = !f(flags::FAST);
    let family = |list: &[&str]| list.contains(&name);
    [
        ("keyspace", family(&KEYSPACE)),
        ("read", f(flags::READONLY)),
        ("write", f(flags::WRITE)),
        ("admin", f(flags::ADMIN)),
        ("fast", !slow),
        ("slow", slow),
        (
            "dangerous",
            f(flags::ADMIN) || name == "FLUSHALL" || name == "FLUSHDB",
        ),
        ("connection", family(&CONNECTION)),
        ("transaction", family(&TRANSACTION)),
    ]
    .into_iter()
    .filter(|(_, on)| *on)
    .map(|(c, _)| c)
    .collect()
}

fn commands_in(category: &str) -> impl Iterator<Item = &'static CommandSpec> + '_ {
    table()
        .iter()
        .filter(move |c| category == "all" || categories(c).contains(&category))
}

/// One user.
#[derive(Clone, Debug)]
pub struct User {
    enabled: bool,
    nopass: bool,
    passwords: Vec<Vec<u8>>,
    /// Upper-case names of the commands the user may run.
    allowed: HashSet<&'static str>,
    all_keys: bool,
    key_patterns: Vec<Vec<u8>>,
}

impl User {
    /// What `ACL SETUSER` starts a new user from: off, no password, no commands, no keys.
    fn blank() -> Self {
        Self {
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            allowed: HashSet::new(),
            all_keys: false,
            key_patterns: Vec::new(),
        }
    }

    /// Applies one `ACL SETUSER` rule; the error is Redis' reason.
    fn apply(&mut self, rule: &[u8]) -> Result<(), &'static str> {
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
            "allcommands" | "+@all" => self.allowed = table().iter().map(|c| c.name).collect(),
            "nocommands" | "-@all" => self.allowed.clear(),
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.key_patterns.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.key_patterns.clear();
            }
            // No pub/sub here: channel rules are accepted and have nothing to govern.
            "allchannels" | "resetchannels" => {}
            "reset" => *self = Self::blank(),
            _ => match rule.first() {
                Some(b'>') => {
                    self.nopass = false;
                    if !self.passwords.iter().any(|p| p == &rule[1..]) {
                        self.passwords.push(rule[1..].to_vec());
                    }
                }
                Some(b'<') => {
                    let before = self.passwords.len();
                    self.passwords.retain(|p| p != &rule[1..]);
                    if self.passwords.len() == before {
                        return Err("no such password");
                    }
                }
                Some(b'~') => {
                    if !self.all_keys {
                        self.key_patterns.push(rule[1..].to_vec());
                    }
                }
                Some(b'&') => {}
                Some(&sign @ (b'+' | b'-')) => self.command_rule(sign == b'+', &lower[1..])?,
                _ => return Err("Syntax error"),
            },
        }
        Ok(())
    }

    /// `+@category`, `-@category`, `+command`, `-command`.
    fn command_rule(&mut self, allow: bool, what: &str) -> Result<(), &'static str> {
        let names: Vec<&'static str> = match what.strip_prefix('@') {
            Some(category) if is_category(category) => {
                commands_in(category).map(|c| c.name).collect()
            }
            Some(_) => return Err("Unknown command or category name in ACL"),
            None => {
                let spec = super::lookup(what.as_bytes())
                    .ok_or("Unknown command or category name in ACL")?;
                vec![spec.name]
            }
        };
        for name in names {
            if allow {
                self.allowed.insert(name);
            } else {
                self.allowed.remove(name);
            }
        }
        Ok(())
    }

    fn may_access(&self, key: &[u8]) -> bool {
        self.all_keys || self.key_patterns.iter().any(|p| glob_match(p, key, false))
    }
}

/// The users, `default` always among them.
#[derive(Clone, Debug)]
pub struct Acl {
    users: BTreeMap<Vec<u8>, User>,
}

impl Default for Acl {
    /// Redis' initial state: `default` on, nopass, every command, every key.
    fn default() -> Self {
        let mut default = User::blank();
        for rule in ["on", "nopass", "allcommands", "allkeys"] {
            default.apply(rule.as_bytes()).expect("a valid rule");
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
        Some(expected) => {
            super::server::password_matches(expected, pass) || u.passwords.iter().any(|p| p == pass)
        }
        None => u.nopass || u.passwords.iter().any(|p| p == pass),
    }
}

/// Whether the session's user may run `spec` with `args`: Redis' NOPERM refusals. Commands
/// that need no authentication (AUTH, HELLO, QUIT) are always allowed.
pub fn check(store: &Store, user: &[u8], spec: &CommandSpec, args: &Args) -> Result<(), Reply> {
    if spec.flags & flags::NOAUTH != 0 {
        return Ok(());
    }
    let name = text(user);
    let Some(u) = store.acl.users.get(user) else {
        return Err(Reply::error(format!(
            "NOPERM User {name} has no permissions to run the '{}' command",
            spec.name.to_lowercase()
        )));
    };
    if !u.allowed.contains(spec.name) {
        return Err(Reply::error(format!(
            "NOPERM User {name} has no permissions to run the '{}' command",
            spec.name.to_lowercase()
        )));
    }
    if !u.all_keys && spec.first_key > 0 {
        let last = match spec.last_key {
            n if n < 0 => args.len() as i64 + i64::from(n),
            n => i64::from(n),
        };
        let keys = (i64::from(spec.first_key)..=last)
            .step_by(spec.step.max(1) as usize)
            .filter_map(|i| args.get(i as usize));
        for key in keys {
            if !u.may_access(key) {
                return Err(Reply::error("NOPERM No permissions to access a key"));
            }
        }
    }
    Ok(())
}

/// `ACL CAT [category]`, `ACL SETUSER user rule...`, `ACL DELUSER user...`, `ACL USERS`,
/// `ACL WHOAMI`.
pub fn acl(ctx: &mut Ctx, args: &Args) -> Reply {
    let sub = text(&args[1]).to_ascii_uppercase();
    match (sub.as_str(), args.len()) {
        ("CAT", 2) => Reply::Array(categories_listed().map(Reply::bulk).collect()),
        ("CAT", 3) => {
            let category = text(&args[2]).to_ascii_lowercase();
            if !is_category(&category) {
                return Reply::error(format!("ERR Unknown category '{}'", text(&args[2])));
            }
            Reply::Array(
                commands_in(&category)
                    .map(|c| Reply::bulk(c.name.to_lowercase()))
                    .collect(),
            )
        }
        ("SETUSER", n) if n >= 3 => {
            let users = &mut ctx.store.acl.users;
            let mut user = users.get(&args[2]).cloned().unwrap_or_else(User::blank);
            for rule in &args[3..] {
                if let Err(why) = user.apply(rule) {
                    return Reply::error(format!(
                        "ERR Error in ACL SETUSER modifier '{}': {why}",
                        text(rule)
                    ));
                }
            }
            users.insert(args[2].clone(), user);
            Reply::ok()
        }
        ("DELUSER", n) if n >= 3 => {
            if args[2..].iter().any(|u| u == b"default") {
                return Reply::error("ERR The 'default' user cannot be removed");
            }
            let removed = args[2..]
                .iter()
                .filter(|u| ctx.store.acl.users.remove(*u).is_some())
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
        ("CAT" | "SETUSER" | "DELUSER" | "USERS" | "WHOAMI", _) => {
            wrong_arity(&format!("acl|{}", sub.to_lowercase()))
        }
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            text(&args[1])
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::commands::testing::Harness;
    use crate::resp::Reply;

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
}
