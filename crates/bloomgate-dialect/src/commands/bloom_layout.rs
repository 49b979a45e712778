//! The Bloom chain kinds by layout name (`LAYOUT classic|blocked`) and by the magic that starts
//! a SCANDUMP header: how BF.RESERVE, BF.INSERT and BF.LOADCHUNK pick the link type.

use crate::value::{ChainValue, Kind, OnChain};

/// The name of a Bloom chain kind's layout (`LAYOUT classic|blocked`); `None` for other kinds.
pub(super) fn layout_name(kind: Kind) -> Option<&'static str> {
    struct Name;
    impl OnChain for Name {
        type Out = &'static str;
        fn on<L: ChainValue>(self) -> &'static str {
            L::LAYOUT
        }
    }
    kind.on_chain(Name)
}

/// The chain kind a `LAYOUT` argument names (any case).
pub(super) fn layout_named(arg: &[u8]) -> Option<Kind> {
    Kind::ALL
        .into_iter()
        .find(|&k| layout_name(k).is_some_and(|name| arg.eq_ignore_ascii_case(name.as_bytes())))
}

/// The chain kind a LOADCHUNK header for a missing key makes: the format whose magic starts
/// it, else the classic one (which has none).
pub(super) fn layout_of_header(header: &[u8]) -> Kind {
    struct Claims<'h>(&'h [u8]);
    impl OnChain for Claims<'_> {
        type Out = bool;
        fn on<L: ChainValue>(self) -> bool {
            L::MAGIC.is_some_and(|magic| self.0.starts_with(magic))
        }
    }
    Kind::ALL
        .into_iter()
        .find(|&k| k.on_chain(Claims(header)) == Some(true))
        .unwrap_or(Kind::Bloom)
}
