//! Keyspace notifications: every write command that changed its key publishes one module event
//! (class `d`) with the dialect's event name; reads, and writes that changed nothing, publish
//! nothing.

use crate::support::{have_redis, temp_dir, Redis};
use bloomgate_testkit::replies::{events_of, keyspace_subscriber};

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn writes_publish_module_keyspace_events() {
    if !have_redis("writes_publish_module_keyspace_events") {
        return;
    }
    let server = Redis::start(&temp_dir("events"), &[], &[]);
    let mut c = server.conn();
    let mut s = server.conn();
    let mut sub = keyspace_subscriber(&mut s);
    let mut n = 0;
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Ed"])
        .query(&mut c)
        .unwrap();
    let ev = |event: &str, key: &str| (format!("__keyevent@0__:{event}"), key.to_string());
    let cases: &[(&str, Option<(&str, &str)>)] = &[
        ("BF.ADD b x", Some(("bloom.add", "b"))),
        ("BF.ADD b x", None),
        ("BF.EXISTS b x", None),
        ("BF.MADD b y z", Some(("bloom.add", "b"))),
        ("BF.RESERVE r 0.01 100", Some(("bloom.reserve", "r"))),
        ("BF.INSERT r ITEMS a", Some(("bloom.add", "r"))),
        ("CF.ADD c x", Some(("cf.add", "c"))),
        ("CF.DEL c x", Some(("cf.del", "c"))),
        ("CF.EXISTS c x", None),
        ("CMS.INITBYDIM m 10 5", Some(("cms.initbydim", "m"))),
        ("CMS.INCRBY m a 1", Some(("cms.incrby", "m"))),
        ("CMS.QUERY m a", None),
        ("TOPK.RESERVE t 3", Some(("topk.reserve", "t"))),
        ("TOPK.ADD t a", Some(("topk.add", "t"))),
        ("TOPK.LIST t", None),
        ("TDIGEST.CREATE d", Some(("tdigest.create", "d"))),
        ("TDIGEST.ADD d 1 2", Some(("tdigest.add", "d"))),
        ("TDIGEST.QUANTILE d 0.5", None),
        ("TDIGEST.RESET d", Some(("tdigest.reset", "d"))),
        ("WF.RESERVE w 0.01 100 1000 3", Some(("wf.reserve", "w"))),
        ("WF.ADD w a", Some(("wf.add", "w"))),
        ("WF.EXISTS w a", None),
    ];
    for (command, want) in cases {
        let want: Vec<_> = want.iter().map(|(e, k)| ev(e, k)).collect();
        assert_eq!(
            events_of(&mut c, &mut sub, &mut n, command),
            want,
            "{command}"
        );
    }

    // Keyspace channels too (`K`), and `A` includes module events.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "KEA"])
        .query(&mut c)
        .unwrap();
    let got = events_of(&mut c, &mut sub, &mut n, "BF.ADD b new-item");
    assert_eq!(
        got,
        pairs(&[
            ("__keyspace@0__:b", "bloom.add"),
            ("__keyevent@0__:bloom.add", "b")
        ])
    );
    // Without `d` (generic events only), nothing of ours is published.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "notify-keyspace-events", "Eg"])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        events_of(&mut c, &mut sub, &mut n, "BF.ADD b other"),
        vec![]
    );
}
