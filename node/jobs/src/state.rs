//! The job state machines: one for the orchestrator's side of a job, one for each
//! provider's, and the pure transition function that drives both.
//!
//! Rules, for both roles:
//! - an event names the state it leads to and the states it may come from;
//! - applying an event to the state it leads to is a no-op (`Ok(same)`): every transition is
//!   idempotent, so a re-delivered chain event, p2p message or timer changes nothing;
//! - terminal states absorb every event (`Ok(same)`): a late event after the end is ignored;
//! - anything else is an [`IllegalTransition`] naming the state and the event.
//!
//! Source: DESIGN §1 (life of a job, failure paths).

use serde::{Deserialize, Serialize};

/// Where the orchestrator's side of a job is.
///
/// `Locked → Matching → Assigning → Assigned → Settled` (every provider claimed its pay on
/// chain), or `Cancelled` (before assignment) / `Expired` (after the deadline and the claim
/// window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrchestratorState {
    /// The lock transaction was built and submitted; waiting for the confirmation depth.
    Locked,
    /// Matching over the live market.
    Matching,
    /// Asking the matched providers to accept, then submitting the assign transaction.
    Assigning,
    /// The assignment is on chain; providers are running the job, this node acknowledges
    /// their work with receipts, and each provider claims its own pay.
    Assigned,
    /// Every assignment claimed on chain: providers paid, the last claim refunded the rest
    /// (terminal).
    Settled,
    /// Cancelled on chain before assignment: budget refunded (terminal).
    Cancelled,
    /// Expired on chain after the deadline (terminal).
    Expired,
}

/// What moves an orchestrator's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrchestratorEvent {
    /// The lock reached the confirmation depth (indexer).
    LockConfirmed,
    /// The matcher found a plan.
    Matched,
    /// A matched provider refused or timed out: match again without it.
    Rematch,
    /// The assignment was seen on chain (indexer).
    AssignConfirmed,
    /// Every assignment's claim was seen on chain (the escrow closed).
    SettleConfirmed,
    /// The cancel was seen on chain.
    CancelConfirmed,
    /// The expire was seen on chain.
    ExpireConfirmed,
    /// The lock never reached the chain and its validity interval has passed: it can no
    /// longer land, nothing was locked, the budget never left the wallet (a ledger refusal
    /// at submission, or a crash before it). Ends the job as cancelled.
    LockLapsed,
}

impl OrchestratorState {
    /// Settled, Cancelled or Expired.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Settled | Self::Cancelled | Self::Expired)
    }

    /// Before the assignment is on chain (the escrow is still `Open`).
    pub fn is_open(self) -> bool {
        matches!(self, Self::Locked | Self::Matching | Self::Assigning)
    }
}

impl OrchestratorEvent {
    /// The state the event leads to and whether `from` may take it.
    fn rule(self, from: OrchestratorState) -> (OrchestratorState, bool) {
        use OrchestratorState as S;
        match self {
            Self::LockConfirmed => (S::Matching, from == S::Locked),
            Self::Matched => (S::Assigning, from == S::Matching),
            Self::Rematch => (S::Matching, from == S::Assigning),
            Self::AssignConfirmed => (S::Assigned, from.is_open()),
            Self::SettleConfirmed => (S::Settled, from == S::Assigned),
            Self::CancelConfirmed => (S::Cancelled, from.is_open()),
            Self::ExpireConfirmed => (S::Expired, !from.is_terminal()),
            Self::LockLapsed => (S::Cancelled, from == S::Locked),
        }
    }
}

/// Where one provider's side of a job is.
///
/// `Reserved → Assigned → Preparing → Running → Finished → Claiming → Paid`, or `Failed` /
/// `Slashed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderState {
    /// GPUs reserved after an acceptance; waiting for the assignment on chain.
    Reserved,
    /// The assignment naming this provider is on chain.
    Assigned,
    /// Dispatched to the executor: image, network, containers being set up.
    Preparing,
    /// Containers running.
    Running,
    /// Containers exited; outputs and logs pinned.
    Finished,
    /// The claim (with the signed attestation and the best receipt) was submitted.
    Claiming,
    /// This provider's claim seen on chain (terminal).
    Paid,
    /// Never assigned, never ran, or the job ended without paying this provider (terminal).
    Failed,
    /// The bond was slashed for this job (terminal).
    Slashed,
}

/// What moves a provider's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderEvent {
    /// The assignment naming this provider was seen on chain.
    AssignmentSeen,
    /// The job was handed to the executor (dispatch intent written first).
    Dispatched,
    /// Every local container started.
    Started,
    /// Every local container exited and the artifacts are pinned.
    Exited,
    /// The claim was signed and submitted.
    ClaimSubmitted,
    /// This provider's claim was seen on chain.
    PaymentSeen,
    /// The job cannot go on here (reservation lapsed, job cancelled, dispatch refused).
    Failed,
    /// A slash of this provider's bond for this job was seen on chain.
    SlashSeen,
}

impl ProviderState {
    /// Paid, Failed or Slashed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Paid | Self::Failed | Self::Slashed)
    }
}

impl ProviderEvent {
    fn rule(self, from: ProviderState) -> (ProviderState, bool) {
        use ProviderState as S;
        match self {
            Self::AssignmentSeen => (S::Assigned, from == S::Reserved),
            Self::Dispatched => (S::Preparing, from == S::Assigned),
            Self::Started => (S::Running, from == S::Preparing),
            // A job may end before the executor reported it running (fast containers).
            Self::Exited => (S::Finished, matches!(from, S::Preparing | S::Running)),
            Self::ClaimSubmitted => (S::Claiming, from == S::Finished),
            // A claim submitted before a crash may land before the record says so.
            Self::PaymentSeen => (S::Paid, matches!(from, S::Finished | S::Claiming)),
            Self::Failed => (S::Failed, !from.is_terminal()),
            Self::SlashSeen => (
                S::Slashed,
                matches!(
                    from,
                    S::Assigned | S::Preparing | S::Running | S::Finished | S::Claiming
                ),
            ),
        }
    }
}

/// An event a state cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition: {event} in state {from}")]
pub struct IllegalTransition {
    /// The state, as its snake_case name.
    pub from: String,
    /// The event, as its snake_case name.
    pub event: String,
}

/// A state machine: its states, its events and the rule joining them.
pub trait Machine: Copy + PartialEq + std::fmt::Debug + Serialize {
    /// The events it takes.
    type Event: Copy + std::fmt::Debug + Serialize;
    /// Whether no event moves it any more.
    fn terminal(self) -> bool;
    /// The target of `event` and whether `self` may take it.
    fn rule(self, event: Self::Event) -> (Self, bool);
}

impl Machine for OrchestratorState {
    type Event = OrchestratorEvent;
    fn terminal(self) -> bool {
        self.is_terminal()
    }
    fn rule(self, event: OrchestratorEvent) -> (Self, bool) {
        event.rule(self)
    }
}

impl Machine for ProviderState {
    type Event = ProviderEvent;
    fn terminal(self) -> bool {
        self.is_terminal()
    }
    fn rule(self, event: ProviderEvent) -> (Self, bool) {
        event.rule(self)
    }
}

fn name<T: Serialize + std::fmt::Debug>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| j.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{v:?}"))
}

/// The state after `event` in `from`: idempotent, terminal states absorb (see the module docs).
///
/// # Errors
/// [`IllegalTransition`] when `from` may not take `event`.
pub fn transition<M: Machine>(from: M, event: M::Event) -> Result<M, IllegalTransition> {
    if from.terminal() {
        return Ok(from);
    }
    let (to, allowed) = from.rule(event);
    if allowed || to == from {
        Ok(to)
    } else {
        Err(IllegalTransition {
            from: name(&from),
            event: name(&event),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const O_EVENTS: [OrchestratorEvent; 8] = [
        OrchestratorEvent::LockConfirmed,
        OrchestratorEvent::Matched,
        OrchestratorEvent::Rematch,
        OrchestratorEvent::AssignConfirmed,
        OrchestratorEvent::SettleConfirmed,
        OrchestratorEvent::CancelConfirmed,
        OrchestratorEvent::ExpireConfirmed,
        OrchestratorEvent::LockLapsed,
    ];
    const P_EVENTS: [ProviderEvent; 8] = [
        ProviderEvent::AssignmentSeen,
        ProviderEvent::Dispatched,
        ProviderEvent::Started,
        ProviderEvent::Exited,
        ProviderEvent::ClaimSubmitted,
        ProviderEvent::PaymentSeen,
        ProviderEvent::Failed,
        ProviderEvent::SlashSeen,
    ];

    #[test]
    fn the_orchestrator_happy_path_and_a_rematch() {
        use OrchestratorEvent as E;
        use OrchestratorState as S;
        let mut s = S::Locked;
        for (e, want) in [
            (E::LockConfirmed, S::Matching),
            (E::Matched, S::Assigning),
            (E::Rematch, S::Matching),
            (E::Matched, S::Assigning),
            (E::AssignConfirmed, S::Assigned),
            (E::SettleConfirmed, S::Settled),
        ] {
            s = transition(s, e).expect("legal");
            assert_eq!(s, want, "after {e:?}");
        }
    }

    #[test]
    fn a_lapsed_lock_cancels_only_a_job_still_waiting_for_it() {
        use OrchestratorEvent as E;
        use OrchestratorState as S;
        assert_eq!(transition(S::Locked, E::LockLapsed), Ok(S::Cancelled));
        assert!(transition(S::Matching, E::LockLapsed).is_err());
        assert!(transition(S::Assigned, E::LockLapsed).is_err());
    }

    #[test]
    fn the_provider_happy_path() {
        use ProviderEvent as E;
        use ProviderState as S;
        let mut s = S::Reserved;
        for (e, want) in [
            (E::AssignmentSeen, S::Assigned),
            (E::Dispatched, S::Preparing),
            (E::Started, S::Running),
            (E::Exited, S::Finished),
            (E::ClaimSubmitted, S::Claiming),
            (E::PaymentSeen, S::Paid),
        ] {
            s = transition(s, e).expect("legal");
            assert_eq!(s, want, "after {e:?}");
        }
    }

    #[test]
    fn illegal_events_are_named() {
        let e = transition(
            OrchestratorState::Assigned,
            OrchestratorEvent::CancelConfirmed,
        )
        .expect_err("cancel after assignment is not possible on chain");
        assert_eq!(e.from, "assigned");
        assert_eq!(e.event, "cancel_confirmed");
        assert!(transition(ProviderState::Reserved, ProviderEvent::PaymentSeen).is_err());
        assert!(
            transition(ProviderState::Paid, ProviderEvent::SlashSeen)
                .is_ok_and(|s| s == ProviderState::Paid)
        );
        assert!(transition(ProviderState::Reserved, ProviderEvent::SlashSeen).is_err());
    }

    #[test]
    fn cancel_only_while_open_and_expire_from_anywhere_not_terminal() {
        use OrchestratorState as S;
        for s in [S::Locked, S::Matching, S::Assigning] {
            assert_eq!(
                transition(s, OrchestratorEvent::CancelConfirmed),
                Ok(S::Cancelled)
            );
        }
        for s in [S::Locked, S::Matching, S::Assigning, S::Assigned] {
            assert_eq!(
                transition(s, OrchestratorEvent::ExpireConfirmed),
                Ok(S::Expired)
            );
        }
    }

    fn o_state() -> impl Strategy<Value = OrchestratorState> {
        use OrchestratorState as S;
        prop::sample::select(vec![
            S::Locked,
            S::Matching,
            S::Assigning,
            S::Assigned,
            S::Settled,
            S::Cancelled,
            S::Expired,
        ])
    }

    fn p_state() -> impl Strategy<Value = ProviderState> {
        use ProviderState as S;
        prop::sample::select(vec![
            S::Reserved,
            S::Assigned,
            S::Preparing,
            S::Running,
            S::Finished,
            S::Claiming,
            S::Paid,
            S::Failed,
            S::Slashed,
        ])
    }

    /// States reachable from `start` by legal events (breadth-first over the rule table).
    fn reachable<M: Machine + Eq + std::hash::Hash>(start: M, events: &[M::Event]) -> Vec<M> {
        let mut seen = vec![start];
        let mut i = 0;
        while i < seen.len() {
            for e in events {
                if let Ok(t) = transition(seen[i], *e)
                    && !seen.contains(&t)
                {
                    seen.push(t);
                }
            }
            i += 1;
        }
        seen
    }

    proptest! {
        /// Random event sequences: every accepted step is idempotent, lands in a state
        /// reachable from the start, terminal states absorb, and a refused event leaves the
        /// state unchanged.
        #[test]
        fn orchestrator_sequences(events in prop::collection::vec(prop::sample::select(O_EVENTS.to_vec()), 0..40)) {
            let legal = reachable(OrchestratorState::Locked, &O_EVENTS);
            let mut s = OrchestratorState::Locked;
            for e in events {
                match transition(s, e) {
                    Ok(t) => {
                        prop_assert!(legal.contains(&t));
                        prop_assert_eq!(transition(t, e), Ok(t), "idempotent");
                        if s.is_terminal() { prop_assert_eq!(t, s, "terminal absorbs"); }
                        s = t;
                    }
                    Err(err) => {
                        prop_assert!(!s.is_terminal());
                        prop_assert!(!err.from.is_empty());
                    }
                }
            }
        }

        #[test]
        fn provider_sequences(events in prop::collection::vec(prop::sample::select(P_EVENTS.to_vec()), 0..40)) {
            let legal = reachable(ProviderState::Reserved, &P_EVENTS);
            let mut s = ProviderState::Reserved;
            for e in events {
                if let Ok(t) = transition(s, e) {
                    prop_assert!(legal.contains(&t));
                    prop_assert_eq!(transition(t, e), Ok(t), "idempotent");
                    if s.is_terminal() { prop_assert_eq!(t, s, "terminal absorbs"); }
                    s = t;
                }
            }
        }

        #[test]
        fn any_state_any_event(s in o_state(), p in p_state(), i in 0usize..8) {
            if let Ok(t) = transition(s, O_EVENTS[i]) {
                prop_assert_eq!(transition(t, O_EVENTS[i]), Ok(t));
            }
            if let Ok(t) = transition(p, P_EVENTS[i]) {
                prop_assert_eq!(transition(t, P_EVENTS[i]), Ok(t));
            }
            if s.is_terminal() { prop_assert_eq!(transition(s, O_EVENTS[i]), Ok(s)); }
            if p.is_terminal() { prop_assert_eq!(transition(p, P_EVENTS[i]), Ok(p)); }
        }
    }
}
