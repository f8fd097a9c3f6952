//! Committed offsets and group removal: OffsetCommit, OffsetFetch, OffsetDelete,
//! DeleteGroups and `offsets.retention.minutes` expiry. Methods of [`Coordinator`]; durable
//! effects only through appended records (I20, I21).

use std::collections::BTreeMap;

use super::classic::ClassicGroup;
use super::codes::ErrorCode;
use super::coordinator::*;
use super::handles::{Millis, RequestToken};
use super::messages::*;
use super::records::*;
use super::state::{Event, State};
use super::Group;

impl Coordinator {
    // ------------------------------------------------------------ offsets

    /// Kafka's OffsetCommit validation for the group (I22): members of the current generation
    /// may commit except while the new assignment is not out yet; a simple commit (generation
    /// < 0, no member) only to a group without members.
    pub(super) fn validate_commit(&mut self, req: &OffsetCommitRequest, now: Millis) -> ErrorCode {
        let simple =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        match self.groups.get_mut(&req.group_id) {
            None if simple => {
                self.groups.insert(
                    req.group_id.clone(),
                    Group::Classic(ClassicGroup::new(&req.group_id, now)),
                );
                ErrorCode::NONE
            }
            None => ErrorCode::ILLEGAL_GENERATION,
            Some(Group::Consumer(c)) => c.validate_offset_commit(&req.member_id, req.generation_id),
            Some(Group::Classic(g)) => {
                if g.state == State::Dead {
                    return ErrorCode::COORDINATOR_NOT_AVAILABLE;
                }
                if simple {
                    return if g.members.is_empty() {
                        ErrorCode::NONE
                    } else {
                        ErrorCode::UNKNOWN_MEMBER_ID
                    };
                }
                if let Err(code) =
                    g.validate_member(&req.member_id, req.group_instance_id.as_deref())
                {
                    return code;
                }
                if req.generation_id != g.generation {
                    return ErrorCode::ILLEGAL_GENERATION;
                }
                match g.transition(Event::OffsetCommit, now) {
                    Ok(_) => ErrorCode::NONE,
                    Err(code) => code,
                }
            }
        }
    }

    /// The answer and the records of a commit (OffsetCommit, TxnOffsetCommit) of `topics`
    /// for `group_id`: `group_code` on every partition when it is an error; else each
    /// partition is refused on its own (a topic name no topic has, metadata over
    /// `offset.metadata.max.bytes`) or gets its OffsetCommit record, stamped `now`.
    pub(super) fn commit_records(
        &self,
        group_id: &str,
        topics: &[CommitTopic],
        group_code: ErrorCode,
        now: Millis,
        expire_timestamp: Option<Millis>,
    ) -> (Vec<TopicResults>, Vec<GroupRecord>) {
        let mut records = Vec::new();
        let topics = topics
            .iter()
            .map(|t| TopicResults {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let metadata = p.metadata.clone().unwrap_or_default();
                        let error_code = if group_code.is_error() {
                            group_code
                        } else if too_long(&t.name) {
                            // No topic has such a name (Kafka: at most 249 characters).
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                        } else if metadata.len() > self.config.offset_metadata_max_bytes
                            || too_long(&metadata)
                        {
                            ErrorCode::OFFSET_METADATA_TOO_LARGE
                        } else {
                            let value = OffsetCommitValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata,
                                commit_timestamp: now,
                                expire_timestamp,
                            };
                            records.push(GroupRecord {
                                key: offset_commit_key(group_id, &t.name, p.partition),
                                value: Some(value.encode()),
                            });
                            ErrorCode::NONE
                        };
                        PartitionResult {
                            partition: p.partition,
                            error_code,
                        }
                    })
                    .collect(),
            })
            .collect();
        (topics, records)
    }

    pub(super) fn offset_commit(
        &mut self,
        token: RequestToken,
        req: OffsetCommitRequest,
        now: Millis,
    ) {
        let group_code = if req.group_id.is_empty() || too_long(&req.group_id) {
            ErrorCode::INVALID_GROUP_ID
        } else if too_long(&req.member_id) || req.group_instance_id.as_deref().is_some_and(too_long)
        {
            ErrorCode::UNKNOWN_MEMBER_ID
        } else {
            self.validate_commit(&req, now)
        };
        let expire_timestamp = (req.version <= 4 && req.retention_time_ms >= 0)
            .then(|| now.saturating_add(req.retention_time_ms));
        let (topics, records) = self.commit_records(
            &req.group_id,
            &req.topics,
            group_code,
            now,
            expire_timestamp,
        );
        let response = GroupResponse::OffsetCommit(OffsetCommitResponse { topics });
        if records.is_empty() {
            self.respond(token, response);
            self.drop_if_unused(&req.group_id);
        } else {
            // I20: acknowledged only once durable.
            self.append(
                records,
                vec![req.group_id.clone()],
                vec![Completion::Respond(token, response)],
            );
        }
    }

    pub(super) fn offset_fetch(&self, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        let empty = BTreeMap::new();
        let groups = req
            .groups
            .iter()
            .map(|fg| {
                let offsets = self.offsets.get(&fg.group_id).unwrap_or(&empty);
                // I76: with require_stable, a partition whose transactional offsets are
                // pending answers UNSTABLE_OFFSET_COMMIT, so the consumer retries.
                let unstable = if req.require_stable {
                    self.unstable_partitions(&fg.group_id)
                } else {
                    std::collections::BTreeSet::new()
                };
                let fetched = |p: i32, o: Option<&CommittedOffset>, topic: &String| match o {
                    _ if unstable.contains(&(topic.clone(), p)) => FetchedOffset {
                        partition: p,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: Some(String::new()),
                        error_code: ErrorCode::UNSTABLE_OFFSET_COMMIT,
                    },
                    Some(o) => FetchedOffset {
                        partition: p,
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: Some(o.metadata.clone()),
                        error_code: ErrorCode::NONE,
                    },
                    None => FetchedOffset {
                        partition: p,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: Some(String::new()),
                        error_code: ErrorCode::NONE,
                    },
                };
                let topics = match &fg.topics {
                    None => {
                        let mut out: Vec<FetchedTopic> = Vec::new();
                        for ((topic, partition), o) in offsets {
                            if out.last().map(|t| &t.name) != Some(topic) {
                                out.push(FetchedTopic {
                                    name: topic.clone(),
                                    partitions: Vec::new(),
                                });
                            }
                            if let Some(t) = out.last_mut() {
                                t.partitions.push(fetched(*partition, Some(o), topic));
                            }
                        }
                        out
                    }
                    Some(list) => list
                        .iter()
                        .map(|tp| FetchedTopic {
                            name: tp.name.clone(),
                            partitions: tp
                                .partitions
                                .iter()
                                .map(|p| fetched(*p, offsets.get(&(tp.name.clone(), *p)), &tp.name))
                                .collect(),
                        })
                        .collect(),
                };
                FetchedGroup {
                    group_id: fg.group_id.clone(),
                    error_code: ErrorCode::NONE,
                    topics,
                }
            })
            .collect();
        OffsetFetchResponse { groups }
    }

    pub(super) fn offset_delete(&mut self, token: RequestToken, req: OffsetDeleteRequest) {
        let group_error = |code| {
            GroupResponse::OffsetDelete(OffsetDeleteResponse {
                error_code: code,
                topics: Vec::new(),
            })
        };
        // Which topics may not be deleted: those the group subscribes to (all, when unknown).
        let subscribed: Result<Option<Vec<String>>, ErrorCode> =
            match self.groups.get(&req.group_id) {
                None => Err(ErrorCode::GROUP_ID_NOT_FOUND),
                Some(Group::Consumer(c)) => Ok(if c.is_empty() { Some(Vec::new()) } else { None }),
                Some(Group::Classic(g)) => match g.state {
                    State::Dead => Err(ErrorCode::GROUP_ID_NOT_FOUND),
                    State::Empty => Ok(Some(Vec::new())),
                    _ if g.protocol_type.as_deref() != Some("consumer") => {
                        Err(ErrorCode::NON_EMPTY_GROUP)
                    }
                    _ => Ok(g.subscribed_topics()),
                },
            };
        let subscribed = match subscribed {
            Ok(s) => s,
            Err(code) => return self.respond(token, group_error(code)),
        };
        let offsets = self.offset_keys(&req.group_id);
        let mut records = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let blocked = match &subscribed {
                    None => true,
                    Some(list) => list.contains(&t.name),
                };
                TopicResults {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| {
                            let error_code = if blocked {
                                ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC
                            } else {
                                if offsets.contains(&(t.name.clone(), *p)) {
                                    records.push(GroupRecord {
                                        key: offset_commit_key(&req.group_id, &t.name, *p),
                                        value: None,
                                    });
                                }
                                ErrorCode::NONE
                            };
                            PartitionResult {
                                partition: *p,
                                error_code,
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let response = GroupResponse::OffsetDelete(OffsetDeleteResponse {
            error_code: ErrorCode::NONE,
            topics,
        });
        if records.is_empty() {
            self.respond(token, response);
        } else {
            self.append(
                records,
                vec![req.group_id.clone()],
                vec![Completion::Respond(token, response)],
            );
        }
    }

    /// The partitions with a committed offset for `gid`: durable ones and those in appends
    /// still in flight (which will land in the log before anything appended now), and those
    /// with transactional offsets pending (a deletion removes them too, as in Kafka).
    pub(super) fn offset_keys(&self, gid: &str) -> std::collections::BTreeSet<(String, i32)> {
        let mut keys: std::collections::BTreeSet<(String, i32)> = self
            .offsets
            .get(gid)
            .into_iter()
            .flat_map(|o| o.keys().cloned())
            .collect();
        keys.extend(self.unstable_partitions(gid));
        for p in self.pending.values() {
            if p.kind != AppendKind::Plain {
                continue; // transactional ones: counted by unstable_partitions
            }
            for r in &p.records {
                if let Ok(RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                }) = RecordKey::decode(&r.key)
                {
                    if group == gid && r.value.is_some() {
                        keys.insert((topic, partition));
                    }
                }
            }
        }
        keys
    }

    /// Tombstones for a group's offsets (durable or in flight) and metadata.
    pub(super) fn group_tombstones(&self, gid: &str) -> Vec<GroupRecord> {
        let mut records: Vec<GroupRecord> = self
            .offset_keys(gid)
            .iter()
            .map(|(topic, partition)| GroupRecord {
                key: offset_commit_key(gid, topic, *partition),
                value: None,
            })
            .collect();
        match self.groups.get(gid) {
            Some(Group::Consumer(c)) => {
                records.extend(
                    c.durable_records()
                        .keys()
                        .filter(|k| k.get(..2) != Some(&[0, 3]))
                        .map(|k| GroupRecord {
                            key: k.clone(),
                            value: None,
                        }),
                );
                records.push(GroupRecord {
                    key: RecordKey::Consumer {
                        version: 3,
                        group: gid.to_owned(),
                    }
                    .encode(),
                    value: None,
                });
            }
            _ => records.push(GroupRecord {
                key: group_metadata_key(gid),
                value: None,
            }),
        }
        records
    }

    pub(super) fn delete_groups(
        &mut self,
        token: RequestToken,
        req: DeleteGroupsRequest,
        now: Millis,
    ) {
        let mut records = Vec::new();
        let mut completions = Vec::new();
        let mut groups = Vec::new();
        let mut results = Vec::with_capacity(req.group_ids.len());
        for gid in &req.group_ids {
            let code = match self.groups.get_mut(gid) {
                None => ErrorCode::GROUP_ID_NOT_FOUND,
                Some(Group::Consumer(c)) => {
                    if c.is_empty() {
                        ErrorCode::NONE
                    } else {
                        ErrorCode::NON_EMPTY_GROUP
                    }
                }
                Some(Group::Classic(g)) => {
                    if g.state == State::Empty && !g.pending_members.is_empty() {
                        g.pending_members.clear();
                    }
                    match g.transition(Event::Delete, now) {
                        Ok(_) => ErrorCode::NONE,
                        Err(code) => code,
                    }
                }
            };
            if !code.is_error() && !groups.contains(gid) {
                records.extend(self.group_tombstones(gid));
                completions.push(Completion::Deletion { group: gid.clone() });
                groups.push(gid.clone());
            }
            results.push((gid.clone(), code));
        }
        let response = GroupResponse::DeleteGroups(DeleteGroupsResponse { results });
        if records.is_empty() {
            self.respond(token, response);
        } else {
            completions.push(Completion::Respond(token, response));
            self.append(records, groups, completions);
        }
    }

    /// `offsets.retention.minutes`: offsets of empty classic groups expire (never while the
    /// group has members, appends in flight or transactional offsets pending); a group left with no offsets is removed.
    pub(super) fn expire_offsets(&mut self, now: Millis) {
        let retention = self.config.offsets_retention_ms;
        let mut ids: Vec<String> = self.groups.keys().cloned().collect();
        ids.sort();
        for gid in ids {
            // Not while appends are in flight, nor while transactional offsets are pending
            // (their marker would commit into a group removed meanwhile, I73).
            if self.inflight.contains_key(&gid) || self.txn_pending.contains_key(&gid) {
                continue;
            }
            let Some(Group::Classic(g)) = self.groups.get(&gid) else {
                continue;
            };
            if g.state != State::Empty || !g.pending_members.is_empty() {
                continue;
            }
            // An empty group that once had members expires from when it became empty.
            let empty_since = g.stored.as_ref().map(|_| g.state_since);
            let offsets = self.offsets.get(&gid);
            let mut records = Vec::new();
            let mut remaining = 0usize;
            for ((topic, partition), o) in offsets.into_iter().flatten() {
                let expired = match o.expire_timestamp {
                    Some(at) => now >= at,
                    None => {
                        now.saturating_sub(
                            empty_since
                                .unwrap_or(o.commit_timestamp)
                                .max(o.commit_timestamp),
                        ) >= retention
                    }
                };
                if expired {
                    records.push(GroupRecord {
                        key: offset_commit_key(&gid, topic, *partition),
                        value: None,
                    });
                } else {
                    remaining += 1;
                }
            }
            if remaining > 0 {
                if !records.is_empty() {
                    self.append(records, vec![gid.clone()], Vec::new());
                }
                continue;
            }
            // Nothing left: the group goes too (Dead until its tombstones are durable).
            if g.stored.is_some() {
                records.push(GroupRecord {
                    key: group_metadata_key(&gid),
                    value: None,
                });
            }
            if records.is_empty() {
                // Nothing durable to remove: a live-only empty group.
                self.groups.remove(&gid);
                continue;
            }
            if let Some(Group::Classic(g)) = self.groups.get_mut(&gid) {
                if g.transition(Event::Expire, now).is_err() {
                    continue;
                }
            }
            self.append(
                records,
                vec![gid.clone()],
                vec![Completion::Deletion { group: gid.clone() }],
            );
        }
    }
}
