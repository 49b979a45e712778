//! A minimal, correct subset of Redis ACLs, enough for what RedisBloom's `test_acl` and client
//! code exercise: the `default` user plus named users, each on/off with passwords (or
//! `nopass`), allowed commands built from `+@category` / `-@category` / `+cmd` / `-cmd` rules
//! applied in order, and key patterns (`~pattern`, `allkeys`, `resetkeys`). `ACL CAT`,
//! `ACL SETUSER`, `ACL DELUSER`, `ACL USERS`, `ACL WHOAMI`; `AUTH user pass` goes through
//! [`authenticate`]; [`check`] refuses a command with Redis' `NOPERM` wording. Users live in
//! memory (no ACL file), as with a Redis started without `aclfile`.

use bloomgate_dialect::commands::flags;

use super::host::{text, wrong_arity, Args, Ctx, ServerCommand};
use super::state::Store;
use super::users::{
    categories, commands_in, denied, digest, password_in, password_matches, to_hex, Denied, User,
};
use crate::resp::Reply;

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
        Some(Denied::Channel(_)) => Err(Reply::error("NOPERM No permissions to access a channel")),
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
                Some(Denied::Channel(channel)) => Reply::bulk(format!(
                    "This user has no permissions to access the '{}' channel",
                    text(&channel)
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
                "bf.merge",
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
