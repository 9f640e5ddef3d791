//! Record collections: get/put/delete, batch put, prefix and range scans (paged),
//! counts, JSON, and values that survive a reopen.

mod common;
use common::*;
use std::ops::Bound;

#[test]
fn put_get_delete_count_and_reopen() {
    let (t, v) = TestVault::new(4096);
    let s = v.records("settings");
    assert_eq!(s.get("theme").unwrap(), None);
    assert_eq!(s.count().unwrap(), 0);
    s.put("theme", "dark").unwrap();
    s.put("lang", b"\x00binary\xff").unwrap();
    s.put("theme", "light").unwrap();
    v.records("other").put("theme", "x").unwrap();
    assert_eq!(s.get("theme").unwrap().unwrap(), b"light");
    assert_eq!(s.count().unwrap(), 2);
    assert!(s.delete("lang").unwrap());
    assert!(!s.delete("lang").unwrap());
    assert_eq!(v.collections().unwrap(), vec![("other".to_string(), 1), ("settings".to_string(), 1)]);
    drop((s, v));
    let v = t.reopen();
    assert_eq!(v.records("settings").get("theme").unwrap().unwrap(), b"light");
    assert_eq!(v.records("other").clear().unwrap(), 1);
    assert_eq!(v.collections().unwrap().len(), 1);
    assert!(v.fsck(&sqlvault::Ops::default()).unwrap().is_clean());
}

#[test]
fn scans_are_ordered_paged_and_bounded() {
    let (_t, v) = TestVault::new(4096);
    let r = v.records("index");
    let items: Vec<(String, String)> = (0..1500).map(|i| (format!("k{i:05}"), format!("v{i}"))).collect();
    r.put_many(&items).unwrap();
    r.put_many(&[("a", "first"), ("z", "last")]).unwrap();
    assert_eq!(r.count().unwrap(), 1502);
    // A prefix scan crosses several pages (512 rows each) and returns keys in order.
    let keys: Vec<Vec<u8>> = r.scan_prefix("k").map(|x| x.unwrap().0).collect();
    assert_eq!(keys.len(), 1500);
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(keys[0], b"k00000");
    let range = (Bound::Included(b"k00100".to_vec()), Bound::Excluded(b"k00200".to_vec()));
    assert_eq!(r.count_range(&range).unwrap(), 100);
    let got: Vec<_> = r.scan(range.clone()).map(|x| x.unwrap()).collect();
    assert_eq!(got.len(), 100);
    assert_eq!(got[99], (b"k00199".to_vec(), b"v199".to_vec()));
    let page = r.page(&(Bound::Excluded(b"k01498".to_vec()), Bound::Unbounded), 10).unwrap();
    assert_eq!(page.iter().map(|p| p.0.clone()).collect::<Vec<_>>(), vec![b"k01499".to_vec(), b"z".to_vec()]);
    let keys_only: Vec<_> =
        r.scan_keys((Bound::Unbounded, Bound::Included(b"a".to_vec()))).map(|x| x.unwrap()).collect();
    assert_eq!(keys_only, vec![(b"a".to_vec(), Vec::new())]);
    assert_eq!(r.scan_prefix("nothing").count(), 0);
}

#[test]
fn json_round_trips_and_bad_input_is_an_error() {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Doc {
        title: String,
        pages: u32,
    }
    let (_t, v) = TestVault::new(4096);
    let r = v.records("docs");
    let d = Doc { title: "t".into(), pages: 3 };
    r.put_json("d1", &d).unwrap();
    assert_eq!(r.get_json::<Doc>("d1").unwrap(), Some(d));
    assert_eq!(r.get_json::<Doc>("none").unwrap(), None);
    r.put("bad", "not json").unwrap();
    assert!(matches!(r.get_json::<Doc>("bad").unwrap_err(), sqlvault::Error::InvalidArgument { .. }));
    assert!(v.records("").put("k", "v").is_err());
    assert!(r.put(vec![0u8; 4097], "v").is_err());
    assert_eq!(r.count().unwrap(), 2);
}
