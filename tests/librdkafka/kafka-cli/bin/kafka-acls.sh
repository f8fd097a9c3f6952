#!/usr/bin/env bash
# The part of Kafka's kafka-acls.sh that librdkafka's tests use (0109, 0115, 0119), over `mk`
# ($MK_BIN): --add or --remove [--force], one --allow-principal or --deny-principal, its
# --allow-host or --deny-host, one --operation and one --topic, with --bootstrap-server.
# Anything else is refused (exit 2) rather than guessed.
set -euo pipefail
mk="${MK_BIN:?kafka-acls.sh (minikafka shim): MK_BIN must name the mk executable}"
bootstrap="" action="" principal="" permission="" host="" operation="" topic=""
while [ $# -gt 0 ]; do
    case "$1" in
        --bootstrap-server) bootstrap="$2"; shift ;;
        --add) action=add ;;
        --remove) action=remove ;;
        --force) ;;
        --allow-principal) principal="$2"; permission=allow; shift ;;
        --deny-principal) principal="$2"; permission=deny; shift ;;
        --allow-host | --deny-host) host="$2"; shift ;;
        --operation) operation="$(echo "$2" | tr '[:upper:]' '[:lower:]')"; shift ;;
        --topic) topic="$2"; shift ;;
        *) echo "kafka-acls.sh (minikafka shim): unsupported argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$bootstrap" ] || [ -z "$action" ] || [ -z "$principal" ] || [ -z "$operation" ] || [ -z "$topic" ]; then
    echo "kafka-acls.sh (minikafka shim): needs --bootstrap-server, --add or --remove, a principal, --operation and --topic" >&2
    exit 2
fi
exec "$mk" -b "$bootstrap" acls "$action" --topic "$topic" --principal "$principal" \
    --operation "$operation" --permission "$permission" --host "${host:-*}"
