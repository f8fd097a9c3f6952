//! The error codes a response carries, for `minikafka_request_errors_total`: each partition's,
//! topic's, group's or the top-level one, whichever the API has (zeros included; the counter
//! skips them). Iterators over the response, so counting allocates nothing per request.

use kafka_protocol::messages::*;

/// A response whose error codes the metrics count.
pub trait ErrorCodes {
    /// Every error code in the response.
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_;
}

/// Responses with one top-level `error_code`.
macro_rules! top_level {
    ($($response:ty),* $(,)?) => {
        $(impl ErrorCodes for $response {
            fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
                std::iter::once(self.error_code)
            }
        })*
    };
}

top_level!(
    ApiVersionsResponse,
    InitProducerIdResponse,
    DescribeClusterResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    ListGroupsResponse,
    ConsumerGroupHeartbeatResponse,
    DescribeAclsResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    ListTransactionsResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
);

impl ErrorCodes for AddPartitionsToTxnResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let by_transaction = self
            .results_by_transaction
            .iter()
            .flat_map(|t| t.topic_results.iter());
        let topics = by_transaction.chain(self.results_by_topic_v3_and_below.iter());
        let partitions = topics.flat_map(|t| t.results_by_partition.iter());
        std::iter::once(self.error_code).chain(partitions.map(|p| p.partition_error_code))
    }
}

impl ErrorCodes for DescribeTransactionsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.transaction_states.iter().map(|t| t.error_code)
    }
}

impl ErrorCodes for DescribeUserScramCredentialsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        std::iter::once(self.error_code).chain(self.results.iter().map(|r| r.error_code))
    }
}

impl ErrorCodes for AlterUserScramCredentialsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.results.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for DescribeClientQuotasResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        std::iter::once(self.error_code)
    }
}

impl ErrorCodes for AlterClientQuotasResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.entries.iter().map(|e| e.error_code)
    }
}

impl ErrorCodes for CreateAclsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.results.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for DeleteAclsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.filter_results.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for ProduceResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let topics = self.responses.iter();
        topics.flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
    }
}

impl ErrorCodes for FetchResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.responses.iter().flat_map(|t| t.partitions.iter());
        std::iter::once(self.error_code).chain(partitions.map(|p| p.error_code))
    }
}

impl ErrorCodes for ListOffsetsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for MetadataResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let topics = self.topics.iter();
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        std::iter::once(self.error_code)
            .chain(topics.map(|t| t.error_code))
            .chain(partitions.map(|p| p.error_code))
    }
}

impl ErrorCodes for CreateTopicsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.topics.iter().map(|t| t.error_code)
    }
}

impl ErrorCodes for DeleteTopicsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.responses.iter().map(|t| t.error_code)
    }
}

impl ErrorCodes for CreatePartitionsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.results.iter().map(|t| t.error_code)
    }
}

impl ErrorCodes for AlterConfigsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.responses.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for IncrementalAlterConfigsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.responses.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for DeleteRecordsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for DescribeConfigsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.results.iter().map(|r| r.error_code)
    }
}

impl ErrorCodes for FindCoordinatorResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        // v0–3 answer one key at the top level, v4+ one entry per key.
        let top = std::iter::once(self.error_code).filter(|_| self.coordinators.is_empty());
        top.chain(self.coordinators.iter().map(|c| c.error_code))
    }
}

impl ErrorCodes for LeaveGroupResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        std::iter::once(self.error_code).chain(self.members.iter().map(|m| m.error_code))
    }
}

impl ErrorCodes for OffsetCommitResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for TxnOffsetCommitResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for OffsetFetchResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        // v0–7 answer one group at the top level, v8+ one entry per group.
        let old = self.topics.iter().flat_map(|t| t.partitions.iter());
        let groups = self.groups.iter();
        let new = self.groups.iter().flat_map(|g| g.topics.iter());
        let new = new.flat_map(|t| t.partitions.iter());
        std::iter::once(self.error_code)
            .chain(old.map(|p| p.error_code))
            .chain(groups.map(|g| g.error_code))
            .chain(new.map(|p| p.error_code))
    }
}

impl ErrorCodes for OffsetDeleteResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        std::iter::once(self.error_code).chain(partitions.map(|p| p.error_code))
    }
}

impl ErrorCodes for DeleteGroupsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.results.iter().map(|g| g.error_code)
    }
}

impl ErrorCodes for DescribeGroupsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.groups.iter().map(|g| g.error_code)
    }
}

impl ErrorCodes for ConsumerGroupDescribeResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        self.groups.iter().map(|g| g.error_code)
    }
}

impl ErrorCodes for OffsetForLeaderEpochResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for DescribeLogDirsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        std::iter::once(self.error_code).chain(self.results.iter().map(|r| r.error_code))
    }
}

impl ErrorCodes for DescribeProducersResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        partitions.map(|p| p.error_code)
    }
}

impl ErrorCodes for WriteTxnMarkersResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let topics = self.markers.iter().flat_map(|m| m.topics.iter());
        topics.flat_map(|t| t.partitions.iter().map(|p| p.error_code))
    }
}

impl ErrorCodes for DescribeTopicPartitionsResponse {
    fn error_codes(&self) -> impl Iterator<Item = i16> + '_ {
        let partitions = self.topics.iter().flat_map(|t| t.partitions.iter());
        self.topics
            .iter()
            .map(|t| t.error_code)
            .chain(partitions.map(|p| p.error_code))
    }
}
