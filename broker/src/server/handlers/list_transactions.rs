//! ListTransactions (key 66), v0–2: the transactions every coordinator holds, filtered by
//! state, producer id, duration (v1+, KIP-994) and transactional id pattern (v2+, KIP-1152).
//!
//! Contract:
//! - Every `__transaction_state` coordinator is asked (in parallel) with the state,
//!   producer-id and duration filters; the answers are merged and sorted by id. The pattern
//!   (a regular expression that must match the whole id, as Kafka's `Matcher.matches`)
//!   filters the merged list; an invalid or oversized pattern is INVALID_REQUEST. Empty or
//!   null pattern: no filter.
//! - A coordinator still loading makes the answer COORDINATOR_LOAD_IN_PROGRESS (retriable);
//!   one that cannot be reached, its routing code; either way with what the others listed.
//! - Unknown state filters are listed back once each (as Kafka).

use std::collections::BTreeSet;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, ListedTransaction, TxnRequest, TxnResponse};

use super::str_bytes;
use crate::server::shard_context::{TopicCatalogue, TxnOps};
use crate::server::txns::route;

/// Largest compiled pattern (bytes of the regex program).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

fn pattern(text: Option<&str>) -> Result<Option<regex::Regex>, ErrorCode> {
    match text.filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => regex::RegexBuilder::new(&format!("^(?:{t})$"))
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map(Some)
            .map_err(|_| ErrorCode::INVALID_REQUEST),
    }
}

/// Handles the request (see the module documentation).
pub async fn handle(
    state: &(impl TopicCatalogue + TxnOps),
    request: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let pattern = match pattern(request.transactional_id_pattern.as_deref()) {
        Ok(p) => p,
        Err(code) => {
            response.error_code = code.code();
            return response;
        }
    };
    let ask = txn::ListTransactionsRequest {
        state_filters: request
            .state_filters
            .iter()
            .map(|s| s.to_string())
            .collect(),
        producer_id_filters: request.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_filter_ms: if version >= 1 {
            request.duration_filter
        } else {
            -1
        },
    };
    let count = route::state_partition_count(state).unwrap_or(0);
    let asks = (0..count).map(|partition| {
        let request = TxnRequest::ListTransactions(ask.clone());
        async move { route::submit(state, partition, request).await }
    });
    let mut code = ErrorCode::NONE;
    let mut unknown = BTreeSet::new();
    let mut listed: Vec<ListedTransaction> = Vec::new();
    for answer in futures::future::join_all(asks).await {
        match answer {
            Ok(TxnResponse::ListTransactions(r)) => {
                if r.error_code.is_error() {
                    code = r.error_code;
                }
                unknown.extend(r.unknown_state_filters);
                listed.extend(r.transactions);
            }
            Ok(_) => code = ErrorCode::UNKNOWN_SERVER_ERROR,
            Err(e) => code = e,
        }
    }
    if count == 0 {
        code = ErrorCode::COORDINATOR_NOT_AVAILABLE;
    }
    listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    response.error_code = code.code();
    response.unknown_state_filters = unknown.iter().map(|s| str_bytes(s)).collect();
    response.transaction_states = listed
        .into_iter()
        .filter(|t| {
            pattern
                .as_ref()
                .is_none_or(|p| p.is_match(&t.transactional_id))
        })
        .map(|t| {
            let mut s = TransactionState::default();
            s.transactional_id = str_bytes(&t.transactional_id).into();
            s.producer_id = t.producer_id.into();
            s.transaction_state = str_bytes(&t.state);
            s
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_matches_whole_ids_and_bad_ones_are_refused() {
        assert!(pattern(None).expect("none").is_none());
        assert!(pattern(Some("")).expect("empty").is_none());
        let p = pattern(Some("app-.*")).expect("valid").expect("some");
        assert!(p.is_match("app-1"));
        assert!(!p.is_match("my-app-1"));
        assert_eq!(pattern(Some("(")).err(), Some(ErrorCode::INVALID_REQUEST));
        assert_eq!(
            pattern(Some("a{1000}{1000}")).err(),
            Some(ErrorCode::INVALID_REQUEST)
        );
    }
}
