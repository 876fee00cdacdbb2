use std::sync::Arc;

use super::*;
use crate::identify::AuthMethod;

fn glob(pattern: &str) -> Option<GlobSet> {
    let mut b = globset::GlobSetBuilder::new();
    b.add(globset::Glob::new(pattern).unwrap());
    Some(b.build().unwrap())
}

fn pending(expires_ms: u64) -> Pending {
    Pending {
        rule: "second".into(),
        because: "tool".into(),
        tool: "delete_all".into(),
        server: "files".into(),
        message: "m".into(),
        caller: "alice (jwt)".into(),
        caller_key: "jwt:alice".into(),
        digest: "d".into(),
        deciders: Deciders {
            approvers: PrincipalGlobs::new(&["bob*"], &[]).ok(),
            approver_groups: glob("security"),
            auth: Arc::new(AuthSchemes::default()),
            schemes: Vec::new(),
            resource: None,
        },
        csrf: "token-1".into(),
        remember: None,
        expires_ms,
        upstream: "files".into(),
        audit: Default::default(),
    }
}

fn principal(name: &str, groups: &[&str], method: AuthMethod) -> Principal {
    Principal {
        name: Arc::from(name),
        groups: groups
            .iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .into(),
        method,
        scheme: Arc::from("people"),
        grant: None,
    }
}

#[test]
fn approvers_are_matched_by_name_or_group_never_anonymous() {
    let d = pending(10).deciders;
    assert!(d.admits(&principal("bob", &[], AuthMethod::Jwt)));
    assert!(d.admits(&principal("carol", &["security"], AuthMethod::OAuth)));
    assert!(!d.admits(&principal("alice", &["dev"], AuthMethod::Jwt)));
    assert!(!d.admits(&Principal::anonymous()));
}

#[tokio::test]
async fn a_decision_is_taken_once_with_the_approvals_own_token() {
    let store = Arc::new(PendingApprovals::default());
    let waiter = store.open(pending(60_000), 0).unwrap();
    let id = waiter.id().to_owned();
    assert_eq!(
        store
            .decide(&id, "forged", Verdict::Approved, false, "bob", 1)
            .err(),
        Some(Undecided::CsrfMismatch)
    );
    assert!(store
        .decide(&id, "token-1", Verdict::Approved, false, "bob", 1)
        .is_ok());
    assert_eq!(
        store
            .decide(&id, "token-1", Verdict::Declined, false, "bob", 2)
            .err(),
        Some(Undecided::AlreadyDecided)
    );
    let outcome = waiter.decision(3).await;
    assert_eq!(
        outcome,
        Outcome::Decided {
            verdict: Verdict::Approved,
            by: Arc::from("bob"),
            remember: false,
        }
    );
    drop(waiter);
    // The call read its decision: the approval is gone.
    assert_eq!(store.get(&id, 4).err(), Some(Undecided::NotFound));
}

#[tokio::test]
async fn an_expired_approval_takes_no_decision_and_its_call_hears_so() {
    let store = Arc::new(PendingApprovals::default());
    let waiter = store.open(pending(50), 0).unwrap();
    let id = waiter.id().to_owned();
    assert_eq!(
        store
            .decide(&id, "token-1", Verdict::Approved, false, "bob", 50)
            .err(),
        Some(Undecided::Expired)
    );
    assert_eq!(waiter.decision(50).await, Outcome::Expired);
}

#[test]
fn a_released_approval_outlives_its_handle_and_a_held_one_does_not() {
    let store = Arc::new(PendingApprovals::default());
    let id = store.open(pending(60_000), 0).unwrap().release();
    assert!(store.get(&id, 1).is_ok());
    let held = store.waiter(&id).unwrap();
    drop(held);
    assert_eq!(store.get(&id, 1).err(), Some(Undecided::NotFound));
    // Ids are not guessable: two are never the same.
    let a = store.open(pending(60_000), 0).unwrap();
    let b = store.open(pending(60_000), 0).unwrap();
    assert_ne!(a.id(), b.id());
    assert!(a.id().len() >= 22);
}

#[test]
fn one_caller_cannot_take_every_slot() {
    let store = Arc::new(PendingApprovals::default());
    let held: Vec<Waiter> = (0..MAX_PENDING_PER_CALLER)
        .map(|_| {
            store
                .open(pending(60_000), 0)
                .expect("within the caller's share")
        })
        .collect();
    assert!(store.open(pending(60_000), 0).is_none(), "over the share");
    let other = Pending {
        caller_key: "jwt:carol".into(),
        ..pending(60_000)
    };
    assert!(store.open(other, 0).is_some(), "another caller still asks");
    drop(held);
    assert!(
        store.open(pending(60_000), 0).is_some(),
        "freed with the calls"
    );
}
