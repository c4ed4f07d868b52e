//! Storage of engine definitions added over the API, on both backends (as
//! `store_conformance.rs`: one case, two stores).

#[macro_use]
mod support;

use support::*;

on_both_backends!(engines_are_upserted_by_name);

async fn engines_are_upserted_by_name(Database { store, .. }: Database) {
    assert!(store.engines().await.unwrap().is_empty());
    let (first, created) = store.put_engine("fish", "v1", "root").await.unwrap();
    assert!(created);
    assert_eq!(
        (
            first.name.as_str(),
            first.definition.as_str(),
            first.updated_by.as_str()
        ),
        ("fish", "v1", "root")
    );
    store.put_engine("eel", "e1", "root").await.unwrap();
    // A second put replaces the definition and says who did it, keeping one row per name.
    let (second, created) = store.put_engine("fish", "v2", "ops").await.unwrap();
    assert!(!created);
    assert_eq!(
        (second.definition.as_str(), second.updated_by.as_str()),
        ("v2", "ops")
    );
    assert!(second.updated_at >= first.updated_at);
    let all = store.engines().await.unwrap();
    let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["eel", "fish"]);
    assert_eq!(all[1], second);
}
