//! Unit tests of the hold table: a hold's size, its leases, tenures and times.

use super::*;

#[test]
fn hold_stays_small() {
    // 88 bytes is glibc's 96-byte size class with its 8-byte header; one field more and
    // every held lock costs 16 bytes more.
    let size = std::mem::size_of::<Hold>();
    assert!(size <= 88, "a hold grew to {size} bytes");
    // A key is in every slot of the hold table (spare ones too) and every renewal window.
    let key = std::mem::size_of::<HoldKey>();
    assert!(key <= 32, "a hold key grew to {key} bytes");
}

#[test]
fn leases_keep_their_order_and_free_the_extra_ones() {
    let mut leases = Leases::default();
    assert!(leases.is_empty() && leases.last().is_none());
    let second = Some(Duration::from_secs(2));
    leases.push(None);
    leases.push(second);
    leases.push(None);
    assert_eq!(leases.len(), 3);
    assert_eq!(
        leases.iter().copied().collect::<Vec<_>>(),
        [None, second, None]
    );
    assert_eq!(
        (leases.get(0), leases.get(1), leases.get(3)),
        (Some(None), Some(second), None)
    );
    leases.pop();
    assert_eq!(leases.last(), Some(second));
    leases.pop();
    assert!(
        leases.more.is_none(),
        "the re-entrant leases' box outlived them"
    );
    assert_eq!((leases.len(), leases.last()), (1, Some(None)));
    leases.pop();
    assert!(leases.is_empty());
    leases.pop();
    assert!(leases.is_empty());
}

struct NoRelease;

impl Releaser for NoRelease {
    fn renew_kind(&self, _: &Arc<str>) -> RenewKind {
        RenewKind::Hash
    }
    fn release_on_close(&self, _: Arc<Ctx>, _: Arc<str>, _: Arc<str>) -> Closing {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn a_re_entry_after_the_deadline_passed_unread_loses_the_old_tenure() {
    let lease = Duration::from_millis(100);
    let holds = Holds::new("id", lease, 100, Default::default(), None);
    let key = || HoldKey::of_owner(Arc::from("paused"), Owner::new(7), Suffix::None);
    let acquired = |sent| Acquired {
        holder: Arc::from(format!("id:{}", Owner::new(7)).as_str()),
        kind: LockKind::Lock,
        releaser: &NoRelease,
        lease: Some(lease),
        sent,
    };
    let first = Instant::now();
    assert!(holds.acquired(key(), acquired(first)));
    let token = holds.token(&key()).unwrap();
    // Re-entered in time: the same tenure goes on.
    assert!(holds.acquired(key(), acquired(first + lease / 4)));
    assert!(!token.is_cancelled());
    assert_eq!(holds.count(&key()), 2);
    // Re-entered only after the deadline passed, nobody having read `is_lost` meanwhile: the
    // holder of the old tenure is told (its token), and the new acquire begins a tenure
    // of its own rather than carrying the lost one on.
    assert!(holds.acquired(key(), acquired(first + lease * 3)));
    assert!(
        token.is_cancelled(),
        "the old tenure's token was not cancelled"
    );
    assert_eq!(holds.count(&key()), 1);
    assert!(!holds.token(&key()).unwrap().is_cancelled());
}

#[test]
fn a_permit_is_keyed_by_its_whole_id_and_reported_as_it() {
    let holds = Holds::new("id", Duration::from_secs(30), 100, Default::default(), None);
    // Two ids alike in their first 16 hex digits: two holds.
    let ids = [
        "0123456789abcdef0000000000000001",
        "0123456789abcdef0000000000000002",
    ];
    let key = |id: &str| HoldKey::of_permit(Arc::from("slots"), PermitId::parse(id).unwrap());
    for id in ids {
        let acquired = Acquired {
            holder: Arc::from(id),
            kind: LockKind::Permit,
            releaser: &NoRelease,
            lease: None,
            sent: Instant::now(),
        };
        assert!(holds.acquired(key(id), acquired));
    }
    assert_eq!(
        (holds.count(&key(ids[0])), holds.count(&key(ids[1]))),
        (1, 1)
    );
    holds.released(&key(ids[0]), true);
    assert_eq!(
        (holds.count(&key(ids[0])), holds.count(&key(ids[1]))),
        (0, 1)
    );
    // Its holder string is its id (lowercase, as the semaphore spells it).
    let upper = ids[1].to_ascii_uppercase();
    assert_eq!(key(&upper), key(ids[1]));
    assert_eq!(&*holds.holder(&key(&upper)), ids[1]);
    let hold = lock(&holds.map).remove(&key(ids[1])).unwrap();
    let event = holds.event(&key(ids[1]), &hold, LostReason::Gone);
    assert_eq!(
        (event.holder.as_str(), event.owner, event.kind),
        (ids[1], None, LockKind::Permit)
    );
    assert!(PermitId::parse("0123").is_none() && PermitId::parse(&"g".repeat(32)).is_none());
}

#[test]
fn a_holds_times_come_back_as_they_went_in() {
    let holds = Holds::new("id", Duration::from_secs(30), 100, Default::default(), None);
    let later = holds.epoch + Duration::from_millis(1234) + Duration::from_nanos(5);
    assert_eq!(holds.instant(holds.at(later)), later);
    assert_eq!(holds.at(holds.epoch), 0);
    assert_eq!(nanos(Duration::MAX), u64::MAX);
}
