//! The refresh of each listener's `http(s):` JWKS (I178): one task on shard 0 per such
//! listener fetches the keys every `sasl.oauthbearer.jwks.endpoint.refresh.ms`, as Kafka's
//! `RefreshingHttpsJwks` does on its own thread.
//!
//! Contract (I178): the fetch (a blocking HTTP GET, bounded in time and bytes by
//! [`crate::config::jwks`]) runs through [`Backend::run_blocking`] (a thread of its own),
//! never on a shard's event loop, so a stalled endpoint delays only the next set of keys;
//! a failed fetch keeps the keys every connection checks with and is tried again after the
//! retry backoff, doubling up to its maximum; time comes from the backend; the task ends at
//! shutdown, also while a fetch is in flight.
//!
//! [`fetch_for_unknown_kid`] (I187): a connection whose OAUTHBEARER token names a `kid` the
//! keys lack has them fetched at once, as Kafka's `maybeExpediteRefresh`, bounded by
//! [`JwksRefresher::expedite`]; the connection awaits the fetch (through `run_blocking`, as
//! above), the shard serves on.

use std::rc::Rc;

use futures::future::{select, Either};
use minikafka_core::backend::Backend;

use super::shard::{sleep_or_stop, ShardState};
use crate::config::jwks::{Expedite, JwksRefresher, JwksValidator};

/// Starts a refresh task for every listener whose JWKS is an `http(s):` endpoint.
pub fn spawn<B: Backend>(state: &Rc<ShardState<B>>) {
    for listener in &state.shared.config.listeners {
        let Some(refresher) = listener
            .sasl
            .oauthbearer_jwks
            .as_ref()
            .and_then(|jwks| jwks.refresher())
        else {
            continue;
        };
        let st = Rc::clone(state);
        let name = std::sync::Arc::clone(&listener.name);
        state.backend.spawn_local(async move {
            refresh_until_stopped(&st, &name, refresher).await;
        });
    }
}

async fn refresh_until_stopped<B: Backend>(
    state: &ShardState<B>,
    listener: &str,
    refresher: JwksRefresher,
) {
    let mut wait = refresher.refresh_interval();
    let mut failures = 0_u32;
    while sleep_or_stop(state, wait).await {
        let fetch = std::pin::pin!(state.backend.run_blocking(refresher.fetch()));
        let stop = std::pin::pin!(state.stop.recv());
        let fetched = match select(fetch, stop).await {
            Either::Left((fetched, _)) => fetched,
            Either::Right(_) => break,
        };
        match fetched {
            Ok(jwks) => {
                if failures > 0 {
                    tracing::info!(listener, url = %refresher.url, failures, "JWKS fetched again");
                }
                tracing::debug!(listener, url = %refresher.url, keys = jwks.keys.len(), "JWKS refreshed");
                refresher.store(jwks);
                failures = 0;
                wait = refresher.refresh_interval();
            }
            Err(why) => {
                failures = failures.saturating_add(1);
                wait = refresher.retry_wait(failures);
                tracing::warn!(
                    listener,
                    url = %refresher.url,
                    %why,
                    failures,
                    retry_in_ms = wait.as_millis() as u64,
                    "JWKS not refreshed; keeping its keys"
                );
            }
        }
    }
}

/// Before a token naming `kid` is checked against `validator`'s endpoint keys (I187): when
/// the keys lack `kid`, fetches them at once (or waits for the fetch in flight), unless
/// [`JwksRefresher::expedite`] says a fetch began too recently. Only the calling connection
/// waits, at most one fetch's bounded time; returns at once at shutdown.
pub async fn fetch_for_unknown_kid<B: Backend>(
    state: &ShardState<B>,
    validator: &JwksValidator,
    kid: &str,
) {
    let Some(refresher) = validator.refresher() else {
        return;
    };
    if refresher.holds(kid) {
        return;
    }
    let stop = std::pin::pin!(state.stop.recv());
    match refresher.expedite(kid, state.backend.wall_clock_ms()) {
        Expedite::No => {}
        Expedite::Wait(in_flight) => {
            let _ = select(in_flight, stop).await;
        }
        Expedite::Fetch(ticket) => {
            let fetch = std::pin::pin!(state.backend.run_blocking(refresher.fetch()));
            let fetched = match select(fetch, stop).await {
                Either::Left((fetched, _)) => fetched,
                Either::Right(_) => return,
            };
            let url = &refresher.url;
            match fetched {
                Ok(jwks) => {
                    tracing::info!(%url, keys = jwks.keys.len(), "JWKS fetched for a token naming a key it did not hold");
                    refresher.store(jwks);
                }
                Err(why) => {
                    tracing::warn!(%url, %why, "JWKS not fetched for a token naming a key it did not hold; keeping its keys");
                }
            }
            drop(ticket);
        }
    }
}
