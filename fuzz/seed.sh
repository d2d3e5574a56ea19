#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with seeds made from the repository's own fixtures:
#
#   package        every package of datasets/login-validation, in the target's
#                  "path\n bytes" segments separated by 0x1e
#   archive        those packages as .tar, .tar.gz and .tar.zst (GNU and pax headers)
#   importers      the real logs of tests/fixtures/real and datasets/agent-logs, each with
#                  the selector byte of its case in fuzz_targets/importers.rs in front
#                  (found by format and file name in `epistore formats --format json`)
#                  (case | 0x20: with --model, so runs get as far as their package; the
#                  detection seeds also without); logs above
#                  the target's max_len (SEED_MAX_BYTES) are cut to their first lines
#                  (JSON Lines, Markdown, logs) or shrunk (JSON documents: arrays and
#                  strings shortened until they fit)
#   store_records  record and trace bytes of a scratch store holding
#                  datasets/login-validation, written by the store_records binary itself
#                  (EPISTORE_FUZZ_SEED_DIR); skipped, with a message, until it is built
#
# Seeds are named seed-*; existing seeds are replaced, whatever libFuzzer added to the
# corpus is kept. Nothing here is committed: the corpus is made at run time.
#
# Usage: fuzz/seed.sh [fuzz binary dir]   (default: the release build of cargo fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
corpus=fuzz/corpus
max_bytes=${SEED_MAX_BYTES:-65536}
triple=$(rustc -vV | sed -n 's/^host: //p')
bin_dir=${1:-fuzz/target/$triple/release}

for target in package archive importers store_records; do
    mkdir -p "$corpus/$target"
    find "$corpus/$target" -maxdepth 1 -name 'seed-*' -delete
done

# --- package ------------------------------------------------------------------------
for pkg in datasets/login-validation/*/; do
    name=$(basename "$pkg")
    out="$corpus/package/seed-$name"
    : >"$out"
    (cd "$pkg" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) | while IFS= read -r rel; do
        printf '%s\n' "$rel" >>"$out"
        cat "$pkg/$rel" >>"$out"
        printf '\x1e' >>"$out"
    done
done
# The smallest package: manifest and outcome only.
h0=datasets/login-validation/H0
{ printf 'manifest.json\n'; cat "$h0/manifest.json"; printf '\x1eoutcome.json\n'; cat "$h0/outcome.json"; } \
    >"$corpus/package/seed-minimal"

# --- archive ------------------------------------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar_opts=(--blocking-factor=1 --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name)
for pkg in H0 H3; do
    tar "${tar_opts[@]}" -C "datasets/login-validation/$pkg" -cf "$tmp/$pkg.tar" .
    tar "${tar_opts[@]}" --format=pax -C datasets/login-validation -cf "$tmp/$pkg.pax.tar" "$pkg"
done
tar "${tar_opts[@]}" -C datasets -cf "$tmp/all.tar" login-validation
for t in "$tmp"/*.tar; do
    base=$(basename "$t" .tar)
    cp "$t" "$corpus/archive/seed-$base.tar"
    gzip -9 -n -c "$t" >"$corpus/archive/seed-$base.tar.gz"
    zstd -q -19 -c "$t" >"$corpus/archive/seed-$base.tar.zst"
done

# --- importers ----------------------------------------------------------------------
# The cases of fuzz_targets/importers.rs: 0 and 1 detect; then every file name of every
# importer of the registry, in the order `epistore formats` lists them.
# The dev binary the tests built, else a build of it (outside the fuzz build's
# RUSTC_BOOTSTRAP, which would make cargo compile everything again).
if [ -x target/debug/epistore ]; then
    formats_json=$(target/debug/epistore formats --format json)
else
    formats_json=$(env -u RUSTC_BOOTSTRAP cargo run -q --locked --bin epistore -- formats --format json)
fi
# case <format> <file name>: that case's index.
case_of() {
    python3 - "$1" "$2" "$formats_json" <<'PY'
import json, sys
fmt, name, table = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
cases = [(None, "log.jsonl"), (None, "log.json")]
for row in table:
    cases += [(row["format"], n) for n in row["file_names"]]
print(cases.index((fmt, name)))
PY
}
# seed <case> <file> [name]: the selector byte (the case's bits 0-3 and 4-5 as bits
# 0-3 and 6-7, --model), then the file (cut or shrunk to fit). SEED_SELECTOR_BITS: other
# bits to set (0 for none).
seed() {
    local case=$1 file=$2 name=${3:-$(basename "$2")}
    local bits=${SEED_SELECTOR_BITS:-32}
    local out="$corpus/importers/seed-$case-$bits-$name"
    python3 - "$(((case & 15) | ((case >> 4) << 6) | bits))" "$file" "$out" "$max_bytes" <<'PY'
import json, sys
selector, path, out, limit = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]) - 1
data = open(path, "rb").read()

def shrink(value, items, chars):
    if isinstance(value, list):
        return [shrink(v, items, chars) for v in value[:items]]
    if isinstance(value, dict):
        return {k: shrink(v, items, chars) for k, v in value.items()}
    if isinstance(value, str):
        return value[:chars]
    return value

def fit(text, budget, pretty):
    """A JSON text shrunk until it takes at most budget bytes, or None."""
    value = json.loads(text)
    items, chars = 64, 4096
    while items >= 1 and chars >= 16:
        out = json.dumps(shrink(value, items, chars), indent=2 if pretty else None, ensure_ascii=False).encode()
        if len(out) <= budget:
            return out
        items, chars = max(items // 2, 1) if items > 1 else 0, chars // 2
    return None

if len(data) > limit:
    try:
        data = fit(data, limit, pretty=b"\n" in data.strip()[:200]) or data[:limit]
    except ValueError:
        # Lines: as many whole lines as fit; the first line that does not is shrunk
        # (when it is JSON) into what is left.
        kept, size = [], 0
        for line in data.splitlines(keepends=True):
            if size + len(line) > limit:
                try:
                    small = fit(line, limit - size - 1, pretty=False)
                    if small is not None:
                        kept.append(small + b"\n")
                except ValueError:
                    pass
                break
            kept.append(line)
            size += len(line)
        data = b"".join(kept)
open(out, "wb").write(bytes([selector]) + data)
PY
}
real=tests/fixtures/real
for f in "$real"/inspect/*.eval "$real"/inspect-zstd/*.eval datasets/agent-logs/inspect/*.eval; do seed "$(case_of inspect log.eval)" "$f"; done
for f in "$real"/inspect/*.json; do seed "$(case_of inspect log.json)" "$f"; done
while IFS= read -r f; do seed "$(case_of claude-code session.jsonl)" "$f"; done < <(find "$real/claude-code" datasets/agent-logs/claude-code -name '*.jsonl' | LC_ALL=C sort)
for f in "$real"/codex/generated/*.jsonl datasets/agent-logs/codex/*.jsonl; do seed "$(case_of codex rollout.jsonl)" "$f"; done
for f in "$real"/swe-agent/*.traj datasets/agent-logs/swe-agent/*.traj; do seed "$(case_of swe-agent run.traj)" "$f"; done
seed "$(case_of swe-agent all_preds.jsonl)" "$real/swe-agent/pydicom.all_preds.jsonl"
for f in "$real"/mini-swe-agent/*.traj.json "$real"/mini-swe-agent/generated/*.traj.json datasets/agent-logs/mini-swe-agent/*.traj.json; do
    seed "$(case_of mini-swe-agent run.traj.json)" "$f"
done
seed "$(case_of mini-swe-agent preds.json)" "$real/mini-swe-agent/results.json"
seed "$(case_of openhands output.jsonl)" "$real/openhands/multi_swe_bench_output.jsonl"
for f in "$real"/openhands/*.json; do seed "$(case_of openhands output.json)" "$f"; done
seed "$(case_of aider .aider.chat.history.md)" "$real/aider/chat-history.first-sessions.md"
for f in "$real"/swebench-eval/*/*/*.log; do seed "$(case_of swe-bench run_instance.log)" "$f" "$(basename "$(dirname "$f")")-$(basename "$f")"; done
for f in "$real"/swe-agent/*.args.yaml datasets/agent-logs/swe-agent/*.args.yaml; do seed "$(case_of swe-agent args.yaml)" "$f"; done
# Detection (no --format): one log of each shape, with and without --model.
for bits in 0 32; do
    export SEED_SELECTOR_BITS=$bits
    seed 0 "$real/claude-code/short.jsonl"
    seed 0 "$real/codex/generated/codex-exec--json.stdout.jsonl"
    seed 0 "$real/openhands/multi_swe_bench_output.jsonl"
    seed 1 "$real/openhands/trajs_basic_interactions.json"
    seed 1 "$real/mini-swe-agent/local.traj.json"
    seed 1 "$real/inspect/2025-05-12T20-28-26-04-00_security-guide.json"
done
unset SEED_SELECTOR_BITS
# ATIF trajectories and Gemini CLI sessions.
for f in "$real"/atif/*/*.json; do seed "$(case_of atif trajectory.json)" "$f" "$(basename "$(dirname "$f")")-$(basename "$f")"; done
for f in "$real"/gemini-cli/*/*.jsonl tests/fixtures/constructed/gemini-cli/*/session-*; do
    seed "$(case_of gemini-cli session-2026-01-01T10-00-abcdef12.jsonl)" "$f"
done
for f in "$real"/pi/*/session.jsonl tests/fixtures/constructed/pi/*/session.jsonl; do
    seed "$(case_of pi 2026-01-01T10-00-00-000Z_session.jsonl)" "$f" "pi-$(basename "$(dirname "$f")").jsonl"
done
for f in "$real"/copilot-cli/*/events.jsonl tests/fixtures/constructed/copilot-cli/*/events.jsonl; do
    seed "$(case_of copilot-cli events.jsonl)" "$f" "copilot-$(basename "$(dirname "$f")").jsonl"
done
for f in "$real"/trajectories/*/*.jsonl; do
    seed "$(case_of trajectories trajectories.jsonl)" "$f" "$(basename "$(dirname "$f")")-$(basename "$f")"
done
seed "$(case_of opencode opencode-export.json)" tests/fixtures/constructed/opencode/session-export.json
while IFS= read -r f; do seed "$(case_of terminal-bench results.json)" "$f" "tb-$(basename "$(dirname "$f")").json"; done < <(find tests/fixtures/constructed/terminal-bench -name results.json | LC_ALL=C sort)
seed "$(case_of goose 20250301_120000.jsonl)" tests/fixtures/constructed/goose/sessions/20250320_153000.jsonl
seed "$(case_of goose goose-export.json)" tests/fixtures/constructed/goose/session-export.json
for f in "$real"/cline/*/tasks/*/api_conversation_history.json tests/fixtures/constructed/cline/*/tasks/*/api_conversation_history.json; do
    seed "$(case_of cline api_conversation_history.json)" "$f" "cline-$(basename "$(dirname "$f")").json"
done
# --redact (and --model) on logs with commands and outputs in them.
SEED_SELECTOR_BITS=48 seed "$(case_of claude-code session.jsonl)" "$real/claude-code/tool_heavy.jsonl"
SEED_SELECTOR_BITS=48 seed "$(case_of codex rollout.jsonl)" "$real/codex/generated/codex-exec--json.stdout.jsonl"
# SWE-bench reports (none is kept among the fixtures): the per-instance report.json
# and the summary, in the harness's shapes.
cat >"$tmp/report.json" <<'JSON'
{
  "astropy__astropy-12907": {
    "patch_is_None": false,
    "patch_exists": true,
    "patch_successfully_applied": true,
    "resolved": true,
    "tests_status": {
      "FAIL_TO_PASS": {"success": ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"], "failure": []},
      "PASS_TO_PASS": {"success": ["astropy/modeling/tests/test_separable.py::test_coord_matrix"], "failure": []}
    }
  }
}
JSON
seed "$(case_of swe-bench report.json)" "$tmp/report.json"
cat >"$tmp/summary.json" <<'JSON'
{"total_instances": 3, "submitted_instances": 3, "completed_instances": 3, "resolved_instances": 1, "unresolved_instances": 1, "empty_patch_instances": 1, "resolved_ids": ["astropy__astropy-12907"], "unresolved_ids": ["django__django-11265"], "empty_patch_ids": ["astropy__astropy-13033"], "schema_version": 2}
JSON
seed "$(case_of swe-bench report.json)" "$tmp/summary.json"

# --- store_records --------------------------------------------------------------------
if [ -x "$bin_dir/store_records" ]; then
    EPISTORE_FUZZ_SEED_DIR="$root/$corpus/store_records/seeds.tmp" "$bin_dir/store_records"
    for f in "$corpus/store_records/seeds.tmp"/*; do mv "$f" "$corpus/store_records/seed-$(basename "$f")"; done
    rmdir "$corpus/store_records/seeds.tmp"
else
    echo "seed.sh: $bin_dir/store_records is not built yet: no store_records seeds (build, then run again)" >&2
fi

for target in package archive importers store_records; do
    printf 'seed.sh: %-13s %3d seeds (corpus with what libFuzzer added: %s)\n' "$target" \
        "$(find "$corpus/$target" -maxdepth 1 -name 'seed-*' | wc -l)" \
        "$(du -sh --apparent-size "$corpus/$target" | cut -f1)"
done
