//! The pass registry (`ebb_passes::registry`): every pass reports its id's name.

use ebb_passes::registry::{pass, pass_by_name};
use ebb_passes::PassId;

/// One table: every pass the registry builds reports its id's name, and names round-trip.
#[test]
fn every_pass_reports_its_ids_name() {
    for id in PassId::ALL {
        assert_eq!(pass(id).name(), id.name());
        assert_eq!(PassId::from_name(id.name()), Some(id));
    }
    assert!(pass_by_name("hoist").is_err());
}
