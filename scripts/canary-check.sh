#!/usr/bin/env bash
# The conformance suite against one provider, run so that it also proves that
# no secret value leaks (issue 18): the suite's secret carries a canary, the
# driver logs at trace level in JSON and exports its spans over OTLP, and
# afterwards every byte it produced is searched for the canary.
#
#   scripts/canary-check.sh BIN_DIR CLOUD [conformance flags...]
#   e.g. scripts/canary-check.sh target/debug CLOUD --repeat 5 --junit target/conformance-CLOUD.xml
#
# 1. scripts/canary-check.py selftest: the search finds a canary in each
#    encoding (so this check can fail) and nothing in a clean file.
# 2. canary-check.py prepare: providers/CLOUD/examples/secret.json, and the
#    shareImage owner secret of its conformance.json, with a fresh random
#    canary in every secret value the fake cloud accepts changed, in userData
#    and in extra keys (rules in canary-check.py's header).
# 3. scripts/otlp-capture.py: a local OTLP/gRPC collector that records every
#    byte it receives (the driver's exporter speaks gRPC only).
# 4. machine-driver-conformance --spawn <wrapper> --spawn-fake <the fake named
#    in conformance.json>, all scenarios (every RPC, the error paths through
#    fault injection, restarts); the wrapper starts the driver with
#    MACHINE_DRIVER_LOG=trace, MACHINE_DRIVER_LOG_FORMAT=json,
#    MACHINE_DRIVER_TRACE_FILTER=trace and OTEL_EXPORTER_OTLP_ENDPOINT on the
#    collector, and copies its stdout and stderr into the capture directory
#    (the suite still gets them for its log tails).
# 5. canary-check.py scan over the driver's stdout and stderr, the OTLP
#    capture (the reassembled export messages and every other frame's
#    payload, i.e. all bytes received but HTTP/2 framing), the suite's output (which
#    prints the driver's error messages of failed checks) and its JUnit file:
#    plain, hex, percent, decimal-list and base64 (3 offsets, both alphabets,
#    wrapped or not); it also fails when the log has no TRACE line or the
#    collector received no span, i.e. when nothing was checked.
#
# CANARY_LOG replaces the driver's log filter (default: trace).
# Fails when the suite fails or anything is found; the capture is kept in
# $CANARY_OUT/CLOUD (default BIN_DIR/../canary/CLOUD) on failure, and removed
# on success unless CANARY_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir="$(cd "$1" && pwd)"
cloud="$2"
shift 2
examples="providers/$cloud/examples"
fake="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fake"])' "$examples/conformance.json")"
out="${CANARY_OUT:-$bin_dir/../canary}/$cloud"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

python3 scripts/canary-check.py selftest
python3 scripts/canary-check.py prepare --examples "$examples" --fake-src "tests/$fake" --out "$out"

python3 scripts/otlp-capture.py "$out/otlp" "$out/otlp.port" &
collector=$!
trap 'kill "$collector" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s "$out/otlp.port" ]] && break; sleep 0.05; done
[[ -s "$out/otlp.port" ]] || { echo "canary-check: the OTLP collector did not start" >&2; exit 1; }

# exec keeps the driver's pid, so the suite's SIGTERM and SIGKILL reach it.
cat >"$out/driver.sh" <<EOF
#!/usr/bin/env bash
export MACHINE_DRIVER_LOG='${CANARY_LOG:-trace}' MACHINE_DRIVER_LOG_FORMAT=json MACHINE_DRIVER_TRACE_FILTER=trace
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$out/otlp.port")
export OTEL_BSP_SCHEDULE_DELAY=500 OTEL_BSP_MAX_QUEUE_SIZE=65536
exec "$bin_dir/machine-driver-$cloud" "\$@" \\
    > >(tee -a "$out/driver.stdout") 2> >(tee -a "$out/driver.stderr" >&2)
EOF
chmod +x "$out/driver.sh"

# The JUnit report holds the messages of failed checks: searched too.
junit=()
args=("$@")
for i in "${!args[@]}"; do
    if [[ "${args[$i]}" == --junit && -n "${args[$((i + 1))]:-}" ]]; then
        junit+=("${args[$((i + 1))]}")
    fi
done

started=$SECONDS
status=0
"$bin_dir/machine-driver-conformance" \
    --spawn "$out/driver.sh" \
    --spawn-fake "$bin_dir/$fake" \
    --machine-class "$examples/machine-class.json" \
    --secret "$out/secret.json" \
    --config "$out/conformance.json" \
    "$@" 2>&1 | tee "$out/conformance.out" || status=$?
echo "canary-check: conformance run took $((SECONDS - started)) s"
sleep 0.5 # the tee processes of the last driver finish writing
kill "$collector"
wait "$collector" || true
trap - EXIT

python3 scripts/canary-check.py scan --needles "$out/needles.json" \
    --trace-log "$out/driver.stderr" --otlp "$out/otlp.json" \
    "$out/driver.stdout" "$out/driver.stderr" "$out/otlp.messages" "$out/otlp.frames" \
    "$out/conformance.out" "${junit[@]}" || status=1

if [[ $status -ne 0 ]]; then
    echo "canary-check: $cloud FAILED; capture kept in $out" >&2
    exit "$status"
fi
[[ "${CANARY_KEEP:-}" == 1 ]] || rm -rf "$out"
