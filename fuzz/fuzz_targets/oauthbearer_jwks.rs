//! libFuzzer entry for `minikafka_fuzz_targets`'s `oauthbearer_jwks` target (contract in its doc comment).
#![no_main]

use minikafka_fuzz_targets::alloc_meter::MeteredAllocator;

#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

libfuzzer_sys::fuzz_target!(|data: &[u8]| minikafka_fuzz_targets::sasl::oauthbearer_jwks(data));
