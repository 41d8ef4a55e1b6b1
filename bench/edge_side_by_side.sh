#!/usr/bin/env bash
# Side by side, 3 alternating rounds: the node (edge-only, cache off) and llama-server -np 8 at the
# same thread count T; 8 clients x 64 greedy 64-token streams and 1 client x 12 per round.
# Usage: LLAMA_SERVER=/path/to/llama-server bash bench/edge_side_by_side.sh [T]
set -u
: "${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary (docs/edge.md says how to build one)}"
T=${1:-2}
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT=${OUT:-artifacts/edge-side-by-side}/t$T; rm -rf $OUT; mkdir -p $OUT
MODEL=$(.venv/bin/python -c "from models import *; print(resolve(EDGE_DEFAULT, default_models_dir()).path)")
EDGEROUTE_CACHE__ENABLED=false EDGEROUTE_EDGE__N_THREADS=$T .venv/bin/python -c "from edgeroute.cli import main; main()" serve --port 18120 --no-local-member --data-dir $OUT/node --log-level warning > $OUT/node.log 2>&1 &
NODE=$!
"$LLAMA_SERVER" -m $MODEL -np 8 -t $T -c 16384 --port 18130 --host 127.0.0.1 > $OUT/ls.log 2>&1 &
LS=$!
for i in $(seq 60); do curl -sf localhost:18120/healthz >/dev/null && curl -sf localhost:18130/health >/dev/null && break; sleep 1; done
run() { .venv/bin/python -c "from edgeroute.cli import main; main()" bench load "$@" ; }
for round in 1 2 3; do
 for tgt in 18120 18130; do
  for c in 1 8; do
   run --target http://127.0.0.1:$tgt --scenario streams --clients $c --requests $(( c==1 ? 12 : 64 )) --max-tokens 64 --no-cache --json $OUT/streams_${tgt}_c${c}_r$round.json > $OUT/streams_${tgt}_c${c}_r$round.txt 2>&1
  done
 done
done
kill $NODE $LS; wait
for f in $OUT/streams_*.txt; do echo "$(basename $f .txt): $(head -1 $f)"; done
