use super::*;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

fn raw(text: &str) -> RawCredential {
    toml::from_str(text).expect("test TOML parses")
}

fn build(text: &str) -> Result<UpstreamCredential, crate::model::SettingsError> {
    UpstreamCredential::build(
        &raw(text),
        Path::new("/nonexistent"),
        "upstream[0].credential",
    )
}

#[test]
fn static_secrets_go_in_their_header_and_stay_hidden() {
    std::env::set_var("PORTCULLIS_TEST_UPSTREAM_SECRET", "s3cret\n");
    let c = build("type = \"static\"\nsecret_env = \"PORTCULLIS_TEST_UPSTREAM_SECRET\"\n").unwrap();
    let UpstreamCredential::Static { header, value } = &c else {
        panic!("static")
    };
    assert_eq!(header, http::header::AUTHORIZATION);
    assert_eq!(value, "Bearer s3cret");
    assert!(value.is_sensitive());
    let c = build("type = \"static\"\nheader = \"X-Api-Key\"\nsecret_env = \"PORTCULLIS_TEST_UPSTREAM_SECRET\"\n").unwrap();
    let UpstreamCredential::Static { header, value } = &c else {
        panic!("static")
    };
    assert_eq!(
        (header.as_str(), value.to_str().unwrap()),
        ("x-api-key", "s3cret")
    );
    assert!(!format!("{c:?}").contains("s3cret"));
}

#[test]
fn config_mistakes_are_named() {
    for (text, field, words) in [
        ("type = \"magic\"", "upstream[0].credential.type", "unknown credential type"),
        ("type = \"static\"\ntoken_url = \"https://a/t\"", "upstream[0].credential.token_url", "does not apply"),
        ("type = \"client_credentials\"\nclient_id = \"x\"\nclient_secret_env = \"NOPE_NOT_SET_PORTCULLIS\"", "upstream[0].credential.token_url", "needs token_url"),
        ("type = \"client_credentials\"\ntoken_url = \"http://idp.example.com/t\"", "upstream[0].credential.token_url", "https"),
        ("type = \"client_credentials\"\ntoken_url = \"https://a/t\"", "upstream[0].credential.client_id", "needs client_id"),
        ("type = \"token_exchange\"\nissuer = \"https://a\"\nclient_id = \"x\"\nclient_secret_env = \"NOPE_NOT_SET_PORTCULLIS\"", "upstream[0].credential.client_secret_env", "not set"),
        ("type = \"static\"\nsecret_file = \"missing\"", "upstream[0].credential.secret_file", "cannot read"),
    ] {
        let e = build(text).expect_err(text);
        assert_eq!(e.field, field, "{text}");
        assert!(e.to_string().contains(words), "{text}: {e}");
    }
}

#[test]
fn token_answers_are_checked() {
    let (v, life) =
        answer(br#"{"access_token":"abc","token_type":"Bearer","expires_in":60}"#).unwrap();
    assert_eq!((v.to_str().unwrap(), life), ("Bearer abc", Some(60)));
    assert!(v.is_sensitive());
    assert!(answer(br#"{"access_token":"abc","token_type":"N_A"}"#).is_ok());
    assert!(answer(br#"{"access_token":"abc","token_type":"DPoP"}"#).is_err());
    assert!(answer(br#"{"access_token":""}"#).is_err());
    assert!(answer(br#"{"access_token":"a b"}"#).is_err());
    assert!(answer(b"<html>").is_err());
}

#[tokio::test]
async fn one_fetch_per_key_while_fresh_and_none_concurrent() {
    let cache = std::sync::Arc::new(cache::TokenCache::default());
    let fetched = std::sync::Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (cache, fetched) = (cache.clone(), fetched.clone());
        tasks.push(tokio::spawn(async move {
            cache
                .get_or_fetch("k".into(), || async move {
                    fetched.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    Ok((HeaderValue::from_static("Bearer t"), Some(3600)))
                })
                .await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), "Bearer t");
    }
    assert_eq!(
        fetched.load(Ordering::SeqCst),
        1,
        "one request for sixteen callers"
    );
    let other = cache
        .get_or_fetch("e".into(), || async {
            Err(CredentialError::NoTokenEndpoint)
        })
        .await;
    assert!(other.is_err());
    // The failure is the answer for a moment (callers behind it fail at
    // once), then the next caller tries again.
    let held = cache
        .get_or_fetch("e".into(), || async {
            panic!("not fetched while the failure holds")
        })
        .await;
    assert!(held.is_err());
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = cache
        .get_or_fetch("e".into(), || async {
            Ok((HeaderValue::from_static("Bearer u"), Some(0)))
        })
        .await
        .unwrap();
    assert_eq!(again, "Bearer u");
    // A token with no life left is fetched again at once.
    let third = cache
        .get_or_fetch("e".into(), || async {
            Ok((HeaderValue::from_static("Bearer v"), Some(0)))
        })
        .await
        .unwrap();
    assert_eq!(third, "Bearer v");
    assert_eq!(cache.len(), 2);
}

#[test]
fn subject_tokens_are_hidden_and_keyed_by_digest() {
    let t = SubjectToken::new("eyJ.secret.token");
    assert_eq!(format!("{t:?}"), "SubjectToken(..)");
    assert_eq!(t.digest().len(), 64);
    assert!(!t.digest().contains("secret"));
}

#[tokio::test]
async fn a_refused_token_is_forgotten_and_the_next_caller_fetches_another() {
    let cache = cache::TokenCache::default();
    let first = cache
        .get_or_fetch("k".into(), || async {
            Ok((HeaderValue::from_static("Bearer old"), Some(3600)))
        })
        .await
        .unwrap();
    assert_eq!(first, "Bearer old");
    cache.forget("k");
    cache.forget("never-seen");
    let second = cache
        .get_or_fetch("k".into(), || async {
            Ok((HeaderValue::from_static("Bearer new"), Some(3600)))
        })
        .await
        .unwrap();
    assert_eq!(second, "Bearer new");
}
