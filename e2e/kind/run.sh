#!/usr/bin/env bash
# The whole stratalog story on a real kind cluster (needs Docker; see e2e/README.md):
#
#   1. a kind cluster ($CLUSTER, default stratalog-e2e) from e2e/kind/kind-config.yaml;
#   2. the image built from the repository's Dockerfile (stratalog:e2e) and loaded into kind;
#   3. the Helm chart (charts/stratalog) installed in $NAMESPACE (default stratalog) with that image;
#   4. two LogDirs: examples/logdir-two-volumes.yaml (dir-a, two volumes) with its engine schedule
#      shortened, and e2e/kind/logdir-b.yaml (dir-b, one volume); the operator turns each into PVCs,
#      a ConfigMap, a Service and a StatefulSet whose pod runs `stratalog agent`;
#   5. two Topics (e2e/kind/topics-fast.yaml): "orders" (delete policy, 30 s retention, 1 KiB
#      segments) and "customer-profiles" (compacted); their partitions are spread over both LogDirs;
#   6. records produced to each partition through the HTTP API of the agent holding it (as read from
#      the Topic's status.assignment, through kubectl port-forward), consumed back and compared;
#   7. retention seen in the cluster: logStartOffset advancing in status.logDirs and SegmentsDeleted
#      events; compaction seen: dirtyRatio dropping, lastCleanTime and Cleaned events, and each key's
#      latest value intact;
#   8. both Topics deleted: "orders" (deletionPolicy Delete) loses its data, "customer-profiles"
#      (deletionPolicy Retain) keeps it on the LogDirs.
#
# Usage, from anywhere:   bash e2e/kind/run.sh
# Environment:
#   CLUSTER=stratalog-e2e      kind cluster name (it must not exist yet: the story starts from empty logs)
#   NAMESPACE=stratalog        namespace of the release, the LogDirs and the Topics
#   KEEP=1                     keep the cluster at the end (also after a failure); default: delete it
#   KIND_NODE_IMAGE=...        node image for `kind create cluster --image` (default: kind's own)
#   RETENTION_TIMEOUT=300      seconds to wait for retention to show in the cluster
#   COMPACTION_TIMEOUT=300     seconds to wait for compaction to show in the cluster
# Needs on PATH: docker (with a running daemon), kind, kubectl, helm, curl, jq. Works with bash 3.2.
#
# Sourcing this file defines the steps without running them.
set -euo pipefail

CLUSTER="${CLUSTER:-stratalog-e2e}"
NAMESPACE="${NAMESPACE:-stratalog}"
KEEP="${KEEP:-0}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-}"
RETENTION_TIMEOUT="${RETENTION_TIMEOUT:-300}"
COMPACTION_TIMEOUT="${COMPACTION_TIMEOUT:-300}"
CONTEXT="kind-$CLUSTER"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

IMAGE_REPOSITORY=stratalog
IMAGE_TAG=e2e
RELEASE=stratalog                      # so the chart names things stratalog-operator, stratalog-agent
OPERATOR="deployment/$RELEASE-operator"
LOGDIRS="dir-a dir-b"
DELETE_TOPIC=orders                    # Topic objects (metadata.name) of e2e/kind/topics-fast.yaml
COMPACT_TOPIC=customer-profiles
ROUNDS=20                              # produce requests per partition
PER_REQUEST=5                          # records per request: one batch of a few hundred bytes < segment.bytes
KEYS=5                                 # keys of the compacted topic, each written once per round

CREATED=0
WORK=""
PF_PIDS=""

# -- output and helpers -------------------------------------------------------------------------
say() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf '\nrun.sh: error: %s\n' "$*" >&2; exit 1; }

# kubectl on the kind cluster and the scenario's namespace, never the current context.
k() { kubectl --context "$CONTEXT" --namespace "$NAMESPACE" "$@"; }

# wait_for SECONDS WHAT COMMAND...: run COMMAND (quietly) until it succeeds.
wait_for() {
  local timeout=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      die "timed out after ${timeout}s waiting for $what"
    fi
    sleep 2
  done
}

# api METHOD URL [JSON]: the response body on stdout; anything but a 2xx is fatal, with the error body.
api() {
  local method=$1 url=$2 body=${3-} out code
  out="$WORK/response.$$.$RANDOM"
  if [[ -n $body ]]; then
    code=$(curl -sS -o "$out" -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' \
      --data-binary "$body" "$url") || die "$method $url: curl failed"
  else
    code=$(curl -sS -o "$out" -w '%{http_code}' -X "$method" "$url") || die "$method $url: curl failed"
  fi
  if [[ $code != 2?? ]]; then
    die "$method $url answered HTTP $code: $(cat "$out")"
  fi
  cat "$out"
  rm -f "$out"
}

# -- prerequisites, cluster, image, chart -------------------------------------------------------
check_tools() {
  local missing="" tool
  for tool in docker kind kubectl helm curl jq; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
  done
  if [[ -n $missing ]]; then
    die "not found on PATH:$missing (this scenario needs docker, kind, kubectl, helm, curl and jq)"
  fi
  if ! docker info >/dev/null 2>&1; then
    die "docker is installed but its daemon does not answer ('docker info' failed): start Docker, or check access to its socket"
  fi
}

create_cluster() {
  if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    die "a kind cluster named $CLUSTER already exists and the story needs empty logs: delete it (kind delete cluster --name $CLUSTER) or choose another name (CLUSTER=...)"
  fi
  say "creating kind cluster $CLUSTER (e2e/kind/kind-config.yaml)"
  CREATED=1    # from here on, the exit trap deletes the cluster (unless KEEP=1)
  if [[ -n $KIND_NODE_IMAGE ]]; then
    kind create cluster --name "$CLUSTER" --config "$HERE/kind-config.yaml" --image "$KIND_NODE_IMAGE" --wait 180s
  else
    kind create cluster --name "$CLUSTER" --config "$HERE/kind-config.yaml" --wait 180s
  fi
  kubectl --context "$CONTEXT" get nodes -o wide
  kubectl --context "$CONTEXT" get storageclass
}

build_image() {
  say "building $IMAGE_REPOSITORY:$IMAGE_TAG from the repository's Dockerfile and loading it into kind"
  docker build -t "$IMAGE_REPOSITORY:$IMAGE_TAG" "$ROOT"
  kind load docker-image "$IMAGE_REPOSITORY:$IMAGE_TAG" --name "$CLUSTER"
}

install_chart() {
  say "installing the chart (release $RELEASE, namespace $NAMESPACE) with image $IMAGE_REPOSITORY:$IMAGE_TAG"
  # Access control off: this story's clients present no token (tests/node runs the secure default).
  # pullPolicy=Never for the operator: the image exists only inside kind. The operator gives its agent
  # pods the same image (STRATALOG_IMAGE) with IfNotPresent, which finds the loaded image too.
  helm install "$RELEASE" "$ROOT/charts/stratalog" --kube-context "$CONTEXT" \
    --namespace "$NAMESPACE" --create-namespace \
    --set image.repository="$IMAGE_REPOSITORY" --set image.tag="$IMAGE_TAG" --set image.pullPolicy=Never \
    --set tls.enabled=false --set access.authentication=none \
    --wait --timeout 5m
  kubectl --context "$CONTEXT" wait --for condition=Established --timeout 60s \
    crd/logdirs.stratalog.io crd/topics.stratalog.io
  k rollout status "$OPERATOR" --timeout 120s
  k get deployments,serviceaccounts,pods
}

# -- LogDirs ---------------------------------------------------------------------------------------
wait_statefulset() {
  wait_for 120 "the operator to create StatefulSet $1" k get statefulset "$1"
  k rollout status "statefulset/$1" --timeout 300s
}

create_logdirs() {
  say "LogDirs: dir-a (examples/logdir-two-volumes.yaml) and dir-b (e2e/kind/logdir-b.yaml)"
  # The example as published, with its engine schedule shortened for the demo (it checks retention
  # every minute; the cleaner backs off 15 s): patched locally, so the LogDir is created once.
  kubectl patch --local -f "$ROOT/examples/logdir-two-volumes.yaml" --type merge -o yaml \
    -p '{"spec":{"engine":{"settings":{"log.retention.check.interval.ms":5000,"log.cleaner.backoff.ms":5000}}}}' \
    | k apply -f -
  k apply -f "$HERE/logdir-b.yaml"
  local logdir
  for logdir in $LOGDIRS; do
    wait_statefulset "$logdir"
    k wait --for condition=Ready --timeout 180s "logdir/$logdir"
  done
  k get logdirs
  info "what the operator made of them (PVCs <logdir>-<volume>, ConfigMap, Service, StatefulSet):"
  k get persistentvolumeclaims,configmaps,services,statefulsets,pods -l app.kubernetes.io/managed-by=stratalog-operator
}

# -- agents' HTTP APIs through port-forward ------------------------------------------------------
port_forward() {
  local logdir=$1 log port="" deadline
  log="$WORK/port-forward-$logdir.log"
  # kubectl itself in the background (not a function), so that its pid is the one killed at exit.
  kubectl --context "$CONTEXT" --namespace "$NAMESPACE" port-forward "service/$logdir" ":8092" >"$log" 2>&1 &
  PF_PIDS="$PF_PIDS $!"
  deadline=$((SECONDS + 60))
  while [[ -z $port ]]; do
    port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$log" | head -n 1)
    if [[ -z $port ]]; then
      if ((SECONDS >= deadline)); then
        die "kubectl port-forward service/$logdir did not start: $(cat "$log")"
      fi
      sleep 1
    fi
  done
  echo "http://127.0.0.1:$port" >"$WORK/url-$logdir"
  wait_for 60 "the agent of $logdir to answer /readyz through port $port" curl -fsS "http://127.0.0.1:$port/readyz"
  info "$logdir: agent API at http://127.0.0.1:$port (kubectl port-forward service/$logdir :8092)"
}

stop_port_forwards() {
  local pid
  for pid in $PF_PIDS; do
    kill "$pid" 2>/dev/null || true
  done
  PF_PIDS=""
}

agent_url() {
  [[ -f "$WORK/url-$1" ]] || die "no port-forward to LogDir $1"
  cat "$WORK/url-$1"
}

# -- Topics ------------------------------------------------------------------------------------------
kafka_name() { k get topic "$1" -o jsonpath='{.status.topicName}'; }

# "partition logdir" lines: where each partition of Topic $1 lives (its first, preferred LogDir).
assignment() {
  k get topic "$1" -o json | jq -r '.status.assignment[]? | "\(.partition) \(.logDirs[0])"'
}

# The same, as saved by create_topics once the assignment was complete (it outlives the Topic).
placed() { echo "$WORK/assignment-$1"; }

assignment_complete() {
  k get topic "$1" -o json | jq -e '(.status.assignment // []) as $a
    | ($a | length) == .spec.partitions and all($a[]; (.logDirs | length) >= 1)' >/dev/null
}

partition_ready() {  # URL TOPIC PARTITION: the agent holds the partition
  curl -fsS "$1/v1/topics/$2/partitions/$3" >/dev/null 2>&1
}

create_topics() {
  say "Topics: $DELETE_TOPIC (delete policy) and $COMPACT_TOPIC (compacted), from e2e/kind/topics-fast.yaml"
  k apply -f "$HERE/topics-fast.yaml"
  k wait --for condition=Ready --timeout 120s "topic/$DELETE_TOPIC" "topic/$COMPACT_TOPIC"
  local topic name partition logdir
  for topic in $DELETE_TOPIC $COMPACT_TOPIC; do
    wait_for 60 "the controller to assign every partition of Topic $topic" assignment_complete "$topic"
    name=$(kafka_name "$topic")
    info "Topic $topic (Kafka topic $name): kubectl get topic $topic -o jsonpath='{.status.assignment}'"
    info "  $(k get topic "$topic" -o jsonpath='{.status.assignment}')"
    assignment "$topic" >"$(placed "$topic")"
    while read -r partition logdir; do
      wait_for 60 "LogDir $logdir's agent to create $name-$partition" \
        partition_ready "$(agent_url "$logdir")" "$name" "$partition"
    done <"$(placed "$topic")"
  done
  k get topics
  info "partitions per LogDir: $DELETE_TOPIC -> $(awk '{print $2}' "$(placed "$DELETE_TOPIC")" | sort | uniq -c | xargs)"
  info "                       $COMPACT_TOPIC -> $(awk '{print $2}' "$(placed "$COMPACT_TOPIC")" | sort | uniq -c | xargs)"
  if [[ $(awk '{print $2}' "$(placed "$DELETE_TOPIC")" | sort -u | wc -l | tr -d ' ') -lt 2 ]]; then
    die "Topic $DELETE_TOPIC selects both LogDirs (stratalog.io/pool=default) but all its partitions went to one"
  fi
}

# -- produce and consume -------------------------------------------------------------------------------
# consume URL TOPIC PARTITION OFFSET: every record from OFFSET to the high watermark,
# one "offset<TAB>key<TAB>value" line each.
consume() {
  local url=$1 topic=$2 partition=$3 offset=$4 page next hw
  while :; do
    page=$(api GET "$url/v1/topics/$topic/partitions/$partition/records?offset=$offset")
    jq -r '.records[] | "\(.offset)\t\(.key)\t\(.value)"' <<<"$page"
    next=$(jq -r '.nextOffset' <<<"$page")
    hw=$(jq -r '.highWatermark' <<<"$page")
    if ((next >= hw)); then
      break
    fi
    if ((next <= offset)) && [[ $(jq '.records | length' <<<"$page") == 0 ]]; then
      die "fetching $topic-$partition from offset $offset made no progress (high watermark $hw)"
    fi
    offset=$next
  done
}

produce_orders() {
  local name partition logdir url round body answer last expected got
  name=$(kafka_name "$DELETE_TOPIC")
  say "producing to $name: $ROUNDS requests of $PER_REQUEST records per partition, each to the agent that holds it"
  while read -r partition logdir; do
    url=$(agent_url "$logdir")
    expected="$WORK/expected-$name-$partition"
    : >"$expected"
    for ((round = 0; round < ROUNDS; round++)); do
      body=$(jq -cn --argjson r "$round" --argjson n "$PER_REQUEST" --argjson p "$partition" \
        '{records: [range($n) as $i | ($r * $n + $i) as $o
                     | {key: "customer-\($o % 7)", value: "order \($o) of partition \($p)"}]}')
      answer=$(api POST "$url/v1/topics/$name/partitions/$partition/records" "$body")
      jq -r --argjson r "$round" --argjson n "$PER_REQUEST" --argjson p "$partition" \
        -n 'range($n) as $i | ($r * $n + $i) as $o | "\($o)\tcustomer-\($o % 7)\torder \($o) of partition \($p)"' \
        >>"$expected"
    done
    last=$(jq -r '.lastOffset' <<<"$answer")
    if [[ $last != $((ROUNDS * PER_REQUEST - 1)) ]]; then
      die "$name-$partition: last offset $last after $((ROUNDS * PER_REQUEST)) records into an empty partition"
    fi
    # Consumed back at once: retention.ms is 30 s, and this is the check that every record came back as sent.
    got="$WORK/consumed-$name-$partition"
    consume "$url" "$name" "$partition" 0 >"$got"
    if ! diff -u "$expected" "$got" >"$WORK/diff" 2>&1; then
      cat "$WORK/diff"
      die "$name-$partition on $logdir: the records consumed differ from those produced (diff above)"
    fi
    info "$name-$partition on $logdir: $((last + 1)) records produced, the same $(wc -l <"$got" | tr -d ' ') consumed back"
  done <"$(placed "$DELETE_TOPIC")"
}

# The latest value of each key, as "key<TAB>value" lines sorted by key, from consume's output on stdin.
latest_per_key() {
  awk -F '\t' '{ latest[$2] = $3 } END { for (k in latest) print k "\t" latest[k] }' | sort
}

expected_latest() {
  local key
  for ((key = 0; key < KEYS; key++)); do
    printf 'profile-%d\tprofile %d version %d\n' "$key" "$key" "$((ROUNDS - 1))"
  done | sort
}

produce_profiles() {
  local name partition logdir url round body answer got
  name=$(kafka_name "$COMPACT_TOPIC")
  say "producing to $name: $ROUNDS versions of each of $KEYS keys per partition"
  expected_latest >"$WORK/expected-latest"
  while read -r partition logdir; do
    url=$(agent_url "$logdir")
    for ((round = 0; round < ROUNDS; round++)); do
      body=$(jq -cn --argjson r "$round" --argjson n "$KEYS" \
        '{records: [range($n) as $k | {key: "profile-\($k)", value: "profile \($k) version \($r)"}]}')
      answer=$(api POST "$url/v1/topics/$name/partitions/$partition/records" "$body")
    done
    got="$WORK/consumed-$name-$partition"
    consume "$url" "$name" "$partition" 0 >"$got"
    # The cleaner may already be at work (it is told to clean at 1% dirty): check what compaction
    # must preserve, each key's latest value, rather than every record.
    if ! latest_per_key <"$got" | diff -u "$WORK/expected-latest" - >"$WORK/diff" 2>&1; then
      cat "$WORK/diff"
      die "$name-$partition on $logdir: the latest value per key differs from the last one produced (diff above)"
    fi
    info "$name-$partition on $logdir: $((ROUNDS * KEYS)) records produced (log end offset $(($(jq -r '.lastOffset' <<<"$answer") + 1))), $(wc -l <"$got" | tr -d ' ') consumed back, latest value of every key correct"
  done <"$(placed "$COMPACT_TOPIC")"
}

# -- watching retention and compaction from the cluster ------------------------------------------
# Per partition, the figures the agents report under status.logDirs.
figures() {
  k get topic "$1" -o json | jq -r '.status.logDirs // {} | to_entries[] | .key as $d
    | (.value.partitions // {}) | to_entries[]
    | "\($d) partition \(.key): logStartOffset=\(.value.logStartOffset) logEndOffset=\(.value.logEndOffset) segments=\(.value.segments) sizeBytes=\(.value.sizeBytes)"
      + (if .value.dirtyRatio != null then " dirtyRatio=\(.value.dirtyRatio)" else "" end)
      + (if .value.lastRetentionTime != null then " lastRetentionTime=\(.value.lastRetentionTime)" else "" end)
      + (if .value.lastCleanTime != null then " lastCleanTime=\(.value.lastCleanTime)" else "" end)'
}

event_count() {  # TOPIC REASON
  k get events --field-selector "involvedObject.kind=Topic,involvedObject.name=$1,reason=$2" -o json \
    | jq '.items | length'
}

show_events() {  # TOPIC REASON
  k get events --field-selector "involvedObject.kind=Topic,involvedObject.name=$1,reason=$2" --sort-by .lastTimestamp \
    -o custom-columns='LAST SEEN:.lastTimestamp,REASON:.reason,FROM:.reportingInstance,MESSAGE:.message'
}

show_retention() {
  printf '\n    [%ss] kubectl get topics; status.logDirs of %s; SegmentsDeleted events: %s\n' \
    "$SECONDS" "$DELETE_TOPIC" "$(event_count "$DELETE_TOPIC" SegmentsDeleted)"
  k get topics | sed 's/^/    /'
  figures "$DELETE_TOPIC" | sed 's/^/      /'
}

retention_seen() {
  [[ $(event_count "$DELETE_TOPIC" SegmentsDeleted) -ge 1 ]] || return 1
  # every partition had records and all of them are past retention.ms: every logStartOffset moves
  k get topic "$DELETE_TOPIC" -o json | jq -e '.spec.partitions as $n
    | [.status.logDirs // {} | .[] | (.partitions // {}) | .[] | select(.logStartOffset > 0)] | length == $n' >/dev/null
}

# watch_until SECONDS WHAT CHECK SHOW: run CHECK until it succeeds, SHOW now and then, and die after SECONDS.
watch_until() {
  local timeout=$1 what=$2 check=$3 show=$4 deadline next=0
  deadline=$((SECONDS + timeout))
  until "$check"; do
    if ((SECONDS >= deadline)); then
      "$show" || true
      die "timed out after ${timeout}s waiting for $what"
    fi
    if ((SECONDS >= next)); then
      "$show"
      next=$((SECONDS + 15))
    fi
    sleep 3
  done
  "$show"
}

watch_retention() {
  say "waiting for retention on $DELETE_TOPIC (retention.ms 30000, checked every 5 s; timeout ${RETENTION_TIMEOUT}s)"
  watch_until "$RETENTION_TIMEOUT" \
    "retention on $DELETE_TOPIC: SegmentsDeleted events and logStartOffset > 0 on every partition in status.logDirs" \
    retention_seen show_retention
  info "retention seen: every partition's logStartOffset advanced; the agents' events:"
  show_events "$DELETE_TOPIC" SegmentsDeleted | sed 's/^/    /'
  local name partition logdir url earliest code
  name=$(kafka_name "$DELETE_TOPIC")
  info "the same through the API (ListOffsets earliest, and a fetch from offset 0):"
  while read -r partition logdir; do
    url=$(agent_url "$logdir")
    earliest=$(api GET "$url/v1/topics/$name/partitions/$partition/offsets?timestamp=-2" | jq -r '.offset')
    if ((earliest <= 0)); then
      die "$name-$partition on $logdir: the earliest offset is still $earliest after retention"
    fi
    code=$(curl -sS -o "$WORK/fetch0" -w '%{http_code}' "$url/v1/topics/$name/partitions/$partition/records?offset=0")
    info "$name-$partition on $logdir: earliest offset $earliest; offset 0 -> HTTP $code $(jq -r '.error_code // empty' "$WORK/fetch0" 2>/dev/null || true)"
    if [[ $code == 2?? ]]; then
      die "$name-$partition: offset 0 is still readable after retention deleted it"
    fi
  done <"$(placed "$DELETE_TOPIC")"
}

show_compaction() {
  printf '\n    [%ss] status.logDirs of %s; Cleaned events: %s\n' \
    "$SECONDS" "$COMPACT_TOPIC" "$(event_count "$COMPACT_TOPIC" Cleaned)"
  figures "$COMPACT_TOPIC" | sed 's/^/      /'
}

compaction_seen() {
  [[ $(event_count "$COMPACT_TOPIC" Cleaned) -ge 1 ]] || return 1
  # every partition cleaned at least once, and what is left dirty is (close to) nothing
  k get topic "$COMPACT_TOPIC" -o json | jq -e '.spec.partitions as $n
    | [.status.logDirs // {} | .[] | (.partitions // {}) | .[]
       | select(.lastCleanTime != null and .dirtyRatio != null and .dirtyRatio <= 0.1)] | length == $n' >/dev/null
}

watch_compaction() {
  say "waiting for compaction of $COMPACT_TOPIC (min.cleanable.dirty.ratio 0.01, cleaner backoff 5 s; timeout ${COMPACTION_TIMEOUT}s)"
  watch_until "$COMPACTION_TIMEOUT" \
    "compaction of $COMPACT_TOPIC: Cleaned events, and lastCleanTime with dirtyRatio <= 0.1 on every partition in status.logDirs" \
    compaction_seen show_compaction
  info "compaction seen; the agents' events (dirty ratio before -> after):"
  show_events "$COMPACT_TOPIC" Cleaned | sed 's/^/    /'
  local name partition logdir url got left
  name=$(kafka_name "$COMPACT_TOPIC")
  while read -r partition logdir; do
    url=$(agent_url "$logdir")
    got="$WORK/compacted-$name-$partition"
    consume "$url" "$name" "$partition" 0 >"$got"
    left=$(wc -l <"$got" | tr -d ' ')
    if ! latest_per_key <"$got" | diff -u "$WORK/expected-latest" - >"$WORK/diff" 2>&1; then
      cat "$WORK/diff"
      die "$name-$partition on $logdir: after compaction the latest value per key differs from the last one produced"
    fi
    if ((left >= ROUNDS * KEYS)); then
      die "$name-$partition on $logdir: $left records left of $((ROUNDS * KEYS)) after cleaning: nothing was compacted away"
    fi
    info "$name-$partition on $logdir: $left of $((ROUNDS * KEYS)) records left after compaction, latest value of every key intact"
  done <"$(placed "$COMPACT_TOPIC")"
}

# -- deleting the Topics -----------------------------------------------------------------------------
agent_topics() { api GET "$(agent_url "$1")/v1/topics" | jq -c '[.topics[] | "\(.name) (\(.partitionCount) partitions)"]'; }

agent_topic_names() { api GET "$(agent_url "$1")/v1/topics" | jq -r '.topics[].name'; }

# LOGDIR KAFKA-NAME: whether the agent holds partitions of that Kafka topic (false when it cannot be asked).
agent_has_topic() {
  local names
  names=$(agent_topic_names "$1") || return 1
  grep -qxF -- "$2" <<<"$names"
}

agent_lacks_topic() {
  local names
  names=$(agent_topic_names "$1") || return 1
  ! grep -qxF -- "$2" <<<"$names"
}

delete_topics() {
  local delete_name compact_name logdir partition
  delete_name=$(kafka_name "$DELETE_TOPIC")
  compact_name=$(kafka_name "$COMPACT_TOPIC")
  say "deleting the Topics: $DELETE_TOPIC (deletionPolicy Delete) and $COMPACT_TOPIC (deletionPolicy Retain)"
  for logdir in $LOGDIRS; do
    info "before: $logdir holds $(agent_topics "$logdir")"
  done
  # The agents' finalizers hold each Topic until its data is handled on every LogDir.
  k delete topic "$DELETE_TOPIC" "$COMPACT_TOPIC" --wait --timeout 180s
  k get topics
  info "what the agents did:"
  show_events "$DELETE_TOPIC" PartitionsDeleted | sed 's/^/    /'
  show_events "$COMPACT_TOPIC" DataRetained | sed 's/^/    /'
  [[ $(event_count "$DELETE_TOPIC" PartitionsDeleted) -ge 1 ]] || die "no PartitionsDeleted event for Topic $DELETE_TOPIC"
  [[ $(event_count "$COMPACT_TOPIC" DataRetained) -ge 1 ]] || die "no DataRetained event for Topic $COMPACT_TOPIC"
  for logdir in $LOGDIRS; do
    wait_for 60 "LogDir $logdir to drop the data of $delete_name" agent_lacks_topic "$logdir" "$delete_name"
    agent_has_topic "$logdir" "$compact_name" || die "LogDir $logdir no longer holds $compact_name, whose Topic said Retain"
    info "after: $logdir holds $(agent_topics "$logdir")"
    info "  partition directories on its volumes (kubectl exec $logdir-0 -- ls -d /var/lib/stratalog/*/*/):"
    k exec "$logdir-0" -c agent -- sh -c 'ls -d /var/lib/stratalog/*/*/' 2>&1 | sed 's/^/      /' || true
  done
  # Retained data is still served: the latest profiles are readable without any Topic object.
  read -r partition logdir <"$(placed "$COMPACT_TOPIC")"
  info "$compact_name-$partition is still readable on $logdir: $(consume "$(agent_url "$logdir")" "$compact_name" "$partition" 0 | wc -l | tr -d ' ') records"
}

# -- diagnostics and cleanup -----------------------------------------------------------------------------
diagnostics() {
  say "diagnostics (the run failed)"
  k get logdirs,topics -o wide
  k get pods,persistentvolumeclaims,statefulsets,services -o wide
  k get events --sort-by=.lastTimestamp | tail -n 40
  info "operator log (last 80 lines):"
  k logs "$OPERATOR" --tail 80
  info "agent pods:"
  k describe pods -l app.kubernetes.io/component=agent | tail -n 60
  local logdir
  for logdir in $LOGDIRS; do
    info "agent of $logdir, log (last 80 lines; and of the previous container, if it restarted):"
    k logs "statefulset/$logdir" --tail 80
    k logs "statefulset/$logdir" --tail 40 --previous 2>/dev/null
  done
}

cleanup() {
  local status=$?
  set +e
  stop_port_forwards
  if ((status != 0 && CREATED == 1)); then
    diagnostics
  fi
  if ((CREATED == 1)); then
    if [[ $KEEP == 1 ]]; then
      say "KEEP=1: cluster $CLUSTER kept: kubectl --context $CONTEXT -n $NAMESPACE get stratalog; delete it with: kind delete cluster --name $CLUSTER"
    else
      say "deleting kind cluster $CLUSTER (KEEP=1 keeps it)"
      kind delete cluster --name "$CLUSTER"
    fi
  fi
  if [[ -n $WORK ]]; then
    rm -rf "$WORK"
  fi
  if ((status == 0)); then
    say "PASS: the stratalog story ran end to end on kind"
  else
    printf '\nFAIL (exit status %d)\n' "$status" >&2
  fi
  exit "$status"
}

main() {
  check_tools
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/stratalog-e2e.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  create_cluster
  build_image
  install_chart
  create_logdirs
  local logdir
  say "port-forwarding to the agents' Services (port 8092, named http)"
  for logdir in $LOGDIRS; do
    port_forward "$logdir"
  done
  create_topics
  produce_orders
  produce_profiles
  watch_retention
  watch_compaction
  delete_topics
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main
fi
