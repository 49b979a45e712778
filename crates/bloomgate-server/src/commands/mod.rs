//! The command layer: plain synchronous code with no I/O or async types. One command model for
//! every command: the table ([`dispatch::table`]) holds the dialect's BF.*/CF.*/WF.* commands
//! and the server's own, all of the dialect's `CommandInfo` type with the one flags type, and
//! every one runs through the dialect's `execute` against [`ServerHost`], which decides what is
//! logged from the command's WRITE flag and the changes it reported.
//!
//! Files by job: [`state`] (the store and a client's session), [`host`] (what a handler sees),
//! [`dispatch`] (the table, Redis' checks, EXEC, log replay), and one file per family of the
//! server's own commands: [`keys`], [`strings`] (the one native type), [`dump`], [`server`]
//! (connection and server commands), [`pubsub`] (SUBSCRIBE, PUBLISH, …), [`gate`] (GATE.*, run
//! off the event loop),
//! [`introspect`] (COMMAND INFO / DOCS), [`acl`] (the ACL command, AUTH's check, NOPERM),
//! [`transaction`]; and [`users`], the ACL users themselves (a leaf the store holds).

pub mod acl;
pub mod dispatch;
pub mod dump;
pub mod gate;
pub mod host;
pub mod introspect;
pub mod keys;
pub mod pubsub;
pub mod server;
pub mod state;
pub mod strings;
pub mod transaction;
pub mod users;

pub use dispatch::{execute, lookup, run, table, Replayer};
pub use host::{Handler, ServerCommand, ServerHost};
pub use state::{Action, PersistenceInfo, Session, Stats, Store};
