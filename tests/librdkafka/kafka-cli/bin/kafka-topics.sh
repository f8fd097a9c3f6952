#!/usr/bin/env bash
# The part of Kafka's kafka-topics.sh that librdkafka's tests use (test_kafka_topics(): 0045,
# 0052, 0077), over `mk` ($MK_BIN): --create [--partitions N] [--replication-factor 1]
# [--config K=V]..., --delete, --alter --partitions N; always with --bootstrap-server and
# --topic. Anything else is refused (exit 2) rather than guessed.
set -euo pipefail
mk="${MK_BIN:?kafka-topics.sh (minikafka shim): MK_BIN must name the mk executable}"
bootstrap="" topic="" action="" partitions="" configs=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bootstrap-server) bootstrap="$2"; shift ;;
        --topic) topic="$2"; shift ;;
        --create | --delete | --alter) action="${1#--}" ;;
        --partitions) partitions="$2"; shift ;;
        --replication-factor)
            if [ "$2" != 1 ]; then
                echo "kafka-topics.sh (minikafka shim): one broker: replication factor $2 is refused" >&2
                exit 1
            fi
            shift ;;
        --config) configs+=(--config "$2"); shift ;;
        *) echo "kafka-topics.sh (minikafka shim): unsupported argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$bootstrap" ] || [ -z "$topic" ] || [ -z "$action" ]; then
    echo "kafka-topics.sh (minikafka shim): needs --bootstrap-server, --topic and --create, --delete or --alter" >&2
    exit 2
fi
case "$action" in
    create) exec "$mk" -b "$bootstrap" topics create "$topic" --partitions "${partitions:-1}" "${configs[@]}" ;;
    delete) exec "$mk" -b "$bootstrap" topics delete "$topic" ;;
    alter)
        echo "kafka-topics.sh (minikafka shim): --alter --partitions is not mapped (mk topics alter sets configs)" >&2
        exit 2 ;;
esac
